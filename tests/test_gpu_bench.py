"""The prepared GPU run (``svgtpu bench gpu``): its smoke run end to end on this CPU, the results file it
writes, the end-to-end extrapolation worked by hand, and its refusals."""

import json

import pytest

from svgtpu.bench import gpu as gpu_bench
from svgtpu.bench.gpu_timing import reason
from svgtpu.cli import main
from svgtpu.facts.results import load_results


@pytest.mark.system
@pytest.mark.slow
def test_smoke_run_writes_a_results_file_the_paper_reads(tmp_path, capsys):
    out = tmp_path / "results-gpu.json"
    assert main(["bench", "gpu", "--smoke", "--json", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["smoke"] and result["provenance"] == "measured-cpu-interpret" and not result["errors"]
    assert result["check"]["all_ok"] and result["check"]["rows"]
    rows = {r["variant"]: r for r in result["attention"][0]["rows"]}
    for name in ("xla-dense", "ours-dense", "ours-aligned-fast"):
        assert rows[name]["status"] == "ok" and rows[name]["median_s"] > 0 and rows[name]["tflops"] > 0
    # the baseline reports no ratio to itself worth testing; the aligned kernel's ratio and its overhead over ideal do
    aligned, dense = rows["ours-aligned-fast"], rows["ours-dense"]
    assert aligned["ratio_to_ours_dense"] > 0 and aligned["overhead_vs_ideal"] == pytest.approx(
        aligned["ratio_to_ours_dense"] / aligned["density"])
    assert 0 < aligned["density"] <= dense["density"] == 1
    assert rows["cudnn-dense"]["status"] == "skipped" and rows["cudnn-dense"]["reason"]  # no GPU here
    assert rows["ours-svg-fast"]["reason"] == "not in the smoke profile"
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


def test_refusals_are_one_line_with_exit_status_2(capsys):
    assert main(["bench", "gpu"]) == 2  # the full run needs a GPU
    assert "needs a GPU backend" in capsys.readouterr().err
    assert main(["bench", "gpu", "--smoke", "--budget", "-5"]) == 2
    assert "budget must be a positive number of seconds" in capsys.readouterr().err


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
