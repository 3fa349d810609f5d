"""Online head profiling: planted spatial/temporal heads are recovered, MSEs match float64 numpy,
and no L x L array is ever traced."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from float64_reference import masked_attention
from svgtpu.attention import profiling
from svgtpu.attention.svg import SVGConfig
from svgtpu.cli import main
from svgtpu.geometry import VideoGeometry
from svgtpu.masks.core import PermutedMask, svg_mask
from svgtpu.attention.profiling import classify_heads, planted_heads, profile_planted

# frame sizes 140, 117, 77: none a multiple of 128
GEOMETRIES = [VideoGeometry(4, 10, 14), VideoGeometry(3, 9, 13), VideoGeometry(6, 7, 11)]
TILE = dict(block_q=128, block_kv=128)  # the toy's tile (svgtpu.setting.SMALL_TILE): an SVG config takes it as given


@pytest.mark.parametrize("g", GEOMETRIES)
def test_candidate_rows_are_the_masks_rows_for_every_mask_profiling_runs(g):
    """Tile rows repeated, a one-hot product over key tiles and permuted positions give exactly the mask's own ``allowed`` (numpy, every
    pair) for the band, its tile-aligned twin and both seen through the temporal permutation."""
    seed = 11
    print(f"seed {seed}")
    rows = np.random.default_rng(seed).choice(g.L, 9, replace=False)
    band = svg_mask(g, 0.4)
    aligned = SVGConfig(block_q=64, block_kv=128, align="snap").mask(g)
    for mask in (band, aligned, PermutedMask(band, g), PermutedMask(aligned, g)):
        want = mask.allowed(rows[:, None], np.arange(g.L)[None, :])
        got = np.asarray(jax.jit(profiling.candidate_rows, static_argnums=0)(mask, jnp.asarray(rows)))
        assert got.shape == (9, g.L) and np.array_equal(got, want), type(mask).__name__
        assert 0 < want.sum() < want.size


def test_planted_heads_are_recovered():
    confusion = sum(profile_planted(g, SVGConfig(**TILE).mask(g), seeds=[0, 1, 2], heads=8, head_dim=32)
                    for g in GEOMETRIES)
    assert confusion.sum() == 3 * 3 * 8 and confusion[:, 1].sum() > 0 and confusion[:, 0].sum() > 0
    assert np.trace(confusion) / confusion.sum() >= 0.95, confusion


def test_classify_heads_returns_one_kind_per_head():
    g = GEOMETRIES[2]
    kinds = np.array([1, 0, 1])
    q, k, v = planted_heads(g, kinds, 4, head_dim=16)
    got = classify_heads(q, k, v, g, svg_mask(g, 0.9), jax.random.PRNGKey(5))
    assert got.shape == (3,) and got.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(got), kinds)


def test_planted_heads_recovered_with_aligned_mask_and_batch():
    g = GEOMETRIES[0]
    kinds = np.array([[0, 1, 1, 0], [1, 0, 0, 1]])
    qkv = [planted_heads(g, kinds[b], 7 + b) for b in range(2)]
    q, k, v = (jnp.stack(x) for x in zip(*qkv))
    mask = SVGConfig(multiplier=1.0, align="snap", **TILE).mask(g)
    got, mse = classify_heads(q, k, v, g, mask, jax.random.PRNGKey(3), return_mse=True)
    assert got.shape == (2, 4) and mse.shape == (2, 4, 2)
    np.testing.assert_array_equal(np.asarray(got), kinds)
    # batch entries are profiled independently with the same rows
    single = classify_heads(*qkv[1], g, mask, jax.random.PRNGKey(3), return_mse=True)[1]
    np.testing.assert_allclose(np.asarray(mse[1]), np.asarray(single), rtol=1e-5)


@pytest.mark.parametrize("fields", [
    dict(kept=0.4),
    dict(kept=0.4, align="cover"),
    dict(multiplier=1.0, align="inner", block_q=256, block_kv=256),  # spatial rows 0..255 keep no key
])
def test_mse_equals_float64_reference_with_all_rows(fields, monkeypatch):
    monkeypatch.setattr(profiling, "PROFILE_CHUNK_BYTES", 2 * 16 * 351 * 351)  # chunks of 2 heads of 3
    g = GEOMETRIES[1]
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((3, g.L, 16)) * 1.5 for _ in range(3))
    monkeypatch.setattr(profiling, "sampled_rows", lambda key, L, r: jnp.arange(L))  # every row, each once
    mask = SVGConfig(**{**TILE, **fields}).mask(g)
    kinds, mse = classify_heads(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)), g, mask,
                                jax.random.PRNGKey(0), num_rows=g.L, return_mse=True)
    exact = masked_attention(q, k, v)
    want = np.stack([((masked_attention(q, k, v, m.to_array()) - exact) ** 2).mean(axis=(1, 2))
                     for m in (mask, PermutedMask(mask, g))], axis=-1)
    np.testing.assert_allclose(np.asarray(mse), want, rtol=2e-3, atol=1e-7)
    np.testing.assert_array_equal(np.asarray(kinds), want.argmin(-1))


def test_rows_are_drawn_uniformly_with_replacement_as_svg_draws_them():
    """SVG's sample_mse draws its rows with torch.randint: uniform over [0, L), repeats allowed."""
    L, r = 10, 64
    rows = np.concatenate([np.asarray(profiling.sampled_rows(jax.random.PRNGKey(s), L, r)) for s in range(50)])
    assert rows.min() >= 0 and rows.max() < L
    counts = np.bincount(rows, minlength=L)
    print("row counts over 50 draws of 64 from 10:", counts.tolist())
    assert len(np.unique(rows[:r])) < r                       # 64 draws from 10: repeats
    assert (np.abs(counts / counts.sum() - 1 / L) < 0.02).all()  # 3,200 draws: each row within 2 points of 10 %
    np.testing.assert_array_equal(profiling.sampled_rows(jax.random.PRNGKey(1), L, r),
                                  profiling.sampled_rows(jax.random.PRNGKey(1), L, r))


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
    jaxpr = jax.make_jaxpr(lambda q, k, v, key: classify_heads(q, k, v, g, svg_mask(g, 1.0), key))(
        q, q, q, jax.random.PRNGKey(0))
    shapes = list(_shapes(jaxpr.jaxpr))
    assert any(s[-2:] == (64, g.L) for s in shapes)  # the sampled scores are there
    assert not any(sum(dim == g.L for dim in s) >= 2 for s in shapes)


def test_classify_heads_rejects_bad_shapes():
    g = GEOMETRIES[0]
    x = jnp.ones((2, g.L, 8))
    with pytest.raises(ValueError, match="share one shape"):
        classify_heads(x, x[:1], x, g, svg_mask(g, 1.0), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="does not match geometry"):
        classify_heads(x[:, :-1], x[:, :-1], x[:, :-1], g, svg_mask(g, 1.0), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="mask length"):
        classify_heads(x, x, x, g, svg_mask(GEOMETRIES[1], 1.0), jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="num_rows"):
        classify_heads(x, x, x, g, svg_mask(g, 1.0), jax.random.PRNGKey(0), num_rows=0)
    with pytest.raises(ValueError, match="kinds must be"):
        planted_heads(g, [0, 2], 0)


def test_profile_heads_command_prints_confusion_table_and_timing(capsys):
    # --multiplier 10: the band covers every pair, so all 3 x 3 tiles of 128 are computed: the kernel
    # visits 384^2 pairs (4 d flops each), profiling 64 rows x 351 keys (8 d flops each)
    assert main(["profile-heads", "--geometry", "3x9x13", "--heads", "4", "--seeds", "0", "1", "--time",
                 "--rounds", "1", "--multiplier", "10", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    confusion = result["confusion"]
    assert sum(sum(row.values()) for row in confusion.values()) == 8
    assert result["provenance"] == "computed"
    timing = result["timing"]
    assert timing["provenance"] == "measured-cpu-interpret" and timing["kernel"] == "ours"
    assert timing["flop_ratio"] == pytest.approx(8 * 64 * 351 / (4 * 384 ** 2))
    assert main(["profile-heads", "--geometry", "3x9x13", "--time", "--kernel", "reference"]) == 2
    assert "kernel must be ours or splash" in capsys.readouterr().err
    assert main(["profile-heads", "--geometry", "0x9x13"]) == 2
    assert "geometry" in capsys.readouterr().err
