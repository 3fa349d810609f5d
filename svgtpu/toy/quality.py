"""Video fidelity of sparse attention: PSNR, SSIM, and the dense-vs-SVG study on the toy DiT.

SVG measures quality by generating the same video twice -- same noise, same seed -- once with
dense attention and once sparse, and comparing the decoded videos.  We do the same with the
shipped toy DiT (whose "decoded video" is its pixel output) for SVG with and without tile
alignment (snap, inner, and balanced: the unaligned mask's kept pairs), and check that the mask-free fast path
leaves outputs unchanged.

PSNR and SSIM come from DeepMind's ``dm-pix`` (in JAX, float32): ``PSNR = 10 log10(R^2 / MSE)``
over all pixels, and SSIM of Wang et al. (2004) with an 11x11 Gaussian window (sigma 1.5, "valid"
positions only), ``K1 = 0.01, K2 = 0.03``, computed per frame and channel and averaged.  ``R`` is
the data range, 2 for our ``[-1, 1]`` pixels.
"""

from __future__ import annotations

import time

import dm_pix as pix
import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile

#: The sparse variants of the study: name -> SVGConfig overrides.
VARIANTS: dict[str, dict] = {
    "svg": {"align": None, "fast_path": True},
    "svg-no-fast-path": {"align": None, "fast_path": False},
    "svg-aligned": {"align": "snap", "fast_path": True},
    "svg-aligned-no-fast-path": {"align": "snap", "fast_path": False},
    # snap keeps the mask's size only roughly; inner never adds tokens: the two bracket the unaligned mask
    "svg-aligned-inner": {"align": "inner", "fast_path": True},
    # budget-preserving: as many pairs as the unaligned mask, to within half a tile (aligned vs unaligned at equal
    # pairs); per q tile row, so every row of queries keeps its share (one global budget lets the rows that rank
    # first on ties take it: on the toy's grid the last rows lose their band neighbours)
    "svg-aligned-balanced": {"align": "balanced-row", "fast_path": True},
    "svg-aligned-balanced-global": {"align": "balanced-global", "fast_path": True},
}


def psnr(reference: np.ndarray, test: np.ndarray, data_range: float = 2.0) -> float:
    """Peak signal-to-noise ratio in dB over all elements (``inf`` for identical inputs).

    DeepMind's ``dm_pix.psnr`` assumes a data range of 1, so both inputs are divided by ``data_range``;
    flattening to one "image" makes its mean squared error run over every pixel of the video.
    """
    reference, test = (x.reshape(-1, 1, 1) / data_range for x in _pair(reference, test))
    return float(pix.psnr(reference, test))


def ssim(reference: np.ndarray, test: np.ndarray, data_range: float = 2.0, window: int = 11,
         sigma: float = 1.5) -> float:
    """Mean SSIM of two ``[..., H, W, C]`` image stacks (``dm_pix.ssim`` per image, then averaged)."""
    reference, test = _pair(reference, test)
    if reference.ndim < 3 or min(reference.shape[-3:-1]) < window:
        raise BadInput(f"images must be [..., H, W, C] with H, W >= window={window}, got {reference.shape}")
    images = [x.reshape(-1, *x.shape[-3:]) for x in (reference, test)]
    return float(jnp.mean(pix.ssim(*images, max_val=data_range, filter_size=window, filter_sigma=sigma)))


def _pair(a, b) -> tuple[jax.Array, jax.Array]:
    a, b = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    if a.shape != b.shape:
        raise BadInput(f"reference and test must have the same shape, got {a.shape} and {b.shape}")
    return a, b


def head_kinds(infos: list) -> dict:
    """Per layer: the share of calls that were dense warm-up, and among the profiled (sparse) calls
    the share of heads chosen spatial / temporal, overall and per head index; plus how decisive
    profiling was, the median of ``|mse_s - mse_t| / max(mse_s, mse_t)`` over profiled heads
    (0 = both masks equally good, 1 = one mask far better).  ``infos[step][layer]`` are
    :class:`svgtpu.attention.svg.SVGInfo` with ``kinds [heads]`` or ``[batch, heads]``."""
    layers = []
    for layer in range(len(infos[0])):
        kinds = np.stack([np.asarray(step[layer].kinds) for step in infos])
        heads = kinds.shape[-1]
        kinds = kinds.reshape(len(infos), -1, heads)  # [steps, batch, heads]
        mse = np.stack([np.asarray(step[layer].mse) for step in infos]).reshape(len(infos), -1, heads, 2)
        sparse = kinds >= 0
        profiled = kinds[sparse.all(axis=(1, 2))].reshape(-1, heads)  # [calls, heads]
        m_s, m_t = mse[..., 0][sparse], mse[..., 1][sparse]
        gap = np.abs(m_s - m_t) / np.maximum(np.maximum(m_s, m_t), 1e-30)
        nan = float("nan")
        layers.append({"layer": layer, "warmup": float((~sparse).mean()),
                       "spatial": float((profiled == 0).mean()) if profiled.size else nan,
                       "temporal": float((profiled == 1).mean()) if profiled.size else nan,
                       "temporal_by_head": [float(x) for x in (profiled == 1).mean(0)] if profiled.size else [],
                       "decisiveness": float(np.median(gap)) if gap.size else nan})
    return {"layers": layers}


def square_side(tile: Tile) -> int:
    """The side of the toy's square kernel tile (its studies report one ``block``, as ``svgtpu quality --block``
    takes it), else :class:`BadInput`."""
    if tile.block_q != tile.block_kv:
        raise BadInput(f"the toy's tile must be square (block_q = block_kv), got {tile.block_q}x{tile.block_kv}")
    return tile.block_q


def quality_study(params, config, *, seeds=(0, 1, 2), num_steps: int = 20, guidance: float = 3.0,
                  shift: float = 1.0, kept: float | None = None, tile: Tile,
                  variants: dict[str, dict] | None = None, progress: bool = True, first_videos: bool = False) -> dict:
    """Dense vs each sparse variant from the same noise, for every seed (label ``seed % labels``).

    Returns per variant the mean/min PSNR and SSIM against dense, per seed the raw numbers, the
    fast-path check (max |difference| between fast path on and off, must be 0 up to float noise)
    and the head-kind fractions per layer; with ``first_videos`` also ``videos``, the first seed's
    video of dense and of each variant (numpy arrays, not JSON: a figure's, popped before recording).
    ``tile``: the square kernel tile (:func:`square_side`), the caller's (``svgtpu quality --block``, default the
    toy's :data:`svgtpu.setting.SMALL_TILE`, applied there).
    """
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.attention.backends import attention_backend
    from svgtpu.facts.results import provenance
    from svgtpu.kernels.common import resolve_interpret
    from svgtpu.toy.sampler import sample

    variants = VARIANTS if variants is None else variants
    block = square_side(tile)
    if not seeds:
        raise BadInput("seeds must name at least one seed")
    geometry = config.geometry
    svg_configs = {name: SVGConfig(kept=kept, block_q=tile.block_q, block_kv=tile.block_kv, **overrides)
                   for name, overrides in variants.items()}
    backends = {name: attention_backend("svg", geometry, svg_config=c, return_info=True)
                for name, c in svg_configs.items()}
    rows, videos, infos, seconds = [], {}, {name: [] for name in variants}, {"dense": 0.0}
    for seed in seeds:
        labels = [seed % config.num_labels]
        start = time.perf_counter()
        dense = sample(params, config, labels, seed=seed, num_steps=num_steps, guidance=guidance, shift=shift,
                       progress=progress)
        seconds["dense"] += time.perf_counter() - start
        videos[("dense", seed)] = dense
        for name, backend in backends.items():
            start = time.perf_counter()
            video, info = sample(params, config, labels, seed=seed, num_steps=num_steps, guidance=guidance,
                                 shift=shift, attention=backend, with_info=True, progress=progress)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
            videos[(name, seed)] = video
            infos[name].extend(info)
            rows.append({"variant": name, "seed": seed, "label": labels[0],
                         "psnr": psnr(dense, video), "ssim": ssim(dense, video)})
    summary = []
    for name in variants:
        mine = [r for r in rows if r["variant"] == name]
        summary.append({"variant": name, "psnr_mean": float(np.mean([r["psnr"] for r in mine])),
                        "psnr_min": float(np.min([r["psnr"] for r in mine])),
                        "ssim_mean": float(np.mean([r["ssim"] for r in mine])),
                        "ssim_min": float(np.min([r["ssim"] for r in mine])),
                        "mask_density": svg_configs[name].mask(geometry).density(),
                        "sample_seconds": seconds[name] / len(seeds)})
    fast_path_check = {}
    for name in variants:
        slow = f"{name}-no-fast-path"
        if slow in variants:
            fast_path_check[name] = max(float(np.abs(videos[(name, s)] - videos[(slow, s)]).max()) for s in seeds)
    return {"seeds": list(seeds), "num_steps": num_steps, "guidance": guidance, "shift": shift,
            "kept": kept, "block": block, "geometry": str(geometry), "summary": summary, "per_seed": rows,
            "fast_path_max_abs_diff": fast_path_check,
            "dense_sample_seconds": seconds["dense"] / len(seeds),
            "head_kinds": {name: head_kinds(infos[name])["layers"] for name in variants},
            "provenance": provenance("measured", interpret=resolve_interpret(None)),
            **({"videos": {name: videos[(name, seeds[0])] for name in ("dense", *variants)}} if first_videos else {})}


def format_study(result: dict) -> str:
    """:func:`quality_study` as ``svgtpu quality`` prints it: the summary, the fast-path check, head kinds."""
    from svgtpu.facts.tables import format_table
    table = format_table(result["summary"])
    table += "\n\nfast path on vs off, max |difference|: " + ", ".join(
        f"{k} {v:.2g}" for k, v in result["fast_path_max_abs_diff"].items())
    for name in [n for n in ("svg", "svg-aligned") if n in result["head_kinds"]]:
        table += f"\n\nhead kinds per layer, {name}:\n" + format_table(result["head_kinds"][name])
    return table + f"\n({result['provenance']})"


__all__ = ["VARIANTS", "psnr", "ssim", "head_kinds", "square_side", "quality_study", "format_study"]
