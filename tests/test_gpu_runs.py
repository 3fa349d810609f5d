"""Committed GPU runs (``figures/gpu-runs/``): each dated file stays as it came off the machine, the index lists
every file with its hash, and the reader's tables are the files' own numbers."""

import hashlib
import json
import shutil

import pytest

from svgtpu.bench import gpu_results
from svgtpu.facts.paths import GPU_RUNS_DIR

#: The H200 run of 2026-12-04 (``svgtpu bench gpu --budget 330`` at 314194b) and its two peers, as committed.
#: A dated run is never rewritten: a later run is a new file, never an edit of this one.
FROZEN = {"2026-12-04-314194b.json": "cbe05443b68a9edd2572214d15a204b6e63a83cb9111fde851b24184dc974247",
          "2026-12-04-peer-flexattention.json": "c0a650adf5fd3b5ac0b5b077108bdc7b3fe7d60f27fd852d17bceaaf754483aa",
          "2026-12-04-peer-jax-mosaic-gpu-probe.json":
              "a4cd78e7a2bdb3327a95387f6bc39acf89300286c51a74930d8261d4ae432a53"}


def test_dated_runs_are_never_rewritten():
    for name, digest in FROZEN.items():
        assert hashlib.sha256((GPU_RUNS_DIR / name).read_bytes()).hexdigest() == digest, name
    index = {r["file"]: r for r in json.loads((GPU_RUNS_DIR / "index.json").read_text())["runs"]}
    assert {n: index[n]["sha256"] for n in FROZEN} == FROZEN
    on_disk = {p.name for p in GPU_RUNS_DIR.glob("*.json")} - {"index.json"}
    assert on_disk == set(index), "every run file is listed in index.json, and every listed file exists"


def test_the_package_run_is_labelled_as_it_was_made():
    runs = {r["file"]: r for r in gpu_results.committed_runs()}
    run = runs["2026-12-04-314194b.json"]
    assert (run["kind"], run["commit"], run["provenance"]) == ("package", "314194b", "measured-gpu-h200")
    assert run["data"]["run"]["provenance"] == run["provenance"] and run["data"]["run"]["device"] == run["device"]
    assert {r["kind"] for n, r in runs.items() if "peer" in n} == {"peer"}
    assert all(r["commit"] is None for n, r in runs.items() if "peer" in n), "a peer is not package code"
    assert gpu_results.latest_run()["file"] == "2026-12-04-314194b.json"
    assert set(gpu_results.peers(run)) == {n for n in runs if "peer" in n}
    assert gpu_results.gpu_rows()["block"] == run["data"]["run"]["block"]


def test_an_edited_run_is_refused(tmp_path):
    shutil.copytree(GPU_RUNS_DIR, tmp_path / "runs")
    path = tmp_path / "runs" / "2026-12-04-314194b.json"
    path.write_text(path.read_text().replace('"median_s": 0.2', '"median_s": 0.1', 1))
    with pytest.raises(RuntimeError, match="never rewritten"):
        gpu_results.committed_runs(tmp_path / "runs")
    assert gpu_results.committed_runs(tmp_path / "absent") == [] and gpu_results.latest_run(tmp_path / "absent") is None


def test_tables_read_the_files_numbers():
    run = gpu_results.latest_run()
    raw = json.loads((GPU_RUNS_DIR / run["file"]).read_text())["run"]
    medians = {(a["geometry"], r["variant"]): r["median_s"] for a in raw["attention"] for r in a["rows"]
               if r["status"] == "ok"}
    rows = gpu_results.attention_rows(run, gpu_results.peers(run))
    mine = {(r["geometry"], r["variant"]): r for r in rows if r["measured_by"] == run["file"]}
    assert mine["720p", "ours-dense"]["x_cudnn"] == pytest.approx(
        medians["720p", "cudnn-dense"] / medians["720p", "ours-dense"])
    skipped = mine["720p", "jax-mosaic-flash-dense"]
    assert skipped["seconds"] is None and "float16" in skipped["reason"]
    ideas = {(i["idea"], i["held"], i["geometry"]): i for i in gpu_results.tpu_ideas(run, gpu_results.peers(run))}
    fast = ideas["fast path", "SVG mask", "1440p"]
    assert fast["buys"] == pytest.approx(medians["1440p", "ours-svg-nofast"] / medians["1440p", "ours-svg-fast"])
    flex = json.loads((GPU_RUNS_DIR / "2026-12-04-peer-flexattention.json").read_text())
    case = next(c for c in flex["cases"] if c["geometry"] == "720p")["rows"]
    assert ideas["alignment", "its block mask", "720p"]["buys"] == pytest.approx(
        case["flex-svg"]["median_s"] / case["flex-aligned"]["median_s"])
    blocks = gpu_results.block_rows(run)
    assert len(blocks) == sum(len(b["rows"]) for b in raw["block"])
    assert all(r["interval"] is None and r["why"] == gpu_results.NO_ROUNDS for r in gpu_results.exponent_rows(run))
