"""The GPU run's results: its entries in the results file, the file itself, reading it back, and its tables.

:func:`write` stores a :func:`svgtpu.bench.gpu.run` in the layout of ``results.json`` (claims -> entries, read
by ``svgtpu paper``) with the full run under ``"run"``; :func:`format_result` prints it.  Measured runs are
committed under ``figures/gpu-runs/`` (:data:`~svgtpu.facts.paths.GPU_RUNS_DIR`), one dated file each (each call
of ``svgtpu bench gpu`` writes a new one, ``<date>-<commit>.json``: :func:`run_path`; :func:`check_out` refuses an
``--out`` that exists, before any work; the commit inside: :func:`source_commit`), listed
with its sha256, kind, commit and provenance in ``index.json`` and never rewritten (read by
:mod:`svgtpu.facts.gpu_runs`: ``committed_runs``, ``latest_run``, ``peers``, re-exported here), :func:`gpu_rows` the
newest package run for notebooks, and :func:`attention_rows`, :func:`block_rows`, :func:`exponent_rows`,
:func:`tpu_ideas` the tables of notebook 08; :func:`triton_launch` chooses our Triton kernel's launch settings from the
sweep recorded in the newest package run.  No JAX here: the notebooks read the files on any machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import subprocess
from pathlib import Path

from svgtpu.bench.gpu_clocks import clock_line
from svgtpu.errors import BadInput
from svgtpu.inputs.documents import read_json
from svgtpu.facts.gpu_runs import committed_runs, latest_run, peers
from svgtpu.facts.outputs import check_output, write_text
from svgtpu.facts.paths import GPU_RUNS_DIR, REPO_ROOT
from svgtpu.facts.results import NotebookRun, write_results
from svgtpu.facts.tables import format_table

#: The results file's notebook name for the GPU run.
NOTEBOOK = "gpu-bench"
#: Names the commit a run came from where the checkout has no git (a copy on the GPU machine).
COMMIT_ENV = "SVGTPU_COMMIT"


def _key(geometry: str) -> str:
    return geometry.removeprefix("wan-").replace(" ", "")


def results_entries(result: dict):
    """``(claim, name, value, kwargs)`` for every number the paper shows from a GPU run."""
    prov = result["provenance"]
    check = result.get("check")
    if check:
        yield ("C4", "gpu_kernel_check", check["rows"],
               dict(provenance=prov, description=f"every variant vs a float64 reference at {check['geometry']} "
                    f"(L={check['L']}, {check['heads']} heads) on {result['device']}: max relative error"))
    for a in result["attention"]:
        g = _key(a["geometry"])
        yield ("C4", f"gpu_attention_{g}", a["rows"],
               dict(provenance=prov, description=f"attention variants at {a['geometry']} (L={a['L']}, "
                    f"{a['heads']} heads, d={a['head_dim']}, bf16, tiles {a['tile']}, SVG kept {a['kept']}) "
                    f"on {result['device']}"))
        for name, value in {**a["headline"], **a.get("versus", {})}.items():
            if value is not None:
                yield ("C4", f"gpu_{name}_{g}", value, dict(provenance=prov, unit="x",
                                                            description=f"speedup (the other's time over this "
                                                            f"one's), paired-ratio median at {a['geometry']}"))
    primary = result["block"][0]["model"] if result["block"] else None
    for b in result["block"]:   # a block of another model than the run's first: its model in its names
        g = _key(b["geometry"]) if b["model"] == primary else f"{_key(b['model'])}_{_key(b['geometry'])}"
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


#: Headline keys of runs before the speedup convention, each a time ratio (this variant's time over the other's):
#: the speedup it is the inverse of, and where that lives now (``headline``: over cuDNN dense; ``versus``).
TIME_RATIOS = {"ours_dense_over_cudnn": ("headline", "ours_dense_speedup_over_cudnn"),
               "mgpu_dense_over_cudnn": ("headline", "mgpu_dense_speedup_over_cudnn"),
               "ours_dense_over_jax_triton_flash": ("versus", "ours_dense_speedup_over_jax_triton_flash")}
#: Headline keys of those runs that were speedups already but are not over cuDNN dense: where they live now.
MOVED = {"svg_fast_speedup_over_ours_dense", "aligned_fast_speedup_over_ours_dense", "fast_path_speedup_svg",
         "fast_path_speedup_aligned"}


def speedups(section: dict) -> dict[str, dict]:
    """An attention section's ``{"headline": ..., "versus": ...}`` speedups (above 1: faster) from a run file of
    any date: a run before the speedup convention kept time ratios among its headline keys (:data:`TIME_RATIOS`,
    read as their inverses under their new names) and other ratios beside them (:data:`MOVED`)."""
    out = {"headline": {}, "versus": dict(section.get("versus", {}))}
    for key, value in section.get("headline", {}).items():
        if key in TIME_RATIOS:
            where, new = TIME_RATIOS[key]
            out[where][new] = None if value is None else 1.0 / value
        else:
            out["versus" if key in MOVED else "headline"][key] = value
    return out


def source_commit() -> dict:
    """``{"commit": ..., "dirty": ...}`` of the checkout the run came from: git's short hash and whether tracked
    files differ from it, or ``$SVGTPU_COMMIT`` where the checkout has no git (``dirty`` then unknown: ``None``)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=30)
    try:
        head = git("rev-parse", "--short", "HEAD")
        if head.returncode == 0:
            return {"commit": head.stdout.strip(), "dirty": bool(git("status", "--porcelain", "-uno").stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"commit": os.environ.get(COMMIT_ENV) or "unknown", "dirty": None}


def run_path(date: str, commit: str, directory: str | Path | None = None) -> Path:
    """A new run file's path, ``<figures>/gpu-runs/<date>-<commit>.json``, or with ``-2``, ``-3``, ... where a
    run of that day and commit is already there: never an earlier run's name."""
    folder = Path(directory) if directory is not None else GPU_RUNS_DIR
    stem = f"{date[:10]}-{commit}"
    path, n = folder / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.json"
    return path


def check_out(path: str | Path) -> Path:
    """``path`` if a run file may be written there: not an existing file (runs are never overwritten), in a
    folder that exists and is writable (:func:`~svgtpu.facts.outputs.check_output`); else one clear line
    (:class:`BadInput`), before any work."""
    if Path(path).exists() and not Path(path).is_dir():
        raise BadInput(f"--out {path} already exists: each GPU run writes a new file (runs are never overwritten); "
                       f"name another, or leave --out out for figures/gpu-runs/<date>-<commit>.json")
    path = check_output("--out", path)
    if path.suffix != ".json":
        raise BadInput(f"--out must name a .json file, got {str(path)!r}")
    return path


def write(result: dict, path: str | Path) -> Path:
    """Store ``result`` as a results file (claims -> entries, as ``results.json``) with the run under ``run``;
    an existing file is never overwritten (:func:`check_out`).  Written into a folder with an ``index.json`` (the
    committed runs'), the run is listed there with its sha256."""
    path = check_out(path)
    notebook = NotebookRun(NOTEBOOK, result["profile"], path.parent)
    for claim, name, value, kwargs in results_entries(result):
        notebook.record(claim, name, value, **kwargs)
    data = {"claims": {c: dict(sorted(e.items())) for c, e in sorted(notebook.claims.items())}, "figures": {},
            "notebooks": {NOTEBOOK: {"profile": result["profile"], "finished": result["date"],
                                     "figures": [], "device": result["device"], **notebook.env}},
            "run": result}
    written = write_results(data, path)
    index = path.parent / "index.json"
    if index.exists():  # a run written into the committed runs' folder is listed there, as it came off the machine
        listed = json.loads(index.read_text())
        listed["runs"].append({"file": path.name, "kind": "package", "date": result["date"][:10],
                               "commit": result.get("commit"), "provenance": result["provenance"],
                               "device": result["device"], "command": result.get("command", "svgtpu bench gpu"),
                               "machine": f"jax {result['jax']} ({result['backend']})",
                               "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
        write_text(index, json.dumps(listed, indent=1) + "\n")
    return written


def gpu_rows(path: str | Path | None = None) -> dict | None:
    """A GPU run's results for notebooks and the paper, or ``None`` when there is none.

    ``{"device", "provenance", "jax", "date", "attention": [...], "block": [...], "end_to_end": [...]}``
    read from the results file at ``path``, by default the newest committed package run (:func:`latest_run`).
    """
    if path is None:
        latest = latest_run()
        data = latest["data"] if latest else {}
    else:
        data = read_json("gpu results", path, allow_nan=True) if Path(path).exists() else {}   # a results file
    run_ = data.get("run")
    if not run_:
        return None
    return {k: run_[k] for k in ("device", "provenance", "jax", "date", "attention", "block", "end_to_end")}


def _ok(rows: list[dict]) -> dict[str, dict]:
    return {r["variant"]: r for r in rows if r.get("status", "ok") == "ok"}


def attention_rows(run: dict, peer_runs: dict[str, dict] | None = None) -> list[dict]:
    """Attention time per variant and resolution: the package run's rows (seconds, cuDNN dense time over the
    variant's, useful TFLOP/s, tile density) then each peer's, each against the cuDNN dense of its own process;
    a variant that did not run keeps its row with the reason."""
    out = []
    for a in run["data"]["run"]["attention"]:
        cudnn = _ok(a["rows"]).get("cudnn-dense")
        for r in a["rows"]:
            row = {"geometry": a["geometry"], "heads": a["heads"], "variant": r["variant"], "measured_by": run["file"]}
            if r["status"] == "ok":
                row |= {"seconds": r["median_s"], "x_cudnn": cudnn["median_s"] / r["median_s"] if cudnn else None,
                        "tflops": r["tflops"], "density": r["density"], "reason": ""}
            else:
                row |= {"seconds": None, "x_cudnn": None, "tflops": None, "density": r["density"],
                        "reason": r["reason"]}
            out.append(row)
    for name, peer in (peer_runs or {}).items():
        data = peer["data"]
        cases = data["cases"] if "cases" in data else [{"geometry": "720p", "heads": 40, "rows": data["rows"]}]
        for case in cases:
            for variant, r in case["rows"].items():
                out.append({"geometry": case["geometry"], "heads": case["heads"], "variant": variant,
                            "measured_by": name, "seconds": r["median_s"], "x_cudnn": r["speedup_over_cudnn"],
                            "tflops": r.get("tflops_useful", r.get("tflops")), "density": None, "reason": ""})
    return out


def block_rows(run: dict) -> list[dict]:
    """The measured block per resolution and self-attention kernel: block and self-attention seconds and the
    self-attention share (the paired-ratio median over rounds, as the run recorded it)."""
    return [{"geometry": b["geometry"], "L": b["L"], "model": b["model"], "attention": r["attention"],
             "block_s": r.get("block_s"),
             "attention_s": r.get("attention_s"), "attention_share": r.get("attention_share"), "reason": r["reason"]}
            for b in run["data"]["run"]["block"] for r in b["rows"]]


#: Why the GPU exponents carry no interval: the run file keeps each timing's median, not its rounds.
NO_ROUNDS = "the run kept each timing's median, not its rounds: no interval, so no verdict"


def exponent_rows(run: dict) -> list[dict]:
    """C5 on the device: the run's slope of log self-attention seconds against log L per kernel, with an
    interval from its rounds where the run kept them (none in a run that kept medians only: :data:`NO_ROUNDS`)."""
    blocks = run["data"]["run"]["block"]
    blocks = [b for b in blocks if b["model"] == blocks[0]["model"]]   # the exponents' blocks: the run's first model
    return [{"attention": kind, "exponent": k, "resolutions": ", ".join(b["geometry"] for b in blocks),
             "interval": None, "why": NO_ROUNDS}
            for kind, k in run["data"]["run"].get("attention_exponent", {}).items()]


#: What each TPU idea changes, as (idea, kernel, what is held, variant without, variant with, whose file):
#: "buys" is the time without over the time with (above 1: the idea is faster on this GPU).
IDEAS = (
    ("alignment", "ours", "fast path on", "ours-svg-fast", "ours-aligned-fast", "package"),
    ("alignment", "ours", "fast path off", "ours-svg-nofast", "ours-aligned-nofast", "package"),
    ("alignment", "FlexAttention", "its block mask", "flex-svg", "flex-aligned", "2026-12-04-peer-flexattention.json"),
    ("fast path", "ours", "SVG mask", "ours-svg-nofast", "ours-svg-fast", "package"),
    ("fast path", "ours", "aligned mask", "ours-aligned-nofast", "ours-aligned-fast", "package"),
    ("program tile 128x64 -> 128x128", "ours", "dense, 8 warps, 2 stages", "ours-dense",
     "ours-dense-128x128-w8-s2", "package"),
    ("program tile 128x64 -> 128x128", "ours", "dense, 8 warps, 3 stages vs 2", "ours-dense-128x64-w8-s2",
     "ours-dense-128x128-w8-s3", "2026-12-04-peer-jax-mosaic-gpu-probe.json"),
    ("program tile 128x64 -> 128x128", "ours", "aligned, 8 warps, 3 stages vs 2", "ours-aligned-128x64-w8-s2",
     "ours-aligned-128x128-w8-s3", "2026-12-04-peer-jax-mosaic-gpu-probe.json"),
)


def tpu_ideas(run: dict, peer_runs: dict[str, dict] | None = None) -> list[dict]:
    """What each TPU idea buys on this GPU (:data:`IDEAS`), per resolution both variants ran at: the ratio of
    their medians measured in the same process (the run's own paired-ratio medians are in its headline)."""
    times: dict[tuple[str, str], dict[str, float]] = {}
    for r in attention_rows(run, peer_runs):
        if r["seconds"] is not None:
            source = "package" if r["measured_by"] == run["file"] else r["measured_by"]
            times.setdefault((source, r["geometry"]), {})[r["variant"]] = r["seconds"]
    out = []
    for idea, kernel, held, without, with_, source in IDEAS:
        for (src, geometry), t in times.items():
            if src == source and without in t and with_ in t:
                out.append({"idea": idea, "kernel": kernel, "held": held, "geometry": geometry,
                            "without_s": t[without], "with_s": t[with_], "buys": t[without] / t[with_],
                            "measured_by": run["file"] if source == "package" else source})
    return out


#: Our dense kernel at a launch setting in a run's attention rows: ``ours-dense-<bq>x<bkv>-w<warps>-s<stages>``.
_TUNING = re.compile(r"ours-dense-(\d+)x(\d+)-w(\d+)-s(\d+)$")


def triton_launch(runs: list[dict] | None = None) -> dict:
    """Our Triton kernel's launch settings chosen from the newest package run (of ``runs``, default
    :func:`committed_runs`) whose attention sections timed a sweep of them (rows
    ``ours-dense-<bq>x<bkv>-w<warps>-s<stages>``): of the settings every such section timed, the one with the lowest
    median over the sections of its time over the section's fastest.  ``settings`` (keyword arguments of
    :func:`~svgtpu.kernels.gpu.gpu_block_sparse_attention`) is ``None`` without a sweep: the kernel's defaults."""
    runs = committed_runs() if runs is None else runs
    for run in sorted((r for r in runs if r["kind"] == "package"), key=lambda r: (r["date"], r["file"]), reverse=True):
        sections = [{tuple(map(int, m.groups())): r["median_s"] for r in a["rows"]
                     if r.get("status") == "ok" and (m := _TUNING.match(r["variant"]))}
                    for a in run["data"]["run"]["attention"]]
        sections = [t for t in sections if t]
        if not sections:
            continue
        settings = set.intersection(*(set(t) for t in sections))
        score = {s: statistics.median(t[s] / min(t.values()) for t in sections) for s in settings}
        best = min(sorted(score), key=score.get)
        return {"settings": dict(zip(("gpu_block_q", "gpu_block_kv", "num_warps", "num_stages"), best)),
                "source": f"figures/gpu-runs/{run['file']}", "over_fastest": score[best], "swept": len(settings)}
    return {"settings": None, "source": "no recorded sweep: the kernel's defaults"}


def clock_lines(section: dict) -> str:
    """A section's clock log in words (:mod:`svgtpu.bench.gpu_clocks`), one line per timed call; a run before the
    log (2026-12-07) has none."""
    clocks = section.get("clocks")
    if clocks is None:
        return ""
    if "unavailable" in clocks:
        return f"\nclocks: none ({clocks['unavailable']})"
    return (f"\nclocks ({clocks['source']}, every {clocks['interval_ms']} ms, samples while each call ran)\n"
            + "\n".join(clock_line(name, clocks) for name in clocks["calls"]))


def format_result(result: dict) -> str:
    """The run as tables, for the terminal."""
    triton = result["launch"]["triton_ours"]
    parts = [f"bench gpu on {result['device']} ({result['backend']}, jax {result['jax']}) "
             f"[{result['provenance']}]{' SMOKE' if result['smoke'] else ''}, commit {result.get('commit')}, "
             f"{result['elapsed_s']:.0f} s of a {result['budget_s']:.0f} s budget; our Triton launch: "
             f"{triton['settings'] or 'defaults'} ({triton['source']}); every launch setting: --json's 'launch'"]
    check = result.get("check")
    if check:
        parts.append(f"float64 check at {check['geometry']} (L={check['L']}): "
                     f"{'all ran and passed' if check['all_ok'] else 'NOT ALL OK: failed or unchecked variants are not timed'}"
                     "\n" + format_table(check["rows"], ["variant", "mask", "dtype", "ok", "max_rel_error", "reason"]))
    columns = ["variant", "status", "median_s", "speedup_over_cudnn", "tflops", "density", "spot_max_rel_error",
               "reason"]
    for a in result["attention"]:
        found = speedups(a)
        shown = {k: v for k, v in {**found["headline"], **found["versus"]}.items() if v is not None}
        parts.append(f"attention {a['geometry']} L={a['L']} heads={a['heads']} tiles {a['tile']} (spot check: rows "
                     f"{', '.join(f'{f:g}' for f in a['spot_rows'])} of L, first and last head, vs float64)\n"
                     + format_table(a["rows"], columns)
                     + ("\nspeedups (above 1: faster)\n" + format_table([{"speedup": k, "x": v} for k, v in shown.items()])
                        if shown else "") + clock_lines(a))
    for b in result["block"]:
        modeled = b["modeled"]
        note = (f"modeled dense share {modeled['attention_share_dense']:.3f}" if "attention_share_dense" in modeled
                else f"cost model: {modeled.get('unavailable')}")
        if "share_modeled_over_measured" in modeled:
            note += f" ({modeled['share_modeled_over_measured']:.3f}x the one measured with {modeled['measured_with']})"
        parts.append(f"block {b['geometry']} L={b['L']} ({b['model']}); {note}\n"
                     + format_table(b["rows"], ["attention", "status", "block_s", "attention_s", "attention_share",
                                                "reason"]) + clock_lines(b))
    if result.get("attention_exponent"):
        parts.append("self-attention time ~ L^k over the block resolutions: " + ", ".join(
            f"{kind} k={k:.2f}" for kind, k in result["attention_exponent"].items()))
    if result["end_to_end"]:
        parts.append("end to end, extrapolated from the block\n" + format_table(result["end_to_end"]))
    for e in result["errors"]:
        parts.append(f"section {e['section']} failed: {e['reason']}")
    return "\n\n".join(parts)


__all__ = ["NOTEBOOK", "COMMIT_ENV", "TIME_RATIOS", "MOVED", "speedups", "results_entries", "source_commit", "run_path", "check_out", "write",
           "triton_launch", "committed_runs", "latest_run", "peers", "gpu_rows",
           "attention_rows", "block_rows", "clock_lines", "NO_ROUNDS", "exponent_rows", "IDEAS", "tpu_ideas", "format_result"]
