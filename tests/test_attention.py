"""svg_attention: the layout-transformed paths equal float64 references under the right masks,
warm-up is dense, one compiled program serves every step and layer, bad configs fail clearly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from float64_reference import masked_attention, relative_error
from svgtpu.attention.svg import DENSE, SVGConfig, sparse_attention, svg_attention, warmup_count
from svgtpu.geometry import VideoGeometry
from svgtpu.masks.core import PermutedMask
from svgtpu.attention.profiling import planted_heads

G = VideoGeometry(4, 10, 14)  # F = 140, L = 560: neither a multiple of 128
TILE = dict(block_q=128, block_kv=128)  # the toy's tile (svgtpu.setting.SMALL_TILE): an SVG config takes it as given
D = 64


def _expected(q, k, v, kinds, config):
    """Per head: the band + sink mask for spatial heads, the strided frame-major mask for temporal."""
    mask = config.mask(G)
    spatial, temporal = mask.to_array(), PermutedMask(mask, G).to_array()
    return np.stack([masked_attention(q[h:h + 1], k[h:h + 1], v[h:h + 1], temporal if kind else spatial)[0]
                     for h, kind in enumerate(np.asarray(kinds))])


def _random_qkv(seed, heads, dtype=jnp.float32):
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    return tuple(jax.random.normal(key, (heads, G.L, D), dtype) for key in keys)


@pytest.mark.parametrize("kernel, align, dtype, tol", [
    ("ours", None, jnp.float32, 1e-5),
    ("ours", "snap", jnp.bfloat16, 2e-2),
    ("splash", None, jnp.float32, 1e-5),
])
def test_sparse_attention_matches_float64_reference_per_head_kind(kernel, align, dtype, tol):
    config = SVGConfig(multiplier=0.5, kernel=kernel, align=align, **TILE)
    q, k, v = _random_qkv(1, 4, dtype)
    kinds = jnp.array([1, 0, 0, 1], jnp.int32)
    got = jax.jit(lambda q, k, v, kinds: sparse_attention(q, k, v, kinds, G, config))(q, k, v, kinds)
    assert got.shape == q.shape and got.dtype == dtype
    assert relative_error(got, _expected(q, k, v, kinds, config)) < tol
    # the temporal path is not the spatial one: swapping the kinds changes the answer
    assert relative_error(got, _expected(q, k, v, 1 - kinds, config)) > 1e-2


def test_svg_attention_profiles_planted_heads_and_runs_their_masks():
    config = SVGConfig(**TILE)
    planted = np.array([[0, 1, 1, 0], [1, 1, 0, 0]])
    qkv = [planted_heads(G, planted[b], 20 + b, head_dim=D, contrast=6.0) for b in range(2)]
    q, k, v = (jnp.stack(x) for x in zip(*qkv))
    out, info = jax.jit(lambda q, k, v, key: svg_attention(
        q, k, v, G, config, key=key, step=30, num_steps=50, layer=3, num_layers=10, return_info=True))(
        q, k, v, jax.random.PRNGKey(5))
    assert out.shape == q.shape and not bool(info.dense)
    np.testing.assert_array_equal(np.asarray(info.kinds), planted)
    assert info.mse.shape == (2, 4, 2) and np.all(np.isfinite(np.asarray(info.mse)))
    for b in range(2):
        want = _expected(q[b], k[b], v[b], planted[b], config)
        assert relative_error(out[b], want) < 1e-5


@pytest.mark.parametrize("step, layer", [(0, 5), (9, 5), (30, 0)])
def test_warmup_steps_and_layers_are_dense(step, layer):
    config = SVGConfig(kernel="reference", warmup_step_fraction=0.2, warmup_layer_fraction=0.1, **TILE)  # 10 of 50 steps, 1 of 10
    q, k, v = _random_qkv(2, 2)
    # Python-int step and layer: the warm-up decision is made while tracing
    fn = jax.jit(svg_attention, static_argnums=(3, 4),
                 static_argnames=("step", "num_steps", "layer", "num_layers", "return_info"))
    out, info = fn(q, k, v, G, config, key=jax.random.PRNGKey(0), step=step, num_steps=50,
                   layer=layer, num_layers=10, return_info=True)
    assert bool(info.dense) and np.all(np.asarray(info.kinds) == DENSE)
    assert relative_error(out, masked_attention(q, k, v, np.ones((G.L, G.L), bool))) < 1e-5
    sparse = fn(q, k, v, G, config, key=jax.random.PRNGKey(0), step=10, num_steps=50, layer=1, num_layers=10)
    assert relative_error(sparse, masked_attention(q, k, v, np.ones((G.L, G.L), bool))) > 1e-3


def test_warmup_count_follows_svg_fractions():
    # SVG's Wan script: floor(0.2 * 50) = 10 dense steps, floor(0.03 * 40) = 1 dense layer of Wan 14B
    assert warmup_count(0.2, 50) == 10 and warmup_count(0.03, 40) == 1 and warmup_count(0.03, 30) == 0
    assert warmup_count(0.0, 50) == 0 and warmup_count(1.0, 7) == 7 and warmup_count(0.03, 100) == 3
    assert warmup_count(0.2, 4) == 0 and warmup_count(0.29, 100) == 29  # 0.29 * 100 = 28.999... in floats


def test_layer_calls_count_the_schedule_by_brute_force():
    from svgtpu.warmup import layer_calls
    for steps, layers, ds, dl in ((50, 40, 10, 1), (4, 4, 0, 0), (7, 3, 7, 2), (10, 5, 2, 5)):
        dense = sum(step < ds or layer < dl for step in range(steps) for layer in range(layers))
        assert layer_calls(steps, layers, ds, dl) == (dense, steps * layers - dense)


def test_jitted_svg_attention_compiles_once_for_all_steps_and_layers():
    config = SVGConfig(warmup_step_fraction=0.25, warmup_layer_fraction=0.25, **TILE)  # steps 0, 1 of 8; layer 0 of 4
    traces = []

    def step_fn(q, k, v, key, step, layer):
        traces.append(1)
        return svg_attention(q, k, v, G, config, key=key, step=step, num_steps=8, layer=layer,
                             num_layers=4, return_info=True)

    fn = jax.jit(step_fn)
    seen_kinds, dense_calls = set(), 0
    for i, (step, layer) in enumerate([(0, 1), (2, 1), (3, 2), (5, 0), (6, 3), (7, 1)]):
        planted = np.random.default_rng(i).permutation([0, 0, 1, 1])
        q, k, v = planted_heads(G, planted, i, head_dim=D)
        out, info = fn(q, k, v, jax.random.PRNGKey(100 + i), step, layer)
        if bool(info.dense):
            dense_calls += 1
            assert step < 2 or layer == 0
        else:
            np.testing.assert_array_equal(np.asarray(info.kinds), planted)
            seen_kinds.add(tuple(planted))
            assert relative_error(out, _expected(q, k, v, planted, config)) < 1e-5
    assert dense_calls == 2 and len(seen_kinds) >= 2
    assert len(traces) == 1 and fn._cache_size() == 1


@pytest.mark.parametrize("fields, message", [
    (dict(multiplier=1.0, kept=0.3), "at most one of kept or multiplier"),
    (dict(multiplier=-1.0), "multiplier must be a positive number"),
    (dict(kept=1.5), "kept must be in the open interval"),
    (dict(num_sampled_rows=0), "num_sampled_rows must be a positive integer"),
    (dict(warmup_step_fraction=1.2), "warmup_step_fraction must be a number in"),
    (dict(warmup_layer_fraction=-0.1), "warmup_layer_fraction must be a number in"),
    (dict(block_q=100), "block_q must be a positive multiple of 8"),
    (dict(block_kv=0), "block_kv must be a positive multiple of 128"),
    (dict(align="diagonal"), "align must be None or one of snap, cover, inner"),
    (dict(fast_path="yes"), "fast_path must be True or False"),
    (dict(kernel="flash"), "kernel must be one of ours, splash, reference"),
])
def test_bad_config_raises_clear_error(fields, message):
    with pytest.raises(ValueError, match=message):
        SVGConfig(**{**TILE, **fields})


def test_bad_call_raises_clear_error():
    q, k, v = _random_qkv(3, 2)
    call = dict(key=jax.random.PRNGKey(0), step=20, num_steps=50, layer=3, num_layers=10)
    with pytest.raises(ValueError, match="share one shape"):
        svg_attention(q, k[:1], v, G, SVGConfig(**TILE), **call)
    with pytest.raises(ValueError, match="does not match geometry"):
        svg_attention(q, k, v, VideoGeometry(4, 10, 15), SVGConfig(**TILE), **call)
    with pytest.raises(ValueError, match=r"step must be in \[0, 50\)"):
        svg_attention(q, k, v, G, SVGConfig(**TILE), **{**call, "step": 50})
    with pytest.raises(ValueError, match="num_layers must be a positive Python int"):
        jax.jit(lambda n: svg_attention(q, k, v, G, SVGConfig(**TILE), **{**call, "num_layers": n}))(10)
    with pytest.raises(ValueError, match="config must be an SVGConfig"):
        svg_attention(q, k, v, G, {"multiplier": 1.0}, **call)
