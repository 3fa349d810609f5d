"""BlockMask, STA and radial masks: counts and tile kinds against brute-force L x L evaluation."""

import math

import numpy as np
import pytest

from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.masks.families import BlockMask, RadialMask, STAMask, sta_order
from svgtpu.masks.core import ArrayMask, align
from svgtpu.masks.tiles import classify


def random_grid(rng, L):
    """Sorted edges with repeats and edges past L (padding), as tile classification produces."""
    inner = np.sort(rng.integers(0, L + 1, size=int(rng.integers(1, 6))))
    return np.concatenate([[0], inner, [L, L + int(rng.integers(0, 40))]])


def assert_counts_match_brute_force(mask, rng, grids=4):
    A = mask.to_array()
    brute = ArrayMask(A)
    for _ in range(grids):
        qe, ke = random_grid(rng, mask.L), random_grid(rng, mask.L)
        np.testing.assert_array_equal(mask.count_grid(qe, ke), brute.count_grid(qe, ke))
    for bq, bk in ((128, 128), (128, 256), (96, 40)):
        np.testing.assert_array_equal(classify(mask, Tile(bq, bk)).kinds, classify(brute, Tile(bq, bk)).kinds)


@pytest.mark.parametrize("seed", range(4))
def test_block_mask_matches_brute_force(seed):
    print("seed", seed)
    rng = np.random.default_rng(seed)
    L = int(rng.integers(50, 400))
    qe = np.concatenate([[0], np.sort(rng.integers(0, L + 1, size=int(rng.integers(1, 9)))), [L]])
    ke = np.concatenate([[0], np.sort(rng.integers(0, L + 1, size=int(rng.integers(1, 9)))), [L]])
    table = rng.random((len(qe) - 1, len(ke) - 1)) < 0.4
    mask = BlockMask(L, qe, ke, table)
    A = np.zeros((L, L), dtype=bool)  # paint the blocks one by one
    for a in range(len(qe) - 1):
        for b in range(len(ke) - 1):
            A[qe[a]:qe[a + 1], ke[b]:ke[b + 1]] = table[a, b]
    np.testing.assert_array_equal(mask.to_array(), A)
    assert_counts_match_brute_force(mask, rng)
    assert mask == BlockMask(L, qe.copy(), ke.copy(), table.copy()) and len({mask, BlockMask(L, qe, ke, table)}) == 1


def test_block_mask_rejects_bad_edges():
    with pytest.raises(ValueError, match="q_edges"):
        BlockMask(10, [0, 5, 4, 10], [0, 10], np.ones((3, 1), bool))
    with pytest.raises(ValueError, match="k_edges"):
        BlockMask(10, [0, 10], [0, 9], np.ones((1, 1), bool))
    with pytest.raises(ValueError, match="table"):
        BlockMask(10, [0, 10], [0, 10], np.ones((2, 1), bool))


def sta_brute(g: VideoGeometry, tile, window) -> np.ndarray:
    """STA from its definition, token by token: each token's (t, h, w), the query's tile window
    start clamped inside the video, and the key's tile inside that window on every axis."""
    perm = sta_order(g, tile)
    coords = np.stack([perm // (g.H * g.W), (perm // g.W) % g.H, perm % g.W])  # tiled position -> (t, h, w)
    allowed = np.ones((g.L, g.L), dtype=bool)
    for axis, n in enumerate((g.T, g.H, g.W)):
        n_tiles = math.ceil(n / tile[axis])
        w = min(window[axis], n_tiles)
        q_tile, k_tile = coords[axis][:, None] // tile[axis], coords[axis][None, :] // tile[axis]
        start = np.array([min(max(t - w // 2, 0), n_tiles - w) for t in range(n_tiles)])[q_tile]
        allowed &= (start <= k_tile) & (k_tile < start + w)
    return allowed


@pytest.mark.parametrize("dims,tile,window", [((8, 10, 14), (4, 4, 4), (1, 3, 3)),
                                              ((5, 6, 7), (2, 4, 3), (3, 1, 2)),
                                              ((3, 4, 4), (1, 2, 2), (5, 5, 5))])
def test_sta_matches_definition(dims, tile, window):
    rng = np.random.default_rng(7)
    g = VideoGeometry(*dims)
    mask = STAMask(g, tile, window)
    A = sta_brute(g, tile, window)
    np.testing.assert_array_equal(mask.to_array(), A)
    assert abs(mask.density() - A.mean()) < 1e-12  # the separable shortcut
    assert_counts_match_brute_force(mask, rng)


def test_sta_order_is_a_permutation_and_identity_for_one_tile():
    g = VideoGeometry(3, 5, 7)
    perm = sta_order(g, (2, 2, 3))
    np.testing.assert_array_equal(np.sort(perm), np.arange(g.L))
    np.testing.assert_array_equal(sta_order(g, (3, 5, 7)), np.arange(g.L))


def test_sta_tiles_of_128_tokens_are_kernel_aligned():
    # hand-worked: 4 frames of 8x16 tokens, one frame per tile (128 tokens), window of 3 frame
    # tiles shifted inward at the ends: every query tile sees 3 of the 4 tiles, and every kernel
    # tile of 128 x 128 is a whole STA tile pair, so nothing is partial.
    mask = STAMask(VideoGeometry(4, 8, 16), (1, 8, 16), (3, 1, 1))
    stats = classify(mask, Tile(128, 128)).stats
    assert (stats.full, stats.partial, stats.empty) == (12, 0, 4)
    assert mask.density() == 0.75


def radial_brute(T: int, F: int, sink_frames: int = 0) -> np.ndarray:
    """Radial attention from the paper's rule, with integer loops (band found by doubling)."""
    A = np.zeros((T * F, T * F), dtype=bool)
    for i in range(T):
        for j in range(T):
            d = abs(i - j)
            scale = 1
            while scale * 2 <= max(d, 1):
                scale *= 2
            for a in range(F):
                for b in range(F):
                    if j < sink_frames:
                        ok = True
                    elif scale <= F:
                        ok = (abs(a - b) + 1) * scale <= F
                    else:
                        ok = a == b and d % -(-scale // F) == 0
                    A[i * F + a, j * F + b] = ok
    return A


@pytest.mark.parametrize("T,H,W,sink", [(5, 2, 2, 0), (9, 1, 3, 1), (40, 1, 3, 0), (8, 4, 5, 1)])
def test_radial_matches_definition(T, H, W, sink):
    rng = np.random.default_rng(T)
    mask = RadialMask(VideoGeometry(T, H, W), sink_frames=sink)
    np.testing.assert_array_equal(mask.to_array(), radial_brute(T, H * W, sink))
    assert_counts_match_brute_force(mask, rng)


def test_radial_hand_worked_and_window_fraction():
    # T=5, F=4: frame distance 0-1 -> all 4x4 pairs, 2-3 -> |a-b| <= 1 (10 pairs), 4 -> a == b (4 pairs)
    mask = RadialMask(VideoGeometry(5, 2, 2))
    frame_pairs = {0: 5, 1: 8, 2: 6, 3: 4, 4: 2}  # ordered frame pairs at each distance
    expected = sum(n * {0: 16, 1: 16, 2: 10, 3: 10, 4: 4}[d] for d, n in frame_pairs.items())
    assert mask.num_allowed() == expected
    # window_fraction 0.5 (F -> 2 in both rules): distance 0-1 -> |a-b| <= 1 (10 pairs), 2-3 -> a == b,
    # 4 -> span 0.5 < 1, so the diagonal on frames at even distance: a == b again
    half = RadialMask(VideoGeometry(5, 2, 2), window_fraction=0.5)
    assert half.num_allowed() == (5 + 8) * 10 + (6 + 4) * 4 + 2 * 4
    rng = np.random.default_rng(3)
    assert_counts_match_brute_force(RadialMask(VideoGeometry(6, 3, 5), 0, 0.37), rng)


def test_radial_snapping_removes_partial_tiles():
    mask = RadialMask(VideoGeometry(8, 16, 16))  # F = 256: frames are whole 128-token tiles
    snapped = align(mask, Tile(128, 128), "snap")
    assert classify(mask, Tile(128, 128)).stats.partial > 0
    assert classify(snapped, Tile(128, 128)).stats.partial == 0


def test_bad_parameters_name_themselves():
    g = VideoGeometry(4, 4, 4)
    with pytest.raises(ValueError, match="tile"):
        STAMask(g, (0, 2, 2), (1, 1, 1))
    with pytest.raises(ValueError, match="window"):
        STAMask(g, (2, 2, 2), (1, 1))
    with pytest.raises(ValueError, match="sink_frames"):
        RadialMask(g, sink_frames=5)
    with pytest.raises(ValueError, match="window_fraction"):
        RadialMask(g, window_fraction=0)
