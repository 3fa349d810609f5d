"""The prepared TPU run (``svgtpu bench tpu``): preflight compiles what it runs, its float64 check catches a
wrong kernel, it refuses an existing run file before any work, and its smoke run end to end on this CPU."""

import json

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
    section = {"section": "block", "geometry": "720p", "rows": [{"variant": "svg-ours"}],
               "ratios": {"none/dense-splash": {"value": 0.2, "iqr": [0.1, 0.3]},
                          "dense-splash/svg-ours": {"value": 1.5, "iqr": [1.4, 1.6]}}}
    q = tpu.quantities({"kernels": [], "blocks": [section]})
    assert q["block_720p_attention_share_splash"]["value"] == pytest.approx(0.8)
    assert q["block_720p_attention_share_splash"]["interval"] == pytest.approx([0.7, 0.9])
    assert q["block_720p_block_speedup_svg-ours"] == {"value": 1.5, "interval": [1.4, 1.6]}
    assert "block_720p_attention_share_ours" not in q   # not timed: no quantity


@pytest.mark.system
@pytest.mark.slow
def test_smoke_run_writes_a_run_file(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["bench", "tpu", "--smoke", "--json", "--out", str(out)]) == 0
    assert not (tmp_path / "run.partial.json").exists()   # saved after each section, removed at the end
    result = json.loads(capsys.readouterr().out)
    assert result["all_ok"] and not result["errors"] and result["provenance"] == "measured-cpu-interpret"
    assert result["programs"] == [p.name for p in tpu.programs(tpu.SMOKE)]
    data = json.loads(out.read_text())
    rows = [r for s in data["kernels"] + data["blocks"] for r in s["rows"]]
    assert len(rows) == len(data["programs"]) and all(r["status"] == "ok" and r["median_s"] > 0 for r in rows)
    assert all(r["check"]["ok"] for r in rows)
    assert {"kernels_2x8x10_fast_path_speedup_svg", "kernels_2x8x10_ours_over_splash_dense",
            "block_2x8x10_attention_share_splash", "moderate_2x8x10_block_speedup_svg-ours-kept0.2"} \
        <= set(data["quantities"])
    share = data["quantities"]["block_2x8x10_attention_share_splash"]
    assert 0 < share["value"] < 1 and np.isfinite(share["interval"]).all()
    with pytest.raises(BadInput):
        tpu.run(smoke=True, out=out)


def test_attention_exponent_by_hand():
    # self-attention = dense block - block without attention, per round: 1 s at 720p, 16 s at 1440p (L x 4): k = 2
    def section(g, none, dense):
        return {"section": "block", "geometry": g, "rows": [{"variant": "none", "times": none},
                                                             {"variant": "dense-splash", "times": dense}]}
    k = tpu.attention_exponent([section("1440p", [4.0, 4.0], [20.0, 20.0]), section("720p", [1.0, 1.0], [2.0, 2.0])],
                               "dense-splash")
    assert k["value"] == pytest.approx(2.0) and k["interval"] == pytest.approx([2.0, 2.0])
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
