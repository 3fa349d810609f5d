"""Every sparse attention method's mask at one geometry and a matched kept fraction: tile statistics.

Methods: ``svg`` (band + sink, :func:`svgtpu.masks.svg_mask`), ``svg2`` (k-means clusters on real
queries and keys, :mod:`svgtpu.svg2`), ``sta`` (sliding tile windows) and ``radial``
(:mod:`svgtpu.mask_families`), each unaligned and snapped to the kernel's tiles
(``<method>-aligned``).  Each method's own knob is set so the unaligned mask keeps (as close as
it allows to) the same fraction of ``(q, k)`` pairs: SVG's band width, SVG2's ``top_p``, STA's
window (in tiles), radial's ``window_fraction``.  SVG2 needs data: :func:`capture_qk` runs the toy
DiT once (dense attention) on a noised training video and records every layer's ``q, k``.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from svgtpu import data
from svgtpu.geometry import VideoGeometry
from svgtpu.mask_families import RadialMask, STAMask
from svgtpu.masks import Mask, align, svg_mask
from svgtpu.svg2 import SVG2Config, Selection, block_masks, select
from svgtpu.tiles import classify

METHODS = ("svg", "svg2", "sta", "radial")


def capture_qk(params, config, *, seed: int = 0, t: float = 0.5, batch: int = 1) -> list[tuple]:
    """Per layer ``(q, k)``, each ``[batch * heads, L, d]`` float32: the toy DiT's self-attention
    inputs on ``batch`` training videos noised to time ``t`` (``x_t = (1 - t) x0 + t e``)."""
    from svgtpu.attention import dense_attention
    from svgtpu.dit import forward

    if not 0 <= t <= 1:
        raise ValueError(f"t must be in [0, 1], got {t!r}")
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


def _bisect(density_of, target: float, lo: float, hi: float, steps: int) -> float:
    """The knob in ``[lo, hi]`` whose (non-decreasing) density is closest to ``target``."""
    best = hi
    for _ in range(steps):
        mid = (lo + hi) / 2
        if density_of(mid) >= target:
            hi = best = mid
        else:
            lo = mid
    return min((lo, best), key=lambda x: abs(density_of(x) - target))


def radial_for_density(geometry: VideoGeometry, target: float, sink_frames: int = 0) -> RadialMask:
    """Radial mask whose ``window_fraction`` gives the kept fraction closest to ``target``."""
    fraction = _bisect(lambda f: RadialMask(geometry, sink_frames, f).density(), target, 1e-3, 1.0, 20)
    return RadialMask(geometry, sink_frames, fraction)


def sta_for_density(geometry: VideoGeometry, target: float, tile: tuple[int, int, int]) -> STAMask:
    """STA mask with ``tile`` and the window (tiles per axis) whose kept fraction is closest to ``target``."""
    grid = STAMask(geometry, tile, (1, 1, 1)).tile_grid
    windows = itertools.product(*(range(1, n + 1) for n in grid))
    return min((STAMask(geometry, tile, w) for w in windows), key=lambda m: abs(m.density() - target))


def svg2_for_density(qk: list[tuple], target: float, config: SVG2Config) -> tuple[float, list[Selection]]:
    """``(top_p, selections per layer)``: the ``top_p`` whose mean kept fraction over every layer and
    head is closest to ``target`` (each layer clustered once; ``top_p`` only re-runs the selection)."""
    def selections(top_p):
        c = dataclasses.replace(config, top_p=top_p)
        return [select(q, k, c) for q, k in qk]

    def density(top_p):
        return float(np.mean([mask.density() for s in selections(top_p) for mask in block_masks(s)]))

    top_p = _bisect(density, target, 1e-3, 1.0, 12)
    return top_p, selections(top_p)


def _stats(mask: Mask, block_q: int, block_kv: int) -> dict:
    stats = classify(mask, block_q, block_kv).stats
    return {"kept_fraction": mask.density(), "partial_share": stats.partial_share, "tile_density": stats.density}


def _mean_stats(masks: list[Mask], block_q: int, block_kv: int) -> dict:
    rows = [_stats(m, block_q, block_kv) for m in masks]
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}


def check_settings(target: float, sta_tile) -> tuple[int, int, int]:
    """Validate the kept fraction and the STA tile before any model work; returns the tile."""
    if not (isinstance(target, (int, float)) and 0 < target < 1):
        raise ValueError(f"kept fraction must be in (0, 1), got {target!r}")
    return STAMask(VideoGeometry(1, 1, 1), sta_tile, (1, 1, 1)).tile


def method_table(geometry: VideoGeometry, target: float, *, qk: list[tuple] | None, block_q: int, block_kv: int,
                 sta_tile: tuple[int, int, int], svg2: SVG2Config, progress: bool = True) -> list[dict]:
    """One row per method (unaligned and ``-aligned``, snapped): its knob, kept fraction, partial
    share and tile density at ``block_q x block_kv``; SVG2 rows average every layer and head of
    ``qk`` (skipped when ``qk`` is None)."""
    sta_tile = check_settings(target, sta_tile)
    rows = []
    for method in tqdm(METHODS, desc="methods", disable=not progress):
        if method == "svg":
            mask = svg_mask(geometry, sparsity=target)
            masks, knob = [mask], {"window": mask.window}
        elif method == "radial":
            mask = radial_for_density(geometry, target)
            masks, knob = [mask], {"window_fraction": mask.window_fraction}
        elif method == "sta":
            mask = sta_for_density(geometry, target, sta_tile)
            masks, knob = [mask], {"tile": "x".join(map(str, mask.tile)), "window": "x".join(map(str, mask.window))}
        elif qk is None:
            continue
        else:
            top_p, selections = svg2_for_density(qk, target, svg2)
            masks = [m for s in selections for m in block_masks(s)]
            knob = {"top_p": top_p, "q_clusters": svg2.q_clusters, "k_clusters": svg2.k_clusters,
                    "heads_x_layers": len(masks)}
        aligned = [align(m, block_q, block_kv, "snap") for m in masks]
        rows.append({"method": method, **_mean_stats(masks, block_q, block_kv), **knob})
        rows.append({"method": f"{method}-aligned", **_mean_stats(aligned, block_q, block_kv), **knob})
    return rows


__all__ = ["METHODS", "capture_qk", "check_settings", "radial_for_density", "sta_for_density", "svg2_for_density", "method_table"]
