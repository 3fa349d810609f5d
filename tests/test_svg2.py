"""SVG2: clustering, permutation, centroid scores, top-p, and the sparse output against float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float64_reference import masked_attention, relative_error

from svgtpu.mask_families import BlockMask
from svgtpu.masks import TileMask, align
from svgtpu.svg2 import (SVG2Config, block_masks, centroid_scores, cluster_order, original_order_mask, permute,
                         select, svg2_attention, svg2_backend, top_p_table, unpermute)
from svgtpu.tiles import PARTIAL, classify

L = 300  # not a multiple of the 128 tiles
SMALL = dict(q_clusters=6, k_clusters=10, top_p=0.6, first_iters=4)  # shared: one compile of select


def planted(rng, heads, clusters, d=64, spread=0.05):
    """Tokens around ``clusters`` far-apart centres per head, and each token's planted cluster."""
    centres = rng.normal(size=(heads, clusters, d))
    labels = rng.integers(0, clusters, size=(heads, L))
    labels[:, :clusters] = np.arange(clusters)  # every cluster is populated
    x = centres[np.arange(heads)[:, None], labels] + spread * rng.normal(size=(heads, L, d))
    return jnp.asarray(x, jnp.float32), labels


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """True iff labelings ``a`` and ``b`` group the tokens identically (up to renaming)."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_planted_clusters_are_recovered_and_kept_by_warm_start():
    seed = 11
    print("seed", seed)
    rng = np.random.default_rng(seed)
    q, q_labels = planted(rng, heads=3, clusters=SMALL["q_clusters"])
    k, k_labels = planted(rng, heads=3, clusters=SMALL["k_clusters"])
    config = SVG2Config(**SMALL, warm_iters=1)
    sel = select(q, k, config, key=jax.random.PRNGKey(seed))
    for h in range(3):
        assert same_partition(np.asarray(sel.q_labels[h]), q_labels[h])
        assert same_partition(np.asarray(sel.k_labels[h]), k_labels[h])
    again = select(q, k, config, sel.state)  # warm start from converged centroids: nothing moves
    np.testing.assert_array_equal(np.asarray(again.q_labels), np.asarray(sel.q_labels))
    np.testing.assert_allclose(np.asarray(again.state.k_centroids), np.asarray(sel.state.k_centroids),
                               rtol=1e-6, atol=1e-6)


def test_permutation_round_trips_exactly_and_makes_clusters_contiguous():
    seed = 4
    print("seed", seed)
    rng = np.random.default_rng(seed)
    labels = jnp.asarray(rng.integers(0, 9, size=(3, L)), jnp.int32)
    x = jnp.asarray(rng.normal(size=(3, L, 64)), jnp.bfloat16)
    perm, edges = cluster_order(labels, 9)
    np.testing.assert_array_equal(np.asarray(unpermute(permute(x, perm), perm)), np.asarray(x))  # bitwise
    sorted_labels = np.asarray(permute(labels, perm))
    for h in range(3):
        assert np.all(np.diff(sorted_labels[h]) >= 0)
        e = np.asarray(edges[h])
        for c in range(9):  # cluster c occupies exactly [edges[c], edges[c+1])
            assert np.all(sorted_labels[h, e[c]:e[c + 1]] == c)
            assert e[c + 1] - e[c] == int(np.sum(np.asarray(labels[h]) == c))


def test_centroid_scores_are_the_attention_mass_of_tokens_on_their_centroids():
    seed = 5
    print("seed", seed)
    rng = np.random.default_rng(seed)
    cq, ck = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 4, 8))
    k_labels = rng.integers(0, 3, size=(2, 25))  # key cluster 3 stays empty
    counts = np.stack([np.bincount(l, minlength=4) for l in k_labels])
    got = np.asarray(centroid_scores(jnp.asarray(cq, jnp.float32), jnp.asarray(ck, jnp.float32),
                                     jnp.asarray(counts), 0.5))
    for h in range(2):
        keys = ck[h][k_labels[h]]  # every key token sitting on its centroid
        s = cq[h] @ keys.T * 0.5
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        want = np.stack([p[:, k_labels[h] == b].sum(-1) for b in range(4)], -1)
        np.testing.assert_allclose(got[h], want, rtol=1e-5, atol=1e-7)


def test_top_p_hand_worked():
    scores = jnp.asarray([[[0.05, 0.5, 0.0, 0.15, 0.3]]])  # ranked: 0.5, 0.3, 0.15, 0.05, 0 (empty)
    keep = lambda p, m: np.asarray(top_p_table(scores, p, m))[0, 0].tolist()  # noqa: E731
    assert keep(0.5, 1) == [False, True, False, False, False]   # 0.5 reaches 0.5
    assert keep(0.7, 1) == [False, True, False, False, True]    # 0.5 < 0.7: add 0.3
    assert keep(0.75, 1) == [False, True, False, False, True]   # 0.8 reaches 0.75
    assert keep(0.85, 1) == [False, True, False, True, True]    # 0.8 < 0.85: add 0.15
    assert keep(0.1, 3) == [False, True, False, True, True]     # at least 3 clusters
    assert keep(1.0, 5) == [True, True, False, True, True]      # never the empty cluster


@pytest.mark.parametrize("dtype,align_mode", [("float32", None), ("bfloat16", "snap")])
def test_svg2_attention_equals_float64_reference_under_its_mask(dtype, align_mode):
    seed = 21
    print("seed", seed, dtype, align_mode)
    rng = np.random.default_rng(seed)
    heads = 3
    q, k, v = (jnp.asarray(rng.normal(size=(heads, L, 64)), dtype) for _ in range(3))
    config = SVG2Config(**SMALL, align=align_mode)
    out, sel, masks = svg2_attention(q, k, v, config, key=jax.random.PRNGKey(seed))
    assert out.shape == q.shape and out.dtype == q.dtype
    q_perm, k_perm = np.asarray(sel.q_perm), np.asarray(sel.k_perm)
    if align_mode is None:
        # the kernel's masks are the label-defined mask seen through the two permutations
        M = original_order_mask(sel)
        for h in range(heads):
            assert isinstance(masks[h], BlockMask)
            np.testing.assert_array_equal(masks[h].to_array(), M[h][q_perm[h]][:, k_perm[h]])
        assert 0 < M.mean() < 1
    else:
        assert all(isinstance(m, TileMask) for m in masks)
        inverse = np.argsort(q_perm, axis=-1)
        M = np.stack([m.to_array()[inverse[h]][:, np.argsort(k_perm[h])] for h, m in enumerate(masks)])
    want = masked_attention(q, k, v, M)
    assert relative_error(out, want) < (2e-5 if dtype == "float32" else 3e-2)


def test_snapping_the_cluster_masks_leaves_only_padding_partial():
    rng = np.random.default_rng(8)
    q, k = (jnp.asarray(rng.normal(size=(3, L, 64)), jnp.float32) for _ in range(2))
    sel = select(q, k, SVG2Config(**SMALL))  # same static settings and shapes: no new compile
    for mask in block_masks(sel):
        kinds = classify(mask, 128, 128).kinds
        assert 0 < mask.density() < 1 and (kinds == PARTIAL).any()
        snapped = classify(align(mask, 128, 128, "snap"), 128, 128).kinds
        assert not (snapped[:, :-1] == PARTIAL).any()  # only the last kv tile holds padded keys


def test_bad_config_and_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="top_p"):
        SVG2Config(top_p=0)
    with pytest.raises(ValueError, match="min_kept_fraction"):
        SVG2Config(min_kept_fraction=1.5)
    with pytest.raises(ValueError, match="align"):
        SVG2Config(align="round")
    with pytest.raises(ValueError, match="q_clusters"):
        SVG2Config(q_clusters=0)
    x = jnp.zeros((1, 20, 64))
    with pytest.raises(ValueError, match="k_clusters"):
        select(x, x, SVG2Config(q_clusters=4, k_clusters=32))


def test_backend_inside_jit_equals_the_direct_call():
    seed = 9
    print("seed", seed)
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.normal(size=(1, 3, L, 64)), jnp.float32) for _ in range(3))
    config = SVG2Config(**SMALL)
    backend = svg2_backend(config, warmup_step_fraction=0.5, seed=seed)

    @jax.jit
    def layer_one(q, k, v, step):
        return backend(q, k, v, layer=1, step=step, num_steps=2, num_layers=2)

    direct, _, _ = svg2_attention(q[0], k[0], v[0], config, key=jax.random.PRNGKey(seed + 1))
    np.testing.assert_array_equal(np.asarray(layer_one(q, k, v, jnp.int32(1)))[0], np.asarray(direct))
    assert [(c["step"], c["layer"], c["kept_fraction"] < 1) for c in backend.calls] == [(1, 1, True)]
