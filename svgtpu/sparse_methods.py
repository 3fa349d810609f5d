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
from svgtpu.mask_families import RadialMask, STAMask, sta_order
from svgtpu.masks import Mask, align, svg_mask
from svgtpu.svg2 import SVG2Config, Selection, block_masks, select
from svgtpu.tiles import classify

METHODS = ("svg", "svg2", "sta", "radial")
#: Every method unaligned and snapped to the kernel's tiles: the variants of :func:`method_quality`.
VARIANTS = tuple(f"{m}{suffix}" for m in METHODS for suffix in ("", "-aligned"))


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
    """STA mask with ``tile`` and the window (tiles per axis) whose kept fraction is closest to ``target``
    (every window is tried; :meth:`STAMask.density` needs no tile table)."""
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


def mask_backend(mask: Mask, *, order: np.ndarray | None = None, block_q: int = 128, block_kv: int = 128):
    """A toy-DiT self-attention backend running one static ``mask`` through our kernel.

    ``order`` (a permutation, ``x_mask_order = x[order]``) puts the model's frame-major tokens in the
    mask's order (STA: :func:`svgtpu.mask_families.sta_order`) and back.  Dense warm-up steps and
    layers follow :class:`svgtpu.attention.SVGConfig`'s defaults, as SVG's own backend does.
    """
    from svgtpu.attention import SVGConfig, dense_attention, warmup_count
    from svgtpu.kernels import block_sparse_attention

    warm = SVGConfig()
    inverse = None if order is None else np.argsort(order)

    def attention(q, k, v, *, layer, step, num_steps, num_layers, key=None):
        if layer < warmup_count(warm.warmup_layer_fraction, num_layers):
            return dense_attention(q, k, v)
        B, H, L, d = q.shape

        def sparse(_):
            merged = [x.reshape(B * H, L, d) for x in (q, k, v)]
            if order is not None:
                merged = [x[:, order] for x in merged]
            out = block_sparse_attention(*merged, mask, block_q=block_q, block_kv=block_kv)
            return (out if inverse is None else out[:, inverse]).reshape(B, H, L, d)

        dense_steps = warmup_count(warm.warmup_step_fraction, num_steps)
        return jax.lax.cond(step < dense_steps, lambda _: dense_attention(q, k, v), sparse, None)

    return attention


def method_quality(params, config, *, variants=VARIANTS, kept: float = 0.3, seeds=(0, 1, 2), num_steps: int = 20,
                   guidance: float = 3.0, shift: float = 1.0, block: int = 128,
                   sta_tile: tuple[int, int, int] = (2, 8, 8), svg2: SVG2Config = SVG2Config(),
                   progress: bool = True) -> dict:
    """Dense vs each method variant from the same noise and seed: PSNR, SSIM and the kept fraction.

    Each method's knob is matched to ``kept`` as in :func:`method_table` (SVG2's ``top_p`` on the
    model's captured ``q, k``); ``-aligned`` variants snap that mask to ``block x block`` tiles, so
    their kept fraction is reported, not assumed.  SVG2 runs through the host-callback backend
    (:func:`svgtpu.svg2.svg2_backend`), so its sampling time is not reported.
    """
    from svgtpu.attention import SVGConfig, attention_backend
    from svgtpu.quality import psnr, ssim
    from svgtpu.results import provenance
    from svgtpu.sampler import sample
    from svgtpu.svg2 import svg2_backend

    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise ValueError(f"methods must be among {', '.join(VARIANTS)}, got {list(variants)}")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    sta_tile = check_settings(kept, sta_tile)
    geometry, warm = config.geometry, SVGConfig()
    backends, kept_of = {}, {}
    for name in variants:
        method, snap = name.removesuffix("-aligned"), name.endswith("-aligned")
        if method == "svg":
            svg_config = SVGConfig(sparsity=kept, block_q=block, block_kv=block, align="snap" if snap else None)
            backends[name] = attention_backend("svg", geometry, svg_config=svg_config)
            kept_of[name] = svg_config.mask(geometry).density()
        elif method == "svg2":
            top_p, _ = svg2_for_density(capture_qk(params, config), kept, svg2)
            c = dataclasses.replace(svg2, top_p=top_p, block_q=block, block_kv=block, align="snap" if snap else None)
            backends[name] = svg2_backend(c, warmup_step_fraction=warm.warmup_step_fraction,
                                          warmup_layer_fraction=warm.warmup_layer_fraction)
        else:
            mask = sta_for_density(geometry, kept, sta_tile) if method == "sta" else radial_for_density(geometry, kept)
            order = sta_order(geometry, sta_tile) if method == "sta" else None
            mask = align(mask, block, block, "snap") if snap else mask
            backends[name] = mask_backend(mask, order=order, block_q=block, block_kv=block)
            kept_of[name] = mask.density()
    rows = []
    for seed in seeds:
        labels = [seed % config.num_labels]
        common = dict(seed=seed, num_steps=num_steps, guidance=guidance, shift=shift, progress=progress)
        dense = sample(params, config, labels, **common)
        for name, backend in backends.items():
            video = sample(params, config, labels, attention=backend, **common)
            rows.append({"variant": name, "seed": seed, "psnr": psnr(dense, video), "ssim": ssim(dense, video)})
    summary = []
    for name, backend in backends.items():
        mine = [r for r in rows if r["variant"] == name]
        sparse_calls = [c["kept_fraction"] for c in getattr(backend, "calls", []) if c["partial_share"] is not None]
        summary.append({"variant": name,
                        "kept_fraction": kept_of.get(name, float(np.mean(sparse_calls)) if sparse_calls else None),
                        "psnr_mean": float(np.mean([r["psnr"] for r in mine])),
                        "psnr_min": float(np.min([r["psnr"] for r in mine])),
                        "ssim_mean": float(np.mean([r["ssim"] for r in mine]))})
    return {"kept_target": kept, "seeds": list(seeds), "num_steps": num_steps, "guidance": guidance,
            "shift": shift, "block": block, "sta_tile": list(sta_tile), "geometry": str(geometry),
            "summary": summary, "per_seed": rows, "provenance": provenance("measured", pallas=True)}


__all__ = ["METHODS", "VARIANTS", "capture_qk", "check_settings", "mask_backend", "method_quality", "radial_for_density", "sta_for_density", "svg2_for_density", "method_table"]
