"""Our masks on JAX's Splash Attention (``make_splash_mha``), used as a library: the baseline.

Splash needs block sizes that divide the sequence length, so the sequence is padded up to a
multiple of both blocks and the padded keys are masked by the mask itself (the numpy mask blocks
are ``False`` past ``L``).  The kernel object is built (and cached) outside ``jax.jit``, so one mask
serves any dtype, head dim or ``sm_scale``.  Splash takes no softmax scale, so ``q`` is scaled
before the kernel, in its own dtype: with bfloat16 that rounds the scaled ``q`` (our kernel scales
the float32 scores instead), so compare both against a float64 reference, not with each other.  Masks become Splash ``NumpyMask``s (materialized ``[Lp, Lp]``: fine at
test and benchmark sizes), one per head in a ``MultiHeadMask``; an unpadded dense mask becomes a
``FullMask``.  Rows with no allowed key are set to zeros, the convention of every kernel here.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu import splash_attention as splash

from svgtpu.geometry import round_up
from svgtpu.kernels.common import check_inputs, check_sm_scale, resolve_config, resolve_interpret
from svgtpu.masks.core import DenseMask, Mask
from svgtpu.errors import BadInput


@functools.lru_cache(maxsize=16)
def _splash_kernel(mask: Mask | tuple[Mask, ...], heads: int, L: int, block_q: int, block_kv: int,
                   block_kv_compute: int, interpret):
    """The Splash kernel for ``mask`` padded to ``Lp`` (``None`` if no row allows a key), plus the
    ``[heads, L]`` rows-with-keys map."""
    Lp = round_up(L, math.lcm(block_q, block_kv))
    masks = mask if isinstance(mask, tuple) else (mask,) * heads
    rows = np.stack([m.rows_with_keys() for m in masks])
    if not rows.any():
        return None, Lp, rows
    converted: dict[Mask, splash.Mask] = {}
    for m in masks:
        if m not in converted:
            converted[m] = (splash.FullMask((Lp, Lp)) if isinstance(m, DenseMask) and Lp == L
                            else splash.NumpyMask(m.block(0, Lp, 0, Lp)))
    kernel = splash.make_splash_mha(
        splash.MultiHeadMask([converted[m] for m in masks]),
        block_sizes=splash.BlockSizes(block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute),
        head_shards=1, q_seq_shards=1, interpret=interpret)
    return kernel, Lp, rows


@functools.partial(jax.jit, static_argnames=("kernel", "Lp", "sm_scale"))
def _splash(q, k, v, rows, *, kernel, Lp, sm_scale):
    L = q.shape[1]
    q = (q.astype(jnp.float32) * sm_scale).astype(q.dtype)
    pad = ((0, 0), (0, Lp - L), (0, 0))
    out = kernel(jnp.pad(q, pad), jnp.pad(k, pad), jnp.pad(v, pad))[:, :L]
    return jnp.where(rows[:, :, None], out, 0).astype(q.dtype)


def splash_attention(q, k, v, mask, *, block_q: int, block_kv: int, block_kv_compute: int | None = None,
                     interpret=None, sm_scale: float | None = None):
    """Masked attention with JAX's Splash kernel; same inputs and conventions as
    :func:`~svgtpu.kernels.block_sparse_attention` (``[heads, L, d]``, ``sm_scale=None`` ->
    ``1/sqrt(d)``, zeros for rows without keys, interpret mode off-TPU).  Splash itself needs
    ``block_q`` and ``block_kv`` to be multiples of 128."""
    config = resolve_config(None, block_q, block_kv, block_kv_compute, True)
    masks = check_inputs(q, k, v, mask)
    if config.block_q % 128:
        raise BadInput(f"block_q must be a positive multiple of 128 for Splash (its kernel's rule), "
                       f"got {config.block_q}")
    scale = check_sm_scale(sm_scale, q.shape[-1])
    heads, L, _ = q.shape
    kernel, Lp, rows = _splash_kernel(masks, heads, L, config.block_q, config.block_kv, config.block_kv_compute,
                                      resolve_interpret(interpret))
    if kernel is None:  # no row allows any key: Splash cannot run an all-empty mask
        return jnp.zeros(q.shape, q.dtype)
    return _splash(q, k, v, jnp.asarray(rows), kernel=kernel, Lp=Lp, sm_scale=scale)


__all__ = ["splash_attention"]
