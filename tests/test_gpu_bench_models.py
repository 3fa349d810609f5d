"""A block of another model in the prepared GPU run (Wan 2.1 1.3B at 720p since 2026-12-07): its own layers in the
extrapolation, its own names in the results, no say in the fitted rates or the C5 exponents, and validation rows
only when the model is compared with it; worked by hand on made-up runs."""

import copy

import pytest

from svgtpu import costmodel as cm
from svgtpu.bench import gpu as gpu_bench
from svgtpu.bench import gpu_results
from svgtpu.costmodel import against_gpu, gpu_rates
from svgtpu.geometry import get_geometry


def _small_block(block_s=0.05, attention_s=0.03):
    return {"geometry": "720p", "grid": "21x45x80", "L": 75600, "model": "wan2.1-1.3b",
            "modeled": {"dense_steps": 10, "dense_layers": 1},
            "rows": [{"attention": "dense-cudnn", "status": "ok", "reason": "", "block_s": block_s,
                      "attention_s": attention_s, "attention_share": attention_s / block_s},
                     {"attention": "svg-aligned-ours", "status": "ok", "reason": "", "block_s": 0.8 * block_s,
                      "attention_s": 0.5 * attention_s, "attention_share": 0.625 * attention_s / block_s}]}


def test_the_default_run_times_the_small_model_at_720p():
    sections = [s for s in gpu_bench.FULL.sections if s[0] == "block"]
    assert ("block", "720p", "wan2.1-1.3b") in [s[:3] for s in sections]
    assert [gpu_bench.section_label(s) for s in sections] == ["block 480p", "block 720p", "block 720p wan2.1-1.3b",
                                                              "block 1440p"]
    kept = gpu_bench.select(gpu_bench.FULL, ["block"], ["720p"]).sections
    assert [s[:3] for s in kept] == [("check", "11x16x20", 4), ("block", "720p", None), ("block", "720p", "wan2.1-1.3b")]
    assert gpu_bench.section_model(gpu_bench.FULL, "wan2.1-1.3b").layers == 30
    assert gpu_bench.section_model(gpu_bench.FULL, None) is gpu_bench.WAN14B
    assert gpu_bench.FULL.other_block_attentions == ("dense-cudnn",)   # no kernel compile of its own


def test_its_video_has_its_own_thirty_layers():
    e2e = gpu_bench.extrapolate(_small_block(block_s=0.05), gpu_bench.FULL)
    # 2 passes x 50 steps x 30 blocks x 0.05 s; SVG: 10 dense steps, then 1 dense + 29 sparse blocks
    assert e2e["model"] == "wan2.1-1.3b" and e2e["dense_s"] == pytest.approx(150.0)
    assert e2e["svg_s"] == pytest.approx(2 * (10 * 30 * 0.05 + 40 * (0.05 + 29 * 0.04)))


def test_the_exponents_and_the_results_names_keep_the_models_apart():
    blocks = [{"geometry": g, "L": L, "model": "wan2.1-14b", "rows": [
        {"attention": "dense-cudnn", "status": "ok", "attention_s": t, "attention_share": 0.9}]} for g, L, t in
        (("480p", 32760, 1.0), ("720p", 75600, (75600 / 32760) ** 2))]
    assert gpu_bench.attention_exponents(blocks)["dense-cudnn"] == pytest.approx(2.0)
    mixed = blocks + [_small_block(attention_s=0.001)]
    assert gpu_bench.attention_exponents(mixed, "wan2.1-14b")["dense-cudnn"] == pytest.approx(2.0)
    result = {"provenance": "measured-gpu-h200", "device": "NVIDIA H200", "attention": [], "end_to_end": [],
              "block": [dict(b, modeled={}) for b in mixed]}
    names = [name for _, name, *_ in gpu_results.results_entries(result) if name.startswith("gpu_block_")]
    assert names == ["gpu_block_480p", "gpu_block_720p", "gpu_block_wan2.1-1.3b_720p"]


def test_the_rates_are_fitted_on_the_14b_block_wherever_the_small_one_sits():
    run = gpu_rates.calibration_run()
    peers = gpu_results.peers(run)
    before = gpu_rates.fit_rates(run, peers)
    mixed = copy.deepcopy(run)
    mixed["data"]["run"]["block"].insert(0, _small_block())
    assert gpu_rates.fit_rates(mixed, peers) == before


def test_the_model_is_compared_with_the_small_block_as_validation_only(monkeypatch):
    run = gpu_rates.calibration_run()
    mixed = copy.deepcopy(run)
    mixed["data"]["run"]["block"].append(_small_block())
    mixed["data"]["run"]["end_to_end"].append(gpu_bench.extrapolate(_small_block(), gpu_bench.FULL))
    plain = cm.against_h200()
    monkeypatch.setattr(against_gpu, "calibration_run", lambda: mixed)
    against_gpu._against_h200.cache_clear()
    try:
        found = cm.against_h200()
    finally:
        against_gpu._against_h200.cache_clear()
    small = [r for r in found["rows"] if r["what"].startswith("wan2.1-1.3b ")]
    assert {r["what"] for r in small} == {"wan2.1-1.3b dense-cudnn", "wan2.1-1.3b svg-aligned-ours",
                                          "wan2.1-1.3b video (dense cuDNN)", "wan2.1-1.3b video (SVG ours vs dense cuDNN)"}
    assert all(r["role"] == "validation" and r["blind_314194b"] is None for r in small)
    assert [r for r in found["rows"] if r not in small] == plain["rows"]
    setup = against_gpu.block_setup("720p", mixed["data"]["run"]["kept"], "wan2.1-1.3b")
    block = next(r for r in small if r["what"] == "wan2.1-1.3b dense-cudnn" and r["quantity"] == "block_s")
    assert block["predicted"] == pytest.approx(against_gpu.modeled_block(setup, "cudnn", "dense")["block_s"])
    assert setup.model.heads == 12 and setup.model.dim == 1536


def test_the_bench_records_the_models_own_prediction():
    small = gpu_bench.modeled_block(get_geometry("720p"), gpu_bench.FULL, gpu_bench.WAN1_3B)
    large = gpu_bench.modeled_block(get_geometry("720p"), gpu_bench.FULL)
    attention = {k: m["attention_share_dense"] * m["block_s_dense"] for k, m in (("small", small), ("large", large))}
    assert attention["small"] == pytest.approx(12 / 40 * attention["large"])   # same L, d and rate: by heads
    rest = {k: (1 - m["attention_share_dense"]) * m["block_s_dense"] for k, m in (("small", small), ("large", large))}
    assert rest["small"] < rest["large"] / 5   # matmuls 1536 wide (FFN 8960) against 5120 (13824)
