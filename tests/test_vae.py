"""Wan 2.1's VAE decoder in JAX (svgtpu.model.vae): shapes, causality, the chunked decode against the whole clip at
once, and its operations' FLOPs against the cost model's hand count (svgtpu.costmodel.stages)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.costmodel import stages
from svgtpu.geometry import VideoGeometry
from svgtpu.model import vae
from svgtpu.models import WAN21_VAE, VAEConfig

SEED = 61
SMALL = VAEConfig(base=8)            # Wan's structure at a twelfth of its widths: seconds on a CPU


def _latent(T, h, w, seed=SEED):
    print(f"seed {seed}")
    return jax.random.normal(jax.random.key(seed), (1, T, h, w, SMALL.z), jnp.float32)


@pytest.fixture(scope="module")
def small():
    params = vae.init_decoder(jax.random.key(SEED), SMALL)
    return params, jax.jit(lambda p, z: vae.decode(p, z, SMALL))


@pytest.mark.system   # decoding runs (CPU compiles of every chunk): the system tier; make test keeps the FLOP count
def test_decode_shapes_and_causality(small):
    params, decode = small
    z = _latent(3, 3, 5)                                   # odd sizes: no tile multiple anywhere
    out = np.asarray(decode(params, z))
    assert out.shape == (1, 1 + 4 * 2, 24, 40, 3) and np.isfinite(out).all()
    later = np.asarray(decode(params, z.at[:, 2].multiply(-3.0)))
    # latent frame 2 decodes to pixel frames 5..8; the frames before it cannot see it (a causal VAE)
    np.testing.assert_array_equal(out[:, :5], later[:, :5])
    assert np.abs(out[:, 5:] - later[:, 5:]).max() > 1e-3


@pytest.mark.system
def test_chunked_decode_matches_the_whole_clip_at_once():
    # without temporal upsampling every chunk is alike: frame by frame with the caches must equal every frame at
    # once with zeros before the first (the causal convolutions' padding), which shares no cache code path
    config = VAEConfig(base=8, temporal_up=(False, False, False))
    params = vae.init_decoder(jax.random.key(SEED + 1), config)
    z = _latent(4, 2, 3, SEED + 1)
    chunked = vae.decode(params, z, config)
    whole, _ = vae.decode_chunk(params, z, None, first=True, config=config)
    np.testing.assert_allclose(np.asarray(chunked), np.asarray(whole), rtol=2e-4, atol=2e-5)


def _flops(jaxpr, times=1) -> float:
    """Matmul FLOPs of a jaxpr's convolutions and dot products (2 x output elements x contracted size), nested
    ones included (a scan's body times its length), read from the traced operations' own shapes."""
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "conv_general_dilated":
            w = eqn.invars[1].aval.shape                     # DHWIO
            total += times * 2.0 * math.prod(eqn.outvars[0].aval.shape) * math.prod(w[:-1])
        elif name == "dot_general":
            (lhs_c, _), _ = eqn.params["dimension_numbers"]
            contracted = math.prod(eqn.invars[0].aval.shape[d] for d in lhs_c)
            total += times * 2.0 * math.prod(eqn.outvars[0].aval.shape) * contracted
        length = eqn.params.get("length", 1) if name == "scan" else 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    total += _flops(inner, times * length)
    return total


@pytest.mark.parametrize("grid", [(3, 2, 3), (2, 3, 1)])
def test_decoder_flops_match_the_cost_models_count(grid):
    """The cost model counts the decoder layer by layer from Wan's structure (stages.vae_decoder_layers); the JAX
    decoder, traced at Wan's full widths (nothing runs), must do exactly that many matmul FLOPs."""
    g = VideoGeometry(*grid)
    params = jax.eval_shape(lambda: vae.init_decoder(jax.random.key(0), WAN21_VAE))
    z = jax.ShapeDtypeStruct((1, g.T, 2 * g.H, 2 * g.W, WAN21_VAE.z), jnp.float32)
    traced = jax.make_jaxpr(lambda p, x: vae.decode(p, x))(params, z)
    assert _flops(traced.jaxpr) == pytest.approx(stages.vae_decode_flops(g), rel=1e-12)


def test_attention_query_blocks_divide_the_frame():
    assert vae._query_rows(180, 320) == 20 and vae._query_rows(90, 160) == 45   # 1440p, 720p latents
    assert vae._query_rows(7, 10_000) == 1                                    # a row over the budget: one row
