"""Every sparse attention method's mask at one geometry and a matched kept fraction: tile statistics.

Methods: ``svg`` (band + sink, :func:`svgtpu.masks.core.svg_mask`), ``svg2`` (k-means clusters on real
queries and keys, :mod:`svgtpu.attention.svg2`), ``sta`` (sliding tile windows) and ``radial``
(:mod:`svgtpu.masks.families`), each unaligned and snapped to the kernel's tiles
(``<method>-aligned``).  Each method's own knob is set so the unaligned mask keeps (as close as
it allows to) the same fraction of ``(q, k)`` pairs: SVG's band width, SVG2's ``top_p``, STA's
window (in tiles), radial's ``window_fraction``.  SVG2 needs data: :func:`capture_qk` runs the toy
DiT once (dense attention) on a noised training video and records every layer's ``q, k``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from svgtpu.toy import data
from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.setting import PRODUCTION, SMALL_TILE, Setting
from svgtpu.masks.families import BlockMask, RadialMask, STAMask, sta_order
from svgtpu.masks.core import BAND_QUANTUM, BandSinkMask, Mask, align, check_kept, svg_mask
from svgtpu.attention.svg2 import WAN_CLUSTERS, SVG2Config, Selection, block_masks, select
from svgtpu.masks.tiles import EMPTY, classify
from svgtpu.errors import BadInput
from svgtpu.kernels.common import resolve_interpret

METHODS = ("svg", "svg2", "sta", "radial")
#: The flow time the toy DiT's ``q, k`` are captured at when none is given: midway from clean (0) to noise (1), our
#: choice.
CAPTURE_T = 0.5
#: Every method unaligned and snapped to the kernel's tiles: the variants of :func:`method_quality`.
VARIANTS = tuple(f"{m}{suffix}" for m in METHODS for suffix in ("", "-aligned"))


def capture_qk(params, config, *, seed: int = 0, t: float = CAPTURE_T, batch: int = 1) -> list[tuple]:
    """Per layer ``(q, k)``, each ``[batch * heads, L, d]`` float32: the toy DiT's self-attention
    inputs on ``batch`` training videos noised to time ``t`` (``x_t = (1 - t) x0 + t e``)."""
    from svgtpu.attention.base import dense_attention
    from svgtpu.toy.dit import forward

    if not 0 <= t <= 1:
        raise BadInput(f"t must be in [0, 1], got {t!r}")
    x0, labels = data.make_batch(seed, batch)
    noise = jax.random.normal(jax.random.PRNGKey(seed), x0.shape)
    x_t = (1 - t) * jnp.asarray(x0) + t * noise
    captured = []

    def recording(q, k, v, **call):
        B, H, L, d = q.shape
        captured.append((q.reshape(B * H, L, d).astype(jnp.float32), k.reshape(B * H, L, d).astype(jnp.float32)))
        return dense_attention(q, k, v, **call)

    forward(params, config, x_t, jnp.full((batch,), t), jnp.asarray(labels), attention=recording)
    return captured


class Tiles(NamedTuple):
    """The kernel's tile, one value (the functions here take it whole, never its sides as loose numbers);
    ``snap=True`` means the method's mask is snapped to it before use."""

    block_q: int
    block_kv: int
    snap: bool = False

    @property
    def tile(self) -> Tile:
        """The tile alone, ``Tile(block_q, block_kv)``."""
        return Tile(self.block_q, self.block_kv)


def _kept(mask: Mask, tiles: Tiles | None) -> float:
    """Kept fraction of the mask the kernel runs: ``mask`` itself (``tiles`` ``None`` or not snapping), or
    snapped to ``tiles``."""
    return (align(mask, tiles.tile, "snap") if tiles and tiles.snap else mask).density()


def _closest(candidates, target: float, kept) -> object:
    return min(candidates, key=lambda c: abs(kept(c) - target))


def _bisect(kept, target: float) -> float:
    """The knob in ``[1e-3, 1]`` whose ``kept(knob)`` is closest to ``target``: 12 bisection steps (the
    kept fraction grows with the knob), then the closer end; each knob's ``kept`` is evaluated once."""
    kept = functools.cache(kept)
    lo, hi = 1e-3, 1.0
    for _ in range(12):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if kept(mid) >= target else (mid, hi)
    return _closest((lo, hi), target, kept)


def svg_for_density(geometry: VideoGeometry, target: float, tiles: Tiles) -> BandSinkMask:
    """SVG band + sink mask whose band width (steps of 128 tokens, within 16 steps of the unsnapped
    match) gives the run mask's kept fraction closest to ``target``."""
    base = svg_mask(geometry, kept=target)
    steps = range(max(1, base.window // BAND_QUANTUM - 16), base.window // BAND_QUANTUM + 17)
    candidates = [BandSinkMask(geometry.L, geometry.F, j * BAND_QUANTUM) for j in steps]
    return _closest(candidates, target, lambda m: _kept(m, tiles))


def radial_for_density(geometry: VideoGeometry, target: float, tiles: Tiles | None = None,
                       sink_frames: int = 0) -> RadialMask:
    """Radial mask whose ``window_fraction`` (a grid of 200 values; snapping makes the kept fraction
    step-like, so no bisection) gives the run mask's kept fraction closest to ``target`` (``tiles`` ``None``:
    the mask itself, unsnapped)."""
    candidates = [RadialMask(geometry, sink_frames, float(f)) for f in np.linspace(0.005, 1.0, 200)]
    return _closest(candidates, target, lambda m: _kept(m, tiles))


def sta_for_density(geometry: VideoGeometry, target: float, sta_tile: tuple[int, int, int],
                    tiles: Tiles | None = None) -> STAMask:
    """STA mask with STA's tile ``sta_tile`` (tokens per axis, not the kernel's) and the window (STA tiles per
    axis) whose run mask's kept fraction is closest to ``target``: every window by :meth:`STAMask.density` (no
    tile table), then, when snapping to the kernel's ``tiles``, the 12 nearest re-ranked by their snapped kept
    fraction."""
    grid = STAMask(geometry, sta_tile, (1, 1, 1)).tile_grid
    masks = sorted((STAMask(geometry, sta_tile, w) for w in itertools.product(*(range(1, n + 1) for n in grid))),
                   key=lambda m: abs(m.density() - target))
    if tiles is None or not tiles.snap:
        return masks[0]
    return _closest(masks[:12], target, lambda m: _kept(m, tiles))


def svg2_for_density(qk: list[tuple], target: float, config: SVG2Config,
                     tiles: Tiles | None = None) -> tuple[float, list[Selection]]:
    """``(top_p, selections per layer)``: the ``top_p`` whose run masks' mean kept fraction over every
    layer and head is closest to ``target``, by bisection (kept pairs grow with ``top_p``); the run masks are
    snapped to ``tiles`` if it snaps (``None``: the masks themselves)."""

    def selections(top_p):
        c = dataclasses.replace(config, top_p=top_p)
        return [select(q, k, c) for q, k in qk]

    def kept(top_p):
        return float(np.mean([_kept(m, tiles) for s in selections(top_p) for m in block_masks(s)]))

    top_p = _bisect(kept, target)
    return top_p, selections(top_p)


#: How many seeded cluster draws :func:`svg2_assumed_masks` makes (their tile statistics are averaged).
ASSUMED_DRAWS = 4


def svg2_assumed_masks(geometry: VideoGeometry, target: float, config: SVG2Config, *, count: int = ASSUMED_DRAWS,
                       seed: int = 0) -> list[BlockMask]:
    """SVG2-like masks where there is no model to cluster (e.g. 1440p), under a stated assumption:
    ``L`` tokens fall into ``config.q_clusters`` / ``k_clusters`` clusters with equal chances
    (multinomial sizes), and each query cluster keeps key clusters in random order until they hold
    ``target * L`` keys (top-p with scores proportional to cluster size).  ``count`` masks, seeded."""
    rng = np.random.default_rng(seed)
    L, masks = geometry.L, []
    for _ in range(count):
        q_sizes = rng.multinomial(L, np.full(config.q_clusters, 1 / config.q_clusters))
        k_sizes = rng.multinomial(L, np.full(config.k_clusters, 1 / config.k_clusters))
        table = np.zeros((config.q_clusters, config.k_clusters), dtype=bool)
        for a in range(config.q_clusters):
            order = rng.permutation(config.k_clusters)
            before = np.cumsum(k_sizes[order]) - k_sizes[order]  # keys held by the clusters kept before
            table[a, order[before < target * L]] = True
        masks.append(BlockMask(L, np.concatenate([[0], np.cumsum(q_sizes)]),
                               np.concatenate([[0], np.cumsum(k_sizes)]), table))
    return masks


def matched(method: str, geometry: VideoGeometry, target: float, tiles: Tiles, *, sta_tile=(2, 8, 8),
            qk: list[tuple] | None = None, svg2: SVG2Config | None = None) -> tuple[list[Mask], dict]:
    """The masks ``method`` runs at ``target`` kept fraction (snapped when ``tiles.snap``; SVG2: one
    per layer and head of ``qk``, in the permuted order, or without ``qk`` the assumed clusters of
    :func:`svg2_assumed_masks`, its clusters ``svg2``'s) and its knob."""
    if method == "svg2" and svg2 is None:
        raise BadInput("method svg2 needs svg2 (an SVG2Config: its clusters)")
    if method == "svg":
        mask = svg_for_density(geometry, target, tiles)
        unsnapped, knob = [mask], {"window": mask.window}
    elif method == "radial":
        mask = radial_for_density(geometry, target, tiles)
        unsnapped, knob = [mask], {"window_fraction": mask.window_fraction}
    elif method == "sta":
        mask = sta_for_density(geometry, target, sta_tile, tiles)
        unsnapped, knob = [mask], {"tile": "x".join(map(str, mask.tile)), "window": "x".join(map(str, mask.window))}
    elif method == "svg2" and qk is None:  # no model at this geometry: the stated cluster assumption
        def kept(x):
            return float(np.mean([_kept(m, tiles) for m in svg2_assumed_masks(geometry, x, svg2)]))

        assumed_target = _bisect(kept, target)
        unsnapped = svg2_assumed_masks(geometry, assumed_target, svg2)
        knob = {"clusters": "assumed (multinomial sizes, random kept pairs)", "q_clusters": svg2.q_clusters,
                "k_clusters": svg2.k_clusters}
    elif method == "svg2":
        top_p, selections = svg2_for_density(qk, target, svg2, tiles)
        unsnapped = [m for s in selections for m in block_masks(s)]
        knob = {"top_p": top_p, "q_clusters": svg2.q_clusters, "k_clusters": svg2.k_clusters}
    else:
        raise BadInput(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not tiles.snap:
        return unsnapped, knob
    return [align(m, tiles.tile, "snap") for m in unsnapped], knob


def _stats(mask: Mask, tiles: Tiles, head_seconds=None) -> dict:
    """Kept fraction, partial share and tile density of ``mask`` at ``tiles``; with ``head_seconds`` (a
    function of the tile counts and empty-row steps) also its modeled time for one head."""
    kinds = classify(mask, tiles.tile)
    stats = kinds.stats
    row = {"kept_fraction": mask.density(), "partial_share": stats.partial_share, "tile_density": stats.density}
    if head_seconds is not None:  # a q row without any computed tile still takes a step that writes zeros
        row["head_seconds"] = head_seconds(stats, int(np.sum((kinds.kinds == EMPTY).all(axis=1))))
    return row


def _mean_stats(masks: list[Mask], tiles: Tiles, head_seconds=None) -> dict:
    rows = [_stats(m, tiles, head_seconds) for m in masks]
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}


def check_settings(target: float, sta_tile) -> tuple[int, int, int]:
    """Validate the kept fraction and the STA tile before any model work; returns the tile."""
    check_kept(target, "kept fraction")
    return STAMask(VideoGeometry(1, 1, 1), sta_tile, (1, 1, 1)).tile


def _check_variants(variants) -> None:
    if not variants or any(v not in VARIANTS for v in variants):
        raise BadInput(f"methods must be among {', '.join(VARIANTS)}, got {list(variants)}")


def check_kept_fractions(kept_fractions) -> list[float]:
    """At least one kept fraction, each in (0, 1), no repeats; returned sorted."""
    kept_fractions = list(kept_fractions)
    if not kept_fractions:
        raise BadInput("kept fractions must name at least one value in (0, 1)")
    for target in kept_fractions:
        check_kept(target, "kept fraction")
    if len(set(kept_fractions)) != len(kept_fractions):
        raise BadInput(f"kept fractions must differ, got {kept_fractions}")
    return sorted(float(t) for t in kept_fractions)


def _matched_variants(geometry: VideoGeometry, target: float, *, qk, tiles: Tiles, sta_tile,
                      svg2: SVG2Config, svg2_assumed: bool, variants=VARIANTS, progress: bool = True):
    """``(variant, masks, knob)`` for each variant matched to ``target`` on its own (SVG2 left out
    without ``qk`` unless ``svg2_assumed``)."""
    for name in tqdm(variants, desc=f"methods at kept {target}", disable=not progress):
        method, snap = name.removesuffix("-aligned"), name.endswith("-aligned")
        if method == "svg2" and qk is None and not svg2_assumed:
            continue
        masks, knob = matched(method, geometry, target, tiles._replace(snap=snap), sta_tile=sta_tile, qk=qk,
                              svg2=svg2)
        yield name, masks, knob


def method_table(geometry: VideoGeometry, target: float, *, qk: list[tuple] | None, tiles: Tiles,
                 sta_tile: tuple[int, int, int], svg2: SVG2Config, svg2_assumed: bool = False,
                 progress: bool = True) -> list[dict]:
    """One row per method variant (``-aligned``: snapped), each matched to ``target`` on its own:
    its knob, kept fraction, partial share and tile density at the kernel's ``tiles``; SVG2 rows
    average every layer and head of ``qk``; without ``qk`` they use :func:`svg2_assumed_masks` if
    ``svg2_assumed``, else they are left out."""
    sta_tile = check_settings(target, sta_tile)
    return [{"method": name, **_mean_stats(masks, tiles), **knob}
            for name, masks, knob in _matched_variants(geometry, target, qk=qk, tiles=tiles, sta_tile=sta_tile, svg2=svg2, svg2_assumed=svg2_assumed,
                                                       progress=progress)]


#: Where :func:`method_costs` models attention time: SVG's production setting (Wan 2.1 14B at 1440p on
#: v6e with MaxDiffusion's Splash tiles), STA's ``6x8x8`` tile, and for SVG2, which has no model to
#: cluster there, assumed clusters (:func:`svg2_assumed_masks`) in SVG2's counts for Wan.
COST_SETTING = {"model": PRODUCTION.model, "geometry": PRODUCTION.resolution, "device": PRODUCTION.device,
                "block_q": PRODUCTION.block_q, "block_kv": PRODUCTION.block_kv,
                "sta_tile": (6, 8, 8), **WAN_CLUSTERS}


def method_costs(kept_fractions, setting: Setting, *, variants=VARIANTS,
                 sta_tile: tuple[int, int, int] = COST_SETTING["sta_tile"],
                 svg2: SVG2Config | None = None, progress: bool = True) -> dict:
    """Each variant matched to each kept fraction at ``setting``'s model, resolution, device and tile (the claims'
    main line, :data:`~svgtpu.setting.PRODUCTION`, in ``svgtpu methods --costs``): tile statistics and the
    cost model's attention-time ratio, sparse / dense seconds of one head on one TensorCore (our
    kernel, fast path on; :func:`svgtpu.costmodel.attention_head_seconds`), plus a ``dense`` row
    (ratio 1 by construction).  SVG2 rows use assumed clusters (:func:`svg2_assumed_masks`), stated
    in the result's ``svg2_assumption``, their cluster counts ``svg2``'s (default :data:`WAN_CLUSTERS`), the tile
    the setting's.  Tile statistics are ``computed``, ratios ``modeled-<device>``."""
    from svgtpu import costmodel as cm
    from svgtpu.masks.core import DenseMask
    from svgtpu.facts.results import provenance

    kept_fractions = check_kept_fractions(kept_fractions)
    _check_variants(variants)
    sta_tile = check_settings(kept_fractions[0], sta_tile)
    setup = cm.setting_setup(setting)   # the setting passed down as it is
    geometry, model, device, block_q, block_kv = (setup.geometry, setting.model, setting.device, setting.block_q,
                                                  setting.block_kv)
    svg2 = (SVG2Config(**WAN_CLUSTERS, block_q=block_q, block_kv=block_kv) if svg2 is None   # the setting's tile
            else dataclasses.replace(svg2, block_q=block_q, block_kv=block_kv))

    tiles = Tiles(block_q, block_kv)
    dense = _stats(DenseMask(geometry.L), tiles, setup.head_seconds)
    rows = [{"method": "dense", "kept_target": 1.0, **dense}]
    for target in kept_fractions:
        for name, masks, knob in _matched_variants(geometry, target, qk=None, tiles=tiles,
                                                   sta_tile=sta_tile, svg2=svg2, svg2_assumed=True,
                                                   variants=variants, progress=progress):
            row = _mean_stats(masks, tiles, setup.head_seconds)
            rows.append({"method": name, "kept_target": target, **row, **knob})
    for row in rows:
        row["attention_ratio"] = row["head_seconds"] / dense["head_seconds"]
    return {"model": model, "geometry": str(geometry), "L": geometry.L, "device": device, "block_q": block_q,
            "block_kv": block_kv, "sta_tile": "x".join(map(str, sta_tile)), "rows": rows,
            "svg2_assumption": f"SVG2 at {geometry} has no model to cluster: {svg2.q_clusters} query and "
                               f"{svg2.k_clusters} key clusters per head with multinomial (equal-chance) sizes, "
                               "each query cluster keeping key clusters in random order until they hold the "
                               f"kept fraction of keys (svg2_assumed_masks, {ASSUMED_DRAWS} seeded draws averaged)",
            "provenance": {"tiles": provenance("computed"), "attention_ratio": provenance("modeled", device=device)}}


def _variant_backend(name: str, config, target: float, *, tile: Tile, sta_tile, qk, svg2: SVG2Config):
    """``(backend, kept fraction or None, knob)``: the toy-DiT backend running ``name`` matched to
    ``target`` (``None``: SVG2's kept fraction varies per call and is read from ``backend.calls``)."""
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.attention.backends import attention_backend, mask_backend
    from svgtpu.attention.svg2 import svg2_backend

    geometry = config.geometry
    method, snap = name.removesuffix("-aligned"), name.endswith("-aligned")
    masks, knob = matched(method, geometry, target, Tiles(*tile, snap), sta_tile=sta_tile, qk=qk, svg2=svg2)
    if method == "svg":
        # SVG's own backend (profiling, layout transform); W - 64 rounds back up to exactly W
        svg_config = SVGConfig(multiplier=(knob["window"] - BAND_QUANTUM // 2) / geometry.F, block_q=tile.block_q,
                               block_kv=tile.block_kv, align="snap" if snap else None)
        return attention_backend("svg", geometry, svg_config=svg_config), svg_config.mask(geometry).density(), knob
    if method == "svg2":
        c = dataclasses.replace(svg2, top_p=knob["top_p"], block_q=tile.block_q, block_kv=tile.block_kv,
                                align="snap" if snap else None)
        return svg2_backend(c), None, knob  # SVG's dense warm-up, like every other variant
    order = sta_order(geometry, sta_tile) if method == "sta" else None
    return mask_backend(masks[0], order=order, tile=tile), masks[0].density(), knob


def method_sweep(params, config, *, variants=VARIANTS, kept_fractions=(0.3,), seeds=(0, 1, 2), num_steps: int = 20,
                 guidance: float = 3.0, shift: float = 1.0, tile: Tile,
                 sta_tile: tuple[int, int, int] = (2, 8, 8), svg2: SVG2Config | None = None,
                 progress: bool = True) -> dict:
    """Dense vs each method variant at each kept fraction, from the same noise and seed: PSNR, SSIM
    and the kept fraction each really ran, at the caller's square ``tile`` (as
    :func:`svgtpu.toy.quality.quality_study` takes it).

    Each (variant, kept target) has its knob matched on its own, as in :func:`method_table`
    (snapped variants after snapping; SVG2's ``top_p`` on the ``q, k`` of one training video at
    ``t = 0.5``, :func:`capture_qk`, captured once for every target).  The dense video of each seed
    is sampled once and shared by every variant and target.  SVG2's kept fraction varies from call
    to call: the mean over its sparse calls.  ``summary`` has one row per (variant, kept target):
    mean and min PSNR and SSIM over seeds.
    """
    from svgtpu.toy.quality import psnr, square_side, ssim
    from svgtpu.facts.results import provenance
    from svgtpu.toy.sampler import sample

    _check_variants(variants)
    block = square_side(tile)
    if not seeds:
        raise BadInput("seeds must name at least one seed")
    kept_fractions = check_kept_fractions(kept_fractions)
    sta_tile = check_settings(kept_fractions[0], sta_tile)
    qk = capture_qk(params, config) if any(v.startswith("svg2") for v in variants) else None
    svg2 = SVG2Config(block_q=tile.block_q, block_kv=tile.block_kv) if svg2 is None else svg2   # SVG2's own clusters, our tile
    runs = {(name, target): _variant_backend(name, config, target, tile=tile, sta_tile=sta_tile, qk=qk, svg2=svg2)
            for target in kept_fractions for name in variants}
    rows = []
    bar = tqdm(total=len(seeds) * (1 + len(runs)), desc="videos", disable=not progress)
    for seed in seeds:
        labels = [seed % config.num_labels]
        common = dict(seed=seed, num_steps=num_steps, guidance=guidance, shift=shift, progress=False)
        dense = sample(params, config, labels, **common)
        bar.update()
        for (name, target), (backend, _, _) in runs.items():
            video = sample(params, config, labels, attention=backend, **common)
            rows.append({"variant": name, "kept_target": target, "seed": seed, "psnr": psnr(dense, video),
                         "ssim": ssim(dense, video)})
            bar.update()
    bar.close()
    summary = []
    for (name, target), (backend, kept, knob) in runs.items():
        mine = [r for r in rows if r["variant"] == name and r["kept_target"] == target]
        if kept is None:
            sparse_calls = [c["kept_fraction"] for c in backend.calls if c["partial_share"] is not None]
            kept = float(np.mean(sparse_calls)) if sparse_calls else None
        summary.append({"variant": name, "kept_target": target, "kept_fraction": kept,
                        "psnr_mean": float(np.mean([r["psnr"] for r in mine])),
                        "psnr_min": float(np.min([r["psnr"] for r in mine])),
                        "ssim_mean": float(np.mean([r["ssim"] for r in mine])),
                        "ssim_min": float(np.min([r["ssim"] for r in mine])),
                        **knob})
    return {"kept_targets": kept_fractions, "seeds": list(seeds), "num_steps": num_steps, "guidance": guidance,
            "shift": shift, "block": block, "sta_tile": list(sta_tile), "geometry": str(config.geometry),
            "summary": summary, "per_seed": rows, "provenance": provenance("measured", interpret=resolve_interpret(None))}


def pareto_front(points: list[dict], cost: str, quality: str) -> list[dict]:
    """The points no other point beats: none has lower-or-equal ``cost`` and higher-or-equal
    ``quality`` with one of them strictly better.  Sorted by ``cost``."""
    def dominated(p):
        return any(o[cost] <= p[cost] and o[quality] >= p[quality] and (o[cost] < p[cost] or o[quality] > p[quality])
                   for o in points)

    return sorted((p for p in points if not dominated(p)), key=lambda p: p[cost])


#: The settings of ``svgtpu methods`` without ``--costs``: the toy DiT's scale.
TOY_SETTING = {"block_q": SMALL_TILE.block_q, "block_kv": SMALL_TILE.block_kv, "sta_tile": (2, 8, 8), "q_clusters": 16,
               "k_clusters": 32}


def methods_report(checkpoint, kept: float, *, tiles: Tiles, costs: bool = False, geometry: str | None = None,
                   sta_tile=None,
                   q_clusters: int | None = None, k_clusters: int | None = None, svg2_assumed: bool = False,
                   seed: int = 0, t: float = CAPTURE_T) -> dict:
    """``svgtpu methods``: every method matched to ``kept``.  Without ``costs``, :func:`method_table` at
    the toy DiT's geometry (``geometry``: another; SVG2 rows from the checkpoint's captured ``q, k`` there
    only); with ``costs``, :func:`method_costs` at :data:`COST_SETTING`, at the kernel's ``tiles`` (the command
    line applies :data:`TOY_SETTING`'s or :data:`COST_SETTING`'s).  ``None`` settings take the defaults of
    :data:`TOY_SETTING` / :data:`COST_SETTING`."""
    from svgtpu.geometry import get_geometry
    from svgtpu.facts.results import provenance
    defaults = COST_SETTING if costs else TOY_SETTING
    block_q, block_kv = tiles.block_q, tiles.block_kv
    sta_tile = check_settings(kept, defaults["sta_tile"] if sta_tile is None else sta_tile)
    svg2 = SVG2Config(q_clusters=q_clusters or defaults["q_clusters"], k_clusters=k_clusters or defaults["k_clusters"],
                      block_q=block_q, block_kv=block_kv)
    if costs:
        setting = dataclasses.replace(PRODUCTION, resolution=geometry or COST_SETTING["geometry"], block_q=block_q,
                                      block_kv=block_kv)
        return {**method_costs([kept], setting, sta_tile=sta_tile, svg2=svg2), "costs": True}
    from svgtpu.toy.dit import load_checkpoint
    params, config = load_checkpoint(str(checkpoint))
    g = get_geometry(geometry) if geometry else config.geometry
    same = (g.T, g.H, g.W) == (config.geometry.T, config.geometry.H, config.geometry.W)
    qk = capture_qk(params, config, seed=seed, t=t) if same else None
    rows = method_table(g, kept, qk=qk, tiles=tiles, sta_tile=sta_tile, svg2=svg2, svg2_assumed=svg2_assumed)
    return {"checkpoint": str(checkpoint), "geometry": str(g), "L": g.L, "kept_target": kept, "block_q": block_q,
            "block_kv": block_kv, "seed": seed, "t": t, "rows": rows, "provenance": provenance("computed"),
            "costs": False}


def format_methods(result: dict) -> str:
    """:func:`methods_report` as a table and the line saying where and how it was counted."""
    from svgtpu.facts.tables import format_table
    tiles = f"{result['block_q']}x{result['block_kv']} tiles"
    if not result["costs"]:
        return (format_table(result["rows"], ["method", "kept_fraction", "partial_share", "tile_density"])
                + f"\n({result['geometry']}, {tiles}, {result['provenance']})")
    table = format_table(result["rows"], ["method", "kept_target", "kept_fraction", "partial_share", "tile_density",
                                          "attention_ratio"])
    return table + (f"\n({result['model']} at {result['geometry']} on {result['device']}, {tiles}; tiles "
                    f"{result['provenance']['tiles']}, attention_ratio {result['provenance']['attention_ratio']})\n"
                    f"{result['svg2_assumption']}")


def format_sweep(result: dict) -> str:
    """:func:`method_sweep`'s summary as ``svgtpu quality --methods`` prints it."""
    from svgtpu.facts.tables import format_table
    return format_table(result["summary"], ["variant", "kept_target", "kept_fraction", "psnr_mean", "psnr_min",
                                            "ssim_mean"]) + f"\n({result['provenance']})"


__all__ = ["METHODS", "CAPTURE_T", "VARIANTS", "COST_SETTING", "TOY_SETTING", "ASSUMED_DRAWS", "Tiles", "capture_qk",
           "check_settings", "check_kept_fractions", "matched", "svg_for_density", "svg2_assumed_masks",
           "method_sweep", "method_costs", "methods_report", "format_methods", "format_sweep", "pareto_front",
           "radial_for_density", "sta_for_density", "svg2_for_density", "method_table"]
