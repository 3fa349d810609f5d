"""The paper's tables: claims, per-claim results, figures, environment, compiled, GPU runs, the TPU comparison.

Each function turns the results file (``figures/results.json``, loaded) into one markdown block; a result the file
does not hold yet renders as *not yet measured* (:data:`NOT_YET`).  :func:`format_value` writes every number of
ours the way a reader reads it (fractions as percent, ratios with ``x``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from svgtpu.facts.results import REPORTED, load_results
from svgtpu.setting import PRODUCTION

NOT_YET = "not yet measured"


@dataclasses.dataclass(frozen=True)
class ClaimRow:
    """One row of the claims table: the results entry ``claim/name`` next to the write-up.

    ``reported`` is the write-up's wording; ``{}`` in it is filled with ``REPORTED[claim, compare_to]``
    (default ``name``), so the write-up's numbers are stated once, in :data:`svgtpu.facts.results.REPORTED`.
    """

    claim: str
    name: str
    what: str
    reported: str = "—"
    compare_to: str | None = None

    def reported_text(self) -> str:
        if "{}" not in self.reported:
            return self.reported
        key = (self.claim, self.compare_to or self.name)
        value = REPORTED[key]
        words = {"speedup": f"{value:g}x", "minutes_saved": f"{value:g}"}.get(key[1], f"{100 * value:g} %")
        return self.reported.format(words)   # as the write-up writes it: 1.69x, 16, 88.2 %


#: The claims table.  Main line: the default recipe's kept fraction (svgtpu.recipes) for C1, C3 and C4; the
#: ``_m1`` rows repeat C3 with band multiplier 1.  Every row shows its mask, kept pairs and tiles.
CLAIM_ROWS = [
    ClaimRow("C1", "speedup", f"end-to-end speedup, {PRODUCTION.label()}", "{}"),
    ClaimRow("C1", "minutes_saved", "minutes saved per video, same setup", "over {} min"),
    ClaimRow("C1", "toy_speedup", "toy DiT sampling speedup, dense vs SVG both through our kernel in "
             "interpret mode on this CPU (not a TPU number)"),
    ClaimRow("C2", "attention_share_1440p", f"self-attention share of time, {PRODUCTION.label()}", "{}"),
    ClaimRow("C2", "attention_share_end_to_end_1440p", "the same share of the whole generation (text encoder, "
             "VAE decode and host time included)", "{}", compare_to="attention_share_1440p"),
    ClaimRow("C2", "attention_share_720p", f"self-attention share of time, {PRODUCTION.label('720p')}"),
    ClaimRow("C3", "partial_share_before", f"partial (masked) tiles, SVG mask, {PRODUCTION.resolution}", "{}"),
    ClaimRow("C3", "partial_share_after", f"partial (masked) tiles after snap alignment, {PRODUCTION.resolution}", "{}"),
    ClaimRow("C3", "partial_share_before_m1", f"partial tiles, SVG mask, band multiplier 1, {PRODUCTION.resolution}", "{}",
             compare_to="partial_share_before"),
    ClaimRow("C3", "partial_share_after_m1", f"partial tiles after snap alignment, band multiplier 1, {PRODUCTION.resolution}", "{}",
             compare_to="partial_share_after"),
    ClaimRow("C4", "fast_path_speedup", "attention speedup from the fast path: an interpret-mode time ratio "
             "on this CPU, not TPU latency", "lower latency (no number)"),
    ClaimRow("C4", "vector_ops_removed_full", "vector work the fast path removes from a full tile (kernel program)"),
    ClaimRow("C4", "bundles_partial_over_full", "issue cycles of a masked tile over a full one, as the real TPU "
             "compiler schedules our kernel for v6e (static bundles: compiled, not run)"),
    ClaimRow("C4", "compiled_fast_path_speedup_svg", "whole-kernel static v6e cycles of ours on the SVG mask, fast "
             f"path off / on, {PRODUCTION.resolution}, production tiles (the compiler's schedule of every grid step: compiled, not run)",
             "lower latency (no number)"),
    ClaimRow("C4", "compiled_aligned_over_our_dense", "sparse overhead vs our dense: ours on the aligned SVG mask with "
             "the fast path over our dense cycles x tile density (not a roofline: the roofline rows follow)"),
    ClaimRow("C4", "compiled_ours_over_splash_svg_aligned", "ours / JAX Splash on the same aligned SVG mask, whole-kernel "
             "static v6e cycles"),
    ClaimRow("C4", "compiled_ours_over_tokamax_svg_aligned", "ours / tokamax splash on the same aligned SVG mask, "
             "whole-kernel static v6e cycles"),
    ClaimRow("C1", "compiled_block_ratio_1440p", "SVG / dense static cycles of one compiled Wan 2.1 14B block, 1440p "
             "(the DiT side of C1 without warm-up)"),
    ClaimRow("C1", "central_sparse_efficiency", "the central sparse-layer efficiency: dense layer x density over the "
             "modeled sparse layer (the compiled kernel stretched as MaxDiffusion's TPU runs imply, and SVG's profiling "
             "and layout transform)"),
    ClaimRow("C2", "compiled_attention_share_1440p", f"self-attention share of one compiled Wan block's static cycles, "
             f"{PRODUCTION.resolution}", "{}", compare_to="attention_share_1440p"),
    ClaimRow("C2", "compiled_attention_share_720p", "the same at 720p"),
    ClaimRow("C2", "compiled_attention_share_with_ici_1440p", "the same compiled block priced as the model prices a pass "
             f"(its collectives at the ICI time of their compiled bytes), {PRODUCTION.resolution}", "{}",
             compare_to="attention_share_1440p"),
    ClaimRow("C5", "compiled_cycles_exponent", "our kernel's compiled whole-kernel cycles ∝ L^k over 480p ... 2160p "
             "(a check: quadratic by construction)",
             "quadratic"),
    ClaimRow("C5", "flops_exponent", "exact FLOPs ∝ L^k over 480p ... 2160p (a check: quadratic by construction)", "quadratic"),
    ClaimRow("C5", "toy_attention_exponent", "attention time ∝ L^k, exponent k, toy DiT timed on this CPU (a check: "
             "its interval does not hold the spread between runs)",
             "quadratic"),
    ClaimRow("Q", "psnr_aligned", "PSNR of snap-aligned SVG vs dense video, toy DiT (snapping changes the kept pairs: "
             "not at the unaligned row's density)"),
    ClaimRow("Q", "psnr_aligned_balanced", "PSNR of balanced-aligned SVG vs dense video, toy DiT (a budget per q "
             "tile row: the unaligned mask's kept pairs to within half a tile)"),
    ClaimRow("Q", "psnr_unaligned", "PSNR of SVG vs dense video, toy DiT (equal kept pairs with the balanced row, "
             "not with the snap row)"),
    ClaimRow("Q", "psnr_gap_aligned_equal_pairs", "PSNR of unaligned minus balanced-aligned SVG, toy DiT: aligned vs "
             "unaligned at equal kept pairs, one seed (the next row: the mean over seeds)"),
    ClaimRow("Q", "psnr_gap_equal_pairs_seeds", "the same gap, mean over seeds with a t-interval over seeds (the "
             "paper's number)"),
]


def format_value(value, unit: str = "") -> str:
    """A number as a reader wants it: fractions as percent, ratios with ``x``, others with unit."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if unit == "fraction":
        return f"{100 * value:.2f} %"
    if unit == "ratio":
        return f"{value:.2f}x"
    if isinstance(value, int):
        return f"{value:,}" + (f" {unit}" if unit else "")
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return text + (f" {unit}" if unit else "")


def markdown_table(rows: list[dict], columns: list[str] | None = None, units: dict | None = None) -> str:
    if not rows:
        return "_(no rows)_"
    columns = columns or list(rows[0])
    units = units or {}
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        cells = [format_value(row.get(c), units.get(c, "")) if isinstance(row.get(c), (int, float))
                 else str(row.get(c, "")) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def missing(what: str) -> str:
    return f"_Not generated yet: {what}. Run `python -m svgtpu reproduce`._"


def _fraction_columns(rows: list[dict]) -> dict:
    """Columns of a fraction-valued table that hold fractions: every value a float in [0, 1]."""
    return {c: "fraction" for c in rows[0]
            if all(isinstance(r.get(c), float) and 0.0 <= r[c] <= 1.0 for r in rows)}


def value_range(entry: dict, key: str) -> str:
    """``a – b``: the entry's ``band`` or ``iqr`` in its unit."""
    return " – ".join(format_value(b, entry.get("unit", "")) for b in entry[key])


def spread(entry: dict) -> str:
    """`` (band a – b)`` for a modeled range, `` (IQR a – b)`` for a measured spread, else nothing."""
    for key, word in (("band", "interval"), ("interval", "interval"), ("iqr", "IQR")):
        if entry.get(key):
            return f" ({word} {value_range(entry, key)})"
    return ""


def tiles_text(entry: dict) -> str:
    if entry.get("block_q") and entry.get("block_kv"):
        return f"{entry['block_q']}×{entry['block_kv']}"
    return "—"


#: Results shown in the claims table by their name's pattern, with their own description: every compiled ratio
#: over the MXU roofline (ours, Splash, tokamax; notebook 04), next to the "over our dense" ratio above.
PATTERN_ROWS = (("C4", re.compile(r"compiled_\w+_over_roofline\w*")),)


def _pattern_rows(data: dict) -> list[ClaimRow]:
    return [ClaimRow(claim, name, entry.get("description") or name)
            for claim, pattern in PATTERN_ROWS for name, entry in sorted(data["claims"].get(claim, {}).items())
            if pattern.fullmatch(name)]


def result_entry(data: dict, key: str) -> dict | None:
    """The results entry ``CLAIM.name`` (``C1.speedup``), or None."""
    claim, name = key.split(".", 1)
    return data["claims"].get(claim, {}).get(name)


def claims_table(data: dict) -> str:
    """The claims table: one row per :data:`CLAIM_ROWS` entry (and :data:`PATTERN_ROWS` match) the results
    hold, with the mask, its kept pairs (``density``) and tile size as the notebook recorded them."""
    rows = []
    for row in CLAIM_ROWS + _pattern_rows(data):
        entry = data["claims"].get(row.claim, {}).get(row.name)
        if entry is None:
            continue
        rows.append({"claim": row.claim, "what": row.what, "mask": entry.get("mask", "—"),
                     "kept pairs": format_value(entry.get("density"), "fraction"), "tiles": tiles_text(entry),
                     "reported": row.reported_text(),
                     "ours": format_value(entry["value"], entry.get("unit", "")) + spread(entry),
                     "provenance": f"`{entry['provenance']}`", "profile": entry["profile"]})
    return markdown_table(rows) if rows else missing("no claim has results")


def claim_details(data: dict, claim: str) -> str:
    """Every scalar result of ``claim`` in one table, then each list-valued result as a table."""
    entries = data["claims"].get(claim, {})
    if not entries:
        return missing(f"results for {claim}")
    tables = []
    for name, entry in sorted(entries.items()):
        value = entry["value"]
        if is_table(value):
            units = entry.get("units") or (_fraction_columns(value) if entry.get("unit") == "fraction" else {})
            tables.append(f"*{entry.get('description') or name}* (`{entry['provenance']}`, profile "
                          f"{entry['profile']}, `{name}`)\n\n" + markdown_table(value, units=units))
    scalars = _scalar_rows(entries)
    parts = [markdown_table(scalars)] if scalars else []
    return "\n\n".join(parts + tables)


def figure_block(data: dict, name: str, target: Path, figures: Path) -> str:
    figure = data["figures"].get(name)
    if figure is None:
        return missing(f"figure {name}")
    png = next((f for f in figure["files"] if f.endswith(".png")), figure["files"][0])
    link = Path(os.path.relpath(figures / png, target.parent)).as_posix()
    return (f"![{name}]({link})\n\n*{figure['caption']}* Provenance: `{figure['provenance']}`, "
            f"profile {figure['profile']}, jax {figure['jax']} on {figure['backend']}.")


def environment_table(data: dict) -> str:
    rows = [{"notebook": name, "profile": info["profile"], "backend": info["backend"], "jax": info["jax"],
             "svgtpu": info["svgtpu"], "finished (UTC)": info["finished"], "figures": len(info["figures"])}
            for name, info in sorted(data["notebooks"].items())]
    return markdown_table(rows) if rows else missing("no notebook has run")


def _scalar_rows(entries: dict) -> list[dict]:
    return [{"result": f"`{name}`", "description": entry.get("description", ""),
             "ours": format_value(entry["value"], entry.get("unit", "")) + spread(entry),
             "reported": format_value(entry.get("reported"), entry.get("unit", "")),
             "provenance": f"`{entry['provenance']}`", "profile": entry["profile"]}
            for name, entry in sorted(entries.items()) if not is_table(entry["value"])]


def is_table(value) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict)


def gpu_table(figures: Path) -> str:
    """The claims of every committed GPU run of the package (``figures/gpu-runs/``, newest first, each named by
    its file and commit; the peers measured beside them are notebook 08's), or why there are none."""
    from svgtpu.bench.gpu_results import committed_runs

    runs = sorted((r for r in committed_runs(figures / "gpu-runs") if r["kind"] == "package"),
                  key=lambda r: (r["date"], r["file"]), reverse=True)
    if not runs:
        return f"_{NOT_YET.capitalize()}: no GPU run yet (`figures/gpu-runs/` holds none)._"
    parts = []
    for r in runs:
        data = load_results(figures / "gpu-runs" / r["file"])
        labels = sorted({e.get("provenance", "") for entries in data["claims"].values() for e in entries.values()})
        others = [p for p in labels if p != r["provenance"]]
        parts.append(f"*`{r['file']}`: `svgtpu bench gpu` at commit {r['commit']} on {r['device']}: timings "
                     f"`{r['provenance']}`" + (f"; the model's predictions beside them " + ", ".join(f"`{p}`" for p in others)
                                               + " (not GPU runs: each row's label says which)" if others else "") + "*")
        parts += [f"**{claim}**\n\n" + claim_details(data, claim) for claim in sorted(data["claims"])]
    return "\n\n".join(parts)


def compiled_table(data: dict) -> str:
    """Every result counted in a program the real TPU compiler built (provenance ``compiled-*``), per claim."""
    blocks = []
    for claim, entries in data["claims"].items():
        found = {n: e for n, e in entries.items() if str(e.get("provenance", "")).startswith("compiled-")}
        if found:
            blocks.append(f"**{claim}**\n\n" + claim_details({"claims": {claim: found}}, claim))
    return "\n\n".join(blocks) or f"_{NOT_YET.capitalize()}: no compiled result yet._"


def entries_table(data: dict, claim: str, prefix: str, *, keep: bool = True) -> str:
    """The results of ``claim`` whose names start with ``prefix`` (``keep=False``: all the others, for a
    section whose ``entries`` block shows those elsewhere), as :func:`claim_details` shows them."""
    found = {n: e for n, e in data["claims"].get(claim, {}).items() if n.startswith(prefix) == keep}
    if not found:
        return f"_{NOT_YET.capitalize()}: no `{claim}` result {'' if keep else 'other than '}`{prefix}*` yet._"
    return claim_details({"claims": {claim: found}}, claim)


def against_tpu_table(data: dict) -> str:
    """Our numbers beside MaxDiffusion's measured SVG runs on v6e-8 (notebook 06, ``C1.tpu_*``): the dense control,
    each policy's speedup (blind, calibrated; the role of each run), the sparse stretch and the gap's terms."""
    runs, blind = result_entry(data, "C1.tpu_runs"), result_entry(data, "C1.tpu_blind")
    if runs is None or blind is None:
        return f"_{NOT_YET.capitalize()}: notebook 06 has not recorded the TPU comparison yet._"
    dense, stretch, gap = (result_entry(data, f"C1.{k}") for k in ("tpu_dense_control_error", "tpu_sparse_stretch", "tpu_gap"))
    ours = next((r for r in blind["value"] if r["kernel"] == "ours"), blind["value"][0])
    rows = []
    if dense:
        rows.append(["dense denoising (fixed-M splash), s", f"{dense['published_s']:.2f}", "—",
                     f"{dense['predicted_s']:.1f}", f"{100 * dense['value']:+.1f} %", "validation", "—"])
    for r in runs["value"]:
        saved = (f"{100 * r['flops_saved_published']:.1f} % / {100 * r['flops_saved_counted']:.1f} %"
                 if "flops_saved_counted" in r else "—")
        rows.append([f"{r['policy']} speedup", f"{r['published_speedup']:.3f}x",
                     f"{ours['speedup']:.2f}x" if r["policy"].endswith("moderate") else "—",
                     f"{r['predicted_speedup']:.3f}x", f"{100 * r['error']:+.1f} %", r["role"], saved])
    head = ["MaxDiffusion run (Wan 2.2 A14B 720p, v6e-8)", "measured (theirs, `measured-tpu`)",
            "ours blind", "ours calibrated", "error", "role", "transformer FLOPs saved: theirs / counted here"]
    table = "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows)
    others = ", ".join(f"{r['kernel']} {r['speedup']:.2f}x" for r in blind["value"])
    fitted = result_entry(data, "C1.validation_tpu_realized_over_static")
    matmul = result_entry(data, "C1.validation_tpu_compute_efficiency")
    fit = (f"; the one fitted number, the non-attention ops' realized over static time {fitted['value']:.3f} "
           f"(`{fitted['provenance']}`), fitted to the moderate run's seconds only (the TPU matmul efficiency "
           f"{matmul['value']:.3f} derived from it)") if fitted and matmul else ""
    lines = [table, "", f"Blind (`{blind['provenance']}`): {others}, at kept pairs {blind['kept']:.3f}; calibrated: sparse "
             f"stretch {stretch['value']:.3f} (`{stretch['provenance']}`), not fitted (the sparse tiles as compiled)"
             f"{fit}." if stretch else ""]
    if gap:
        terms = "; ".join(f"{t['term']} {100 * t['share_of_gap']:.0f} %" for t in gap["value"])
        lines.append(f"Gap from the static schedule ({gap['static_speedup']:.2f}x) to the measured "
                     f"{gap['measured_speedup']:.2f}x, share per term: {terms}.")
    return "\n".join(lines)


def presets_table() -> str:
    """The Wan presets' pixels, token grid, frame size ``F`` and token count ``L`` (computed from
    :data:`svgtpu.geometry.PRESETS`, Wan's VAE strides and patch)."""
    from svgtpu.geometry import PRESETS, WAN_PATCH, WAN_VAE_STRIDE
    rows = []
    for name, g in PRESETS.items():
        height, width = (n * s * p for n, s, p in zip((g.H, g.W), WAN_VAE_STRIDE[1:], WAN_PATCH[1:]))
        rows.append({"preset": name, "pixels": f"{width}×{height}", "grid T×H×W": f"{g.T}×{g.H}×{g.W}",
                     "F = H·W": g.F, "L": g.L})
    return markdown_table(rows) + "\n\n(`computed`: `svgtpu.geometry.PRESETS`)"


__all__ = ["presets_table", "NOT_YET", "ClaimRow", "CLAIM_ROWS", "PATTERN_ROWS", "format_value", "markdown_table", "missing",
           "value_range", "spread", "tiles_text", "is_table", "result_entry", "claims_table", "claim_details", "figure_block",
           "environment_table", "gpu_table", "compiled_table", "entries_table", "against_tpu_table"]
