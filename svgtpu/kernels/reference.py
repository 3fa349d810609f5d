"""The readable definition of masked attention, in plain ``jax.numpy``.

``out[h, i] = sum_j softmax_j(q[h, i] . k[h, j] * sm_scale over allowed j) v[h, j]``; a query row
with no allowed key returns zeros (the convention of every kernel here).  It materializes the
``[heads, L, L]`` scores, so it is for tests and small sequences only.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from svgtpu.kernels.common import as_masks


def mask_array(mask, heads: int, L: int) -> np.ndarray:
    """The mask as a numpy bool ``[heads, L, L]`` array (mask object or numpy array accepted)."""
    masks = as_masks(mask, heads, L)
    if isinstance(masks, tuple):
        return np.stack([m.to_array() for m in masks])
    return np.broadcast_to(masks.to_array(), (heads, L, L))


def reference_attention(q, k, v, mask, *, sm_scale: float | None = None):
    """Masked softmax attention on ``[heads, L, d]`` inputs, computed in float32, output in q's dtype."""
    heads, L, _ = q.shape
    return allowed_attention(q, k, v, jnp.asarray(mask_array(mask, heads, L)), sm_scale=sm_scale)


def allowed_attention(q, k, v, allowed, *, sm_scale: float | None = None):
    """:func:`reference_attention` with the mask as a (possibly traced) bool ``[heads, L, L]`` array."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = jnp.einsum("hqd,hkd->hqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
    s = jnp.where(allowed, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    p = jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0))
    denom = p.sum(axis=-1, keepdims=True)
    out = jnp.einsum("hqk,hkd->hqd", p, v.astype(jnp.float32)) / jnp.where(denom == 0, 1.0, denom)
    return out.astype(q.dtype)


def float64_attention(q, k, v, allowed=None, sm_scale=None) -> np.ndarray:
    """``softmax(q k^T * scale, masked to allowed) v`` in float64 numpy, straight from the definition:
    the one reference the tests and the GPU run's correctness check compare against.

    ``q, k, v [..., L, d]`` (rounded through float32 first, as the kernels see them); ``allowed``:
    bool ``[L, L]`` or broadcastable to the scores, ``None`` for dense; ``sm_scale`` defaults to
    ``1 / sqrt(d)``.  A query row with no allowed key gives zeros, the convention of every kernel here.
    """
    q, k, v = (np.asarray(np.asarray(x, np.float32), np.float64) for x in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = np.einsum("...qd,...kd->...qk", q, k) * scale
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    p = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = p.sum(-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", p, v) / np.where(total == 0, 1, total)


def relative_error(got, want) -> float:
    """``max |got - want| / max |want|``."""
    want = np.asarray(want, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())


