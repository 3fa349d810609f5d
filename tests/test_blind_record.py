"""The blind record of the cost model at 314194b (``figures/blind/``): written once, never recomputed."""

import hashlib
import json

import pytest

from svgtpu.facts.paths import GPU_RUNS_DIR, REPO_ROOT

RECORD = REPO_ROOT / "figures" / "blind" / "2026-12-04-314194b.json"
FROZEN = "1d76ace2f9c560763e8e4145a14d3da77ce7fb57934bb728f96d256cb0594f81"


def test_the_blind_record_is_never_recomputed():
    assert hashlib.sha256(RECORD.read_bytes()).hexdigest() == FROZEN


def test_the_record_is_the_model_the_h200_run_carried():
    """At 314194b the GPU machine's run stored the model's prediction for each block; the record, computed on a
    CPU from a checkout of that commit, holds the same numbers (one model, two machines)."""
    record = json.loads(RECORD.read_text())
    assert record["commit"].startswith("314194b")
    run = json.loads((GPU_RUNS_DIR / "2026-12-04-314194b.json").read_text())["run"]
    for block, blind in zip(run["block"], record["h200_blocks"], strict=True):
        assert block["geometry"] == blind["geometry"]
        for key in ("attention_share_dense", "block_s_dense", "dit_speedup_svg_aligned"):
            assert blind[key] == pytest.approx(block["modeled"][key], rel=1e-9), (block["geometry"], key)
    assert len(record["maxdiffusion_stretch_1"]) == 3
    assert all(r["predicted_dense_s"] == record["dense_control"]["predicted_s"] for r in record["maxdiffusion_stretch_1"])
