"""SVG2: clustering, permutation, centroid scores, top-p, and the sparse output against float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float64_reference import masked_attention, relative_error

from svgtpu.masks.core import align
from svgtpu.geometry import Tile
from svgtpu.attention.svg2 import (SVG2Config, block_masks, centroid_scores, cluster_order, original_order_mask, permute,
                         select, svg2_attention, svg2_backend, top_p_table, unpermute)
from svgtpu.masks.tiles import PARTIAL, classify

L = 300  # not a multiple of the 128 tiles
TILE = dict(block_q=128, block_kv=128)
SMALL = dict(q_clusters=6, k_clusters=10, top_p=0.6, first_iters=4, **TILE)  # shared: one compile of select


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


def host_masks(sel, config):
    """The mask the kernel should run, built on the host with the mask objects: ``[H, L, L]`` in the
    model's token order (unsnapped: straight from the labels, no permutation involved)."""
    if config.align is None:
        return original_order_mask(sel)
    q_inv, k_inv = (np.argsort(np.asarray(p), axis=-1) for p in (sel.q_perm, sel.k_perm))
    return np.stack([m.to_array()[q_inv[h]][:, k_inv[h]] for h, m in enumerate(block_masks(sel, config))])


@pytest.mark.parametrize("dtype,align_mode,fast_path", [("float32", None, True), ("bfloat16", "snap", False)])
def test_jitted_svg2_equals_float64_reference_under_its_mask_with_one_compile(dtype, align_mode, fast_path):
    seed = 21
    print("seed", seed, dtype, align_mode, fast_path)
    rng = np.random.default_rng(seed)
    heads = 3
    config = SVG2Config(**SMALL, align=align_mode, fast_path=fast_path)
    traces = []

    @jax.jit
    def layer(q, k, v):  # the whole SVG2 call, clusters to output, in one program
        traces.append(1)
        return svg2_attention(q, k, v, config, key=jax.random.PRNGKey(seed))

    kept = []
    for _ in range(2):  # two inputs, two different masks, one trace
        q, k, v = (jnp.asarray(rng.normal(size=(heads, L, 64)), dtype) for _ in range(3))
        out, sel, info = layer(q, k, v)
        assert out.shape == q.shape and out.dtype == q.dtype and not bool(info.overflow.any())
        M = host_masks(sel, config)
        assert 0 < M.mean() < 1
        np.testing.assert_allclose(np.asarray(info.kept_fraction), M.mean((1, 2)), atol=1e-6)
        for h, mask in enumerate(block_masks(sel, config)):  # the kernel's tiles: the host classification
            np.testing.assert_array_equal(np.asarray(info.kinds[h]), classify(mask, Tile(128, 128)).kinds)
        assert relative_error(out, masked_attention(q, k, v, M)) < (2e-5 if dtype == "float32" else 3e-2)
        kept.append(M)
    assert len(traces) == 1 and not np.array_equal(kept[0], kept[1])


def test_snapping_the_cluster_masks_leaves_only_padding_partial():
    rng = np.random.default_rng(8)
    q, k = (jnp.asarray(rng.normal(size=(3, L, 64)), jnp.float32) for _ in range(2))
    sel = select(q, k, SVG2Config(**SMALL))  # same static settings and shapes: no new compile
    for mask in block_masks(sel):
        kinds = classify(mask, Tile(128, 128)).kinds
        assert 0 < mask.density() < 1 and (kinds == PARTIAL).any()
        snapped = classify(align(mask, Tile(128, 128), "snap"), Tile(128, 128)).kinds
        assert not (snapped[:, :-1] == PARTIAL).any()  # only the last kv tile holds padded keys


def test_bad_config_and_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="top_p"):
        SVG2Config(top_p=0, **TILE)
    with pytest.raises(ValueError, match="min_kept_fraction"):
        SVG2Config(min_kept_fraction=1.5, **TILE)
    with pytest.raises(ValueError, match="align"):
        SVG2Config(align="round", **TILE)
    with pytest.raises(ValueError, match="q_clusters"):
        SVG2Config(q_clusters=0, **TILE)
    with pytest.raises(ValueError, match="block_q must be a positive multiple of 8"):
        SVG2Config(block_q=100, block_kv=128)
    with pytest.raises(ValueError, match="max_steps"):
        SVG2Config(max_steps=0, **TILE)
    x = jnp.zeros((1, 20, 64))
    with pytest.raises(ValueError, match="k_clusters"):
        select(x, x, SVG2Config(q_clusters=4, k_clusters=32, **TILE))
    x = jnp.zeros((1, 300, 64))
    with pytest.raises(ValueError, match=r"^max_steps must be .* from 3 .* to 9"):
        svg2_attention(x, x, x, SVG2Config(**SMALL, max_steps=10))


@pytest.mark.system
@pytest.mark.slow
def test_backend_inside_jit_equals_the_direct_calls_and_warm_starts_from_its_own_state():
    seed = 9
    print("seed", seed)
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.normal(size=(1, 3, L, 64)), jnp.float32) for _ in range(3))
    config = SVG2Config(**SMALL)
    backend = svg2_backend(config, warmup_step_fraction=1 / 3, seed=seed)

    @jax.jit
    def layer_one(q, k, v, step):
        return backend(q, k, v, layer=1, step=step, num_steps=3, num_layers=2)

    first, sel, _ = svg2_attention(q[0], k[0], v[0], config, key=jax.random.PRNGKey(seed + 1))
    warm, _, _ = svg2_attention(q[0], k[0], v[0], config, sel.state)  # step 2 starts from step 1's centroids
    for step, direct in ((1, first), (2, warm)):
        got = np.asarray(layer_one(q, k, v, jnp.int32(step)))[0]
        np.testing.assert_allclose(got, np.asarray(direct), rtol=1e-6, atol=1e-6)
    assert not np.allclose(np.asarray(first), np.asarray(warm), atol=1e-6)  # the warm start did change the mask
    layer_one(q, k, v, jnp.int32(0))  # a dense warm-up step
    calls = backend.calls
    assert [(c["step"], c["layer"], c["partial_share"] is None) for c in calls] == [(0, 1, True), (1, 1, False),
                                                                                     (2, 1, False)]
    assert calls[0]["kept_fraction"] == 1.0 and 0 < calls[1]["kept_fraction"] < 1


def test_reference_path_builds_the_kernels_mask_from_the_same_data():
    """The jnp reference path's [H, L, L] mask (permuted order) is the host mask objects' mask, snapped
    or not; end to end it agrees with the kernel."""
    from svgtpu.kernels.dynamic_plan import block_table_kinds
    from svgtpu.attention.svg2 import _permuted_mask

    seed = 5
    print("seed", seed)
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.normal(size=(3, L, 64)), jnp.float32) for _ in range(3))
    sel = select(q, k, SVG2Config(**SMALL))
    for align_mode in (None, "snap"):
        config = SVG2Config(**SMALL, align=align_mode)
        kinds, _ = block_table_kinds(sel.q_edges, sel.k_edges, sel.table, L=L, block_q=128, block_kv=128,
                                     align=align_mode)
        want = np.stack([m.to_array() for m in block_masks(sel, config)])
        np.testing.assert_array_equal(np.asarray(_permuted_mask(sel, kinds, config)), want)
    ours, _, info = svg2_attention(q, k, v, SVG2Config(**SMALL), key=jax.random.PRNGKey(seed))
    ref, _, ref_info = svg2_attention(q, k, v, SVG2Config(**SMALL, kernel="reference"), key=jax.random.PRNGKey(seed))
    np.testing.assert_array_equal(np.asarray(info.needed_steps), np.asarray(ref_info.needed_steps))
    assert relative_error(ours, ref) < 2e-5
