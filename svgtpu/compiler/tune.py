"""A compile-time tile tuner: our kernel's tiles ranked by the real TPU compiler's static cycles, no TPU needed.

``svgtpu tune --resolution 720p --device v6e`` compiles our kernel ahead of time (libtpu on this CPU,
:func:`svgtpu.compiler.variants.cached_compile`, compile records keyed by content) at each
candidate ``(block_q, block_kv, block_kv_compute)``, applies each compiled schedule to the grid steps of
the **tile-aligned SVG mask** at the kept fraction (default :data:`svgtpu.setting.DEFAULT_KEPT`;
:func:`svgtpu.compiler.estimate.estimate`), aligned by snapping (``--align snap``, the default) or by
budget-preserving rounding (``balanced-row`` / ``balanced-global``: every tile then executes about the
band's pairs, so the candidates compare at equal work) and ranks the candidates by **whole-kernel static cycles** per
head, with the HBM bytes per grid step beside them.  The aligned mask compiles to the same program at
any kept fraction (a ``padding`` plan: only padded keys are masked, :mod:`svgtpu.compiler.variants`), so
one compile per tile serves every ``--kept`` and ``--align``.

**Candidates** (:data:`AXES`, every combination our kernel takes and the VMEM budget admits):

- ``block_q``: 2048; :data:`~svgtpu.setting.PRODUCTION`'s (MaxDiffusion's Wan tile on v6e rounded up to a
  multiple of 128, which a key-major body needs: :data:`svgtpu.recipes.PRODUCTION_TILE`); 3328,
  MaxDiffusion's SVG tile (``svg_flash_block_sizes`` in docs/svg.md of AI-Hypercomputer/maxdiffusion,
  commit 2a52ee9c79ad6f991c998af600804f7519a49350: 3328 x 2816, ``block_kv_compute`` 256);
- ``block_kv``: 2048 (MaxDiffusion's Wan tile) and 2816 (its SVG tile);
- ``block_kv_compute``: 256 (its SVG tile's) and 512 (ours at the production tile).

Twelve combinations, of which 512 x 2816 is never legal
(512 does not divide 2816): enough to see the row height, the key width and the update width move the
cycles, few enough to compile cold within the quarter hour issue 37 allows on two cores.
A candidate our :class:`~svgtpu.kernels.KernelConfig` refuses, or whose VMEM need
(:func:`svgtpu.kernels.budget.vmem_bytes`, a lower estimate) exceeds the device's budget, is pruned
before compiling, with the reason; the compiler has the last word on the rest (a refusal is a row).
A new axis (a kernel layout) is one more entry in :data:`AXES` once :class:`Variant` has the field.

**Static cycles are not latency**: they are the compiler's bundles before any stall on memory; the
HBM bytes per step say how much each step must fetch behind them.  Each candidate's cycles are also
given over two full-fill rooflines (flops / the core's flops per cycle): of the tiles it computes
(its own denominator) and of the exact band's kept pairs (one denominator for every candidate);
``pairs_over_band`` is how far the snap moved the pairs a tile computes from the band's: a tile whose snap
drops pairs does less work, so read the ranking beside it.
Provenance ``compiled-v6e`` / ``compiled-v7x``: nothing ran.  ``--record`` writes the winner into
:data:`TUNED_FILE` (``figures/tuned_tiles.json``), which the ``tpu`` profile of ``svgtpu reproduce`` reads.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

from svgtpu.errors import BadInput
from svgtpu.facts.outputs import write_text
from svgtpu.setting import PRODUCTION

#: The candidate axes, by :class:`~svgtpu.kernels.KernelConfig` and :class:`~svgtpu.compiler.variants.Variant` field
#: (module doc: why these).
AXES: dict[str, tuple] = {
    "block_q": tuple(sorted({2048, PRODUCTION.block_q, 3328})),
    "block_kv": (2048, 2816),
    "block_kv_compute": (256, 512),
}
DEVICES = ("v6e", "v7x")
#: Tile alignments of the SVG band the steps are counted on (:data:`svgtpu.masks.core.ALIGN_MODES`, tile-aligned ones).
ALIGNS = ("snap", "balanced-row", "balanced-global")
HEAD_DIM = 128
DTYPE = "bfloat16"
#: The file ``--record`` writes in the figures folder, and the command that writes one entry.
TUNED_FILE = "tuned_tiles.json"
TUNE_COMMAND = "svgtpu tune --resolution {resolution} --device {device} --kept {kept} --align {align} --record"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One point of :data:`AXES` (``fields``: Variant field -> value) and why it was pruned, if it was."""

    fields: tuple[tuple[str, int], ...]
    pruned: str | None = None

    @property
    def tile(self) -> dict:
        return dict(self.fields)

    @property
    def label(self) -> str:
        t = self.tile
        return f"{t['block_q']}x{t['block_kv']}/{t['block_kv_compute']}" + "".join(
            f"/{v}" for k, v in self.fields if k not in ("block_q", "block_kv", "block_kv_compute"))


def check_inputs(resolution: str, device: str, kept: float, align: str = "snap"):
    """The geometry; one line naming the parameter for an unknown resolution, device or alignment or a
    kept fraction outside (0, 1) -- before anything compiles."""
    from svgtpu.geometry import get_geometry
    from svgtpu.masks.core import check_kept
    g = get_geometry(resolution, "--resolution")
    if device not in DEVICES:
        raise BadInput(f"--device must be one of {', '.join(DEVICES)}, got {device!r}")
    check_kept(kept, "--kept")
    if align not in ALIGNS:
        raise BadInput(f"--align must be one of {', '.join(ALIGNS)}, got {align!r}")
    return g


def candidates(resolution: str, device: str, axes: dict | None = None) -> list[Candidate]:
    """Every combination of ``axes`` (default :data:`AXES`), each pruned (with the reason) when our
    kernel refuses the tile, a block is longer than the padded sequence, or its VMEM need is over
    ``device``'s budget.  No compile."""
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.budget import device_memory, vmem_bytes
    from svgtpu.kernels.config import KernelConfig, check_blocks_cover
    axes = AXES if axes is None else axes
    L, budget = get_geometry(resolution).L, device_memory(device).vmem_budget
    item = 2 if DTYPE == "bfloat16" else 4
    out = []
    for values in itertools.product(*axes.values()):
        fields = tuple(zip(axes, values))
        t = dict(fields)
        try:
            config = KernelConfig(**t)  # every axis is a KernelConfig (and Variant) field
            check_blocks_cover(t["block_q"], t["block_kv"], L)
        except BadInput as e:
            out.append(Candidate(fields, f"refused: {e}"))
            continue
        need = vmem_bytes(config, HEAD_DIM, item, mask_blocks=False)  # the aligned mask: no mask blocks
        out.append(Candidate(fields, None if need <= budget else
                             f"VMEM: needs {need / 2**20:.1f} MiB, over the {device} budget of {budget / 2**20:.0f} MiB"))
    return out


def aligned_mask(resolution: str, block_q: int, block_kv: int, kept: float, align: str = "snap"):
    """The tile-aligned SVG band mask at ``kept`` (``align``: one of :data:`ALIGNS`), and the exact band."""
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.geometry import get_geometry
    g = get_geometry(resolution)
    exact = SVGConfig(kept=kept, block_q=block_q, block_kv=block_kv).mask(g)
    return SVGConfig(kept=kept, block_q=block_q, block_kv=block_kv, align=align).mask(g), exact


def variant_of(c: Candidate, resolution: str, device: str):
    """The compiled variant of a candidate: ours, fast path on, on the aligned mask."""
    from svgtpu.compiler.variants import Variant
    return Variant("ours", "svg-aligned", resolution, device=device, head_dim=HEAD_DIM, dtype=DTYPE, **c.tile)


def score(c: Candidate, compiled: dict, resolution: str, device: str, kept: float, align: str = "snap") -> dict:
    """One candidate's row from its compiled program (:func:`~svgtpu.compiler.variants.cached_compile`):
    the program's schedule applied to the steps of the aligned mask at ``kept``."""
    from svgtpu.compiler.estimate import estimate
    from svgtpu.compiler.tile_table import mask_roofline
    from svgtpu.compiler.units import core
    from svgtpu.compiler.variants import steps_ours
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.plan import tile_plan
    row = {**c.tile, "tile": c.label}
    if "refused" in compiled:
        return {**row, "compiled": False, "reason": compiled["refused"]}
    v = variant_of(c, resolution, device)
    L = get_geometry(resolution).L
    mask, exact = aligned_mask(resolution, v.block_q, v.block_kv, kept, align)
    source = tile_plan(mask, L, v.block_q, v.block_kv, v.fast_path).mask_source
    if source != "padding":  # the compiled program masks only padded keys: another mask source is another program
        raise RuntimeError(f"{c.label}: the {align}-aligned mask's plan reads its mask from {source!r}, not 'padding'")
    calls = steps_ours(v, mask, L)
    if len(calls) != len(compiled["schedules"]):  # a plan split into another number of SMEM chunks
        raise RuntimeError(f"{c.label}: the plan at kept {kept} has {len(calls)} chunks, the compiled program "
                           f"{len(compiled['schedules'])}")
    e = estimate({**compiled, "calls": calls}, v)
    roof = mask_roofline(mask, L, v.block_q, v.block_kv, v.head_dim, device, v.kernel_layout)
    band = 4 * v.head_dim * exact.density() * L * L / core(device).flops_per_cycle
    return {**row, "layout": v.kernel_layout, "compiled": True, "static_cycles": e["cycles"], "steps": e["steps"],
            "hbm_bytes": e["hbm_bytes"], "hbm_bytes_per_step": e["hbm_bytes"] / e["steps"],
            "overhead_share": e["overhead_share"], "tile_density": roof["tile_density"],
            "roofline_cycles": roof["roofline_cycles"], "over_roofline": e["cycles"] / roof["roofline_cycles"],
            "band_roofline_cycles": band, "over_band_roofline": e["cycles"] / band,
            "pairs_over_band": roof["roofline_cycles"] / band}


def winner(rows: list[dict]) -> dict | None:
    """The compiled row with the fewest static cycles (ties: fewer HBM bytes per step), or ``None``."""
    done = [r for r in rows if r.get("compiled")]
    return min(done, key=lambda r: (r["static_cycles"], r["hbm_bytes_per_step"])) if done else None


def tune(resolution: str, device: str, kept: float, align: str = "snap", *,
         axes: dict | None = None, progress: bool = False) -> dict:
    """Every candidate compiled (cached), scored (:func:`score`), and the winner."""
    from svgtpu.compiler.compile import topology_device
    from svgtpu.compiler.dumps import versions
    from svgtpu.compiler.tile_table import compile_all
    check_inputs(resolution, device, kept, align)
    every = candidates(resolution, device, axes)
    todo = [c for c in every if c.pruned is None]
    if not todo:
        raise BadInput(f"no candidate tile fits {device} at {resolution}: {every[0].pruned if every else 'none given'}")
    topology_device(device)  # one clear line without libtpu
    results = compile_all([variant_of(c, resolution, device) for c in todo], progress, device)
    rows = [score(c, r, resolution, device, kept, align) for c, r in zip(todo, results)]
    rows.sort(key=lambda r: (not r["compiled"], r.get("static_cycles", 0)))
    return {"resolution": resolution, "device": device, "kept": kept, "mask": "svg-aligned", "align": align,
            "head_dim": HEAD_DIM, "dtype": DTYPE, "provenance": f"compiled-{device}", "versions": versions(),
            "score": "whole-kernel static cycles per head (fewest wins); static cycles are not latency: no stall "
                     "on memory is in them, hbm_bytes_per_step is beside them",
            "denominators": {"over_roofline": "static cycles / full-fill roofline (flops / core flops per cycle) "
                                              "of the tiles this candidate computes",
                             "over_band_roofline": "static cycles / full-fill roofline of the exact band's kept "
                                                   "pairs (the same for every candidate)"},
            "axes": {k: list(v) for k, v in (AXES if axes is None else axes).items()},
            "candidates": rows, "pruned": [{**c.tile, "tile": c.label, "reason": c.pruned} for c in every if c.pruned],
            "winner": winner(rows)}


# -- the recorded winners ------------------------------------------------------------------------

def record(result: dict, figures_dir=None) -> str:
    """Write ``result``'s winner into :data:`TUNED_FILE` (one entry per device and resolution, the others
    kept), with its provenance, versions and command; the path written."""
    from pathlib import Path

    from svgtpu.facts.paths import REPO_ROOT
    path = Path(figures_dir or REPO_ROOT / "figures", TUNED_FILE)
    data = json.loads(path.read_text()) if path.exists() else {}
    data["note"] = ("the tile with the fewest whole-kernel static cycles (not latency) on the aligned SVG mask, "
                    "per device and resolution, from svgtpu tune; read by svgtpu reproduce --profile tpu")
    w = result["winner"]
    entry = {k: w[k] for k in ("block_q", "block_kv", "block_kv_compute", "static_cycles", "hbm_bytes_per_step",
                               "over_roofline", "over_band_roofline")}
    entry.update(kept=result["kept"], align=result["align"], candidates=len(result["candidates"]), provenance=result["provenance"],
                 versions=result["versions"], kernel_sources=kernel_sources_key(),
                 command=TUNE_COMMAND.format(**result))
    data.setdefault("tiles", {}).setdefault(result["device"], {})[result["resolution"]] = entry
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return str(path)


def kernel_sources_key() -> str:
    """A content key of our kernel's sources: a recorded winner whose key differs was tuned on another kernel."""
    from svgtpu.compiler.dumps import cache_key
    from svgtpu.compiler.variants import OUR_SOURCES
    return cache_key({"what": "kernel sources"}, OUR_SOURCES)


def tuned_tile(resolution: str, device: str = "v6e", figures_dir=None) -> dict | None:
    """The recorded winner (:func:`record`) for ``device`` at ``resolution``, or ``None`` if none is."""
    from pathlib import Path

    from svgtpu.facts.paths import REPO_ROOT
    path = Path(figures_dir or REPO_ROOT / "figures", TUNED_FILE)
    if not path.exists():
        return None
    return json.loads(path.read_text()).get("tiles", {}).get(device, {}).get(resolution)


def tune_command(resolution: str, device: str, kept: float, align: str, *, record_winner: bool,
                 progress: bool) -> tuple[dict, str]:
    """``svgtpu tune``: ``(result, table)``; ``record_winner``: write the winner (:func:`record`)."""
    from svgtpu.facts.tables import format_table
    result = tune(resolution, device, kept, align, progress=progress)
    if record_winner and result["winner"] is not None:
        result["recorded"] = record(result)
    rows = [{"tile": r["tile"], "layout": r["layout"], "static_cycles": r["static_cycles"], "steps": r["steps"],
             "hbm_KB_per_step": round(r["hbm_bytes_per_step"] / 1e3, 1), "over_roofline": round(r["over_roofline"], 3),
             "over_band_roofline": round(r["over_band_roofline"], 3), "pairs_over_band": round(r["pairs_over_band"], 3),
             "overhead_share": round(r["overhead_share"], 4)}
            if r["compiled"] else {"tile": r["tile"], "static_cycles": "not compiled: " + r["reason"][:100]}
            for r in result["candidates"]]
    v, w = result["versions"], result["winner"]
    head = (f"{result['resolution']}, {result['device']}, {result['align']}-aligned SVG mask at kept {result['kept']}, one head, bf16, "
            f"d={HEAD_DIM} [{result['provenance']}; jax {v['jax']}, libtpu {v['libtpu']}]; {result['score']}; "
            f"over_roofline: {result['denominators']['over_roofline']}; over_band_roofline: "
            f"{result['denominators']['over_band_roofline']}")
    parts = [head, format_table(rows)]
    if result["pruned"]:
        parts.append("pruned before compiling:\n" + "\n".join(f"  {p['tile']}: {p['reason']}" for p in result["pruned"]))
    parts.append(f"winner: {w['tile']} ({w['static_cycles']:,} static cycles)" if w else "winner: none compiled")
    if "recorded" in result:
        parts.append(f"recorded in {result['recorded']}")
    return result, "\n\n".join(parts)


__all__ = ["AXES", "DEVICES", "ALIGNS", "TUNED_FILE", "TUNE_COMMAND", "Candidate", "check_inputs", "candidates", "aligned_mask",
           "variant_of", "score", "winner", "tune", "record", "kernel_sources_key", "tuned_tile", "tune_command"]
