"""The GPU run's results: its entries in the results file, the file itself, reading it back, and its tables.

:func:`write` stores a :func:`svgtpu.bench.gpu.run` as ``figures/results-gpu.json`` in the layout of
``results.json`` (claims -> entries, read by ``svgtpu paper``) with the full run under ``"run"``;
:func:`gpu_rows` reads it back for notebooks (``None`` when there is no GPU run yet); :func:`format_result`
prints it.  No JAX here: the notebooks read the file on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path

from svgtpu.facts.results import GPU_RESULTS_NAME, NotebookRun, figures_dir, write_results
from svgtpu.facts.tables import format_table

#: The results file's notebook name for the GPU run.
NOTEBOOK = "gpu-bench"


def _key(geometry: str) -> str:
    return geometry.removeprefix("wan-").replace(" ", "")


def results_entries(result: dict):
    """``(claim, name, value, kwargs)`` for every number the paper shows from a GPU run."""
    prov = result["provenance"]
    check = result.get("check")
    if check:
        yield ("C4", "gpu_kernel_check", check["rows"],
               dict(provenance=prov, description=f"our GPU kernel vs a float64 reference at {check['geometry']} "
                    f"(L={check['L']}, {check['heads']} heads) on {result['device']}: max relative error"))
    for a in result["attention"]:
        g = _key(a["geometry"])
        yield ("C4", f"gpu_attention_{g}", a["rows"],
               dict(provenance=prov, description=f"attention variants at {a['geometry']} (L={a['L']}, "
                    f"{a['heads']} heads, d={a['head_dim']}, bf16, tiles {a['tile']}, SVG kept {a['kept']}) "
                    f"on {result['device']}"))
        for name, value in a["headline"].items():
            if value is not None:
                yield ("C4", f"gpu_{name}_{g}", value, dict(provenance=prov, unit="x",
                                                            description=f"paired-ratio median at {a['geometry']}"))
    for b in result["block"]:
        g = _key(b["geometry"])
        yield ("C2", f"gpu_block_{g}", b["rows"],
               dict(provenance=prov, description=f"{b['model']}-shaped block at {b['geometry']} (L={b['L']}): "
                    f"block and self-attention seconds on {result['device']}"))
        for row in b["rows"]:
            if row["status"] == "ok":
                yield ("C2", f"gpu_attention_share_{row['attention']}_{g}", row["attention_share"],
                       dict(provenance=prov, unit="fraction",
                            description=f"measured self-attention share of one block, {row['attention']}"))
        modeled = b["modeled"]
        if "attention_share_dense" in modeled:
            yield ("C2", f"gpu_attention_share_modeled_{g}", modeled["attention_share_dense"],
                   dict(provenance=modeled["provenance"], unit="fraction",
                        description="cost model's dense self-attention share for the same model and resolution"))
        if "share_modeled_over_measured" in modeled:
            yield ("C2", f"gpu_attention_share_modeled_over_measured_{g}", modeled["share_modeled_over_measured"],
                   dict(provenance=prov, unit="x", description=f"cost model's dense share / the share measured "
                        f"with {modeled['measured_with']} (1 = no error)"))
    for kind, exponent in result.get("attention_exponent", {}).items():
        yield ("C5", f"gpu_attention_exponent_{kind}", exponent,
               dict(provenance=prov, description=f"slope of log self-attention seconds ({kind}) against log L "
                    "over the block resolutions (2 = quadratic)"))
    if result["end_to_end"]:
        yield ("C1", "gpu_end_to_end_extrapolated", result["end_to_end"],
               dict(provenance=prov, description="one video extrapolated from the measured block: "
                    "layers x 50 steps x 2 (CFG); SVG with the cost model's warm-up schedule, its sparse blocks "
                    "with SVG's profiling and layout transform; no VAE or text encoder"))


def write(result: dict, path: str | Path) -> Path:
    """Store ``result`` as a results file (claims -> entries, as ``results.json``) with the run under ``run``."""
    path = Path(path)
    notebook = NotebookRun(NOTEBOOK, result["profile"], path.parent)
    for claim, name, value, kwargs in results_entries(result):
        notebook.record(claim, name, value, **kwargs)
    data = {"claims": {c: dict(sorted(e.items())) for c, e in sorted(notebook.claims.items())}, "figures": {},
            "notebooks": {NOTEBOOK: {"profile": result["profile"], "finished": result["date"],
                                     "figures": [], "device": result["device"], **notebook.env}},
            "run": result}
    return write_results(data, path)


def gpu_rows(path: str | Path | None = None) -> dict | None:
    """The GPU run's results for notebooks and the paper, or ``None`` when there is none yet.

    ``{"device", "provenance", "jax", "attention": [...], "block": [...], "end_to_end": [...]}``
    read from ``figures/results-gpu.json`` (default).
    """
    path = Path(path) if path is not None else figures_dir() / GPU_RESULTS_NAME
    if not path.exists():
        return None
    run_ = json.loads(path.read_text()).get("run")
    if not run_:
        return None
    return {k: run_[k] for k in ("device", "provenance", "jax", "date", "attention", "block", "end_to_end")}


def format_result(result: dict) -> str:
    """The run as tables, for the terminal."""
    parts = [f"bench gpu on {result['device']} ({result['backend']}, jax {result['jax']}) "
             f"[{result['provenance']}]{' SMOKE' if result['smoke'] else ''}, {result['elapsed_s']:.0f} s "
             f"of a {result['budget_s']:.0f} s budget"]
    check = result.get("check")
    if check:
        worst = max((r for r in check["rows"] if "max_rel_error" in r), key=lambda r: r["max_rel_error"])
        parts.append(f"check at {check['geometry']}: {'all ok' if check['all_ok'] else 'FAILED'} "
                     f"(worst {worst['max_rel_error']:.2e}: {worst['mask']} {worst['dtype']})")
    columns = ["variant", "status", "median_s", "ratio_to_ours_dense", "ratio_to_cudnn", "tflops", "density",
               "overhead_vs_ideal", "reason"]
    for a in result["attention"]:
        parts.append(f"attention {a['geometry']} L={a['L']} heads={a['heads']} tiles {a['tile']} "
                     f"(program {a['program_tile']})\n" + format_table(a["rows"], columns))
    for b in result["block"]:
        modeled = b["modeled"]
        note = (f"modeled dense share {modeled['attention_share_dense']:.3f}" if "attention_share_dense" in modeled
                else f"cost model: {modeled.get('unavailable')}")
        if "share_modeled_over_measured" in modeled:
            note += f" ({modeled['share_modeled_over_measured']:.3f}x the one measured with {modeled['measured_with']})"
        parts.append(f"block {b['geometry']} L={b['L']} ({b['model']}); {note}\n"
                     + format_table(b["rows"], ["attention", "status", "block_s", "attention_s", "attention_share",
                                                "reason"]))
    if result.get("attention_exponent"):
        parts.append("self-attention time ~ L^k over the block resolutions: " + ", ".join(
            f"{kind} k={k:.2f}" for kind, k in result["attention_exponent"].items()))
    if result["end_to_end"]:
        parts.append("end to end, extrapolated from the block\n" + format_table(result["end_to_end"]))
    for e in result["errors"]:
        parts.append(f"section {e['section']} failed: {e['reason']}")
    return "\n\n".join(parts)


__all__ = ["NOTEBOOK", "results_entries", "write", "gpu_rows", "format_result"]
