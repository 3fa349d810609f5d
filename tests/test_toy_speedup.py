"""The toy speedup compares like with like: its dense baseline is real dense attention through our
kernel, and its spread is the interquartile range of the per-round ratios."""

import numpy as np
import pytest
from float64_reference import masked_attention, relative_error

from svgtpu.attention.svg import SVGConfig
from svgtpu.bench.kernel_timing import kernel_dense_attention
from svgtpu.bench.timing import paired_ratio, paired_ratio_iqr

SEED = 1234


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("bfloat16", 3e-2)])
def test_the_kernel_dense_baseline_is_dense_attention(dtype, tolerance):
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((2, 3, 200, 64)).astype(np.float32) for _ in range(3))   # L not a tile multiple
    import jax.numpy as jnp
    attention = kernel_dense_attention(SVGConfig(block_q=128, block_kv=128))
    out = attention(*(jnp.asarray(x, dtype) for x in (q, k, v)), layer=0, step=0, num_steps=1, num_layers=1, key=None)
    assert out.shape == q.shape and out.dtype == jnp.dtype(dtype)
    assert relative_error(np.asarray(out, np.float32), masked_attention(q, k, v)) < tolerance


def test_paired_ratio_and_its_spread_on_hand_worked_rounds():
    times = {"dense": [2.0, 4.0, 3.0, 6.0, 5.0], "svg": [1.0, 1.0, 2.0, 2.0, 5.0]}
    # per-round ratios dense / svg: 2, 4, 1.5, 3, 1 -> sorted 1, 1.5, 2, 3, 4
    assert paired_ratio(times, "dense", "svg") == 2.0
    assert paired_ratio_iqr(times, "dense", "svg") == [1.5, 3.0]
    assert paired_ratio_iqr({"a": [3.0], "b": [2.0]}, "a", "b") == [1.5, 1.5]
