"""An interactive explorer of tiles, masks, kernel budget and modeled cost (JupyterLab, ipywidgets).

Move a control and watch tiles turn from partial to full: geometry (preset or ``TxHxW``), kept
fraction or band multiplier, head kind (spatial; temporal after or before the layout
transformation; dense), tile size, alignment mode, device and chips.  Every redraw uses the masks'
analytic tile counts (:meth:`svgtpu.masks.core.Mask.count_grid`), never an ``L x L`` array, so 1440p
redraws in well under a second even at 512 x 512 tiles (``svgtpu explore --geometry 1440p
--block-q 512 --block-kv 512`` prints the time).

The computing core is plain functions, testable without widgets:

- :class:`Settings` (frozen, validated once) -> :func:`compute` -> a stats dict (tile counts,
  partial share, density, pairs alignment added/dropped, the kernel's check of the tile, the cost
  model's attention time and speedup);
- :func:`tile_png` draws the tile-kind map straight from its pixels (downsampled, and saying so,
  for large grids), and :func:`render` is one redraw: stats and maps of one or more settings.

:func:`explorer` builds the widgets: one panel for one setting and a second comparing two.
Refusals (a tile the kernel does not accept, a geometry that does not parse, a device the cost
model lacks) are shown in the panel, never raised.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import html
import io
import time

import numpy as np

from svgtpu.geometry import PRESETS, Tile, VideoGeometry, ceil_div, check_positive_int, get_geometry
from svgtpu.masks.core import (ALIGN_MODES, Mask, TileMask, align, alignment_diff, check_kept, make_mask,
                               multiplier_for_kept)
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION, Setting
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL, TileStats, classify
from svgtpu.errors import BadInput

#: Head kinds offered, label -> :func:`svgtpu.masks.core.make_mask` kind.
HEAD_KINDS = {
    "spatial": "spatial",
    "temporal, after layout transform": "temporal",
    "temporal, before layout transform (frame-major)": "temporal-frame-major",
    "dense": "dense",
}
ALIGN_CHOICES = ("none", *ALIGN_MODES)
#: Tile sides worth trying (3024 x 2048: MaxDiffusion's Wan tile on v6e); the dropdowns offer those
#: the kernel takes (:func:`kernel_tiles`).  ``Settings`` accepts any size up to the (padded) sequence:
#: :func:`kernel_check` then shows the kernel's refusal.
BLOCK_Q_CANDIDATES = (128, 256, 512, 1024, 2048, 3024, 4096)
BLOCK_KV_CANDIDATES = (128, 256, 512, 1024, 2048, 4096)
CHIP_CHOICES = (1, 2, 4, 8, 16, 32)
#: Tile maps with more tiles per side than this are drawn downsampled (and say so).
MAX_MAP_SIDE = 160
#: Side of the widgets' tile-map image, in pixels (about; scaled by a whole factor).
MAP_PIXELS = 360


def _cost_devices() -> tuple[str, ...]:
    """Device names the cost model knows."""
    from svgtpu import costmodel
    return tuple(costmodel.DEVICES)


@dataclasses.dataclass(frozen=True)
class Settings:
    """One point of the explorer: a :class:`~svgtpu.setting.Setting` (its ``resolution`` a preset or a ``TxHxW``
    token grid) seen through one head kind and one alignment mode, checked once against what the explorer draws."""

    setting: Setting = PRODUCTION
    head: str = "spatial"
    align: str = "none"

    def __post_init__(self):
        s = self.setting
        get_geometry(s.resolution)  # raises one line naming the geometry
        if s.kept is not None:
            check_kept(s.kept)
        if self.head not in HEAD_KINDS.values():
            raise BadInput(f"head must be one of {', '.join(HEAD_KINDS.values())}, got {self.head!r}")
        check_positive_int("block_q", s.block_q)
        check_positive_int("block_kv", s.block_kv)
        from svgtpu.kernels.config import check_blocks_cover
        check_blocks_cover(s.block_q, s.block_kv, self.token_grid.L)
        check_positive_int("chips", s.chips)
        if self.align not in ALIGN_CHOICES:
            raise BadInput(f"align must be one of {', '.join(ALIGN_CHOICES)}, got {self.align!r}")
        from svgtpu import costmodel
        costmodel.get_model(s.model)
        costmodel.mesh_shape(costmodel.get_device(s.device), s.chips)  # a device, chips a slice of it has

    def as_dict(self) -> dict:
        """What the explorer reports of its setting (``svgtpu explore --json``'s ``settings``)."""
        s = self.setting
        return {"geometry": s.resolution, "kept": s.kept, "multiplier": s.multiplier, "head": self.head,
                "block_q": s.block_q, "block_kv": s.block_kv, "align": self.align, "device": s.device,
                "chips": s.chips, "model": s.model}

    @property
    def token_grid(self) -> VideoGeometry:
        return get_geometry(self.setting.resolution)

    @property
    def band_multiplier(self) -> float:
        """The band multiplier the mask uses (from ``kept`` when that is given)."""
        if self.setting.multiplier is not None:
            return float(self.setting.multiplier)
        return _multiplier_for(self.token_grid, float(self.setting.kept))


@functools.lru_cache(maxsize=64)
def _multiplier_for(geometry: VideoGeometry, kept: float) -> float:
    return multiplier_for_kept(geometry, kept)


@dataclasses.dataclass(frozen=True, eq=False)
class _SharedCounts(Mask):
    """``base`` with a memory for :meth:`count_grid`: classification, alignment and the alignment
    diff all ask for the same tile grid, which is then counted once."""

    base: Mask

    def __post_init__(self):
        object.__setattr__(self, "_memo", {})

    @property
    def L(self) -> int:  # type: ignore[override]
        return self.base.L

    @property
    def computable(self) -> bool:  # type: ignore[override]
        return self.base.computable

    def allowed(self, q, k):
        return self.base.allowed(q, k)

    def count_grid(self, q_edges, k_edges):
        q_edges, k_edges = np.asarray(q_edges, np.int64), np.asarray(k_edges, np.int64)
        key = (q_edges.tobytes(), k_edges.tobytes())
        if key not in self._memo:
            self._memo[key] = self.base.count_grid(q_edges, k_edges)
        return self._memo[key]


@functools.lru_cache(maxsize=16)
def _mask(geometry: VideoGeometry, head: str, multiplier: float) -> _SharedCounts:
    return _SharedCounts(make_mask(head, geometry, multiplier))


@functools.lru_cache(maxsize=32)
def _tiles(geometry: VideoGeometry, head: str, multiplier: float, block_q: int, block_kv: int, mode: str):
    """(the mask the kernel runs, its tile classification, stats before alignment, :class:`MaskDiff` or None)."""
    mask = _mask(geometry, head, multiplier)
    before = classify(mask, Tile(block_q, block_kv))
    if mode == "none":
        kernel_mask, tiles, diff = mask, before, None
    else:
        kernel_mask = _SharedCounts(align(mask, Tile(block_q, block_kv), mode))
        tiles, diff = classify(kernel_mask, Tile(block_q, block_kv)), alignment_diff(mask, kernel_mask.base)
    tiles.kinds.setflags(write=False)   # cached: callers share it
    return kernel_mask, tiles, before.stats, diff


def _plan(mask: Mask, block_q: int, block_kv: int):
    """The kernel's tile plan of ``mask``, or ``None`` when building it here would be wrong or too
    costly: a tile the kernel refuses (``ValueError``, reported by :func:`kernel_check`), or a mask
    the kernel can neither compute from iotas nor cover with whole tiles (its plan would store every
    masked tile as a block: gigabytes at video sizes)."""
    from svgtpu.kernels.plan import tile_plan
    if not (mask.computable or isinstance(getattr(mask, "base", mask), TileMask)):
        return None
    try:
        return tile_plan(mask, mask.L, block_q, block_kv)
    except BadInput:
        return None


def _head_dim(model: str) -> int:
    """The model's head dimension, from the cost model."""
    from svgtpu import costmodel
    return costmodel.get_model(model).head_dim


def kernel_check(settings: Settings, plan, head_dim: int | None) -> dict:
    """Does our Pallas kernel take this tile, and does it fit the device's SMEM and VMEM?

    Uses the kernel's own rules (:class:`svgtpu.kernels.config.KernelConfig`, the budgets of
    :mod:`svgtpu.kernels.budget` and the tile plan's SMEM size; inputs bfloat16, as Wan runs).
    Refusals come back as text (``accepted: False`` and ``reason``, beside the ``smem`` / ``vmem`` lines
    saying what fits), never as an exception: one verdict, a tile whose blocks overflow VMEM is refused.
    """
    out = {"accepted": True, "reason": ""}
    from svgtpu.kernels import budget
    from svgtpu.kernels.config import KernelConfig
    setting = settings.setting
    try:
        config = KernelConfig(block_q=setting.block_q, block_kv=setting.block_kv)
    except BadInput as error:
        return {**out, "accepted": False, "reason": str(error)}
    try:
        memory = budget.device_memory(setting.device)
    except BadInput as error:
        return {**out, "smem": f"no TPU budget: {error}", "vmem": "—"}
    if plan is None:
        out["smem"] = "plan not built (mask not computable in the kernel: it would store mask blocks)"
    else:
        chunks = len(plan.chunks(memory.smem_budget)) if plan.smem_bytes > memory.smem_budget else 1
        out["plan_steps"] = plan.num_steps
        out["smem"] = (f"plan {plan.smem_bytes / 1024:,.1f} KiB of {memory.smem_budget / 1024:,.0f} KiB"
                       + ("" if chunks == 1 else f": over budget, split into {chunks} calls"))
    if head_dim is None:
        out["vmem"] = f"needs the head dimension of {setting.model} (cost model unavailable)"
        return out
    need = budget.vmem_bytes(config, head_dim, 2, plan is None or plan.mask_source == "blocks")  # bf16: 2 bytes
    out["vmem_fits"] = need <= memory.vmem_budget
    out["vmem"] = (f"{need / 2**20:,.1f} MiB of {memory.vmem_budget / 2**20:,.0f} MiB: "
                   + ("fits" if out["vmem_fits"] else "does not fit: refused"))
    if not out["vmem_fits"]:
        out.update(accepted=False, reason=f"its blocks need {need / 2**20:,.1f} MiB of VMEM, over {setting.device}'s "
                                          f"{memory.vmem_budget / 2**20:,.0f} MiB budget")
    return out


def modeled_cost(settings: Settings, stats: TileStats, empty_row_steps: int, *, video: bool = False) -> dict:
    """The cost model's self-attention time of one head (one TensorCore, fast path on) for this
    mask and for the dense mask at the same tile, their ratio, and with ``video`` its end-to-end
    SVG recipe (:func:`svgtpu.costmodel.model_video`: building its tile plans takes seconds the
    first time at small tiles, so the widgets ask for it with a checkbox).

    Uses :mod:`svgtpu.costmodel`'s public functions; when they refuse the setting the
    reason comes back as ``error``, for the panel to show.
    """
    try:
        from svgtpu import costmodel as cm
        setup = cm.setting_setup(settings.setting)   # the explorer's Setting, passed down as it is
        dense_stats, dense_info = cm.mask_tiles(setup.geometry, "dense", setup.setting.tile)
        this = setup.head_seconds(stats, empty_row_steps)
        dense = setup.head_seconds(dense_stats, info=dense_info)
        out = {"provenance": setup.provenance, "attention_head_seconds": this, "dense_attention_head_seconds": dense,
               "attention_speedup": dense / this, "heads_per_chip": setup.heads_per_chip, "error": ""}
        if video:
            result = cm.model_video(setup)
            out.update({k: result[k] for k in ("speedup", "dense_minutes", "svg_minutes", "attention_share")})
        return out
    except BadInput as error:  # a setting the model refuses: shown as text; bugs still raise
        return {"error": str(error)}


def compute(settings: Settings, *, video: bool = False) -> dict:
    """Everything the explorer shows for ``settings``, as a dict (JSON-able but for ``kinds``, the
    ``int8 [nq, nk]`` tile-kind map).  ``video`` adds the modeled end-to-end video."""
    g, s = settings.token_grid, settings.setting
    multiplier = settings.band_multiplier
    kernel_mask, tiles, before, diff = _tiles(g, settings.head, multiplier, s.block_q, s.block_kv, settings.align)
    kinds, stats = tiles.kinds, tiles.stats
    plan = _plan(kernel_mask, s.block_q, s.block_kv)
    # a q row without a non-empty tile still takes one grid step (it writes zeros): see kernels.plan
    empty_rows = plan.empty_row_steps if plan is not None else int((~kinds.any(axis=1)).sum())
    mask = _mask(g, settings.head, multiplier).base
    return {
        "settings": settings.as_dict(),
        "geometry": {"name": g.name or str(g), "T": g.T, "H": g.H, "W": g.W, "F": g.F, "L": g.L},
        "multiplier": multiplier, "window": getattr(getattr(mask, "base", mask), "window", None),
        "pair_density": kernel_mask.density(), "tiles_q": int(kinds.shape[0]), "tiles_kv": int(kinds.shape[1]),
        **stats.as_dict(),
        "before_alignment": before.as_dict() if diff is not None else None,
        "alignment": diff.as_dict() if diff is not None else None,
        "kernel": kernel_check(settings, plan, _head_dim(s.model)),
        "cost": modeled_cost(settings, stats, empty_rows, video=video),
        "provenance": "computed",
        "kinds": kinds,
    }


# -- figures ----------------------------------------------------------------------------------

def _rgb(color: str) -> np.ndarray:
    from matplotlib.colors import to_rgb
    return np.array(to_rgb(color))


def _downsample_factor(shape: tuple[int, int], max_side: int = MAX_MAP_SIDE) -> int:
    """Tiles per side of one pixel of a downsampled map (1: exact)."""
    return max(1, ceil_div(max(shape), max_side))


def downsample(kinds: np.ndarray, max_side: int = MAX_MAP_SIDE) -> tuple[np.ndarray, int]:
    """``(rgb image, factor)``: each pixel covers ``factor x factor`` tiles and mixes the tile-kind
    colours in proportion to how many tiles of each kind it covers (factor 1: exact colours)."""
    from svgtpu.styles import TILE_COLORS
    factor = _downsample_factor(kinds.shape, max_side)
    nq, nk = ceil_div(kinds.shape[0], factor), ceil_div(kinds.shape[1], factor)
    padded = np.full((nq * factor, nk * factor), -1, dtype=np.int8)
    padded[:kinds.shape[0], :kinds.shape[1]] = kinds
    blocks = padded.reshape(nq, factor, nk, factor)
    share = np.stack([(blocks == k).sum(axis=(1, 3)) for k in (EMPTY, PARTIAL, FULL)], axis=-1).astype(float)
    covered = share.sum(-1, keepdims=True)
    colors = np.stack([_rgb(TILE_COLORS[k]) for k in (EMPTY, PARTIAL, FULL)])
    image = np.where(covered > 0, share / np.maximum(covered, 1) @ colors, 1.0)
    return image, factor


def _describe(stats: dict) -> str:
    s = stats["settings"]
    head = next(label for label, kind in HEAD_KINDS.items() if kind == s["head"])
    budget = f"kept {s['kept']:g}" if s["kept"] is not None else f"multiplier {s['multiplier']:g}"
    aligned = "unaligned" if s["align"] == "none" else f"aligned ({s['align']})"
    return f"{stats['geometry']['name']} · {head} · {budget} · {aligned}"


def tile_png(stats: dict, side: int = MAP_PIXELS) -> bytes:
    """The tile-kind map as a small PNG drawn straight from the pixels (what the widgets show).

    The colours of :data:`svgtpu.styles.TILE_COLORS`, downsampled by :func:`downsample`, scaled by a
    whole factor to about ``side`` pixels, white tile borders when tiles are big enough to see.  A
    few milliseconds, where a matplotlib figure with titles and layout takes most of a second on a
    busy CPU.
    """
    from PIL import Image

    image, factor = downsample(stats["kinds"])
    scale = max(1, side // max(image.shape[:2]))
    pixels = np.repeat(np.repeat(np.rint(image * 255).astype(np.uint8), scale, 0), scale, 1)
    if factor == 1 and scale >= 4:
        pixels[scale - 1::scale, :] = 255
        pixels[:, scale - 1::scale] = 255
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def render(*settings: Settings, video: bool = False) -> tuple[list[dict], list[bytes], float]:
    """``(stats per setting, tile-map PNG per setting, seconds taken)``: one redraw of the widgets."""
    start = time.perf_counter()
    stats = [compute(s, video=video) for s in settings]
    images = [tile_png(s) for s in stats]
    return stats, images, time.perf_counter() - start


def benchmark(settings: Settings, *, repeats: int = 5, video: bool = False) -> dict:
    """Redraw times of ``settings``: ``cold`` is the first redraw of this setting in a warm process
    (imports done and the kernel's work traced for this tile on a tiny grid first: what moving a
    control to a new value costs), ``cached`` the median of ``repeats`` redraws after it."""
    check_positive_int("repeats", repeats)
    # a small T x 8 x 8 grid one tile fits, a frame longer: on a grid one tile long the band's first step keeps every
    # pair, and a kept fraction has no mask there (masks.core.multiplier_for_kept refuses it)
    frames = ceil_div(max(settings.setting.block_q, settings.setting.block_kv), 64) + 1
    tiny = dataclasses.replace(settings.setting, resolution=f"{frames}x8x8")
    render(dataclasses.replace(settings, setting=tiny), video=video)   # warm the process
    stats, _, cold = render(settings, video=video)
    cached = sorted(render(settings, video=video)[2] for _ in range(repeats))[repeats // 2]
    return {"stats": stats[0], "cold_seconds": cold, "cached_seconds": cached, "repeats": repeats}


def summary(settings: Settings, *, repeats: int = 5, video: bool = False) -> dict:
    """``svgtpu explore``: the stats of ``settings`` (JSON-able: no tile map) and their redraw times."""
    bench = benchmark(settings, repeats=repeats, video=video)
    stats = {k: v for k, v in bench.pop("stats").items() if k != "kinds"}
    return {**stats, "redraw": bench, "provenance": "computed"}


def format_summary(result: dict) -> str:
    """:func:`summary` as the panel's rows, one per line, then the redraw times."""
    redraw = result["redraw"]
    lines = [f"{label}: {value}" for _, label, value in rows({**result, "kinds": None})]
    lines.append(f"redraw: {redraw['cold_seconds'] * 1e3:.0f} ms the first time, {redraw['cached_seconds'] * 1e3:.1f} "
                 f"ms cached (median of {redraw['repeats']}) [measured-cpu, this machine]")
    return "\n".join(lines)


# -- text -------------------------------------------------------------------------------------

def _fmt_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def rows(stats: dict) -> list[tuple[str, str, str]]:
    """``(key, label, value)`` rows of the stats table, values formatted as shown; the same rows for
    every setting (``—`` where a row does not apply), so settings line up side by side."""
    g, a, k, c = stats["geometry"], stats["alignment"], stats["kernel"], stats["cost"]
    na = "—"
    cost_error = f"unavailable: {c['error']}" if c["error"] else ""

    def cost(key: str, fmt, modeled: bool = True) -> str:
        if cost_error:   # said once, on the first cost row
            return cost_error if key == "attention_head_seconds" else na
        if key not in c:
            return na
        return f"{fmt(c[key])} ({c['provenance']})" if modeled else fmt(c[key])

    return [
        ("grid", "token grid T x H x W (L)", f"{g['T']} x {g['H']} x {g['W']} ({g['L']:,})"),
        ("window", "band half-width W (multiplier)",
         na if stats["window"] is None else f"{stats['window']:,} ({stats['multiplier']:.3g})"),
        ("pair_density", "pairs kept by the mask the kernel runs", f"{stats['pair_density']:.2%}"),
        ("tiles", "tiles (q x kv)", f"{stats['tiles_q']:,} x {stats['tiles_kv']:,} = {stats['total']:,}"),
        ("full", "full tiles (mask-free)", f"{stats['full']:,}"),
        ("partial", "partial tiles (masked)", f"{stats['partial']:,}"),
        ("empty", "empty tiles (skipped)", f"{stats['empty']:,}"),
        ("partial_share", "partial share", f"{stats['partial_share']:.2%}"),
        ("density", "tile density", f"{stats['density']:.2%}"),
        ("partial_share_before", "partial share before alignment",
         na if a is None else f"{stats['before_alignment']['partial_share']:.2%}"),
        ("added", "pairs added by alignment", na if a is None else f"{a['added']:,} ({a['added_fraction']:.2%})"),
        ("dropped", "pairs dropped by alignment",
         na if a is None else f"{a['dropped']:,} ({a['dropped_fraction']:.2%})"),
        ("kernel", "our kernel takes this tile", "yes" if k["accepted"] else f"refused: {k['reason']}"),
        ("plan_steps", "kernel grid steps per head", f"{k['plan_steps']:,}" if "plan_steps" in k else na),
        ("smem", "SMEM of the device (tile plan)", k.get("smem", na)),
        ("vmem", "VMEM of the device", k.get("vmem", na)),
        ("attention_time", "attention, one head, this mask", cost("attention_head_seconds", _fmt_seconds)),
        ("attention_dense", "attention, one head, dense", cost("dense_attention_head_seconds", _fmt_seconds)),
        ("attention_speedup", "attention speedup vs dense", cost("attention_speedup", "{:.2f}x".format)),
        ("heads_per_chip", "heads per chip (Ulysses: heads split over the chips)",
         cost("heads_per_chip", str, modeled=False)),
        ("video_speedup", "SVG recipe end to end (snap + fast path)",
         cost("speedup", lambda v: f"{v:.2f}x, {c['dense_minutes']:.3g} → {c['svg_minutes']:.3g} min")),
    ]


def stats_html(*stats: dict, names: tuple[str, ...] = ()) -> str:
    """The stats of one or more settings as one HTML table, a column per setting; each value cell
    has the class ``svgtpu-<key>`` (the browser test reads them)."""
    table = [rows(st) for st in stats]
    head = "<tr><th></th>" + "".join(f"<th>{html.escape(n)}</th>" for n in names) + "</tr>" if names else ""
    body = "".join(
        f"<tr><th style='text-align:left;font-weight:normal'>{html.escape(label)}</th>"
        + "".join(f"<td class='svgtpu-{key}'>{html.escape(column[i][2])}</td>" for column in table) + "</tr>"
        for i, (key, label, _) in enumerate(table[0]))
    return f"<table class='svgtpu-stats' style='font-size:85%;line-height:1.25'>{head}{body}</table>"


def map_html(stats: dict, image: bytes, name: str = "") -> str:
    """One tile map as HTML: what it shows, the PNG (inline) and the colour legend."""
    from svgtpu.styles import TILE_COLORS, TILE_NAMES
    s = stats["settings"]
    kinds = stats["kinds"]
    factor = _downsample_factor(kinds.shape)
    view = "" if factor == 1 else f"; downsampled view: 1 pixel = {factor} x {factor} tiles, colours mixed"
    legend = " ".join(f"<span style='display:inline-block;width:0.9em;height:0.9em;background:{TILE_COLORS[k]};"
                      f"border:1px solid #999;vertical-align:middle'></span> {html.escape(TILE_NAMES[k])}"
                      for k in (FULL, PARTIAL, EMPTY))
    prefix = f"<b>{html.escape(name)}</b> " if name else ""
    src = base64.b64encode(image).decode("ascii")
    return (f"<div style='font-size:90%'>{prefix}{html.escape(_describe(stats))}<br>"
            f"{kinds.shape[0]:,} x {kinds.shape[1]:,} tiles of {s['block_q']} x {s['block_kv']}{view}<br>"
            f"<img class='svgtpu-map' alt='tile-kind map' src='data:image/png;base64,{src}'><br>{legend}</div>")


def show(*settings: Settings, video: bool = True) -> None:
    """Display the maps and stats of ``settings`` as static HTML (what papermill and a notebook
    without a widget frontend keep)."""
    from IPython.display import HTML, display
    stats, images, _ = render(*settings, video=video)
    names = tuple("AB"[i] if len(settings) == 2 else str(i + 1) for i in range(len(settings))) if len(settings) > 1 else ()
    maps = "".join(f"<div style='display:inline-block;vertical-align:top;margin-right:1em'>"
                   f"{map_html(st, im, names[i] if names else '')}</div>" for i, (st, im) in enumerate(zip(stats, images)))
    display(HTML(maps + stats_html(*stats, names=names)))


# -- widgets ----------------------------------------------------------------------------------

class _Controls:
    """The widgets of one setting; ``css`` prefixes their classes (``svgtpu-<css>-block_q`` ...)."""

    def __init__(self, settings: Settings, css: str):
        import ipywidgets as w

        view, settings = settings, settings.setting
        by_kept = settings.kept is not None
        block_q_sides, block_kv_sides = kernel_tiles()
        style = {"description_width": "7em"}
        layout = w.Layout(width="25em")   # one Layout shared by the controls of a setting
        self.widgets = {
            "geometry": w.Combobox(value=settings.resolution, options=list(PRESETS), description="geometry",
                                   placeholder="preset or TxHxW", ensure_option=False, continuous_update=False),
            "budget": w.ToggleButtons(options=["kept", "multiplier"], value="kept" if by_kept else "multiplier",
                                      description="budget by"),
            "value": w.FloatSlider(value=settings.kept if by_kept else settings.multiplier, min=0.05,
                                   max=0.95 if by_kept else 8.0, step=0.01 if by_kept else 0.05,
                                   description="kept" if by_kept else "multiplier", continuous_update=False),
            "head": w.Dropdown(options=list(HEAD_KINDS.items()), value=view.head, description="head"),
            "block_q": w.Dropdown(options=_choices(block_q_sides, settings.block_q), value=settings.block_q,
                                  description="block_q"),
            "block_kv": w.Dropdown(options=_choices(block_kv_sides, settings.block_kv), value=settings.block_kv,
                                   description="block_kv"),
            "align": w.Dropdown(options=list(ALIGN_CHOICES), value=view.align, description="alignment"),
            "device": w.Dropdown(options=_cost_devices() or (settings.device,), value=settings.device,
                                 description="device"),
            "chips": w.Dropdown(options=_choices(CHIP_CHOICES, settings.chips), value=settings.chips,
                                description="chips"),
        }
        self.model = settings.model
        for name, widget in self.widgets.items():
            widget.style = style
            widget.layout = layout
            widget.add_class(f"svgtpu-{css}-{name}")
        self.widgets["budget"].style = {"description_width": "7em", "button_width": "8em"}
        self.widgets["budget"].observe(self._budget_changed, "value")
        self.box = w.VBox(list(self.widgets.values()), layout=w.Layout(flex="0 0 auto", width="26em"))

    def _budget_changed(self, change) -> None:
        slider = self.widgets["value"]
        kept = change["new"] == "kept"
        with slider.hold_trait_notifications():
            slider.max = 0.95 if kept else 8.0    # widen first, so value stays inside
            slider.step = 0.01 if kept else 0.05
            slider.value = DEFAULT_KEPT if kept else 1.0
            slider.description = "kept" if kept else "multiplier"

    def observe(self, callback) -> None:
        for name, widget in self.widgets.items():
            if name != "budget":   # the slider change that follows it triggers the redraw
                widget.observe(callback, "value")

    def settings(self) -> Settings:
        """The current setting (``ValueError`` with one line if a value is refused)."""
        v = {name: widget.value for name, widget in self.widgets.items()}
        budget = {"kept": v["value"], "multiplier": None} if v["budget"] == "kept" else \
            {"kept": None, "multiplier": v["value"]}
        setting = Setting(resolution=str(v["geometry"]).strip(), block_q=v["block_q"], block_kv=v["block_kv"],
                          device=v["device"], chips=v["chips"], model=self.model, **budget)
        return Settings(setting, head=v["head"], align=v["align"])


def _choices(options: tuple[int, ...], value: int) -> list[tuple[str, int]]:
    return [(str(o), o) for o in sorted({*options, value})]


def kernel_tiles() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(block_q sides, block_kv sides)`` among the candidates that the kernel's
    :class:`~svgtpu.kernels.config.KernelConfig` accepts."""
    from svgtpu.kernels.config import KernelConfig

    def accepted(**tile) -> bool:
        try:
            KernelConfig(**{"block_q": 512, "block_kv": 512, **tile})
            return True
        except BadInput:
            return False

    return (tuple(q for q in BLOCK_Q_CANDIDATES if accepted(block_q=q)),
            tuple(k for k in BLOCK_KV_CANDIDATES if accepted(block_kv=k)))


class Panel:
    """Controls for one or two settings, their tile maps and one stats table, redrawn on change."""

    def __init__(self, settings: tuple[Settings, ...], css: str, title: str):
        import ipywidgets as w

        self.css = css
        self.names = tuple("AB"[i] for i in range(len(settings))) if len(settings) == 2 else ()
        self.controls = [_Controls(s, f"{css}-{n.lower()}" if self.names else css)
                         for s, n in zip(settings, self.names or ("",))]
        self.maps = [w.HTML() for _ in settings]
        for m in self.maps:
            m.add_class(f"svgtpu-{css}-figure")
        self.table = w.HTML()
        self.table.add_class(f"svgtpu-{css}-stats")
        self.status = w.HTML()
        self.status.add_class(f"svgtpu-{css}-status")
        self.video = w.Checkbox(value=False, indent=False, layout=w.Layout(width="auto"),
                                description="also model the whole video (first time per tile: seconds)")
        self.video.add_class(f"svgtpu-{css}-video")
        self.video.observe(self.redraw, "value")
        if len(settings) == 1:   # controls | map | table
            body = [w.HBox([self.controls[0].box, self.maps[0], self.table])]
        else:                    # A: controls, map | B: controls, map; the table under both
            body = [w.HBox([w.VBox([c.box, m]) for c, m in zip(self.controls, self.maps)]), self.table]
        self.widget = w.VBox([w.HTML(f"<h3>{html.escape(title)}</h3>"), *body, self.video, self.status])
        self.widget.add_class(f"svgtpu-{css}")
        for c in self.controls:
            c.observe(self.redraw)
        self.redraw()

    def redraw(self, *_) -> None:
        """Recompute and redraw; a refused value is shown in the status line, not raised."""
        try:
            settings = [c.settings() for c in self.controls]
            stats, images, seconds = render(*settings, video=self.video.value)
        except BadInput as error:
            self.status.value = (f"<span class='svgtpu-error' style='color:#b00020'>refused: "
                                 f"{html.escape(str(error))}</span>")
            return
        for m, st, im, name in zip(self.maps, stats, images, self.names or ("",)):
            m.value = map_html(st, im, name)
        self.table.value = stats_html(*stats, names=self.names)
        self.status.value = (f"<span class='svgtpu-ok' style='color:#666'>redrawn in "
                             f"{seconds * 1e3:.0f} ms · tiles: computed from analytic counts</span>")


def explorer(settings: Settings | None = None, compare: tuple[Settings, Settings] | None = None):
    """The explorer widget: one setting, then two side by side (default: unaligned vs snap)."""
    import ipywidgets as w

    settings = settings or Settings()
    compare = compare or (dataclasses.replace(settings, align="none"), dataclasses.replace(settings, align="snap"))
    box = w.VBox([Panel((settings,), "explore", "Explore one setting").widget,
                  Panel(compare, "compare", "Compare two settings (A vs B)").widget])
    box.add_class("svgtpu-explorer")
    return box
