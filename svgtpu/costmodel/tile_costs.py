"""Self-attention as tiles: what one ``block_q x block_kv`` tile costs, and what a whole head costs
given the tiles and grid steps the kernel runs.

Two ways to price a head, and every result says which one it used:

- **compiled** (:func:`compiled_head_cycles`): the static cycles the real TPU compiler scheduled for
  this kernel's tile bodies, per grid step and per q row (``figures/compiled_tiles.json``,
  :mod:`svgtpu.costmodel.compiled`), summed over the steps the kernel takes on this mask and turned
  into seconds at the device's clock; the rule is the one ``svgtpu bench compiled`` applies to the
  whole kernel, so the two agree (a test holds them within 2 %);
- **prior** (:func:`attention_head_seconds`): a tile's time is ``max(MXU, VPU, EUP, HBM) / attention
  efficiency`` on one TensorCore (the units issue in parallel from one VLIW bundle stream), with
  MXU = ``QK^T`` + ``PV`` (``d = 128`` fills half of a 256-wide MXU), VPU and EUP = the work per score
  of :mod:`svgtpu.costmodel.kernel_work`, HBM = the K and V blocks streamed in; plus a fixed cost per
  grid step and each q row's Q read and O write.

Which steps a kernel takes on a mask (:func:`kernel_steps`): ours walks the non-empty tiles and gives
a q row with none one step that writes zeros (:mod:`svgtpu.kernels.plan`); JAX's Splash runs a grid
as long as the longest row and pads shorter rows with steps that skip their body; tokamax walks a
compacted list of the active tiles.  Tile counts come from the mask's tile classification
(:func:`svgtpu.masks.tiles.classify`), which is also what our kernel's plan is built from.  No JAX here.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from svgtpu.costmodel.compiled import HAS_FAST_PATH, CompiledTile
from svgtpu.costmodel.kernel_work import FLASH, KernelWork
from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.geometry import Tile, VideoGeometry, ceil_div
from svgtpu.masks.core import DenseMask, align, svg_mask
from svgtpu.masks.tiles import EMPTY, TileStats, classify
from svgtpu.errors import BadInput
from svgtpu.facts.kernels import kernel_names

MASK_KINDS = ("dense", "svg", "svg-aligned")
#: Kernels a head can be priced for (:data:`svgtpu.facts.kernels.KERNELS`): the TPU kernels of the compiled table,
#: and ``flash`` (FlashAttention on a GPU: concurrent thread blocks, no grid-step cost, no steps for empty rows).
ATTENTION_KERNELS = kernel_names(modeled=True)


def tile_units(device: DeviceSpec, eff: Efficiency, work: KernelWork, head_dim: int, tile: Tile, masked: bool,
               dtype_bytes: int = 2) -> dict[str, float]:
    """Seconds of one tile on each unit of one TensorCore, before the attention efficiency."""
    block_q, block_kv = tile
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


def tile_seconds(device: DeviceSpec, eff: Efficiency, work: KernelWork, head_dim: int, tile: Tile, masked: bool,
                 dtype_bytes: int = 2) -> float:
    """Time of one computed tile of one head on one TensorCore: the bound unit / efficiency."""
    u = tile_units(device, eff, work, head_dim, tile, masked, dtype_bytes)
    return max(u["mxu_qk"] + u["mxu_pv"], u["vpu"], u["eup"], u["hbm"]) / eff.attention


def attention_ceiling(device: DeviceSpec, work: KernelWork, head_dim: int = 128) -> dict:
    """The unit-level ceiling of dense attention on one chip: per-unit time per score element and
    the attention FLOP/s the bound unit allows (``4 d`` FLOPs per score), every efficiency 1."""
    ideal = Efficiency(1.0, 1.0, 1.0, 1.0, 1.0)
    u = tile_units(device, ideal, work, head_dim, Tile(1024, 1024), masked=False)
    per_element = {k: v / device.cores / 1024 ** 2 for k, v in u.items()}   # cores run tiles in parallel
    mxu = per_element["mxu_qk"] + per_element["mxu_pv"]
    bound = max(("mxu", mxu), ("vpu", per_element["vpu"]), ("eup", per_element["eup"]),
                ("hbm", per_element["hbm"]), key=lambda kv: kv[1])
    return {"device": device.name, "seconds_per_score": per_element, "bound_unit": bound[0],
            "attention_flops_ceiling": 4.0 * head_dim / bound[1],
            "fraction_of_matmul_peak": 4.0 * head_dim / bound[1] / device.matmul_flops}


def attention_head_seconds(stats: TileStats, device: DeviceSpec, eff: Efficiency, head_dim: int,
                           tile: Tile, *, fast_path: bool, q_rows: int,
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
    plain = tile_seconds(device, eff, work, head_dim, tile, False, dtype_bytes)
    extra = tile_seconds(device, eff, work, head_dim, tile, True, dtype_bytes) - plain
    t = (stats.partial + stats.full) * plain + masked * extra   # extra >= 0: masking only adds work
    steps = stats.partial + stats.full + empty_row_steps
    rows = q_rows * 2.0 * tile.block_q * head_dim * dtype_bytes / (device.hbm_bandwidth / device.cores * eff.memory)
    return t + steps * device.grid_step_seconds + rows


@dataclasses.dataclass(frozen=True)
class MaskFacts:
    """What the model reads of a mask besides its tile counts (JAX Splash's ``MaskInfo`` plays this part for
    its kernel): its density, the q rows, rows without any tile, the most tiles in one row (``None`` for a
    mask known only by its counts), whether the mask cuts inside tiles (else only the padded keys of the
    last kv tile are masked), our kernel's grid steps, and an SVG band's window and multiplier."""

    density: float | None       # kept pairs / all pairs (None: a mask known only by its tile counts)
    q_rows: int
    empty_rows: int
    max_row_tiles: int | None
    mask_cuts_tiles: bool
    grid_steps: int | None = None
    window: int | None = None
    multiplier: float | None = None

    @property
    def empty_row_steps(self) -> int:
        """Our kernel's steps on rows without a tile (one each)."""
        return self.empty_rows

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "empty_row_steps": self.empty_row_steps}


@functools.lru_cache(maxsize=64)
def mask_tiles(geometry: VideoGeometry, kind: str, tile: Tile,
               multiplier: float | None = None, kept: float | None = None) -> tuple[TileStats, MaskFacts]:
    """Tile counts of the ``dense``, ``svg`` or ``svg-aligned`` (snap) mask, and its :class:`MaskFacts`
    (our kernel's grid steps: every non-empty tile, plus one step per empty row)."""
    if kind not in MASK_KINDS:
        raise BadInput(f"mask kind must be dense, svg or svg-aligned, got {kind!r}")
    band = {}
    if kind == "dense":
        mask = DenseMask(geometry.L)
    else:
        base = svg_mask(geometry, multiplier, kept=kept)
        band = {"window": base.window, "multiplier": base.window / geometry.F}
        mask = align(base, tile, "snap") if kind == "svg-aligned" else base
    c = classify(mask, tile)
    per_row = np.count_nonzero(c.kinds != EMPTY, axis=1)
    stats = c.stats
    empty_rows = int(np.count_nonzero(per_row == 0))
    return stats, MaskFacts(density=1.0 if kind == "dense" else mask.density(),
                            q_rows=ceil_div(geometry.L, tile.block_q),
                            empty_rows=empty_rows, max_row_tiles=int(per_row.max()),
                            mask_cuts_tiles=not c.only_padding_masked,
                            grid_steps=stats.full + stats.partial + empty_rows, **band)


def kernel_steps(kernel: str, stats: TileStats, info: MaskFacts) -> dict:
    """The grid steps ``kernel`` takes on a mask (module doc): ``computed`` tiles and ``empty`` steps."""
    if kernel not in ATTENTION_KERNELS:
        raise BadInput(f"kernel must be one of {', '.join(ATTENTION_KERNELS)}, got {kernel!r}")
    computed = stats.full + stats.partial
    if kernel == "ours":
        return {"computed": computed, "empty": info.empty_rows}
    if kernel == "splash":
        if info.max_row_tiles is None:
            raise ValueError("JAX Splash's grid is as long as the mask's longest row: price it with the facts "
                             "of svgtpu.costmodel.mask_tiles, not bare tile counts")
        return {"computed": computed, "empty": info.q_rows * info.max_row_tiles - computed}
    return {"computed": computed, "empty": 0}


def compiled_head_cycles(tile: CompiledTile, stats: TileStats, info: MaskFacts, *, fast_path: bool = True) -> dict:
    """Static cycles of one head of ``tile.kernel`` over a mask with tile counts ``stats`` (module doc).

    A partial tile runs the body of a tile the mask cuts when the mask cuts inside tiles, else the body
    masked only by padded keys.  With a fast path (and ``fast_path``) full tiles run the full body; with
    the fast path turned off every tile runs the kernel's masked body; a kernel without one runs the partial
    body on every tile once the mask has a partial tile (Splash).  Every grid
    step adds the step overhead (a skipped one its ``empty_step``), every q row its init and finish.
    Returns the parts and ``total``; ``roofline``: the computed tiles at the MXU roofline.
    """
    steps = kernel_steps(tile.kernel, stats, info)
    partial_body = tile.partial_body(info.mask_cuts_tiles)
    if fast_path and HAS_FAST_PATH[tile.kernel]:
        bodies = stats.full * tile.full + stats.partial * partial_body
    elif HAS_FAST_PATH[tile.kernel]:  # its fast path turned off: every tile runs the one masked body
        bodies = (stats.full + stats.partial) * tile.masked_body(info.mask_cuts_tiles)
    else:
        bodies = (stats.full + stats.partial) * (partial_body if stats.partial else tile.full)
    parts = {"bodies": bodies,
             "step_overhead": (steps["computed"] + steps["empty"]) * tile.step_overhead,
             "empty_steps": steps["empty"] * (tile.empty_step or 0.0),
             "rows": info.q_rows * (tile.init_finish or 0.0)}
    total = sum(parts.values())
    return {**parts, "total": total, "steps": steps["computed"] + steps["empty"],
            "roofline": steps["computed"] * tile.roofline_tile if tile.roofline_tile else None}


def compiled_head_seconds(tile: CompiledTile, stats: TileStats, info: MaskFacts, device: DeviceSpec, eff: Efficiency,
                          head_dim: int, *, fast_path: bool = True, dtype_bytes: int = 2) -> float:
    """One head on one TensorCore from the compiled cycles (:func:`compiled_head_cycles`) at the device's
    clock, or the HBM traffic of its steps (K and V blocks each step, Q and O once per q row) if that is
    longer, over the attention efficiency (what the static schedule does not see: stalls)."""
    cycles = compiled_head_cycles(tile, stats, info, fast_path=fast_path)
    per_step = tile.hbm_bytes_per_step or 2.0 * tile.block_kv * head_dim * dtype_bytes
    hbm = cycles["steps"] * per_step + info.q_rows * 2.0 * tile.block_q * head_dim * dtype_bytes
    memory = hbm / (device.hbm_bandwidth / device.cores * eff.memory)
    return max(cycles["total"] / device.clock_hz, memory) / eff.attention


__all__ = ["MASK_KINDS", "ATTENTION_KERNELS", "tile_units", "tile_seconds", "attention_ceiling", "attention_head_seconds",
           "MaskFacts", "mask_tiles", "kernel_steps", "compiled_head_cycles", "compiled_head_seconds"]
