"""The cost model: hand-counted FLOPs and tile times, monotonicity (resolution, tiles, fast path),
the SVG schedule, cited specs, clear errors, and the `svgtpu costmodel` JSON contract."""

import dataclasses
import json

import numpy as np
import pytest

from svgtpu import costmodel as cm
from svgtpu.cli import main
from svgtpu.tiles import TileStats

TINY = cm.ModelConfig("tiny", layers=2, dim=4, heads=2, head_dim=2, ffn=8, text_len=3, patch_in=5, source="test")


def wan_setup(resolution="720p", **kw):
    return cm.Setup(cm.get_model("wan2.1-14b"), cm.get_resolution(resolution), cm.get_device("v6e"), **kw)


def test_flops_equal_hand_count():
    # L = 6 tokens, D = 4, 2 heads of 2, FFN 8, 3 text tokens, 5 values per patch, 2 layers
    per_layer = {"qkv_proj": 2 * 6 * 4 * 12, "o_proj": 2 * 6 * 4 * 4, "cross_q_proj": 2 * 6 * 4 * 4,
                 "cross_kv_proj": 2 * 3 * 4 * 8, "cross_attention": 2 * 2 * 6 * 3 * 4, "cross_o_proj": 2 * 6 * 4 * 4,
                 "ffn_in": 2 * 6 * 4 * 8, "ffn_out": 2 * 6 * 8 * 4, "self_attention": 2 * 2 * 36 * 2 * 2}
    expected = {k: 2 * v for k, v in per_layer.items()}
    expected.update(patch_embed=2 * 6 * 5 * 4, head=2 * 6 * 4 * 5)
    assert cm.forward_flops(TINY, 6) == expected
    assert per_layer == {"qkv_proj": 576, "o_proj": 192, "cross_q_proj": 192, "cross_kv_proj": 192,
                         "cross_attention": 288, "cross_o_proj": 192, "ffn_in": 384, "ffn_out": 384,
                         "self_attention": 576}


def test_toy_dit_adapter():
    from svgtpu.dit import DiTConfig

    config = DiTConfig(heads=3, head_dim=64, depth=2, mlp_ratio=2, context_tokens=5)
    toy = cm.ModelConfig.from_dit(config)
    assert (toy.layers, toy.dim, toy.heads, toy.head_dim, toy.ffn, toy.text_len, toy.patch_in) == \
        (2, 192, 3, 64, 384, 5, config.channels * 4)
    L = config.geometry.L
    assert cm.forward_flops(toy, L)["ffn_in"] == 2 * 2 * L * 192 * 384


def test_wan_14b_attention_flops_match_design_envelope():
    # design.md: ~8e18 FLOPs per 1440p video (50 steps x 2 CFG passes), dominated by self-attention
    flops = cm.forward_flops(cm.get_model("wan2.1-14b"), cm.get_resolution("1440p").L)
    total = 100 * sum(flops.values())
    assert 7e18 < total < 9.5e18
    assert flops["self_attention"] == 4 * 302400 ** 2 * 128 * 40 * 40


def test_tile_time_hand_count():
    dev = cm.DeviceSpec("fake", matmul_flops=1e12, hbm_bandwidth=1e11, hbm_bytes=1e9, vector_ops=1e11,
                        exp_ops=1e10, matmul_tile=4, source="test")
    eff = cm.Efficiency(1.0, 0.5, 1.0, 1.0)
    # 4 x 8 tile, d = 2: MXU 4*32*2 / (1e12 * 2/4) = 5.12e-10; VPU 32*4/1e11 = 1.28e-9 (masked 32*10/1e11);
    # EUP 32/1e10 = 3.2e-9; HBM 2*8*2*2/1e11 = 6.4e-10; divided by attention efficiency 0.5
    assert cm.tile_seconds(dev, eff, cm.FLASH, 2, 4, 8, masked=False) == pytest.approx(3.2e-9 / 0.5)
    fast_eup = dataclasses.replace(dev, exp_ops=1e12)
    assert cm.tile_seconds(fast_eup, eff, cm.FLASH, 2, 4, 8, masked=False) == pytest.approx(1.28e-9 / 0.5)
    assert cm.tile_seconds(fast_eup, eff, cm.FLASH, 2, 4, 8, masked=True) == pytest.approx(3.2e-9 / 0.5)
    slow_mxu = dataclasses.replace(fast_eup, matmul_flops=1e10)
    assert cm.tile_seconds(slow_mxu, eff, cm.FLASH, 2, 4, 8, masked=True) == pytest.approx(5.12e-8 / 0.5)


def test_attention_share_rises_with_resolution_and_attention_grows_quadratically():
    for device in ("v6e", "h100"):
        setup = dataclasses.replace(wan_setup(), device=cm.get_device(device))
        rows = cm.sweep_resolution(setup, ("480p", "720p", "1080p", "1440p"))
        shares = [r["attention_share"] for r in rows]
        assert all(a < b for a, b in zip(shares, shares[1:])), shares
        assert all(0 < s < 1 for s in shares)
    small, large = (cm.forward_breakdown(wan_setup(r))["self_attention"] for r in ("720p", "1440p"))
    assert large / small == pytest.approx((302400 / 75600) ** 2, rel=0.05)


def _random_stats(rng, n=200):
    full, partial, empty = rng.integers(0, 50, size=(3, n))
    return [TileStats(int(f), int(p), int(e)) for f, p, e in zip(full, partial, empty)]


def test_fewer_tiles_never_models_slower():
    rng = np.random.default_rng(0)
    dev, eff = cm.get_device("v6e"), cm.Efficiency()
    time = lambda s, fast: cm.attention_head_seconds(s, dev, eff, 128, 512, 512, fast_path=fast, q_rows=4)  # noqa: E731
    for s in _random_stats(rng):
        fewer = TileStats(int(rng.integers(0, s.full + 1)), int(rng.integers(0, s.partial + 1)), s.empty)
        assert time(fewer, True) <= time(s, True)
        if (fewer.partial > 0) == (s.partial > 0):
            assert time(fewer, False) <= time(s, False)
    # real masks: a wider SVG band computes more tiles and never models faster
    seconds = [cm.video_seconds(wan_setup(sparsity=None, multiplier=m), "svg", True) for m in (0.5, 1.0, 2.0)]
    assert seconds[0] <= seconds[1] <= seconds[2]
    dense = cm.video_seconds(wan_setup(), "dense", True)
    assert seconds[-1] < dense


def test_fast_path_never_models_slower():
    rng = np.random.default_rng(1)
    for device in cm.DEVICES.values():
        for s in _random_stats(rng, 50):
            fast = cm.attention_head_seconds(s, device, cm.Efficiency(), 128, 3024, 2048, fast_path=True, q_rows=3)
            slow = cm.attention_head_seconds(s, device, cm.Efficiency(), 128, 3024, 2048, fast_path=False, q_rows=3)
            assert fast <= slow
            if s.partial == 0:
                assert fast == slow
    setup = wan_setup("1440p")
    for kind in ("svg", "svg-aligned"):
        assert cm.video_seconds(setup, kind, True) < cm.video_seconds(setup, kind, False)


def test_svg_schedule_and_chain():
    setup = wan_setup("1440p")
    assert (setup.dense_steps, setup.dense_layers, setup.heads_per_chip) == (10, 2, 5)
    small = dataclasses.replace(setup, model=cm.get_model("wan2.1-1.3b"))
    assert (small.dense_layers, small.heads_per_chip) == (1, 2)   # ceil(0.9), ceil(12 / 8)
    # all steps dense -> SVG costs exactly the dense time
    assert cm.video_seconds(dataclasses.replace(setup, warmup_steps=1.0), "svg-aligned", True) == \
        pytest.approx(cm.video_seconds(setup, "dense", True))
    result = cm.model_video(setup)
    assert result["speedup"] == pytest.approx(result["dense_seconds"] / result["svg_seconds"])
    assert result["saved_seconds"] == pytest.approx(result["dense_seconds"] - result["svg_seconds"])
    c = result["contributions"]
    assert c["sparsity"] * c["alignment"] * c["fast_path"] == pytest.approx(result["speedup"])
    assert result["provenance"] == "modeled-v6e"
    # L = 302400 is no multiple of block_kv = 2048: padded keys make dense Splash-style mask everywhere
    assert result["dense_no_fast_path_seconds"] > result["dense_seconds"]
    # CFG doubles every pass; head parallelism splits attention evenly over 8 chips
    no_cfg = cm.model_video(dataclasses.replace(setup, cfg=False))
    assert result["dense_seconds"] == pytest.approx(2 * no_cfg["dense_seconds"])
    one_chip = cm.forward_breakdown(dataclasses.replace(setup, chips=1))
    assert one_chip["self_attention"] == pytest.approx(8 * cm.forward_breakdown(setup)["self_attention"])


def test_sensitivity_band_brackets_the_default():
    setup = wan_setup()
    band, result = cm.sensitivity(setup), cm.model_video(setup)
    for key in ("attention_share", "speedup", "dense_minutes", "svg_minutes", "saved_minutes"):
        assert band[key]["min"] <= result[key] <= band[key]["max"]
        assert band[key]["min"] < band[key]["max"]


def test_every_spec_constant_is_cited():
    for device in cm.DEVICES.values():
        assert device.source.strip()
        if device.matmul_tile is not None:      # TPUs: vector rates are derived, say how
            assert "clock" in device.derivation
    for model in cm.MODELS.values():
        assert model.source.strip()
    source = open(cm.__file__).read()
    for number in ("918e12", "1638e9", "197e12", "819e9", "459e12", "2765e9", "989e12", "3.35e12", "4.8e12",
                   "ici_bandwidth=800e9", "ici_bandwidth=400e9", "ici_bandwidth=1200e9"):
        assert number in source
    with pytest.raises(ValueError, match="source"):
        cm.DeviceSpec("x", 1.0, 1.0, 1.0, 1.0, 1.0, None, source="")
    assert cm.get_device("v6e").derivation.count("3.5 GHz") == 1     # 918e12 / (2 * 256^2 * 2)
    assert cm.get_device("v5e").derivation.count("1.5 GHz") == 1


def test_ulysses_communication_hand_count_and_share():
    # 4 all-to-alls per layer; each chip sends (L/n) * dim * bytes * (n-1)/n at ici/2 * eff.ici
    setup = cm.Setup(TINY, cm.get_resolution("480p"), cm.get_device("v6e"), chips=4)
    L = setup.geometry.L
    expected = 2 * 4 * (L / 4 * 4 * 2 * 3 / 4) / (800e9 / 2 * 0.5)
    assert cm.communication_seconds(setup) == pytest.approx(expected)
    assert cm.communication_seconds(dataclasses.replace(setup, chips=1)) == 0.0
    shares = [cm.model_video(wan_setup(r))["communication_share"] for r in ("480p", "1440p")]
    assert 0 < shares[1] < shares[0] < 0.1   # linear in L while attention grows as L^2
    no_ici = dataclasses.replace(cm.get_device("v6e"), ici_bandwidth=None)
    with pytest.raises(ValueError, match="ici_bandwidth"):
        cm.communication_seconds(dataclasses.replace(setup, device=no_ici))


@pytest.mark.parametrize("call,word", [
    (lambda: cm.get_model("gpt-2"), "model"),
    (lambda: cm.get_device("v7x"), "device"),
    (lambda: cm.get_resolution("4k"), "resolution"),
    (lambda: cm.Efficiency(matmul=1.5), "matmul"),
    (lambda: wan_setup(chips=0), "chips"),
    (lambda: wan_setup(multiplier=1.0), "sparsity or multiplier"),
    (lambda: cm.mask_tiles(cm.get_resolution("480p"), "causal", 512, 512), "mask kind"),
])
def test_clear_errors(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def test_cli_json_contract(capsys):
    assert main(["costmodel", "--resolution", "720p", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("attention_share", "dense_seconds", "svg_seconds", "speedup", "saved_seconds", "contributions",
                "chain", "sensitivity", "reported"):
        assert key in out
    assert out["provenance"] == "modeled-v6e" and out["chips"] == 8 and out["cfg"] is True
    assert out["device_spec"]["matmul_tile"] == 256
    assert main(["costmodel", "--resolution", "720p", "--no-mxu-width-penalty", "--json"]) == 0
    full_mxu = json.loads(capsys.readouterr().out)
    assert full_mxu["device_spec"]["matmul_tile"] is None and full_mxu["dense_seconds"] < out["dense_seconds"]
    assert main(["costmodel", "--sweep", "resolution", "--no-cfg", "--device", "v5e", "--json"]) == 0
    sweep = json.loads(capsys.readouterr().out)
    assert [r["resolution"] for r in sweep["sweep"]] == list(cm.RESOLUTIONS)
    assert sweep["provenance"] == "modeled-v5e"
    assert main(["costmodel", "--model", "toy", "--device", "v6e", "--chips", "1"]) == 0
    assert "toy" in capsys.readouterr().out


@pytest.mark.parametrize("argv,word", [
    (["--model", "llama"], "model"), (["--device", "a100"], "device"), (["--resolution", "8k"], "resolution"),
    (["--matmul-efficiency", "0"], "matmul"),
])
def test_cli_bad_input_one_line(capsys, argv, word):
    assert main(["costmodel", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err
