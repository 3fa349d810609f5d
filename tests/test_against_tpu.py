"""MaxDiffusion's measured SVG runs against the cost model: policies as data (hand-worked expert splits and
band widths, brute-force kept pairs, bad input), the mapping rule for the policies published by FLOPs
saved only, the one sparse calibration and its validation rows, the YAML path and the gap decomposition.
Priced with the compiled tile table fixture (tests/data/compiled_tiles_fixture.json)."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from svgtpu.geometry import Tile
from svgtpu import costmodel as cm
from svgtpu.cli import main
from svgtpu.costmodel import policy as pol
from svgtpu.costmodel import sparse_layers as sl
from svgtpu.costmodel.against_tpu import against_tpu
from svgtpu.costmodel.validate import calibration_point, family_stretch, maxdiffusion_rows, point_setup, setup_seconds
from svgtpu.errors import BadInput
from svgtpu.geometry import VideoGeometry

FIXTURE = Path(__file__).with_name("data") / "compiled_tiles_fixture.json"
SEED = 36


@pytest.fixture(scope="module")
def table():
    return cm.load_compiled(FIXTURE)


def test_expert_split_by_hand():
    # shift 1: t_i = int(1000 (1 - 0.999 i / 40)); i = 5 gives 875.125 -> 875 >= 875 (high), i = 6 gives 850
    assert pol.ExpertSplit(1.0).high_noise(40) == tuple(i <= 5 for i in range(40))
    # a larger shift keeps the high-noise expert longer: base_wan_27b.yml's 12.0 (its "~step 26 of 40") vs its
    # earlier 5.0
    five, twelve = sum(pol.ExpertSplit(5.0).high_noise(40)), sum(pol.ExpertSplit(12.0).high_noise(40))
    assert (five, twelve) == (17, 26)
    assert pol.ExpertSplit(5.0).timesteps(40)[0] == 999    # the scheduler nudges sigma 1 below 1


def test_band_half_width_by_hand_and_brute_force_kept_pairs():
    g = VideoGeometry(21, 45, 80)
    # 75600 (1 - sqrt(0.8)) = 7981.6 -> 63 x 128
    assert pol.band_half_width(g, 0.2) == 8064
    assert pol.band_half_width(g, 1.0) == g.L - 1
    small = VideoGeometry(3, 4, 16)     # L = 192, F = 64
    rng = np.random.default_rng(SEED)
    print("seed", SEED)
    for density in rng.uniform(0.05, 0.95, 4):
        w = pol.band_half_width(small, density)
        assert w % 128 == 0 or w == small.L - 1
        q, k = np.meshgrid(np.arange(small.L), np.arange(small.L), indexing="ij")
        for anchor in (True, False):
            brute = ((np.abs(q - k) <= w) | (anchor & (k < small.F))).mean()
            assert pol.kept_pairs(small, float(density), "maxdiffusion", anchor) == pytest.approx(brute, abs=1e-12)
        # the band alone keeps at least the density (w rounded up), the anchor only adds pairs
        assert pol.kept_pairs(small, float(density), anchor=False) >= density - 1 / small.L


def test_policy_windows_calls_and_bad_input():
    moderate = pol.get_policy("maxdiffusion-moderate")[0]
    calls = moderate.calls(40, 40)
    high = sum(pol.ExpertSplit(12.0).high_noise(40)[11:40])     # sparse steps the high-noise expert runs
    assert calls["sparse"] == {0.5: high * 39, 0.2: (29 - high) * 39} and calls["dense"] == 1600 - 29 * 39
    for bad in ({"svg_high_noise_density": 0.0}, {"svg_low_noise_density": 1.5},
                {"svg_active_start_step": 11, "svg_active_end_step": 11},
                {"svg_active_start_layer": 5, "svg_active_end_layer": 2}):
        with pytest.raises(BadInput, match="svg_"):
            pol.from_config({**pol.MODERATE_KEYS, **bad})
    # the flow shift is a field: base_wan_27b.yml's earlier 5.0 hands fewer sparse steps to the high-noise expert
    earlier = pol.from_config({**pol.MODERATE_KEYS, "flow_shift": 5.0})[0].calls(40, 40)["sparse"]
    assert earlier[0.5] == sum(pol.ExpertSplit(5.0).high_noise(40)[11:40]) * 39 < calls["sparse"][0.5]
    # a config without svg_* keys: MaxDiffusion's defaults (every step and layer, one density for both experts)
    policy, video = pol.from_config({})
    assert policy.steps == (0, 40) and policy.layers == (0, 40) and policy.densities == (0.25, 0.25)
    assert video["height"] == 720 and video["flow_shift"] == 12.0


def test_flops_saved_counts_like_maxdiffusion_by_hand():
    # the moderate policy as published, worked by hand: flow shift 12.0 gives 26 high-noise steps, so steps
    # 11-25 (15) run density 0.5 and 26-39 (14) density 0.2, each on layers 1-39 (39 of 40)
    moderate = pol.get_policy("maxdiffusion-moderate")[0]
    assert moderate.split.flow_shift == 12.0 and moderate.calls(40, 40)["sparse"] == {0.5: 15 * 39, 0.2: 14 * 39}
    g, model = VideoGeometry.from_pixels(1280, 720, 81), cm.get_model("wan2.2-a14b")
    N, F, D, T, ffn = g.L, g.F, model.dim, model.text_len, model.ffn

    def kept(w):   # the band |q - k| <= w in closed form, plus the anchor's keys k < F the band misses
        keys = np.arange(F)
        in_band = np.minimum(N - 1, keys + w) - np.maximum(0, keys - w) + 1
        return (N * (2 * w + 1) - w * (w + 1) + (N - in_band).sum()) / N**2

    # 75600 (1 - sqrt(0.5)) = 22142.6 -> 173 x 128; 75600 (1 - sqrt(0.8)) = 7981.6 -> 63 x 128
    assert (pol.band_half_width(g, 0.5), pol.band_half_width(g, 0.2)) == (22144, 8064)
    # one block as MaxDiffusion counts it (base_wan_trainer.py calculate_tflops): self QKV, self attention,
    # cross KV (over the 512 text tokens), cross Q, cross attention, both output projections, FFN
    block = 6 * N * D * D + 4 * N * N * D + 6 * T * D * D + 2 * N * D * D + 4 * N * T * D + 4 * N * D * D \
        + 4 * N * D * ffn
    hand = 4 * N * N * D * 39 * (15 * (1 - kept(22144)) + 14 * (1 - kept(8064))) / (40 * 40 * block)
    # our forward pass adds the patch embedding and head and counts cross KV once: within 1e-3
    assert pol.flops_saved(moderate, model, g, 40) == pytest.approx(hand, rel=1e-3)
    # the anchor only adds kept pairs, so counting it saves less
    assert pol.flops_saved(dataclasses.replace(moderate, anchor=False), model, g, 40) > hand


def test_mapping_rule_scales_moderate_to_the_published_flops_saved():
    moderate = pol.get_policy("maxdiffusion-moderate")[0]
    model, g = cm.get_model("wan2.2-a14b"), VideoGeometry.from_pixels(1280, 720, 81)
    for name in ("maxdiffusion-conservative", "maxdiffusion-aggressive"):
        p = pol.get_policy(name)[0]
        assert (p.steps, p.layers, p.split) == (moderate.steps, moderate.layers, moderate.split)
        assert p.densities[0] / p.densities[1] == pytest.approx(moderate.densities[0] / moderate.densities[1])
        # band widths move in 128-token steps, so the FLOPs saved land within a fraction of a point
        assert pol.flops_saved(p, model, g, 40) == pytest.approx(pol.PUBLISHED_FLOPS_SAVED[name], abs=3e-3)
    assert pol.get_policy("maxdiffusion-conservative")[0].densities[1] > 0.2 > \
        pol.get_policy("maxdiffusion-aggressive")[0].densities[1]


def test_one_calibration_its_seconds_only_and_validation_rows_never_refitted(table):
    point = calibration_point("tpu")
    assert point == calibration_point("tpu", "svg") and calibration_point("tpu", "dense") is None
    assert point.policy == "maxdiffusion-moderate" and point.published_speedup == pytest.approx(153.37 / 127.94)
    fit = family_stretch("tpu", table)   # the stretch is not fitted: its plausible range is an interval knob
    assert fit["calibrated_on"] is None and fit["stretch"] == 1.0 and fit["bounds"] == (0.95, 1.5)
    eff = cm.family_efficiency("tpu", table)
    assert eff["calibrated_on"] == point.id
    rows = {r["policy"]: r for r in maxdiffusion_rows(table)}
    # the fit meets the moderate run's seconds, not its speedup over the dense control (a validation row)
    assert rows["maxdiffusion-moderate"]["predicted_svg_s"] == pytest.approx(point.seconds, rel=1e-6)
    for name in ("maxdiffusion-conservative", "maxdiffusion-aggressive"):
        r = rows[name]
        assert r["role"] == "validation" and r["stretch"] == fit["stretch"]   # predicted with the one fit
        assert r["error"] == pytest.approx(r["predicted_speedup"] / r["published_speedup"] - 1)
        # both readings of the dense calls shown, each with the efficiency refitted on the moderate run
        assert r["online_body"]["dense_control"] == "ours" and r["dense_control"] == "fixed-m"
        assert r["online_body"]["fitted_compute_efficiency"] > eff["fitted"]   # dearer dense calls: faster matmuls
    # denser policies gain less
    assert rows["maxdiffusion-conservative"]["predicted_speedup"] < rows["maxdiffusion-moderate"]["predicted_speedup"] \
        < rows["maxdiffusion-aggressive"]["predicted_speedup"]
    # the calibrated setup of a TPU carries the stretch; the GPU scenario does not feed on TPU runs
    assert cm.calibrated_setup("wan2.1-14b", "1440p", "v6e", compiled=table).sparse_stretch == fit["stretch"]
    assert all(get["device"] in ("h100", "a100", "h200") for get in cm.published_svg_efficiency(table)["rows"])


def test_terms_add_up_and_the_gap_is_shared_out(table):
    result = against_tpu(table)
    gap = result["gap"]
    # the calibration meets the moderate run's seconds, not its speedup: the terms share out the gap between the
    # static schedule and the modeled speedup, and the modeled one stands beside the measured one
    assert gap["calibrated_speedup"] == pytest.approx(result["rows"][1]["predicted_speedup"], rel=1e-9)
    assert gap["terms"][-1]["speedup_after"] == pytest.approx(gap["terms"][-2]["speedup_after"], rel=1e-12)
    # every named term switched on makes SVG slower relative to dense here (none is a saving); the fitted
    # stretch, last, is 1: no change
    speeds = [gap["static_speedup"]] + [r["speedup_after"] for r in gap["terms"][:-1]]
    assert gap["terms"][-1]["term"].startswith("sparse stretch")
    assert all(a >= b for a, b in zip(speeds, speeds[1:]))
    assert {r["kernel"] for r in result["blind"]["rows"]} == {"ours", "tokamax", "splash"}
    # the run's parts add up to its total
    setup = cm.calibrated_setup("wan2.2-a14b", "720p", "v6e", compiled=table, steps=40)
    layout = sl.AttentionLayout()
    run = sl.run_seconds(sl.run_setup(setup, layout), layout, pol.get_policy("maxdiffusion-moderate")[0])
    t = run["terms"]
    assert run["seconds"] == pytest.approx(t["other"] + t["weight_gather"] + t["host"] + t["outside_blocks"]
                                           + t["dense_calls"] + sum(t["sparse"].values()))
    # the weights are sharded over the context group (MaxDiffusion's logical_axis_rules): every pass gathers a
    # layer's bf16 weights, (4 - 1) / 4 of them arriving over two links of a line of four chips, by hand
    by_hand = setup.model.params * 2 * 3 / 4 / (2 * setup.device.ici_bandwidth / setup.device.ici_ports / 2
                                                 * setup.efficiency.ici)
    assert t["weight_gather"] == pytest.approx(40 * by_hand, rel=1e-9)   # 40 steps, one CFG pass per data group


def test_the_fixed_m_dense_control_is_priced_from_our_compiled_fixed_body(table):
    """MaxDiffusion's fixed-M dense calls are priced from the fixture's compiled fixed-maximum row at their own
    6400 x 2048 tile (no hand-counted share): cheaper than pricing them as our running-maximum body; twice that
    row's body, nearly twice the call (the per-step code, row finish and pass stay); no fixed row, one line."""
    layout = sl.AttentionLayout()
    setup = sl.run_setup(cm.calibrated_setup("wan2.2-a14b", "720p", "v6e", compiled=table, steps=40), layout)
    row = table.fixed("v6e", Tile(layout.dense_block_q, layout.dense_block_kv), 128)
    assert row is not None and row.full < row.running_full
    fixed = sl.dense_call(setup, layout)["kernel"]
    assert fixed < sl.dense_call(setup, sl.AttentionLayout(dense_kernel="ours"))["kernel"]
    doubled = dataclasses.replace(table, fixed_tiles=tuple(dataclasses.replace(t, full=2 * t.full)
                                                           for t in table.fixed_tiles))
    assert 1.9 < sl.dense_call(dataclasses.replace(setup, compiled=doubled), layout)["kernel"] / fixed < 2
    with pytest.raises(BadInput, match="fixed_max row"):
        sl.dense_call(dataclasses.replace(setup, compiled=dataclasses.replace(table, fixed_tiles=())), layout)


def test_the_efficiency_refits_under_another_reading_of_the_evidence(table):
    central = cm.family_efficiency("tpu", table)["fitted"]
    online = cm.fit_efficiency("tpu", table, dense_control="ours")["fitted"]
    assert online > central    # dense calls dearer: the other ops must be cheaper to meet the same seconds
    setup = cm.calibrated_setup("wan2.1-14b", "1440p", "v6e", compiled=table)
    knobs = cm.sparse_knobs(setup)
    assert [k.path for k in knobs][0] == "sparse_stretch" and (knobs[0].low, knobs[0].high) == (0.95, 1.5)
    assert knobs[0].refit and not any(k.refit for k in knobs[1:])   # the readings are refits themselves
    assert all(k.low <= central <= k.high for k in knobs[1:]) and any(k.high == online for k in knobs[1:])
    # an end of the stretch is a refit that meets the calibration run's seconds
    point = calibration_point("tpu")
    end = cm.at_knob(setup, knobs[0], 1.5)
    at_end = setup_seconds(point, dataclasses.replace(point_setup(point, end.efficiency, table), sparse_stretch=1.5))
    assert end.efficiency.matmul > central and at_end == pytest.approx(point.seconds, rel=1e-6)
    assert cm.sparse_knobs(dataclasses.replace(setup, sparse_stretch=1.2)) == ()


def test_cli_policy_by_name_and_by_yaml(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SVGTPU_COMPILED_TILES", str(FIXTURE))
    assert main(["costmodel", "--policy", "maxdiffusion-moderate", "--json"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert named["svg_seconds"] == pytest.approx(127.94, rel=1e-6)   # the calibration: the moderate run's seconds
    path = tmp_path / "moderate.yml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in pol.MODERATE_KEYS.items()))
    assert main(["costmodel", "--policy", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["speedup"] == pytest.approx(named["speedup"], rel=1e-12)
    bad = tmp_path / "bad.yml"
    bad.write_text("svg_low_noise_density: 0\n")
    assert main(["costmodel", "--policy", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "svg_low_noise_density" in err[0]
    assert main(["costmodel", "--policy", "no-such-policy"]) == 2
    assert math.isfinite(named["flops_saved"]) and named["tiles"]


def test_paper_block_sets_ours_beside_theirs(table):
    from svgtpu.report.tables import against_tpu_table

    result = against_tpu(table)
    assert "not yet" in against_tpu_table({"claims": {}}).lower()
    p = "modeled-v6e"
    entries = {"tpu_blind": {"value": result["blind"]["rows"], "kept": result["blind"]["kept"], "provenance": p},
               "tpu_runs": {"value": result["rows"], "provenance": p},
               "tpu_sparse_stretch": {"value": result["stretch"]["stretch"], "provenance": p},
               "tpu_dense_control_error": {"value": result["dense_control"]["error"], "provenance": p,
                                           **{k: result["dense_control"][k] for k in ("predicted_s", "published_s")}},
               "tpu_gap": {"value": result["gap"]["terms"], "provenance": p,
                           "static_speedup": result["gap"]["static_speedup"],
                           "measured_speedup": result["gap"]["measured_speedup"]}}
    text = against_tpu_table({"claims": {"C1": entries}})
    rows = [line for line in text.splitlines() if line.startswith("| maxdiffusion-")]
    assert len(rows) == 3
    moderate = next(r for r in result["rows"] if r["policy"] == "maxdiffusion-moderate")
    assert f"{moderate['published_speedup']:.3f}x" in text and "calibration" in text and "153.37" in text
    assert f"{result['stretch']['stretch']:.3f}" in text
