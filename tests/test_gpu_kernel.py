"""The Pallas GPU (Triton) kernel under Pallas' interpreter against the float64 reference, its row
plan against brute force, its Triton lowering for CUDA (done on this CPU), and its input checks."""

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_kernels import (GEOM_SPATIAL, TOLERANCE, numpy_attention, per_head_masks, random_qkv, relative_error,
                          tile_pattern_mask)

from svgtpu.kernels import KernelConfig, mask_array, tile_plan
from svgtpu.kernels.api import block_sparse
from svgtpu.kernels.gpu import gpu_block_sparse_attention, row_plan
from svgtpu.masks.core import ArrayMask, BandSinkMask, DenseMask, align, svg_mask
from svgtpu.masks.tiles import FULL, classify
from svgtpu.geometry import Tile

# (id, mask builder L -> mask, heads, L, d, dtype, block_q, block_kv, gpu_block_q, gpu_block_kv, fast_path)
CASES = [
    ("dense", lambda L: DenseMask(L), 1, 300, 64, "float32", 128, 256, None, 128, True),
    ("svg-bf16", lambda L: svg_mask(GEOM_SPATIAL, 1.0), 2, 360, 128, "bfloat16", 128, 128, None, None, True),
    ("svg-nofast-small-programs", lambda L: svg_mask(GEOM_SPATIAL, 1.0), 2, 360, 64, "float32", 128, 128, 32, 128,
     False),
    ("aligned", lambda L: align(svg_mask(GEOM_SPATIAL, 1.0), Tile(128, 256)), 2, 360, 128, "float32", 128, 256, 64, 128,
     True),
    ("random-tiles", lambda L: tile_pattern_mask(L, 128, 7), 2, 330, 64, "float32", 128, 128, None, 128, True),
    ("per-head-nofast-bf16", lambda L: per_head_masks(L, 3), 3, 270, 64, "bfloat16", 128, 128, 64, 128, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gpu_kernel_matches_float64_reference(case):
    name, build, heads, L, d, dtype, bq, bkv, gbq, gbkv, fast_path = case
    seed = sum(map(ord, name))
    print("seed", seed)
    mask = build(L)
    q, k, v = random_qkv(seed, heads, L, d, dtype)
    out = gpu_block_sparse_attention(q, k, v, mask, block_q=bq, block_kv=bkv, gpu_block_q=gbq, gpu_block_kv=gbkv,
                                     fast_path=fast_path)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert relative_error(out, numpy_attention(q, k, v, mask_array(mask, heads, L))) <= TOLERANCE[dtype]


def test_rows_without_keys_are_zero_and_sm_scale_is_applied_via_the_dispatcher():
    L = 200
    allowed = np.zeros((L, L), bool)
    allowed[:70, :150] = True  # rows 70.. see nothing: a whole q tile row of the plan is empty
    q, k, v = random_qkv(11, 2, L, 64, "float32")
    config = KernelConfig(block_q=128, block_kv=128)
    out = block_sparse(q, k, v, allowed, config=config, sm_scale=0.37, implementation="triton")
    assert np.all(np.asarray(out)[:, 70:] == 0)
    assert relative_error(out, numpy_attention(q, k, v, allowed, sm_scale=0.37)) <= TOLERANCE["float32"]
    with pytest.raises(ValueError, match="implementation must be one of mosaic, triton"):
        block_sparse(q, k, v, allowed, config=config, implementation="cuda")


@pytest.mark.parametrize("fast_path", [True, False])
def test_row_plan_visits_each_nonempty_tile_once_full_first(fast_path):
    """Brute force over the tile classification: per head and q row, the row's tiles are exactly
    its non-empty tiles, full ones (mask-free loop) before partial ones when the fast path is on."""
    L = 700
    masks = tuple(ArrayMask(m) for m in per_head_masks(L, 5))
    rp = row_plan(tile_plan(masks, L, 128, 128, fast_path))
    for h, m in enumerate(masks):
        kinds = classify(m, Tile(128, 128)).kinds
        for i in range(kinds.shape[0]):
            lo, nf, npart = rp.start[h, i], rp.n_full[h, i], rp.n_partial[h, i]
            tiles = rp.kv_tile[h, lo:lo + nf + npart]
            assert sorted(tiles) == list(np.flatnonzero(kinds[i]))
            full_tiles = set(np.flatnonzero(kinds[i] == FULL))
            if fast_path:
                assert set(tiles[:nf]) == full_tiles and not full_tiles & set(tiles[nf:])
            else:
                assert nf == 0
    assert rp.tiles_computed == sum(int((classify(m, Tile(128, 128)).kinds > 0).sum()) for m in masks)


def test_lowers_to_triton_for_cuda():
    """Pallas' Triton lowering (run here, no GPU needed) accepts iota-, padding- and block-masked plans."""
    cases = ((BandSinkMask(300, 40, 60), True, "bfloat16"), (DenseMask(300), False, "float32"),
             (np.random.default_rng(0).random((300, 300)) < 0.3, True, "bfloat16"))
    for mask, fast_path, dtype in cases:
        x = jax.ShapeDtypeStruct((2, 300, 128), dtype)
        f = jax.jit(lambda q, k, v: gpu_block_sparse_attention(q, k, v, mask, block_q=128, block_kv=256,
                                                               fast_path=fast_path, interpret=False))
        exported = jax.export.export(f, platforms=["cuda"], disabled_checks=[
            jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(x, x, x)
        assert "__gpu$xla.gpu.triton" in exported.mlir_module()


@pytest.mark.parametrize("change, message", [
    (dict(gpu_block_q=48), "gpu_block_q must be one of"),
    (dict(gpu_block_kv=256), "gpu_block_kv must be one of"),
    (dict(block_q=136, gpu_block_q=16, gpu_block_kv=32), "gpu_block_q=16 must divide"),
    (dict(block_q=24), "block_q=24 must be a multiple of 16 on GPU"),
    (dict(block_kv=100), "block_kv must be a positive multiple of 128"),
    (dict(num_warps=3), "num_warps must be one of"),
    (dict(num_stages=0), "num_stages must be a positive integer"),
    (dict(mask=DenseMask(99)), "mask has L=99"),
])
def test_bad_input_raises_clear_value_error(change, message):
    p = dict(block_q=128, block_kv=128, mask=DenseMask(200)) | change
    q = jnp.ones((2, 200, 64), "float32")
    with pytest.raises(ValueError, match=message):
        gpu_block_sparse_attention(q, q, q, p.pop("mask"), **p)


def _equations(jaxpr):
    """Every equation of ``jaxpr`` and of its sub-jaxprs (loop bodies, nested jits)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                sub = getattr(sub, "jaxpr", sub)
                if hasattr(sub, "eqns"):
                    yield from _equations(sub)


@pytest.mark.parametrize("mask", [BandSinkMask(300, 40, 60), np.random.default_rng(1).random((300, 300)) < 0.5],
                         ids=["iota", "blocks"])
def test_full_tile_loop_carries_no_masking_ops(mask):
    """C4 on GPU, from the kernel's own jaxpr: of the two kv loops of a program, the full-tile one has
    no compare, select or iota and loads no mask; the partial-tile one has them."""
    from svgtpu.bench.kernel_timing import MASKING
    x = jnp.ones((1, 300, 64), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda q, k, v: gpu_block_sparse_attention(q, k, v, mask, block_q=128, block_kv=128))(
        x, x, x)
    kernel = next(e for e in _equations(jaxpr.jaxpr) if e.primitive.name == "pallas_call").params["jaxpr"]
    full, partial = (Counter(e.primitive.name for e in _equations(loop.params["body_jaxpr"].jaxpr))
                     for loop in kernel.eqns if loop.primitive.name == "while")
    assert not MASKING & set(full) and full["dot_general"] == partial["dot_general"] > 0
    assert MASKING & set(partial)
    chunks = 128 // 64  # kv chunks of a plan tile at the default program tile
    mask_loads = 1 + chunks if isinstance(mask, np.ndarray) else 0  # the block's index, then its chunks
    assert partial["get"] == full["get"] + mask_loads
