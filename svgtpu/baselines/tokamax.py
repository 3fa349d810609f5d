"""Our masks on tokamax's splash attention (``make_splash_mha_single_device``): the maintained baseline.

tokamax (the Pallas kernel library, pinned in requirements.txt) carries the current TPU splash
kernel: it walks a compacted list of the active tiles (like our ragged plan) and runs a mask-free
body for full tiles (like our fast path).  Used as a library, as :mod:`svgtpu.baselines.splash` uses
JAX's Splash: q is padded to a multiple of ``block_q``, k and v to one of ``block_kv``, and the mask
(one for every head: tokamax takes a 2-D mask) becomes a ``NumpyMask`` of the padded shape with the
padded keys disallowed (materialized: fine at test and benchmark sizes).  tokamax takes no softmax
scale, so ``q`` is scaled first, in its own dtype.  Rows with no allowed key are set to zeros.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from svgtpu.geometry import round_up
from svgtpu.kernels.common import check_inputs, check_sm_scale, resolve_config, resolve_interpret
from svgtpu.masks.core import Mask
from svgtpu.errors import BadInput


@functools.lru_cache(maxsize=16)
def _tokamax_kernel(mask: Mask, L: int, block_q: int, block_kv: int, block_kv_compute: int, interpret: bool):
    """The tokamax kernel for ``mask`` padded to ``(Lq, Lk)`` (``None`` if no row allows a key), its
    padded lengths and the ``[L]`` rows-with-keys map."""
    from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_kernel as lib
    from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask as mask_lib
    Lq, Lk = round_up(L, block_q), round_up(L, block_kv)
    rows = mask.rows_with_keys()
    if not rows.any():
        return None, Lq, Lk, rows
    config = lib.SplashConfig(block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute,
                              interpret=interpret)
    kernel = lib.make_splash_mha_single_device(mask_lib.NumpyMask(mask.block(0, Lq, 0, Lk)), config=config)
    return kernel, Lq, Lk, rows


@functools.partial(jax.jit, static_argnames=("kernel", "Lq", "Lk", "sm_scale"))
def _tokamax(q, k, v, rows, *, kernel, Lq, Lk, sm_scale):
    L = q.shape[1]
    q = (q.astype(jnp.float32) * sm_scale).astype(q.dtype)
    out = kernel(jnp.pad(q, ((0, 0), (0, Lq - L), (0, 0))), jnp.pad(k, ((0, 0), (0, Lk - L), (0, 0))),
                 jnp.pad(v, ((0, 0), (0, Lk - L), (0, 0))))[:, :L]
    return jnp.where(rows[None, :, None], out, 0).astype(q.dtype)


def tokamax_attention(q, k, v, mask, *, block_q: int, block_kv: int, block_kv_compute: int | None = None,
                      interpret=None, sm_scale: float | None = None):
    """Masked attention with tokamax's splash kernel; same inputs and conventions as
    :func:`~svgtpu.baselines.splash.splash_attention` (``[heads, L, d]``, ``sm_scale=None`` ->
    ``1/sqrt(d)``, zeros for rows without keys, interpret mode off-TPU), one mask for all heads."""
    config = resolve_config(None, block_q, block_kv, block_kv_compute, True)
    masks = check_inputs(q, k, v, mask)
    if isinstance(masks, tuple):
        raise BadInput("mask must be one [L, L] mask for every head: tokamax's splash takes a 2-D mask")
    scale = check_sm_scale(sm_scale, q.shape[-1])
    kernel, Lq, Lk, rows = _tokamax_kernel(masks, q.shape[1], config.block_q, config.block_kv,
                                           config.block_kv_compute, bool(resolve_interpret(interpret)))
    if kernel is None:  # no row allows any key
        return jnp.zeros(q.shape, q.dtype)
    return _tokamax(q, k, v, jnp.asarray(rows), kernel=kernel, Lq=Lq, Lk=Lk, sm_scale=scale)


__all__ = ["tokamax_attention"]
