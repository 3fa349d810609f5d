"""``svgtpu paper``: fill the paper's tables and figure blocks from the results file.

The write-up (``paper/svgtpu.md``, a short note), its appendix (``paper/appendix.md``, the long
per-claim tables) and the README never contain a typed number of ours.  They hold
marker pairs::

    <!-- svgtpu:begin claims -->
    ...generated, overwritten on every run...
    <!-- svgtpu:end claims -->

and this module regenerates what is between them from ``figures/results.json``:

- ``verdicts``: does it reproduce? per claim: reported, ours with its interval, the verdict (reproduced,
  consistent, contradicted, direction only, not testable here; or *not yet*), the rule and one generated
  sentence on why in numbers (:func:`verdicts`; the rules: :func:`judge` and ``docs/verdicts.md``);
- ``verdicts-brief``: the same rows as a summary table (claim, reported, ours, verdict);
- ``verdict-summary``: one sentence naming the claims that held and those that did not;
- ``verdict-history``, ``verdict-moves``, ``verdict-history-summary``: each claim's published verdict per round and
  why it moved (:mod:`svgtpu.report.history`, from ``figures/verdict_history.json``);
- ``claims``: the claims table (claim, what, mask, kept pairs, tiles, reported, ours, provenance);
- ``C1`` ... ``C5``, ``Q``: every number recorded for that claim, with its provenance and profile,
  and the list-valued results as tables of their own;
- ``figure NAME``: the figure image, its caption and provenance;
- ``environment``: versions, backend and profile of each notebook's last run;
- ``compiled``: every result counted in a program the real TPU compiler built (``compiled-*``);
- ``gpu``: the claims of every committed GPU run of the package (``figures/gpu-runs/``), if there is one;
- ``entries CLAIM PREFIX``: the results of ``CLAIM`` whose names start with ``PREFIX``;
- ``CLAIM except PREFIX``: the other results of ``CLAIM`` (when an ``entries`` block shows those).

A number inside a sentence is an inline marker, filled the same way::

    dense takes <!-- svgtpu:value C1.dense_minutes -->60.8 min<!-- /svgtpu --> per video

(``C1.speedup band`` gives the modeled interval, ``C1.toy_speedup iqr`` the interquartile range).  A result the
file does not hold yet renders as *not yet measured*, so the paper renders before every notebook,
compile or GPU run has happened.  :func:`stray_numbers` finds numbers typed by hand outside the
markers; the tests fail on any that is not the write-up's or a published spec (:func:`their_numbers`).
:func:`body_words` counts the note's body as a reader reads it, generated table rows aside, against its budget
(:data:`BODY_WORDS`): the long tables live in the appendix, the prose stays in the note.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

from svgtpu.setting import PRODUCTION
from svgtpu.facts.results import (
    CLAIMS, REPORTED, RESULTS_NAME, load_results, results_path, write_results,
)
from svgtpu.facts.outputs import write_text
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.facts.tpu_runs import MEASURED_TPU, NOISE_FLOOR
from svgtpu.errors import BadInput, user_file

PAPER = REPO_ROOT / "paper" / "svgtpu.md"
#: The paper's appendix: every result of every claim, so the note itself prints each table once.
APPENDIX = REPO_ROOT / "paper" / "appendix.md"
README = REPO_ROOT / "README.md"
#: Each claim's verdict per round and why it moved, generated from ``figures/verdict_history.json``.
VERDICT_HISTORY_DOC = REPO_ROOT / "docs" / "verdict_history.md"
NOTEBOOKS = REPO_ROOT / "notebooks"
#: The results the paper and README are filled from: what ``make figures`` writes and git tracks.
COMMITTED_RESULTS = REPO_ROOT / "figures" / RESULTS_NAME
NOT_YET = "not yet measured"

_BLOCK = re.compile(r"(<!-- svgtpu:begin (?P<name>[^>]+?) -->\n)(?P<body>.*?)(<!-- svgtpu:end (?P=name) -->)",
                    re.DOTALL)


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
             "unaligned at equal kept pairs"),
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


def _markdown_table(rows: list[dict], columns: list[str] | None = None, units: dict | None = None) -> str:
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


def _missing(what: str) -> str:
    return f"_Not generated yet: {what}. Run `python -m svgtpu reproduce`._"


def _fraction_columns(rows: list[dict]) -> dict:
    """Columns of a fraction-valued table that hold fractions: every value a float in [0, 1]."""
    return {c: "fraction" for c in rows[0]
            if all(isinstance(r.get(c), float) and 0.0 <= r[c] <= 1.0 for r in rows)}


def _range(entry: dict, key: str) -> str:
    """``a – b``: the entry's ``band`` or ``iqr`` in its unit."""
    return " – ".join(format_value(b, entry.get("unit", "")) for b in entry[key])


def _spread(entry: dict) -> str:
    """`` (band a – b)`` for a modeled range, `` (IQR a – b)`` for a measured spread, else nothing."""
    for key, word in (("band", "interval"), ("interval", "interval"), ("iqr", "IQR")):
        if entry.get(key):
            return f" ({word} {_range(entry, key)})"
    return ""


def _tiles(entry: dict) -> str:
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


def claims_table(data: dict) -> str:
    """The claims table: one row per :data:`CLAIM_ROWS` entry (and :data:`PATTERN_ROWS` match) the results
    hold, with the mask, its kept pairs (``density``) and tile size as the notebook recorded them."""
    rows = []
    for row in CLAIM_ROWS + _pattern_rows(data):
        entry = data["claims"].get(row.claim, {}).get(row.name)
        if entry is None:
            continue
        rows.append({"claim": row.claim, "what": row.what, "mask": entry.get("mask", "—"),
                     "kept pairs": format_value(entry.get("density"), "fraction"), "tiles": _tiles(entry),
                     "reported": row.reported_text(),
                     "ours": format_value(entry["value"], entry.get("unit", "")) + _spread(entry),
                     "provenance": f"`{entry['provenance']}`", "profile": entry["profile"]})
    return _markdown_table(rows) if rows else _missing("no claim has results")


def claim_details(data: dict, claim: str) -> str:
    """Every scalar result of ``claim`` in one table, then each list-valued result as a table."""
    entries = data["claims"].get(claim, {})
    if not entries:
        return _missing(f"results for {claim}")
    tables = []
    for name, entry in sorted(entries.items()):
        value = entry["value"]
        if _is_table(value):
            units = entry.get("units") or (_fraction_columns(value) if entry.get("unit") == "fraction" else {})
            tables.append(f"*{entry.get('description') or name}* (`{entry['provenance']}`, profile "
                          f"{entry['profile']}, `{name}`)\n\n" + _markdown_table(value, units=units))
    scalars = _scalar_rows(entries)
    parts = [_markdown_table(scalars)] if scalars else []
    return "\n\n".join(parts + tables)


def figure_block(data: dict, name: str, target: Path, figures: Path) -> str:
    figure = data["figures"].get(name)
    if figure is None:
        return _missing(f"figure {name}")
    png = next((f for f in figure["files"] if f.endswith(".png")), figure["files"][0])
    link = Path(os.path.relpath(figures / png, target.parent)).as_posix()
    return (f"![{name}]({link})\n\n*{figure['caption']}* Provenance: `{figure['provenance']}`, "
            f"profile {figure['profile']}, jax {figure['jax']} on {figure['backend']}.")


def environment_table(data: dict) -> str:
    rows = [{"notebook": name, "profile": info["profile"], "backend": info["backend"], "jax": info["jax"],
             "svgtpu": info["svgtpu"], "finished (UTC)": info["finished"], "figures": len(info["figures"])}
            for name, info in sorted(data["notebooks"].items())]
    return _markdown_table(rows) if rows else _missing("no notebook has run")


def _scalar_rows(entries: dict) -> list[dict]:
    return [{"result": f"`{name}`", "description": entry.get("description", ""),
             "ours": format_value(entry["value"], entry.get("unit", "")) + _spread(entry),
             "reported": format_value(entry.get("reported"), entry.get("unit", "")),
             "provenance": f"`{entry['provenance']}`", "profile": entry["profile"]}
            for name, entry in sorted(entries.items()) if not _is_table(entry["value"])]


def _is_table(value) -> bool:
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
        parts.append(f"*`{r['file']}`: `svgtpu bench gpu` at commit {r['commit']} on {r['device']}, "
                     f"`{r['provenance']}`*")
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
    runs, blind = _entry(data, "C1.tpu_runs"), _entry(data, "C1.tpu_blind")
    if runs is None or blind is None:
        return f"_{NOT_YET.capitalize()}: notebook 06 has not recorded the TPU comparison yet._"
    dense, stretch, gap = (_entry(data, f"C1.{k}") for k in ("tpu_dense_control_error", "tpu_sparse_stretch", "tpu_gap"))
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
    lines = [table, "", f"Blind (`{blind['provenance']}`): {others}, at kept pairs {blind['kept']:.3f}; calibrated: sparse "
             f"stretch {stretch['value']:.3f} (`{stretch['provenance']}`), fitted to the moderate run only."
             if stretch else ""]
    if gap:
        terms = "; ".join(f"{t['term']} {100 * t['share_of_gap']:.0f} %" for t in gap["value"])
        lines.append(f"Gap from the static schedule ({gap['static_speedup']:.2f}x) to the measured "
                     f"{gap['measured_speedup']:.2f}x, share per term: {terms}.")
    return "\n".join(lines)


# -- does it reproduce? ----------------------------------------------------------------------
# The rules are written once, in judge() below, and explained for readers in docs/verdicts.md.

VERDICTS = ("reproduced", "consistent", "contradicted", "instruments disagree", "direction only", "not testable here")
#: What a row says when the results file does not hold its evidence yet (not a verdict).
NOT_YET_VERDICT = "not yet"
#: What a row says that could not have failed, or whose interval does not hold its run-to-run spread: shown
#: as a check of our arithmetic or timing, never as evidence (not a verdict).
CHECK_VERDICT = "check"
#: An interval discriminates when its width is at most this share of its central value: then a value
#: inside it is *reproduced*, else only *consistent* with it.
NARROW = 0.20
#: The width, in exponent units, of the interval around a deterministic power-law exponent (exact counts,
#: compiled cycles: no noise) when its entry carries none: chosen before looking, not fitted.
EXPONENT_TOLERANCE = 0.05
#: The effect of alignment (C3) reproduces when it at least halves the partial-tile share.
EFFECT_FACTOR = 0.5
RULES = ("interval", "lower bound", "direction", "effect")


def judge(rule: str, value, reported=None, interval=None, *, sense: tuple[str, str] = ("higher", "lower"),
          ours: str = "our evidence") -> tuple[str, str]:
    """The verdict of one claim and the reason in numbers (docs/verdicts.md states each rule).

    - ``interval``: ``reported`` inside ``interval`` (of ours, central ``value``): *reproduced* if the
      interval is at most :data:`NARROW` of ``value`` wide, else *consistent*; outside: *contradicted*,
      with the direction (``"contradicted: our model puts it faster than reported"``: ``ours`` names the
      evidence, ``sense`` the words for above and below the reported value);
    - ``lower bound``: ``reported`` is a floor the write-up claims ("over 16 minutes"): ``interval`` wholly
      above it *reproduced*, straddling it *consistent*, wholly below *contradicted* (with the direction);
    - ``direction``: no number claimed; ``value`` is ours without / with the claimed change at the
      production setting: above 1 *direction only* (the direction holds), else *contradicted*;
    - ``effect``: the claimed numbers belong to an unpublished setting; ``value`` = (before, after) of ours:
      *not testable here* when the effect reproduces (after at most :data:`EFFECT_FACTOR` of before), else
      *contradicted*.
    """
    if rule == "interval":
        low, high = interval
        width = (high - low) / abs(value) if value else float("inf")
        narrow = width <= NARROW
        words = f"ours {value:.3g} in [{low:.3g}, {high:.3g}], {width:.0%} of it wide ({'≤' if narrow else '>'} {NARROW:.0%})"
        if not low <= reported <= high:
            word = sense[0] if low > reported else sense[1]
            return (f"contradicted: {ours} puts it {word} than reported",
                    f"the reported {reported:g} lies outside: {words}")
        return ("reproduced" if narrow else "consistent"), f"the reported {reported:g} lies inside: {words}"
    if rule == "lower bound":
        low, high = interval
        words = f"ours {value:.3g} in [{low:.3g}, {high:.3g}]"
        if low > reported:
            return "reproduced", f"over {reported:g} holds across our interval: {words}"
        if high > reported:
            return "consistent", f"our interval straddles {reported:g}: {words}"
        return (f"contradicted: {ours} puts it {sense[1]} than reported",
                f"our whole interval lies below {reported:g}: {words}")
    if rule == "direction":
        holds = value > 1
        return (("direction only" if holds else "contradicted"),
                f"ours without / with it is {value:.3g}: {'above' if holds else 'not above'} 1")
    if rule == "effect":
        before, after = value
        holds = after <= EFFECT_FACTOR * before
        return (("not testable here" if holds else "contradicted"),
                f"the effect {'reproduces' if holds else 'does not reproduce'}: ours {100 * before:.2f} % -> "
                f"{100 * after:.2f} % ({'at most' if holds else 'more than'} {EFFECT_FACTOR:g} of before)")
    raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


def saved_minutes_floor() -> float:
    """Dense minutes the write-up's numbers imply at least: saving over ``m`` minutes at speedup ``S``
    means ``dense - dense / S > m``, so ``dense > m S / (S - 1)``.  A floor, not an estimate."""
    s, m = REPORTED["C1", "speedup"], REPORTED["C1", "minutes_saved"]
    return m * s / (s - 1)


def _ours(entry: dict) -> str:
    return format_value(entry["value"], entry.get("unit", "")) + _spread(entry)


def _interval(entry: dict) -> tuple[float, float] | None:
    found = entry.get("band") or entry.get("interval") or entry.get("iqr")
    return tuple(found) if found else None


def _entry(data: dict, key: str) -> dict | None:
    claim, name = key.split(".", 1)
    return data["claims"].get(claim, {}).get(name)


def _scenarios_containing(data: dict, reported: float) -> str:
    """The C1 scenario rows whose interval holds ``reported`` (recipe and kernel choices)."""
    table = _entry(data, "C1.scenarios")
    if not table or not _is_table(table["value"]):
        return ""
    names = [r["scenario"] for r in table["value"] if r.get("speedup_min") is not None
             and r["speedup_min"] <= reported <= r["speedup_max"]]
    return (f" Scenario rows whose interval holds {reported:g}x: " + "; ".join(names) + "." if names
            else f" No scenario row's interval holds {reported:g}x.")


def _sparse_layers(entry: dict) -> str:
    stretch = entry.get("sparse_stretch")
    return ("sparse layers as compiled; interval of the unknown constants with the calibration refitted"
            if stretch in (None, 1) else
            f"sparse layers priced from MaxDiffusion's measured TPU runs (sparse stretch {stretch:.2f}); "
            "joint interval: the unknown constants with the calibration refitted, the sparse stretch as one parameter "
            "carried over with the H200 transfer, widened by the H200 model's bias")


#: The named pieces a row's reason may hold besides the rule's own ``{why}``: each made from the results and
#: the judged entry.  ``{key}`` is the judged entry's results key.
NOTES = {
    "mask": lambda data, entry, row: entry.get("mask", "SVG"),
    "tiles": lambda data, entry, row: _tiles(entry),
    "sparse_layers": lambda data, entry, row: _sparse_layers(entry),
    "scenarios": lambda data, entry, row: _scenarios_containing(data, row.reported),
    "dense_floor": lambda data, entry, row: f"{saved_minutes_floor():.1f}",
    "interval_source": lambda data, entry, row: ("given" if _interval(entry) else
                                                 f"±{EXPONENT_TOLERANCE:g}, a deterministic instrument"),
}


@dataclasses.dataclass(frozen=True)
class VerdictRow:
    """One row of the verdict table, as data: which results it judges, by which rule, and the reason's wording.

    ``evidence``: results keys, the first the results hold is judged (``{key}`` in the reason).  ``interval``:
    ``"own"`` the entry's band, interval or IQR (the row waits for one: *not yet*); ``"tolerance"`` its own, else
    ± :data:`EXPONENT_TOLERANCE` around the value (a deterministic instrument); ``"CLAIM.name"`` the value of that
    entry.  ``before``: the effect rule's *before* entry (the evidence is *after*).  ``reason``: the why, a
    template holding ``{why}`` (the rule's reason in numbers) and any of :data:`NOTES`.  ``second``: a second
    primary instrument's key, named ``second_name`` (*the compiled Wan block*) and described by ``second_what``:
    the agreement rule (:func:`agreement`) applies.  ``check``: the row is a check, never a verdict.
    ``measured_second``: where the judged entry is a TPU run's (``measured-tpu``, :mod:`svgtpu.facts.tpu_runs`), the
    second instrument ``(key, name, what)`` in place of ``second``; the row's other evidence is shown beside it
    (docs/verdicts.md, "A measured TPU run").
    """

    claim: str
    what: str
    reported_text: str
    rule: str
    evidence: tuple[str, ...]
    reason: str
    reported: float | None = None
    interval: str = "own"
    before: str | None = None
    sense: tuple[str, str] = ("higher", "lower")
    ours: str = "our evidence"
    second: str | None = None
    second_name: str = ""
    second_what: str = ""
    check: bool = False
    measured_second: tuple[str, str, str] | None = None


class _Reason(dict):
    """The fields of one row's reason, each note made only when the template names it."""

    def __init__(self, data, entry, row, why, key):
        super().__init__(why=why, key=key)
        self.data, self.entry, self.row = data, entry, row

    def __missing__(self, name):
        return NOTES[name](self.data, self.entry, self.row)


def agreement(interval: tuple[float, float], second: float,
              second_interval: tuple[float, float] | None = None) -> str | None:
    """Where a second primary instrument falls against the first's ``interval`` (docs/verdicts.md, agreement):
    ``None`` when they agree (a point ``second`` inside it, or its ``second_interval`` overlapping it), else
    ``"higher"`` or ``"lower"``."""
    low, high = interval
    s_low, s_high = second_interval or (second, second)
    if s_high < low:
        return "lower"
    if s_low > high:
        return "higher"
    return None


def _agree(row: VerdictRow, data: dict, entry: dict, interval, verdict: str,
           second_key: str, second_name: str, second_what: str, ours: str) -> tuple[str, str]:
    """The verdict after the agreement rule, and the sentence that says where the second instrument falls."""
    second = _entry(data, second_key)
    if second is None:
        return verdict, f" {second_what[0].upper()}{second_what[1:]}: not yet measured."
    shown = f"{second_what}: {_ours(second)} `{second['provenance']}`"
    side = agreement(interval, second["value"], _interval(second))
    if side is None:
        return verdict, f" {shown[0].upper()}{shown[1:]}, inside {ours}'s interval: the instruments agree."
    unit = entry.get("unit", "")
    bounds = " – ".join(format_value(b, unit) for b in interval)
    return (f"instruments disagree: {second_name} puts it {side} than {ours}",
            f" {shown[0].upper()}{shown[1:]}, {'above' if side == 'higher' else 'below'} {ours}'s interval "
            f"({bounds}): the instruments disagree; {ours} alone: {verdict}.")


def _beside(row: VerdictRow, data: dict, key: str, interval) -> str:
    """A measured row's sentence on the evidence it outranks (docs/verdicts.md): the row's next entry the results
    hold, its value and whether the measured interval holds it; empty when there is none."""
    other = next((k for k in row.evidence if k != key and _entry(data, k) is not None), None)
    if other is None:
        return ""
    e = _entry(data, other)
    inside = interval is not None and interval[0] <= e["value"] <= interval[1]
    return (f" Beside it, `{other}`: {_ours(e)} `{e['provenance']}`, "
            f"{'inside' if inside else 'outside'} the measured interval (no longer deciding the verdict).")


def judge_row(row: VerdictRow, data: dict) -> tuple[dict, str, str] | None:
    """The judged entry, the verdict and the reason of ``row`` from the results; ``None`` while they lack
    its evidence (:func:`waiting` says what is missing)."""
    key = next((k for k in row.evidence if _entry(data, k) is not None), None)
    if key is None:
        return None
    entry = _entry(data, key)
    value = entry["value"]
    if row.before is not None:
        before = _entry(data, row.before)
        if before is None:
            return None
        value = (before["value"], value)
    interval = None
    if row.interval == "own":
        interval = _interval(entry)
        if interval is None and row.rule in ("interval", "lower bound"):
            return None
    elif row.interval == "tolerance":
        interval = _interval(entry) or (value - EXPONENT_TOLERANCE, value + EXPONENT_TOLERANCE)
    else:
        other = _entry(data, row.interval)
        if other is None:
            return None
        interval = tuple(other["value"])
    measured = entry.get("provenance") == MEASURED_TPU
    ours = "the TPU run" if measured else row.ours
    verdict, why = judge(row.rule, value, row.reported, interval, sense=row.sense, ours=ours)
    if measured:   # a TPU run's entry (svgtpu.facts.tpu_runs): the same rule, its own words
        reason = (f"measured by `svgtpu bench tpu` on {entry['device']} ({entry['run']}, median of {entry['rounds']} "
                  f"rounds, IQR widened by the {NOISE_FLOOR:.0%} noise floor: docs/verdicts.md), `{key}`: {why}.")
    else:
        reason = row.reason.format_map(_Reason(data, entry, row, why, key))
    second = row.measured_second if measured and row.measured_second else (
        (row.second, row.second_name, row.second_what) if row.second is not None else None)
    if second is not None:
        verdict, sentence = _agree(row, data, entry, interval, verdict, *second, ours)
        reason += sentence
    if measured:
        reason += _beside(row, data, key, interval)
    return entry, (CHECK_VERDICT if row.check else verdict), reason


def waiting(row: VerdictRow, data: dict) -> str:
    """Why ``row`` has no verdict yet: the evidence it lacks, or the value it holds without an interval."""
    held = next((k for k in row.evidence if _entry(data, k) is not None), None)
    if held is not None and row.interval == "own" and not _interval(_entry(data, held)):
        entry = _entry(data, held)
        return (f"{NOT_YET}: `{held}` holds {_ours(entry)} `{entry['provenance']}` without an interval, and this row "
                "is judged only with one.")
    return f"{NOT_YET}: the results file lacks this row's evidence."


_C3_BEFORE, _C3_AFTER = (100 * REPORTED["C3", k] for k in ("partial_share_before", "partial_share_after"))

#: The verdict table: one rule (:func:`judge_row`), these rows as data (docs/verdicts.md states each in words).
VERDICT_ROWS = [
    VerdictRow("C1", "1440p end-to-end speedup", "{:g}x".format(REPORTED["C1", "speedup"]), "interval",
               ("C1.speedup",), "central scenario ({mask}), {sparse_layers}; {why}.{scenarios}",
               reported=REPORTED["C1", "speedup"], sense=("faster", "slower"), ours="our model"),
    VerdictRow("C1", "the same, JAX's Splash for dense and SVG layers (the write-up's kernels)",
               "{:g}x".format(REPORTED["C1", "speedup"]), "interval", ("C1.speedup_splash_both",),
               "the write-up's kernel family on both sides at the production tile ({mask}); joint interval: the unknown "
               "constants, the sparse stretch as one parameter carried over with the H200 transfer, widened by the "
               "H200 model's bias; {why}.", reported=REPORTED["C1", "speedup"], sense=("faster", "slower"),
               ours="our model"),
    VerdictRow("C1", "the same, a user's dense kernel: Splash dense, SVG through ours",
               "{:g}x".format(REPORTED["C1", "speedup"]), "interval", ("C1.speedup_user_dense",),
               "check, not evidence: beside the same-kernel rows, never instead (dense through Splash, its padded "
               "1440p tail included, against SVG through ours): what a user switching would see; {why}.",
               reported=REPORTED["C1", "speedup"], sense=("faster", "slower"), ours="our model", check=True),
    VerdictRow("C1", "minutes saved per video", "over {:g} min".format(REPORTED["C1", "minutes_saved"]),
               "lower bound", ("C1.minutes_saved",),
               f"{{why}}; at {REPORTED['C1', 'speedup']:g}x, saving over {REPORTED['C1', 'minutes_saved']:g} min means "
               "the dense run took at least {dense_floor} min.",
               reported=REPORTED["C1", "minutes_saved"], ours="our model"),
    VerdictRow("C2", "self-attention share at 1440p", "{:g} %".format(100 * REPORTED["C2", "attention_share_1440p"]),
               "interval", ("C2.tpu_attention_share_1440p_splash", "C2.attention_share_1440p"),
               "modeled share of the DiT's time; {why}.",
               reported=REPORTED["C2", "attention_share_1440p"], ours="our model",
               second="C2.compiled_attention_share_1440p", second_name="the compiled Wan block",
               second_what="the compiled Wan block's static-cycle share",
               measured_second=("C2.tpu_attention_share_1440p_ours", "the run through ours",
                                "the measured 1440p block's share through ours")),
    VerdictRow("C3", "partial tiles before -> after alignment", f"{_C3_BEFORE:g} % -> {_C3_AFTER:g} %", "effect",
               ("C3.partial_share_after",),
               f"the write-up's band, tiles and counting are unpublished, so its exact {_C3_BEFORE:g} % -> "
               f"{_C3_AFTER:g} % cannot be tested (the settings search: notebook 03); {{why}} ({{mask}}, {{tiles}} tiles).",
               before="C3.partial_share_before"),
    VerdictRow("C4", "mask-free fast path lowers latency", "lower latency (no number)", "direction",
               ("C4.tpu_fast_path_speedup_svg_1440p", "C4.compiled_fast_path_speedup_svg"),
               "the write-up gives a direction, no number; at the production tile, whole-kernel static cycles of ours "
               "on the SVG mask, fast path off / on: {why} (compiled, not run: static cycles are not latency)."),
    VerdictRow("C5", "attention cost quadratic in resolution", "quadratic", "interval",
               ("C5.tpu_attention_exponent_splash", "C5.gpu_attention_exponent_dense-cudnn"),
               "exponent k of dense attention time ∝ L^k measured over the resolutions (`{key}`, interval from its "
               "timing rounds); quadratic is k = 2: {why}.", reported=2.0,
               measured_second=("C5.tpu_attention_exponent_ours", "the run through ours",
                                "the measured exponent through ours")),
    VerdictRow("C5", "the same, compiled cycles or exact FLOPs", "quadratic",
               "interval", ("C5.compiled_cycles_exponent", "C5.flops_exponent"),
               "check, not evidence: one tile body's static cycles times a tile count that grows as L², or FLOPs "
               "counted, cannot depart from k = 2 beyond per-step overhead (`{key}`, interval {interval_source}): "
               "{why}.", reported=2.0, interval="tolerance", check=True),
    VerdictRow("C5", "the same, toy DiT timed on this CPU", "quadratic", "interval",
               ("C5.toy_attention_exponent",),
               "check, not evidence: toy DiT attention timed on this CPU, bootstrap interval over whole rounds of one "
               "run, which does not hold the spread between runs (docs/verdicts.md); {why}.", reported=2.0,
               interval="C5.toy_attention_exponent_interval", check=True),
]


def verdicts(data: dict) -> list[dict]:
    """One row per :data:`VERDICT_ROWS` entry: claim, reported, ours, verdict, the rule, why."""
    rows = []
    for row in VERDICT_ROWS:
        found = judge_row(row, data)
        if found is None:
            held = next((_entry(data, k) for k in row.evidence if _entry(data, k) is not None), None)
            ours = f"{_ours(held)} `{held['provenance']}`" if held else "—"
            verdict, why = NOT_YET_VERDICT, waiting(row, data)
        else:
            entry, verdict, why = found
            ours = f"{_ours(entry)} `{entry['provenance']}`"
        rows.append({"claim": f"{row.claim} {row.what}", "reported": row.reported_text, "ours": ours,
                     "verdict": verdict, "rule": row.rule + (", agreement" if row.second else ""),
                "why": why})
    return rows


def with_measured_runs(data: dict, figures: Path) -> dict:
    """``data`` with the entries of the newest committed GPU run of the package (``figures/gpu-runs/``) added
    where ``data`` has none of that name: the measured instruments a verdict row may read (C5's timing)."""
    from svgtpu.bench.gpu_results import latest_run

    run = latest_run(figures / "gpu-runs")
    if run is None:
        return data
    claims = {claim: dict(entries) for claim, entries in data["claims"].items()}
    for claim, entries in run["data"].get("claims", {}).items():
        for name, entry in entries.items():
            claims.setdefault(claim, {}).setdefault(name, entry)
    return {**data, "claims": claims}


def verdict_table(data: dict) -> str:
    return _markdown_table(verdicts(data))


def verdict_brief(data: dict) -> str:
    """The verdict table without its rule and reason: the note's summary table, up front."""
    return _markdown_table(verdicts(data), ["claim", "reported", "ours", "verdict"])


def verdict_summary(data: dict) -> str:
    """One sentence per verdict: the claims it covers (rules: docs/verdicts.md)."""
    rows = verdicts(data)
    parts = []
    for verdict in (*VERDICTS, NOT_YET_VERDICT, CHECK_VERDICT):   # a contradiction says its direction after the claim
        names = [r["claim"] + (f" ({direction})" if direction else "")
                 for r in rows for category, _, direction in [r["verdict"].partition(": ")] if category == verdict]
        if names:
            parts.append(f"{'checks, not evidence' if verdict == CHECK_VERDICT else verdict}: {'; '.join(names)}")
    return "Does it reproduce? " + ". ".join(p[0].upper() + p[1:] for p in parts) + " (rules: docs/verdicts.md)."


def record_verdict_history(repo: str | os.PathLike = REPO_ROOT,
                           path: str | os.PathLike | None = None) -> dict:
    """Each verdict row's published verdict per round from ``repo``'s git history, written to
    ``figures/verdict_history.json`` (or ``path``): :mod:`svgtpu.report.history` with today's rows, each with the
    results keys of its central value (an effect row's before -> after)."""
    from svgtpu.report import history

    rows = {f"{r.claim} {r.what}": [r.evidence] if r.before is None else [(r.before,), r.evidence]
            for r in VERDICT_ROWS}
    return history.write(history.collect(repo, rows, format_value), path or history.HISTORY)


#: The verdict history's blocks (:mod:`svgtpu.report.history`, from ``figures/verdict_history.json``).
HISTORY_BLOCKS = {"verdict-history": "history_table", "verdict-moves": "moves_table",
                  "verdict-history-summary": "history_summary"}


#: README's first screen (:mod:`svgtpu.report.first_screen`, from ``figures/first_screen.json``).
FIRST_SCREEN_BLOCKS = {"make-times": "make_times_block", "quick-start": "quick_start_block"}


def render(name: str, data: dict, target: Path, figures: Path) -> str:
    """The generated text for the marker ``name``."""
    if name == "verdicts":
        return verdict_table(with_measured_runs(data, figures))
    if name == "verdicts-brief":
        return verdict_brief(with_measured_runs(data, figures))
    if name == "verdict-summary":
        return verdict_summary(with_measured_runs(data, figures))
    if name in HISTORY_BLOCKS:
        from svgtpu.report import history
        record = history.load(figures / history.HISTORY.name)
        if record is None:
            return f"_{NOT_YET.capitalize()}: no verdict history yet (run `svgtpu verdict-history`)._"
        return getattr(history, HISTORY_BLOCKS[name])(record)
    if name == "claims":
        return claims_table(data)
    if name == "environment":
        return environment_table(data)
    if name == "compiled":
        return compiled_table(data)
    if name == "gpu":
        return gpu_table(figures)
    if name == "against-tpu":
        return against_tpu_table(data)
    if name == "tpu-predictions":
        from svgtpu.facts.tpu_runs import TPU_RUNS_DIR, counted_runs
        from svgtpu.report import predictions
        return predictions.markdown(predictions.latest(figures / predictions.PREDICTIONS_DIR.name),
                                    counted_runs(figures / TPU_RUNS_DIR.name))
    if name in ("tpu-run-time", "tpu-run-brief", "tpu-run-cost"):
        from svgtpu.report import preflight_record, tpu_run_time
        from svgtpu.costmodel.compiled import COMPILED_TILES_NAME, load_compiled
        table = figures / COMPILED_TILES_NAME   # the block is made of the figures folder, whatever the model reads
        record = preflight_record.newest_record(figures / preflight_record.RECORDS_DIR.name)
        compiled = load_compiled(table) if table.exists() else None
        if name == "tpu-run-brief":
            return tpu_run_time.brief(record, compiled)
        if name == "tpu-run-cost":
            return tpu_run_time.cost_block(record, compiled)
        return tpu_run_time.readme_block(record, compiled=compiled)
    if name in FIRST_SCREEN_BLOCKS:
        from svgtpu.report import first_screen
        return getattr(first_screen, FIRST_SCREEN_BLOCKS[name])(first_screen.load(figures))
    if name in CLAIMS:
        return claim_details(data, name)
    if name.startswith("figure "):
        return figure_block(data, name.split(" ", 1)[1].strip(), target, figures)
    words = name.split()
    if len(words) == 3 and words[0] == "entries":
        return entries_table(data, words[1], words[2])
    if len(words) == 3 and words[0] in CLAIMS and words[1] == "except":
        return entries_table(data, words[0], words[2], keep=False)
    raise BadInput(f"unknown paper marker {name!r} in {target}: use verdicts, verdicts-brief, verdict-summary, {', '.join(HISTORY_BLOCKS)}, {', '.join(FIRST_SCREEN_BLOCKS)}, claims, environment, compiled, gpu, against-tpu, tpu-predictions, tpu-run-time, tpu-run-brief, tpu-run-cost, "
                   f"{', '.join(CLAIMS)}, 'figure NAME', 'entries CLAIM PREFIX' or 'CLAIM except PREFIX'")


_VALUE = re.compile(r"(<!-- svgtpu:value (?P<claim>\w+)\.(?P<name>[\w.-]+?)(?: (?P<field>band|iqr))? -->)"
                    r"(?P<body>.*?)(<!-- /svgtpu -->)", re.DOTALL)


def inline_value(data: dict, claim: str, name: str, field: str | None = None) -> str:
    """One result as it reads inside a sentence: ``60.8 min``; its band or IQR as ``a – b``."""
    entry = data["claims"].get(claim, {}).get(name)
    if entry is None or (field and not entry.get(field)):
        return f"_{NOT_YET}_"
    return _range(entry, field) if field else format_value(entry["value"], entry.get("unit", ""))


#: Blocks a layer above renders and hands to :func:`generate` (``blocks``): the command line's defaults, from its
#: parser.  A caller that does not hand one leaves that block as it is.
GIVEN_BLOCKS = ("cli-defaults",)


def fill(text: str, data: dict, target: Path, figures: Path, blocks: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """``text`` with every marker block and inline value regenerated (a :data:`GIVEN_BLOCKS` one from ``blocks``,
    else left as it is); also the names of the blocks."""
    names = []
    blocks = blocks or {}

    def replace(match):
        names.append(match["name"])
        if match["name"] in GIVEN_BLOCKS:
            return match.group(0) if match["name"] not in blocks else \
                match.group(1) + blocks[match["name"]].rstrip("\n") + "\n" + match.group(4)
        body = render(match["name"], data, target, figures).rstrip("\n") + "\n"
        return match.group(1) + body + match.group(4)

    def replace_value(match):
        names.append(f"{match['claim']}.{match['name']}")
        return match.group(1) + inline_value(data, match["claim"], match["name"], match["field"]) + match.group(6)

    return _VALUE.sub(replace_value, _BLOCK.sub(replace, text)), names


# -- numbers typed by hand -------------------------------------------------------------------

#: Published numbers prose may quote as theirs (besides the write-up's own, :data:`REPORTED`, and
#: the Wan presets of :data:`svgtpu.geometry.PRESETS`), by source.  Nothing of ours belongs here.
PUBLISHED = {
    "Wan 2.1 model configs (Wan-Video/Wan2.1): 14B and 1.3B layers, width, heads, head dim, FFN, "
    "text length; 81 frames, 50 sampling steps": (2.1, 14, 1.3, 40, 5120, 128, 13824, 512, 30, 1536, 12, 8960,
                                                 81, 50),
    "TPU v6e (cloud.google.com/tpu/docs/v6e): bf16 TFLOP/s, HBM GB/s and GB, ICI GB/s, v6e-8 chips, MXU "
    "side": (918, 1638, 32, 800, 8, 256),
    "MaxDiffusion's Wan Splash tile sizes, TPU lane width and the usual Splash tiles": (3024, 2048, 1024, 512,
                                                                                      3072, 256, 128),
    "Sparse VideoGen (Xi et al., ICML 2025, arXiv 2502.01776): Wan kept fraction, profiled rows, "
    "warm-up steps and layers in %, band quantum": (2025, 2502.01776, 0.3, 64, 20, 3, 128),
    "MaxDiffusion's SVG (AI-Hypercomputer/maxdiffusion pull request 480, docs/svg.md): Wan 2.2, policy keys, "
    "tiles, measured v6e-8 times, FLOPs saved; Wan 2.2 configs' flow shifts and expert boundary":
        (480, 2.2, 0.5, 0.2, 11, 40, 1, 64, 10000, 6400, 2048, 3328, 2816, 256, 153.37, 153.46, 153.50, 127.94,
         136.11, 119.86, 27.2, 32.2, 37.3, 1.13, 1.20, 1.28, 5.0, 12.0, 0.875, 720, 1280, 81),
    "Python minimum version (jax 0.10.2's Requires-Python)": (3.11,),
    "counting words: small integers and 100 %": tuple(range(11)) + (100,),
}

_STRIPPED = [_BLOCK, _VALUE] + [re.compile(p, re.DOTALL) for p in (   # generated blocks and values, then
    r"```.*?```", r"`[^`\n]*`", r"<!--.*?-->", r"\]\([^)]*\)", r"https?://\S+")]  # code, comments, links
#: A number as prose writes it: 1,638 / 88.2 / 8e18 / 1.69x; not part of a name (C1, v6e, bf16, 1440p,
#: 3D) and not a version (0.10.2).
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.,]?\d)(?![a-wyzA-Z])"
                     r"|(?<![\w.])\d+(?:\.\d+)?(?:e\d+)?(?!\.?\d)(?![a-wyzA-Z_])")


def their_numbers() -> set[float]:
    """Every number prose may state without a marker: the write-up's, the presets', :data:`PUBLISHED`."""
    from svgtpu.geometry import PRESETS, WAN_PATCH, WAN_VAE_STRIDE

    allowed = {float(v) for values in PUBLISHED.values() for v in values}
    for value in REPORTED.values():
        allowed |= {float(value), round(100 * value, 6)}
    for g in PRESETS.values():
        pixels = [n * s * p for n, s, p in zip((g.H, g.W), WAN_VAE_STRIDE[1:], WAN_PATCH[1:])]
        allowed |= {float(v) for v in (g.T, g.H, g.W, g.F, g.L, *pixels)}
    allowed |= {float(v) for v in WAN_VAE_STRIDE + WAN_PATCH}
    return allowed


def stray_numbers(text: str, allowed: set[float] | None = None) -> list[str]:
    """Numbers stated in ``text`` outside markers, code and links that are not in ``allowed``
    (default :func:`their_numbers`): numbers of ours typed by hand, each with a little context."""
    allowed = their_numbers() if allowed is None else allowed
    for pattern in _STRIPPED:
        text = pattern.sub(" ", text)
    strays = []
    for match in _NUMBER.finditer(text):
        value = float(match.group().replace(",", ""))
        if not any(abs(value - a) <= 1e-9 * max(1.0, abs(a)) for a in allowed):
            context = " ".join(text[max(0, match.start() - 40):match.end() + 20].split())
            strays.append(f"{match.group()!r} in \"...{context}...\"")
    return strays


#: The note's body is at most this many words (:func:`body_words`): a note, with the long tables in the appendix.
BODY_WORDS = 6500


def body_words(text: str) -> int:
    """Words of the note as a reader reads it: prose, generated sentences, figure captions and inline values count;
    the rows of generated tables (lines starting with ``|`` between begin / end markers), code blocks, markers and
    other HTML comments, and image links do not.  A word is a whitespace-separated token holding a letter or digit."""
    text = _BLOCK.sub(lambda m: "\n".join(line for line in m["body"].splitlines()
                                          if not line.lstrip().startswith("|")), text)
    for pattern in (r"```.*?```", r"<!--.*?-->", r"!\[[^\]]*\]\([^)]*\)"):
        text = re.sub(pattern, " ", text, flags=re.DOTALL)
    return sum(1 for word in text.split() if re.search(r"\w", word))


def notebook_markdown(path: str | os.PathLike) -> str:
    """The markdown cells of a notebook, joined (what a reader reads as prose)."""
    cells = json.loads(Path(path).read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _with_tpu_runs_recorded(data: dict, path: Path) -> dict:
    """``data`` with the entries the counted TPU runs beside it give (``tpu-runs/``,
    :func:`svgtpu.facts.tpu_runs.with_tpu_runs`), written back into the results file ``path`` when they change it:
    how a committed run reaches ``figures/results.json`` (``svgtpu paper``, ``make figures``)."""
    from svgtpu.facts.tpu_runs import TPU_RUNS_DIR, with_tpu_runs
    updated = with_tpu_runs(data, path.parent / TPU_RUNS_DIR.name)
    if updated != data:
        write_results(updated, path)
    return updated


def generate(results: str | os.PathLike | None = None,
             targets: list[str | os.PathLike] | None = None, blocks: dict[str, str] | None = None) -> list[dict]:
    """Regenerate the marker blocks of each target file (default: the paper, its appendix and the
    README) from the results file, and the :data:`GIVEN_BLOCKS` from ``blocks``; returns what was done per file.

    The paper and README are filled only from the committed results (:data:`COMMITTED_RESULTS`): a
    scratch or test run must name its own target files, so it never writes its numbers into them.
    """
    path = Path(results) if results is not None else results_path()
    if not targets and path.resolve() != COMMITTED_RESULTS.resolve():
        raise BadInput(f"results must be {COMMITTED_RESULTS.relative_to(REPO_ROOT)} to fill the paper and the "
                       f"README, got {path}; name the files to fill to use another results file")
    with user_file("results", path):
        data = load_results(path)
    figures = path.parent
    data = _with_tpu_runs_recorded(data, path)
    files = [Path(t) for t in targets] if targets else [PAPER, APPENDIX, VERDICT_HISTORY_DOC] + (
        [README] if README.exists() else [])
    filled = []   # every file filled before any is written: a refused one leaves all as they were
    for target in files:
        if not target.exists():
            raise BadInput(f"paper target {target} does not exist")
        with user_file("paper target", target):
            text = target.read_text()
        new, names = fill(text, data, target.resolve(), figures.resolve(), blocks)
        if not names:
            raise BadInput(f"paper target {target} has no svgtpu markers (<!-- svgtpu:begin NAME --> ... <!-- svgtpu:end "
                           "NAME --> or <!-- svgtpu:value CLAIM.NAME --> ... <!-- /svgtpu -->): nothing to fill")
        filled.append((target, text, new, names))
    report = []
    for target, text, new, names in filled:
        if new != text:
            with user_file("paper target", target):
                write_text(target, new)
        report.append({"file": str(target), "blocks": len(names), "changed": new != text})
    return report


__all__ = ["VERDICTS", "NOT_YET_VERDICT", "NARROW", "EXPONENT_TOLERANCE", "EFFECT_FACTOR", "RULES", "judge",
           "VerdictRow", "VERDICT_ROWS", "NOTES", "judge_row", "record_verdict_history", "agreement", "waiting", "with_measured_runs", "CHECK_VERDICT", "verdicts", "verdict_table", "verdict_brief", "verdict_summary", "saved_minutes_floor",
           "ClaimRow", "CLAIM_ROWS", "PUBLISHED", "format_value", "against_tpu_table", "claims_table", "claim_details", "inline_value",
           "fill", "generate", "BODY_WORDS", "body_words", "their_numbers", "stray_numbers", "notebook_markdown"]
