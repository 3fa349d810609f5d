"""tokamax's splash kernel on our masks (svgtpu.baselines.tokamax), Pallas interpret mode, against float64."""

import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.kernels.reference import float64_attention
from svgtpu.baselines.tokamax import tokamax_attention
from svgtpu.masks.core import ArrayMask, BandSinkMask


def test_band_mask_on_a_length_that_is_no_tile_multiple_matches_float64():
    L, F = 200, 40   # 200 rows: q padded to 256, keys to 256
    mask = BandSinkMask(L, F, 24)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, L, 64)) for _ in range(3))
    out = tokamax_attention(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)), mask, block_q=128, block_kv=128)
    ref = float64_attention(q, k, v, mask.block(0, L, 0, L))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5)


def test_a_row_without_keys_is_zero_and_per_head_masks_are_refused():
    L = 128
    allowed = np.tril(np.ones((L, L), bool))
    allowed[5] = False   # row 5 sees nothing
    mask = ArrayMask(allowed)
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, L, 64)) for _ in range(3))
    out = np.asarray(tokamax_attention(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)), mask,
                                       block_q=128, block_kv=128))
    assert np.all(out[0, 5] == 0)
    np.testing.assert_allclose(np.delete(out, 5, axis=1), np.delete(float64_attention(q, k, v, allowed), 5, axis=1),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="one \\[L, L\\] mask for every head"):
        tokamax_attention(*(jnp.asarray(x, jnp.float32) for x in (np.stack([q[0]] * 2),) * 3),
                          np.stack([allowed, allowed]), block_q=128, block_kv=128)
