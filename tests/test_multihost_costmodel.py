"""The cost model past one host (svgtpu.costmodel.multihost): DCN terms by hand, the splits, the pick."""

import dataclasses

import pytest

from svgtpu.costmodel.multihost import configurations, dcn_seconds, model_configuration, multihost_sweep
from svgtpu.costmodel.specs import get_device
from svgtpu.costmodel.validate import calibrated_setup
from svgtpu.geometry import PRESETS


def test_4k_preset_is_wan_vae_and_patch():
    g = PRESETS["2160p"]   # 81 frames -> 21 latent; 2160 / 8 / 2 = 135; 3840 / 8 / 2 = 240
    assert (g.T, g.H, g.W) == (21, 135, 240)


def test_dcn_seconds_by_hand():
    setup = calibrated_setup("wan2.1-14b", "1440p", "v6e", chips=16, cfg_split=True, steps=10)
    # v6e: 4 NICs x 200 Gbps per 8-chip host = 12.5e9 bytes/s per chip; latent 16 x 21 x 180 x 320 float32
    latent = 16 * 21 * 180 * 320 * 4
    assert dcn_seconds(setup, 2, "cfg") == pytest.approx(10 * latent / 8 / 12.5e9)
    assert dcn_seconds(setup, 1, "cfg") == 0.0
    seq = dataclasses.replace(setup, cfg_split=False)
    L = 21 * 90 * 160
    shard = L / 16 * 5120 * 2            # a chip's Ulysses shard, bf16
    expected = 10 * 2 * 40 * 4 * shard / 2 / 12.5e9   # steps x CFG passes x layers x 4 all-to-alls, half crosses
    assert dcn_seconds(seq, 2, "sequence") == pytest.approx(expected)
    with pytest.raises(ValueError, match="split must be one of"):
        dcn_seconds(setup, 2, "pipeline")


def test_configurations():
    v6e = get_device("v6e")
    assert [(c["slices"], c["split"]) for c in configurations(16, v6e)] == [
        (1, None), (1, "cfg"), (2, "cfg"), (2, "sequence")]
    assert configurations(1, v6e) == [{"slices": 1, "cfg_split": False, "split": None}]


def test_sweep_picks_the_shortest_svg_video_and_dcn_sequence_split_loses_speedup():
    result = multihost_sweep(chip_counts=(16, 32))
    for chips in (16, 32):
        rows = [r for r in result["rows"] if r["chips"] == chips]
        picked = [r for r in rows if r["picked"]]
        assert len(picked) == 1 and picked[0]["svg_minutes"] == min(r["svg_minutes"] for r in rows)
        seq = next(r for r in rows if r["split"] == "sequence")
        assert seq["dcn_seconds"] > 0 and seq["speedup"] < seq["speedup_without_communication"]
        one = next(r for r in rows if r["slices"] == 1 and r["split"] == "cfg")
        assert one["dcn_seconds"] == 0 and one["ici_seconds_svg"] > 0
    assert result["provenance"] == "modeled-v6e"
    # more chips, shorter videos
    picked = {r["chips"]: r for r in result["picked"]}
    assert picked[32]["svg_minutes"] < picked[16]["svg_minutes"]


def test_head_slot_use():
    r = model_configuration("wan2.1-14b", "1440p", "v6e", 32, slices=1, cfg_split=True, split="cfg")
    assert r["heads_per_chip"] == 3 and r["head_slot_use"] == pytest.approx(40 / 48)


def test_cli_sweep_chips(capsys):
    import json

    from svgtpu.cli import main
    assert main(["costmodel", "--sweep", "chips", "--resolution", "2160p", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [r["chips"] for r in result["picked"]] == [8, 16, 32, 64] and result["geometry"] == "2160p"
    assert len(result["rows"]) == 16 and result["provenance"] == "modeled-v6e"
