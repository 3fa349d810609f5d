"""Online head profiling: decide per head whether it is spatial or temporal, from the data.

Sparse VideoGen (Xi et al. 2025) re-decides every step and layer which of its two masks suits each
head.  It samples ``r`` query rows (SVG: 64), computes their exact (dense) attention output and
their outputs under the two candidate masks, and picks per head the mask with the lower mean
squared error against exact:

- **spatial** (0): the band + sink mask in the frame-major order the model stores tokens in;
- **temporal** (1): the same mask after the layout transformation, i.e. seen from frame-major
  order the strided pattern ``PermutedMask(mask, geometry)``.

The caller passes the mask the kernel will really run (``SVGConfig.mask(geometry)``: tile-aligned
when the config asks for it) and the number of rows to sample; this module needs nothing else from
:mod:`svgtpu.attention.svg`, which imports it.  They are evaluated on the sampled rows x all keys with ``jnp`` index
arithmetic, so the cost is ``O(r * L * d)`` per head and no ``L x L`` array is ever built (the
scores of the sampled rows take ``r * L`` floats per head, and heads are processed in chunks).

:func:`planted_heads` builds synthetic Q/K/V whose heads are spatial or temporal by construction;
tests and ``svgtpu profile-heads`` use it to check that profiling recovers them.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.warmup import DEFAULT_PROFILE_ROWS
from svgtpu.geometry import VideoGeometry, check_positive_int, get_geometry
from svgtpu.masks.core import Mask, PermutedMask, TileMask
from svgtpu.errors import BadInput

#: Head kinds, as :func:`classify_heads` returns them.
SPATIAL, TEMPORAL = 0, 1
HEAD_KINDS = ("spatial", "temporal")


def candidate_rows(mask: Mask, rows: jax.Array) -> jax.Array:
    """``mask.allowed(rows[:, None], keys[None, :])`` for every key ``0 .. L-1``: ``bool [r, L]``.

    Computable masks (band + sink, dense) are plain arithmetic; a :class:`TileMask` looks up the tile
    rows of ``rows`` and repeats each tile ``block_kv`` times along the keys; a :class:`PermutedMask`
    evaluates its base at the spatial-major positions of the rows and of every key (for a tile base, a
    one-hot product over its key tiles).  None of them gathers element by element: on a TPU an ``[r, L]``
    gather compiles to loops that cost as much as the attention kernel (``svgtpu compile --what
    wan-block`` showed it).  Nor does any transpose the ``[r, L]`` key axis: the frame axis is not a lane
    multiple at the Wan resolutions, and libtpu compiled that re-layout as one unrolled program (at
    1440p, most of the v6e compile time of the SVG Wan block's profiling).
    """
    if isinstance(mask, PermutedMask):
        g = mask.geometry

        def spatial_major(i):  # frame-major token i = f*F + s sits at spatial-major position s*T + f
            return (i % g.F) * g.T + i // g.F
        return _allowed(mask.base, spatial_major(rows), spatial_major(jnp.arange(mask.L)))
    return _allowed(mask, rows)


def _allowed(mask: Mask, rows: jax.Array, keys: jax.Array | None = None) -> jax.Array:
    """``mask.allowed(rows[:, None], keys[None, :])``, ``bool [r, len(keys)]``; ``keys`` None: ``0 .. L-1``."""
    if isinstance(mask, TileMask):
        tile_rows = jnp.asarray(mask.tiles)[rows // mask.block_q]          # [r, kv tiles]
        if keys is None:
            return jnp.repeat(tile_rows, mask.block_kv, axis=-1)[:, :mask.L]
        # each key reads its tile's column: exact in bfloat16 (one 1 per column of the one-hot)
        onehot = keys[None, :] // mask.block_kv == jnp.arange(tile_rows.shape[1])[:, None]
        return jnp.dot(tile_rows.astype(jnp.bfloat16), onehot.astype(jnp.bfloat16),
                       preferred_element_type=jnp.float32) > 0
    if mask.computable:
        return mask.allowed(rows[:, None], (jnp.arange(mask.L) if keys is None else keys)[None, :])
    raise BadInput(f"profiling supports band/sink, dense, tile and permuted masks, got {type(mask).__name__}")


#: Working memory profiling allows itself per chunk of heads (scores plus three softmaxes of the
#: sampled rows); at 1440p one head takes 64 rows x 302,400 keys x 16 B = 310 MB.
PROFILE_CHUNK_BYTES = 512 * 2**20


def _masked_output(scores: jax.Array, allowed: jax.Array, v: jax.Array) -> jax.Array:
    """Softmax of ``scores [r, L]`` restricted to ``allowed [r, L]``, times ``v [L, d]``.

    A row with no allowed key gives zeros, the convention of every kernel here.
    """
    probs = jax.nn.softmax(jnp.where(allowed, scores, -jnp.inf), axis=-1)
    return jnp.where(jnp.any(allowed, axis=-1, keepdims=True), probs, 0.0) @ v


def sampled_rows(key: jax.Array, L: int, r: int) -> jax.Array:
    """``r`` query rows in ``[0, L)``, uniform and with replacement, as SVG draws them (``torch.randint`` in
    ``sample_mse``: svg-project/Sparse-VideoGen, svg/models/wan/attention.py @
    19c2662a0789eb11dde152a71a459f8f94f3c0fc).  Without replacement is a sort of ``L`` keys, which lengthens
    libtpu's v6e compile of a 1440p profiling and of the 1440p SVG Wan block."""
    return jax.random.randint(key, (r,), 0, L)


def classify_heads(q: jax.Array, k: jax.Array, v: jax.Array, geometry: VideoGeometry, mask: Mask,
                   key: jax.Array, *, num_rows: int = DEFAULT_PROFILE_ROWS, return_mse: bool = False):
    """Per-head kind, ``int32 [..., heads]``: 0 = spatial, 1 = temporal (lower sampled MSE wins).

    ``q, k, v`` are ``[heads, L, d]`` or ``[batch, heads, L, d]`` in frame-major order; ``mask`` is
    the spatial (frame-major) mask, the temporal candidate is ``PermutedMask(mask, geometry)``.  The
    same ``num_rows`` rows (at most ``L``, drawn uniformly with replacement with ``key``, as SVG does) are
    used for every head.  With ``return_mse`` also returns the MSEs, ``float32 [..., heads, 2]``
    (spatial, temporal).  Jit-friendly: the result is data, its shape depends only on the inputs.
    Heads are processed in chunks of at most :data:`PROFILE_CHUNK_BYTES` of working memory.
    """
    if q.ndim not in (3, 4) or q.shape != k.shape or q.shape != v.shape:
        raise BadInput(f"q, k, v must share one shape [heads, L, d] or [batch, heads, L, d], "
                       f"got {q.shape}, {k.shape}, {v.shape}")
    lead, (L, d) = q.shape[:-2], q.shape[-2:]
    if L != geometry.L:
        raise BadInput(f"sequence length {L} does not match geometry {geometry} (L={geometry.L})")
    check_positive_int("num_rows", num_rows)
    if mask.L != L:
        raise BadInput(f"mask length {mask.L} does not match geometry {geometry} (L={geometry.L})")
    spatial = mask
    r = min(num_rows, L)
    rows = sampled_rows(key, L, r)
    allowed = [candidate_rows(m, rows) for m in (spatial, PermutedMask(spatial, geometry))]

    def head_mse(qkv):
        q_rows, k, v = (x.astype(jnp.float32) for x in qkv)
        scores = q_rows @ k.T / math.sqrt(d)
        exact = _masked_output(scores, jnp.ones((1, L), bool), v)
        return jnp.stack([jnp.mean((_masked_output(scores, a, v) - exact) ** 2) for a in allowed])

    flat = (jnp.take(q, rows, axis=-2).reshape(-1, r, d), k.reshape(-1, L, d), v.reshape(-1, L, d))
    n = flat[0].shape[0]
    mse = jax.lax.map(head_mse, flat, batch_size=max(1, min(n, PROFILE_CHUNK_BYTES // (16 * r * L))))
    mse = mse.reshape(*lead, 2)
    kinds = jnp.argmin(mse, axis=-1).astype(jnp.int32)  # ties go to spatial (no transform)
    return (kinds, mse) if return_mse else kinds


def _check_contrast(contrast) -> None:
    if not (isinstance(contrast, (int, float)) and math.isfinite(contrast) and contrast > 0):
        raise BadInput(f"contrast must be a positive number, got {contrast!r}")


def planted_heads(geometry: VideoGeometry, kinds: Sequence[int], seed: int, *,
                  head_dim: int = 64, contrast: float = 8.0, dtype=jnp.float32):
    """Synthetic ``q, k, v [heads, L, head_dim]`` whose head ``h`` is ``kinds[h]`` by construction.

    Every token ``i = f * F + s`` gets a random unit code: its frame's code ``u_f`` in a spatial
    head, its spatial position's code ``w_s`` in a temporal head.  ``q = a * code + noise`` and
    ``k = a * code + noise`` with ``a**2 = contrast * sqrt(d)``, so a query's logit to keys sharing
    its code is about ``contrast`` above the rest: spatial heads attend inside the query's frame,
    temporal heads to the same position in every frame.  The unit-normal noise keeps the pattern
    soft, as in a real model.  ``v`` is standard normal.  Drawn with numpy (no compilation).
    """
    kinds = np.asarray(kinds)
    if kinds.ndim != 1 or not np.isin(kinds, (SPATIAL, TEMPORAL)).all():
        raise BadInput(f"kinds must be a 1-D sequence of 0 (spatial) / 1 (temporal), got {kinds.tolist()}")
    _check_contrast(contrast)
    g, d, rng = geometry, head_dim, np.random.default_rng(seed)

    def unit(n):
        x = rng.standard_normal((len(kinds), n, d))
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    by_frame = unit(g.T)[:, np.arange(g.L) // g.F]   # [heads, L, d]
    by_pos = unit(g.F)[:, np.arange(g.L) % g.F]
    code = np.where((kinds == TEMPORAL)[:, None, None], by_pos, by_frame)
    a = math.sqrt(contrast * math.sqrt(d))
    shape = (len(kinds), g.L, d)
    q = a * code + rng.standard_normal(shape)
    k = a * code + rng.standard_normal(shape)
    v = rng.standard_normal(shape)
    return tuple(jnp.asarray(x, dtype) for x in (q, k, v))


def profile_planted(geometry: VideoGeometry, mask: Mask, seeds: Sequence[int], *, num_rows: int = DEFAULT_PROFILE_ROWS,
                    heads: int = 8, head_dim: int = 64, contrast: float = 8.0,
                    progress: bool = False) -> np.ndarray:
    """Confusion matrix ``int64 [planted, predicted]`` of profiling on planted heads.

    Per seed, ``heads`` heads (half spatial, half temporal, shuffled) are planted with
    :func:`planted_heads` and classified with :func:`classify_heads`.
    """
    from tqdm import tqdm

    _check_contrast(contrast)
    check_positive_int("heads", heads)
    classify = jax.jit(lambda q, k, v, key: classify_heads(q, k, v, geometry, mask, key, num_rows=num_rows))
    confusion = np.zeros((2, 2), dtype=np.int64)
    for seed in tqdm(seeds, desc="profiling planted heads", disable=not progress):
        planted = np.random.default_rng(seed).permutation(np.arange(heads) % 2)
        q, k, v = planted_heads(geometry, planted, seed, head_dim=head_dim, contrast=contrast)
        got = np.asarray(classify(q, k, v, jax.random.fold_in(jax.random.PRNGKey(seed), 1)))
        np.add.at(confusion, (planted, got), 1)
    return confusion


def planted_report(geometry: str, config, seeds: Sequence[int], *, heads: int = 8, head_dim: int = 64,
                   contrast: float = 8.0) -> dict:
    """``svgtpu profile-heads``: :func:`profile_planted` on the mask of ``config`` (an
    :class:`~svgtpu.attention.svg.SVGConfig`) at ``geometry``, as a JSON-able dict with the accuracy."""
    g = get_geometry(geometry)
    mask = config.mask(g)
    confusion = profile_planted(g, mask, seeds, num_rows=config.num_sampled_rows, heads=heads, head_dim=head_dim,
                                contrast=contrast, progress=True)
    return {"geometry": geometry, "T": g.T, "H": g.H, "W": g.W, "F": g.F, "L": g.L,
            "multiplier": config.multiplier_for(g), "mask_density": mask.density(), "align": config.align,
            "heads": heads, "seeds": list(seeds), "head_dim": head_dim, "contrast": contrast,
            "num_sampled_rows": config.num_sampled_rows,
            "confusion": {planted: dict(zip(HEAD_KINDS, map(int, row))) for planted, row in zip(HEAD_KINDS, confusion)},
            "accuracy": float(np.trace(confusion) / confusion.sum()), "heads_profiled": int(confusion.sum()),
            "provenance": "computed"}


def format_planted(result: dict) -> str:
    """:func:`planted_report` as a confusion table and the accuracy."""
    from svgtpu.facts.tables import format_table
    table = format_table([{"planted": planted, **{f"predicted {k}": n for k, n in row.items()}}
                          for planted, row in result["confusion"].items()])
    return table + f"\naccuracy {result['accuracy']:.4f} over {result['heads_profiled']} heads ({result['provenance']})"


__all__ = ["SPATIAL", "TEMPORAL", "HEAD_KINDS", "PROFILE_CHUNK_BYTES", "candidate_rows", "classify_heads", "sampled_rows", "format_planted",
           "planted_heads", "planted_report", "profile_planted"]
