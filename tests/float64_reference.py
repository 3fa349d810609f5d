"""The one float64 attention every test compares against (numpy, straight from the definition).

Import it as ``from float64_reference import masked_attention, relative_error``: pytest puts
``tests/`` on ``sys.path`` (it holds the root ``conftest.py``).
"""

import numpy as np


def masked_attention(q, k, v, allowed=None, sm_scale=None) -> np.ndarray:
    """``softmax(q k^T * scale, masked to allowed) v`` in float64 for ``q, k, v [..., L, d]``.

    ``allowed``: bool ``[L, L]`` (or broadcastable to the scores), ``None`` for dense; ``sm_scale``
    defaults to ``1 / sqrt(d)``.  A query row with no allowed key gives zeros, the convention of
    every kernel in svgtpu.
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
