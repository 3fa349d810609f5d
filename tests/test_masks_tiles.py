"""Masks and tile classification against brute-force L x L evaluation (seeded; failures print the seed)."""

import numpy as np
import pytest

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, VideoGeometry, get_geometry
from svgtpu.masks.core import (ArrayMask, BandSinkMask, DenseMask, TileMask, align, alignment_diff,
                          band_window, make_mask, svg_mask,
                          temporal_frame_major_mask, tile_grid)
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL, classify

SEED = 20261130


def brute_kinds(A: np.ndarray, bq: int, bk: int) -> np.ndarray:
    """Tile kinds straight from the definition in docs/design.md, "Tiles"."""
    L = A.shape[0]
    nq, nk = -(-L // bq), -(-L // bk)
    P = np.zeros((nq * bq, nk * bk), dtype=bool)
    P[:L, :L] = A
    kinds = np.empty((nq, nk), dtype=np.int8)
    for i in range(nq):
        rows = P[i * bq:min((i + 1) * bq, L)]  # padded query rows are discarded
        for j in range(nk):
            t = rows[:, j * bk:(j + 1) * bk]
            kinds[i, j] = EMPTY if not t.any() else FULL if t.all() else PARTIAL
    return kinds


def random_masks(rng, g: VideoGeometry, bq: int, bk: int):
    mult = float(rng.uniform(0.05, 1.5))
    base = [svg_mask(g, mult), temporal_frame_major_mask(g, mult), DenseMask(g.L),
            ArrayMask(rng.random((g.L, g.L)) < 0.2),
            BandSinkMask(g.L, int(rng.integers(0, g.L)), int(rng.integers(0, g.L)))]
    aligned = [align(m, Tile(bq, bk), mode) for m, mode in zip(base, ["snap", "cover", "inner", "snap", "snap"])]
    return base + aligned


@pytest.mark.parametrize("seed", range(12))
def test_tile_kinds_and_counts_equal_brute_force(seed):
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    g = VideoGeometry(*(int(v) for v in rng.integers(1, [5, 8, 9]) + [0, 1, 1]))
    bq, bk = (int(v) for v in rng.integers(3, 40, size=2))
    for mask in random_masks(rng, g, bq, bk):
        A = mask.to_array()
        kinds = classify(mask, Tile(bq, bk)).kinds
        np.testing.assert_array_equal(kinds, brute_kinds(A, bq, bk), err_msg=f"{mask!r:.80} seed {seed}")
        qe, ke = tile_grid(g.L, Tile(bq, bk))
        P = np.zeros((qe[-1], ke[-1]), dtype=bool)
        P[:g.L, :g.L] = A
        brute = P.reshape(len(qe) - 1, bq, len(ke) - 1, bk).sum(axis=(1, 3))
        np.testing.assert_array_equal(mask.count_grid(qe, ke), brute)
        assert mask.num_allowed() == A.sum()


def test_svg_mask_definition():
    g = VideoGeometry(4, 6, 7)  # F = 42
    m = svg_mask(g, 2.0)
    assert m.window == band_window(g, 2.0) == 128
    q, k = np.meshgrid(np.arange(g.L), np.arange(g.L), indexing="ij")
    np.testing.assert_array_equal(m.to_array(), (k < g.F) | (np.abs(q - k) <= 128))


def test_temporal_frame_major_is_the_band_seen_through_the_permutation():
    g = VideoGeometry(5, 3, 4)
    fm = temporal_frame_major_mask(g, 1.0)
    idx = g.to_spatial_major_index()  # spatial-major position p holds frame-major token idx[p]
    np.testing.assert_array_equal(fm.to_array()[np.ix_(idx, idx)], fm.base.to_array())
    # strided: a query attends to the same spatial position in neighbouring frames
    q = 2 * g.F + 5
    assert fm.to_array()[q, [f * g.F + 5 for f in range(g.T)]].all()


def test_alignment_removes_partial_tiles_and_reports_the_difference():
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    g = VideoGeometry(3, 9, 11)
    bq, bk = 16, 24
    m = svg_mask(g, float(rng.uniform(0.3, 1.0)))
    for mode in ("snap", "cover", "inner"):
        a = align(m, Tile(bq, bk), mode)
        kinds = classify(a, Tile(bq, bk)).kinds
        # only the last kv tile column holds padded keys; nothing else may be partial
        assert not (kinds[:, :-1] == PARTIAL).any()
        A, B = m.to_array(), a.to_array()
        d = alignment_diff(m, a)
        assert d.added == int((B & ~A).sum()) and d.dropped == int((A & ~B).sum())
        assert (d.original, d.aligned) == (int(A.sum()), int(B.sum()))
    assert alignment_diff(m, align(m, Tile(bq, bk), "cover")).dropped == 0
    assert alignment_diff(m, align(m, Tile(bq, bk), "inner")).added == 0


@pytest.mark.parametrize("seed", range(SEED, SEED + 4))
def test_snap_is_closest_tile_aligned_mask(seed):
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    g = VideoGeometry(2, 5, 9)
    m = ArrayMask(rng.random((g.L, g.L)) < 0.5)
    snap, cover, inner = (alignment_diff(m, align(m, Tile(8, 8), mode)) for mode in ("snap", "cover", "inner"))
    err = lambda d: d.added + d.dropped  # noqa: E731
    assert err(snap) <= min(err(cover), err(inner))


def test_tile_mask_allowed_matches_tiles():
    tiles = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
    m = TileMask(20, 10, 7, tiles)
    A = m.to_array()
    assert A[0, 0] and not A[0, 7] and A[0, 14] and A[19, 19] and not A[10, 0]
    with pytest.raises(ValueError, match="tiles must have shape"):
        TileMask(21, 10, 7, tiles)


@pytest.mark.parametrize("seed", range(6))
def test_tile_mask_counts_any_grid_like_its_array(seed):
    """A tile mask's pair counts on grids that are not its own (repeated edges, edges past L), against
    the sums of its ``L x L`` array."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    L, bq, bk = (int(v) for v in rng.integers([20, 3, 3], [300, 60, 60]))
    m = TileMask(L, bq, bk, rng.random((-(-L // bq), -(-L // bk))) < 0.5)
    prefix = np.zeros((L + 1, L + 1), dtype=np.int64)
    prefix[1:, 1:] = m.to_array().cumsum(0).cumsum(1)
    for _ in range(4):
        qe, ke = (np.concatenate([[0], np.sort(rng.integers(0, L + 1, size=int(rng.integers(1, 8)))), [L, L + 7]])
                  for _ in range(2))
        P = prefix[np.minimum(qe, L)[:, None], np.minimum(ke, L)[None, :]]
        np.testing.assert_array_equal(m.count_grid(qe, ke), P[1:, 1:] - P[:-1, 1:] - P[1:, :-1] + P[:-1, :-1])


@pytest.mark.parametrize("seed", range(6))
def test_band_sink_blocks_are_the_masks_pairs(seed):
    """A band + sink mask's blocks (built from shifted views of one run) hold exactly its ``allowed`` pairs,
    padded rows and keys (past L) disallowed, for blocks anywhere, also past L."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    L = int(rng.integers(5, 200))
    m = BandSinkMask(L, int(rng.integers(0, L)), int(rng.integers(0, L)))
    for _ in range(6):
        q0, k0 = (int(v) for v in rng.integers(0, L + 20, size=2))
        q1, k1 = q0 + int(rng.integers(0, 60)), k0 + int(rng.integers(0, 60))
        q, k = np.arange(q0, q1)[:, None], np.arange(k0, k1)[None, :]
        want = ((k < m.sink) | (np.abs(q - k) <= m.window)) & (q < L) & (k < L)
        np.testing.assert_array_equal(m.block(q0, q1, k0, k1), want)


def test_masks_are_hashable_values():
    g = VideoGeometry(2, 4, 4)
    assert svg_mask(g, 1.0) == svg_mask(g, 1.0) and hash(svg_mask(g, 1.0)) == hash(svg_mask(g, 1.0))
    a = np.eye(g.L, dtype=bool)
    assert ArrayMask(a) == ArrayMask(a.copy()) and len({ArrayMask(a), ArrayMask(a.copy())}) == 1
    assert align(svg_mask(g, 1.0), Tile(8, 8)) == align(svg_mask(g, 1.0), Tile(8, 8))


def test_kept_to_multiplier_hits_target_density():
    g = get_geometry("720p")
    for target in (0.2, 0.3, 0.5):
        assert abs(svg_mask(g, kept=target).density() - target) < 0.01  # density: pairs counted
    # the contract, brute force: of the band widths W = 128, 256, ... the one whose L x L matrix keeps
    # the fraction closest to the target
    small = VideoGeometry(4, 10, 14)
    q, k = np.meshgrid(np.arange(small.L), np.arange(small.L), indexing="ij")
    kept = {w: ((k < small.F) | (np.abs(q - k) <= w)).mean() for w in range(128, small.L + 128, 128)}
    for target in (0.6, 0.7, 0.9, 0.98):  # kept 0.568, 0.811, 0.949, 0.996 at W = 128 ... 512
        assert svg_mask(small, kept=target).window == min(kept, key=lambda w: abs(kept[w] - target))


@pytest.mark.parametrize("dims", [(2, 8, 16), (3, 8, 8), (4, 10, 14), (2, 8, 8)])
def test_kept_near_every_pair_gets_the_widest_sparse_step_and_only_a_dense_first_step_is_refused(dims):
    # brute force: each band step's L x L matrix; of the steps that drop some pair, the one closest to the target.
    # 2 x 8 x 16 keeps 0.876 at W = 128 and every pair at W = 256: kept 0.95 is nearer the dense step, and was
    # refused with "its first step already keeps every pair", which was false
    g = VideoGeometry(*dims)
    q, k = np.meshgrid(np.arange(g.L), np.arange(g.L), indexing="ij")
    kept = {w: ((k < g.F) | (np.abs(q - k) <= w)).mean() for w in range(128, g.L + 128, 128)}
    sparse = {w: d for w, d in kept.items() if d < 1}
    for target in (0.3, 0.8, 0.9, 0.95, 0.99, 0.999):
        if not sparse:
            assert kept[128] == 1   # the refusal's reason, counted
            with pytest.raises(BadInput, match="first step .* already keeps every pair"):
                svg_mask(g, kept=target)
            continue
        mask = svg_mask(g, kept=target)
        assert mask.window == min(sparse, key=lambda w: abs(sparse[w] - target)), target
        assert mask.density() == pytest.approx(sparse[mask.window]) and mask.density() < 1


@pytest.mark.parametrize("call,match", [
    (lambda g: svg_mask(g, -1.0), "multiplier"),
    (lambda g: svg_mask(g, float("nan")), "multiplier"),
    (lambda g: svg_mask(g, kept=1.0), "kept"),
    (lambda g: svg_mask(g, kept=0.0), "kept"),
    (lambda g: svg_mask(g, 1.0, kept=0.3), "at most one of kept or multiplier"),
    (lambda g: make_mask("diagonal", g, 1.0), "mask must be one of"),
    (lambda g: align(svg_mask(g, 1.0), Tile(8, 8), "round"), "align mode"),
    (lambda g: classify(DenseMask(g.L), Tile(0, 8)), "block_q"),
    (lambda g: classify(DenseMask(g.L), Tile(8, 1.5)), "block_kv"),
    (lambda g: ArrayMask(np.ones((3, 4), dtype=bool)), "square"),
    (lambda g: ArrayMask(np.ones((3, 3))), "dtype bool"),
])
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call(VideoGeometry(2, 4, 4))


def test_wan_1440p_tile_kinds_match_brute_force_on_sampled_tiles():
    """Full scale (L = 302,400, never built L x L): sampled tiles, classified from their own pairs."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    g = get_geometry("1440p")
    m = svg_mask(g, 1.0)
    kinds = classify(m, Tile(512, 512)).kinds
    picks = [tuple(rng.integers(0, kinds.shape)) for _ in range(6)]  # mostly empty: add some of each kind
    picks += [tuple(ij) for kind in (PARTIAL, FULL) for ij in np.argwhere(kinds == kind)[
        rng.choice(int((kinds == kind).sum()), 4, replace=False)]]
    picks.append((kinds.shape[0] - 1, kinds.shape[1] - 1))  # the padded corner tile
    for i, j in picks:
        # padded query rows are left out; padded keys come back False, so such a tile is never full
        pairs = m.block(i * 512, min((i + 1) * 512, g.L), j * 512, (j + 1) * 512)
        want = EMPTY if not pairs.any() else FULL if pairs.all() else PARTIAL
        assert kinds[i, j] == want, (i, j)


def test_wan_1440p_c3_alignment():
    """C3 at full scale: unaligned SVG has many partial tiles, aligned at most the reported 2.22 %."""
    g = get_geometry("1440p")
    m = svg_mask(g, 1.0)
    before = classify(m, Tile(3024, 2048)).stats.partial_share
    assert 0.15 < before < 0.35
    for bq, bk in [(512, 512), (1024, 1024), (3024, 2048)]:
        assert classify(align(m, Tile(bq, bk)), Tile(bq, bk)).stats.partial_share <= 0.0222


@pytest.mark.parametrize("seed", range(3))
def test_pairs_with_offset_at_most_counts_like_brute_force(seed):
    # the closed form under every band count: empty and reversed ranges, offsets far below, inside and above
    from svgtpu.masks.core import pairs_with_offset_at_most
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for _ in range(300):
        q0, k0 = rng.integers(0, 30, 2)
        q1, k1 = q0 + rng.integers(-3, 30), k0 + rng.integers(-3, 30)
        c = int(rng.integers(-70, 70))
        brute = sum(k - q <= c for q in range(q0, q1) for k in range(k0, k1))
        assert pairs_with_offset_at_most(q0, q1, k0, k1, c) == brute, (q0, q1, k0, k1, c)
