"""svgtpu tune: candidates and VMEM pruning without compiling, refusals before any compile, one tiny real compile."""

import json

import numpy as np
import pytest

from svgtpu.cli import main
from svgtpu.compiler import tune as tune_module
from svgtpu.compiler.tune import AXES, candidates, record, tune, tuned_tile, winner


def test_default_candidates_are_every_legal_combination_and_fit_the_budget():
    for device in ("v6e", "v7x"):
        cs = candidates("720p", device)
        assert len(cs) == np.prod([len(v) for v in AXES.values()])
        kept = [c.tile for c in cs if c.pruned is None]
        assert len(kept) >= 3
        for c in cs:
            t = c.tile
            legal = t["block_kv"] % t["block_kv_compute"] == 0
            assert (c.pruned is None) == legal, (c.label, c.pruned)
            if not legal:
                assert "block_kv_compute must divide" in c.pruned


def test_vmem_pruning_by_hand():
    # 3328 x 2816 with 1408-wide updates, bf16, d 128, no mask blocks (worked by hand from the budget's terms):
    #   q, out, k, v double-buffered: 2 * (2*3328*128 + 2*2816*128) * 2 B =  6,291,456
    #   m, l (128 lanes) and acc, f32: 4 * (2*3328*128 + 3328*128)        =  5,111,808
    #   3 f32 score blocks + the PV result: 4*3*3328*1408 + 4*3328*128     = 57,933,824
    #   in all 69,337,088 B = 66.1 MiB: over v7x's 48 MiB (0.75 of 64), within v6e's 96 MiB (0.75 of 128)
    axes = {"block_q": (3328,), "block_kv": (2816,), "block_kv_compute": (1408, 256)}
    v7x = {c.tile["block_kv_compute"]: c.pruned for c in candidates("720p", "v7x", axes)}
    assert v7x[1408] == "VMEM: needs 66.1 MiB, over the v7x budget of 48 MiB"
    assert v7x[256] is None
    assert all(c.pruned is None for c in candidates("720p", "v6e", axes))


def test_tiles_the_kernel_refuses_or_longer_than_the_sequence_are_pruned():
    axes = {"block_q": (3004, 128), "block_kv": (128, 1024), "block_kv_compute": (128,)}
    pruned = {c.label: c.pruned for c in candidates("2x8x20", "v6e", axes)}  # L = 320
    assert pruned["3004x128/128"].startswith("refused: block_q must be a positive multiple of 8")
    assert "block_kv must be at most 384" in pruned["128x1024/128"]
    assert pruned["128x128/128"] is None


@pytest.mark.parametrize("argv, words", [
    (["--resolution", "9000p"], "--resolution must be one of"),
    (["--device", "v5e"], "--device must be one of v6e, v7x, got 'v5e'"),
    (["--kept", "1.5"], "--kept must be in the open interval (0, 1)"),
    (["--kept", "0"], "--kept must be in the open interval (0, 1)"),
    (["--align", "cover"], "--align must be one of snap, balanced-row, balanced-global, got 'cover'"),
])
def test_bad_input_is_one_line_and_exit_2_before_compiling(argv, words, capsys, monkeypatch):
    def no_compile(*a, **k):
        raise AssertionError("compiled despite bad input")
    monkeypatch.setattr("svgtpu.compiler.tile_table.compile_all", no_compile)
    assert main(["tune", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_winner_is_the_fewest_static_cycles_among_compiled_rows():
    rows = [{"tile": "a", "compiled": True, "static_cycles": 900, "hbm_bytes_per_step": 5},
            {"tile": "b", "compiled": False, "reason": "refused"},
            {"tile": "c", "compiled": True, "static_cycles": 700, "hbm_bytes_per_step": 9},
            {"tile": "d", "compiled": True, "static_cycles": 700, "hbm_bytes_per_step": 4}]
    assert winner(rows)["tile"] == "d"
    assert winner(rows[1:2]) is None


def test_one_real_compile_scores_the_aligned_mask_steps(tmp_path):
    """One compile (L = 320, 128 x 128 tiles, cached in build/): the steps are the aligned mask's tiles that
    keep a pair, counted here from the boolean mask, and the winner round-trips through --record's file."""
    axes = {"block_q": (128,), "block_kv": (128,), "block_kv_compute": (128,)}
    kept = 0.4
    result = tune("2x8x20", "v6e", kept, axes=axes)
    (row,) = result["candidates"]
    assert row["compiled"], row
    assert result["winner"] == row and result["provenance"] == "compiled-v6e"
    mask, _ = tune_module.aligned_mask("2x8x20", 128, 128, kept)
    dense = mask.block(0, 320, 0, 320)
    tiles = [[dense[i:i + 128, j:j + 128].any() for j in range(0, 320, 128)] for i in range(0, 320, 128)]
    assert row["steps"] == sum(max(1, sum(r)) for r in tiles)   # an empty row still takes one step
    assert row["static_cycles"] > 0 and row["hbm_bytes_per_step"] > 0
    assert row["over_roofline"] > 1 and row["over_band_roofline"] > 1   # static cycles above full fill
    json.dumps(result)
    record(result, tmp_path)
    entry = tuned_tile("2x8x20", "v6e", tmp_path)
    assert (entry["block_q"], entry["block_kv"], entry["block_kv_compute"]) == (128, 128, 128)
    assert entry["provenance"] == "compiled-v6e" and entry["static_cycles"] == row["static_cycles"]
    assert entry["kernel_sources"] == tune_module.kernel_sources_key()
    assert tuned_tile("720p", "v6e", tmp_path) is None


def test_the_tpu_profile_runs_the_recorded_tiles(monkeypatch):
    from svgtpu.facts.paths import REPO_ROOT
    from svgtpu.setting import PRODUCTION
    from svgtpu.report import reproduce
    path = REPO_ROOT / "figures" / tune_module.TUNED_FILE
    recorded = json.loads(path.read_text())["tiles"][PRODUCTION.device] if path.exists() else {}
    for resolution in ("720p", PRODUCTION.resolution):
        t = recorded.get(resolution)
        want = [t["block_q"], t["block_kv"]] if t else [PRODUCTION.block_q, PRODUCTION.block_kv]
        assert reproduce.tuned_tiles(resolution) == want
    tpu = reproduce.PROFILES["tpu"]
    assert [tpu["04_fast_path_ablation"]["block_q"], tpu["04_fast_path_ablation"]["block_kv"]] == \
        reproduce.tuned_tiles("720p")
    assert tpu["05_quadratic_scaling"]["block_tiles"] == reproduce.tuned_tiles(PRODUCTION.resolution)
    monkeypatch.setattr(tune_module, "tuned_tile", lambda *a, **k: None)   # nothing recorded: the production tile
    assert reproduce.tuned_tiles("720p") == [PRODUCTION.block_q, PRODUCTION.block_kv]
