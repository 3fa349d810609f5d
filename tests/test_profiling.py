"""Online head profiling: planted spatial/temporal heads are recovered, MSEs match float64 numpy,
and no L x L array is ever traced."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.attention import SVGConfig
from svgtpu import profiling
from svgtpu.cli import main
from svgtpu.geometry import VideoGeometry
from svgtpu.masks import PermutedMask
from svgtpu.profiling import classify_heads, planted_heads, profile_planted
from svgtpu.tiles import classify

# frame sizes 140, 117, 77: none a multiple of 128
GEOMETRIES = [VideoGeometry(4, 10, 14), VideoGeometry(3, 9, 13), VideoGeometry(6, 7, 11)]


def test_planted_heads_are_recovered():
    confusion = sum(profile_planted(g, SVGConfig(), seeds=[0, 1, 2], heads=8, head_dim=32) for g in GEOMETRIES)
    assert confusion.sum() == 3 * 3 * 8 and confusion[:, 1].sum() > 0 and confusion[:, 0].sum() > 0
    assert np.trace(confusion) / confusion.sum() >= 0.95, confusion


def test_classify_heads_returns_one_kind_per_head():
    g = GEOMETRIES[2]
    kinds = np.array([1, 0, 1])
    q, k, v = planted_heads(g, kinds, 4, head_dim=16)
    got = classify_heads(q, k, v, g, SVGConfig(multiplier=0.9), jax.random.PRNGKey(5))
    assert got.shape == (3,) and got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), kinds)


def test_planted_heads_recovered_with_aligned_mask_and_batch():
    g = GEOMETRIES[0]
    kinds = np.array([[0, 1, 1, 0], [1, 0, 0, 1]])
    qkv = [planted_heads(g, kinds[b], 7 + b) for b in range(2)]
    q, k, v = (jnp.stack(x) for x in zip(*qkv))
    config = SVGConfig(multiplier=1.0, align="snap")
    got, mse = classify_heads(q, k, v, g, config, jax.random.PRNGKey(3), return_mse=True)
    assert got.shape == (2, 4) and mse.shape == (2, 4, 2)
    np.testing.assert_array_equal(np.asarray(got), kinds)
    # batch entries are profiled independently with the same rows
    single = classify_heads(*qkv[1], g, config, jax.random.PRNGKey(3), return_mse=True)[1]
    np.testing.assert_allclose(np.asarray(mse[1]), np.asarray(single), rtol=1e-5)


def _reference_output(q, k, v, allowed):
    """float64 masked attention, ``q, k, v [h, L, d]``, ``allowed [L, L]``; rows without keys give 0."""
    s = np.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
    s = np.where(allowed, s, -np.inf)
    has_key = allowed.any(-1)[:, None]
    p = np.exp(s - np.where(has_key, s.max(-1, keepdims=True), 0))
    return np.where(has_key, np.einsum("hqk,hkd->hqd", p / np.maximum(p.sum(-1, keepdims=True), 1e-300), v), 0)


@pytest.mark.parametrize("fields", [
    dict(sparsity=0.4),
    dict(sparsity=0.4, align="cover"),
    dict(multiplier=1.0, align="inner", block_q=256, block_kv=256),  # spatial rows 0..255 keep no key
])
def test_mse_equals_float64_reference_with_all_rows(fields, monkeypatch):
    monkeypatch.setattr(profiling, "PROFILE_CHUNK_BYTES", 2 * 16 * 351 * 351)  # chunks of 2 heads of 3
    g = GEOMETRIES[1]
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((3, g.L, 16)) * 1.5 for _ in range(3))
    config = SVGConfig(num_sampled_rows=g.L, **fields)  # all rows: their order does not matter
    kinds, mse = classify_heads(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)), g, config,
                                jax.random.PRNGKey(0), return_mse=True)
    mask = config.mask(g)
    exact = _reference_output(q, k, v, np.ones((g.L, g.L), bool))
    want = np.stack([((_reference_output(q, k, v, m.to_array()) - exact) ** 2).mean(axis=(1, 2))
                     for m in (mask, PermutedMask(mask, g))], axis=-1)
    np.testing.assert_allclose(np.asarray(mse), want, rtol=2e-3, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(kinds), want.argmin(-1))


def _shapes(jaxpr):
    """Every intermediate shape of ``jaxpr``, inside scans and other sub-jaxprs too."""
    for eqn in jaxpr.eqns:
        yield from (var.aval.shape for var in eqn.outvars if hasattr(var.aval, "shape"))
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _shapes(inner)


def test_profiling_never_builds_an_L_by_L_array():
    g = VideoGeometry(4, 12, 16)  # L = 768
    q = jnp.ones((2, 3, g.L, 16))
    jaxpr = jax.make_jaxpr(lambda q, k, v, key: classify_heads(q, k, v, g, SVGConfig(), key))(
        q, q, q, jax.random.PRNGKey(0))
    shapes = list(_shapes(jaxpr.jaxpr))
    assert any(s[-2:] == (64, g.L) for s in shapes)  # the sampled scores are there
    assert not any(sum(dim == g.L for dim in s) >= 2 for s in shapes)


def test_classify_heads_rejects_bad_shapes():
    g = GEOMETRIES[0]
    x = jnp.ones((2, g.L, 8))
    with pytest.raises(ValueError, match="share one shape"):
        classify_heads(x, x[:1], x, g, SVGConfig(), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="does not match geometry"):
        classify_heads(x[:, :-1], x[:, :-1], x[:, :-1], g, SVGConfig(), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="kinds must be"):
        planted_heads(g, [0, 2], 0)


def test_profile_command_prints_confusion_table_and_timing(capsys):
    assert main(["profile", "--geometry", "3x9x13", "--heads", "4", "--seeds", "0", "1", "--time",
                 "--rounds", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    confusion = result["confusion"]
    assert sum(sum(row.values()) for row in confusion.values()) == 8
    assert result["accuracy"] >= 0.95 and result["provenance"] == "computed"
    timing = result["timing"]
    assert timing["provenance"] == "measured-cpu-interpret" and timing["profile_s"] > 0
    stats = classify(SVGConfig().mask(VideoGeometry(3, 9, 13)), 128, 128).stats
    visited = (stats.full + stats.partial) * 128 * 128  # pairs the kernel computes, 4 d flops each
    assert timing["flop_ratio"] == pytest.approx(8 * 64 * 351 / (4 * visited))  # profiling: 8 r L d
    assert main(["profile", "--geometry", "3x9x13", "--time", "--backend", "reference"]) == 2
    assert "backend must be ours or splash" in capsys.readouterr().err
    assert main(["profile", "--geometry", "0x9x13"]) == 2
    assert "geometry" in capsys.readouterr().err
