"""Masks of the newer sparse video attention methods, with analytic tile counts.

- :class:`BlockMask`: a mask made of contiguous *variable-size* blocks: rows ``[q_edges[a],
  q_edges[a+1])`` may attend to keys ``[k_edges[b], k_edges[b+1])`` iff ``table[a, b]``.  This is
  what a token permutation that makes groups contiguous produces: SVG2's k-means clusters
  (:mod:`svgtpu.attention.svg2`, row and key groups differ) and STA's 3-D tiles.  Kernel tiles are uniform,
  blocks are not, so where block edges fall inside a kernel tile that tile is partial: the alignment
  question of claim C3 again (:func:`svgtpu.masks.core.align` snaps it).
- :class:`STAMask`: sliding-tile attention (STA, Zhang et al. 2025): tokens are reordered so that
  each ``tile = (tt, th, tw)`` cube of the ``T x H x W`` grid is contiguous (:func:`sta_order`), and
  a query tile attends to the ``window = (wt, wh, ww)`` key tiles around it, the window shifted
  inward at the video's borders so every query tile sees the same number of tiles per axis (when the
  axis has that many).  Edge tiles are truncated where a dimension is not a tile multiple.
- :class:`RadialMask`: radial attention (Li et al. 2025), in the model's frame-major order.  Query
  frame ``i`` and key frame ``j`` at distance ``d = |i - j|`` fall in band ``r = floor(log2(max(d,
  1)))``; while ``2**r <= F`` a query at spatial index ``a`` sees keys ``b`` with ``(|a - b| + 1) *
  2**r <= F`` (the spatial window halves with each band, so compute density decays
  exponentially with temporal distance: ``O(L log L)`` pairs); beyond that only ``a == b`` on frames
  with ``d % ceil(2**r / F) == 0``.  ``sink_frames`` leading key frames are seen by every query.
  ``window_fraction`` (ours, default 1 = the paper's mask) scales ``F`` in both rules, so the kept
  fraction can be matched to other methods on short clips where ``log2 T`` bands barely decay.

Every mask here is frozen and hashable, so the kernel can plan it statically.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np

from svgtpu.geometry import VideoGeometry, ceil_div, check_positive_int, get_geometry
from svgtpu.errors import BadInput
from svgtpu.masks.core import (Mask, frame_runs, grid_from_cells, table_grid,
                          pairs_with_offset_at_most)


def _check_edges(name: str, edges, L: int) -> np.ndarray:
    edges = np.asarray(edges, dtype=np.int64).reshape(-1)
    if len(edges) < 2 or edges[0] != 0 or edges[-1] != L or np.any(np.diff(edges) < 0):
        raise BadInput(f"{name} must be non-decreasing, start at 0 and end at L={L}; got {edges[:8]}...")
    return edges


class _BlockStructure(Mask):
    """Shared behaviour of masks that are a boolean table over contiguous row / key blocks."""

    q_edges: np.ndarray
    k_edges: np.ndarray
    table: np.ndarray

    def allowed(self, q, k):
        a = np.searchsorted(self.q_edges, np.asarray(q), side="right") - 1
        b = np.searchsorted(self.k_edges, np.asarray(k), side="right") - 1
        return self.table[np.clip(a, 0, len(self.q_edges) - 2), np.clip(b, 0, len(self.k_edges) - 2)]

    def _count_grid(self, q_edges, k_edges):
        return table_grid(self.table, self.q_edges, self.k_edges, q_edges, k_edges)


@dataclasses.dataclass(frozen=True, eq=False)
class BlockMask(_BlockStructure):
    """``allowed(q, k) = table[a, b]`` for ``q`` in row block ``a`` and ``k`` in key block ``b``.

    ``q_edges`` / ``k_edges``: non-decreasing block boundaries from 0 to ``L`` (empty blocks are
    allowed: a cluster with no token); ``table``: bool ``[len(q_edges) - 1, len(k_edges) - 1]``.
    """

    L: int
    q_edges: np.ndarray
    k_edges: np.ndarray
    table: np.ndarray

    def __post_init__(self):
        check_positive_int("mask length L", self.L)
        qe, ke = _check_edges("q_edges", self.q_edges, self.L), _check_edges("k_edges", self.k_edges, self.L)
        table = np.asarray(self.table)
        if table.dtype != np.bool_ or table.shape != (len(qe) - 1, len(ke) - 1):
            raise BadInput(f"table must be bool with shape {(len(qe) - 1, len(ke) - 1)}, "
                           f"got {table.dtype} {table.shape}")
        digest = hashlib.sha1()
        for name, arr in (("q_edges", qe), ("k_edges", ke), ("table", table.copy())):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
            digest.update(arr.tobytes())
        object.__setattr__(self, "_digest", digest.hexdigest())

    def __eq__(self, other):
        return (isinstance(other, BlockMask) and self.L == other.L and self._digest == other._digest
                and np.array_equal(self.q_edges, other.q_edges) and np.array_equal(self.k_edges, other.k_edges)
                and np.array_equal(self.table, other.table))

    def __hash__(self):
        return hash((self.L, self._digest))


# -- sliding tile attention ------------------------------------------------------------------

def _check_triple(name: str, value) -> tuple[int, int, int]:
    try:
        triple = tuple(int(v) for v in value)
    except TypeError:
        triple = ()
    if len(triple) != 3 or any(v <= 0 for v in triple) or any(float(v) != t for v, t in zip(value, triple)):
        raise BadInput(f"{name} must be three positive integers (frames, rows, columns), got {value!r}")
    return triple


def _axis_tiles(n: int, t: int) -> np.ndarray:
    """Tile index of each of ``n`` positions along one axis with tiles of ``t`` (last one truncated)."""
    return np.arange(n) // t


def sta_order(geometry, sta_tile) -> np.ndarray:
    """Permutation ``perm`` with ``x_tiled = x[perm]``: frame-major tokens to STA's tile-major order, ``sta_tile`` its
    ``(frames, rows, columns)`` cube of tokens (not a kernel's ``block_q x block_kv`` tile).

    Tiles are visited frame-tile, row-tile, column-tile (raster); inside a tile, tokens keep raster
    order.  Undo with ``x[np.argsort(perm)]``.
    """
    g = get_geometry(geometry)
    tt, th, tw = _check_triple("sta_tile", sta_tile)
    t, h, w = np.meshgrid(np.arange(g.T), np.arange(g.H), np.arange(g.W), indexing="ij")
    frame_major = (t * g.H + h) * g.W + w
    key = np.lexsort(((w % tw).ravel(), (h % th).ravel(), (t % tt).ravel(),
                      (w // tw).ravel(), (h // th).ravel(), (t // tt).ravel()))
    return frame_major.ravel()[key]


def _window_relation(n_tiles: int, window: int) -> np.ndarray:
    """bool ``[n, n]``: key tile ``j`` is in the ``window``-tile window of query tile ``i`` (shifted inward)."""
    w = min(window, n_tiles)
    start = np.clip(np.arange(n_tiles) - w // 2, 0, n_tiles - w)
    j = np.arange(n_tiles)
    return (j[None, :] >= start[:, None]) & (j[None, :] < start[:, None] + w)


@dataclasses.dataclass(frozen=True)
class STAMask(_BlockStructure):
    """Sliding-tile attention in STA's tile-major token order (see the module doc and :func:`sta_order`)."""

    geometry: VideoGeometry
    tile: tuple[int, int, int]
    window: tuple[int, int, int]

    def __post_init__(self):
        object.__setattr__(self, "geometry", get_geometry(self.geometry))
        object.__setattr__(self, "tile", _check_triple("tile", self.tile))
        object.__setattr__(self, "window", _check_triple("window", self.window))

    @property
    def L(self) -> int:  # type: ignore[override]
        return self.geometry.L

    @functools.cached_property
    def tile_grid(self) -> tuple[int, int, int]:
        """Number of tiles along (frames, rows, columns)."""
        g = self.geometry
        return tuple(ceil_div(n, t) for n, t in zip((g.T, g.H, g.W), self.tile))

    @functools.cached_property
    def q_edges(self) -> np.ndarray:  # type: ignore[override]
        g = self.geometry
        sizes = [np.bincount(_axis_tiles(n, t)) for n, t in zip((g.T, g.H, g.W), self.tile)]
        volume = np.einsum("a,b,c->abc", *sizes).ravel()
        return np.concatenate([[0], np.cumsum(volume)]).astype(np.int64)

    @property
    def k_edges(self) -> np.ndarray:  # type: ignore[override]
        return self.q_edges

    def density(self) -> float:
        """Kept fraction without the tile table: the window is a product over the three axes, so
        the allowed pairs are the product of each axis's ``sizes @ relation @ sizes``."""
        g = self.geometry
        pairs = 1.0
        for n, t, w in zip((g.T, g.H, g.W), self.tile, self.window):
            sizes = np.bincount(_axis_tiles(n, t)).astype(np.float64)
            pairs *= sizes @ _window_relation(len(sizes), w) @ sizes / float(n) ** 2
        return pairs

    @functools.cached_property
    def table(self) -> np.ndarray:  # type: ignore[override]
        rel = [_window_relation(n, w) for n, w in zip(self.tile_grid, self.window)]
        nt, nh, nw = self.tile_grid
        full = np.einsum("ad,be,cf->abcdef", *[r.astype(np.int8) for r in rel])
        return full.reshape(nt * nh * nw, nt * nh * nw).astype(bool)


# -- radial attention ------------------------------------------------------------------------

def _radial_frame_windows(T: int, F: int, sink_frames: int, window_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Per frame pair ``(i, j)``: spatial half-width ``w`` (``|a - b| <= w``; -1 = none) and ``sink``."""
    d = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
    scale = 2.0 ** np.floor(np.log2(np.maximum(d, 1)))
    span = window_fraction * F / scale          # visible spatial span (|a - b| + 1 <= span)
    width = np.floor(span).astype(np.int64) - 1
    stride = np.ceil(1.0 / np.maximum(span, 1e-300))
    width = np.where(span >= 1, width, np.where(d % stride == 0, 0, -1))
    sink = np.broadcast_to(np.arange(T)[None, :] < sink_frames, (T, T))
    return width, sink


@dataclasses.dataclass(frozen=True)
class RadialMask(Mask):
    """Radial attention's static mask in frame-major order (see the module doc)."""

    geometry: VideoGeometry
    sink_frames: int = 0
    window_fraction: float = 1.0

    def __post_init__(self):
        g = get_geometry(self.geometry)
        object.__setattr__(self, "geometry", g)
        if not (isinstance(self.window_fraction, (int, float)) and 0 < self.window_fraction <= 1):
            raise BadInput(f"window_fraction must be in (0, 1], got {self.window_fraction!r}")
        if isinstance(self.sink_frames, bool) or not isinstance(self.sink_frames, (int, np.integer)) \
                or not 0 <= self.sink_frames <= g.T:
            raise BadInput(f"sink_frames must be an integer in [0, T={g.T}], got {self.sink_frames!r}")

    @property
    def L(self) -> int:  # type: ignore[override]
        return self.geometry.L

    @functools.cached_property
    def frame_windows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(width [T, T], sink [T, T])``: spatial half-width per frame pair (-1: none) and sink pairs."""
        return _radial_frame_windows(self.geometry.T, self.geometry.F, self.sink_frames, self.window_fraction)

    def allowed(self, q, k):
        F = self.geometry.F
        width, sink = self.frame_windows
        i, j = np.asarray(q) // F, np.asarray(k) // F
        return sink[i, j] | (np.abs(np.asarray(q) % F - np.asarray(k) % F) <= width[i, j])

    def _count_grid(self, q_edges, k_edges):
        # Refine both grids with the frame boundaries so every cell lies in one frame pair, count
        # each cell as a band (or a full sink block) in frame-local coordinates, and sum back.
        F, T = self.geometry.F, self.geometry.T
        qf, q_at = frame_runs(q_edges, F)
        kf, k_at = frame_runs(k_edges, F)
        q0, q1, k0, k1 = qf[:-1, None], qf[1:, None], kf[None, :-1], kf[None, 1:]
        fi = np.minimum(q0 // F, T - 1)
        fj = np.minimum(k0 // F, T - 1)
        width, sink = self.frame_windows
        w, s = width[fi, fj], sink[fi, fj]
        a0, a1, b0, b1 = q0 - fi * F, q1 - fi * F, k0 - fj * F, k1 - fj * F
        band = np.where(w >= 0, pairs_with_offset_at_most(a0, a1, b0, b1, w)
                        - pairs_with_offset_at_most(a0, a1, b0, b1, -w - 1), 0)
        return grid_from_cells(np.where(s, (q1 - q0) * (k1 - k0), band), q_at, k_at)

__all__ = ["BlockMask", "STAMask", "RadialMask", "sta_order"]
