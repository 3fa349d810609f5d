"""GPU attention priced per kernel from the committed H200 run (svgtpu.costmodel.gpu_rates), checked by hand from
the run file's own numbers, not the module's formula."""

import copy
import json
import math

import pytest

from svgtpu import costmodel as cm
from svgtpu.costmodel.validate import point_setup, pricing
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
    assert all(r["role"] == "validation" for r in rows if r["geometry"] != "720p")
    assert {(r["what"], r["quantity"]) for r in rows if r["role"] == "calibration"} == {
        ("dense-cudnn", "attention_s"), ("dense-cudnn", "rest_s"), ("dense-cudnn", "block_s"),
        ("dense-cudnn", "attention_share"), ("dense-ours", "attention_s"), ("video (dense cuDNN)", "dense_dit_s"),
        ("svg-aligned-ours", "attention_s"), ("video (SVG ours vs dense cuDNN)", "dit_speedup"),
        ("attention ours-aligned-fast (40 heads)", "seconds")}
    share = next(r for r in rows if r["geometry"] == "1440p" and r["what"] == "dense-cudnn"
                 and r["quantity"] == "attention_share")
    assert share["measured"] == next(r for r in _block("1440p")["rows"] if r["attention"] == "dense-cudnn")[
        "attention_share"]
    blind = [r for r in rows if r["blind_314194b"] is not None]
    assert {r["quantity"] for r in blind} >= {"dit_speedup", "attention_share"}


PEER = json.loads((GPU_RUNS_DIR / "2026-12-04-peer-flexattention.json").read_text())


def _peer_row(geometry, row):
    case = next(c for c in PEER["cases"] if c["geometry"] == geometry)
    return case, case["rows"][row]


def test_a_published_run_is_priced_with_the_kernel_it_ran():
    """SVG's README H100 480p dense run by hand: it ran torch SDPA's FlashAttention-2 (published.json cites the
    code), priced at the peer run's 720p FlashAttention-2 row worked here from the file: 40 heads of
    ceil(75600/128)^2 tiles of 4*128^3 flops in that row's median seconds.  A 480p head (L = 32760) has 256^2
    tiles, so a 480p layer's 40 heads take 40 * 256^2 * 4*128^3 flops at that rate."""
    point = next(p for p in cm.published_points() if p.id == "svg-readme-h100-wan2.1-14b-480p-dense")
    assert point.kernel == "flash" and "scaled_dot_product_attention" in point.kernel_source
    _, flash_row = _peer_row("720p", "sdpa-flash2-dense")
    flash = 40 * 591 ** 2 * 4 * 128 ** 3 / flash_row["median_s"]
    assert 300e12 < flash < 400e12   # FlashAttention-2 at head width 128 on Hopper (FA3 paper, Fig. 5: 335-370)
    setup = point_setup(point, cm.family_efficiency("hopper")["efficiency"])
    assert (setup.kernel, setup.geometry.L, setup.chips) == ("flash", 32760, 1)
    per_layer = cm.forward_breakdown(setup)["self_attention"] / setup.model.layers
    assert per_layer == pytest.approx(40 * 256 ** 2 * 4 * 128 ** 3 / flash, rel=1e-9)
    said = pricing(point, setup)   # what --validate --json says priced the row (attention_pricing)
    assert said.startswith(f"flash: {flash / 1e12:.0f} TFLOP/s") and "720p sdpa-flash2-dense" in said



def test_a_published_svg_run_is_priced_with_the_kernels_it_ran():
    """SVG's README H100 480p SVG run by hand: its dense layers ran torch SDPA's FlashAttention-2, its sparse layers
    torch.compile(flex_attention) (published.json cites both); each is priced at its own peer row's 720p rate,
    worked here from the run file: FlashAttention-2 as above, FlexAttention as 40 heads of the flex-svg row's
    computed tiles per head (106022 of 591^2) of 4*128^3 flops in that row's median seconds."""
    point = next(p for p in cm.published_points() if p.id == "svg-readme-h100-wan2.1-14b-480p-svg")
    assert (point.kernel, point.sparse_kernel) == ("flash", "flex")
    assert "scaled_dot_product_attention" in point.kernel_source and "flex_attention" in point.kernel_source
    _, flash_row = _peer_row("720p", "sdpa-flash2-dense")
    flash = 40 * 591 ** 2 * 4 * 128 ** 3 / flash_row["median_s"]
    _, flex_row = _peer_row("720p", "flex-svg")
    assert flex_row["tiles_computed"] < 591 ** 2   # per head: the SVG mask's computed blocks, not the dense count
    flex = 40 * flex_row["tiles_computed"] * 4 * 128 ** 3 / flex_row["median_s"]
    assert 300e12 < flash < flex < 500e12
    setup = point_setup(point, cm.family_efficiency("hopper")["efficiency"])
    assert (setup.dense_kernel, setup.kernel, setup.geometry.L) == ("flash", "flex", 32760)
    dense_stats, dense_info = setup.tiles("dense")
    assert setup.head_seconds(dense_stats, kernel="flash", info=dense_info) == pytest.approx(
        256 ** 2 * 4 * 128 ** 3 / flash, rel=1e-9)
    stats, info = setup.tiles("svg")
    assert stats.empty > 0 and setup.head_seconds(stats, info=info) == pytest.approx(
        (stats.full + stats.partial) * 4 * 128 ** 3 / flex, rel=1e-9)
    said = pricing(point, setup)   # what --validate --json says priced the row (attention_pricing)
    assert said.startswith(f"flash: {flash / 1e12:.0f} TFLOP/s") and f"; flex: {flex / 1e12:.0f} TFLOP/s" in said
    assert "720p flex-svg" in said
    a100 = next(p for p in cm.published_points() if p.id == "svg-readme-a100-wan2.1-14b-480p-svg")
    assert a100.sparse_kernel == "flex" and pricing(a100, point_setup(a100)).count("priors (flash work)") == 2

def test_no_rate_is_read_at_a_validation_resolution():
    """Every rate and the non-attention target read the 720p rows only: the run and its peer with every other
    resolution's timings doubled give the same numbers."""
    from svgtpu.costmodel.gpu_rates import calibration_run, fit_rates
    from svgtpu.facts.gpu_runs import peers
    run = calibration_run()
    before = fit_rates(run, peers(run))
    moved = copy.deepcopy(run)
    for section in ("block", "attention"):
        for part in moved["data"]["run"][section]:
            if part["geometry"] != "720p":
                for r in part["rows"]:
                    for key in ("block_s", "attention_s", "median_s"):
                        if r.get(key):
                            r[key] *= 2
                    if r.get("tflops"):
                        r["tflops"] /= 2
    moved_peers = copy.deepcopy(peers(run))
    for peer in moved_peers.values():
        for case in peer["data"].get("cases", []):
            if case["geometry"] != "720p":
                for r in case["rows"].values():
                    r["median_s"] *= 2
                    for key in ("tflops_computed", "tflops_useful"):
                        r[key] /= 2
    after = fit_rates(moved, moved_peers)
    assert after == before
    assert all(" 720p " in source for _, _, source in before.rates + before.sparse_rates + before.svg_work)
    assert before.rest_geometry == "720p"


def test_an_svg_block_at_1440p_from_the_720p_rows_by_hand():
    """Our kernel's SVG self-attention in a 1440p block, worked from the run file's 720p rows: the kernel on its
    band at the 720p attention row's rate per computed tile (ours-aligned-fast, 40 heads), and SVG's own work
    (profiling, layout) as the 720p SVG block's self-attention minus that kernel alone, per head and token, times
    40 heads and 302400 tokens."""
    from svgtpu.costmodel.against_gpu import block_setup, modeled_block
    section = next(a for a in RUN["attention"] if a["geometry"] == "720p")
    alone = next(r for r in section["rows"] if r["variant"] == "ours-aligned-fast")
    svg720 = next(r for r in _block("720p")["rows"] if r["attention"] == "svg-aligned-ours")
    per_head_token = (svg720["attention_s"] - alone["median_s"]) / (40 * 75600)
    assert per_head_token > 0
    setup = block_setup("1440p", RUN["kept"])
    stats, _ = setup.tiles("svg-aligned")
    by_hand = 40 * (stats.full + stats.partial) * 4 * 128 ** 3 / (alone["tflops"] * 1e12) + per_head_token * 40 * 302400
    assert modeled_block(setup, "ours", "svg-aligned")["attention_s"] == pytest.approx(by_hand, rel=1e-9)
    # a dense mask keeps the dense rate; a published run's kernel (flash) keeps the prior form of SVG's own work
    dense_stats, dense_info = setup.tiles("dense")
    assert setup.head_seconds(dense_stats, kernel="ours", info=dense_info) == pytest.approx(
        2363 ** 2 * 4 * 128 ** 3 / cm.hopper_rates().rate("ours"), rel=1e-9)
    assert set(cm.svg_overhead_seconds(setup.replace(kernel="flash"))) == {"profiling", "layout"}


def test_an_h100_row_pays_its_own_hbm_bandwidth_and_the_h200_rates_for_the_rest():
    """An H200 rate prices an H100 unchanged (one GH100 die), the memory-bound ops at each GPU's own HBM bandwidth
    (NVIDIA's H100 SXM page: 3.35 TB/s; H200 SXM page: 4.8 TB/s), by hand at 480p for the gated residual adds:
    3 per layer, 40 layers, each reading two bfloat16 L x 5120 tensors and writing one (6 bytes per element), at
    the prior memory efficiency 0.8.  Attention and the matmuls (compute-bound) cost the same on both."""
    eff = cm.family_efficiency("hopper")["efficiency"]
    h100, h200 = (cm.forward_breakdown(cm.calibrated_setup("wan2.1-14b", "480p", d, chips=1)) for d in ("h100", "h200"))
    residual_bytes = 3 * 40 * 32760 * 5120 * 6
    assert h100["residual"] == pytest.approx(residual_bytes / (3.35e12 * eff.memory), rel=1e-9)
    assert h200["residual"] == pytest.approx(residual_bytes / (4.8e12 * eff.memory), rel=1e-9)
    assert h100["self_attention"] == h200["self_attention"] and h100["ffn_in"] == h200["ffn_in"]
    # the H100's extra seconds are its memory-bound ops' bytes at the slower bandwidth, and no more
    memory_bound = [k for k in h200 if h100[k] != h200[k]]
    assert "residual" in memory_bound and "qkv_proj" not in memory_bound
    assert all(h100[k] / h200[k] == pytest.approx(4.8 / 3.35, rel=1e-9) for k in memory_bound)
