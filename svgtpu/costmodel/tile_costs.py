"""Self-attention as tiles: what one ``block_q x block_kv`` tile costs on each unit, and what a whole
head costs given the tile plan the kernel runs.

A tile's time is ``max(MXU, VPU, EUP, HBM) / attention efficiency`` on one TensorCore (the units
issue in parallel from one VLIW bundle stream), where

- MXU = ``QK^T`` (contraction depth ``d`` against the array side) + ``PV`` (output width ``d``
  against the array side): with ``d = 128`` on v6e's 256-wide MXUs both fill half the array;
- VPU = softmax ops per score (+ masking ops on a masked tile), EUP = exp per score, counted from
  our kernel (:mod:`svgtpu.costmodel.kernel_work`);
- HBM = the K and V blocks the tile streams in (on a GPU shared by the thread blocks of one wave,
  ``DeviceSpec.kv_reuse``).

A head adds, per grid step of the plan (computed tiles plus the steps that only write zeros for
empty q rows), the fixed step cost ``DeviceSpec.grid_step_seconds``, and per q row its Q read and O
write.  Tile counts come from :func:`svgtpu.kernels.plan.tile_plan`, the plan the kernel runs.
"""

from __future__ import annotations

import functools

from svgtpu.costmodel.kernel_work import FLASH, KernelWork
from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.geometry import VideoGeometry, ceil_div
from svgtpu.masks.core import DenseMask, align, svg_mask
from svgtpu.masks.tiles import TileStats, classify
from svgtpu.errors import BadInput

MASK_KINDS = ("dense", "svg", "svg-aligned")


def tile_units(device: DeviceSpec, eff: Efficiency, work: KernelWork, head_dim: int, block_q: int,
               block_kv: int, masked: bool, dtype_bytes: int = 2) -> dict[str, float]:
    """Seconds of one tile on each unit of one TensorCore, before the attention efficiency."""
    core = device.cores
    elements = float(block_q) * block_kv
    mxu_rate = device.matmul_flops / core
    vector_ops = work.vector_ops + (work.mask_vector_ops if masked else 0.0)
    return {
        "mxu_qk": 2.0 * elements * head_dim / (mxu_rate * device.matmul_utilization(head_dim)),
        "mxu_pv": 2.0 * elements * head_dim / (mxu_rate * device.matmul_utilization(head_dim)),
        "vpu": elements * vector_ops / (device.vector_ops / core * eff.vector_scale),
        "eup": elements * work.exp_ops / (device.exp_ops / core * eff.vector_scale),
        "hbm": (2.0 * block_kv * head_dim * dtype_bytes / device.kv_reuse + work.score_bytes * elements)
               / (device.hbm_bandwidth / core * eff.memory),
    }


def tile_seconds(device: DeviceSpec, eff: Efficiency, work: KernelWork, head_dim: int,
                 block_q: int, block_kv: int, masked: bool, dtype_bytes: int = 2) -> float:
    """Time of one computed tile of one head on one TensorCore: the bound unit / efficiency."""
    u = tile_units(device, eff, work, head_dim, block_q, block_kv, masked, dtype_bytes)
    return max(u["mxu_qk"] + u["mxu_pv"], u["vpu"], u["eup"], u["hbm"]) / eff.attention


def attention_ceiling(device: DeviceSpec, work: KernelWork, head_dim: int = 128) -> dict:
    """The unit-level ceiling of dense attention on one chip: per-unit time per score element and
    the attention FLOP/s the bound unit allows (``4 d`` FLOPs per score), every efficiency 1."""
    ideal = Efficiency(1.0, 1.0, 1.0, 1.0, 1.0)
    u = tile_units(device, ideal, work, head_dim, 1024, 1024, masked=False)
    per_element = {k: v / device.cores / 1024 ** 2 for k, v in u.items()}   # cores run tiles in parallel
    mxu = per_element["mxu_qk"] + per_element["mxu_pv"]
    bound = max(("mxu", mxu), ("vpu", per_element["vpu"]), ("eup", per_element["eup"]),
                ("hbm", per_element["hbm"]), key=lambda kv: kv[1])
    return {"device": device.name, "seconds_per_score": per_element, "bound_unit": bound[0],
            "attention_flops_ceiling": 4.0 * head_dim / bound[1],
            "fraction_of_matmul_peak": 4.0 * head_dim / bound[1] / device.matmul_flops}


def attention_head_seconds(stats: TileStats, device: DeviceSpec, eff: Efficiency, head_dim: int,
                           block_q: int, block_kv: int, *, fast_path: bool, q_rows: int,
                           work: KernelWork = FLASH, dtype_bytes: int = 2,
                           empty_row_steps: int = 0) -> float:
    """Self-attention time of one head on one TensorCore over a mask with tile counts ``stats``.

    Empty tiles cost nothing.  With ``fast_path`` only partial tiles pay the masking work; without
    it every computed tile does whenever the mask has a partial tile (Splash Attention's
    behaviour).  Every grid step (computed tiles + ``empty_row_steps``) pays the fixed step cost;
    each of the ``q_rows`` q-tile rows reads its Q block and writes its O block once.
    """
    mask_all = not fast_path and stats.partial > 0
    masked = stats.partial + (stats.full if mask_all else 0)
    plain = tile_seconds(device, eff, work, head_dim, block_q, block_kv, False, dtype_bytes)
    extra = tile_seconds(device, eff, work, head_dim, block_q, block_kv, True, dtype_bytes) - plain
    t = (stats.partial + stats.full) * plain + masked * extra   # extra >= 0: masking only adds work
    steps = stats.partial + stats.full + empty_row_steps
    rows = q_rows * 2.0 * block_q * head_dim * dtype_bytes / (device.hbm_bandwidth / device.cores * eff.memory)
    return t + steps * device.grid_step_seconds + rows


@functools.lru_cache(maxsize=64)
def mask_tiles(geometry: VideoGeometry, kind: str, block_q: int, block_kv: int,
               multiplier: float | None = None, kept: float | None = None,
               from_plan: bool = True) -> tuple[TileStats, dict]:
    """Tile counts of the ``dense``, ``svg`` or ``svg-aligned`` (snap) mask, and mask facts
    (density, window, grid steps, empty-row steps, q rows).

    ``from_plan``: read them from the tile plan our kernel runs
    (:func:`svgtpu.kernels.plan.tile_plan`, which also validates the tile sizes); ``False`` for
    other kernels (FlashAttention, XLA), which take no steps for empty rows.
    """
    from svgtpu.kernels.plan import tile_plan

    if kind not in MASK_KINDS:
        raise BadInput(f"mask kind must be dense, svg or svg-aligned, got {kind!r}")
    if kind == "dense":
        mask = DenseMask(geometry.L)
        info = {"density": 1.0}
    else:
        base = svg_mask(geometry, multiplier, kept=kept)
        info = {"window": base.window, "multiplier": base.window / geometry.F}
        mask = align(base, block_q, block_kv, "snap") if kind == "svg-aligned" else base
        info["density"] = mask.density()
    info["q_rows"] = ceil_div(geometry.L, block_q)
    if from_plan:
        plan = tile_plan(mask, geometry.L, block_q, block_kv)
        stats = plan.tile_stats[0]
        info.update(grid_steps=plan.num_steps, empty_row_steps=plan.empty_row_steps)
    else:
        stats = classify(mask, block_q, block_kv).stats
        info.update(grid_steps=stats.full + stats.partial, empty_row_steps=0)
    return stats, info


__all__ = ["MASK_KINDS", "tile_units", "tile_seconds", "attention_ceiling", "attention_head_seconds",
           "mask_tiles"]
