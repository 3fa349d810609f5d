"""The band + sink mask's kept tiles as at most two contiguous kv ranges per q-tile row, computed from the row index.

The SVG mask allows key ``k`` for query ``q`` when ``k < sink`` or ``|q - k| <= window``.  Over the rows
``[q0, q1)`` of one q tile, the keys some row allows are ``[0, sink)`` and ``[q0 - window, q1 - 1 + window]``;
the keys every row allows are ``[0, sink)`` and ``[q1 - 1 - window, q0 + window]``.  So the row's kept kv tiles
are two contiguous ranges (the sink's tiles, then the band's tiles past them), and inside each range the full
tiles are one contiguous run with at most a few partial tiles at its ends.  A kernel can walk them with no table:
:func:`row_ranges` is scalar integer arithmetic that runs on numpy integers (the plan, the tests) and on traced
int32 scalars inside a kernel alike (:mod:`svgtpu.kernels.mosaic_gpu`), one definition for both.

The same walk covers a mask aligned to whole tiles whose kept tiles are a band + sink of tiles
(:class:`TileBand`, found by :func:`tile_band` from a :class:`~svgtpu.masks.core.TileMask`) and the dense mask.
A tile holding a padded key (beyond ``L``) is never full, as in :func:`svgtpu.masks.tiles.classify`.

:func:`range_walk_attention` is the walk in plain JAX, step for step as the Mosaic GPU kernel takes it (tile
``step -> kv tile``, full tiles without a mask), so the walk itself is checked against float64 on any machine.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.errors import BadInput
from svgtpu.kernels.block_sparse import MASK_VALUE
from svgtpu.masks.core import BandSinkMask, DenseMask, Mask, TileMask


@dataclasses.dataclass(frozen=True)
class KeyBand:
    """``allowed(q, k) = k < sink or |q - k| <= window``, in tokens (a :class:`BandSinkMask`; dense: ``sink = L``)."""

    L: int
    sink: int
    window: int


@dataclasses.dataclass(frozen=True)
class TileBand:
    """Whole square tiles: q tile ``i`` keeps kv tiles ``j < sink_tiles`` and ``lo_offset <= j - i <= hi_offset``."""

    L: int
    sink_tiles: int
    lo_offset: int
    hi_offset: int


def _cdiv(a, b):
    return -((-a) // b)


def row_ranges(band: KeyBand | TileBand, row, block_q: int, block_kv: int):
    """For q-tile row ``row``: ``(n1, full1, lo2, full_lo2, full_hi2, hi2)``.

    Range 1 is kv tiles ``[0, n1)`` (the sink's), of which ``[0, full1)`` are full; range 2 is ``[lo2, hi2)``
    (the band's, past range 1), of which ``[full_lo2, full_hi2)`` are full; every other tile of the two ranges is
    partial, and no tile outside them holds an allowed pair.  ``row`` is a Python / numpy integer or a traced
    int32 scalar (the arithmetic is the same: floor divisions, minimum, maximum)."""
    host = isinstance(row, (int, np.integer, np.ndarray))
    mn, mx, where = (np.minimum, np.maximum, np.where) if host else (jnp.minimum, jnp.maximum, jnp.where)
    L = band.L
    nk = _cdiv(L, block_kv)
    whole = L // block_kv                      # tiles without a padded key
    if isinstance(band, KeyBand):
        q0 = row * block_q
        q1 = mn(q0 + block_q, L)
        s = min(band.sink, L)
        n1 = _cdiv(s, block_kv)
        any_lo, any_hi = mx(q0 - band.window, 0), mn(q1 - 1 + band.window, L - 1)   # keys some row allows
        all_lo, all_hi = q1 - 1 - band.window, q0 + band.window                   # keys every row allows
        band_lo, band_hi = any_lo // block_kv, any_hi // block_kv + 1
        # the straddling sink tile is full when the band covers its keys past the sink for every row
        straddle = (s % block_kv != 0) & (all_lo <= s) & (n1 * block_kv - 1 <= all_hi) & (n1 <= whole)
        full1 = s // block_kv + where(straddle, 1, 0)
        full_lo = _cdiv(mx(all_lo, 0), block_kv)
        full_hi = mn((all_hi + 1) // block_kv, whole)
    else:
        if block_q != block_kv:
            raise BadInput(f"a tile band needs square tiles, got {block_q}x{block_kv}")
        n1 = min(band.sink_tiles, nk)
        band_lo, band_hi = mx(row + band.lo_offset, 0), mn(row + band.hi_offset + 1, nk)
        full1 = min(n1, whole)
        full_lo, full_hi = band_lo, mn(band_hi, whole)
    lo2 = mx(band_lo, n1)
    hi2 = mx(band_hi, lo2)
    full_lo2 = mn(mx(full_lo, lo2), hi2)
    full_hi2 = mx(mn(full_hi, hi2), full_lo2)
    return n1, full1, lo2, full_lo2, full_hi2, hi2


def walk_band(mask: Mask, block_q: int, block_kv: int) -> KeyBand | TileBand:
    """The range walk of ``mask``: a band + sink mask, the dense mask, or a tile-aligned mask whose kept tiles are a
    band + sink of tiles; anything else is refused in one line (the Triton kernel takes any mask)."""
    if isinstance(mask, BandSinkMask):
        return KeyBand(mask.L, mask.sink, mask.window)
    if isinstance(mask, DenseMask):
        return KeyBand(mask.L, mask.L, 0)
    if isinstance(mask, TileMask) and (band := tile_band(mask)) is not None and \
            (mask.block_q, mask.block_kv) == (block_q, block_kv):
        return band
    raise BadInput("implementation mosaic-gpu walks band + sink masks (BandSinkMask, DenseMask, or a TileMask at the "
                   f"kernel's {block_q}x{block_kv} tiles whose kept tiles are a band + sink of tiles), got "
                   f"{type(mask).__name__}; implementation triton takes any mask")


def tile_band(mask: TileMask) -> TileBand | None:
    """The :class:`TileBand` equal to ``mask``'s kept tiles (square tiles), or ``None`` where there is none."""
    if mask.block_q != mask.block_kv:
        return None
    tiles = np.asarray(mask.tiles)
    nq, nk = tiles.shape
    sink = int(np.argmin(tiles.all(axis=0))) if not tiles.all(axis=0).all() else nk
    offsets = np.arange(nk)[None, :] - np.arange(nq)[:, None]
    banded = tiles & (np.arange(nk)[None, :] >= sink)
    if not banded.any():
        lo, hi = 0, -1
    else:
        lo, hi = int(offsets[banded].min()), int(offsets[banded].max())
    band = TileBand(mask.L, sink, lo, hi)
    expect = (np.arange(nk)[None, :] < sink) | ((offsets >= lo) & (offsets <= hi))
    return band if np.array_equal(expect, tiles) else None


def row_steps(band, row, block_q: int, block_kv: int):
    """``(steps, tile_of, is_full)``: the number of kept tiles of ``row``, the kv tile of step ``t`` (range 1 then
    range 2, ascending), and whether kv tile ``j`` is full (mask-free) -- the kernel's walk."""
    n1, full1, lo2, full_lo2, full_hi2, hi2 = row_ranges(band, row, block_q, block_kv)
    where = np.where if isinstance(row, (int, np.integer)) else jnp.where
    steps = n1 + hi2 - lo2

    def tile_of(t):
        return where(t < n1, t, lo2 + t - n1)

    def is_full(j):
        return (j < full1) | ((j >= full_lo2) & (j < full_hi2))
    return steps, tile_of, is_full


def range_kinds(band, block_q: int, block_kv: int) -> np.ndarray:
    """The int8 ``[q_tiles, kv_tiles]`` kind map the walk visits (0 not visited, 1 masked, 2 mask-free), from
    :func:`row_ranges` of every row at once, to set beside :func:`svgtpu.masks.tiles.classify`."""
    nq, nk = _cdiv(band.L, block_q), _cdiv(band.L, block_kv)
    n1, full1, lo2, full_lo2, full_hi2, hi2 = (np.broadcast_to(x, (nq,))[:, None]
                                               for x in row_ranges(band, np.arange(nq), block_q, block_kv))
    j = np.arange(nk)[None, :]
    visited = (j < n1) | ((j >= lo2) & (j < hi2))
    full = (j < full1) | ((j >= full_lo2) & (j < full_hi2))
    assert not (full & ~visited).any(), "a full tile outside the ranges"
    return np.where(visited, np.where(full, 2, 1), 0).astype(np.int8)


def range_walk_attention(q, k, v, mask: Mask, *, block_q: int = 128, block_kv: int = 128, fast_path: bool = True,
                         sm_scale: float | None = None):
    """Attention over ``mask`` by the range walk in plain JAX: per q tile, an online softmax over the kept kv tiles
    in the kernel's order, full tiles without a mask (``fast_path``), in float32; rows with no key give zeros.
    ``q, k, v [heads, L, d]``.  What the Mosaic GPU kernel computes, on any backend (slow: one tile at a time)."""
    band = walk_band(mask, block_q, block_kv)
    heads, L, d = q.shape
    scale = (1 / math.sqrt(d) if sm_scale is None else sm_scale) * math.log2(math.e)
    nq, nk = _cdiv(L, block_q), _cdiv(L, block_kv)
    pad = lambda x, n: jnp.pad(x.astype(jnp.float32), ((0, 0), (0, n - L), (0, 0)))  # noqa: E731
    qp, kp, vp = pad(q, nq * block_q), pad(k, nk * block_kv), pad(v, nk * block_kv)
    outs = []
    for i in range(nq):
        steps, tile_of, is_full = row_steps(band, i, block_q, block_kv)
        qi = qp[:, i * block_q:(i + 1) * block_q]
        qids = i * block_q + np.arange(block_q)[:, None]
        m = jnp.full((heads, block_q, 1), -jnp.inf)
        l = jnp.zeros((heads, block_q, 1))
        acc = jnp.zeros((heads, block_q, d))
        for t in range(int(steps)):
            j = int(tile_of(t))
            s = jnp.einsum("hqd,hkd->hqk", qi, kp[:, j * block_kv:(j + 1) * block_kv]) * scale
            if not (fast_path and is_full(j)):
                kids = j * block_kv + np.arange(block_kv)[None, :]
                s = jnp.where(allowed(band, qids, kids, block_q, block_kv) & (kids < L), s, MASK_VALUE)
            m_new = jnp.maximum(m, s.max(-1, keepdims=True))
            p = jnp.exp2(s - m_new)
            alpha = jnp.exp2(m - m_new)
            l = alpha * l + p.sum(-1, keepdims=True)
            acc = alpha * acc + jnp.einsum("hqk,hkd->hqd", p, vp[:, j * block_kv:(j + 1) * block_kv])
            m = m_new
        outs.append(jnp.where(m > MASK_VALUE, acc / jnp.where(l > 0, l, 1.0), 0.0))
    return jnp.concatenate(outs, axis=1)[:, :L].astype(q.dtype)


def allowed(band, qids, kids, block_q: int, block_kv: int):
    """Whether query ``qids`` may see key ``kids`` (broadcasting int arrays, numpy or traced): the partial tiles'
    test.  Padded keys (``>= L``) are the caller's to mask."""
    if isinstance(band, KeyBand):
        offset = qids - kids
        return (kids < band.sink) | ((offset <= band.window) & (offset >= -band.window))
    tile_offset = kids // block_kv - qids // block_q
    return (kids // block_kv < band.sink_tiles) | ((tile_offset >= band.lo_offset) & (tile_offset <= band.hi_offset))


__all__ = ["KeyBand", "TileBand", "row_ranges", "row_steps", "walk_band", "tile_band", "allowed", "range_kinds",
           "range_walk_attention"]
