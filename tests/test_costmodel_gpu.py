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
    assert a100.sparse_kernel == "flex" and pricing(a100, point_setup(a100)).count("flash work") == 2

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


def test_eager_passes_of_each_code_path_by_hand():
    """Bytes per hidden element per layer, summed by hand from the source lines (docs/costmodel.md, "Eager PyTorch
    passes"; D = 5120, F = 13824, head_dim 128: a RoPE table pass of b bytes per head_dim element is b x 128 / D)."""
    from svgtpu.costmodel.eager import CODE_PATHS
    model = cm.get_model("wan2.1-14b")
    D, F = 5120, 13824
    table = 128 / D
    # diffusers' Wan block: three norms' hidden_states.float() (2+4) and FP32LayerNorm (4+4) and .type_as (4+2); two
    # modulations (4+4, 4+4); q, k and cross q RMSNorm (6, 8, 4, 6, 6, 4); RoPE q, k: float64 (2+8), complex
    # multiply (8+8), table read (8), .type_as (8+2); cross residual (4+2); GELU over F (2+2); two gated adds:
    # .float() (6), attn * gate (2+4) or ff.float() (6) then * gate (4+4), + (8+4), .type_as (6)
    diffusers = (3 * 6 + 3 * 8 + 3 * 6 + 2 * 16 + 3 * 34 + 2 * (10 + 16 + 10) + 2 * 8 * table + 6 + 4 * F / D
                 + (6 + 6 + 12 + 6) + (6 + 6 + 8 + 12 + 6))
    # Wan's reference, one GPU (float32 residual, float32 norm weights): self-attention side 316 (norm1 and
    # modulation 24, q/k/v casts 18, two RMSNorms 2 x 38, two rope_apply 2 x 72, flash prep 24 and output 6, o cast
    # 6, gated add 18), the rest 128 + GELU (norm3 8, cross q cast 6, RMSNorm 38, flash 12, o cast 6, residual 10,
    # norm2 and modulation 24, ffn cast 6, gated add 18), the RoPE table cat (8 + 8) for q and k
    reference = 316 + 128 + 4 * F / D + 2 * 16 * table
    # multi-GPU (FSDP bfloat16 weights, xdit's rope_apply, no flash casts): 24 + 18 + 2 x 36 + 2 x 70 + 12 + 18
    # on the self side and five permute copies around the Ulysses all-to-alls (5 x 4), 8 + 6 + 36 + 10 + 24 + 6 +
    # 18 + GELU on the rest, RoPE tables: 2 x (24 + 8)
    usp = 284 + 20 + 108 + 4 * F / D + 2 * 32 * table
    # SVG's processor on the same block: its RoPE in place (2 + 2 for q and k) instead of diffusers' float64 one,
    # q, k and v made contiguous (3 x (2 + 2)), the output's transpose copied (2 + 2)
    svg = diffusers - 2 * (10 + 16 + 10) - 2 * 8 * table + 2 * 4 + 3 * 4 + 4
    # FastVideo: norm1 and modulation to bfloat16 (6 + 8 + 8 + 8 + 6); three RMSNorms (6, 8, 4, 8, 6, 4); RoPE
    # per q or k 50 (halves .float() 4 x 3, products 4 x 4, - and + 2 x 6, .type_as 2 x 3, stack 4) and its
    # float32 cos and sin read four times (4 x 2 per head_dim element); cat([q, k, v]) 3 x 4; the self residual
    # with the cross norm, all float32 until two casts (6 + 10 + 8 + 8 + 8 + 6 + 6); the cross residual with the
    # ffn norm (4 + 6 + 6 + 8 + 6 + 6 + 8 + 6); GELU; the mlp residual (6 + 10 + 6)
    fastvideo = (36 + 3 * 36 + 2 * 50 + 2 * 8 * table + 12 + 52 + 50 + 4 * F / D + 22)
    got = {name: p.bytes_per_token(model) / D for name, p in CODE_PATHS.items()}
    assert got == pytest.approx({"wan-reference": reference, "wan-usp-fsdp": usp, "diffusers": diffusers,
                                 "svg-processor": svg, "fastvideo": fastvideo}, rel=1e-12)
    # image-to-video adds Wan's second cross-attention call: q half and output cast (6 + 6), x + img_x (8 + 4)
    assert CODE_PATHS["wan-reference"].bytes_per_token(model, image=True) / D == pytest.approx(reference + 24)


def test_eager_passes_replace_the_fused_ops_at_the_gpus_bandwidth():
    """An H100 running Wan's reference code on one GPU at 480p (32,760 tokens): the fused elementwise ops (the
    model's count for our JAX block) are gone, the eager passes cost their bytes at 3.35 TB/s x 0.8, and each matmul
    weight is read in float32 and written in bfloat16 once per forward (8 D^2 + 2 D F per block, 40 blocks, and the
    patch embedding and head, 64 x D each).  Matmuls and attention are unchanged; the H200 fit reads our own block
    (no code path), so its efficiency is the same."""
    from svgtpu.costmodel.eager import CODE_PATHS
    base = cm.calibrated_setup("wan2.1-14b", "480p", "h100", chips=1)
    fused = cm.forward_breakdown(base)
    eager = cm.forward_breakdown(base.replace(code_path="wan-reference"))
    assert not {"residual", "rope", "gelu", "norm_modulate"} & set(eager)
    assert eager["qkv_proj"] == fused["qkv_proj"] and eager["self_attention"] == fused["self_attention"]
    bandwidth = 3.35e12 * base.efficiency.memory
    passes = CODE_PATHS["wan-reference"].bytes_per_token(cm.get_model("wan2.1-14b")) * 32760 * 40
    weights = 40 * (8 * 5120 ** 2 + 2 * 5120 * 13824) + 2 * 64 * 5120
    eager_s = sum(v for k, v in eager.items() if k.startswith("eager"))
    assert eager_s == pytest.approx((passes + 6 * weights) / bandwidth, rel=1e-9)
    # eight GPUs of the multi-GPU path: each rank its eighth of the tokens, but the RoPE tables over all of them
    one, eight = (cm.forward_breakdown(cm.calibrated_setup("wan2.1-14b", "720p", "h100", chips=n)
                                       .replace(code_path="wan-usp-fsdp")) for n in (1, 8))
    full = "eager: rope freqs cat + pad_freqs cat (all tokens, every rank)"
    assert eight[full] == pytest.approx(one[full], rel=1e-12)
    assert eight["eager: rope stack"] == pytest.approx(one["eager: rope stack"] / 8, rel=1e-12)
    # the Hopper fit reads our own fused JAX block: no code path there
    from svgtpu.costmodel.validate import measured_block_setup
    assert measured_block_setup("hopper", base.efficiency).code_path is None


def test_a_code_path_outside_the_table_is_refused():
    from svgtpu.errors import BadInput
    with pytest.raises(BadInput, match="code_path must be one of wan-reference"):
        cm.calibrated_setup("wan2.1-14b", "480p", "h100", chips=1).replace(code_path="wan-compiled")


def test_an_a100_row_by_hand_at_the_published_a100_rates():
    """The Wan README's one-A100 720p t2v row by hand at the two published A100 measurements (docs/costmodel.md,
    "The A100's efficiencies"): FlashAttention-2's forward at 73 % of the A100 SXM's 312 TFLOP/s (Dao 2023, arXiv
    2307.08691) over 40 heads of ceil(75600/128)^2 = 591^2 tiles of 4*128^3 flops, plus each of the 591 q rows
    reading its Q block and writing its O block (2 x 128 x 128 bfloat16) at 2.039 TB/s and the memory efficiency
    0.8 (the A100 is one core to the model: its thread blocks share the chip); the FFN's first matmul, 75600 x 5120
    @ 5120 x 13824, at 271.2 TFLOP/s (the maximum-achievable-matmul table's A100 SXM figure).
    No calibration point or run: nothing fitted."""
    fit = cm.family_efficiency("ampere")
    assert fit["calibrated_on"] is None and fit["fitted"] is None
    assert "271.2/312" in fit["source"] and "FlashAttention-2" in fit["source"]
    eff = fit["efficiency"]
    assert (eff.matmul, eff.attention, eff.memory) == pytest.approx((271.2 / 312, 0.73, 0.8), rel=1e-12)
    point = next(p for p in cm.published_points() if p.id == "wan-readme-a100x1-wan2.1-14b-t2v-720p")
    setup = point_setup(point, eff)
    assert (setup.kernel, setup.block_q, setup.block_kv, setup.geometry.L, setup.chips) == ("flash", 128, 128, 75600, 1)
    parts = cm.forward_breakdown(setup)
    tiles = 591 ** 2 * 4 * 128 ** 3 / (0.73 * 312e12)
    rows = 591 * 2 * 128 * 128 * 2 / (2.039e12 * 0.8)
    assert parts["self_attention"] / 40 == pytest.approx(40 * (tiles + rows), rel=1e-9)
    assert parts["ffn_in"] / 40 == pytest.approx(2 * 75600 * 5120 * 13824 / 271.2e12, rel=1e-9)
    assert pricing(point, setup) == "flash: flash work at attention efficiency 0.73"
    # the Hopper family keeps its own fit on the committed H200 block, untouched by the A100's sources
    assert "source" not in cm.family_efficiency("hopper")


def test_gpu_stages_are_the_measured_ones_scaled_by_hand():
    """LightX2V's one-H100 stage timers (ModelTC/LightX2V c3b0d634, DisaggSplitDeploy.md: Wan 2.1 14B, 480x832, 81
    frames, CFG: VAE decode 2.25 s, VAE encode 1.90 s, CLIP 0.68 s, umT5 0.17 s) price that run exactly; by hand
    elsewhere: every convolution's output voxels scale with the latent frame, (45 x 80) / (30 x 52) = 3600 / 1560 from
    480p to 720p; an A100 by the HBM bandwidths (NVIDIA datasheets: H100 SXM 3.35 TB/s, A100 80 GB SXM 2.039 TB/s);
    umT5 by its tokens (no CFG: one prompt of the two); a sharded VAE over the GPUs."""
    run = cm.calibrated_setup("wan2.1-14b", "480p", "h100", chips=1, vae_sharded=False, image_encoder="vae+clip")
    assert cm.stage_seconds(run) == pytest.approx(
        {"text_encoder": 0.17, "image_encoder": 0.68, "vae_encode": 1.90, "vae_decode": 2.25, "host": 50 * 0.02})
    a100 = cm.calibrated_setup("wan2.1-14b", "720p", "a100", chips=1, cfg=False, vae_sharded=False,
                               image_encoder="vae+clip")
    bandwidth, frame = 3.35 / 2.039, 3600 / 1560
    got = cm.stage_seconds(a100)
    assert got["vae_decode"] == pytest.approx(2.25 * frame * bandwidth) == pytest.approx(8.5308, abs=1e-4)
    assert got["vae_encode"] == pytest.approx(1.90 * frame * bandwidth)
    assert got["image_encoder"] == pytest.approx(0.68 * bandwidth)
    assert got["text_encoder"] == pytest.approx(0.17 / 2 * bandwidth)
    sharded = cm.stage_seconds(cm.calibrated_setup("wan2.1-14b", "720p", "a100", chips=4, cfg=False, vae_sharded=True,
                                                   image_encoder="vae+clip"))
    assert sharded["vae_decode"] == pytest.approx(got["vae_decode"] / 4)
    assert sharded["vae_encode"] == pytest.approx(got["vae_encode"] / 4)
    assert sharded["text_encoder"] == pytest.approx(got["text_encoder"])
    words = cm.model_video(run)["stage_instruments"]
    assert all("ModelTC/LightX2V c3b0d634" in words[k] for k in ("text_encoder", "image_encoder", "vae_encode",
                                                                  "vae_decode"))
    assert "bfloat16" in words["vae_decode"] and "one rank" in words["vae_decode"]


def test_tpu_stages_stay_counted():
    """A TPU's umT5 is still its FLOPs at the matmul rate (2 x 5.7e9 weights x 512 tokens x 2 prompts), not the GPU
    measurement."""
    setup = cm.calibrated_setup("wan2.1-14b", "720p", "v6e", chips=8)
    rate = setup.device.matmul_flops * setup.efficiency.matmul
    assert cm.stage_seconds(setup)["text_encoder"] == pytest.approx(2 * 5.7e9 * 512 * 2 / rate)
    assert "LightX2V" not in " ".join(cm.model_video(setup)["stage_instruments"].values())


def _svg1_blocks(L: int, F: int, W: int) -> int:
    """Blocks of 128 x 128 SVG1's FlexAttention block mask computes (svg/models/wan/utils.py temporal_mask_mod at
    95acd8a: |q - kv| <= W or kv < F), by brute force over each block's pairs; the tail block's padded rows and
    columns are not pairs."""
    import numpy as np
    n, idx = -(-L // 128), np.arange(128)
    computed = 0
    for i in range(n):
        q = (i * 128 + idx)[:, None]
        q = q[q[:, 0] < L]
        lo, hi = max(0, (i * 128 - W) // 128), min(n - 1, (i * 128 + 127 + W) // 128)
        kv_blocks = set(range(lo, hi + 1)) | set(range(-(-F // 128)))
        for j in kv_blocks:
            k = (j * 128 + idx)[None, :]
            k = k[:, k[0] < L]
            computed += bool(((np.abs(q - k) <= W) | (k < F)).any())
    return computed


def test_svg1_band_from_its_sparsity_by_hand():
    """SVG1's sparsity_to_width (svg/models/wan/utils.py at 95acd8a and 5efea72, context_length 0): the band alone
    keeps 0.25 of the pairs, W = L (1 - sqrt(0.75)); 720p: L = 21 * 3600 = 75600, W = 10128.48..., rounded up to
    80 * 128 = 10240 tokens (480p: 21 * 1560 = 32760 tokens, 4389.01 -> 35 * 128 = 4480).  The default recipe keeps
    the package's rule (the whole mask keeps its kept fraction)."""
    from svgtpu.costmodel.pipeline import RECIPE_BAND_RULES, recipe_fields
    from svgtpu.masks.core import svg_mask
    from svgtpu.recipes import DEFAULT_RECIPE, RECIPES
    assert 75600 * (1 - 0.75 ** 0.5) == pytest.approx(10128.48, abs=0.01)
    assert 32760 * (1 - 0.75 ** 0.5) == pytest.approx(4389.01, abs=0.01)
    for name, W in (("svg1-t2v-14b-720p", 10240), ("svg1-t2v-14b-480p", 4480), ("svg1-i2v-14b-720p", 10240)):
        recipe = RECIPES[name]
        fields = recipe_fields(recipe)
        assert name in RECIPE_BAND_RULES and fields["kept"] is None
        assert svg_mask(recipe.geometry, fields["multiplier"]).window == W
    assert DEFAULT_RECIPE.name not in RECIPE_BAND_RULES
    assert recipe_fields(DEFAULT_RECIPE)["multiplier"] is None and recipe_fields(DEFAULT_RECIPE)["kept"] == DEFAULT_RECIPE.kept


def test_a_published_svg1_row_runs_svg1s_own_mask():
    """SVG's README SVG rows ran SVG1's mask (recipe svg1-*, pipeline.RECIPE_BAND_RULES): 720p W = 10240,
    F = 3600; 480p W = 4480, F = 1560 (test_svg1_band_from_its_sparsity_by_hand); their flex tiles are that mask's computed blocks, counted here by
    brute force (103055 and 19698 a head), not the package's band of density 0.25 (87950 and 16653)."""
    for pid, L, F, W in (("svg-readme-h100-wan2.1-14b-720p-svg", 75600, 3600, 10240),
                         ("svg-readme-a100-wan2.1-14b-480p-svg", 32760, 1560, 4480)):
        point = next(p for p in cm.published_points() if p.id == pid)
        setup = point_setup(point)
        stats, info = setup.tiles("svg")
        assert setup.kept is None and info.window == W
        assert stats.full + stats.partial == _svg1_blocks(L, F, W)
    assert _svg1_blocks(75600, 3600, 10240) == 103055 and _svg1_blocks(32760, 1560, 4480) == 19698


def test_an_a100_svg_row_prices_flex_at_the_published_share_of_flashattention2():
    """SVG's README A100 720p SVG row by hand: SVG ran torch 2.5.1 (svg-project/Sparse-VideoGen 95acd8a
    requirements.txt), whose FlexAttention forward the PyTorch blog puts at 90 % of FlashAttention-2's on an A100
    (pytorch.org/blog/flexattention, 2024-08-07): a sparse head is its 103055 computed 128 x 128 blocks of 4*128^3
    flops at 0.90 x 0.73 x 312 TFLOP/s, plus its 591 q rows' Q and O blocks (2 x 128 x 128 bfloat16) at 2.039 TB/s
    x 0.8; a dense head of the same row stays at FlashAttention-2's 0.73."""
    point = next(p for p in cm.published_points() if p.id == "svg-readme-a100-wan2.1-14b-720p-svg")
    setup = point_setup(point, cm.family_efficiency("ampere")["efficiency"])
    rows = 591 * 2 * 128 * 128 * 2 / (2.039e12 * 0.8)
    stats, info = setup.tiles("svg")
    assert setup.head_seconds(stats, info=info) == pytest.approx(
        103055 * 4 * 128 ** 3 / (0.90 * 0.73 * 312e12) + rows, rel=1e-9)
    dense, dense_info = setup.tiles("dense")
    assert setup.head_seconds(dense, kernel="flash", info=dense_info) == pytest.approx(
        591 ** 2 * 4 * 128 ** 3 / (0.73 * 312e12) + rows, rel=1e-9)
    said = pricing(point, setup)
    assert "flash: flash work at attention efficiency 0.73;" in said and "flex: flash work at attention efficiency " \
        "0.657 (0.90 of FlashAttention-2's" in said
    # Hopper's Flex keeps its measured rate: the published H100 figure (~1.25x FlashAttention-2) matches it
    h100 = next(p for p in cm.published_points() if p.id == "svg-readme-h100-wan2.1-14b-720p-svg")
    assert "flex: 438 TFLOP/s" in pricing(h100, point_setup(h100, cm.family_efficiency("hopper")["efficiency"]))


def test_svgs_own_work_per_sparse_layer_is_its_codes_bytes_by_hand():
    """SVG's README H100 720p SVG row (code path svg-processor, svg-project/Sparse-VideoGen 95acd8a
    svg/models/wan/attention.py and placement.py), one sparse layer, 40 heads of L = 75600 tokens, head width 128,
    64 sampled rows (--num_sampled_rows 64), bfloat16, counted by hand from sample_mse and attention_core_logic:
    profiling reads K once and V three times (4 x 2 bytes x L x 128 a head) and makes 16 passes over the 64 x L
    scores (16 x 2 bytes x 64 x L a head); layout writes four zeros_like buffers and copies Q, K, V and O of every
    head (4 + 4 x 2 = 12 passes of 2 bytes x L x 128 a head); at the H100's 3.35 TB/s x 0.8.  The share of heads
    profiled temporal does not enter (every head is copied)."""
    point = next(p for p in cm.published_points() if p.id == "svg-readme-h100-wan2.1-14b-720p-svg")
    setup = point_setup(point, cm.family_efficiency("hopper")["efficiency"])
    assert (setup.code_path, setup.profile_rows) == ("svg-processor", 64)
    bandwidth = 3.35e12 * 0.8
    profiling = 40 * (4 * 2 * 75600 * 128 + 16 * 2 * 64 * 75600) / bandwidth
    layout = 40 * 12 * 2 * 75600 * 128 / bandwidth
    assert cm.svg_overhead_seconds(setup) == pytest.approx({"profiling": profiling, "layout": layout}, rel=1e-12)
    assert cm.svg_overhead_seconds(setup.replace(temporal_fraction=1.0)) == cm.svg_overhead_seconds(setup)
    assert 6.9e-3 < profiling + layout < 7.0e-3
    # without the code, the generic count (half the heads' layout, K and V read once)
    generic = cm.svg_overhead_seconds(setup.replace(code_path=None))
    assert generic["layout"] == pytest.approx(40 * 0.5 * 4 * 2 * 2 * 75600 * 128 / bandwidth, rel=1e-12)


def test_in_block_over_alone_by_hand():
    """A hand-worked run: a 40-head block whose cuDNN self-attention took 2.0 s against 0.4 s for 8 heads alone
    (2.0 / (0.4 x 5) = 1), ours 3.3 s against 0.6 s (1.1); SVG's row (SVG's own work in it) and a skipped row
    are not compared, nor a block without an attention section."""
    from svgtpu.costmodel.against_gpu import in_block_over_alone
    data = {"attention": [{"geometry": "720p", "heads": 8, "rows": [
        {"variant": "cudnn-dense", "status": "ok", "median_s": 0.4}, {"variant": "ours-dense", "status": "ok",
                                                                       "median_s": 0.6},
        {"variant": "ours-aligned-fast", "status": "ok", "median_s": 0.2}]}],
        "block": [{"geometry": "720p", "model": "wan2.1-14b", "rows": [
            {"attention": "dense-cudnn", "status": "ok", "attention_s": 2.0},
            {"attention": "dense-ours", "status": "ok", "attention_s": 3.3},
            {"attention": "svg-aligned-ours", "status": "ok", "attention_s": 1.5}]},
            {"geometry": "480p", "model": "wan2.1-14b", "rows": [
                {"attention": "dense-cudnn", "status": "ok", "attention_s": 1.0}]},
            {"geometry": "720p", "model": "wan2.1-1.3b", "rows": [   # 12 heads: 0.6 / (0.4 x 12 / 8)
                {"attention": "dense-cudnn", "status": "ok", "attention_s": 0.6},
                {"attention": "dense-ours", "status": "skipped", "reason": "time budget"}]}]}
    assert in_block_over_alone(data) == {"720p": {"dense-cudnn": pytest.approx(1.0), "dense-ours": pytest.approx(1.1)},
                                         "720p wan2.1-1.3b": {"dense-cudnn": pytest.approx(1.0)}}


def test_the_run_shows_cudnn_slower_inside_the_1440p_block_and_ours_not():
    """The committed run's own numbers (docs/costmodel.md, "The H200 1440p miss"): cuDNN's 40-head self-attention in
    the 1440p block took more than 5 % over five times its 8-head time alone; ours took within 1 % of it."""
    r1440 = _block("1440p")
    alone = {r["variant"]: r["median_s"] for r in next(a for a in RUN["attention"] if a["geometry"] == "1440p")["rows"]
             if r["status"] == "ok"}
    inside = {r["attention"]: r["attention_s"] for r in r1440["rows"]}
    cudnn = inside["dense-cudnn"] / (5 * alone["cudnn-dense"])
    ours = inside["dense-ours"] / (5 * alone["ours-dense"])
    assert cudnn > 1.05 and abs(ours - 1) < 0.01
    assert cm.against_h200()["in_block_over_alone"]["1440p"] == {"dense-cudnn": pytest.approx(cudnn),
                                                                 "dense-ours": pytest.approx(ours)}
