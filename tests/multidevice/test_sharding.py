"""Sharded attention equals single-device attention on 2, 4 and 8 fake CPU devices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.sharding import head_parallel, make_mesh, ulysses

assert jax.device_count() == 8, "run through tests/test_multidevice.py (sets XLA_FLAGS)"


def dense(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def qkv(batch=2, heads=8, L=96, d=16):
    rng = np.random.default_rng()
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
