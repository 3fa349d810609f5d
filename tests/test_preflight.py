"""The TPU preflight (svgtpu reproduce --preflight) at the smallest profile: every check compiles for v6e."""

import pytest

from svgtpu.compiler.compile import libtpu_available
from svgtpu.setting import PRODUCTION
from svgtpu.report.preflight import checks, preflight
from svgtpu.report.reproduce import tuned_tiles


def test_checks_follow_the_profile_sizes():
    # the tpu profile runs the tiles `svgtpu tune --record` found (figures/tuned_tiles.json)
    tuned_720p, tuned_production = tuned_tiles("720p"), tuned_tiles(PRODUCTION.resolution)
    tpu = {(c.notebook, c.what): c for c in checks("tpu")}
    kernel = tpu["04_fast_path_ablation", "kernel, fast path on"].job
    assert (kernel.geometry, kernel.config.block_q, kernel.config.block_kv, kernel.heads) == ("720p", *tuned_720p, 8)
    sharded = next(c for c in tpu.values() if c.target == "sharded-svg-layer")
    assert sharded.job.topology == "v6e:4x4x1" and sharded.job.heads == 40 and sharded.hosts == "several"
    assert {c.target for c in tpu.values()} == {"kernel", "svg-layer", "dit-step", "sharded-svg-layer",
                                                "sharded-dit-step", "wan-block"}
    # notebook 05's blocks: 720p and 1440p on v6e-8 and v7x, dense and SVG, the kernel compiled in the block
    blocks = [c.job for c in tpu.values() if c.target == "wan-block"]
    assert sorted((b.setting.resolution, b.setting.device, b.variant) for b in blocks) == sorted(
        [(r, d, v) for r in ("720p", "1440p") for d in ("v6e", "v7x") for v in ("dense", "svg")])
    assert {(b.setting.model, b.setting.block_q, b.setting.block_kv, b.kernel) for b in blocks} == {
        ("wan2.1-14b", *tuned_production, "in-block")}


@pytest.mark.system
@pytest.mark.skipif(not libtpu_available(), reason="libtpu not installed: no TPU compiler")
def test_preflight_quick_profile_compiles_one_host_and_several():
    # the DiT steps (a minute of compiling each here) are left out of the test; the CLI runs them
    result = preflight("quick", dit=False)
    assert {r["topology"] for r in result["checks"]} == {"v6e:2x2x1", "v6e:4x4x1"}
    assert len(result["checks"]) == 6
    # the quick profile is CPU-only: notebook 03's 64-wide tiles are what a TPU would refuse, and it says so
    refused = [r for r in result["checks"] if not r["compiled"]]
    assert [r["notebook"] for r in refused] == ["03_mask_alignment"] * 2 and result["failed"] == 2
    assert all("block_kv must be a positive multiple of 128" in r["reason"] for r in refused)
    assert all(r["compiled"] for r in result["checks"] if r["notebook"] != "03_mask_alignment")


def _fake_compile(compiled):
    """A stand-in for the libtpu compile of one bench program: 8-chip programs take 2 s, others 1 s, and the
    moderate section is refused (so the verdict and the totals are known without compiling)."""
    def compile_one(p):
        compiled.append(p)
        refused = p.section == "moderate"
        return {"compiled": not refused, "reason": "refused: too big" if refused else None,
                "compile_s": 2.0 if p.chips == 8 else 1.0, "build_s": 0.25}
    return compile_one


def test_bench_preflight_writes_its_record_and_never_overwrites_it(tmp_path, monkeypatch):
    import json

    from svgtpu.bench import tpu
    from svgtpu.cli import main
    from svgtpu.errors import BadInput
    from svgtpu.report import preflight as pf
    from svgtpu.report.preflight_record import newest_record, sources_key
    compiled = []
    monkeypatch.setattr(pf, "compile_bench_program", _fake_compile(compiled))
    monkeypatch.setattr(pf, "host_checks", lambda: {"720p": {"seconds_per_head": 1.5}})   # seconds of numpy
    out = tmp_path / "record.json"
    assert main(["bench", "tpu", "--preflight", "--out", str(out), "--json"]) == 1   # the refused ones fail it
    record = json.loads(out.read_text())
    everything = tpu.all_programs(tpu.FULL)
    assert len(compiled) == len(everything)
    assert record["provenance"] == "compiled-v6e" and record["commit"] == tpu.commit()
    assert {"jax", "libtpu"} <= set(record) and record["date"][:4].isdigit()
    assert record["host"]["cpus"] >= 1 and len(record["host"]["loadavg"]) == 3 and record["host"]["platform"]
    assert record["sources"]["key"] == sources_key()["key"] and "bench/tpu.py" in record["sources"]["made_of"]["sources"]
    assert sorted((r["name"], r["chips"]) for r in record["programs"]) == sorted((p.name, p.chips) for p in everything)
    refused = [r for r in record["programs"] if not r["compiled"]]
    assert refused and all(r["name"].startswith("moderate") and r["reason"] for r in refused)
    assert record["passed"] is False and record["failed"] == len(refused) and record["wall_s"] >= 0
    assert record["host_check"] == {"720p": {"seconds_per_head": 1.5}}
    for chips, name in ((1, "v6e-1"), (8, "v6e-8")):
        ran = tpu.programs(tpu.FULL, chips)
        totals = record["slices"][name]
        assert totals["programs"] == len(ran) and totals["topology"] == tpu.SLICES[chips]
        assert totals["compile_s"] == sum(2.0 if p.chips == 8 else 1.0 for p in ran)
        assert totals["compiled"] == sum(p.section != "moderate" for p in ran)
    # the same path again: refused in one line before any compile, the record untouched
    compiled.clear()
    before = out.read_text()
    assert main(["bench", "tpu", "--preflight", "--out", str(out)]) == 2
    with pytest.raises(BadInput, match="never overwritten"):
        pf.bench_preflight(out)
    assert compiled == [] and out.read_text() == before
    # the default path: figures/preflight/<date>-<commit>.json in the checkout, made if missing
    monkeypatch.setattr("svgtpu.facts.paths.REPO_ROOT", tmp_path)
    written = pf.bench_preflight()["written"]
    assert written.startswith(str(tmp_path / "figures" / "preflight")) and written.endswith(f"-{tpu.commit()}.json")
    newest = newest_record()
    assert newest["path"] == written and newest["passed"] is False


def test_newest_committed_preflight_record_covers_every_program_of_the_run():
    # a program added to the run and compiled by no preflight since fails here
    from svgtpu.bench import tpu
    from svgtpu.report.preflight_record import newest_record
    record = newest_record()
    if record is None:
        pytest.skip("no preflight record committed yet (svgtpu bench tpu --preflight writes figures/preflight/)")
    assert sorted((r["name"], r["chips"]) for r in record["programs"]) == sorted(
        (p.name, p.chips) for p in tpu.all_programs(tpu.FULL)), record["path"]
    assert record["passed"] and all(r["compiled"] for r in record["programs"]), record["path"]
    assert record["provenance"] == "compiled-v6e"


@pytest.mark.system
def test_the_record_key_covers_every_module_the_programs_are_built_from():
    # a fresh process builds the run's 720p programs on both slices: each svgtpu module that loads must be in
    # PROGRAM_SOURCES (else an edit to it would not show as a stale record), bar ones that cannot change a program:
    # the cost model and the facts are read for values (MaxDiffusion's moderate densities) that the key's
    # description holds, as each program's fields; the input schemas check the files a run reads, never a program
    import subprocess
    import sys

    from svgtpu.report.preflight_record import PROGRAM_SOURCES
    code = """
import sys
from jax.experimental import topologies
from svgtpu.bench.tpu import FULL, SLICES, all_programs, program
for p in all_programs(FULL):
    if p.geometry == "720p":
        program(p, topologies.get_topology_desc(platform="tpu", topology_name=SLICES[p.chips]).devices[:p.chips])
print(" ".join(sorted(m.__file__ for n, m in sys.modules.items() if n.startswith("svgtpu"))))
"""
    files = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    inert = {"__init__.py", "errors.py"}
    loaded = {f.split("/svgtpu/", 1)[1] for f in files}
    uncovered = [f for f in loaded if f not in inert and not f.endswith("/__init__.py")
                 and not f.startswith(("costmodel/", "facts/", "inputs/"))
                 and not any(f == s or f.startswith(s + "/") for s in PROGRAM_SOURCES)]
    assert "bench/tpu.py" in loaded and not uncovered, uncovered


def test_host_checks_time_the_runs_float64_check_per_resolution(monkeypatch):
    # at the smoke sizes (the real ones take seconds): one entry per resolution of the run, its rows and L
    from svgtpu.bench import tpu
    from svgtpu.geometry import get_geometry
    from svgtpu.report.preflight_record import host_checks
    monkeypatch.setattr(tpu, "FULL", tpu.SMOKE)
    found = host_checks()
    assert set(found) == {"2x8x10"}
    entry = found["2x8x10"]
    assert entry["L"] == get_geometry("2x8x10").L and entry["rows"] == len(tpu._rows(entry["L"], tpu.SMOKE.check_rows))
    assert entry["seconds_per_head"] > 0 and entry["provenance"] == "measured-cpu"
