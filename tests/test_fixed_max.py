"""The fixed-maximum kernel (KernelConfig.fixed_max) against float64, and its pass's rule checked by brute force.

Interpret mode is slow: tiny shapes, a few kernel calls; the rule itself is checked on the pass alone.
"""

import math
import zlib

import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.errors import BadInput
from svgtpu.kernels import KernelConfig, block_sparse_attention
from svgtpu.kernels.fixed_max import F32_MIN_EXP, LOG2E, fixed_maxima, overflow_headroom, underflow_room
from svgtpu.kernels.reference import float64_attention, mask_array, relative_error
from svgtpu.masks.core import ArrayMask, BandSinkMask, DenseMask

TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


def seeded(name: str, heads: int, L: int, d: int, dtype: str):
    seed = zlib.crc32(name.encode())
    print(f"{name}: seed {seed}")
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((heads, L, d)), dtype) for _ in range(3))


def adversarial(L: int, d: int, dtype: str):
    """Head 0: large-norm queries and keys (scores spread far wider than the fixed-maximum window);
    head 1: one dominant key; head 2: plain."""
    q, k, v = (np.array(x, np.float32) for x in seeded("adversarial", 3, L, d, "float32"))
    q[0] *= 5.0
    k[0] *= 5.0
    u = np.eye(d, dtype=np.float32)[0]
    q[1] += 4.0 * u                       # every query leans on u, and key 7 is 40 u: its score ~ 20 above the rest
    k[1, 7] = 40.0 * u
    return tuple(jnp.asarray(x, dtype) for x in (q, k, v))


def empty_rows_mask(L: int) -> ArrayMask:
    """A band whose rows 5..20 and the last 3 allow no key at all."""
    allowed = np.abs(np.arange(L)[:, None] - np.arange(L)[None, :]) <= 40
    allowed[5:21] = False
    allowed[-3:] = False
    return ArrayMask(allowed)


# (id, inputs, mask builder, config kwargs)
CASES = [
    ("dense-key-major-bf16", lambda: seeded("dense", 2, 200, 128, "bfloat16"), DenseMask,
     dict(block_q=128, block_kv=256, block_kv_compute=128)),
    ("band-sink-query-major-f32-nofast", lambda: seeded("band", 2, 200, 64, "float32"),
     lambda L: BandSinkMask(L, 40, 60), dict(block_q=64, block_kv=128, fast_path=False)),
    ("adversarial-key-major-f32", lambda: adversarial(200, 64, "float32"), empty_rows_mask,
     dict(block_q=128, block_kv=128)),
    ("adversarial-query-major-bf16", lambda: adversarial(200, 64, "bfloat16"), DenseMask,
     dict(block_q=128, block_kv=128, layout="query-major")),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fixed_max_matches_float64(case):
    name, inputs, build, kw = case
    q, k, v = inputs()
    heads, L, _ = q.shape
    mask = build(L)
    config = KernelConfig(fixed_max=True, **kw)
    out = block_sparse_attention(q, k, v, mask, config=config)
    ref = float64_attention(q, k, v, mask_array(mask, heads, L))
    assert out.dtype == q.dtype
    assert relative_error(out, ref) <= TOLERANCE[str(q.dtype)]
    _, tile_ok = fixed_maxima(q, k, v, mask, 1 / math.sqrt(q.shape[-1]), config.block_q)
    if name.startswith("adversarial"):   # the large-norm head fell back, the others ran the fixed bodies
        assert not np.asarray(tile_ok[0]).any() and np.asarray(tile_ok[1:]).all()
    else:
        assert np.asarray(tile_ok).all()


def test_the_pass_rule_holds_by_brute_force():
    """Every row of a q tile the pass calls safe, checked on its float64 scores: no term overflows, and the
    terms a TPU flushes (``exp2(s - m)`` under ``2^-126``) weigh under ``2^-24`` of its softmax; the plain and
    dominant-key heads are safe, the large-norm head's tiles refused, and its refused rows would have lost
    mass above float32 rounding (the refusals are needed, not merely cautious)."""
    q, k, v = adversarial(200, 64, "float32")
    mask = BandSinkMask(200, 30, 50)
    scale = 1 / math.sqrt(64)
    m, tile_ok = fixed_maxima(q, k, v, mask, scale, 8)
    rows_ok = np.repeat(np.asarray(tile_ok, bool), 8, axis=1)[:, :200]
    s = np.einsum("hqd,hkd->hqk", np.asarray(q, np.float64), np.asarray(k, np.float64)) * scale * LOG2E
    s = np.where(mask_array(mask, 3, 200), s, -np.inf)
    top = s.max(-1)
    m = np.asarray(m, np.float64)[:, :200]
    headroom = np.asarray(overflow_headroom(200, jnp.abs(v).max(axis=(1, 2))[:, None]))
    assert (top - m <= headroom).all()                   # the bound: no term above 2^headroom
    weight = np.exp2(s - top[..., None])
    lost = np.where(s - m[..., None] < F32_MIN_EXP, weight, 0).sum(-1) / weight.sum(-1)
    assert (lost[rows_ok] <= 2.0 ** -24).all()
    assert rows_ok[1:].all() and not np.asarray(tile_ok[0]).any()
    assert (lost[0] > 0.5).mean() > 0.6                 # most of its rows would lose most of their mass
    assert underflow_room(200) == 126 - 24 - 8


def test_an_unsafe_shift_is_wrong_without_the_fallback():
    """The check is not vacuous: float32 with subnormals flushed (as a TPU does) and a shift the pass
    refuses loses the row; the running maximum does not."""
    s = np.array([-170.0, -171.0, -200.0])     # base-2 scores of one row, shifted by an m far above them
    p = np.exp2(s.astype(np.float32))
    flushed = np.where(np.abs(p) < np.float32(2.0) ** F32_MIN_EXP, 0, p)
    assert flushed.sum() == 0                  # every term flushed: the row's output would be 0, not softmax
    assert np.exp2(s - s.max()).sum() > 1      # the running maximum keeps it


def test_fixed_max_refusals():
    with pytest.raises(BadInput, match="fixed_max must be True or False"):
        KernelConfig(128, 128, fixed_max="yes")
    from svgtpu.kernels.api import block_sparse
    x = jnp.zeros((1, 128, 64), jnp.float32)
    with pytest.raises(BadInput, match="implementation mosaic"):
        block_sparse(x, x, x, DenseMask(128), config=KernelConfig(128, 128, fixed_max=True), implementation="triton")
    from svgtpu.kernels.dynamic import block_table_attention
    edges = jnp.asarray([[0, 128]])
    with pytest.raises(BadInput, match="static mask"):
        block_table_attention(x, x, x, edges, edges, jnp.ones((1, 1, 1), bool),
                              config=KernelConfig(128, 128, fixed_max=True))
