"""The prepared GPU run (``svgtpu bench gpu``): its smoke run end to end on this CPU, the results file it
writes, the end-to-end extrapolation worked by hand, and its refusals."""

import dataclasses
import json

import numpy as np
import pytest

from svgtpu.bench import gpu as gpu_bench
from svgtpu.bench import gpu_peers, gpu_results
from svgtpu.bench.gpu_timing import Budget, reason
from svgtpu.cli import main
from svgtpu.errors import BadInput
from svgtpu.facts.results import load_results
from svgtpu.geometry import Tile


@pytest.mark.system
@pytest.mark.slow
def test_smoke_run_writes_a_results_file_the_paper_reads(tmp_path, capsys):
    out = tmp_path / "results-gpu.json"
    assert main(["bench", "gpu", "--smoke", "--json", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["smoke"] and result["provenance"] == "measured-cpu-interpret" and not result["errors"]
    checks = {r["variant"]: r for r in result["check"]["rows"]}
    for name in ("xla-dense", "jax-triton-flash-dense", "ours-dense", "ours-aligned-fast", "ours-per-head-fast",
                 "ours-mgpu-svg-fast-wg1"):   # the Mosaic GPU body in JAX's GPU interpreter
        assert checks[name]["ok"] is True and checks[name]["max_rel_error"] < 2e-2, checks[name]
    assert checks["cudnn-dense"]["ok"] is None and not result["check"]["all_ok"]  # no cuDNN here: not all ok
    rows = {r["variant"]: r for r in result["attention"][0]["rows"]}
    for name in ("xla-dense", "ours-dense", "ours-aligned-fast", "ours-mgpu-svg-fast-wg1"):
        assert rows[name]["status"] == "ok" and rows[name]["median_s"] > 0 and rows[name]["tflops"] > 0, rows[name]
    # the baseline reports no ratio to itself worth testing; the aligned kernel's ratio and its overhead over ideal do
    aligned, dense = rows["ours-aligned-fast"], rows["ours-dense"]
    assert aligned["ratio_to_ours_dense"] > 0 and aligned["overhead_vs_ideal"] == pytest.approx(
        aligned["ratio_to_ours_dense"] / aligned["density"])
    assert 0 < aligned["density"] <= dense["density"] == 1
    assert rows["cudnn-dense"]["status"] == "skipped"  # no GPU here: its check did not run, so it is not timed
    assert rows["cudnn-dense"]["reason"].startswith("cuDNN runs on an NVIDIA GPU only")   # why, in words
    assert rows["ours-svg-fast"]["reason"] == "not among this run's variants (--variants)"
    for row in rows.values():   # every skip says why in words (a bare assert in JAX once showed "AssertionError: ")
        words = row["reason"].split(":", 1)[-1].split() if row["status"] == "skipped" else ["ok", "ran"]
        assert len(words) >= 2, f"{row['variant']}: skip reason {row['reason']!r}"
    block = {r["attention"]: r for r in result["block"][0]["rows"]}
    assert block["dense-ours"]["status"] == "ok" and block["dense-ours"]["attention_share"] > 0  # noisy here
    assert result["end_to_end"][0]["dense_kernel"] == "ours"

    data = load_results(out)
    assert data["claims"]["C4"]["gpu_attention_2x8x10"]["provenance"] == "measured-cpu-interpret"
    assert "gpu_attention_share_dense-ours_2x8x10" in data["claims"]["C2"]
    assert gpu_bench.gpu_rows(out)["attention"] == result["attention"]
    assert gpu_bench.gpu_rows(tmp_path / "absent.json") is None


@pytest.mark.system
def test_a_small_smoke_of_the_whole_run_through_the_cli(tmp_path, capsys):
    """Every section of the prepared run on this CPU (the check in its own process, attention with its spot check,
    the block, the run file), one variant: what ``make test`` can afford (the whole smoke is ``make test-system``'s)."""
    out = tmp_path / "run.json"
    assert main(["bench", "gpu", "--smoke", "--variants", "ours-dense", "--json", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert not result["errors"] and result["variants"] == ["ours-dense"]
    assert result["check"]["isolated"] and [(r["variant"], r["ok"]) for r in result["check"]["rows"]] == [
        ("ours-dense", True)]
    rows = {r["variant"]: r for r in result["attention"][0]["rows"]}
    assert rows["ours-dense"]["status"] == "ok" and rows["ours-dense"]["spot_ok"] is True
    assert rows["ours-dense"]["spot_max_rel_error"] < 2e-2
    assert set(result["attention"][0]["headline"]) == set(gpu_bench.HEADLINE)   # all None here: no cuDNN
    assert result["launch"]["jax_mosaic_flash"]["block_q"] == gpu_bench.JAX_MOSAIC_TUNING["block_q"]
    assert set(result["launch"]["mosaic_gpu_ours"]) <= {gpu_bench.mgpu_name(*v) for v in gpu_bench.OURS_MGPU}
    block = {r["attention"]: r for r in result["block"][0]["rows"]}
    assert block["dense-ours"]["status"] == "ok"
    for section in (result["attention"][0], result["block"][0]):   # no nvidia-smi here: the log says so
        assert set(section["clocks"]) == {"unavailable"} or section["clocks"]["source"].startswith("nvidia-smi")
    assert load_results(out)["run"]["attention"] == result["attention"]


def test_a_bare_assert_is_reported_in_words(tmp_path, monkeypatch):
    """A library's bare ``assert`` (JAX's Mosaic GPU attention off a GPU) has no message: the reason names the
    check and where it failed.  The library is a module of its own: pytest rewrites asserts only in tests."""
    (tmp_path / "some_library.py").write_text("def check(config):\n    assert config is not None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import some_library
    with pytest.raises(AssertionError) as raised:
        some_library.check(None)
    assert str(raised.value) == ""
    assert reason(raised.value) == ("AssertionError without a message: `assert config is not None` failed in check "
                                    f"({'/'.join(tmp_path.parts[-2:])}/some_library.py:2)")
    assert reason(MemoryError("out of memory\ndetails")) == "MemoryError: out of memory"


def test_end_to_end_extrapolation_worked_by_hand():
    block = {"geometry": "1440p", "modeled": {"dense_steps": 10, "dense_layers": 1},
             "rows": [{"attention": "dense-cudnn", "status": "ok", "block_s": 2.0},
                      {"attention": "svg-aligned-ours", "status": "ok", "block_s": 1.0}]}
    e2e = gpu_bench.extrapolate(block, gpu_bench.FULL)
    # dense: 2 passes x 50 steps x 40 blocks x 2 s; SVG: 10 dense steps, then 1 dense + 39 sparse blocks
    assert e2e["dense_s"] == 8000.0
    assert e2e["svg_s"] == 2 * (10 * 40 * 2.0 + 40 * (1 * 2.0 + 39 * 1.0)) == 4880.0
    assert e2e["speedup"] == pytest.approx(8000 / 4880)
    block["rows"] = [{"attention": "dense-cudnn", "status": "skipped", "reason": "OOM"}]
    assert gpu_bench.extrapolate(block, gpu_bench.FULL) is None


def test_model_error_on_the_dense_share_uses_the_first_dense_attention_that_ran():
    rows = [{"attention": "dense-cudnn", "status": "skipped", "reason": "OOM"},
            {"attention": "dense-ours", "status": "ok", "attention_share": 0.8},
            {"attention": "svg-aligned-ours", "status": "ok", "attention_share": 0.5}]
    compared = gpu_bench.compare_with_model(rows, {"attention_share_dense": 0.9})
    assert compared["measured_with"] == "dense-ours"
    assert compared["share_modeled_over_measured"] == pytest.approx(0.9 / 0.8)
    assert gpu_bench.compare_with_model(rows, {"unavailable": "ImportError"}) == {"unavailable": "ImportError"}


def test_attention_exponent_is_the_log_log_slope():
    blocks = [{"L": L, "rows": [{"attention": "dense-cudnn", "status": "ok", "attention_s": 3e-9 * L ** 2},
                                {"attention": "svg-aligned-ours", "status": "ok" if L > 1000 else "skipped",
                                 "attention_s": 1e-6 * L}]}
              for L in (1000, 4000, 16000)]
    exponents = gpu_bench.attention_exponents(blocks)
    assert exponents["dense-cudnn"] == pytest.approx(2.0) and exponents["svg-aligned-ours"] == pytest.approx(1.0)
    assert gpu_bench.attention_exponents(blocks[:1]) == {}


def test_refusals_are_one_line_with_exit_status_2(capsys, tmp_path, monkeypatch):
    assert main(["bench", "gpu"]) == 2  # the full run needs a GPU
    assert "needs a GPU backend" in capsys.readouterr().err
    assert main(["bench", "gpu", "--smoke", "--budget", "-5"]) == 2
    assert "budget must be a positive number of seconds" in capsys.readouterr().err

    def no_work(**kwargs):
        raise AssertionError("the run started before its arguments were checked")
    monkeypatch.setattr(gpu_bench, "run", no_work)
    earlier = tmp_path / "2026-12-04-314194b.json"
    earlier.write_text("{}")
    for argv, words in ((["--out", str(earlier)], "already exists"),
                        (["--out", str(tmp_path / "absent" / "run.json")], "does not exist"),
                        (["--sections", "attention,tpu"], "sections must be a comma-separated list of check, attention"),
                        (["--resolution", "4k"], "resolution must be a comma-separated list of 2x8x10"),
                        (["--sections", "block", "--resolution", " , "], "resolution must be")):
        assert main(["bench", "gpu", "--smoke", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, (argv, err)
    assert earlier.read_text() == "{}"


# -- checked before timed ------------------------------------------------------------------------

def _planted_variants(calls: list):
    """Variants with known outputs on the check's inputs: one right (float64 dense attention), one wrong (zeros),
    one unavailable; each call is logged in ``calls``."""
    from svgtpu.kernels.reference import float64_attention

    def planted(q, k, v, g, sizes, interpret, per_head=False):
        def right():
            calls.append(("right", q.shape[1]))
            return float64_attention(q, k, v).astype(np.float32)

        def wrong():
            calls.append(("wrong", q.shape[1]))
            return np.zeros(q.shape, np.float32)
        info = {"density": 1.0, "partial_share": 0.0, "computed_pairs": q.shape[0] * q.shape[1] ** 2}
        return {"right": gpu_bench.Variant(right, info), "wrong": gpu_bench.Variant(wrong, info),
                "unavailable": gpu_bench.Variant(None, info, reason="torch is not importable here")}
    return planted


def test_only_variants_whose_float64_check_ran_and_passed_are_timed(monkeypatch):
    calls = []
    monkeypatch.setattr(gpu_bench, "attention_variants", _planted_variants(calls))
    sizes = dataclasses.replace(gpu_bench.SMOKE, variants=None, max_rounds=1)
    check = gpu_bench.check_variants("2x8x10", 2, sizes, Budget(60), interpret=True)
    ok = {r["variant"]: r["ok"] for r in check["rows"]}
    assert ok == {"right": True, "wrong": False, "unavailable": None} and not check["all_ok"]
    calls.clear()
    section = gpu_bench.bench_attention("2x8x10", 2, sizes, Budget(60), True, check)
    rows = {r["variant"]: r for r in section["rows"]}
    assert rows["right"]["status"] == "ok" and {name for name, _ in calls} == {"right"}
    assert rows["wrong"]["reason"].startswith("not timed: its float64 check failed")
    assert rows["unavailable"]["reason"] == "torch is not importable here"
    # a variant the check never saw is not timed either
    assert gpu_bench.check_verdict({"rows": []}, "right") == "not timed: no float64 check of it ran in this run"


def test_a_check_that_did_not_run_for_time_is_not_ok_and_its_variant_is_not_timed(monkeypatch):
    calls = []
    monkeypatch.setattr(gpu_bench, "attention_variants", _planted_variants(calls))
    sizes = dataclasses.replace(gpu_bench.SMOKE, variants=None, max_rounds=1)
    spent = Budget(60)
    spent.section(0.0)
    check = gpu_bench.check_variants("2x8x10", 2, sizes, spent, interpret=True)
    assert [r["ok"] for r in check["rows"]] == [None, None, None] and not check["all_ok"]  # 2026-12-04 said all_ok
    assert not calls
    section = gpu_bench.bench_attention("2x8x10", 2, sizes, Budget(60), True, check)
    assert all(r["status"] == "skipped" for r in section["rows"]) and not calls
    assert "did not run (time budget" in {r["variant"]: r for r in section["rows"]}["right"]["reason"]
    block = {"rows": [{"variant": "ours-dense", "ok": True}, {"variant": "cudnn-dense", "ok": None,
                                                               "reason": "time budget: no time left to check it"}]}
    assert gpu_bench.check_verdict(block, "ours-dense") is None
    assert "did not run" in gpu_bench.check_verdict(block, gpu_bench.BLOCK_CHECKS["dense-cudnn"])


def test_checks_longer_than_a_sections_share_still_leave_every_variant_timed(monkeypatch):
    # each check takes 80 s of a clock the budget reads: three variants' checks (240 s) outlast half a 300 s
    # budget, the share the check had as a section with a weight (1.0 of 2.0), which left the third
    # unchecked and untimed; the check now runs until the run's deadline and the attention section gets the
    # 60 s left, so every variant is checked and timed
    import types

    from svgtpu.bench import gpu_timing
    clock = [0.0]

    def costly_error(out, reference):
        clock[0] += 80.0
        return 0.0
    monkeypatch.setattr(gpu_timing, "time", types.SimpleNamespace(monotonic=lambda: clock[0],
                                                                  perf_counter=gpu_timing.time.perf_counter))
    monkeypatch.setattr(gpu_bench, "relative_error", costly_error)
    monkeypatch.setattr(gpu_bench, "spot_checks", lambda variants, *_: {n: {} for n in variants})
    info = {"density": 1.0, "partial_share": 0.0, "computed_pairs": 1}
    monkeypatch.setattr(gpu_bench, "attention_variants", lambda q, *_, **__: {
        name: gpu_bench.Variant(lambda q=q: np.asarray(q, np.float32), info) for name in ("a", "b", "c")})
    sizes = dataclasses.replace(gpu_bench.select(gpu_bench.SMOKE, ["attention"]), variants=None, max_rounds=1,
                                isolate=False, budget_s=300.0)
    result = {"attention": [], "block": [], "end_to_end": [], "errors": []}
    gpu_bench.sections_in_turn(result, sizes, Budget(sizes.budget_s), interpret=True)
    assert clock[0] == 3 * 80.0 and not result["errors"]
    assert result["check"]["all_ok"] and len(result["check"]["rows"]) == 3
    rows = result["attention"][0]["rows"]
    assert [r["status"] for r in rows] == ["ok"] * 3, [r["reason"] for r in rows]


def test_sections_and_resolutions_keep_the_check_first():
    sizes = gpu_bench.select(gpu_bench.FULL, ["attention"], ["720p"])
    assert [s[:2] for s in sizes.sections] == [("check", "11x16x20"), ("attention", "720p")]
    assert gpu_bench.checked_names(sizes) == set(gpu_bench.DEFAULT_VARIANTS)  # every variant the section may time
    assert gpu_bench.checked_names(gpu_bench.select(gpu_bench.FULL, ["attention"], variants=["all"])) is None
    sizes = gpu_bench.select(gpu_bench.FULL, ["block"], ["1440p"])
    assert [s[:2] for s in sizes.sections] == [("check", "11x16x20"), ("block", "1440p")]
    assert gpu_bench.checked_names(sizes) == set(gpu_bench.BLOCK_CHECKS.values())
    with pytest.raises(BadInput, match="no attention section at resolution 480p"):
        gpu_bench.select(gpu_bench.FULL, ["attention"], ["480p"])


# -- run files -------------------------------------------------------------------------------------

def test_run_files_are_dated_carry_their_commit_and_never_overwrite(tmp_path):
    first = gpu_results.run_path("2026-12-04T19:05:00+00:00", "abc1234", tmp_path)
    assert first.name == "2026-12-04-abc1234.json"
    first.write_text("{}")
    second = gpu_results.run_path("2026-12-04T19:30:00+00:00", "abc1234", tmp_path)
    assert second.name == "2026-12-04-abc1234-2.json"
    with pytest.raises(BadInput, match="already exists"):
        gpu_results.write({"profile": "smoke"}, first)
    assert first.read_text() == "{}"
    commit = gpu_results.source_commit()
    assert len(commit["commit"]) >= 7 and commit["dirty"] in (True, False)  # this checkout has git


def _package_run(name, date, sections):
    rows = lambda medians: [{"variant": f"ours-dense-{s}", "status": "ok", "median_s": t}  # noqa: E731
                            for s, t in medians.items()] + [{"variant": "ours-dense-64x64-w4-s2", "status": "skipped"}]
    return {"file": name, "kind": "package", "date": date, "data": {"run": {"attention": [{"rows": rows(m)}
                                                                                         for m in sections]}}}


def test_triton_launch_is_chosen_from_the_newest_recorded_sweep():
    assert gpu_results.triton_launch([])["settings"] is None
    old = _package_run("old.json", "2026-12-04", [{"128x64-w8-s2": 1.0, "128x128-w8-s3": 2.0}])
    new = _package_run("new.json", "2026-12-05", [{"128x64-w8-s2": 0.33, "128x128-w8-s3": 0.30, "128x128-w8-s2": 0.32},
                                                  {"128x64-w8-s2": 1.00, "128x128-w8-s3": 1.01}])  # 1440p: nearly tied
    peer = _package_run("peer.json", "2026-12-06", [{"64x64-w4-s2": 0.1}]) | {"kind": "peer"}
    chosen = gpu_results.triton_launch([new, old, peer])
    assert chosen["settings"] == {"gpu_block_q": 128, "gpu_block_kv": 128, "num_warps": 8, "num_stages": 3}
    assert chosen["source"].endswith("new.json") and chosen["swept"] == 2  # 128x128-w8-s2 not swept at 1440p
    assert chosen["over_fastest"] == pytest.approx((1.0 + 1.01) / 2)
    assert gpu_results.triton_launch([old])["settings"]["gpu_block_kv"] == 64


# -- peers -----------------------------------------------------------------------------------------

def test_flex_block_lists_are_our_tiles_by_brute_force():
    """FlexAttention's block mask from our classification: per q tile, its partial kv tiles (some but not all of
    the tile's in-L pairs allowed, or a padded key) and its full ones, read off the mask's array."""
    from svgtpu.masks.core import BandSinkMask, DenseMask, align
    L, block = 700, 128   # not a tile multiple
    band = BandSinkMask(L, 90, 150)
    for mask in (band, align(band, Tile(block, block), "snap"), DenseMask(L)):
        allowed = mask.to_array()
        n = -(-L // block)
        padded = np.zeros((n * block, n * block), bool)
        padded[:L, :L] = allowed
        kv_num, kv_idx, full_num, full_idx = gpu_peers.flex_block_lists(mask, Tile(block, block))
        for i in range(n):
            rows = padded[i * block:min((i + 1) * block, L)]
            tiles = [rows[:, j * block:(j + 1) * block] for j in range(n)]
            full = [j for j, t in enumerate(tiles) if t.all()]
            partial = [j for j, t in enumerate(tiles) if t.any() and not t.all()]
            assert list(full_idx[i, :full_num[i]]) == full and list(kv_idx[i, :kv_num[i]]) == partial, (mask, i)
        assert kv_idx.dtype == np.int32 and kv_idx.shape == (n, n)


def test_peers_without_torch_say_why_in_words(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_torch)
    peers = gpu_peers.torch_peers(None, None, None, {}, Tile(128, 128))
    assert set(peers) == set(gpu_peers.PEERS)
    assert all(call is None and why.startswith("torch is not importable here") for call, why in peers.values())


def test_cost_model_prediction_for_the_block_is_available():
    """The H200 run puts the cost model's prediction next to each measured block: the API it calls must work."""
    from svgtpu.geometry import get_geometry
    modeled = gpu_bench.modeled_block(get_geometry("480p"), gpu_bench.FULL)
    assert "unavailable" not in modeled, modeled
    assert 0 < modeled["attention_share_dense"] < 1 and modeled["provenance"] == "modeled-h200"
    assert modeled["dit_speedup_svg_aligned"] > 1 and modeled["dense_steps"] >= 0


def test_the_cost_models_refusal_is_recorded_and_its_bugs_raise(monkeypatch):
    """The prediction next to the measured block: a setting the cost model refuses (BadInput) is recorded with
    its reason; a bug in the cost model is never swallowed."""
    from svgtpu import costmodel
    from svgtpu.geometry import get_geometry

    from svgtpu.errors import BadInput

    geometry = get_geometry(gpu_bench.SMOKE.sections[-1][1])
    assert "unavailable" not in gpu_bench.modeled_block(geometry, gpu_bench.SMOKE)  # the smoke block's own config

    def refuse(*args, **kwargs):
        raise BadInput("chips must be one of 1, 2, 4, 8 (a planted refusal)")
    monkeypatch.setattr(costmodel, "calibrated_setup", refuse)
    assert "a planted refusal" in gpu_bench.modeled_block(geometry, gpu_bench.SMOKE)["unavailable"]

    def bug(*args, **kwargs):
        raise KeyError("a bug")
    monkeypatch.setattr(costmodel, "calibrated_setup", bug)
    with pytest.raises(KeyError):
        gpu_bench.modeled_block(geometry, gpu_bench.SMOKE)


def test_a_run_written_beside_the_committed_runs_is_listed_in_their_index(tmp_path):
    (tmp_path / "index.json").write_text(json.dumps({"about": "runs", "runs": []}))
    result = {"profile": "h200", "provenance": "measured-gpu-h200", "device": "NVIDIA H200", "date": "2026-12-05T10:00:00",
              "commit": "abc1234", "jax": "0.11.2", "backend": "gpu", "attention": [], "block": [], "end_to_end": [],
              "command": "svgtpu bench gpu --sections attention"}
    path = gpu_results.write(result, gpu_results.run_path(result["date"], result["commit"], tmp_path))
    runs = gpu_results.committed_runs(tmp_path)   # checks the listed sha256 against the file
    assert [(r["file"], r["kind"], r["commit"]) for r in runs] == [(path.name, "package", "abc1234")]
    assert runs[0]["data"]["run"]["command"] == "svgtpu bench gpu --sections attention"


def test_the_check_takes_the_baseline_and_our_kernels_before_the_peers_and_the_extra_launches():
    names = ["ours-dense-128x128-w8-s3", "flex-svg", "xla-dense", "ours-mgpu-svg-fast", "ours-svg-fast",
             "cudnn-dense", "ours-dense", "jax-triton-flash-dense"]
    assert sorted(names, key=gpu_bench.check_priority) == [
        "cudnn-dense", "ours-dense", "ours-svg-fast", "ours-mgpu-svg-fast", "flex-svg", "jax-triton-flash-dense",
        "xla-dense", "ours-dense-128x128-w8-s3"]


HANGING_RUN = """
import dataclasses, json, sys, time
from svgtpu.bench import gpu as gpu_bench

def planted(q, k, v, g, sizes, interpret, per_head=False):
    info = {"density": 1.0, "partial_share": 0.0, "computed_pairs": 1}
    return {"ours-dense": gpu_bench.Variant(lambda: time.sleep(600), info)}   # a kernel that never returns
gpu_bench.attention_variants = planted
saved = lambda result: open(sys.argv[1], "w").write(json.dumps(result, default=str))
gpu_bench.run(smoke=True, sections=["attention"], watchdog_s=3, save=saved,
              sizes=dataclasses.replace(gpu_bench.SMOKE, isolate=False))
"""


@pytest.mark.slow
def test_a_hung_kernel_is_saved_as_far_as_the_run_got_and_the_process_ends(tmp_path):
    """The watchdog: a variant that never returns (a barrier that never completes on the device) would hold the call
    to the machine's limit and lose every number; the run is saved with the step it hung at, exit status 3."""
    import subprocess
    import sys
    out = tmp_path / "partial.json"
    done = subprocess.run([sys.executable, "-c", HANGING_RUN, str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == gpu_bench.Watchdog.EXIT_STATUS, done.stderr[-2000:]
    partial = json.loads(out.read_text())
    assert partial["unfinished"].startswith("watchdog: still at 'check ours-dense' 3 s after the start")
    assert partial["attention"] == [] and "check" not in partial   # the check section had not finished


def test_a_variant_that_cannot_run_on_this_backend_says_why_in_words():
    """cuDNN off a GPU: skipped before it runs, in words, not JAX's bare `assert cuda_versions is not None`."""
    import jax

    from svgtpu.bench import gpu
    from svgtpu.geometry import get_geometry
    if jax.default_backend() == "gpu":
        pytest.skip("on a GPU cuDNN runs: there is no reason to give")
    g = get_geometry("2x8x10")
    q = k = v = jax.numpy.zeros((2, g.L, 128), jax.numpy.bfloat16)
    masks = gpu.svg_masks(g, gpu.SMOKE)
    cudnn = gpu.peer_variants(q, k, v, g, gpu.SMOKE, True, masks)["cudnn-dense"]
    assert cudnn.call is None and cudnn.reason == f"cuDNN runs on an NVIDIA GPU only; this backend is {jax.default_backend()}"


# -- a five-minute slot ---------------------------------------------------------------------------

def test_the_default_run_ends_within_five_minutes_by_construction():
    """``make gpu-bench``'s default: the budget, then the run's watchdog (counted from the command's start), then
    ``timeout``, all inside 300 s; the default names no budget or watchdog of its own."""
    import re

    from svgtpu.cli.bench import WATCHDOG_MARGIN_S
    from svgtpu.facts.paths import REPO_ROOT
    makefile = (REPO_ROOT / "Makefile").read_text()
    args = re.search(r"^GPU_ARGS \?= (.*)$", makefile, re.M).group(1)
    timeout = float(re.search(r"^GPU_TIMEOUT \?= (\d+)$", makefile, re.M).group(1))
    assert "--budget" not in args and "--watchdog" not in args and "--variants" not in args
    assert "timeout -s KILL $(GPU_TIMEOUT)" in makefile
    assert gpu_bench.FULL.budget_s + WATCHDOG_MARGIN_S <= timeout - 30 < timeout <= 295
    assert gpu_bench.FULL.check_s < gpu_bench.FULL.budget_s


#: A check process whose variants behave as their names say: "hangs" never reports, "crashes" ends the process,
#: any other passes (what :func:`svgtpu.bench.gpu_check.main` reports, without JAX).
PLANTED_CHILD = """
import json, os, sys, time
from svgtpu.bench.gpu_check import report
job = json.loads(sys.argv[1])
for name in job["names"]:
    report({"variant": name, "step": "compile and run"})
    if name == "hangs":
        time.sleep(600)
    if name == "crashes":
        os._exit(7)
    report({"row": {"variant": name, "ok": True, "max_rel_error": 0.0}})
"""


def test_a_hung_check_names_the_variant_and_step_and_the_others_still_run():
    """Each check under its own watchdog in a process of its own: a hang costs its variant (named, with the step it
    hung at) and a new process for the variants after it; a crash likewise."""
    import sys
    import time

    from svgtpu.bench import gpu_check
    start = time.monotonic()
    rows = gpu_check.isolated_checks({}, ["a", "hangs", "b", "crashes", "c"], per_check_s=2.0,
                                     deadline=time.monotonic() + 60, child=[sys.executable, "-c", PLANTED_CHILD])
    by = {r["variant"]: r for r in rows}
    assert [r["variant"] for r in rows] == ["a", "hangs", "b", "crashes", "c"]
    assert by["a"]["ok"] and by["b"]["ok"] and by["c"]["ok"]
    assert by["hangs"]["ok"] is None and by["hangs"]["reason"] == (
        "hung: still at 'compile and run hangs' 2 s into its check (its own watchdog ended it)")
    assert by["crashes"]["ok"] is None and by["crashes"]["reason"] == (
        "the check process ended at 'compile and run crashes' (exit status 7)")
    assert time.monotonic() - start < 30 and not gpu_check.CHILDREN   # no process left behind
    past = gpu_check.isolated_checks({}, ["a"], 2.0, time.monotonic() - 1, [sys.executable, "-c", PLANTED_CHILD])
    assert past == [{"variant": "a", "ok": None, "reason": "time budget: no time left to check it"}]


def test_variants_are_named_or_refused_in_one_line(capsys):
    assert gpu_bench.select(gpu_bench.FULL, variants=["all"]).variants is None
    assert gpu_bench.select(gpu_bench.FULL, variants=["cudnn-dense", "ours-mgpu-svg-fast"]).variants == (
        "cudnn-dense", "ours-mgpu-svg-fast")
    assert set(gpu_bench.DEFAULT_VARIANTS) <= set(gpu_bench.variant_names(gpu_bench.FULL))
    assert main(["bench", "gpu", "--smoke", "--variants", "ours-dense,ours-turbo"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "variants must be 'all' or a comma-separated list of" in err
    assert "ours-mgpu-aligned-fast" in err and "'ours-dense,ours-turbo'" in err


def test_the_spot_check_at_the_timed_size_catches_a_wrong_row():
    """A few rows of the timed outputs against float64 of the variant's own mask: a right variant passes, one wrong
    in a single row (the last: where a walk past a tile's end would go wrong) fails, seed 3."""
    import jax.numpy as jnp

    from svgtpu.kernels.reference import float64_attention, mask_array
    from svgtpu.masks.core import BandSinkMask
    L, heads = 300, 3
    rng = np.random.default_rng(3)
    q, k, v = (jnp.asarray(rng.standard_normal((heads, L, 64)).astype(jnp.bfloat16)) for _ in range(3))
    mask = BandSinkMask(L, 20, 40)
    right = float64_attention(q, k, v, mask_array(mask, heads, L)).astype(np.float32)
    wrong = right.copy()
    wrong[-1, -1] += 1.0
    info = {"density": 1.0, "partial_share": 0.0, "computed_pairs": 1}
    variants = {n: gpu_bench.Variant(lambda out=out: out, info, mask="svg")
                for n, out in (("right", right), ("wrong", wrong))}
    variants["dense-on-svg"] = gpu_bench.Variant(lambda: right, info)   # the dense mask's reference: not this output
    spots = gpu_bench.spot_checks(variants, q, k, v, {"svg": mask, "dense": gpu_bench.DenseMask(L)})
    assert spots["right"]["spot_ok"] is True and spots["right"]["spot_max_rel_error"] < 1e-6
    assert spots["wrong"]["spot_ok"] is False and spots["dense-on-svg"]["spot_ok"] is False
    spent = Budget(1)
    spent.section(0.0)
    assert gpu_bench.spot_checks(variants, q, k, v, {"svg": mask}, spent)["right"]["spot_ok"] is None


def test_speedups_read_run_files_of_any_date():
    """Headline keys are speedups over cuDNN dense; the committed run of 2026-12-04 kept time ratios there
    (``ours_dense_over_cudnn``): read as their inverses under the new names, the file untouched."""
    run = next(r for r in gpu_results.committed_runs() if r["file"] == "2026-12-04-314194b.json")
    for section in run["data"]["run"]["attention"]:
        old = section["headline"]
        found = gpu_results.speedups(section)
        assert found["headline"]["ours_dense_speedup_over_cudnn"] == pytest.approx(1 / old["ours_dense_over_cudnn"])
        assert found["headline"]["aligned_fast_speedup_over_cudnn"] == old["aligned_fast_speedup_over_cudnn"]
        assert found["versus"]["ours_dense_speedup_over_jax_triton_flash"] == pytest.approx(
            1 / old["ours_dense_over_jax_triton_flash"])
        assert found["versus"]["fast_path_speedup_svg"] == old["fast_path_speedup_svg"]
        assert all(k.endswith("_speedup_over_cudnn") for k in found["headline"])
    assert all(k.endswith("_speedup_over_cudnn") for k in gpu_bench.HEADLINE)
    new = {"headline": {"mgpu_dense_speedup_over_cudnn": 1.1}, "versus": {"fast_path_speedup_svg": 1.2}}
    assert gpu_results.speedups(new) == new


def test_preflight_lowers_our_mosaic_gpu_variants_at_the_timed_sizes(capsys):
    """``--preflight``: every ``ours-mgpu-*`` variant of the run lowered for CUDA at its attention sizes, no GPU
    needed, no run file (the smoke profile's one Mosaic variant here; the default's eight take ~40 s)."""
    assert main(["bench", "gpu", "--smoke", "--preflight", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["geometry"], r["variant"], r["lowered"]) for r in rows] == [("2x8x10", "ours-mgpu-svg-fast-wg1", True)]
    assert main(["bench", "gpu", "--smoke", "--preflight"]) == 0
    assert max(map(len, capsys.readouterr().out.splitlines())) <= 100


def test_variant_names_are_the_variants_the_run_makes():
    """``--variants`` is checked against :func:`variant_names` before any work: it must list exactly the variants
    :func:`attention_variants` makes (the check's, with per-head masks), in its order."""
    import jax.numpy as jnp

    from svgtpu.geometry import get_geometry
    g = get_geometry("2x8x10")
    q = jnp.zeros((2, g.L, 128), jnp.bfloat16)
    made = gpu_bench.attention_variants(q, q, q, g, gpu_bench.FULL, interpret=True, per_head=True)
    assert tuple(made) == gpu_bench.variant_names(gpu_bench.FULL)
