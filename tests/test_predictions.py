"""Predictions frozen before the TPU run (``svgtpu predict``): every committed file unchanged since it was frozen,
a prediction for every quantity the run measures, and a run file read back as prediction vs measurement."""

import hashlib
import json
from pathlib import Path

import pytest

from svgtpu.bench import tpu
from svgtpu.errors import BadInput
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.report import predictions

SYNTHETIC_RUN = Path(__file__).parent / "data" / "tpu_run_synthetic.json"


def test_frozen_predictions_never_change():
    folder = REPO_ROOT / predictions.PREDICTIONS_DIR
    files = sorted(p.name for p in folder.glob("*.json")) if folder.exists() else []
    assert files == sorted(predictions.FROZEN), "a new predictions file is listed in FROZEN with its sha256"
    for name, digest in predictions.FROZEN.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, f"{name} was edited after its date"


def test_every_measured_quantity_is_predicted_on_every_slice():
    fns = predictions.quantity_functions()
    for chips in tpu.SLICES:
        measured = set(tpu.quantities(_every_ratio_measured(chips)))
        assert measured == {q for q, c in fns if c == chips}
        # what a slice never measures (its blocks that do not fit) is just that
        frozen = set(predictions.latest()["quantities"][f"v6e-{chips}"])
        assert {q for q in frozen - measured if not predictions.never_measured(q, chips)} == set()
        assert not any(predictions.never_measured(q, chips) for q in measured)
    assert "block_1440p_attention_share_splash" not in set(tpu.quantities(_every_ratio_measured(1)))


def _every_ratio_measured(chips: int) -> dict:
    """The run on ``chips`` chips at full size as if every program were timed: every ratio present."""
    run = {"kernels": [], "blocks": []}
    for p in tpu.programs(tpu.FULL, chips):
        sec = "kernels" if p.section == "kernels" else "blocks"
        found = next((s for s in run[sec] if (s["section"], s["geometry"]) == (p.section, p.geometry)), None)
        if found is None:
            found = {"section": p.section, "geometry": p.geometry, "rows": [], "ratios": {}}
            run[sec].append(found)
        found["rows"].append({"variant": p.variant, "times": [1.0, 1.1] if p.variant == "none" else [2.0, 2.2]})
    for s in run["kernels"] + run["blocks"]:
        s["ratios"] = {f"{a['variant']}/{b['variant']}": {"value": 1.0, "iqr": [1.0, 1.0]}
                       for a in s["rows"] for b in s["rows"] if a is not b}
    return run


def test_a_one_chip_run_against_the_frozen_predictions_leaves_its_1440p_blocks_unmeasured():
    run = {"chips": 1, "provenance": "synthetic-test", "date": "2026-12-05", "commit": "abc",
           "quantities": tpu.quantities(_every_ratio_measured(1))}
    frozen = predictions.latest()
    rows = {r["quantity"]: r for r in predictions.compare(frozen, run)}
    assert set(rows) == set(frozen["quantities"]["v6e-1"])   # each prediction of the slice is shown
    unmeasured = {q for q, r in rows.items() if r["outcome"] == predictions.NOT_ON_SLICE}
    assert unmeasured == {"block_1440p_attention_share_splash", "block_1440p_attention_share_ours",
                          "block_1440p_block_speedup_svg-ours", "block_attention_exponent_splash",
                          "block_attention_exponent_ours"}
    assert all(rows[q]["measured"] is None and "verdict" not in rows[q] for q in unmeasured)
    table = predictions.markdown(frozen, run)
    assert "| block_1440p_attention_share_splash | " in table and predictions.NOT_ON_SLICE in table


def test_a_prediction_has_an_interval_around_it_and_flip_thresholds():
    fns = predictions.quantity_functions()
    setups, fn = fns["block_1440p_attention_share_splash", 8]
    p = predictions.predict_one(setups, fn)
    assert p["interval"][0] <= p["value"] <= p["interval"][1] and 0 < p["value"] < 1
    assert p["interval"][1] > p["interval"][0]   # the unknown constants move a share
    assert predictions.flips("block_1440p_attention_share_splash")["threshold"] == 0.882
    assert predictions.flips("kernels_720p_fast_path_speedup_svg")["claim"] == "C4"
    assert predictions.flips("block_720p_block_speedup_svg-ours") is None


def test_compare_reads_a_run_file(tmp_path):
    run = json.loads(SYNTHETIC_RUN.read_text())
    frozen = {"quantities": {"v6e-8": {
        "kernels_1440p_fast_path_speedup_svg": {"value": 1.1, "interval": [1.05, 1.15],
                                                "verdict_flip": predictions.flips("kernels_1440p_fast_path_speedup_svg")},
        "block_1440p_attention_share_splash": {"value": 0.95, "interval": [0.94, 0.96],
                                               "verdict_flip": predictions.flips("block_1440p_attention_share_splash")},
        "block_720p_block_speedup_svg-ours": {"value": 2.05, "interval": [1.8, 2.3]}}}}
    rows = {r["quantity"]: r for r in predictions.compare(frozen, run)}
    assert rows["kernels_1440p_fast_path_speedup_svg"]["outcome"] == "prediction refuted"
    assert rows["kernels_1440p_fast_path_speedup_svg"]["verdict"] == "C4 contradicted"
    assert rows["block_1440p_attention_share_splash"]["verdict"] == "C2 contradicted (lower)"
    assert rows["block_720p_block_speedup_svg-ours"]["outcome"] == "within the predicted interval"
    assert rows["a_quantity_nobody_predicted"]["outcome"] == "not predicted"
    assert all(r["provenance"] == "synthetic-test" for r in rows.values())
    with pytest.raises(BadInput, match="slices"):
        predictions.compare(frozen, run | {"chips": 1})
    out = tmp_path / "p.json"
    predictions.write({"x": 1}, out)
    with pytest.raises(BadInput, match="never rewritten"):
        predictions.write({"x": 2}, out)


def test_markdown_for_the_paper():
    assert "No predictions" in predictions.markdown(None, None)
    frozen = {"date": "2026-12-04", "commit": "abc", "quantities": {"v6e-8": {
        "block_720p_block_speedup_svg-ours": {"value": 2.05, "interval": [1.8, 2.3]}}}}
    assert "No TPU run yet" in predictions.markdown(frozen, None)
    table = predictions.markdown(frozen, json.loads(SYNTHETIC_RUN.read_text()))
    assert "| block_720p_block_speedup_svg-ours | 2.05 | 1.8 – 2.3 | 2 | 1.9 – 2.1 | within the predicted interval |" \
        in table and "`synthetic-test`" in table


def test_an_end_the_calibration_rules_out_is_cut_to_the_last_possible_value():
    from svgtpu.costmodel.sensitivity import reachable_end
    from svgtpu.costmodel.validate import Unreachable

    def at(knob, value):   # possible up to 0.9, the value itself the quantity
        if value > 0.9:
            raise Unreachable
        return value
    value, there = reachable_end(None, 1.25, 0.5, at)
    assert 0.9 - 1e-3 < value <= 0.9 and there == value
    assert reachable_end(None, "other", 0.5, at) is None
