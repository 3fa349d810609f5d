"""The traced plan and the data-mask kernel entry: same words as the static plan, tile kinds equal to
the host classification, output equal to float64 under the same mask, one compile per shape."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float64_reference import masked_attention, relative_error

from svgtpu.compiler.compile import compile_fn, libtpu_available, topology_device
from svgtpu.kernels import KernelConfig, tile_plan
from svgtpu.kernels.dynamic import block_table_attention, chunk_rows, plan_facts
from svgtpu.kernels.dynamic_plan import block_labels, block_table_kinds, plan_length, traced_plan
from svgtpu.kernels.plan import noop_word
from svgtpu.kernels.common import compiling_for
from svgtpu.masks.families import BlockMask
from svgtpu.masks.core import ArrayMask, align
from svgtpu.masks.tiles import EMPTY, classify
from svgtpu.geometry import Tile

TOLERANCE = {"float32": 2e-5, "bfloat16": 3e-2}


def random_tile_masks(rng, heads, L, block_q, block=64):
    """Per-head masks with ``block`` tiles on, off and holed, and one q tile row (of ``block_q``) with no
    key at all."""
    n = -(-L // block)
    masks = []
    for _ in range(heads):
        tiles = np.kron(rng.random((n, n)) < 0.45, np.ones((block, block), bool))[:L, :L]
        holes = np.kron(rng.random((n, n)) < 0.3, np.ones((block, block), bool))[:L, :L]
        allowed = tiles & (~holes | (rng.random((L, L)) < 0.6))
        row = rng.integers(0, -(-L // block_q))
        allowed[row * block_q:(row + 1) * block_q] = False
        masks.append(allowed)
    return np.stack(masks)


def random_edges(rng, heads, blocks, L):
    """Non-decreasing edges 0 .. L, some blocks empty."""
    cuts = np.sort(rng.integers(0, L + 1, size=(heads, blocks - 1)), -1)
    return np.concatenate([np.zeros((heads, 1), int), cuts, np.full((heads, 1), L)], -1).astype(np.int32)


@pytest.mark.parametrize("L,block_q,block_kv", [(300, 128, 128), (520, 64, 256)])
def test_traced_plan_has_the_static_plans_words(L, block_q, block_kv):
    seed = 3 + L
    print("seed", seed)
    rng = np.random.default_rng(seed)
    heads = 3
    masks = random_tile_masks(rng, heads, L, block_q)
    static = tile_plan(tuple(ArrayMask(m) for m in masks), L, block_q, block_kv)
    kinds = np.stack([classify(ArrayMask(m), Tile(block_q, block_kv)).kinds for m in masks])
    assert (kinds == EMPTY).all(-1).any(), "the case needs a q row without any tile"
    worst = plan_length(*kinds.shape[1:])
    words, needed = jax.jit(traced_plan, static_argnames=("L", "block_q", "block_kv", "steps"))(
        jnp.asarray(kinds), L=L, block_q=block_q, block_kv=block_kv, steps=worst)
    words = np.asarray(words).reshape(heads, worst)
    want = static.chunks(None)[0].words.reshape(heads, static.num_steps)
    np.testing.assert_array_equal(np.asarray(needed), static.real_steps)
    np.testing.assert_array_equal(words[:, :static.num_steps], want)  # same words, same no-op padding
    for h in range(heads):
        assert (words[h, static.num_steps:] == noop_word(want[h, static.real_steps[h] - 1])).all()


@pytest.mark.parametrize("align_mode", [None, "snap", "cover", "inner"])
def test_block_table_kinds_equal_the_host_classification_and_alignment(align_mode):
    seed = 17
    print("seed", seed)
    rng = np.random.default_rng(seed)
    heads, L, bq, bkv = 4, 700, 136, 256  # neither tile divides L
    qe, ke = random_edges(rng, heads, 9, L), random_edges(rng, heads, 13, L)
    table = rng.random((heads, 9, 13)) < 0.35
    kinds, kept = block_table_kinds(jnp.asarray(qe), jnp.asarray(ke), jnp.asarray(table), L=L, block_q=bq,
                                    block_kv=bkv, align=align_mode)
    for h in range(heads):
        mask = BlockMask(L, qe[h], ke[h], table[h])
        if align_mode:
            mask = align(mask, Tile(bq, bkv), align_mode)
        np.testing.assert_array_equal(np.asarray(kinds[h]), classify(mask, Tile(bq, bkv)).kinds)
        assert abs(float(kept[h]) - mask.to_array().mean()) < 1e-6  # brute force over the L x L pairs
        labels = np.asarray(block_labels(jnp.asarray(qe[h:h + 1]), L + 5))[0]
        assert (labels[:L] == np.searchsorted(qe[h], np.arange(L), side="right") - 1).all()
        assert (labels[L:] == 9).all()  # padding: no block


@pytest.mark.parametrize("dtype,align_mode,fast_path,layout", [
    ("float32", None, True, "query-major"), ("bfloat16", None, False, "query-major"),
    ("float32", "snap", False, "query-major"), ("bfloat16", "snap", True, "query-major"),
    ("float32", None, True, "key-major"), ("bfloat16", "snap", False, "key-major")])
def test_block_table_attention_equals_float64_under_the_same_mask(dtype, align_mode, fast_path, layout):
    seed = 29
    print("seed", seed, dtype, align_mode, fast_path, layout)
    rng = np.random.default_rng(seed)
    heads, L = 3, 300
    q, k, v = (jnp.asarray(rng.normal(size=(heads, L, 64)), dtype) for _ in range(3))
    qe, ke = random_edges(rng, heads, 6, L), random_edges(rng, heads, 10, L)
    table = rng.random((heads, 6, 10)) < 0.4
    table[0, 2] = False  # a query block with no key: its rows give zeros
    out, info = block_table_attention(q, k, v, jnp.asarray(qe), jnp.asarray(ke), jnp.asarray(table),
                                      align=align_mode, config=KernelConfig(128, 128, fast_path=fast_path, layout=layout))
    masks = [BlockMask(L, qe[h], ke[h], table[h]) for h in range(heads)]
    if align_mode:
        masks = [align(m, Tile(128, 128), align_mode) for m in masks]
    allowed = np.stack([m.to_array() for m in masks])
    assert out.dtype == q.dtype and not bool(info.overflow.any())
    assert relative_error(out, masked_attention(q, k, v, allowed)) < TOLERANCE[dtype]


def test_one_compile_for_two_masks_of_one_shape_and_a_bound_that_overflows_gives_nan():
    seed = 41
    print("seed", seed)
    rng = np.random.default_rng(seed)
    heads, L = 2, 300
    q, k, v = (jnp.asarray(rng.normal(size=(heads, L, 64)), jnp.float32) for _ in range(3))
    qe = jnp.asarray(np.tile(np.arange(0, 301, 60), (heads, 1)), jnp.int32)  # 5 blocks of 60 rows
    ke = jnp.asarray(np.tile(np.linspace(0, 300, 8).astype(int), (heads, 1)), jnp.int32)  # 7 of ~43 keys
    traces = []

    @jax.jit
    def attend(q, k, v, table):
        traces.append(1)
        return block_table_attention(q, k, v, qe, ke, table, block_q=128, block_kv=128, max_steps=6)

    outs = []
    for pair in ((0, 0), (3, 5)):
        table = np.zeros((heads, 5, 7), bool)
        table[0][pair] = True  # head 0: one block pair, at most 2 x 2 tiles + 1 empty row: within 6 steps
        table[1] = True        # head 1: every tile, 9 steps: over the bound
        out, info = attend(q, k, v, jnp.asarray(table))
        outs.append(out)
        assert list(np.asarray(info.overflow)) == [False, True] and int(info.needed_steps[1]) == 9
        assert bool(jnp.isnan(out[1]).all())
        mask = BlockMask(L, np.asarray(qe[0]), np.asarray(ke[0]), table[0]).to_array()
        assert relative_error(out[0], masked_attention(q[0], k[0], v[0], mask)) < 2e-5
    assert len(traces) == 1 and not np.array_equal(np.asarray(outs[0][0]), np.asarray(outs[1][0]))


def test_plans_longer_than_smem_split_into_row_chunks():
    # 3 x 3 tiles, 9 steps per head at most, a 1-KiB budget (two 128-word SMEM tiles): 2 heads fit all
    # 3 rows (18 words); 40 heads fit 2 rows (240 words), not 3 (360)
    assert chunk_rows(2, 3, 3, 9, 1024) == 3 and chunk_rows(40, 3, 3, 9, 1024) == 2
    assert chunk_rows(40, 3, 3, 4, 1024) == 3  # a bound of 4 steps: 160 words whatever the rows
    with pytest.raises(ValueError, match="block_kv"):
        chunk_rows(400, 3, 3, 9, 1024)


def test_bad_bound_tiles_and_table_name_the_parameter():
    x = jnp.zeros((2, 300, 64), jnp.float32)
    qe, ke = jnp.asarray(random_edges(np.random.default_rng(0), 2, 4, 300)), jnp.zeros((2, 6), jnp.int32)
    table = jnp.zeros((2, 4, 5), bool)
    for bound in (2, 10, 3.5, True):  # 3 x 3 tiles: 3 .. 9 steps
        with pytest.raises(ValueError, match=r"^max_steps must be .* from 3 .* to 9"):
            block_table_attention(x, x, x, qe, ke, table, block_q=128, block_kv=128, max_steps=bound)
    with pytest.raises(ValueError, match="block_kv must be a positive multiple of 128"):
        block_table_attention(x, x, x, qe, ke, table, block_q=128, block_kv=100)
    with pytest.raises(ValueError, match=r"^table must be a bool \[heads, q blocks, k blocks\]"):
        block_table_attention(x, x, x, qe, ke, table[:, :2], block_q=128, block_kv=128)
    with pytest.raises(ValueError, match="^align must be None or one of snap, cover, inner"):
        block_table_attention(x, x, x, qe, ke, table, block_q=128, block_kv=128, align="round")


@pytest.mark.skipif(not libtpu_available(), reason='libtpu not installed (pip install "jax[tpu]==0.10.2")')
def test_traced_plan_kernel_compiles_for_v6e():
    """The real TPU compiler accepts the data-mask kernel (labels, table, in-kernel mask matmuls): bf16,
    q blocks a multiple of 8 but not of 16, odd cluster counts; plan facts match what was lowered."""
    heads, L, cq, ck = 3, 300, 7, 11
    dev = jax.sharding.SingleDeviceSharding(topology_device("v6e"))
    spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, jnp.dtype(dtype), sharding=dev)  # noqa: E731
    x = spec((heads, L, 128), "bfloat16")
    config = KernelConfig(24, 128)
    with compiling_for("v6e"):
        result = compile_fn(lambda q, k, v, qe, ke, t: block_table_attention(q, k, v, qe, ke, t, config=config)[0],
                            (x, x, x, spec((heads, cq + 1), "int32"), spec((heads, ck + 1), "int32"),
                             spec((heads, cq, ck), "bool")))
    assert result["compiled"], result["reason"]
    facts = plan_facts(heads, L, config)
    assert facts["steps_per_head"] == 13 * 3 and facts["chunks"] == 1
