"""The explorer's computing core (settings -> stats + figure), checked against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from svgtpu import explore
from svgtpu.geometry import VideoGeometry
from svgtpu.masks.core import BandSinkMask, PermutedMask, make_mask
from svgtpu.setting import Setting


def point(head: str = "spatial", align: str = "none", **setting) -> explore.Settings:
    """The explorer's point: a :class:`Setting` built from ``setting``, seen through ``head`` and ``align``."""
    return explore.Settings(Setting(**setting), head=head, align=align)


def _brute_counts(mask, q_edges, k_edges):
    """Pairs per rectangle by summing the materialized mask (independent of count_grid)."""
    arr = mask.to_array()
    qc, kc = np.minimum(q_edges, mask.L), np.minimum(k_edges, mask.L)
    return np.array([[arr[qc[i]:qc[i + 1], kc[j]:kc[j + 1]].sum() for j in range(len(kc) - 1)]
                     for i in range(len(qc) - 1)], dtype=np.int64).reshape(len(qc) - 1, len(kc) - 1)


def test_permuted_band_sink_counts_match_brute_force():
    """The analytic count of the temporal mask before the layout transform (frame-major order)."""
    seed = 1405
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for _ in range(60):
        g = VideoGeometry(*(int(x) for x in rng.integers(1, 7, 3)))
        base = BandSinkMask(g.L, int(rng.integers(0, g.L + 1)), int(rng.integers(0, g.L + 1)))
        mask = PermutedMask(base, g)
        # sorted random edges, repeats allowed, some past L (padding)
        q_edges = np.sort(rng.integers(0, g.L + 9, int(rng.integers(1, 8))))
        k_edges = np.sort(rng.integers(0, g.L + 9, int(rng.integers(1, 8))))
        np.testing.assert_array_equal(mask.count_grid(q_edges, k_edges), _brute_counts(mask, q_edges, k_edges),
                                      err_msg=f"{g} sink={base.sink} window={base.window}")


# -- the computing core -------------------------------------------------------------------------



def _brute_kinds(allowed: np.ndarray, bq: int, bkv: int) -> np.ndarray:
    """Tile kinds by looking at every pair: padded keys are masked, padded query rows are not."""
    L = allowed.shape[0]
    nq, nk = -(-L // bq), -(-L // bkv)
    kinds = np.zeros((nq, nk), dtype=int)
    for i in range(nq):
        for j in range(nk):
            rows = allowed[i * bq:(i + 1) * bq]
            block = np.zeros((rows.shape[0], bkv), dtype=bool)
            block[:, :min(bkv, L - j * bkv)] = rows[:, j * bkv:(j + 1) * bkv]
            kinds[i, j] = 0 if not block.any() else (2 if block.all() else 1)
    return kinds


@pytest.mark.parametrize("head", ["spatial", "temporal-frame-major", "dense"])
@pytest.mark.parametrize("mode", ["none", "snap", "cover", "inner"])
def test_compute_matches_brute_force(head, mode):
    """Tile counts and pairs added/dropped on a grid that is not a tile multiple (L = 5*6*7 = 210)."""
    s = point(resolution="5x6x7", kept=0.4, head=head, block_q=48, block_kv=32, align=mode)
    got = explore.compute(s)
    allowed = make_mask(head, "5x6x7", s.band_multiplier).to_array()
    kinds = _brute_kinds(allowed, 48, 32)
    if mode != "none":
        L = allowed.shape[0]
        keep = np.zeros_like(kinds, dtype=bool)
        for i in range(kinds.shape[0]):
            for j in range(kinds.shape[1]):
                tile = allowed[i * 48:(i + 1) * 48, j * 32:(j + 1) * 32]
                frac = tile.mean()
                keep[i, j] = {"snap": frac >= 0.5, "cover": frac > 0, "inner": frac == 1}[mode]
        aligned = np.kron(keep, np.ones((48, 32), dtype=bool))[:L, :L]
        assert got["alignment"]["added"] == int((aligned & ~allowed).sum())
        assert got["alignment"]["dropped"] == int((allowed & ~aligned).sum())
        assert got["before_alignment"]["partial"] == int((kinds == 1).sum())
        allowed, kinds = aligned, _brute_kinds(aligned, 48, 32)
    np.testing.assert_array_equal(got["kinds"], kinds)
    assert (got["full"], got["partial"], got["empty"]) == tuple(int((kinds == k).sum()) for k in (2, 1, 0))
    assert got["pair_density"] == pytest.approx(allowed.mean())
    assert (got["tiles_q"], got["tiles_kv"]) == kinds.shape


def test_downsample_mixes_colours_in_proportion():
    from matplotlib.colors import to_rgb

    from svgtpu.styles import TILE_COLORS
    kinds = np.array([[2, 2, 0], [1, 2, 0], [0, 0, 0]], dtype=np.int8)
    exact, factor = explore.downsample(kinds, max_side=3)
    assert factor == 1
    np.testing.assert_allclose(exact[1, 0], to_rgb(TILE_COLORS[1]))
    mixed, factor = explore.downsample(kinds, max_side=2)
    assert factor == 2 and mixed.shape == (2, 2, 3)
    # top-left 2x2 block: three full tiles, one partial
    expected = (3 * np.array(to_rgb(TILE_COLORS[2])) + np.array(to_rgb(TILE_COLORS[1]))) / 4
    np.testing.assert_allclose(mixed[0, 0], expected)
    # bottom-right block covers one real (empty) tile and three padding cells: only the real one counts
    np.testing.assert_allclose(mixed[1, 1], to_rgb(TILE_COLORS[0]))


@pytest.mark.parametrize("field, value, message", [
    ("resolution", "12x3", "geometry must be"), ("kept", 1.5, "kept must be"), ("head", "diagonal", "head must be"),
    ("block_q", 0, "block_q must be"), ("align", "round", "align must be"), ("chips", -1, "chips must be"),
    ("block_kv", 10**6, "block_kv must be at most 302,464")])   # 1440p: L = 302,400 padded to 128 keys
def test_settings_refuse_bad_values_in_one_line(field, value, message):
    with pytest.raises(ValueError, match=message) as info:
        point(**{field: value})
    assert "\n" not in str(info.value)


def test_kernel_refusals_are_shown_not_raised():
    # 100 rows: not a multiple of 8 sublanes (Mosaic's block rule); 300 keys: not a multiple of 128 lanes
    refused = explore.compute(point(resolution="4x8x16", block_q=100, block_kv=512))
    assert not refused["kernel"]["accepted"] and "block_q" in refused["kernel"]["reason"]
    assert "block_q" in refused["cost"]["error"]          # the cost model reads the kernel's plan: refused too
    refused = explore.compute(point(resolution="4x8x16", block_q=128, block_kv=300))["kernel"]
    assert not refused["accepted"] and "block_kv" in refused["reason"]
    gpu = explore.compute(point(resolution="4x8x16", block_q=256, block_kv=256, device="h100"))["kernel"]
    assert gpu["accepted"] and "no TPU budget" in gpu["smem"]
    ok = explore.compute(point(resolution="4x8x16", block_q=256, block_kv=256, device="v6e"))["kernel"]
    assert ok["accepted"] and "fits" in ok["vmem"] and ok["plan_steps"] >= 1


def test_tile_png_is_the_map_scaled():
    import io

    from PIL import Image
    stats = explore.compute(point(resolution="4x8x16", block_q=128, block_kv=128))
    image = np.asarray(Image.open(io.BytesIO(explore.tile_png(stats, side=64))).convert("RGB"))
    scale = 64 // max(stats["kinds"].shape)
    rgb, _ = explore.downsample(stats["kinds"])
    assert image.shape[:2] == (stats["kinds"].shape[0] * scale, stats["kinds"].shape[1] * scale)
    np.testing.assert_array_equal(image[::scale, ::scale], np.rint(rgb * 255).astype(np.uint8))


def test_panel_redraws_on_control_changes_and_shows_refusals():
    panel = explore.Panel((point(resolution="4x8x16", block_q=256, block_kv=256),), "t", "test")
    controls = panel.controls[0].widgets
    controls["block_kv"].value = 128
    controls["align"].value = "snap"
    expected = explore.compute(point(resolution="4x8x16", block_q=256, block_kv=128, align="snap"))
    assert f"<td class='svgtpu-partial'>{expected['partial']:,}</td>" in panel.table.value
    assert "svgtpu-ok" in panel.status.value
    controls["geometry"].value = "4x8"
    assert "refused: geometry must be" in panel.status.value


def test_modeled_attention_of_the_dense_mask_is_the_dense_time():
    """Sanity of the cost column: the dense head kind costs exactly the dense reference, and a sparse
    mask is cheaper at the same tile; the end-to-end row appears only when asked for."""
    dense = explore.compute(point(resolution="4x8x16", head="dense", block_q=128, block_kv=128))["cost"]
    assert dense["error"] == "" and dense["attention_speedup"] == pytest.approx(1.0)
    sparse = explore.compute(point(resolution="8x8x16", kept=0.2, block_q=128, block_kv=128), video=True)
    assert sparse["cost"]["attention_speedup"] > 1 and sparse["cost"]["provenance"] == "modeled-v6e"
    assert "speedup" in sparse["cost"] and "speedup" not in dense


def test_explore_command_prints_stats_and_redraw_time(capsys):
    import json

    from svgtpu import cli
    assert cli.main(["explore", "--geometry", "4x8x16", "--block-q", "128", "--block-kv", "128",
                     "--align", "snap", "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = explore.compute(point(resolution="4x8x16", block_q=128, block_kv=128, align="snap"))
    assert (out["full"], out["partial"], out["empty"]) == (want["full"], want["partial"], want["empty"])
    assert out["redraw"]["cold_seconds"] > 0 and out["redraw"]["cached_seconds"] > 0
    assert cli.main(["explore", "--geometry", "4x8"]) == 2
    assert "geometry must be" in capsys.readouterr().err


def test_a_cost_model_bug_is_raised_not_shown(monkeypatch):
    """The panel shows refusals (BadInput) as text; anything else the cost model raises is a bug and propagates."""
    from svgtpu import costmodel

    def bug(*args, **kwargs):
        raise KeyError("a bug")
    monkeypatch.setattr(costmodel, "setting_setup", bug)
    with pytest.raises(KeyError):
        explore.compute(point(resolution="4x8x16", block_q=128, block_kv=128))
