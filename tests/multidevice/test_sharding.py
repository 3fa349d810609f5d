"""Sharded attention equals single-device attention on 2, 4 and 8 fake CPU devices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.attention.sharding import head_parallel, make_mesh, ulysses

assert jax.device_count() == 8, "run through tests/test_multidevice.py (sets XLA_FLAGS)"
TILE = dict(block_q=128, block_kv=128)  # the toy's tile (svgtpu.setting.SMALL_TILE): an SVG config takes it as given


def dense(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


SEED = 20261130


def qkv(batch=2, heads=8, L=96, d=16, seed=SEED):
    print(f"qkv seed {seed}")
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((batch, heads, L, d)), jnp.float32) for _ in range(3))


@pytest.mark.parametrize("n,data,seq", [(2, 1, 1), (2, 2, 1), (4, 2, 1), (4, 1, 2), (8, 2, 2), (8, 1, 8), (8, 1, 1)])
def test_head_parallel_and_ulysses_match_single_device(n, data, seq):
    q, k, v = qkv()
    ref = np.asarray(dense(q, k, v))
    mesh = make_mesh(data=data, seq=seq, devices=jax.devices()[:n])
    for wrap in (head_parallel, ulysses):
        out = jax.jit(wrap(dense, mesh))(q, k, v)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)
        assert len(out.sharding.device_set) == n


def test_head_counts_the_mesh_does_not_divide_are_a_clear_error():
    q, k, v = qkv(heads=6)
    with pytest.raises(ValueError, match="heads = 6 must be divisible"):
        head_parallel(dense, make_mesh(devices=jax.devices()[:4]))(q, k, v)
    with pytest.raises(ValueError, match="batch = 2 must be divisible"):
        head_parallel(dense, make_mesh(data=4, heads=2))(q, k, v)
    with pytest.raises(ValueError, match="sequence length"):
        ulysses(dense, make_mesh(heads=1, seq=8))(*qkv(heads=8, L=100))
    with pytest.raises(ValueError, match="needs more"):
        make_mesh(data=4, heads=4)


def test_sharded_svg_attention_equals_single_device():
    """Each device profiles, layout-transforms and runs its own heads with the one kernel plan."""
    import functools

    from svgtpu.attention.svg import SVGConfig, svg_attention
    from svgtpu.geometry import VideoGeometry

    g = VideoGeometry(4, 10, 14)  # F = 140: frames are not tile multiples
    svg = functools.partial(svg_attention, geometry=g, config=SVGConfig(multiplier=1.0, align="snap", **TILE),
                            key=jax.random.PRNGKey(3), step=jnp.int32(7), num_steps=10, layer=jnp.int32(2),
                            num_layers=4)
    q, k, v = qkv(batch=2, heads=8, L=g.L, d=64)
    ref = np.asarray(jax.jit(svg)(q, k, v))
    # heads alone on 2, data x heads on 8, Ulysses' sequence split on 8 (each mesh is a compile of its own)
    for n, data, seq, wrap in [(2, 1, 1, head_parallel), (8, 2, 1, head_parallel), (8, 1, 2, ulysses)]:
        mesh = make_mesh(data=data, seq=seq, devices=jax.devices()[:n])
        out = jax.jit(wrap(svg, mesh))(q, k, v)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-6, err_msg=f"{n} devices")


def test_sharded_sampler_steps_equal_single_device():
    from svgtpu.toy import dit
    from svgtpu.toy import sampler
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.attention.backends import attention_backend
    from svgtpu.attention.sharding import mesh_for_model

    config = dit.DiTConfig(frames=2, height=8, width=10, heads=4, depth=1)
    params = dit.init_params(config, jax.random.PRNGKey(0))
    # give the zero-initialized modulation and head some weight so the output depends on attention
    params = jax.tree_util.tree_map(lambda x: x + 0.05 * jax.random.normal(jax.random.PRNGKey(1), x.shape), params)
    # dense: the CFG pair split alone (2 devices: data 2) and with the heads (8: data 2 x heads 4); svg compiles slowly
    for backend, device_counts in (("dense", (2, 8)), ("svg", (4,))):
        attention = attention_backend(backend, config.geometry,
                                      svg_config=SVGConfig(multiplier=1.0, warmup_step_fraction=0.0,
                                                           warmup_layer_fraction=0.0, **TILE))
        run = lambda mesh: sampler.sample(params, config, [0, 1], seed=5, num_steps=2,  # noqa: E731
                                          attention=attention, progress=False, mesh=mesh)
        ref = run(None)
        assert np.isfinite(ref).all() and ref.std() > 0
        for n in device_counts:
            np.testing.assert_allclose(run(mesh_for_model(n, config.heads)), ref, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{backend} on {n} devices")
        compiled = sampler.guided_velocity._cache_size()
        run(mesh_for_model(device_counts[-1], config.heads))   # the same mesh again: the same compiled step
        assert sampler.guided_velocity._cache_size() == compiled, f"{backend}: a second sharded run compiled again"
    with pytest.raises(ValueError, match="heads = 4 must be divisible"):
        mesh_for_model(6, config.heads)
    with pytest.raises(ValueError, match="only 8 are available"):
        mesh_for_model(16, config.heads)
