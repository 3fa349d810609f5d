"""The prepared TPU run (``svgtpu bench tpu``): preflight compiles what it runs, its float64 check catches a
wrong kernel, it refuses an existing run file before any work, and its smoke run end to end on this CPU."""

import json
from pathlib import Path

import numpy as np
import pytest

from svgtpu.bench import tpu
from svgtpu.cli import main
from svgtpu.compiler.compile import libtpu_available
from svgtpu.errors import BadInput
from svgtpu.report.preflight import TPU_BENCH, checks


def test_preflight_compiles_every_program_the_run_runs():
    compiled = [c.job for c in checks(TPU_BENCH)]
    assert len(set(compiled)) == len(compiled)
    for chips in tpu.SLICES:   # a run on any prepared slice runs only programs preflight compiled
        ran = tpu.programs(tpu.FULL, chips)
        assert ran and set(ran) <= set(compiled)
    assert set(compiled) == {p for chips in tpu.SLICES for p in tpu.programs(tpu.FULL, chips)}
    # the real run's sections: both kernels at both resolutions, C4's fast path off and on, blocks on every slice
    names = {c.what for c in checks(TPU_BENCH)}
    for g in ("720p", "1440p"):
        assert {f"kernels {g} ours-svg-aligned-nofast", f"kernels {g} splash-svg", f"block {g} svg-ours",
                f"block {g} none"} <= names
    assert {p.chips for p in compiled if p.section == "block"} == set(tpu.SLICES)


def test_a_slice_runs_only_the_blocks_that_fit_its_chips():
    blocks = lambda sizes, chips: {p.geometry for p in tpu.programs(sizes, chips) if p.section == "block"}  # noqa: E731
    assert blocks(tpu.FULL, 1) == {"720p"} and blocks(tpu.FULL, 8) == {"720p", "1440p"}
    for chips in tpu.SLICES:   # kernels run on one chip of any slice; the moderate run's 720p block on every slice
        assert {p.geometry for p in tpu.programs(tpu.FULL, chips) if p.section == "kernels"} == {"720p", "1440p"}
        assert {(p.geometry, p.chips) for p in tpu.programs(tpu.FULL, chips) if p.section == "moderate"} == {
            ("720p", chips)}
        assert blocks(tpu.SMOKE, chips) == {"2x8x10"}
    with pytest.raises(KeyError):
        tpu.FULL.block_geometries(4)   # no slice of four chips is prepared


def test_every_program_of_the_real_run_has_a_smoke_twin():
    # the smoke run (CI, on 1 and 8 host devices) runs the real run's code: each program the real run times on a
    # slice has a smoke program of the same section, variant, kernel, mask, fast path and chips, and no other
    def kinds(sizes, chips):
        return {(p.section, p.variant, p.kernel, p.mask, p.fast_path, p.chips) for p in tpu.programs(sizes, chips)}
    for chips in tpu.SLICES:
        assert kinds(tpu.FULL, chips) == kinds(tpu.SMOKE, chips), chips
        assert {p.section for p in tpu.programs(tpu.SMOKE, chips)} == set(tpu.SECTIONS)


def test_smoke_blocks_divide_over_every_slice():
    # Ulysses splits a block's heads and tokens over the slice's seq devices (svgtpu.model.sharded): two smoke
    # heads over v6e-8's four refused every smoke block there
    from svgtpu.geometry import get_geometry
    assert tpu.mesh_shape(1) == (1, 1) and tpu.mesh_shape(8) == (2, 4)
    for chips in tpu.SLICES:
        _, seq = tpu.mesh_shape(chips)
        for p in tpu.programs(tpu.SMOKE, chips):
            if p.section != "kernels":
                assert tpu._model(p.model).heads % seq == 0 and get_geometry(p.geometry).L % seq == 0, (chips, p)


@pytest.mark.skipif(not libtpu_available(), reason="libtpu not installed: no TPU compiler")
def test_a_1440p_block_does_not_fit_one_chip(capsys):
    # what the one-chip run leaves out, the compiler refuses (about 1 s: refused before any code is made); the
    # blocks it keeps compile in `svgtpu bench tpu --preflight` (a 720p block on one chip: ~40 s here)
    import dataclasses

    from svgtpu.report.preflight import compile_bench_program
    on_eight = next(p for p in tpu.programs(tpu.FULL, 8) if p.name == "block 1440p none")
    assert "1440p" not in tpu.FULL.block_geometries(1)
    result = compile_bench_program(dataclasses.replace(on_eight, chips=1))
    with capsys.disabled():
        print(f"\nblock 1440p none on one v6e chip: {result['reason']}")
    assert not result["compiled"] and result["refused_by"] == "compiler"
    assert "RESOURCE_EXHAUSTED" in result["reason"] and "HBM" in result["reason"]


def test_each_kernel_at_its_own_tiles():
    ours, splash = tpu.best_tiles("ours", "720p"), tpu.best_tiles("splash", "720p")
    from svgtpu.compiler.tune import tuned_tile
    recorded = tuned_tile("720p", "v6e")
    if recorded is not None:
        assert ours == (recorded["block_q"], recorded["block_kv"], recorded["block_kv_compute"])
    assert splash[:2] == (tpu.PRODUCTION.block_q, tpu.PRODUCTION.block_kv)


def test_check_fails_a_kernel_that_ignores_the_mask(monkeypatch):
    program = next(p for p in tpu.programs(tpu.SMOKE) if p.variant == "ours-svg-fast")
    assert tpu.check(program, tpu.SMOKE, None)["ok"]
    dense = next(p for p in tpu.programs(tpu.SMOKE) if p.variant == "ours-dense-fast")
    wrong = tpu.kernel_fn(dense)   # dense attention where the SVG mask was asked for
    monkeypatch.setattr(tpu, "kernel_fn", lambda p: wrong)
    result = tpu.check(program, tpu.SMOKE, None)
    assert result["ok"] is False and result["max_rel_error"] > tpu.TOLERANCE


def test_an_existing_run_file_is_refused_before_any_work(tmp_path):
    out = tmp_path / "run.json"
    out.write_text("{}")
    with pytest.raises(BadInput, match="never overwritten"):
        tpu.run(smoke=True, out=out)
    assert out.read_text() == "{}"
    with pytest.raises(BadInput, match="sections must be some of"):
        tpu.run(smoke=True, sections=["kernel"], out=tmp_path / "other.json")
    assert main(["bench", "tpu", "--smoke", "--sections", "nope", "--out", str(tmp_path / "x.json")]) == 2
    with pytest.raises(BadInput, match="needs a TPU backend"):
        tpu.run(out=tmp_path / "real.json")
    for budget in (0, -5.0, float("nan"), True, "60"):
        with pytest.raises(BadInput, match="budget must be a positive number of seconds"):
            tpu.run(smoke=True, budget_s=budget, out=tmp_path / "budget.json")
    assert not (tmp_path / "budget.json").exists()


def test_quantities_from_a_run_by_hand():
    section = {"section": "block", "geometry": "720p",
               "rows": [{"variant": "svg-ours", "rounds": 9}, {"variant": "dense-splash", "rounds": 4},
                        {"variant": "none", "rounds": 9}],
               "ratios": {"none/dense-splash": {"value": 0.2, "iqr": [0.1, 0.3]},
                          "dense-splash/svg-ours": {"value": 1.5, "iqr": [1.4, 1.6]}}}
    q = tpu.quantities({"kernels": [], "blocks": [section]})
    assert q["block_720p_attention_share_splash"]["value"] == pytest.approx(0.8)
    assert q["block_720p_attention_share_splash"]["interval"] == pytest.approx([0.7, 0.9])
    # a quantity rests on the fewer rounds of its two programs (docs/verdicts.md: under 5, not measured)
    assert q["block_720p_block_speedup_svg-ours"] == {"value": 1.5, "interval": [1.4, 1.6], "rounds": 4}
    assert "block_720p_attention_share_ours" not in q   # not timed: no quantity


def _check_smoke_run(data: dict, chips: int, sections=tpu.SECTIONS) -> None:
    """A smoke run file of ``chips`` host devices: every program of the slice checked and timed, its quantities."""
    assert data["all_ok"] and not data["errors"] and data["provenance"] == "measured-cpu-interpret"
    assert data["chips"] == chips and data["smoke"]
    assert data["programs"] == [p.name for p in tpu.programs(tpu.SMOKE, chips, sections)]
    rows = [r for s in data["kernels"] + data["blocks"] for r in s["rows"]]
    assert len(rows) == len(data["programs"]) and all(r["status"] == "ok" and r["median_s"] > 0 for r in rows), \
        [(r["variant"], r["reason"]) for r in rows if r["status"] != "ok"]
    assert all(r["check"]["ok"] for r in rows)
    assert {s["chips"] for s in data["blocks"]} == {chips}
    assert {"block_2x8x10_attention_share_splash", "moderate_2x8x10_block_speedup_svg-ours-kept0.2"} \
        <= set(data["quantities"])
    if "kernels" in sections:
        assert {"kernels_2x8x10_fast_path_speedup_svg", "kernels_2x8x10_ours_over_splash_dense"} <= set(data["quantities"])
    share = data["quantities"]["block_2x8x10_attention_share_splash"]
    assert 0 < share["value"] < 1 and np.isfinite(share["interval"]).all()


@pytest.mark.system
@pytest.mark.slow
def test_smoke_run_on_eight_host_devices(tmp_path):
    # v6e-8's path, every section: each block and moderate program on a (data 2, seq 4) mesh of eight host devices,
    # each kernel on the first of them, in a fresh process (the device count is fixed before jax starts); the run on
    # one host device is the README box's make tpu-bench TPU_ARGS="--smoke" (test_the_v6e_boxs_commands_run_...)
    import os
    import subprocess
    import sys
    out = tmp_path / "run8.json"
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
                                     "--xla_force_host_platform_device_count=8".strip())
    proc = subprocess.run([sys.executable, "-m", "svgtpu", "bench", "tpu", "--smoke", "--json", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    _check_smoke_run(json.loads(out.read_text()), 8)


def test_attention_exponent_by_hand():
    # self-attention = dense block - block without attention, per round: 1 s at 720p, 16 s at 1440p (L x 4): k = 2
    def section(g, none, dense):
        return {"section": "block", "geometry": g, "rows": [{"variant": "none", "times": none},
                                                             {"variant": "dense-splash", "times": dense}]}
    k = tpu.attention_exponent([section("1440p", [4.0, 4.0], [20.0, 20.0]), section("720p", [1.0, 1.0], [2.0, 2.0])],
                               "dense-splash")
    assert k["value"] == pytest.approx(2.0) and k["interval"] == pytest.approx([2.0, 2.0]) and k["rounds"] == 2
    assert tpu.attention_exponent([section("720p", [1.0], [2.0])], "dense-splash") is None   # one resolution
    assert tpu.attention_exponent([section("1440p", [4.0], [3.0]), section("720p", [1.0], [2.0])],
                                  "dense-splash") is None   # no time left for attention at 1440p


def test_a_failed_check_is_not_timed_and_a_run_cut_short_leaves_its_sections(tmp_path, monkeypatch):
    monkeypatch.setattr(tpu, "check", lambda p, sizes, device: {"ok": False, "max_rel_error": 1.0})

    seen = {}

    def killed(result, path):   # the VM taken back just before the run file is written
        seen.update(result)
        raise KeyboardInterrupt
    monkeypatch.setattr(tpu, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        tpu.run(smoke=True, out=tmp_path / "run.json")
    partial = json.loads((tmp_path / "run.partial.json").read_text())
    rows = [r for s in partial["kernels"] + partial["blocks"] for r in s["rows"]]
    assert partial["partial"] and len(rows) == len(tpu.programs(tpu.SMOKE))
    assert all(r["status"] == "not timed" and r["reason"] == "check failed or skipped" for r in rows)
    assert not (tmp_path / "run.json").exists()
    assert seen["all_ok"] is False and seen["quantities"] == {}


def test_checks_longer_than_a_groups_share_still_leave_its_programs_timed(tmp_path, monkeypatch):
    # each check takes 30 s of a clock the budget reads: the smoke kernels group's 13 checks (390 s) outlast the
    # share it had when its share was set before them (0.3 / 0.8 of 600 s = 225 s); its share is now of the time
    # left after them (0.375 x 210 s), for its compiles and rounds, so every program is timed
    import types

    import jax
    import jax.numpy as jnp

    from svgtpu.bench import gpu_timing
    clock = [0.0]

    def check(p, sizes, device):
        clock[0] += 30.0
        return {"ok": True, "max_rel_error": 0.0}
    monkeypatch.setattr(gpu_timing, "time", types.SimpleNamespace(monotonic=lambda: clock[0],
                                                                  perf_counter=gpu_timing.time.perf_counter))
    monkeypatch.setattr(tpu, "check", check)
    monkeypatch.setattr(tpu, "program", lambda p, devices: (lambda x: 2 * x,
                                                            (jax.ShapeDtypeStruct((8,), jnp.float32),)))
    result = tpu.run(smoke=True, sections=("kernels", "block"), out=tmp_path / "run.json")
    rows = [r for s in result["kernels"] + result["blocks"] for r in s["rows"]]
    assert clock[0] > 0.3 / 0.8 * tpu.SMOKE.budget_s and not result["errors"]
    assert len(rows) == len(tpu.programs(tpu.SMOKE, sections=("kernels", "block")))
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows if r["status"] != "ok"]


def _cheap_programs(monkeypatch):
    """Every program a doubling of 8 numbers and every check passed: the run's bookkeeping without its kernels."""
    import jax
    import jax.numpy as jnp
    monkeypatch.setattr(tpu, "check", lambda p, sizes, device: {"ok": True, "max_rel_error": 0.0})
    monkeypatch.setattr(tpu, "program", lambda p, devices: (lambda x: 2 * x,
                                                            (jax.ShapeDtypeStruct((8,), jnp.float32),)))


def test_resume_fills_the_sections_a_cut_run_lacks_into_a_new_file(tmp_path, monkeypatch):
    _cheap_programs(monkeypatch)
    monkeypatch.setattr(tpu, "runs_folder", lambda smoke: tmp_path)
    cut = tpu.run(smoke=True, sections=("kernels",))   # a run the budget cut after its kernels
    first = Path(cut["written"])
    before = first.read_bytes()
    # its default name is taken: the second run of the day at this commit gets the next one, never the first's
    assert tpu.default_out(True) == first.with_name(first.stem + "-2.json")
    resumed = tpu.run(smoke=True, resume=first)
    second = Path(resumed["written"])
    assert second != first and first.read_bytes() == before   # the cut run is left as it was
    assert resumed["resumed_from"]["file"] == first.name and resumed["resumed_from"]["groups"] == ["kernels 2x8x10"]
    assert resumed["kernels"] == cut["kernels"]   # its finished sections carried over as they were, not rerun
    assert [s["section"] for s in resumed["blocks"]] == ["block", "moderate"] and resumed["all_ok"]
    assert set(cut["quantities"]) < set(resumed["quantities"])
    # a run cut inside a section: the section with anything not timed runs again whole
    partial = json.loads(second.read_text())
    partial["blocks"][0]["rows"][0] |= {"status": "not timed", "reason": "time budget"}
    (tmp_path / "cut.partial.json").write_text(json.dumps(partial))
    again = tpu.run(smoke=True, resume=tmp_path / "cut.partial.json", out=tmp_path / "third.json")
    assert again["resumed_from"]["groups"] == ["kernels 2x8x10", "moderate 2x8x10"]
    with pytest.raises(BadInput, match="a full run; resume it without --smoke"):
        tpu.run(smoke=True, resume=_full(tmp_path, partial), out=tmp_path / "x.json")
    with pytest.raises(BadInput, match="no such run file"):
        tpu.run(smoke=True, resume=tmp_path / "nope.json", out=tmp_path / "y.json")


def _full(folder, run):
    (folder / "full.json").write_text(json.dumps(run | {"smoke": False}))
    return folder / "full.json"


def test_readmes_recovery_command_works_as_written(tmp_path, monkeypatch, capsys):
    # README's line for a run cut short, its TPU_ARGS passed to bench tpu as make tpu-bench passes them (with
    # --smoke, here); the cut run is the newest file of the default folder
    import re
    import shlex

    from svgtpu.facts.paths import REPO_ROOT
    found = re.findall(r'make tpu-bench TPU_ARGS="([^"]*--resume[^"]*)"', (REPO_ROOT / "README.md").read_text())
    assert found, "README says how to finish a cut run"
    _cheap_programs(monkeypatch)
    monkeypatch.setattr(tpu, "runs_folder", lambda smoke: tmp_path)
    cut = tpu.run(smoke=True, sections=("kernels", "block"))
    for args in sorted(set(found)):
        assert main(["bench", "tpu", "--smoke", "--json", *shlex.split(args)]) == 0, args
        result = json.loads(capsys.readouterr().out)
        assert result["resumed_from"]["file"] == Path(cut["written"]).name and result["all_ok"]
        assert {s["section"] for s in result["kernels"] + result["blocks"]} == set(tpu.SECTIONS)


def _v6e_box() -> list[str]:
    """The commands of README's "Run on a v6e" box, in order (comments and blank lines left out)."""
    import re

    from svgtpu.facts.paths import REPO_ROOT
    section = (REPO_ROOT / "README.md").read_text().split("## Run on a v6e", 1)[1]
    box = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("  #")[0].strip() for line in box.splitlines() if line.strip() and not line.startswith("#")]


def test_the_v6e_box_is_one_route_in_order():
    box = _v6e_box()
    order = ["gcloud compute tpus tpu-vm create", "make install PYTHON=python3.11", ".venv/bin/svgtpu info",
             "make tpu-bench", ".venv/bin/svgtpu predict --against", ".venv/bin/svgtpu paper",
             "gcloud compute tpus tpu-vm scp", "git add", "gcloud compute tpus tpu-vm delete"]
    at = [next(i for i, line in enumerate(box) if line.startswith(step)) for step in order]
    assert at == sorted(at), box
    create = next(line for line in box if line.startswith("gcloud compute tpus tpu-vm create"))
    assert "--accelerator-type=v6e-8" in create and "--version=v2-alpha-tpuv6e" in create
    assert sum("pip install" in line for line in box) == 0   # one install route: make install


def test_the_python_floor_is_the_pinned_packages_own():
    # jax, jaxlib, libtpu and tokamax as requirements.txt pins them each need Python 3.11 (their installed
    # metadata's Requires-Python); pyproject.toml's requires-python and README's install line say the same floor
    # ("Python 3.10+" was there, where none of them installs)
    import importlib.metadata
    import re
    import tomllib

    from packaging.specifiers import SpecifierSet

    from svgtpu.facts.paths import REPO_ROOT
    ours = SpecifierSet(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    pins = dict(re.findall(r"^(jax|jaxlib|libtpu|tokamax)==(\S+)", (REPO_ROOT / "requirements.txt").read_text(), re.M))
    assert set(pins) == {"jax", "jaxlib", "libtpu", "tokamax"}
    needs = {name: SpecifierSet(importlib.metadata.metadata(name)["Requires-Python"]) for name in pins
             if importlib.metadata.version(name) == pins[name]}
    assert needs, "the pinned packages are installed here"
    for minor in range(8, 15):
        version = f"3.{minor}"
        assert (version in ours) == all(version in need for need in needs.values()), (version, ours, needs)
    floor = min(minor for minor in range(8, 15) if f"3.{minor}" in ours)
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"Python 3.{floor}+" in readme and "3.10+" not in readme and f"python3.{floor}" in readme


#: The box's lines a CPU cannot run (the cloud, the network, the shell it logs into) and the git steps the test's own
#: clone stands for.
_NOT_ON_A_CPU = ("export ", "gcloud ", "git clone", "exit", "git add")


@pytest.mark.system
@pytest.mark.slow
def test_the_v6e_boxs_commands_run_on_a_cpu_with_smoke(tmp_path):
    # every CPU-runnable line of the box, in order, in a clone with a fresh venv (its packages those this venv holds,
    # through a .pth, so make install checks the pins instead of downloading them): make tpu-bench with --smoke (the
    # smoke run on one host device, every section: each variant checked and timed), predict --against refusing the
    # smoke run file, paper leaving the results as they were (a smoke run never counts)
    import os
    import site
    import subprocess
    import sys

    from svgtpu.facts.paths import REPO_ROOT
    clone = tmp_path / "svgtpu"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
    packages = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
    venv_site = next((clone / ".venv" / "lib").glob("python3*/site-packages"))
    (venv_site / "svgtpu-test-packages.pth").write_text(packages + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "SVGTPU_ROOT"))}
    env |= {"JUPYTER_DATA_DIR": str(tmp_path / "jupyter"), "HOME": str(tmp_path)}   # the kernel spec stays here
    results = (clone / "figures" / "results.json").read_bytes()
    ran = []
    for line in _v6e_box():
        if line.startswith(_NOT_ON_A_CPU):
            continue
        command = line.replace("PYTHON=python3.11", f"PYTHON={sys.executable}")
        if command.startswith("make tpu-bench"):
            command += ' TPU_ARGS="--smoke"'
        if "predict --against" in command:   # the smoke run's file: refused as evidence, one line, exit 2
            command = command.replace("figures/tpu-runs/*.json", "build/tpu-runs/*.json")
        proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        ran.append(line)
        if "predict --against" in command:
            assert proc.returncode == 2 and "a smoke run" in proc.stderr and len(proc.stderr.splitlines()) == 1, \
                proc.stderr
            continue
        assert proc.returncode == 0, (command, proc.stdout[-3000:], proc.stderr[-3000:])
        if command.startswith(".venv/bin/svgtpu info"):
            assert "cpu" in proc.stdout
    assert [line.split()[0] for line in ran] == ["python3", "make", ".venv/bin/svgtpu", "make", ".venv/bin/svgtpu",
                                                 ".venv/bin/svgtpu", ".venv/bin/svgtpu"]
    assert (clone / "figures" / "results.json").read_bytes() == results   # the smoke run is no evidence
    [run] = (clone / "build" / "tpu-runs").glob("*.json")   # saved after each section, the .partial.json removed
    assert run.name.endswith("-smoke.json")
    _check_smoke_run(json.loads(run.read_text()), 1)
    # README's line for a run cut short, as written (with --smoke, as the box's make tpu-bench above): the newest run
    # file finished into a new one (this one is whole, so nothing runs again; test_readmes_recovery_command_works_as_
    # written cuts one), the first left as it was
    import re
    found = set(re.findall(r'make tpu-bench TPU_ARGS="([^"]*--resume[^"]*)"', (clone / "README.md").read_text()))
    assert found
    before = run.read_bytes()
    for args in sorted(found):
        proc = subprocess.run(["bash", "-c", f'make tpu-bench TPU_ARGS="--smoke {args}"'], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
        resumed = json.loads((clone / "build" / "tpu-bench.json").read_text())
        assert resumed["resumed_from"]["file"] == run.name and resumed["all_ok"] and run.read_bytes() == before
        written = Path(resumed["written"])
        assert written.parent == run.parent and written != run and written.name.endswith(".json")
