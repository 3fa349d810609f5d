"""Which settings give the write-up's C3 numbers?  An exhaustive, analytic search.

The write-up reports that 27.55 % of the computed tiles were partial before aligning the SVG masks
to tiles and 2.22 % after (:data:`svgtpu.facts.claims.REPORTED`), without saying for which mask,
resolution or tile.  This module counts both shares, exactly, over every setting of

- the resolution (Wan's 81-frame token grids, :data:`svgtpu.geometry.PRESETS`), the tile
  (:data:`TILES`: Splash's default, MaxDiffusion's Wan tiles, squares) and the band: every half-width
  ``W`` (a multiple of SVG's 128-token quantum) whose mask keeps between :data:`KEPT_RANGE` of the pairs;
- the first-frame sink on or off;
- the heads: all on the band (spatial heads, and temporal heads after SVG's layout transform: the
  same mask), or a share of temporal heads left in frame-major order (the strided mask), counted per
  layer (pooled tiles of the layer's heads), per head (the mean of the heads' shares) or over the
  union of the heads' masks (:class:`UnionMask`: any share strictly between 0 and 1);
- the alignment: mode (``snap``, ``cover``, ``inner``), granularity (the tile, or the mask's
  128-token quantum), and whether the sink is aligned with the band or left exact.

Band heads are counted in closed form, one tile row at a time (:func:`band_tile_counts`, all ``W``
at once); the rest use the masks' analytic tile counts (:meth:`Mask.count_grid`), never ``L x L``.
A setting *matches* when both shares round (to 0.01 %) to the reported ones.  Everything is
``computed``.

:func:`maxdiffusion_search` counts the same two shares the way MaxDiffusion's SVG kernel does (AI-Hypercomputer/
maxdiffusion, ``src/maxdiffusion/kernels/custom_svg_static_range_attention.py`` at db8c0cd4, ``_classify_tiles``,
and ``custom_svg_balanced_rounding_attention.py`` at 3b9f3255): *before*, the exact band's boundary tiles over
all tiles it touches; *after* budget-preserving rounding, the tiles touching the sequence end (the only ones it
runs with a mask) over all tiles it runs; with its density -> band rule
(:func:`svgtpu.masks.core.density_band_window`), over its tiles and any density its configs accept.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Sequence

import numpy as np

from svgtpu.geometry import Tile, VideoGeometry, ceil_div, check_tile, get_geometry
from svgtpu.masks.core import (ALIGN_MODE_LEGEND, ALIGN_MODE_SHORT, ALIGN_MODES, BAND_QUANTUM, BandSinkMask, FrameRuns,
                               Mask, PermutedMask, TileMask, align, balanced_keep, density_band_window, tile_grid,
                               tile_valid_lengths, tile_valid_pairs)
from svgtpu.masks.tiles import TileStats, classify
from svgtpu.recipes import (MAXDIFFUSION_DEFAULT_TILE, MAXDIFFUSION_FIXED_M_TILE, MAXDIFFUSION_SVG_DENSITIES,
                            MAXDIFFUSION_SVG_TILE, MAXDIFFUSION_V6E_TILE, SPLASH_DEFAULT_TILE)
from svgtpu.setting import PRODUCTION
from svgtpu.facts.claims import REPORTED, rounds_to
from svgtpu.errors import BadInput

TARGET = (REPORTED["C3", "partial_share_before"], REPORTED["C3", "partial_share_after"])
GEOMETRIES = ("480p", "720p", "1080p", "1440p")
TILES = tuple(dict.fromkeys([SPLASH_DEFAULT_TILE.tile, MAXDIFFUSION_DEFAULT_TILE.tile, MAXDIFFUSION_V6E_TILE.tile,
                             Tile(256, 256), Tile(1024, 1024), Tile(2048, 2048),
                             Tile(PRODUCTION.block_q, PRODUCTION.block_q), Tile(4096, 4096)]))
#: Kept fractions searched (every band half-width in between).
KEPT_RANGE = (0.02, 0.9)
#: Shares of temporal heads left in frame-major order (Wan 2.1 14B has 40 heads per layer).
TEMPORAL_SHARES = tuple(k / 40 for k in range(1, 41))
HEADS = ("band", "strided-per-layer", "strided-per-head", "strided-union")
GRANULARITIES = ("tile", "quantum")
#: The strided (frame-major temporal) mask is counted on grids of at most this many tiles, at the
#: band widths whose kept fraction first passes each multiple of ``STRIDED_KEPT_STEP``: its count is
#: analytic but costs (tiles + frames)^2 per width.
STRIDED_MAX_TILES = 2**15
STRIDED_KEPT_STEP = 0.005
#: 128-token alignment is searched where the mask has at most this many 128 x 128 blocks (to 1080p).
QUANTUM_MAX_BLOCKS = 2**21
#: Before-shares within this of the target get their after-shares computed (and can be "nearest").
NEAR = 0.0015
#: MaxDiffusion's Wan tiles, searched with its counting: its Wan 2.1 14B default and v6e tiles (base_wan_14b.yml,
#: :mod:`svgtpu.recipes`), its Wan 2.2 default 1024 x 1024 (``src/maxdiffusion/configs/base_wan_27b.yml`` at
#: 25357427, ``flash_block_sizes``), and from ``docs/svg.md`` at 2a52ee9c the SVG tile 3328 x 2816 and the dense
#: fixed-M tile 6400 x 2048.
MAXDIFFUSION_TILES = tuple(dict.fromkeys([MAXDIFFUSION_DEFAULT_TILE.tile, Tile(1024, 1024), MAXDIFFUSION_V6E_TILE.tile,
                                          MAXDIFFUSION_SVG_TILE.tile, MAXDIFFUSION_FIXED_M_TILE.tile]))
#: Densities searched with MaxDiffusion's counting: its configs accept any retained density in (0, 1]
#: (``svg_execution_band_width``); every 0.05 and its moderate policy's two.
MAXDIFFUSION_DENSITIES = tuple(sorted({round(0.05 * k, 2) for k in range(1, 20)} | set(MAXDIFFUSION_SVG_DENSITIES)))
#: MaxDiffusion's rounding policies: one pair budget for all boundary tiles, or one per q tile row.
MAXDIFFUSION_POLICIES = {"global": False, "row": True}


def band_tile_counts(L: int, sink: int, windows, tile: Tile) -> tuple[np.ndarray, np.ndarray]:
    """``(full, partial)`` tile counts of ``BandSinkMask(L, sink, W)`` for every ``W`` in ``windows``.

    Closed form per tile row ``[q0, q1)``: the kv tiles ``j`` a band or sink reaches form the union of
    ``[0, ceil(sink / bkv))`` and ``[ceil((q0 - W + 1) / bkv) - 1, floor((q1 - 1 + W) / bkv)]``; the
    full ones (no padded key, every pair allowed) the union of ``[0, floor(sink / bkv))`` and the
    ``j`` with ``(j + 1) bkv - 1 - q0 <= W`` and ``q1 - 1 - max(j bkv, sink) <= W``.  Same as
    :func:`svgtpu.masks.tiles.classify` (tested), in ``O(rows x windows)``.
    """
    W = np.asarray(windows, dtype=np.int64)[:, None]
    block_q, block_kv = tile
    nq, nk = ceil_div(L, block_q), ceil_div(L, block_kv)
    q0 = np.arange(nq, dtype=np.int64)[None, :] * block_q
    q1 = np.minimum(q0 + block_q, L)
    unpadded = L // block_kv                        # kv tiles 0 .. unpadded-1 hold no padded key

    def union(a, lo, hi):                           # |[0, a) U [lo, hi]|, all clipped to [0, n)
        lo, hi = np.maximum(lo, 0), hi
        return a + np.maximum(hi - np.maximum(lo, a) + 1, 0)

    reach = union(min(ceil_div(sink, block_kv), nk),
                  -((W - q0 - 1) // block_kv) - 1 + 0 * q0,        # ceil((q0 - W + 1) / bkv) - 1
                  np.minimum((q1 - 1 + W) // block_kv, nk - 1))
    jf_lo = np.where(sink >= q1 - 1 - W, 0, -((W - q1 + 1) // block_kv))   # ceil((q1 - 1 - W) / bkv)
    jf_hi = np.minimum((q0 + W - block_kv + 1) // block_kv, unpadded - 1)
    full = union(min(sink // block_kv, unpadded), jf_lo, jf_hi)
    full_total = full.sum(axis=1)
    return full_total, reach.sum(axis=1) - full_total


@functools.lru_cache(maxsize=64)
def _kept(geometry: VideoGeometry, sink: bool) -> tuple[np.ndarray, np.ndarray]:
    W = np.arange(1, ceil_div(geometry.L, BAND_QUANTUM) + 1, dtype=np.int64) * BAND_QUANTUM
    s = geometry.F if sink else 0
    kept = np.array([BandSinkMask(geometry.L, s, int(w)).num_allowed() for w in W]) / float(geometry.L) ** 2
    return W, kept


def windows_for(geometry: VideoGeometry, sink: bool, kept_range=KEPT_RANGE) -> tuple[np.ndarray, np.ndarray]:
    """Every band half-width (multiple of 128) whose mask keeps a fraction in ``kept_range``, and those fractions."""
    W, kept = _kept(geometry, sink)
    pick = (kept >= kept_range[0]) & (kept <= kept_range[1])
    return W[pick], kept[pick]


@dataclasses.dataclass(frozen=True)
class UnionMask(Mask):
    """``band`` or its strided version: the union of a layer's spatial and untransformed temporal heads' masks.

    Both in frame-major order.  Counted like :class:`PermutedMask`, one (query frame, key frame) run
    pair at a time: there the band is an offset interval in ``sq - sk`` (``[-W - df F, W - df F]``),
    the strided band another (``[ceil((-W - df) / T), floor((W - df) / T)]``), each sink a key prefix,
    and the union of two intervals has a closed form.
    """

    band: BandSinkMask
    geometry: VideoGeometry

    def __post_init__(self):
        if self.band.L != self.geometry.L:
            raise BadInput(f"band mask has L={self.band.L} but geometry {self.geometry} has L={self.geometry.L}")

    @property
    def L(self) -> int:  # type: ignore[override]
        return self.geometry.L

    def allowed(self, q, k):
        return self.band.allowed(q, k) | PermutedMask(self.band, self.geometry).allowed(q, k)

    def _count_grid(self, q_edges, k_edges):
        runs, w = FrameRuns.of(q_edges, k_edges, self.geometry), self.band.window
        cut = runs.keys_below(np.maximum(runs.sink(self.band.sink), runs.strided_sink(self.band.sink)))  # either sink
        (lo_a, hi_a), (lo_b, hi_b) = runs.band(w), runs.strided_band(w)
        union = (runs.pairs(cut, lo_a, hi_a) + runs.pairs(cut, lo_b, hi_b)
                 - runs.pairs(cut, np.maximum(lo_a, lo_b), np.minimum(hi_a, hi_b)))
        return runs.grid(runs.full(cut) + union)


@dataclasses.dataclass(frozen=True)
class SearchPoint:
    """One point of the search: a mask, a tile, the heads and how they are counted, the alignment."""

    geometry: str
    window: int
    kept: float
    block_q: int
    block_kv: int
    sink: bool
    heads: str = "band"               # one of HEADS
    temporal_share: float = 0.0       # share of heads strided (frame-major); "strided-union": any in (0, 1)
    align_mode: str = "snap"
    granularity: str = "tile"
    align_sink: bool = True

    @property
    def tile(self) -> Tile:
        return Tile(self.block_q, self.block_kv)

    def masks(self) -> dict[str, Mask]:
        g = get_geometry(self.geometry)
        band = BandSinkMask(g.L, g.F if self.sink else 0, self.window)
        if self.heads == "band":
            return {"band": band}
        if self.heads == "strided-union":
            return {"union": UnionMask(band, g)}
        return {"band": band, "strided": PermutedMask(band, g)}


def _stats(kinds_counts) -> TileStats:
    full, partial = kinds_counts
    return TileStats(full=int(full), partial=int(partial), empty=0)


@functools.lru_cache(maxsize=32)
def _quantum_aligned(mask, mode: str) -> TileMask:
    return align(mask, Tile(BAND_QUANTUM, BAND_QUANTUM), mode)


@functools.lru_cache(maxsize=4096)
def aligned_stats(mask, tile: Tile, mode: str, granularity: str, align_sink: bool) -> TileStats:
    """Tile stats at ``tile`` of ``mask`` aligned by ``mode`` at ``granularity``.

    ``align_sink=False`` (band masks only) snaps the band alone and keeps the sink's exact columns.
    """
    if granularity == "quantum":
        return classify(_quantum_aligned(mask, mode), tile).stats
    if align_sink or not isinstance(mask, BandSinkMask) or mask.sink == 0:
        return classify(align(mask, tile, mode), tile).stats
    band = align(BandSinkMask(mask.L, 0, mask.window), tile, mode)
    qe, ke = tile_grid(mask.L, tile)
    valid = tile_valid_pairs(mask.L, qe, ke)
    rows = (np.minimum(qe[1:], mask.L) - qe[:-1])[:, None]
    sink_pairs = rows * np.clip(np.minimum(ke[1:], mask.sink) - ke[:-1], 0, None)[None, :]
    counts = np.where(band.tiles, valid, sink_pairs)
    unpadded = (np.minimum(ke[1:], mask.L) - ke[:-1] == tile.block_kv)[None, :]
    full = int(((counts == valid) & unpadded & (counts > 0)).sum())
    return TileStats(full=full, partial=int((counts > 0).sum()) - full, empty=int((counts == 0).sum()))


def combine(stats: dict[str, TileStats], heads: str, temporal_share: float) -> float:
    """The partial share of a layer whose heads are band heads and a ``temporal_share`` of strided ones."""
    if heads == "band":
        return stats["band"].partial_share
    if heads == "strided-union":
        return stats["union"].partial_share
    p = temporal_share
    if heads == "strided-per-head":
        return (1 - p) * stats["band"].partial_share + p * stats["strided"].partial_share
    partial = (1 - p) * stats["band"].partial + p * stats["strided"].partial
    computed = partial + (1 - p) * stats["band"].full + p * stats["strided"].full
    return partial / computed if computed else 0.0


def after_shares(setting: SearchPoint) -> list[dict]:
    """The after-share of ``setting``'s mask(s) under every alignment mode, granularity and sink choice."""
    masks = setting.masks()
    out = []
    for mode, granularity, align_sink in itertools.product(ALIGN_MODES, GRANULARITIES, (True, False)):
        if not align_sink and (granularity == "quantum" or not setting.sink):
            continue
        if granularity == "quantum" and (setting.heads != "band" or
                                         ceil_div(get_geometry(setting.geometry).L, BAND_QUANTUM) ** 2 > QUANTUM_MAX_BLOCKS):
            continue   # out of this search's budget (see QUANTUM_MAX_BLOCKS)
        stats = {k: aligned_stats(m, setting.tile, mode, granularity, align_sink)
                 for k, m in masks.items()}
        out.append({"align_mode": mode, "granularity": granularity, "align_sink": align_sink,
                    "after": combine(stats, setting.heads, setting.temporal_share)})
    return out


def search(geometries=GEOMETRIES, tiles: Sequence[Tile] | None = None, *, kept_range=KEPT_RANGE,
           temporal_shares=TEMPORAL_SHARES, target: tuple[float, float] = TARGET, near: float = NEAR,
           progress: bool = True) -> dict:
    """Every setting's before-share; for those within ``near`` of the target, every after-share.

    Returns ``{"target", "searched", "candidates", "rows", "matches", "nearest", "space"}``: ``searched``
    counts the settings whose before-share was computed, ``candidates`` the rows: a :class:`SearchPoint`
    as a dict plus ``before``, ``after``, ``match`` and ``error`` (sum of the two absolute errors),
    nearest first; ``matches`` round to both target shares; ``nearest`` are the first ten rows and
    ``nearest_by_heads`` the first three of each head mix (``band``: SVG's own masks, every head on the band).
    ``geometries``: preset names or ``TxHxW`` grids; ``tiles``: :class:`~svgtpu.geometry.Tile` values
    (default :data:`TILES`); ``target``: ``(before, after)``, the write-up's by default.
    """
    from tqdm.auto import tqdm

    target_before, target_after = target
    tiles = TILES if tiles is None else [check_tile(t) for t in tiles]
    jobs = list(itertools.product(geometries, tiles, (True, False)))
    rows, searched = [], 0
    for name, tile, sink in tqdm(jobs, desc="C3 search", disable=not progress):
        bq, bkv = tile
        g = get_geometry(name)
        W, kept = windows_for(g, sink, kept_range)
        full, partial = band_tile_counts(g.L, g.F if sink else 0, W, tile)
        band_share = partial / np.maximum(full + partial, 1)
        searched += len(W)
        near_band = np.flatnonzero(np.abs(band_share - target_before) <= near)
        candidates = [(SearchPoint(name, int(W[i]), float(kept[i]), bq, bkv, sink), float(band_share[i]))
                      for i in near_band]
        nq, nk = ceil_div(g.L, bq), ceil_div(g.L, bkv)
        if nq * nk <= STRIDED_MAX_TILES:
            steps = np.floor(kept / STRIDED_KEPT_STEP)
            for i in np.flatnonzero(np.diff(steps, prepend=-1) > 0):
                band = BandSinkMask(g.L, g.F if sink else 0, int(W[i]))
                stats = {"band": TileStats(int(full[i]), int(partial[i]), 0),
                         "strided": classify(PermutedMask(band, g), Tile(bq, bkv)).stats}
                for heads, p in itertools.product(HEADS[1:3], temporal_shares):
                    before = combine(stats, heads, p)
                    searched += 1
                    if abs(before - target_before) <= near:
                        candidates.append((SearchPoint(name, int(W[i]), float(kept[i]), bq, bkv, sink, heads, p), before))
                if temporal_shares:
                    before = classify(UnionMask(band, g), Tile(bq, bkv)).stats.partial_share
                    searched += 1
                    if abs(before - target_before) <= near:
                        candidates.append((SearchPoint(name, int(W[i]), float(kept[i]), bq, bkv, sink, "strided-union"),
                                           before))
        for setting, before in candidates:
            for after in after_shares(setting):
                row = {**dataclasses.asdict(setting), **after, "before": before}
                row["match"] = rounds_to(before, target_before) and rounds_to(row["after"], target_after)
                row["error"] = abs(before - target_before) + abs(row["after"] - target_after)
                rows.append(row)
    rows.sort(key=lambda r: r["error"])
    return {"target": {"before": target_before, "after": target_after}, "searched": searched,
            "candidates": len(rows), "rows": rows, "matches": [r for r in rows if r["match"]], "nearest": rows[:10],
            "nearest_by_heads": {h: [r for r in rows if r["heads"] == h][:3] for h in HEADS},
            "space": {"geometries": list(geometries), "tiles": [f"{q}x{k}" for q, k in tiles],
                      "kept_range": list(kept_range), "heads": list(HEADS), "align_modes": list(ALIGN_MODES),
                      "granularities": list(GRANULARITIES), "temporal_shares": "k/40, k = 1..40",
                      "near": near}}


def maxdiffusion_tile_classes(mask: BandSinkMask, tile: Tile) -> dict[str, np.ndarray]:
    """MaxDiffusion's classes of the tiles of a band + sink mask (bool ``[nq, nk]`` each, and the pair counts).

    ``live``: the kv tiles from the band's first key to its last, per q tile, and the sink's tiles;
    ``full``: live tiles wholly inside the sequence whose every pair lies in the sink or every pair in the band
    (its sufficient test: a tile in the sink *and* band together stays a boundary tile); ``boundary``: the other
    live tiles; ``inside``: tiles touching no padded row or key (the others run padding-masked); ``counts`` and
    ``valid``: allowed and valid pairs per tile (what its rounding ranks).
    """
    L, W, sink, block_kv = mask.L, mask.window, mask.sink, tile.block_kv
    qe, ke = tile_grid(L, tile)
    q0, q1 = qe[:-1, None], np.minimum(qe[1:], L)[:, None] - 1          # first and last row
    k0, k1 = ke[None, :-1], np.minimum(ke[1:], L)[None, :] - 1          # first and last key
    j = np.arange(len(ke) - 1)[None, :]
    live = (j >= np.maximum(q0 - W, 0) // block_kv) & (j <= np.minimum(q1 + W, L - 1) // block_kv)
    if sink:
        live |= j <= (sink - 1) // block_kv
    inside = (qe[1:] <= L)[:, None] & (ke[1:] <= L)[None, :]
    whole = ((k1 < sink) if sink else np.zeros_like(live)) | (np.maximum(np.abs(q0 - k1), np.abs(q1 - k0)) <= W)
    full = live & inside & whole
    return {"live": live, "full": full, "boundary": live & ~full, "inside": inside,
            "counts": mask.count_grid(qe, ke), "valid": tile_valid_pairs(L, qe, ke)}


def maxdiffusion_shares(mask: BandSinkMask, tile: Tile) -> dict:
    """The C3 shares of one band + sink mask counted MaxDiffusion's way and ours, before and after balanced rounding.

    ``before``: MaxDiffusion's boundary tiles over its live tiles; ``after_global`` / ``after_row``: tiles run that
    touch the sequence end over all tiles run, after its global / per-row (no carry) rounding of its boundary tiles.
    ``ours_before`` / ``ours_after_global`` / ``ours_after_row``: our partial share (:func:`classify`: padded keys
    mask a tile, padded rows do not) of the exact mask and of ``align(mask, ..., "balanced-global" / "balanced-row")``.
    ``pair_error_*``: pairs run after rounding minus the mask's, over the mask's, MaxDiffusion's way.
    """
    c, block_kv = maxdiffusion_tile_classes(mask, tile), tile.block_kv
    counts, valid = c["counts"], c["valid"]
    exact = int(counts.sum())
    k_unpadded = (np.arange(counts.shape[1]) + 1) * block_kv <= mask.L
    ours_full = counts == tile_valid_lengths(mask.L, tile_grid(mask.L, tile)[0])[:, None] * block_kv
    ours_computed = int((counts > 0).sum())
    out = {"before": int(c["boundary"].sum()) / max(int(c["live"].sum()), 1),
           "ours_before": (ours_computed - int(ours_full.sum())) / max(ours_computed, 1)}
    for policy, per_row in MAXDIFFUSION_POLICIES.items():
        run = c["full"] | balanced_keep(counts, valid, per_row=per_row, carry=False, boundary=c["boundary"])
        out[f"after_{policy}"] = int((run & ~c["inside"]).sum()) / max(int(run.sum()), 1)
        out[f"pair_error_{policy}"] = (int(valid[run].sum()) - exact) / max(exact, 1)
        ours = balanced_keep(counts, valid, per_row=per_row)
        out[f"ours_after_{policy}"] = int((ours & ~k_unpadded[None, :]).sum()) / max(int(ours.sum()), 1)
    return out


def maxdiffusion_search(geometries=GEOMETRIES, tiles: Sequence[Tile] | None = None, densities=MAXDIFFUSION_DENSITIES, *,
                        target: tuple[float, float] = TARGET, progress: bool = True) -> dict:
    """Every (resolution, MaxDiffusion tile, density, first-frame sink on/off, rounding policy): the C3 shares counted
    MaxDiffusion's way and ours (:func:`maxdiffusion_shares`), nearest to ``target`` first under each counting.

    Returns ``{"target", "searched", "rows", "matches", "nearest", "ours_matches", "ours_nearest", "space"}``:
    ``matches`` round to both target shares under MaxDiffusion's counting, ``ours_matches`` under ours.
    """
    from tqdm.auto import tqdm

    tiles = MAXDIFFUSION_TILES if tiles is None else [check_tile(t) for t in tiles]
    before_t, after_t = target
    rows = []
    for name, tile, sink in tqdm(list(itertools.product(geometries, tiles, (True, False))),
                                      desc="C3 search, MaxDiffusion's counting", disable=not progress):
        g = get_geometry(name)
        for density in densities:
            mask = BandSinkMask(g.L, g.F if sink else 0, density_band_window(g, density))
            shares = maxdiffusion_shares(mask, tile)
            for policy in MAXDIFFUSION_POLICIES:
                row = {"geometry": name, "density": float(density), "window": mask.window, "kept": mask.density(),
                       "block_q": tile.block_q, "block_kv": tile.block_kv, "sink": sink, "policy": policy,
                       "before": shares["before"], "after": shares[f"after_{policy}"],
                       "pair_error": shares[f"pair_error_{policy}"], "ours_before": shares["ours_before"],
                       "ours_after": shares[f"ours_after_{policy}"]}
                row["error"] = abs(row["before"] - before_t) + abs(row["after"] - after_t)
                row["ours_error"] = abs(row["ours_before"] - before_t) + abs(row["ours_after"] - after_t)
                row["match"] = rounds_to(row["before"], before_t) and rounds_to(row["after"], after_t)
                row["ours_match"] = rounds_to(row["ours_before"], before_t) and rounds_to(row["ours_after"], after_t)
                rows.append(row)
    by_theirs, by_ours = sorted(rows, key=lambda r: r["error"]), sorted(rows, key=lambda r: r["ours_error"])
    return {"target": {"before": before_t, "after": after_t}, "searched": len(rows), "rows": by_theirs,
            "matches": [r for r in by_theirs if r["match"]], "nearest": by_theirs[:10],
            "ours_matches": [r for r in by_ours if r["ours_match"]], "ours_nearest": by_ours[:10],
            "space": {"geometries": list(geometries), "tiles": [f"{q}x{k}" for q, k in tiles],
                      "densities": [float(d) for d in densities], "sink": [True, False],
                      "policies": list(MAXDIFFUSION_POLICIES)}}


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _search_cells(r: dict) -> dict:
    """A :func:`search` row as its table shows it: shares in percent, the tile in one cell, short names."""
    return {"geometry": r["geometry"], "kept": f"{r['kept']:.4g}", "tile": f"{r['block_q']}x{r['block_kv']}",
            "sink": _yes(r["sink"]), "heads": r["heads"].removeprefix("strided-"), "temporal": f"{r['temporal_share']:.4g}",
            "align": ALIGN_MODE_SHORT[r["align_mode"]], "at": r["granularity"], "align sink": _yes(r["align_sink"]),
            "before": f"{r['before']:.2%}", "after": f"{r['after']:.3%}"}


def _maxdiffusion_cells(r: dict) -> dict:
    """A :func:`maxdiffusion_search` row as its table shows it."""
    return {"geometry": r["geometry"], "density": f"{r['density']:.4g}", "kept": f"{r['kept']:.4g}",
            "tile": f"{r['block_q']}x{r['block_kv']}", "sink": _yes(r["sink"]), "policy": r["policy"],
            "before": f"{r['before']:.2%}", "after": f"{r['after']:.3%}", "ours b.": f"{r['ours_before']:.2%}",
            "ours a.": f"{r['ours_after']:.3%}", "pair err": f"{r['pair_error']:+.3%}"}


def _table(cells, rows: list[dict]) -> str:
    from svgtpu.facts.tables import format_table
    return format_table([cells(r) for r in rows])


def _fill(text: str) -> str:
    import textwrap
    from svgtpu.facts.tables import FIT_WIDTH
    return textwrap.fill(text, FIT_WIDTH, break_on_hyphens=False)


def format_search(result: dict) -> str:
    """:func:`search`'s result as ``svgtpu c3-search`` prints it: the count, the matches, the nearest."""
    parts = [_fill(f"target {result['target']['before']:.2%} -> {result['target']['after']:.2%}; "
                   f"{result['searched']:,} settings searched, {result['candidates']:,} with an after-share; "
                   f"{len(result['matches'])} match both")]
    if result["matches"]:
        parts += ["matches:", _table(_search_cells, result["matches"][:20])]
    parts += ["nearest:", _table(_search_cells, result["nearest"]),
              "nearest with every head on the band (SVG's own masks):",
              _table(_search_cells, result["nearest_by_heads"]["band"]),
              _fill("heads: band, every head on the band; per-layer, per-head, union: a temporal share of the heads "
                    "left strided (frame-major), counted per layer, per head or over their masks' union. align, at: "
                    f"the alignment mode and its granularity (the tile, or the {BAND_QUANTUM}-token quantum); align "
                    f"sink: the sink aligned with the band (no: left exact). {ALIGN_MODE_LEGEND}. before, after: the "
                    "partial tiles' share of the computed tiles; computed")]
    return "\n".join(parts)


def format_maxdiffusion_search(result: dict) -> str:
    """:func:`maxdiffusion_search`'s result as ``svgtpu c3-search`` prints it: both countings' matches and nearest."""
    parts = [_fill(f"counted MaxDiffusion's way (before: boundary tiles / touched tiles; after balanced rounding: "
                   f"tiles touching the sequence end / tiles run), {result['searched']:,} settings: "
                   f"{len(result['matches'])} match both; counted ours over the same settings: "
                   f"{len(result['ours_matches'])} match both")]
    if result["matches"]:
        parts += ["matches, MaxDiffusion's counting:", _table(_maxdiffusion_cells, result["matches"][:20])]
    if result["ours_matches"]:
        parts += ["matches, our counting:", _table(_maxdiffusion_cells, result["ours_matches"][:20])]
    parts += ["nearest, MaxDiffusion's counting:", _table(_maxdiffusion_cells, result["nearest"]),
              "nearest, our counting:", _table(_maxdiffusion_cells, result["ours_nearest"]),
              _fill("density: MaxDiffusion's retained density (its density -> band rule); kept: the pairs the band "
                    "keeps; before, after: the shares counted MaxDiffusion's way; ours b., ours a.: the same shares "
                    "counted ours; pair err: pairs the policy executes minus the band's, over the band's")]
    return "\n".join(parts)


__all__ = ["GEOMETRIES", "HEADS", "KEPT_RANGE", "MAXDIFFUSION_DENSITIES", "MAXDIFFUSION_POLICIES", "MAXDIFFUSION_TILES",
           "SearchPoint", "TARGET", "TILES", "UnionMask", "after_shares", "aligned_stats", "band_tile_counts", "combine",
           "format_maxdiffusion_search", "format_search", "maxdiffusion_search", "maxdiffusion_shares",
           "maxdiffusion_tile_classes", "search", "windows_for"]
