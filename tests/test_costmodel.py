"""The cost model against independent checks: hand-worked FLOPs, tile, mesh and kernel-work counts,
physical invariants (more tiles never faster, the fast path never slower, CFG doubles the passes),
SVG's own schedule rounding, the compiled whole-kernel cycles (a fixture of the compiled tile table),
published measured timings within a stated error, and the `svgtpu costmodel` CLI contract.

The suite runs on priors (tests/conftest.py hides figures/compiled_tiles.json); tests that need the
compiled evidence load tests/data/compiled_tiles_fixture.json themselves."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from svgtpu import costmodel as cm
from svgtpu.cli import main
from svgtpu.costmodel import realized
from svgtpu.masks.tiles import TileStats
from svgtpu.geometry import Tile

TINY = cm.ModelConfig("tiny", layers=2, dim=4, heads=2, head_dim=2, ffn=8, text_len=3, patch_in=5, source="test")
FAKE = cm.DeviceSpec("fake", matmul_flops=1e12, hbm_bandwidth=1e11, hbm_bytes=1e9, vector_ops=1e11,
                     exp_ops=1e10, matmul_tile=4, source="test")


FIXTURE = Path(__file__).with_name("data") / "compiled_tiles_fixture.json"


@pytest.fixture(scope="module")
def table():
    return cm.load_compiled(FIXTURE)


def cm_recipe(name):
    from svgtpu.recipes import get_recipe
    return get_recipe(name)


#: The tile of the fixture's whole-kernel cycles (an older kernel's, before the production tile moved to 3072).
FIXTURE_TILE = {"block_q": 3024, "block_kv": 2048}


def wan_setup(resolution="720p", device="v6e", **kw):
    return cm.calibrated_setup("wan2.1-14b", resolution, device, **kw)


def test_flops_equal_hand_count():
    # L = 6 tokens, D = 4, 2 heads of 2, FFN 8, 3 text tokens, 5 values per patch, 2 layers
    per_layer = {"qkv_proj": 2 * 6 * 4 * 12, "o_proj": 2 * 6 * 4 * 4, "cross_q_proj": 2 * 6 * 4 * 4,
                 "cross_kv_proj": 2 * 3 * 4 * 8, "cross_attention": 2 * 2 * 6 * 3 * 4, "cross_o_proj": 2 * 6 * 4 * 4,
                 "ffn_in": 2 * 6 * 4 * 8, "ffn_out": 2 * 6 * 8 * 4, "self_attention": 2 * 2 * 36 * 2 * 2}
    expected = {k: 2 * v for k, v in per_layer.items()}
    expected.update(patch_embed=2 * 6 * 5 * 4, head=2 * 6 * 4 * 5)
    assert cm.forward_flops(TINY, 6) == expected
    assert TINY.params == 2 * (8 * 16 + 2 * 4 * 8) + 2 * 5 * 4


def test_toy_dit_adapter_and_public_param_counts():
    from svgtpu.toy.dit import DiTConfig

    config = DiTConfig(heads=3, head_dim=64, depth=2, mlp_ratio=2, context_tokens=5)
    toy = cm.ModelConfig.from_dit(config)
    assert (toy.layers, toy.dim, toy.heads, toy.head_dim, toy.ffn, toy.text_len, toy.patch_in) == \
        (2, 192, 3, 64, 384, 5, config.channels * 4)
    # the checkpoints' names: 14B, 1.3B, 5B weights (within the few % of biases, norms, embeddings)
    for name, params in (("wan2.1-14b", 14e9), ("wan2.1-1.3b", 1.3e9), ("wan2.2-5b", 5e9)):
        assert cm.get_model(name).params == pytest.approx(params, rel=0.08)


def test_wan_14b_flops_match_independent_envelope():
    # ~8e18 FLOPs per 1440p video (50 steps x 2 CFG passes), dominated by self-attention
    flops = cm.forward_flops(cm.get_model("wan2.1-14b"), cm.get_geometry("1440p").L)
    assert 7e18 < 100 * sum(flops.values()) < 9.5e18
    assert flops["self_attention"] == 4 * 302400 ** 2 * 128 * 40 * 40


def test_vae_decode_flops_match_independent_audit_and_scale_with_pixels():
    # an independent audit of Wan's VAE decoder put 1440p at ~2.6e15 FLOPs
    f1440, f720 = (cm.vae_decode_flops(cm.get_geometry(r)) for r in ("1440p", "720p"))
    assert f1440 == pytest.approx(2.6e15, rel=0.05)
    assert 4.0 < f1440 / f720 < 4.3   # 4x the pixels, plus the per-frame attention of the middle block
    # Wan's decoder by hand: WanVAE_'s conv2, conv_in, 2 middle res blocks (4 convs) around the attention's
    # q/k/v and output projections (2), stage 384->384 (6 + time up + space up), 192->384 (7 with the shortcut,
    # + time up + space up), 192->192 (6 + space up), 96->96 (6), conv_out = 39
    layers = cm.vae_decoder_layers(cm.get_geometry("1440p"))
    assert len(layers) == 39
    assert layers[-1] == (27, 96, 3, 81 * 1440 * 2560)   # 81 frames of 2560 x 1440 RGB out


def test_tile_units_hand_count():
    eff = cm.Efficiency(1.0, 0.5, 1.0, 1.0, 1.0)
    # 4 x 8 tile, d = 2 on a 4-wide MXU: QK^T and PV each 2*32*2 / (1e12 * 2/4) = 2.56e-10;
    # VPU 32 * vector_ops / 1e11; EUP 32 / 1e10; HBM K and V blocks 2*8*2*2 B / 1e11
    kernel = cm.KernelWork(vector_ops=4, exp_ops=1, mask_vector_ops=6)
    u = cm.tile_units(FAKE, eff, kernel, 2, Tile(4, 8), masked=False)
    assert u == pytest.approx({"mxu_qk": 2.56e-10, "mxu_pv": 2.56e-10, "vpu": 1.28e-9, "eup": 3.2e-9, "hbm": 6.4e-10})
    assert cm.tile_units(FAKE, eff, kernel, 2, Tile(4, 8), masked=True)["vpu"] == pytest.approx(3.2e-9)
    assert cm.tile_seconds(FAKE, eff, kernel, 2, Tile(4, 8), masked=False) == pytest.approx(3.2e-9 / 0.5)
    slow_mxu = dataclasses.replace(FAKE, matmul_flops=1e10, exp_ops=1e12)
    assert cm.tile_seconds(slow_mxu, eff, kernel, 2, Tile(4, 8), masked=True) == pytest.approx(2 * 2.56e-8 / 0.5)
    # a dual-core chip runs one tile on one core: half the chip's rates
    dual = dataclasses.replace(FAKE, cores=2)
    assert cm.tile_units(dual, eff, kernel, 2, Tile(4, 8), masked=False)["eup"] == pytest.approx(6.4e-9)


def test_head_time_reads_the_plan_grid_steps_and_cores():
    # dense 1440p at 3024 x 2048: ceil(302400 / 3024) = 100 q rows, ceil(302400 / 2048) = 148 kv columns,
    # the last column holds 302400 - 147 * 2048 = 1344 real keys: partial; no empty rows
    stats, info = cm.mask_tiles(cm.get_geometry("1440p"), "dense", Tile(3024, 2048))
    assert (stats.full, stats.partial) == (100 * 147, 100)
    assert (info.grid_steps, info.empty_row_steps, info.q_rows) == (14800, 0, 100)
    # every grid step pays the fixed step cost, empty-row steps included
    stepped = dataclasses.replace(FAKE, grid_step_seconds=1e-6)
    head = lambda dev, empty: cm.attention_head_seconds(TileStats(5, 2, 3), dev, cm.Efficiency(), 2, Tile(4, 8),  # noqa: E731
                                                        fast_path=True, q_rows=2, work=cm.FLASH, empty_row_steps=empty)
    assert head(stepped, 3) - head(FAKE, 3) == pytest.approx((5 + 2 + 3) * 1e-6)
    # a dual-core chip (v5p) splits a layer's heads over its cores: 5 heads -> 3 on the busier core
    v5p = wan_setup("720p", device="v5p")
    per_head = cm.attention_head_seconds(*v5p.tiles("dense")[:1], v5p.device, v5p.efficiency, 128, v5p.setting.tile,
                                         fast_path=True, q_rows=v5p.tiles("dense")[1].q_rows,
                                         work=v5p.kernel_work)
    assert v5p.heads_per_chip == 5
    assert cm.forward_breakdown(v5p)["self_attention"] == pytest.approx(40 * 3 * per_head)


def test_kernel_work_counted_from_the_jaxpr_matches_a_hand_count():
    # full tile, per score: scale, row max, subtract max, row sum, cast to bf16 for PV = 5 VPU ops,
    # exp on the EUP; per q row, once per update on [block_q, 128] lanes: new max, max difference,
    # rescale l, add, rescale acc, add acc (6 VPU) and exp(max difference) (1 EUP)
    # (the query-major layout, the one this hand count follows; the key-major default below)
    for width in (512, 256):
        k = cm.counted_work(128, "bfloat16", width, layout="query-major")
        assert k.vector_ops == pytest.approx(5 + 6 * 128 / width)
        assert k.exp_ops == pytest.approx(1 + 128 / width)
        # masking a band+sink tile from iota (svgtpu.kernels.block_sparse.BandTile): this band is wide enough
        # that a tile crosses one edge of it, so one compare and one select per score (2); the key operand
        # (side * k, padded and sink keys moved) once per key and the query operand once per query add a few
        # ops per row or column of the tile
        assert 2 <= k.mask_vector_ops < 2 + 16 / width
    assert cm.counted_work(128, "float32", 512, "query-major").vector_ops == pytest.approx(4 + 6 * 128 / 512)  # no cast
    # key-major, the default: the key sums come out of the PV matmul (no row sum on the VPU) and the statistics
    # are 8 rows per 128 queries, so fewer vector ops per score than the query-major hand count
    assert cm.counted_work(128, "bfloat16", 512).vector_ops < 5 + 6 * 128 / 512
    # the compiled kernel agrees: libtpu's post-lower-to-llo dump of this kernel's full-tile body at
    # 512 x 512 (bf16, Mosaic, 2026-11-30) holds 320 vexp for 256 score vregs + 64 row vregs: 1.25 per score
    assert cm.counted_work(128, "bfloat16", 512, "query-major").exp_ops == pytest.approx(320 / 256)


def test_attention_ceiling_from_units():
    kernel = cm.counted_work(128, "bfloat16", 512)
    v6e = cm.attention_ceiling(cm.get_device("v6e"), kernel)
    # d = 128 fills half of each 256-wide MXU: QK^T and PV together at half of 918 TFLOP/s
    assert v6e["seconds_per_score"]["mxu_qk"] == pytest.approx(2 * 128 / (918e12 * 0.5))
    assert v6e["attention_flops_ceiling"] == pytest.approx(459e12) and v6e["bound_unit"] == "mxu"
    # the VPU: 6.5 ops/score at 4 VALU slots x 1024 lanes x the 1.75 GHz clock (16-row pushes every 8 cycles
    # on 2 MXUs): below the half-filled MXU, but above it at full fill (4 d flops per score at 918 TFLOP/s) --
    # at d = 128 the width penalty is what keeps attention MXU-bound
    assert v6e["seconds_per_score"]["vpu"] == pytest.approx(6.5 / (4 * 1024 * 918e12 / 524288))
    full = cm.attention_ceiling(dataclasses.replace(cm.get_device("v6e"), matmul_tile=None), kernel)
    assert full["bound_unit"] == "vpu" and full["seconds_per_score"]["vpu"] > 4 * 128 / 918e12
    assert cm.attention_ceiling(cm.get_device("v5p"), kernel)["fraction_of_matmul_peak"] == pytest.approx(1.0)


def test_mesh_all_to_all_hand_count():
    v6e = cm.get_device("v6e")
    eff = cm.Efficiency(ici=1.0)
    assert cm.mesh_shape(v6e, 8) == (2, 4)
    # 2x4 without wraparound: 2 links cross the middle, 100 GB/s each way (800 GB/s over 4 ports, 2 ways);
    # 8 * S / 4 bytes cross each way
    S = 1e9
    assert cm.all_to_all_seconds(S, 8, v6e, eff) == pytest.approx(8 * S / 4 / (2 * 100e9))
    # two chips: one link; the same bytes cross it either way
    assert cm.all_to_all_seconds(S, 2, v6e, eff) == pytest.approx(S / 2 / 100e9)
    # a switch: a chip's one-way bandwidth
    assert cm.all_to_all_seconds(S, 8, cm.get_device("h100"), eff) == pytest.approx(S * 7 / 8 / 450e9)
    # ring all-gather on the mesh: two links per chip
    assert cm.all_gather_seconds(8e9, 8, v6e, eff) == pytest.approx(7e9 / 200e9)
    with pytest.raises(ValueError, match="chips must be one of"):
        cm.mesh_shape(v6e, 6)


def test_weights_shard_only_when_replicas_do_not_fit():
    m = cm.memory(wan_setup("1440p"))
    assert m["weights"] == pytest.approx(28.1e9, rel=0.01) and not m["replicas_fit"] and m["weights_sharded"]
    assert cm.weight_gather_seconds(wan_setup("1440p")) > 0
    big = cm.memory(wan_setup("1440p", device="v5p"))
    assert big["replicas_fit"] and not big["weights_sharded"]
    assert cm.weight_gather_seconds(wan_setup("1440p", weights="replicated")) == 0


def test_attention_share_rises_with_resolution_and_attention_grows_quadratically():
    for device in ("v6e", "h100"):
        setup = dataclasses.replace(wan_setup(), device=cm.get_device(device))
        rows = cm.sweep_resolution(setup, ("480p", "720p", "1080p", "1440p"))
        for key in ("attention_share", "attention_share_end_to_end"):
            shares = [r[key] for r in rows]
            assert all(a < b for a, b in zip(shares, shares[1:])), shares
            assert all(0 < s < 1 for s in shares)
    small, large = (cm.forward_breakdown(wan_setup(r))["self_attention"] for r in ("720p", "1440p"))
    assert large / small == pytest.approx((302400 / 75600) ** 2, rel=0.05)


def _random_stats(rng, n=200):
    full, partial, empty = rng.integers(0, 50, size=(3, n))
    return [TileStats(int(f), int(p), int(e)) for f, p, e in zip(full, partial, empty)]


def test_fewer_tiles_and_the_fast_path_never_model_slower():
    seed = 0
    print("seed", seed)
    rng = np.random.default_rng(seed)
    kernel = cm.counted_work(128, "bfloat16", 512)
    for device in cm.DEVICES.values():
        time = lambda s, fast: cm.attention_head_seconds(s, device, cm.Efficiency(), 128, Tile(3024, 2048),  # noqa: E731
                                                         fast_path=fast, q_rows=3, work=kernel)
        for s in _random_stats(rng, 40):
            fewer = TileStats(int(rng.integers(0, s.full + 1)), int(rng.integers(0, s.partial + 1)), s.empty)
            assert time(fewer, True) <= time(s, True)
            assert time(s, True) <= time(s, False)
            if s.partial == 0:
                assert time(s, True) == time(s, False)
    # real masks: a wider SVG band computes more tiles and never models faster
    seconds = [cm.video_seconds(wan_setup(kept=None, multiplier=m), "svg", True) for m in (0.5, 1.0, 2.0)]
    assert seconds[0] <= seconds[1] <= seconds[2] < cm.video_seconds(wan_setup(), "dense", True)


def test_svg_schedule_rounds_like_svg_code_and_chain_multiplies(table):
    setup = wan_setup("1440p", compiled=table)
    # the default recipe (SVG's own Wan T2V-14B script): its dense steps and layers, as svgtpu.recipes counts them
    from svgtpu.recipes import DEFAULT_RECIPE
    assert (setup.dense_steps, setup.dense_layers, setup.heads_per_chip) == (
        DEFAULT_RECIPE.dense_steps, DEFAULT_RECIPE.dense_layers, 5)                # ceil(40 heads / 8 chips)
    head = setup.replace(**cm.recipe_fields(cm_recipe("svg-head-t2v-14b-720p")))
    assert (head.dense_steps, head.dense_layers) == (10, 1)      # floor(0.2 * 50), floor(0.03 * 40)
    small = dataclasses.replace(head, model=cm.get_model("wan2.1-1.3b"))
    assert (small.dense_layers, small.heads_per_chip) == (0, 2)   # floor(0.025 * 30), ceil(12 / 8)
    # all steps dense -> SVG costs exactly the dense time
    assert cm.video_seconds(dataclasses.replace(setup, warmup_steps=1.0), "svg-aligned", True) == \
        pytest.approx(cm.video_seconds(setup, "dense", True))
    # the reported speedup and each step's contribution, against separate video_seconds calls (not model_video's
    # own arithmetic): dense -> svg unaligned -> aligned -> aligned + fast path
    result = cm.model_video(setup)
    seconds = {(kind, fast): cm.video_seconds(setup, kind, fast) for kind, fast in
               (("dense", True), ("svg", False), ("svg-aligned", False), ("svg-aligned", True))}
    assert result["speedup"] == pytest.approx(seconds["dense", True] / seconds["svg-aligned", True])
    c = result["contributions"]
    assert c["sparse_attention"] == pytest.approx(seconds["dense", True] / seconds["svg", False])
    assert c["alignment"] == pytest.approx(seconds["svg", False] / seconds["svg-aligned", False])
    assert c["fast_path"] == pytest.approx(seconds["svg-aligned", False] / seconds["svg-aligned", True])
    assert c["sparse_attention"] > 1 and c["fast_path"] >= 1  # fewer tiles, fewer masked tiles: never slower
    assert result["provenance"] == "modeled-v6e"
    # L = 302400 is no multiple of block_kv = 2048: padded keys make dense Splash-style mask everywhere
    assert result["dense_no_fast_path_seconds"] > result["dense_seconds"]
    # stages add the same seconds to dense and SVG: the DiT-only speedup is the larger one
    assert result["speedup_dit"] > result["speedup"] > 1
    # the static schedule's sparse layer never beats dense x density; the fitted sparse stretch scales its kernel
    assert 0 < result["sparse_layer_efficiency"] * setup.sparse_stretch <= 1.0 + 1e-9


def test_cfg_passes_and_cfg_split():
    setup = wan_setup("720p", parts=frozenset())
    no_cfg = setup.replace(cfg=False)
    assert cm.dit_seconds(setup, "dense", True) == pytest.approx(2 * cm.dit_seconds(no_cfg, "dense", True))
    split = dataclasses.replace(setup, cfg_split=True)
    assert (split.chips_per_pass, split.heads_per_chip, split.sequential_passes) == (4, 10, 1)
    # the same attention work on half the chips, once per step: equal attention time per step
    per_step = lambda s: s.sequential_passes * cm.forward_breakdown(s)["self_attention"]  # noqa: E731
    assert per_step(split) == pytest.approx(per_step(setup))
    with pytest.raises(ValueError, match="cfg_split"):
        dataclasses.replace(no_cfg, cfg_split=True)


def test_parts_switch_terms_off():
    setup = wan_setup("720p", image_encoder="vae+clip")
    stages = cm.stage_seconds(setup)
    assert set(stages) == set(cm.STAGES) and all(v > 0 for v in stages.values())
    bare = dataclasses.replace(setup, parts=frozenset())
    assert sum(cm.stage_seconds(bare).values()) == 0 and cm.communication_seconds(bare) == 0
    assert cm.video_seconds(setup, "dense", True) == pytest.approx(
        cm.dit_seconds(setup, "dense", True) + sum(stages.values()))


def test_published_points_are_cited_and_calibrate_at_most_once_per_family(table):
    points = cm.published_points()
    assert len(points) >= 4
    for p in points:
        assert p.source.startswith("https://") and p.what and p.seconds > 0
    for family in cm.FAMILIES:   # at most one calibration point each
        assert sum(p.role == "calibration" and p.family == family for p in points) <= 1
    # Hopper is calibrated on the committed H200 run's 720p dense blocks (no published point): its three fitted
    # rows come back exactly, and no published Hopper point calibrates anything
    gpu = cm.family_efficiency("hopper")
    assert gpu["calibrated_on"].startswith("2026-12-04-314194b.json") and 0 < gpu["fitted"] <= 1
    assert not any(p.family == "hopper" and p.role == "calibration" for p in points)
    fitted = [r for r in cm.against_h200()["rows"] if (r["geometry"], r["what"], r["quantity"]) in
              {("720p", "dense-cudnn", "attention_s"), ("720p", "dense-ours", "attention_s"), ("720p", "dense-cudnn", "rest_s")}]
    assert len(fitted) == 3 and all(abs(r["error"]) < 1e-6 for r in fitted)
    # the TPU family is calibrated on one MaxDiffusion v6e run, a DiT-only time (its calls are priced from the
    # compiled table: on priors the TPU keeps the prior efficiencies); every other TPU run only validates
    tpu = cm.family_efficiency("tpu", table)
    calib = next(p for p in points if p.id == tpu["calibrated_on"])
    assert calib.device == "v6e" and calib.measures == "dit" and cm.predict_seconds(
        calib, tpu["efficiency"], compiled=table) == pytest.approx(calib.seconds, rel=1e-6)
    assert sum(p.family == "tpu" and p.role == "validation" for p in points) >= 4
    assert cm.family_efficiency("tpu", None)["calibrated_on"] is None
    assert wan_setup(compiled=table).efficiency == tpu["efficiency"]
    assert wan_setup(device="h200").efficiency == gpu["efficiency"]
    # a Setup never looks a calibration up itself: the efficiency is explicit
    with pytest.raises(ValueError, match="efficiency is required"):
        cm.Setup.of(cm.get_model("wan2.1-14b"), cm.get_geometry("720p"), cm.get_device("v6e"))
    # the A100 (Ampere) has no calibration point: FlashAttention-2 reaches a far larger share of its
    # peak than of an H100's, so the H100/H200 number does not carry over
    assert cm.family_efficiency("ampere")["calibrated_on"] is None


def test_validation_flags_the_calibration_twins_and_reports_independent_points_apart():
    result = cm.validate(None)
    rows = {r["id"]: r for r in result["points"]}
    # the same run with another kernel, the same setting on a GPU of the same die, fewer steps: not independent
    for twin in ("maxdiffusion-v6e8-wan2.2-a14b-i2v-720p-flash", "wan-readme-h100x1-wan2.1-14b-t2v-720p",
                 "fastvideo-h200-wan2.1-14b-720p-fa2-dmd", "svg-readme-h100-wan2.1-14b-720p-dense"):
        assert rows[twin]["calibration_related"] and not rows[twin]["independent"], twin
    for other in ("maxdiffusion-v7x16-wan2.1-14b-t2v-720p", "wan-readme-h100x8-wan2.1-14b-t2v-720p",
                  "wan-readme-a100x1-wan2.1-14b-t2v-720p", "svg-readme-h100-wan2.1-14b-480p-dense"):
        assert rows[other]["independent"], other
    independent = [r for r in result["points"] if r["independent"]]
    assert result["independent"]["points"] == len(independent) >= 20
    assert result["independent"]["worst_abs_error"] == max(abs(r["error"]) for r in independent)
    assert result["calibration_related"]["points"] + result["independent"]["points"] == result["validation"]["points"]
    # an independent check of the whole prediction (not its own formula): the 3-step, no-CFG DMD run of the
    # calibration setting times the DiT only, so it is the calibration time x (3 x 1) / (50 x 2) passes
    full = rows["fastvideo-h200-wan2.1-14b-720p-fa2"]
    assert rows["fastvideo-h200-wan2.1-14b-720p-fa2-dmd"]["predicted_s"] == pytest.approx(full["predicted_s"] * 3 / 100)
    # every miss beyond MISS is named in the summary, none left out
    assert {m["id"] for m in result["misses"]} == {r["id"] for r in result["points"]
                                                   if r["role"] != "calibration" and abs(r["error"]) > cm.MISS}
    # published SVG speedups (dense and SVG runs of one setting) predicted within 20 %, not fitted
    assert len(result["speedups"]) >= 2 and all(abs(r["error"]) < 0.20 for r in result["speedups"])


def test_validation_with_the_compiled_table_meets_its_error_budget(table):
    """With the compiled evidence (MXU count and clock from the probe, TPU attention from the tile table)
    every independent TPU validation point, v7x included, is within 20 %; on priors alone, within 30 %.  The GPU
    points are priced from the H200 run's measured rates, calibrated on no published point since 2026-12-04: they
    are reported with every miss named (the test above), not held to a budget.  (The median budget of 10 % over
    all independent points held while Hopper was calibrated on a published FastVideo point; it does not since,
    and the summary reports the median as it is.)"""
    compiled = cm.validate(table)
    tpu = [r for r in compiled["points"] if r["device"] in ("v6e", "v7x")]
    assert all(r["attention_pricing"].startswith("compiled tile table") for r in tpu)
    assert any(r["device"] == "v7x" and r["independent"] for r in compiled["points"])
    errors = [abs(r["error"]) for r in tpu if r["independent"]]
    assert max(errors) <= 0.20, compiled["independent"]
    assert compiled["tpu_clocks"]["v6e"]["clock_ghz"] == pytest.approx(918e12 / 524288 / 1e9)
    priors = cm.validate(None)
    assert max(abs(r["error"]) for r in priors["points"] if r["independent"] and r["device"] in ("v6e", "v7x")) <= 0.30
    assert priors["compiled_table"] is None
    hopper = [r for r in compiled["points"] if r["device"] in ("h100", "h200")]
    # each kernel the run ran at its own measured rate: FlashAttention-2, and FlexAttention for SVG's sparse layers
    assert all(r["attention_pricing"].startswith("flash: ") and "measured rate" in r["attention_pricing"]
               and ("flex: " in r["attention_pricing"]) == (r["variant"] == "svg") for r in hopper)


def test_sensitivity_refits_the_calibration_at_every_end_and_leaves_choices_out(table):
    setup = wan_setup(compiled=table)
    band, result = cm.sensitivity(setup), cm.model_video(setup)
    for key in ("attention_share", "attention_share_end_to_end", "speedup", "dense_minutes", "svg_minutes",
                "saved_minutes"):
        assert band[key]["min"] <= result[key] <= band[key]["max"]
    rows = cm.tornado_rows(band, "speedup")
    assert [r["swing"] for r in rows] == sorted((r["swing"] for r in rows), reverse=True)
    # recipe choices are scenario rows, not width
    assert not {"warmup_steps", "kept", "sparse_efficiency"} & set(band["knobs"])
    # at each end of each knob the calibration point is still met: the efficiency was refitted there
    fit = cm.family_efficiency("tpu", table)
    calib = next(p for p in cm.published_points() if p.id == fit["calibrated_on"])
    from svgtpu.costmodel.validate import point_setup, setup_seconds
    for knob in cm.KNOBS + cm.sparse_knobs(setup):
        if not knob.applies(setup) or not knob.refit:
            continue
        for value in knob.range(setup):
            moved = cm.at_knob(point_setup(calib, fit["efficiency"], table), knob, value)
            if f"{knob.path} = {value:.3g}" in band["unreachable"]:
                continue
            assert setup_seconds(calib, moved) == pytest.approx(calib.seconds, rel=1e-6), (knob.path, value)


def test_an_end_the_calibration_rules_out_is_cut_to_the_last_possible_value_not_dropped(table):
    """The attention knob taken to half the compiled speed on a TPU leaves no matmul efficiency in (0, 1] that
    meets the calibration run; the values between it and the setup's own are possible, so the interval must
    hold the last of them (it used to count that side as no swing at all)."""
    from svgtpu.costmodel.validate import Unreachable, point_setup, setup_seconds
    setup = wan_setup("1440p", chips=8, compiled=table, **FIXTURE_TILE)   # attention untied, priced as compiled
    knob = dataclasses.replace(cm.KNOBS[0], low=0.5, high=1.0, ends=None)
    assert knob.path == "attention_over_matmul"
    band = cm.sensitivity(setup, knobs=(knob,))
    key = f"{knob.path} = {knob.low:.3g}"
    assert band["unreachable"] == [key] and knob.low < band["cut"][key] < knob.get(setup)
    cut = band["cut"][key]
    fit = cm.family_efficiency("tpu", table)
    calib = next(p for p in cm.published_points() if p.id == fit["calibrated_on"])
    base = point_setup(calib, fit["efficiency"], table)
    # at the cut the calibration run is still met; a step (the bisection's width) beyond it, nothing meets it
    assert setup_seconds(calib, cm.at_knob(base, knob, cut)) == pytest.approx(calib.seconds, rel=1e-6)
    with pytest.raises(Unreachable):
        cm.model_video(cm.at_knob(setup, knob, cut - (knob.get(setup) - knob.low) / 2 ** 11))
    at_cut = cm.model_video(cm.at_knob(setup, knob, cut))
    for q in ("attention_share", "speedup"):
        assert band[q]["min"] - 1e-12 <= at_cut[q] <= band[q]["max"] + 1e-12
    # slower attention at one fixed calibration point moves the time to the quadratic term: the share rises
    assert at_cut["attention_share"] > cm.model_video(setup)["attention_share"]
    assert band["attention_share"]["max"] == pytest.approx(at_cut["attention_share"])


def test_scenario_rows_are_choices_around_the_central_setup(table):
    setup = wan_setup("1440p", compiled=table)
    low, high = 0.5, 0.8
    rows = cm.scenario_table(setup, (low, high), intervals=False)
    central = cm.model_video(setup)
    assert rows[0]["group"] == "central" and rows[0]["speedup"] == pytest.approx(central["speedup"])
    groups = {r["group"] for r in rows}
    assert groups == {"central", "recipe", "kernel", "sparse layers"}
    for r in rows:
        if r["group"] == "recipe":   # a recipe never touches the dense run
            assert r["dense_minutes"] == pytest.approx(central["dense_minutes"])
    assert {r["kernel"] for r in rows if r["group"] == "kernel"} >= {"splash", "tokamax"}
    sparse_rows = [r for r in rows if r["group"] == "sparse layers"]
    # the central sparse layers are as compiled (stretch 1, not fitted): only the GPU-implied scenario beside them
    assert setup.sparse_stretch == 1 and [(r["sparse_stretch"], r["sparse_efficiency"]) for r in sparse_rows] == \
        [(1.0, low), (1.0, high)]
    # the stretch scales the sparse layers only: as compiled is faster exactly when the stretch is above 1
    assert (sparse_rows[0]["speedup"] > rows[0]["speedup"]) == (setup.sparse_stretch > 1)
    baseline = next(r for r in rows if r["dense_kernel"] == "splash" and r["kernel"] == "ours")
    assert baseline["dense_minutes"] > central["dense_minutes"]    # JAX Splash masks every tile of the padded mask
    assert all(r["attention_pricing"].startswith("compiled") for r in rows)


def test_every_spec_constant_is_cited():
    for device in cm.DEVICES.values():
        assert device.source.strip()
        if device.family == "tpu":      # vector rates are derived, say how
            assert "clock" in device.derivation
    for model in cm.MODELS.values():
        assert model.source.strip()
    with pytest.raises(ValueError, match="source"):
        cm.DeviceSpec("x", 1.0, 1.0, 1.0, 1.0, 1.0, None, source="")
    assert cm.get_device("v6e").clock_hz == pytest.approx(918e12 / 524288)     # 2 MXUs x 16 rows x 256^2 x 2 / 8
    assert cm.get_device("v5e").clock_hz == pytest.approx(1.5e9, rel=0.01)


@pytest.mark.parametrize("call,word", [
    (lambda: cm.get_model("gpt-2"), "model"),
    (lambda: cm.get_device("v8"), "device"),
    (lambda: wan_setup(sparse_efficiency=1.5), "sparse_efficiency"),
    (lambda: wan_setup(image_encoder="clip"), "image_encoder"),
    (lambda: cm.get_geometry("4k"), "geometry"),
    (lambda: cm.Efficiency(matmul=1.5), "matmul"),
    (lambda: wan_setup(chips=0), "chips"),
    (lambda: wan_setup(chips=6), "chips must be one of"),
    (lambda: wan_setup(kept=0.3, multiplier=1.0), "kept or multiplier"),
    (lambda: wan_setup(parts=frozenset({"gpu_time"})), "parts"),
    (lambda: cm.mask_tiles(cm.get_geometry("480p"), "causal", Tile(512, 512)), "mask kind"),
])
def test_clear_errors(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def test_cli_json_contract(capsys):
    assert main(["costmodel", "--resolution", "720p", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("attention_share", "attention_share_end_to_end", "dense_seconds", "svg_seconds", "speedup",
                "saved_seconds", "contributions", "chain", "sensitivity", "stage_seconds", "memory"):
        assert key in out
    assert out["provenance"] == "modeled-v6e" and out["chips"] == 8 and out["cfg"] is True
    assert out["device_spec"]["matmul_tile"] == 256 and out["mesh"] == [2, 4]
    assert out["sensitivity"]["tornado"]
    assert main(["costmodel", "--resolution", "720p", "--exclude", "vae_decode", "--exclude", "host", "--json"]) == 0
    fewer = json.loads(capsys.readouterr().out)
    assert fewer["stage_seconds"]["vae_decode"] == 0 and fewer["dense_seconds"] < out["dense_seconds"]
    assert main(["costmodel", "--sweep", "resolution", "--no-cfg", "--device", "v5e", "--json"]) == 0
    sweep = json.loads(capsys.readouterr().out)
    assert [r["resolution"] for r in sweep["sweep"]] == list(cm.PRESETS)
    assert sweep["provenance"] == "modeled-v5e"
    # the claim first: one kernel family on both sides (as the verdicts' setups, calibrated_setup); a TPU user's
    # dense kernel (Splash) is the check beside it, labelled; a sweep keeps the claim's unless --dense-kernel is given
    assert (out["dense_kernel"], out["kernel"]) == ("ours", "ours") and "dense ours" in out["kernels"]
    assert (out["check"]["dense_kernel"], out["check"]["kernel"]) == ("splash", "ours")
    assert out["check"]["svg_seconds"] == pytest.approx(out["svg_seconds"])
    speedup = next(r for r in out["claim_values"] if r["quantity"] == "speedup")
    assert speedup["claim"]["value"] == out["speedup"] and speedup["check"]["value"] == out["check"]["speedup"]
    assert (sweep["dense_kernel"], sweep["kernel"]) == ("ours", "ours")
    assert main(["costmodel", "--resolution", "720p", "--dense-kernel", "tokamax", "--json"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert other["dense_kernel"] == "ours" and other["check"]["dense_kernel"] == "tokamax"
    assert main(["costmodel", "--resolution", "720p", "--dense-kernel", "ours", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert ours["dense_kernel"] == "ours" and ours["check"] is None and ours["speedup"] == out["speedup"]
    assert wan_setup().dense_kernel is None


def test_cli_validate_json(capsys):
    assert main(["costmodel", "--validate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for row in out["points"]:
        assert {"id", "role", "published_s", "predicted_s", "error", "source", "calibration_related",
                "independent"} <= set(row)
    assert out["families"]["hopper"]["calibrated_on"] and out["families"]["tpu"]["calibrated_on"] is None  # priors
    assert len(out["points"]) >= 15 and any(r["device"] == "v7x" for r in out["points"])
    assert out["speedups"] and {"published", "predicted", "error"} <= set(out["speedups"][0])
    independent = [abs(r["error"]) for r in out["points"] if r["independent"]]
    assert out["independent"]["median_abs_error"] == pytest.approx(float(np.median(independent)))
    assert out["independent"]["worst_abs_error"] == pytest.approx(max(independent))
    assert main(["costmodel", "--validate", "--compiled-tiles", str(FIXTURE), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["compiled_table"] == str(FIXTURE) and out["tpu_clocks"]["v7x"]["mxus_per_core"] == 2


@pytest.mark.parametrize("argv,word", [
    (["--model", "llama"], "model"), (["--device", "b200"], "device"), (["--resolution", "8k"], "resolution"),
    (["--matmul-efficiency", "0"], "matmul"), (["--chips", "6"], "chips"),
])
def test_cli_bad_input_one_line(capsys, argv, word):
    assert main(["costmodel", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err


def test_one_clock_with_or_without_a_compiled_table_the_probe_only_checks_it(table):
    # the spec's MXU: 2 MXUs per core, 16 bf16 rows of 256 x 256 every 8 cycles -> 524,288 flop per cycle,
    # 918 TFLOP/s at 1.75 GHz; the VPU issues 4 vregs of 1024 lanes and the EUP one vreg per cycle
    clock = 918e12 / (2 * 16 * 256 ** 2 * 2 / 8)
    v6e, probed = cm.get_device("v6e"), cm.get_device("v6e", table)
    assert v6e.clock_hz == probed.clock_hz == pytest.approx(clock)
    assert v6e.vector_ops == probed.vector_ops == pytest.approx(4 * 1024 * clock)
    assert probed.exp_ops == pytest.approx(1024 * clock)
    assert "compiled-v6e probe" in probed.clock_source and "compiled-v6e probe" not in v6e.clock_source
    assert cm.get_device("v7x").mxus_per_core == 2      # JAX tpu_info; no 4-MXU alternative
    v7x = cm.get_device("v7x", table)
    assert v7x.clock_hz == cm.get_device("v7x").clock_hz == pytest.approx(2307e12 / 2 / 524288)
    assert cm.get_device("v5e", table) == cm.DEVICES["v5e"]    # no probe: the prior stands
    # the compiler's unit reader and the estimate read the same MXU and clock
    from svgtpu.compiler.estimate import clock_hz
    from svgtpu.compiler.units import core
    assert core("v6e").flops_per_cycle == v6e.core_flops_per_cycle == 524288 and clock_hz("v6e") == v6e.clock_hz
    # a probe that disagrees with the spec's MXU is an error, not a second clock
    other = dataclasses.replace(table.probe("v6e"), flops_per_cycle=262144, clock_ghz=918e12 / 262144 / 1e9)
    with pytest.raises(ValueError, match="MXU"):
        cm.with_probe(cm.DEVICES["v6e"], other)
    bad = dataclasses.replace(table.probe("v6e"), cores_per_chip=2, clock_ghz=918e12 / 2 / 524288 / 1e9)
    with pytest.raises(ValueError, match="cores per chip"):
        cm.with_probe(cm.DEVICES["v6e"], bad)


def test_slice_names_count_tensorcores_on_v5p_and_v7x(capsys):
    assert cm.parse_slice("v7x-8") == ("v7x", 4) and cm.parse_slice("v7x-16") == ("v7x", 8)
    assert cm.parse_slice("v6e-8") == ("v6e", 8) and cm.parse_slice("v5p-8") == ("v5p", 4)
    for bad in ("v7x-7", "tpu9-8", "v6e"):
        with pytest.raises(ValueError, match="slice"):
            cm.parse_slice(bad)
    assert main(["costmodel", "--chips", "v7x-8", "--resolution", "720p", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["device"], out["chips"], out["provenance"]) == ("v7x", 4, "modeled-v7x")
    assert main(["costmodel", "--chips", "v7x-8", "--device", "v6e"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "v7x" in err


def test_compiled_table_loads_checks_and_borrows_only_from_the_same_core(table, tmp_path):
    row, source = table.tile("v6e", "ours", Tile(3024, 2048), 128)
    assert (row.full, row.mask_partial, row.step_overhead) == (15213, 24244, 239) and source == "compiled-v6e"
    borrowed, source = table.tile("v7x", "tokamax", Tile(3024, 2048), 128)
    assert borrowed.device == "v6e" and "same core" in source
    assert table.tile("v6e", "ours", Tile(512, 512), 128) is None
    assert table.tile("v5p", "ours", Tile(3024, 2048), 128) is None
    # a tile the table does not hold, one lane tile from one it does: that row's cycles per score (by hand:
    # 3072 x 2048 scaled to 3200 x 2048), its per-step and per-row costs as they are; none further away
    near, source = table.tile("v6e", "splash", Tile(3200, 2048), 128)
    held = table.tile("v6e", "splash", Tile(3072, 2048), 128)[0]
    assert near.block_q == 3200 and near.full == pytest.approx(held.full * 3200 / 3072)
    assert near.mask_partial == pytest.approx(held.mask_partial * 3200 / 3072)
    assert (near.step_overhead, near.init_finish) == (held.step_overhead, held.init_finish)
    assert "3072x2048 row per score" in source and table.tile("v6e", "splash", Tile(3201, 2048), 128) is None
    data = json.loads(FIXTURE.read_text())
    data["tiles"][0]["mask_partial"] = {"refused": "VMEM"}
    data["probe"] = data["probe"][:1]
    (tmp_path / "t.json").write_text(json.dumps(data))
    refused = cm.load_compiled(tmp_path / "t.json")
    assert refused.tiles[0].mask_partial is None and refused.tile("v6e", "ours", Tile(3024, 2048), 128) is None
    assert refused.tile("v7x", "tokamax", Tile(3024, 2048), 128) is None      # no v7x probe: nothing to borrow
    data["probe"][0]["clock_ghz"] = 3.5                                  # not peak / (cores x flops per cycle)
    (tmp_path / "t.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="clock_ghz"):
        cm.load_compiled(tmp_path / "t.json")
    (tmp_path / "t.json").write_text("{}")
    with pytest.raises(ValueError, match="compiled tile table .*probe is missing"):    # the schema's one line
        cm.load_compiled(tmp_path / "t.json")


WHOLE = {"ours-dense-fast": ("ours", "dense", True), "ours-dense-nofast": ("ours", "dense", False),
         "ours-svg-fast": ("ours", "svg", True), "ours-svg-nofast": ("ours", "svg", False),
         "ours-svg-aligned-fast": ("ours", "svg-aligned", True), "ours-svg-aligned-nofast": ("ours", "svg-aligned", False),
         **{f"{k}-{m}": (k, m, True) for k in ("splash", "tokamax") for m in ("dense", "svg", "svg-aligned")}}


def test_compiled_pricing_reproduces_every_compiled_whole_kernel_within_two_percent(table):
    """The model prices a head from tile bodies, step overhead and row init/finish over the steps each kernel
    takes (ours: the plan; Splash: a grid as long as the longest row; tokamax: the active tiles); the benchmark
    summed the compiled whole kernels step by step (figures/results.json C4.compiled_variants)."""
    setup = wan_setup("1440p", compiled=table, **FIXTURE_TILE)  # the fixture's whole kernels: 3024 x 2048
    whole = json.loads(FIXTURE.read_text())["whole_kernel_cycles"]
    for variant, (kernel, mask, fast) in WHOLE.items():
        cycles = setup.head_cycles(mask, fast_path=fast, kernel=kernel)
        assert cycles["total"] == pytest.approx(whole[variant]["cycles"], rel=0.02), variant
        assert cycles["steps"] == whole[variant]["steps"], variant


def test_the_committed_tile_table_prices_every_committed_whole_kernel_within_two_percent():
    """The same check on what make figures last wrote (figures/compiled_tiles.json against the whole kernels in
    figures/results.json, both from one notebook 04 run): the fixture above is an older kernel's."""
    figures = Path(__file__).parents[1] / "figures"
    tiles, results = figures / "compiled_tiles.json", figures / "results.json"
    if not tiles.exists():
        pytest.skip("figures/compiled_tiles.json not written yet (make figures)")
    rows = {r["variant"]: r for r in json.loads(results.read_text())["claims"]["C4"]["compiled_variants"]["value"]}
    setup = wan_setup("1440p", compiled=cm.load_compiled(tiles))
    for variant, (kernel, mask, fast) in WHOLE.items():
        cycles = setup.head_cycles(mask, fast_path=fast, kernel=kernel)
        print(f"{variant}: modeled {cycles['total']:.4g}, compiled {rows[variant]['cycles']:.4g} cycles")
        assert cycles["total"] == pytest.approx(rows[variant]["cycles"], rel=0.02), variant
        assert cycles["steps"] == rows[variant]["steps"], variant


def test_fast_path_and_masked_tile_ratios_are_the_compiled_ones(table):
    setup = wan_setup("1440p", compiled=table, **FIXTURE_TILE)  # the fixture's whole kernels: 3024 x 2048
    whole = {k: v["cycles"] for k, v in json.loads(FIXTURE.read_text())["whole_kernel_cycles"].items()}
    from svgtpu.costmodel.pipeline import _per_chip_layer_attention
    for mask in ("svg", "svg-aligned"):     # attention only: fast path off / on, against the compiled whole kernel
        modeled = _per_chip_layer_attention(setup, mask, False) / _per_chip_layer_attention(setup, mask, True)
        assert modeled == pytest.approx(whole[f"ours-{mask}-nofast"] / whole[f"ours-{mask}-fast"], rel=0.02), mask
    # an end-to-end gain never exceeds the kernel's own
    assert cm.model_video(setup)["contributions"]["fast_path"] <= modeled
    # one tile the SVG mask cuts over one full tile, as the model prices them, is the compiled body ratio
    one = cm.MaskFacts(density=None, q_rows=1, empty_rows=0, max_row_tiles=1, mask_cuts_tiles=True)
    masked, full = (setup.head_seconds(TileStats(*c), info=one) for c in ((0, 1, 0), (1, 0, 0)))
    body = table.tile("v6e", "ours", Tile(3024, 2048), 128)[0]
    overhead = (body.step_overhead + body.init_finish) / setup.device.clock_hz / setup.efficiency.attention
    assert (masked - overhead) / (full - overhead) == pytest.approx(24244 / 15213)


def test_model_steps_equal_the_kernel_plan():
    """The cost model counts our kernel's grid steps itself (no JAX); the kernel's own plan agrees."""
    from svgtpu.kernels.plan import tile_plan
    from svgtpu.masks.core import DenseMask, align, svg_mask
    g = cm.get_geometry("3x10x18")
    for kept in (0.2, 0.45):
        for name, mask in (("svg", svg_mask(g, kept=kept)), ("svg-aligned", align(svg_mask(g, kept=kept), Tile(64, 128), "snap")),
                           ("dense", DenseMask(g.L))):
            stats, info = cm.mask_tiles(g, name, Tile(64, 128), kept=None if name == "dense" else kept)
            plan = tile_plan(mask, g.L, 64, 128)
            assert (info.grid_steps, info.empty_row_steps) == (plan.num_steps, plan.empty_row_steps), (name, kept)
            assert stats == plan.tile_stats[0]
            assert info.mask_cuts_tiles == (plan.mask_source != "padding")


def test_sequence_sharded_flash_pads_each_query_slice_by_hand():
    # v7x-16 (8 chips, CFG split: 4 per pass, 2 TensorCores each = 8 devices) at 720p: 75,600 / 8 = 9,450 queries
    # per device -> 4 q tiles of 3,024 rows; keys 75,600 = 36 full tiles of 2,048 + one padded (partial)
    from svgtpu.costmodel.pipeline import sequence_shard_tiles
    setup = wan_setup("720p", device="v7x", chips=8, cfg_split=True, attention_sharding="sequence")
    stats, info = sequence_shard_tiles(setup)
    assert (stats.full, stats.partial, info.q_rows, info.max_row_tiles) == (4 * 36, 4, 4, 37)
    # the 512 x 512 block active in MaxDiffusion's Wan configs at 2e247d00, the commit that wrote the README's
    # v7x tokamax_flash rows (attention_flax.py pads each device's slice to block_q, K and V gathered to block_kv):
    # v7x-8: 75,600 / 4 = 18,900 queries -> 37 q tiles (18,944 rows); v7x-16: 9,450 -> 19 (9,728 rows); keys
    # 75,600 = 147 full tiles of 512 + one of 336 real keys (partial)
    for chips, q_tiles in ((4, 37), (8, 19)):
        small = wan_setup("720p", device="v7x", chips=chips, cfg_split=True, attention_sharding="sequence",
                          block_q=512, block_kv=512)
        stats, info = sequence_shard_tiles(small)
        assert (stats.full, stats.partial, info.q_rows, info.max_row_tiles) == (q_tiles * 147, q_tiles, q_tiles, 148)
    heads = dataclasses.replace(setup, attention_sharding="heads")
    assert cm.forward_breakdown(setup)["self_attention"] > cm.forward_breakdown(heads)["self_attention"]
    with pytest.raises(ValueError, match="head-parallel"):
        cm.dit_seconds(setup, "svg", True)
    # segment ids mask every tile: the same as no fast path
    masked = dataclasses.replace(heads, segment_ids=True)
    stats, info = heads.tiles("dense")
    assert masked.head_seconds(stats, info=info) == heads.head_seconds(stats, info=info, fast_path=False)


def test_v7x_readme_rows_take_their_configs_block_once_the_table_prices_it():
    # MaxDiffusion's README v7x tokamax_flash rows: their commit's Wan configs run 512 x 512 (tile_source cites
    # them); the rows keep the borrowed 3024 x 2048 only while the committed table cannot price 512 x 512
    table = cm.load_compiled(Path(__file__).parents[1] / "figures" / "compiled_tiles.json")   # the committed table
    priceable = table.tile("v7x", "tokamax", Tile(512, 512), 128) is not None
    rows = [p for p in cm.published_points() if p.id.startswith("maxdiffusion-v7x")]
    assert len(rows) == 4
    for p in rows:
        config = "base_wan_14b.yml" if p.model == "wan2.1-14b" else "base_wan_27b.yml"
        assert f"2e247d00b8589dd53dc19a82835ffa228ef3f1ca/src/maxdiffusion/configs/{config}" in p.tile_source, p.id
        assert p.tile == ("512x512" if priceable else "3024x2048"), p.id


def test_the_cost_model_runs_without_jax():
    code = ("import sys; from svgtpu import costmodel as cm; "
            f"t = cm.load_compiled({str(FIXTURE)!r}); "
            "s = cm.calibrated_setup('wan2.1-14b', '1440p', 'v6e', compiled=t); cm.model_video(s); cm.sensitivity(s); "
            "cm.validate(t); assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_vae_on_one_rank_does_not_shrink_with_chips():
    one = wan_setup("720p", chips=1, vae_sharded=False)
    eight = one.replace(chips=8)
    assert cm.stage_seconds(eight)["vae_decode"] == cm.stage_seconds(one)["vae_decode"] > 0
    sharded = dataclasses.replace(eight, vae_sharded=True)
    assert cm.stage_seconds(sharded)["vae_decode"] == pytest.approx(cm.stage_seconds(one)["vae_decode"] / 8)


def test_vae_encoder_counts_by_hand():
    from svgtpu.costmodel import stages
    from svgtpu.geometry import VideoGeometry
    g = VideoGeometry(2, 1, 1)      # 5 frames of 16x16 pixels: latent 2 x 2 x 2
    layers = stages.vae_encoder_layers(g)
    assert layers[0] == (27, 3, 96, 5.0 * 16 * 16)               # conv1 at full size
    assert layers[-1] == (27, 384, 32, 2.0 * 2 * 2)              # head at the latent size
    # 2 res blocks per stage (+1x1 shortcut on width changes), 3 spatial + 2 temporal downsamplers,
    # 2 middle res blocks, conv1 and head
    assert len(layers) == 1 + 4 * 2 * 2 + 2 + 3 + 2 + 2 * 2 + 1
    assert stages.vae_encode_flops(g) == pytest.approx(sum(2.0 * t * a * b * v for t, a, b, v in layers))


def test_sparse_efficiency_scales_only_sparse_layers():
    setup = wan_setup("720p")
    half = dataclasses.replace(setup, sparse_efficiency=0.5)
    assert cm.dit_seconds(half, "dense", True) == cm.dit_seconds(setup, "dense", True)
    assert cm.dit_seconds(half, "svg-aligned", True) > cm.dit_seconds(setup, "svg-aligned", True)
    assert cm.sparse_layer_efficiency(half) == pytest.approx(cm.sparse_layer_efficiency(setup) / 2)
    with pytest.raises(ValueError, match="sparse_efficiency"):
        dataclasses.replace(setup, sparse_efficiency=0.0)


def test_sparse_efficiency_evidence_names_its_sources(table):
    setup = wan_setup("1440p", compiled=table, **FIXTURE_TILE)  # the fixture's whole kernels: 3024 x 2048
    evidence = cm.sparse_efficiency_evidence(setup)
    assert evidence["central"] == pytest.approx(cm.model_video(setup)["sparse_layer_efficiency"])
    k = evidence["compiled_kernel"]
    # sparse overhead vs our dense (not a roofline) and both kernels over the MXU roofline of their tiles
    whole = json.loads(FIXTURE.read_text())["whole_kernel_cycles"]
    ideal = whole["ours-dense-fast"]["cycles"] * whole["ours-svg-aligned-fast"]["tile_density"]
    assert k["sparse_over_dense_x_density"] == pytest.approx(whole["ours-svg-aligned-fast"]["cycles"] / ideal, rel=0.02)
    assert k["dense_over_roofline"] == pytest.approx(whole["ours-dense-fast"]["cycles"] / (14800 * 12096), rel=0.02)
    assert 0 < evidence["svg_extra_work"]["share_of_sparse_layer"] < 0.1
    # the published SVG GPU runs: at the implied value the calibrated model meets the published time
    published = cm.published_svg_efficiency(None)
    points = {p.id: p for p in cm.published_points()}
    assert len(published["rows"]) >= 4
    for r in published["rows"]:
        if r["implied_sparse_efficiency"] is not None:
            p = points[r["id"]]
            eff = cm.family_efficiency(p.family, None)["efficiency"]
            assert cm.predict_seconds(p, eff, r["implied_sparse_efficiency"], None) == pytest.approx(p.seconds, rel=1e-4)


def test_cli_sparse_evidence_and_scenarios_json(capsys):
    assert main(["costmodel", "--sparse-evidence", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    low, high = out["published_svg"]["range"]
    assert 0 < low <= high <= 1 and 0 < out["central"] <= 1
    assert main(["costmodel", "--compiled-tiles", str(FIXTURE), "--resolution", "720p", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attention_pricing"].startswith("compiled") and out["scenarios"][0]["group"] == "central"
    assert main(["costmodel", "--sparse-efficiency", "0"]) == 2
    assert "sparse_efficiency" in capsys.readouterr().err


def test_speedup_surface_falls_with_dense_steps_and_rises_with_sparse_efficiency():
    setup = wan_setup("720p")
    rows = cm.speedup_surface(setup, [0.5, 1.0], [0.1, 0.4])
    at = {(r["sparse_efficiency"], r["dense_step_share"]): r["speedup"] for r in rows}
    assert len(rows) == 4
    assert at[1.0, 0.1] > at[0.5, 0.1] and at[1.0, 0.1] > at[1.0, 0.4]
    same = dataclasses.replace(setup, warmup_steps=0.4, sparse_efficiency=0.5)
    assert at[0.5, 0.4] == pytest.approx(cm.model_video(same)["speedup"])


def test_tpu_attention_kernels_priced_at_their_own_compiled_efficiency():
    import importlib
    from svgtpu.setting import PRODUCTION
    v = importlib.import_module("svgtpu.costmodel.validate")
    path = Path(__file__).parents[1] / "figures" / "compiled_tiles.json"   # the committed table
    compiled = cm.load_compiled(path)
    raw = json.loads(path.read_text())["tiles"]
    got = {r["kernel"]: r["efficiency"] for r in v.kernel_efficiencies("v6e", compiled=compiled)}
    for kernel in ("ours", "splash", "tokamax"):   # read straight off the file: roofline of a tile / its full body
        row = next(t for t in raw if t["device"] == "v6e" and t["kernel"] == kernel and t["block_kv"] ==
                   PRODUCTION.block_kv and abs(t["block_q"] - PRODUCTION.block_q) <= 128)
        assert got[kernel] == pytest.approx(row["roofline_tile"] / row["full"])
    assert got["fixed-m"] > got["ours"] > got["splash"]   # fewer vector ops per score; Splash masks every tile
    # the calibration fits the matmuls only: attention stays at its instrument (a published kernel time over the
    # compiled schedule, svgtpu.costmodel.realized), never the fitted value
    fit = v.family_efficiency("tpu", compiled)
    assert fit["efficiency"].attention == v.compiled_attention(compiled) != fit["fitted"] == fit["efficiency"].matmul
    assert fit["efficiency"].attention == realized.readings(compiled)["online"]["realized_over_static"]
    # every published GPU run names the kernel it ran and cites where its source says so
    for p in v.published_points():
        if p.family != "tpu":
            assert p.kernel in v.GPU_KERNELS and "http" in p.kernel_source, p.id


def test_every_stage_names_its_instrument():
    for setup in (wan_setup(), wan_setup(device="h100", chips=1), dataclasses.replace(wan_setup(), image_encoder="vae+clip",
                                                                                        vae_sharded=False)):
        result = cm.model_video(setup)
        assert set(result["stage_instruments"]) == set(result["stage_seconds"]) == {
            "text_encoder", "image_encoder", "vae_encode", "vae_decode", "host"}
        assert all(result["stage_instruments"].values())
    assert "CLIP" in result["stage_instruments"]["image_encoder"] and "one rank" in result["stage_instruments"]["vae_decode"]
    assert "Encoder3d" in result["stage_instruments"]["vae_encode"]


def test_a_compiled_vae_decode_record_prices_the_tpu_decode(tmp_path, monkeypatch):
    """A committed decode record (first chunk, later chunk: static cycles) prices a v6e decode by hand: first + (T - 1)
    later chunks at the clock, over the chips when sharded; GPUs and resolutions without a record keep the roofline."""
    import gzip

    from svgtpu.costmodel import stages
    folder = tmp_path / "vae-decode"
    folder.mkdir()
    value = {"provenance": "compiled-v6e", "chunks": {"first": {"cycles": 1000}, "later": {"cycles": 3000}}}
    made_of = {"description": {}, "sources": {}, "versions": {}, "libtpu_flags": "", "schema": 3}
    record = {"key": "0123456789abcdef0123", "made_of": made_of, "value": value}   # as the record schema asks
    (folder / "wan2.1-vae-720p-v6e-0123.json.gz").write_bytes(gzip.compress(json.dumps(record).encode()))
    before = cm.stage_seconds(wan_setup("720p", chips=8))["vae_decode"]   # the committed record, or the roofline
    monkeypatch.setattr(stages, "COMPILED_RECORDS", tmp_path)
    setup = wan_setup("720p", chips=8)
    assert cm.stage_seconds(setup)["vae_decode"] == pytest.approx((1000 + 20 * 3000) / setup.device.clock_hz / 8)
    grid = dataclasses.replace(setup, geometry=cm.get_geometry("11x45x80"))   # a published run's grid: 720p's frames
    assert cm.stage_seconds(grid)["vae_decode"] == pytest.approx((1000 + 10 * 3000) / setup.device.clock_hz / 8)
    assert "wan2.1-vae-720p-v6e-0123.json.gz" in cm.model_video(setup)["stage_instruments"]["vae_decode"]
    one_rank = dataclasses.replace(setup, vae_sharded=False)
    assert cm.stage_seconds(one_rank)["vae_decode"] == pytest.approx(8 * cm.stage_seconds(setup)["vae_decode"])
    assert cm.stage_seconds(wan_setup("1440p", chips=8))["vae_decode"] > 0        # no record: the roofline
    assert "roofline" in cm.model_video(wan_setup("1440p", chips=8))["stage_instruments"]["vae_decode"]
    assert cm.stage_seconds(wan_setup("720p", chips=8))["vae_decode"] != before
