"""GPU attention priced per kernel from the committed H200 run (svgtpu.costmodel.gpu_rates), checked by hand from
the run file's own numbers, not the module's formula."""

import json
import math

import pytest

from svgtpu import costmodel as cm
from svgtpu.facts.paths import GPU_RUNS_DIR

RUN = json.loads((GPU_RUNS_DIR / "2026-12-04-314194b.json").read_text())["run"]


def _block(geometry):
    return next(b for b in RUN["block"] if b["geometry"] == geometry)


def test_a_dense_head_scales_with_its_tiles_from_the_720p_rate():
    """cuDNN at 1440p by hand: the 720p block's 40 heads of ceil(75600/128)^2 tiles of 4*128*128*128 flops took its
    measured seconds; the 1440p block has 40 heads of ceil(302400/128)^2 such tiles."""
    r720 = _block("720p")
    cudnn = next(r for r in r720["rows"] if r["attention"] == "dense-cudnn")
    rate = 40 * math.ceil(75600 / 128) ** 2 * 4 * 128 ** 3 / cudnn["attention_s"]
    setup = cm.calibrated_setup("wan2.1-14b", "1440p", "h200", chips=1)
    assert (setup.block_q, setup.block_kv, setup.dense_kernel) == (128, 128, "cudnn")
    per_layer = cm.forward_breakdown(setup)["self_attention"] / setup.model.layers
    assert per_layer == pytest.approx(40 * math.ceil(302400 / 128) ** 2 * 4 * 128 ** 3 / rate, rel=1e-9)
    assert "measured rate" in setup.attention_pricing("cudnn") and "fitted" in setup.attention_pricing("ours")


def test_kernels_keep_their_own_rates_and_a_given_tile_is_kept():
    rates = cm.hopper_rates()
    assert rates.rate("cudnn") > rates.rate("ours") > 0 and rates.rate("flash") > 0
    assert rates.rate("splash") is None   # a TPU kernel has no GPU rate: priced as before
    setup = cm.calibrated_setup("wan2.1-14b", "720p", "h200", chips=1, block_q=256, block_kv=256)
    assert (setup.block_q, setup.block_kv) == (256, 256)
    tpu = cm.calibrated_setup("wan2.1-14b", "720p", "v6e", chips=8)
    assert tpu.gpu_rates is None and tpu.gpu_rate() is None


def test_every_row_of_the_run_is_compared_and_only_the_fitted_ones_are_calibration():
    result = cm.against_h200()
    rows = result["rows"]
    blocks = sum(r["status"] == "ok" for b in RUN["block"] for r in b["rows"])
    assert sum(r["quantity"] == "block_s" for r in rows) == blocks
    assert {r["geometry"] for r in rows if r["role"] == "calibration"} == {"720p"}
    assert all(r["role"] == "validation" for r in rows if r["geometry"] != "720p" or r["what"] == "svg-aligned-ours")
    share = next(r for r in rows if r["geometry"] == "1440p" and r["what"] == "dense-cudnn"
                 and r["quantity"] == "attention_share")
    assert share["measured"] == next(r for r in _block("1440p")["rows"] if r["attention"] == "dense-cudnn")[
        "attention_share"]
    blind = [r for r in rows if r["blind_314194b"] is not None]
    assert {r["quantity"] for r in blind} >= {"dit_speedup", "attention_share"}
