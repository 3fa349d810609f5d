"""The explorer's computing core (settings -> stats + figure), checked against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from svgtpu.geometry import VideoGeometry
from svgtpu.masks import BandSinkMask, PermutedMask


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
