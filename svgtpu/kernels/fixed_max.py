"""The fixed-maximum pass: one shift per query, known before the kernel streams a key, and where it is safe.

Softmax is unchanged by subtracting the same number ``m_i`` from every score of row ``i``; the online
softmax picks the running row maximum (and rescales by ``exp2(m_old - m_new)`` whenever it rises), a
fixed-M kernel picks ``m_i`` once, before the first key, and never rescales.  Any ``m_i`` gives softmax
exactly in real arithmetic; in float32 it gives softmax up to rounding as long as no term
``p = exp2(s - m_i)`` (scores ``s`` in base-2 units, ``sm_scale * log2(e)`` folded in) overflows and no term
that matters underflows (TPUs flush float32 and bfloat16 below ``2^-126`` to zero).  This pass computes
such an ``m_i`` from norms alone (``O(L d)`` work, no score), and says per head and q tile whether the
rule is proven; the kernel runs the other tiles with the running maximum (``docs/fixed_max.md``):

- **upper bound** ``U_i = scale (q_i . c + |q_i| max_j |k_j - c|)``, ``c`` the mean of the real keys
  (Cauchy-Schwarz on the centred keys: MaxDiffusion's bound, PR 452, which centres the keys themselves;
  here only the bound is centred and the kernel multiplies the keys as given: re-rounding centred
  bfloat16 keys moves large scores by more than the bfloat16 tolerance);
- **lower bound** on the row maximum ``B_i``: the mean score ``q_i . c`` of a row that sees every key (the
  maximum is at least the mean), the diagonal score ``q_i . k_i`` where the mask allows it, the larger of
  the two; a row with neither has no bound and its tile falls back;
- ``m_i = max(B_i, U_i - headroom)`` (:func:`overflow_headroom`): no term exceeds ``2^headroom``, so the row
  sum and accumulator stay below float32's ``2^128`` (``n`` keys, values up to ``|v|max``); as close to the
  row's maximum as that allows (the exponent ``s - m_i`` is rounded to float32 relative to its size);
- **safe** iff ``m_i - B_i <=`` :func:`underflow_room`: the row's largest term is then at least
  ``2^(24 + log2 n - 126)``, so the terms flushed to zero (each below ``2^-126``) together weigh less than
  ``2^-24`` of it: below float32 rounding.  A row with no allowed key is safe (zeros either way).

Stricter than MaxDiffusion's gate (``|q|max |k|max <= 213`` with ``m = ceil(U) - 88``, which bounds the
largest term above the flush floor but not the mass flushed beside it) and per q tile, not per head.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from svgtpu.geometry import round_up

LOG2E = math.log2(math.e)
#: float32 (and bfloat16) exponents: the largest finite value is below ``2^128``, normals reach ``2^-126``.
F32_MAX_EXP, F32_MIN_EXP = 128, -126
#: float32's significand: flushed mass under ``2^-24`` of the row's largest term is below its rounding.
F32_BITS = 24


def overflow_headroom(keys: int, v_max):
    """``m_i`` sits this far (base 2) under the upper bound: ``n 2^headroom |v|max < 2^127`` keeps the row
    sum ``l`` and the accumulator finite, one more below for the scores' own rounding."""
    return (F32_MAX_EXP - 2) - math.ceil(math.log2(max(keys, 1))) - jnp.ceil(jnp.log2(jnp.maximum(v_max, 1.0)))


def underflow_room(keys: int) -> int:
    """How far (base 2) ``m_i`` may sit above the row maximum: flushed terms then weigh under ``2^-24``."""
    return -F32_MIN_EXP - F32_BITS - math.ceil(math.log2(max(keys, 1)))


def row_witnesses(mask, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bool ``[L]`` each: rows that see every key, rows whose diagonal key is allowed, rows with no key
    (from the static mask: host work once per mask and shape)."""
    counts = mask.count_grid(np.arange(L + 1), [0, L])[:, 0]
    ids = np.arange(L)
    return counts == L, np.asarray(mask.allowed(ids, ids), bool), counts == 0


def fixed_maxima(q, k, v, masks, sm_scale: float, block_q: int):
    """The pass: ``(m, tile_ok)`` for ``q, k, v [heads, L, d]`` and ``masks`` (one mask, or a
    tuple of one per head).  ``m`` float32 ``[heads, Lq]`` (``Lq``: L padded to ``block_q``), the fixed
    maximum of each query in base-2 units; ``tile_ok`` int32 ``[heads, Lq // block_q]``, 1 where every
    row of the q tile is safe (module doc).  Padded rows (zero queries) are safe."""
    heads, L, _ = q.shape
    scale = sm_scale * LOG2E
    qf, kf = q.astype(jnp.float32), k.astype(jnp.float32)
    centre = kf.mean(axis=1)                                                  # [heads, d]
    mean_score = scale * jnp.einsum("hld,hd->hl", qf, centre)
    spread = jnp.linalg.norm(kf - centre[:, None], axis=-1).max(axis=1, keepdims=True)
    upper = mean_score + scale * jnp.linalg.norm(qf, axis=-1) * spread
    per_head = masks if isinstance(masks, tuple) else (masks,)
    witnesses = [row_witnesses(m, L) for m in per_head]
    dense, diag, empty = (jnp.asarray(np.stack([w[i] for w in witnesses])) for i in range(3))
    diag_score = scale * jnp.einsum("hld,hld->hl", qf, kf)
    lower = jnp.maximum(jnp.where(dense, mean_score, -jnp.inf), jnp.where(diag, diag_score, -jnp.inf))
    v_max = jnp.abs(v.astype(jnp.float32)).max(axis=(1, 2))[:, None]
    m = jnp.maximum(lower, upper - overflow_headroom(L, v_max))
    safe = empty | (m - lower <= underflow_room(L))
    m = jnp.where(jnp.isfinite(m), m, 0.0)       # rows without a bound: their tiles fall back
    Lq = round_up(L, block_q)
    m = jnp.pad(m, ((0, 0), (0, Lq - L)))
    safe = jnp.pad(safe, ((0, 0), (0, Lq - L)), constant_values=True)
    tile_ok = safe.reshape(heads, Lq // block_q, block_q).all(axis=-1).astype(jnp.int32)
    return m, tile_ok


__all__ = ["F32_BITS", "F32_MAX_EXP", "F32_MIN_EXP", "fixed_maxima", "overflow_headroom", "row_witnesses",
           "underflow_room"]
