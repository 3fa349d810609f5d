"""``svgtpu paper``: fill the paper's tables and figure blocks from the results file.

The write-up (``paper/svgtpu.md``) and the README never contain a typed number of ours.  They hold
marker pairs::

    <!-- svgtpu:begin claims -->
    ...generated, overwritten on every run...
    <!-- svgtpu:end claims -->

and this module regenerates what is between them from ``figures/results.json``:

- ``claims``: the claims table (claim, what, reported, ours, provenance);
- ``C1`` ... ``C5``, ``Q``: every number recorded for that claim, with its provenance and profile,
  and the list-valued results as tables of their own;
- ``figure NAME``: the figure image, its caption and provenance;
- ``environment``: versions, backend and profile of each notebook's last run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from svgtpu.results import CLAIMS, load_results, results_path

_REPO_ROOT = Path(__file__).resolve().parents[1]
PAPER = _REPO_ROOT / "paper" / "svgtpu.md"
README = _REPO_ROOT / "README.md"

_BLOCK = re.compile(r"(<!-- svgtpu:begin (?P<name>[^>]+?) -->\n)(?P<body>.*?)(<!-- svgtpu:end (?P=name) -->)",
                    re.DOTALL)

#: The claims table: (claim, entry name, what, reported as the write-up words it).
CLAIM_ROWS = [
    ("C1", "speedup", "end-to-end speedup, Wan 2.1 14B 1440p, v6e-8", "1.69x"),
    ("C1", "minutes_saved", "minutes saved per video", "over 16 min"),
    ("C1", "toy_speedup", "end-to-end speedup, toy DiT on this CPU", "—"),
    ("C2", "attention_share_1440p", "self-attention share of time at 1440p", "88.2 %"),
    ("C2", "attention_share_720p", "self-attention share of time at 720p", "—"),
    ("C3", "partial_share_before", "partial (masked) tiles, SVG mask, 1440p", "27.55 %"),
    ("C3", "partial_share_after", "partial (masked) tiles after alignment, 1440p", "2.22 %"),
    ("C4", "fast_path_speedup", "attention speedup from the mask-free fast path", "lower latency (no number)"),
    ("C4", "vector_ops_removed_full", "vector ops removed from a full tile by the fast path", "—"),
    ("C5", "attention_exponent", "attention time ∝ L^k, exponent k (Wan on v6e)", "quadratic"),
    ("C5", "toy_attention_exponent", "attention time ∝ L^k, exponent k (toy DiT, CPU)", "quadratic"),
    ("Q", "psnr_aligned", "PSNR of aligned SVG vs dense video", "—"),
    ("Q", "psnr_unaligned", "PSNR of SVG vs dense video", "—"),
    ("Q", "psnr_aligned_inner", "PSNR of inner-aligned SVG (adds no pair) vs dense video", "—"),
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


def claims_table(data: dict) -> str:
    rows = []
    for claim, name, what, reported in CLAIM_ROWS:
        entry = data["claims"].get(claim, {}).get(name)
        if entry is None:
            continue
        ours = format_value(entry["value"], entry.get("unit", ""))
        if entry.get("band"):
            low, high = (format_value(b, entry.get("unit", "")) for b in entry["band"])
            ours += f" (band {low} – {high})"
        rows.append({"claim": claim, "what": what, "reported": reported, "ours": ours,
                     "provenance": f"`{entry['provenance']}`", "profile": entry["profile"]})
    return _markdown_table(rows) if rows else _missing("no claim has results")


def claim_details(data: dict, claim: str) -> str:
    """Every scalar result of ``claim`` in one table, then each list-valued result as a table."""
    entries = data["claims"].get(claim, {})
    if not entries:
        return _missing(f"results for {claim}")
    scalars, tables = [], []
    for name, entry in sorted(entries.items()):
        value = entry["value"]
        if isinstance(value, list) and value and isinstance(value[0], dict):
            units = entry.get("units") or (_fraction_columns(value) if entry.get("unit") == "fraction" else {})
            tables.append(f"*{entry.get('description') or name}* (`{entry['provenance']}`, profile "
                          f"{entry['profile']}, `{name}`)\n\n" + _markdown_table(value, units=units))
        else:
            scalars.append({"result": f"`{name}`", "description": entry.get("description", ""),
                            "ours": format_value(value, entry.get("unit", "")),
                            "reported": format_value(entry.get("reported"), entry.get("unit", "")),
                            "provenance": f"`{entry['provenance']}`", "profile": entry["profile"]})
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


def render(name: str, data: dict, target: Path, figures: Path) -> str:
    """The generated text for the marker ``name``."""
    if name == "claims":
        return claims_table(data)
    if name == "environment":
        return environment_table(data)
    if name in CLAIMS:
        return claim_details(data, name)
    if name.startswith("figure "):
        return figure_block(data, name.split(" ", 1)[1].strip(), target, figures)
    raise ValueError(f"unknown paper marker {name!r} in {target}: use claims, environment, "
                     f"{', '.join(CLAIMS)} or 'figure NAME'")


def fill(text: str, data: dict, target: Path, figures: Path) -> tuple[str, list[str]]:
    """``text`` with every marker block regenerated; also the names of the blocks."""
    names = []

    def replace(match):
        names.append(match["name"])
        body = render(match["name"], data, target, figures).rstrip("\n") + "\n"
        return match.group(1) + body + match.group(4)

    return _BLOCK.sub(replace, text), names


def generate(results: str | os.PathLike | None = None,
             targets: list[str | os.PathLike] | None = None) -> list[dict]:
    """Regenerate the marker blocks of each target file (default: the paper, and the README if it
    has markers) from the results file; returns what was done per file."""
    path = Path(results) if results is not None else results_path()
    data = load_results(path)
    figures = path.parent
    files = [Path(t) for t in targets] if targets else [PAPER] + ([README] if README.exists() else [])
    report = []
    for target in files:
        if not target.exists():
            raise ValueError(f"paper target {target} does not exist")
        text = target.read_text()
        new, names = fill(text, data, target.resolve(), figures.resolve())
        if new != text:
            target.write_text(new)
        report.append({"file": str(target), "blocks": len(names), "changed": new != text})
    return report


__all__ = ["CLAIM_ROWS", "format_value", "claims_table", "claim_details", "fill", "generate"]
