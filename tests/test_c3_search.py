"""The C3 search: closed-form band counts and aligned counts against brute force, a planted setting found."""

import numpy as np
import pytest

from svgtpu.geometry import Tile, get_geometry
from svgtpu.masks import ArrayMask, BandSinkMask, PermutedMask, TileStats, classify
from svgtpu.masks.c3_search import SearchPoint, after_shares, aligned_stats, band_tile_counts, combine, search
from svgtpu.facts.claims import rounds_to


def brute_stats(allowed: np.ndarray, bq: int, bkv: int) -> tuple[int, int]:
    """(full, partial) tiles of a boolean [L, L] array, tile by tile (padded keys make a tile partial)."""
    L = allowed.shape[0]
    full = partial = 0
    for q0 in range(0, L, bq):
        for k0 in range(0, -(-L // bkv) * bkv, bkv):
            block = allowed[q0:q0 + bq, k0:k0 + bkv]
            n = int(block.sum())
            padded = k0 + bkv > L
            if n and (n < block.size or padded):
                partial += 1
            elif n:
                full += 1
    return full, partial


def band_array(L, sink, window):
    q, k = np.arange(L)[:, None], np.arange(L)[None, :]
    return (k < sink) | (np.abs(q - k) <= window)


@pytest.mark.parametrize("L, sink, bq, bkv", [(200, 40, 32, 48), (257, 0, 64, 64), (130, 130, 24, 40),
                                               (96, 33, 100, 7)])
def test_band_tile_counts_equal_brute_force(L, sink, bq, bkv):
    windows = [0, 1, 17, 64, 150, L + 3]
    full, partial = band_tile_counts(L, sink, windows, Tile(bq, bkv))
    for w, f, p in zip(windows, full, partial):
        assert (f, p) == brute_stats(band_array(L, sink, w), bq, bkv), w


def test_band_tile_counts_equal_classify_at_random():
    rng = np.random.default_rng(0)
    for _ in range(100):
        L = int(rng.integers(1, 500))
        sink, bq, bkv = int(rng.integers(0, L + 1)), int(rng.integers(1, 90)), int(rng.integers(1, 90))
        windows = rng.integers(0, L + 5, size=3)
        full, partial = band_tile_counts(L, sink, windows, Tile(bq, bkv))
        for w, f, p in zip(windows, full, partial):
            stats = classify(BandSinkMask(L, sink, int(w)), Tile(bq, bkv)).stats
            assert (stats.full, stats.partial) == (f, p)


def test_band_aligned_with_exact_sink_equals_brute_force():
    L, sink, w, bq, bkv = 300, 70, 40, 64, 48
    stats = aligned_stats(BandSinkMask(L, sink, w), Tile(bq, bkv), "snap", "tile", align_sink=False)
    band = band_array(L, 0, w)
    aligned = np.zeros((L, L), bool)
    for q0 in range(0, L, bq):                      # snap by hand: keep a tile when half its valid pairs are in
        for k0 in range(0, L, bkv):
            block = band[q0:q0 + bq, k0:k0 + bkv]
            aligned[q0:q0 + bq, k0:k0 + bkv] = 2 * block.sum() >= block.size
    aligned |= np.arange(L)[None, :] < sink
    assert (stats.full, stats.partial) == brute_stats(aligned, bq, bkv)


def test_quantum_alignment_and_strided_mask_by_brute_force():
    g = get_geometry("3x8x16")                      # F = 128, L = 384
    mask = BandSinkMask(g.L, g.F, 128)
    stats = aligned_stats(mask, Tile(96, 160), "cover", "quantum", True)
    cover = np.zeros((g.L, g.L), bool)
    allowed = mask.to_array()
    for q0 in range(0, g.L, 128):
        for k0 in range(0, g.L, 128):
            cover[q0:q0 + 128, k0:k0 + 128] = allowed[q0:q0 + 128, k0:k0 + 128].any()
    assert (stats.full, stats.partial) == brute_stats(cover, 96, 160)
    strided = classify(PermutedMask(mask, g), Tile(64, 64)).stats
    assert (strided.full, strided.partial) == brute_stats(PermutedMask(mask, g).to_array(), 64, 64)


def test_combine_per_layer_and_per_head_by_hand():
    stats = {"band": TileStats(full=30, partial=10, empty=0), "strided": TileStats(full=0, partial=60, empty=0)}
    assert combine(stats, "band", 0.5) == 0.25
    assert combine(stats, "strided-per-head", 0.5) == pytest.approx(0.5 * 0.25 + 0.5 * 1.0)
    assert combine(stats, "strided-per-layer", 0.5) == pytest.approx((5 + 30) / (5 + 30 + 15))


def test_rounds_to_the_reported_digits():
    assert rounds_to(0.27554, 0.2755) and not rounds_to(0.27556, 0.2755)
    assert rounds_to(0.022151, 0.0222) and not rounds_to(0.02226, 0.0222)


def test_search_finds_a_planted_setting():
    planted = SearchPoint("3x8x16", window=128, kept=0.0, block_q=64, block_kv=96, sink=True)
    band = band_array(384, 128, 128)
    before = brute_stats(band, 64, 96)
    after = [a for a in after_shares(planted) if (a["align_mode"], a["granularity"], a["align_sink"]) ==
             ("cover", "tile", True)][0]["after"]
    result = search(["3x8x16"], [Tile(64, 96), Tile(32, 32)], kept_range=(0.0, 1.0), temporal_shares=(0.5,),
                    target=(before[1] / sum(before), after), near=0.01, progress=False)
    found = [(m["window"], m["block_q"], m["block_kv"], m["sink"], m["heads"], m["align_mode"], m["granularity"],
              m["align_sink"]) for m in result["matches"]]
    assert (128, 64, 96, True, "band", "cover", "tile", True) in found
    assert all(rounds_to(m["before"], before[1] / sum(before)) for m in result["matches"])


def test_cli_c3_search_json(capsys):
    import json

    from svgtpu.cli import main
    assert main(["c3-search", "--geometries", "3x8x16", "--tiles", "64x96", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["provenance"] == "computed" and out["searched"] > 0 and "rows" not in out
    assert out["target"] == {"before": 0.2755, "after": 0.0222}
    assert main(["c3-search", "--tiles", "64xq"]) == 2
    assert "--tiles must be" in capsys.readouterr().err


def test_union_of_band_and_strided_masks_counts_by_brute_force():
    from svgtpu.geometry import VideoGeometry
    from svgtpu.masks.c3_search import UnionMask
    rng = np.random.default_rng(1)
    for g, sink, w in ((VideoGeometry(3, 4, 5), 20, 7), (VideoGeometry(4, 3, 7), 0, 30), (VideoGeometry(5, 2, 3), 13, 2)):
        band = BandSinkMask(g.L, sink, w)
        union = band.to_array() | PermutedMask(band, g).to_array()
        q_edges = np.unique(np.r_[0, rng.integers(0, g.L + 4, size=4), g.L + 3])
        k_edges = np.unique(np.r_[0, rng.integers(0, g.L + 4, size=4), g.L])
        np.testing.assert_array_equal(UnionMask(band, g).count_grid(q_edges, k_edges),
                                      ArrayMask(union).count_grid(q_edges, k_edges))
        assert (classify(UnionMask(band, g), Tile(16, 24)).stats.full,
                classify(UnionMask(band, g), Tile(16, 24)).stats.partial) == brute_stats(union, 16, 24)


def brute_maxdiffusion_classes(allowed: np.ndarray, bq: int, bkv: int):
    """MaxDiffusion's tile classes of a band + sink array, tile by tile from the definition: a tile is *live* when
    it holds an allowed pair, *full* when it lies wholly inside the sequence and every pair is in the sink alone or
    in the band alone (sink_only / band_only arrays), the rest of the live tiles *boundary*."""
    L = allowed.shape[0]
    return lambda sink_only, band_only: [
        [(bool(allowed[q0:q0 + bq, k0:k0 + bkv].any()),
          q0 + bq <= L and k0 + bkv <= L and (bool(sink_only[q0:q0 + bq, k0:k0 + bkv].all())
                                              or bool(band_only[q0:q0 + bq, k0:k0 + bkv].all())))
         for k0 in range(0, -(-L // bkv) * bkv, bkv)] for q0 in range(0, -(-L // bq) * bq, bq)]


@pytest.mark.parametrize("L, sink, window, bq, bkv", [(200, 40, 17, 32, 48), (257, 0, 64, 64, 64),
                                                       (130, 60, 30, 24, 40), (96, 33, 5, 100, 7), (300, 90, 0, 64, 32)])
def test_maxdiffusion_tile_classes_equal_brute_force(L, sink, window, bq, bkv):
    from svgtpu.masks.c3_search import maxdiffusion_tile_classes
    q, k = np.arange(L)[:, None], np.arange(L)[None, :]
    sink_only, band_only = np.broadcast_to(k < sink, (L, L)), np.abs(q - k) <= window
    classes = np.array(brute_maxdiffusion_classes(sink_only | band_only, bq, bkv)(sink_only, band_only))
    got = maxdiffusion_tile_classes(BandSinkMask(L, sink, window), Tile(bq, bkv))
    np.testing.assert_array_equal(got["live"], classes[..., 0])
    np.testing.assert_array_equal(got["full"], classes[..., 0] & classes[..., 1])
    np.testing.assert_array_equal(got["boundary"], classes[..., 0] & ~classes[..., 1])


def test_maxdiffusion_shares_hand_worked():
    # L = 8, no sink, band |q - k| <= 1, 4 x 4 tiles: diagonal tiles have 10 of 16 pairs, the two off-diagonal
    # ones 1 each; none is full, all four are boundary (before 4/4).  The budget is 22 pairs: prefixes by share run
    # 16, 32, ... pairs -> the two diagonal tiles (32 pairs, error 10) vs one (16, error 6): one tile of 16 runs.
    # Nothing touches the sequence end (L is a multiple of 4): after = 0.
    from svgtpu.masks.c3_search import maxdiffusion_shares
    shares = maxdiffusion_shares(BandSinkMask(8, 0, 1), Tile(4, 4))
    assert shares["before"] == 1.0 and shares["after_global"] == 0.0
    assert shares["pair_error_global"] == (16 - 22) / 22
    # per row the budgets are 11 and 11: each row keeps its diagonal tile (16, error 5 < 11)
    assert shares["pair_error_row"] == (32 - 22) / 22


def test_maxdiffusion_search_counts_both_ways():
    from svgtpu.masks.c3_search import format_maxdiffusion_search, maxdiffusion_search
    found = maxdiffusion_search(["2x16x16"], [Tile(128, 128), Tile(96, 160)], densities=(0.2, 0.5), progress=False)
    assert found["searched"] == 2 * 2 * 2 * 2   # tiles x densities x sink x policy
    row = found["rows"][0]
    assert {"before", "after", "ours_before", "ours_after", "pair_error"} <= set(row)
    assert all(0 <= r[k] <= 1 for r in found["rows"] for k in ("before", "after", "ours_before", "ours_after"))
    assert "MaxDiffusion's counting" in format_maxdiffusion_search(found)
