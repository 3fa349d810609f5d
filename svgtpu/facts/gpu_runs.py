"""The measured GPU runs committed under ``figures/gpu-runs/``: one dated file per run, listed with its sha256,
kind, commit and provenance in ``index.json``, never rewritten (``tests/test_gpu_runs.py``).

Kind ``package``: svgtpu's own ``svgtpu bench gpu`` at the commit in the file's name; kind ``peer``: a separate
script measured beside it the same hour on the same GPU (read beside the package's run, never as it).  Read
here, at the bottom layer, because the cost model calibrates on them and the notebooks and paper show them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from svgtpu.facts.paths import GPU_RUNS_DIR
from svgtpu.inputs.documents import parse_json, read_text
from svgtpu.inputs.runs import gpu_run, gpu_run_index


def committed_runs(directory: str | Path | None = None) -> list[dict]:
    """Every committed GPU run in ``index.json``'s order: its index entry (file, kind ``package`` or ``peer``,
    date, commit, provenance, command, sha256) with the file's JSON under ``data``, each checked by its schema
(:mod:`svgtpu.inputs.runs`).  A file whose sha256 is not
    its index entry's has been edited after the run, which never happens to a dated run: that raises."""
    directory = Path(directory) if directory is not None else GPU_RUNS_DIR
    index = directory / "index.json"
    if not index.exists():
        return []
    runs = []
    for entry in gpu_run_index(parse_json(read_text("GPU run index", index), str(index)), str(index))["runs"]:
        path = directory / entry["file"]
        raw = read_text("GPU run", path)
        if hashlib.sha256(raw.encode()).hexdigest() != entry["sha256"]:
            raise RuntimeError(f"{path}: sha256 differs from index.json's; a dated run is "
                               "never rewritten (add a new dated file instead)")
        runs.append(entry | {"data": gpu_run(parse_json(raw, str(path)), str(path), entry["kind"])})
    return runs


def latest_run(directory: str | Path | None = None) -> dict | None:
    """The newest committed package run (``svgtpu bench gpu``): its index entry with ``data``, or ``None``."""
    package = [r for r in committed_runs(directory) if r["kind"] == "package"]
    return max(package, key=lambda r: (r["date"], r["file"])) if package else None


def peers(run: dict, directory: str | Path | None = None) -> dict[str, dict]:
    """The peer runs measured beside package run ``run`` (same date and device), by file name."""
    return {r["file"]: r for r in committed_runs(directory)
            if r["kind"] == "peer" and r["date"] == run["date"] and r["device"] == run["device"]}


__all__ = ["committed_runs", "latest_run", "peers"]
