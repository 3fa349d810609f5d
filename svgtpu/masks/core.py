"""Attention masks as small immutable objects that never materialize ``L x L``.

A mask answers "may query ``q`` attend to key ``k``?" for any block of rows and columns.  At
1440p, ``L = 302,400`` and the full boolean matrix would take 91 GB, so every mask here offers:

- ``allowed(q, k)``: elementwise on broadcastable integer arrays.  For :class:`DenseMask` and
  :class:`BandSinkMask` it uses only arithmetic and comparisons, so it also works on ``jnp`` arrays
  inside a kernel (``computable = True``: the kernel builds partial tiles from iota).
- ``block(q0, q1, k0, k1)``: the numpy bool block of rows ``[q0, q1)`` and keys ``[k0, k1)``.
- ``count_grid(q_edges, k_edges)``: how many allowed pairs each rectangle of a grid holds, analytic
  where possible.  Tile classification (:mod:`svgtpu.masks.tiles`) and alignment are built on it.

The SVG mask (Sparse VideoGen, Xi et al. 2025, Wan variant) is one static band plus an attention
sink: ``allowed(q, k) = (k < F) or |q - k| <= W`` with ``W = ceil(multiplier * F / 128) * 128``.
Spatial heads run it in frame-major order; temporal heads run the *same* mask after the layout
transformation to spatial-major order (:meth:`VideoGeometry.to_spatial_major`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np

from svgtpu.geometry import Tile, VideoGeometry, ceil_div, check_positive_int, check_tile, get_geometry
from svgtpu.errors import BadInput
from svgtpu.setting import check_multiplier, mask_density

#: Granularity of the SVG band width, in tokens (SVG rounds the window up to 128).
BAND_QUANTUM = 128


class Mask:
    """Base class: an ``L x L`` boolean attention mask (``True`` = may attend)."""

    L: int
    computable: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        return (self.L, self.L)

    def allowed(self, q, k):
        """Elementwise ``True`` where query ``q`` may attend to key ``k`` (broadcasting)."""
        raise NotImplementedError

    def block(self, q0: int, q1: int, k0: int, k1: int) -> np.ndarray:
        """The bool block ``mask[q0:q1, k0:k1]``; indices beyond ``L`` (padding) are ``False``."""
        q = np.arange(q0, q1, dtype=np.int64)[:, None]
        k = np.arange(k0, k1, dtype=np.int64)[None, :]
        inside = (q < self.L) & (k < self.L)
        return np.asarray(self.allowed(np.minimum(q, self.L - 1), np.minimum(k, self.L - 1))) & inside

    def to_array(self) -> np.ndarray:
        """The whole ``[L, L]`` bool matrix (for small ``L``: tests and teaching)."""
        if self.L > 32768:
            raise BadInput(f"to_array() would build a {self.L}x{self.L} matrix; use block() instead")
        return self.block(0, self.L, 0, self.L)

    def count_grid(self, q_edges, k_edges) -> np.ndarray:
        """``int64 [len(q_edges)-1, len(k_edges)-1]``: allowed pairs in each grid rectangle.

        Rectangle ``(i, j)`` is rows ``[q_edges[i], q_edges[i+1])`` by keys
        ``[k_edges[j], k_edges[j+1])``; edges must be non-decreasing, indices past ``L`` count as
        not allowed (that is how padding enters tile classification).
        """
        q_edges = np.minimum(np.asarray(q_edges, dtype=np.int64), self.L)
        k_edges = np.minimum(np.asarray(k_edges, dtype=np.int64), self.L)
        if np.any(np.diff(q_edges) < 0) or np.any(np.diff(k_edges) < 0):
            raise BadInput("q_edges and k_edges must be non-decreasing")
        return self._count_grid(q_edges, k_edges)

    def rows_with_keys(self) -> np.ndarray:
        """bool ``[L]``: the rows that allow at least one key (a row with none returns zeros)."""
        return self.count_grid(np.arange(self.L + 1), [0, self.L])[:, 0] > 0

    def _count_grid(self, q_edges: np.ndarray, k_edges: np.ndarray) -> np.ndarray:
        """Fallback: evaluate the mask block-wise, one row of rectangles at a time (O(L^2))."""
        if float(self.L) ** 2 > 4e9:
            raise BadInput(
                f"{type(self).__name__} has no analytic tile count and L={self.L} is too large to "
                "count pair by pair; use a smaller geometry")
        out = np.zeros((len(q_edges) - 1, len(k_edges) - 1), dtype=np.int64)
        k_lo, k_hi = int(k_edges[0]), int(k_edges[-1])
        starts = k_edges[:-1] - k_lo
        for i in range(len(q_edges) - 1):
            q0, q1 = int(q_edges[i]), int(q_edges[i + 1])
            if q1 == q0 or k_hi == k_lo:
                continue
            cols = self.block(q0, q1, k_lo, k_hi).sum(axis=0, dtype=np.int64)
            cum = np.concatenate([[0], np.cumsum(cols)])
            out[i] = cum[np.minimum(k_edges[1:] - k_lo, len(cols))] - cum[np.minimum(starts, len(cols))]
        return out

    def num_allowed(self) -> int:
        """Total number of allowed ``(q, k)`` pairs."""
        return int(self.count_grid([0, self.L], [0, self.L])[0, 0])

    def density(self) -> float:
        """Fraction of the ``L x L`` pairs that are allowed."""
        return self.num_allowed() / float(self.L) ** 2


def _check_length(L) -> int:
    return check_positive_int("mask length L", L)


@dataclasses.dataclass(frozen=True)
class DenseMask(Mask):
    """Every query attends to every key."""

    L: int
    computable = True

    def __post_init__(self):
        _check_length(self.L)

    def allowed(self, q, k):
        return (q >= 0) | (k >= 0)

    def _count_grid(self, q_edges, k_edges):
        return np.diff(q_edges)[:, None] * np.diff(k_edges)[None, :]


def table_grid(table: np.ndarray, row_edges: np.ndarray, key_edges: np.ndarray, q_edges: np.ndarray,
               k_edges: np.ndarray) -> np.ndarray:
    """Allowed pairs per rectangle of the grid ``q_edges x k_edges`` of a boolean ``table`` over contiguous
    row blocks (``row_edges``) and key blocks (``key_edges``).

    The pairs below an edge are the blocks wholly below it (a prefix sum, each block weighted by its
    positions) plus the positions of the one block it cuts: exact in integers and ``O(edges x blocks)``,
    where the product with a dense positions-below matrix costs ``O(edges x blocks^2)`` (the C3 search's
    aligned masks at 256-token tiles spent minutes there).
    """
    def below(counts, edges, block_edges):  # [n, m] -> [len(edges), m]
        n = len(block_edges) - 1
        prefix = np.zeros((n + 1, counts.shape[1]), np.int64)
        prefix[1:] = np.cumsum(counts * np.diff(block_edges)[:, None], axis=0)
        whole = np.searchsorted(block_edges[1:], edges, side="right")   # blocks ending at or below the edge
        cut = np.minimum(whole, n - 1)
        part = np.where(whole < n, edges - block_edges[cut], 0)           # its positions below the edge
        return prefix[whole] + part[:, None] * counts[cut]
    rows = below(np.asarray(table, np.int64), np.asarray(q_edges), np.asarray(row_edges, np.int64))
    return grid_from_prefix(below(rows.T, np.asarray(k_edges), np.asarray(key_edges, np.int64)).T)


def grid_from_prefix(total: np.ndarray) -> np.ndarray:
    """Counts of the grid rectangles from ``total[i, j]``, the count below ``(q_edges[i], k_edges[j])``."""
    return total[1:, 1:] - total[:-1, 1:] - total[1:, :-1] + total[:-1, :-1]


def grid_from_cells(cells: np.ndarray, q_at: np.ndarray, k_at: np.ndarray) -> np.ndarray:
    """Sum ``cells`` (counts of a finer grid) back onto the grid whose edges are fine edges ``q_at`` / ``k_at``."""
    prefix = np.zeros((cells.shape[0] + 1, cells.shape[1] + 1), dtype=np.int64)
    prefix[1:, 1:] = cells.cumsum(0).cumsum(1)
    return grid_from_prefix(prefix[q_at[:, None], k_at[None, :]])


def pairs_with_offset_at_most(q0, q1, k0, k1, c):
    """Number of ``(q, k)`` in ``[q0, q1) x [k0, k1)`` with ``k - q <= c`` (vectorized).

    For each row ``q`` the count is ``clip(q + c - k0 + 1, 0, n)`` with ``n = k1 - k0``; summing a
    clipped linear function over consecutive integers has the closed form ``S(b) - S(a - 1)``.
    """
    n = np.maximum(k1 - k0, 0)

    def S(x):  # sum_{y <= x} clip(y, 0, n): the ramp up to m = clip(x, 0, n), then n for each y in (n, x]
        m = np.clip(x, 0, n)
        return m * (m + 1) // 2 + np.maximum(x - n, 0) * n

    a = q0 + c - k0 + 1
    b = q1 - 1 + c - k0 + 1
    return np.where(q1 > q0, S(b) - S(a - 1), 0)


@dataclasses.dataclass(frozen=True)
class BandSinkMask(Mask):
    """``allowed(q, k) = (k < sink) or |q - k| <= window``: the SVG mask.

    ``sink`` is the number of leading keys every query sees (SVG: the first frame, ``F`` tokens);
    ``window`` is the half-width of the diagonal band in tokens.  ``sink = 0`` gives a pure band.
    """

    L: int
    sink: int
    window: int
    computable = True

    def __post_init__(self):
        _check_length(self.L)
        if self.sink < 0 or self.window < 0:
            raise BadInput(f"sink and window must be >= 0, got sink={self.sink}, window={self.window}")

    def allowed(self, q, k):
        d = q - k
        return (k < self.sink) | ((d <= self.window) & (d >= -self.window))

    def block(self, q0: int, q1: int, k0: int, k1: int) -> np.ndarray:
        """:meth:`Mask.block` without an element-wise pass per pair: row ``q`` of the band is one window of
        the offsets ``k - q``, so the rows are shifted views of one run (Splash's mask preprocessing reads
        every partial block of a 1440p mask this way)."""
        rows, cols = q1 - q0, k1 - k0
        if rows <= 0 or cols <= 0:
            return np.zeros((max(rows, 0), max(cols, 0)), bool)
        run = np.abs(np.arange(k0 - q1 + 1, k1 - q0)) <= self.window   # the offsets k - q of the block, ascending
        out = np.lib.stride_tricks.sliding_window_view(run, cols)[::-1].copy()  # row i: offsets from k0 - q0 - i
        out[:, :max(0, min(self.sink, k1) - k0)] = True
        out[max(0, self.L - q0):] = False                                # padded rows and keys
        out[:, max(0, self.L - k0):] = False
        return out

    def _band(self, q0, q1, k0, k1):
        w = self.window
        return (pairs_with_offset_at_most(q0, q1, k0, k1, w)
                - pairs_with_offset_at_most(q0, q1, k0, k1, -w - 1))

    def _count_grid(self, q_edges, k_edges):
        """The band's pairs on the rectangles it can reach, then the sink's on the columns it covers.

        A rectangle wholly left of the band (``k1 <= q0 - window``) or right of it (``k0 >= q1 + window``)
        holds no band pair, so the band is counted only on each row's run of reachable columns (contiguous:
        both ends grow with the row); at a 1440p grid of 128-token tiles that is a fraction of the 5.6 million
        rectangles.  The sink adds its keys outside the band on the first columns only."""
        w = self.window
        nq, nk = len(q_edges) - 1, len(k_edges) - 1
        out = np.zeros((nq, nk), dtype=np.int64)
        q0, q1, k0, k1 = q_edges[:-1], q_edges[1:], k_edges[:-1], k_edges[1:]
        lo = np.searchsorted(k1, q0 - w, side="right")         # first column with k1 > q0 - w
        hi = np.maximum(np.searchsorted(k0, q1 + w, side="left"), lo)   # past the last with k0 < q1 + w
        width = hi - lo
        row = np.repeat(np.arange(nq), width)
        col = lo[row] + np.arange(row.size) - np.repeat(np.cumsum(width) - width, width)
        out[row, col] = self._band(q0[row], q1[row], k0[col], k1[col])
        sink_cols = int(np.searchsorted(k0, self.sink, side="left"))   # columns with k0 < sink
        if sink_cols:
            q0c, q1c = q0[:, None], q1[:, None]
            k0s, k1s = k0[None, :sink_cols], k1[None, :sink_cols]
            k1_sink = np.maximum(np.minimum(k1s, self.sink), k0s)  # keys of the rectangle inside the sink
            out[:, :sink_cols] += (q1c - q0c) * (k1_sink - k0s) - self._band(q0c, q1c, k0s, k1_sink)
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayMask(Mask):
    """Any numpy boolean ``[L, L]`` array as a mask (tests, teaching, hand-made patterns)."""

    array: np.ndarray

    def __post_init__(self):
        array = np.asarray(self.array)
        if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] == 0:
            raise BadInput(f"mask array must be a square [L, L] array, got shape {array.shape}")
        if array.dtype != np.bool_:
            raise BadInput(f"mask array must have dtype bool, got {array.dtype}")
        array = array.copy()
        array.setflags(write=False)
        object.__setattr__(self, "array", array)
        object.__setattr__(self, "_digest", hashlib.sha1(np.packbits(array).tobytes()).hexdigest())

    @property
    def L(self) -> int:  # type: ignore[override]
        return self.array.shape[0]

    def __eq__(self, other):
        return isinstance(other, ArrayMask) and self._digest == other._digest and \
            np.array_equal(self.array, other.array)

    def __hash__(self):
        return hash(self._digest)

    def allowed(self, q, k):
        return self.array[q, k]

    def block(self, q0, q1, k0, k1):
        out = np.zeros((q1 - q0, k1 - k0), dtype=bool)
        rq, rk = min(q1, self.L) - q0, min(k1, self.L) - k0
        if rq > 0 and rk > 0:
            out[:rq, :rk] = self.array[q0:q0 + rq, k0:k0 + rk]
        return out

    def _count_grid(self, q_edges, k_edges):
        cum = np.zeros((self.L + 1, self.L + 1), dtype=np.int64)
        cum[1:, 1:] = self.array.astype(np.int64).cumsum(0).cumsum(1)
        return grid_from_prefix(cum[q_edges[:, None], k_edges[None, :]])


@dataclasses.dataclass(frozen=True, eq=False)
class TileMask(Mask):
    """A mask made of whole ``block_q x block_kv`` tiles: ``allowed = tiles[q // bq, k // bkv]``.

    This is what alignment produces (:func:`align`).  Classified with its own block sizes it has no
    partial tile except where padded keys fall inside a kept tile.
    """

    L: int
    block_q: int
    block_kv: int
    tiles: np.ndarray

    def __post_init__(self):
        _check_length(self.L)
        tiles = np.asarray(self.tiles, dtype=bool)
        expected = (ceil_div(self.L, self.block_q), ceil_div(self.L, self.block_kv))
        if tiles.shape != expected:
            raise BadInput(f"tiles must have shape {expected} for L={self.L}, "
                           f"block_q={self.block_q}, block_kv={self.block_kv}; got {tiles.shape}")
        tiles = tiles.copy()
        tiles.setflags(write=False)
        object.__setattr__(self, "tiles", tiles)
        object.__setattr__(self, "_digest", hashlib.sha1(np.packbits(tiles).tobytes()).hexdigest())

    def __eq__(self, other):
        return (isinstance(other, TileMask) and (self.L, self.block_q, self.block_kv) ==
                (other.L, other.block_q, other.block_kv) and np.array_equal(self.tiles, other.tiles))

    def __hash__(self):
        return hash((self.L, self.block_q, self.block_kv, self._digest))

    @property
    def tile(self) -> Tile:
        """The tile it is made of, ``Tile(block_q, block_kv)``."""
        return Tile(self.block_q, self.block_kv)

    def allowed(self, q, k):
        return self.tiles[q // self.block_q, k // self.block_kv]

    def _count_grid(self, q_edges, k_edges):
        nq, nk = self.tiles.shape
        return table_grid(self.tiles, np.minimum(np.arange(nq + 1) * self.block_q, self.L),
                          np.minimum(np.arange(nk + 1) * self.block_kv, self.L), q_edges, k_edges)


@dataclasses.dataclass(frozen=True)
class PermutedMask(Mask):
    """``base`` seen through a token permutation: ``allowed(q, k) = base(perm[q], perm[k])``.

    With ``perm`` = frame-major -> spatial-major positions this is the SVG temporal mask written
    in the order the model stores tokens: a strided pattern that tiles badly, which is why SVG
    transforms the layout instead of running it.
    """

    base: Mask
    geometry: VideoGeometry

    def __post_init__(self):
        if self.base.L != self.geometry.L:
            raise BadInput(f"base mask has L={self.base.L} but geometry {self.geometry} has L={self.geometry.L}")

    @property
    def L(self) -> int:  # type: ignore[override]
        return self.geometry.L

    def allowed(self, q, k):
        g = self.geometry
        # frame-major token i = f*F + s sits at spatial-major position s*T + f
        return self.base.allowed((q % g.F) * g.T + q // g.F, (k % g.F) * g.T + k // g.F)

    def _count_grid(self, q_edges, k_edges):
        """Analytic for a band + sink base: split each rectangle into runs of one frame.

        Inside one query frame ``fq`` and key frame ``fk`` the spatial-major offset is
        ``(sq - sk) * T + (fq - fk)``, so the band is a band in ``sq - sk`` and the sink a prefix of
        key positions ``sk < ceil((sink - fk) / T)``: both have the closed form of
        :class:`BandSinkMask` (:class:`FrameRuns`).  Cost: (rectangles + frames)^2 per axis pair, never ``L^2``.
        """
        if not isinstance(self.base, BandSinkMask):
            return super()._count_grid(q_edges, k_edges)
        runs = FrameRuns.of(q_edges, k_edges, self.geometry)
        cut = runs.keys_below(runs.strided_sink(self.base.sink))
        return runs.grid(runs.full(cut) + runs.pairs(cut, *runs.strided_band(self.base.window)))


@dataclasses.dataclass(frozen=True)
class FrameRuns:
    """A tile grid over frame-major tokens, cut into cells of one query frame run x one key frame run.

    In a cell, query ``fq * F + sq`` (``sq`` in ``[sq0, sq1)``) and key ``fk * F + sk`` (``sk`` in
    ``[sk0, sk1)``): a band over frame-major or spatial-major positions is an interval of ``sq - sk``
    and a sink a prefix of ``sk``, both counted in closed form.  :class:`PermutedMask` and
    :class:`svgtpu.masks.c3_search.UnionMask` count with it.  Arrays broadcast ``[query runs, key runs]``.
    """

    geometry: VideoGeometry
    fq: np.ndarray
    sq0: np.ndarray
    sq1: np.ndarray
    fk: np.ndarray
    sk0: np.ndarray
    sk1: np.ndarray
    q_at: np.ndarray   # per grid edge, its run index (grid_from_cells sums the cells back)
    k_at: np.ndarray

    @classmethod
    def of(cls, q_edges, k_edges, geometry: VideoGeometry) -> "FrameRuns":
        F = geometry.F
        qs, q_at = frame_runs(q_edges, F)
        ks, k_at = frame_runs(k_edges, F)
        return cls(geometry, (qs[:-1] // F)[:, None], (qs[:-1] % F)[:, None], (qs[:-1] % F + np.diff(qs))[:, None],
                   (ks[:-1] // F)[None, :], (ks[:-1] % F)[None, :], (ks[:-1] % F + np.diff(ks))[None, :], q_at, k_at)

    def band(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` of ``sq - sk`` where ``|q - k| <= window`` in frame-major order."""
        shift = (self.fq - self.fk) * self.geometry.F
        return -window - shift, window - shift

    def strided_band(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` of ``sq - sk`` where ``|q - k| <= window`` in spatial-major order (position ``s T + f``)."""
        df, T = self.fq - self.fk, self.geometry.T
        return -((window + df) // T), (window - df) // T

    def sink(self, sink: int) -> np.ndarray:
        """Keys ``sk`` below this are in a frame-major sink of ``sink`` keys."""
        return sink - self.fk * self.geometry.F

    def strided_sink(self, sink: int) -> np.ndarray:
        """Keys ``sk`` below this are in a spatial-major sink of ``sink`` keys (``sk T + fk < sink``)."""
        return -(-(sink - self.fk) // self.geometry.T)

    def keys_below(self, bound: np.ndarray) -> np.ndarray:
        """``bound`` clipped to each cell's keys: the first key of the cell not below it."""
        return np.clip(bound, self.sk0, self.sk1)

    def full(self, cut: np.ndarray) -> np.ndarray:
        """Pairs of each cell with key ``sk < cut``: all of its rows."""
        return (self.sq1 - self.sq0) * (cut - self.sk0)

    def pairs(self, k0: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Pairs of each cell with key ``sk`` in ``[k0, sk1)`` and ``lo <= sq - sk <= hi`` (0 where ``lo > hi``)."""
        inside = (pairs_with_offset_at_most(self.sq0, self.sq1, k0, self.sk1, -lo)
                  - pairs_with_offset_at_most(self.sq0, self.sq1, k0, self.sk1, -hi - 1))
        return np.where(lo <= hi, inside, 0)

    def grid(self, cells: np.ndarray) -> np.ndarray:
        """Per-cell counts summed back onto the tile grid."""
        return grid_from_cells(cells, self.q_at, self.k_at)


def frame_runs(edges: np.ndarray, F: int) -> tuple[np.ndarray, np.ndarray]:
    """Cut ``[edges[0], edges[-1])`` at every edge and frame boundary: run starts (plus the end)
    and, per edge, the index of the first run at or after it."""
    inner = np.arange(ceil_div(int(edges[0]) + 1, F) * F, int(edges[-1]), F, dtype=np.int64)
    points = np.union1d(edges, inner)
    return points, np.searchsorted(points, edges)


# -- the SVG masks ---------------------------------------------------------------------------

def band_window(geometry: VideoGeometry, multiplier: float) -> int:
    """SVG band half-width ``W = ceil(multiplier * F / 128) * 128`` tokens."""
    multiplier = check_multiplier(multiplier)
    return ceil_div(int(np.ceil(multiplier * geometry.F)), BAND_QUANTUM) * BAND_QUANTUM


def density_band_window(geometry: VideoGeometry, density: float) -> int:
    """MaxDiffusion's band half-width for a retained pair density: ``W = ceil(L (1 - sqrt(1 - density)) / 128) 128``.

    A pure band of half-width ``w`` keeps about ``1 - (1 - w / L)^2`` of the pairs; MaxDiffusion solves that for
    ``w`` and rounds up to 128 tokens, at most ``L - 1`` (``svg_execution_band_width`` in
    ``src/maxdiffusion/models/wan/transformers/svg_attention.py`` of AI-Hypercomputer/maxdiffusion at db8c0cd4).
    The first-frame sink and tile rounding then change the pairs really kept.
    """
    if isinstance(density, bool) or not isinstance(density, (int, float, np.integer, np.floating)) \
            or not (np.isfinite(density) and 0 < density <= 1):
        raise BadInput(f"density must be in (0, 1] (MaxDiffusion's retained pair density), got {density!r}")
    L = geometry.L
    if density >= 1:
        return L - 1
    width = ceil_div(int(np.ceil(L * (1.0 - np.sqrt(1.0 - float(density))))), BAND_QUANTUM) * BAND_QUANTUM
    return min(width, L - 1)


def check_kept(kept, name: str = "kept") -> float:
    """``kept``, the fraction of ``(q, k)`` pairs a mask keeps (SVG's ``sparsity``), as a float in the open
    interval (0, 1); else :class:`BadInput` naming ``name``."""
    if isinstance(kept, bool) or not isinstance(kept, (int, float, np.integer, np.floating)) \
            or not (np.isfinite(kept) and 0 < kept < 1):
        raise BadInput(f"{name} must be in the open interval (0, 1) (the fraction of (q, k) pairs kept), got {kept!r}")
    return float(kept)


def multiplier_for_kept(geometry: VideoGeometry, kept: float) -> float:
    """The band multiplier whose SVG mask keeps the fraction ``kept`` of all pairs.

    We follow SVG's convention: its ``sparsity`` argument (0.3 for Wan) is the *kept* fraction,
    ``density = (#allowed pairs) / L^2``.  The band of half-width ``W`` plus the sink of ``F`` keys
    keeps ``L*F + (L^2 - (L-W)^2 - W) - #(sink and band)`` pairs, which we count exactly
    (:meth:`BandSinkMask.num_allowed`).  Since ``W`` moves in steps of 128 tokens we return the
    multiplier ``W / F`` of the sparse step (one that drops some pair) whose density is closest to the
    target (the sink alone sets a floor of about ``1 / T``); a target nearer every pair than the widest sparse
    step gets that step, never a dense mask reported as a kept fraction.  A grid so small that the first step
    already keeps every pair has no sparse mask at all: refused.
    """
    kept = check_kept(kept)
    g = geometry
    steps = np.arange(1, ceil_div(g.L, BAND_QUANTUM) + 1)
    density = lambda i: BandSinkMask(g.L, g.F, int(steps[i]) * BAND_QUANTUM).density()  # noqa: E731
    if density(0) >= 1:
        raise BadInput(f"kept {kept:g} cannot be reached on a grid of L = {g.L} tokens (F = {g.F}): the band moves in "
                       f"steps of {BAND_QUANTUM} tokens and its first step (W = {BAND_QUANTUM}) already keeps "
                       "every pair; give a larger geometry, or a multiplier")
    lo, hi = 0, len(steps) - 1
    # density grows with W: binary search for the first step at or above the target
    while lo < hi:
        mid = (lo + hi) // 2
        if density(mid) >= kept:
            hi = mid
        else:
            lo = mid + 1
    # the step below is sparse (density(0) < 1); the step found is a candidate only if it is sparse too
    best = min({max(lo - 1, 0)} | ({lo} if density(lo) < 1 else set()), key=lambda i: abs(density(i) - kept))
    return float(steps[best] * BAND_QUANTUM / g.F)


def _resolve_multiplier(geometry, multiplier, kept) -> float:
    kept, multiplier = mask_density(kept, multiplier)
    return multiplier if multiplier is not None else multiplier_for_kept(geometry, kept)


def svg_mask(geometry, multiplier: float | None = None, *, kept: float | None = None) -> BandSinkMask:
    """The SVG band + first-frame sink mask (spatial heads; temporal heads after the transform)."""
    g = get_geometry(geometry)
    return BandSinkMask(g.L, g.F, band_window(g, _resolve_multiplier(g, multiplier, kept)))


def temporal_frame_major_mask(geometry, multiplier: float | None = None, *,
                              kept: float | None = None) -> PermutedMask:
    """The SVG temporal mask expressed in frame-major order (what the layout transform avoids)."""
    g = get_geometry(geometry)
    return PermutedMask(svg_mask(g, multiplier, kept=kept), g)


MASK_KINDS = ("spatial", "temporal", "temporal-frame-major", "dense")


def make_mask(kind: str, geometry, multiplier: float | None = None, *,
              kept: float | None = None) -> Mask:
    """A mask by name, as the command line offers them.

    ``spatial`` and ``temporal`` are the same band + sink mask (temporal heads run it after the
    layout transformation); ``temporal-frame-major`` is the strided mask before the transform.
    """
    g = get_geometry(geometry)
    if kind == "dense":   # the explorer passes its density along with every head kind: a dense mask has no band
        return DenseMask(g.L)
    if kind in ("spatial", "temporal"):
        return svg_mask(g, multiplier, kept=kept)
    if kind == "temporal-frame-major":
        return temporal_frame_major_mask(g, multiplier, kept=kept)
    raise BadInput(f"mask must be one of {', '.join(MASK_KINDS)}, got {kind!r}")


# -- alignment -------------------------------------------------------------------------------

#: Alignment modes that judge each tile alone, by the share of its valid pairs the mask allows.
TILE_RULE_MODES = ("snap", "cover", "inner")
#: Alignment modes that keep the pairs executed at the exact mask's count: budget-preserving rounding of the
#: boundary tiles over the whole grid (``balanced-global``) or within each q tile row (``balanced-row``).
BALANCED_MODES = ("balanced-global", "balanced-row")
ALIGN_MODES = TILE_RULE_MODES + BALANCED_MODES
#: The modes as narrow tables head them: the balanced ones by what their budget spans (``global``, ``row``).
ALIGN_MODE_SHORT = {m: m.removeprefix("balanced-") for m in ALIGN_MODES}
#: What the short names mean, for a table's legend.
ALIGN_MODE_LEGEND = ("global, row: balanced-global, balanced-row (budget-preserving rounding of the boundary tiles, "
                     "one budget for the grid or per q tile row)")


#: The most tiles one classification or alignment handles: each takes about 85 bytes of working
#: memory, so this caps a call near 0.7 GB and a few seconds (1440p with 128 x 128 tiles has 5.6M).
MAX_TILES = 2**23


def tile_grid(L: int, tile: Tile) -> tuple[np.ndarray, np.ndarray]:
    """The q and kv tile edges of an ``L x L`` score matrix, ``0, block, 2 block, ...`` each covering ``L`` padded to
    a multiple of the tile's side, refusing grids beyond :data:`MAX_TILES`."""
    block_q, block_kv = check_tile(tile)
    nq, nk = ceil_div(L, block_q), ceil_div(L, block_kv)
    if nq * nk > MAX_TILES:
        raise BadInput(f"block_q x block_kv = {block_q} x {block_kv} cuts L = {L} into {nq} x {nk} = "
                       f"{nq * nk:,} tiles; at most {MAX_TILES:,} (2**23) are classified at once "
                       "(about 85 bytes each): use larger blocks or a smaller geometry")
    return np.arange(nq + 1, dtype=np.int64) * block_q, np.arange(nk + 1, dtype=np.int64) * block_kv


def tile_valid_lengths(L: int, edges: np.ndarray) -> np.ndarray:
    """How many positions of each tile between ``edges`` lie inside ``L`` (the last tile may be padded)."""
    return np.minimum(edges[1:], L) - edges[:-1]


def tile_valid_pairs(L: int, q_edges: np.ndarray, k_edges: np.ndarray) -> np.ndarray:
    """``int64 [nq, nk]``: the pairs of each tile whose row and key both lie inside ``L``.

    A tile whose allowed-pair count equals this holds no masked pair inside the sequence.
    """
    return tile_valid_lengths(L, q_edges)[:, None] * tile_valid_lengths(L, k_edges)[None, :]


@functools.lru_cache(maxsize=16)
def _tile_pairs(mask: Mask, tile: Tile) -> tuple[np.ndarray, np.ndarray]:
    """Read-only ``(allowed, valid)`` pairs of each tile of ``mask``: every alignment mode rounds the same counts,
    so a caller trying several modes on one mask (the C3 search) counts them once."""
    qe, ke = tile_grid(mask.L, tile)
    counts, valid = mask.count_grid(qe, ke), tile_valid_pairs(mask.L, qe, ke)
    counts.setflags(write=False)
    valid.setflags(write=False)
    return counts, valid


def check_mask(mask, name: str = "mask") -> Mask:
    """``mask`` if it is a :class:`Mask` (``svg_mask``, ``make_mask``, ``ArrayMask`` of a bool array, ...), else
    :class:`BadInput` naming ``name``: a mask kind's name or a raw array is not a mask."""
    if not isinstance(mask, Mask):
        raise BadInput(f"{name} must be a Mask (svg_mask(...), make_mask(...), ArrayMask(bool array), ...), "
                       f"got {type(mask).__name__}")
    return mask


def align(mask: Mask, tile: Tile, mode: str = "snap") -> TileMask:
    """A tile-aligned version of ``mask`` for ``tile`` (``Tile(block_q, block_kv)``).

    Each tile is kept whole or dropped whole, judged by the fraction ``p`` of its valid pairs
    (rows and keys inside ``L``) that ``mask`` allows:

    - ``snap``: keep iff ``p >= 1/2`` — the aligned mask closest to the original (fewest pairs
      added + dropped).  For the SVG band with square tiles this keeps exactly the kv tiles within
      ``w`` tiles of the q tile's diagonal, where ``w`` is the largest tile offset whose tile still
      lies at least half inside the band (about ``W / block``); the sink becomes its first
      ``F // block_kv`` tiles plus the boundary tile if the sink (plus band) fills half of it.
      Its pair count drifts from the mask's by up to a few percent (notebook 03).
    - ``cover``: keep iff ``p > 0`` — a superset; never drops an allowed pair.
    - ``inner``: keep iff ``p == 1`` — a subset; never adds a pair.
    - ``balanced-global`` / ``balanced-row``: budget-preserving rounding (:func:`balanced_keep`): every
      tile with ``p == 1`` kept, every boundary tile (``0 < p < 1``) ranked by ``p`` and a prefix kept
      whose valid pairs come closest to the pairs the mask allows in all boundary tiles (of the grid, or
      of each q tile row with each row's miss carried to the next), so the aligned mask executes as many
      pairs as the mask allows, to within half a tile.
    """
    check_mask(mask)
    if not isinstance(mode, str) or mode not in ALIGN_MODES:
        raise BadInput(f"align mode must be one of {', '.join(ALIGN_MODES)}, got {mode!r}")
    tile = check_tile(tile)
    counts, valid = _tile_pairs(mask, tile)
    if mode == "snap":
        keep = 2 * counts >= valid
    elif mode == "cover":
        keep = counts > 0
    elif mode == "inner":
        keep = counts == valid
    else:
        keep = balanced_keep(counts, valid, per_row=mode == "balanced-row")
    return TileMask(mask.L, tile.block_q, tile.block_kv, keep)


def balanced_keep(counts: np.ndarray, valid: np.ndarray, *, per_row: bool = False, carry: bool = True,
                  boundary: np.ndarray | None = None) -> np.ndarray:
    """bool ``[nq, nk]``: the tiles budget-preserving rounding keeps, from each tile's allowed and valid pairs.

    Tiles whose valid pairs are all allowed are kept and empty ones dropped; the *boundary* tiles
    (``0 < counts < valid``) are ranked by their allowed share ``counts / valid`` (ties: more allowed
    pairs first, then row, then column), and the shortest prefix whose valid pairs come closest to
    the budget, the boundary tiles' allowed pairs, is kept (none, if keeping none is closest).
    ``boundary`` (bool ``[nq, nk]``) names the tiles to round instead, for a caller whose tile classes differ
    (MaxDiffusion's also round padded and sink-plus-band tiles whose pairs are all allowed).
    ``per_row``: one budget per q tile row instead of one for the grid; with ``carry`` each row's
    budget also takes the pairs the rows above it missed or overshot, so the grid's total stays
    within half a tile of the mask's (without it, row errors of one sign add up: ``svgtpu align-pairs``).

    The ranking and prefix rule are MaxDiffusion's ``global_balanced`` / ``row_balanced`` policies
    (``select_boundary_tiles`` in ``src/maxdiffusion/kernels/custom_svg_balanced_rounding_attention.py``
    of AI-Hypercomputer/maxdiffusion at 3b9f3255; its rows carry nothing), re-expressed for any mask's tile
    counts.
    """
    counts, valid = np.asarray(counts, dtype=np.int64), np.asarray(valid, dtype=np.int64)
    whole = (counts == valid) & (counts > 0)
    boundary = (counts > 0) & (counts < valid) if boundary is None else np.asarray(boundary, dtype=bool) & (counts > 0)
    keep = whole & ~boundary
    rows, cols = np.nonzero(boundary)
    if rows.size == 0:
        return keep
    allowed, size = counts[rows, cols], valid[rows, cols]
    group = rows if per_row else np.zeros_like(rows)
    order = np.lexsort((cols, rows, -allowed, -allowed / size, group))   # last key sorts first
    rows, cols, allowed, size, group = rows[order], cols[order], allowed[order], size[order], group[order]
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    owed = 0                                        # pairs the groups so far fell short of their budget
    for lo, hi in zip(starts, np.append(starts[1:], len(group))):
        target = int(allowed[lo:hi].sum()) + (owed if carry else 0)
        run = np.concatenate([[0], np.cumsum(size[lo:hi])])
        take = int(np.argmin(np.abs(run - target)))   # the first (shortest) prefix of least error
        owed = target - int(run[take])
        keep[rows[lo:lo + take], cols[lo:lo + take]] = True
    return keep


@dataclasses.dataclass(frozen=True)
class MaskDiff:
    """How an aligned mask differs from the original, in ``(q, k)`` pairs."""

    original: int   # pairs the original allows
    aligned: int    # pairs the aligned mask allows
    added: int      # allowed by aligned, not by original
    dropped: int    # allowed by original, not by aligned

    @property
    def pair_error(self) -> float:
        """``(aligned - original) / original``: how far the pairs executed drift from the mask's."""
        return (self.aligned - self.original) / max(self.original, 1)

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["pair_error"] = self.pair_error
        out["added_fraction"] = self.added / max(self.original, 1)
        out["dropped_fraction"] = self.dropped / max(self.original, 1)
        return out


def alignment_diff(original: Mask, aligned: TileMask) -> MaskDiff:
    """Count the pairs alignment added and dropped, without materializing either mask."""
    check_mask(original, "original")
    if not isinstance(aligned, TileMask):
        raise BadInput(f"aligned must be a TileMask (what align returns), got {type(aligned).__name__}")
    if original.L != aligned.L:
        raise BadInput(f"masks differ in length: {original.L} vs {aligned.L}")
    counts = original.count_grid(*tile_grid(aligned.L, aligned.tile))
    both = int(counts[aligned.tiles].sum())
    n_orig, n_aligned = original.num_allowed(), aligned.num_allowed()
    return MaskDiff(n_orig, n_aligned, n_aligned - both, n_orig - both)
