"""What every attention kernel here shares: input checks, the tile config from loose arguments, the
softmax scale, padding to tiles, and which TPU generation code is lowered for (interpret or compiled).

The TPU kernels (:mod:`~svgtpu.kernels.block_sparse`, :mod:`~svgtpu.kernels.dynamic`), the GPU port
(:mod:`~svgtpu.kernels.gpu`) and the Splash baseline (:mod:`~svgtpu.baselines.splash`) all validate
their inputs here, once, at the boundary; none of them imports another to borrow a check.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.geometry import round_up
from svgtpu.kernels.budget import TPU_GENERATIONS
from svgtpu.kernels.config import DTYPES, KernelConfig
from svgtpu.masks.core import ArrayMask, Mask
from svgtpu.errors import BadInput

HEAD_DIMS = (64, 128)


def as_masks(mask, heads: int, L: int) -> Mask | tuple[Mask, ...]:
    """Normalize ``mask`` to one :class:`Mask` for all heads or a tuple of one per head.

    Accepts a mask object, a numpy bool ``[L, L]`` array or a numpy bool ``[heads, L, L]`` array.
    """
    if isinstance(mask, Mask):
        if mask.L != L:
            raise BadInput(f"mask has L={mask.L} but q, k, v have sequence length {L}")
        return mask
    if isinstance(mask, np.ndarray):
        if mask.dtype != np.bool_:
            raise BadInput(f"mask array must have dtype bool, got {mask.dtype}")
        if mask.shape == (L, L):
            return ArrayMask(mask)
        if mask.shape == (heads, L, L):
            return tuple(ArrayMask(m) for m in mask)
        raise BadInput(f"mask array must have shape [L, L]=({L}, {L}) or [heads, L, L]=({heads}, {L}, {L}), "
                       f"got {mask.shape}")
    raise BadInput(f"mask must be an svgtpu mask object or a numpy bool array, got {type(mask).__name__}")


def check_inputs(q, k, v, mask) -> Mask | tuple[Mask, ...]:
    """Validate shapes, dtypes and head_dim; return the normalized mask(s)."""
    check_qkv(q, k, v)
    return as_masks(mask, q.shape[0], q.shape[1])


def check_qkv(q, k, v) -> None:
    """One clear line unless ``q, k, v`` are ``[heads, L, d]`` arrays of one shape and kernel dtype, ``d``
    in :data:`HEAD_DIMS`."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if getattr(x, "ndim", None) != 3:
            raise BadInput(f"{name} must be a [heads, L, d] array, got shape {getattr(x, 'shape', None)}")
        if str(x.dtype) not in DTYPES:
            raise BadInput(f"{name} dtype must be one of {', '.join(DTYPES)}, got {x.dtype}")
    if not (q.shape == k.shape == v.shape):
        raise BadInput(f"q, k, v must have the same shape [heads, L, d], got {q.shape}, {k.shape}, {v.shape}")
    if not (q.dtype == k.dtype == v.dtype):
        raise BadInput(f"q, k, v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    heads, L, d = q.shape
    if heads == 0 or L == 0:
        raise BadInput(f"q, k, v must have at least one head and one token, got shape {q.shape}")
    if d not in HEAD_DIMS:
        raise BadInput(f"head_dim must be one of {HEAD_DIMS}, got {d}")


#: The TPU generation code is being lowered for ahead of time (``svgtpu compile``), else ``None``.
AOT_TARGET: contextvars.ContextVar[str | None] = contextvars.ContextVar("svgtpu_aot_target", default=None)


@contextlib.contextmanager
def compiling_for(device: str):
    """Inside this block kernels lower for TPU ``device`` (Mosaic, not interpret mode), whatever the
    local backend: what :mod:`svgtpu.compiler.compile` needs to compile whole layers ahead of time."""
    token = AOT_TARGET.set(device)
    try:
        yield
    finally:
        AOT_TARGET.reset(token)


def resolve_interpret(interpret):
    """``None`` -> compiled on TPU (or when compiling for one), Pallas interpret mode on any other backend."""
    if interpret is None:
        if AOT_TARGET.get() is not None:
            return False
        return jax.default_backend() != "tpu"
    return interpret


def pad_qkv(q, k, v, block_q: int, block_kv: int):
    """``q`` padded up to a multiple of ``block_q`` rows, ``k`` and ``v`` to one of ``block_kv``."""
    L = q.shape[1]
    Lq, Lk = round_up(L, block_q), round_up(L, block_kv)
    return (jnp.pad(q, ((0, 0), (0, Lq - L), (0, 0))), jnp.pad(k, ((0, 0), (0, Lk - L), (0, 0))),
            jnp.pad(v, ((0, 0), (0, Lk - L), (0, 0))))


def check_sm_scale(sm_scale, head_dim: int) -> float:
    """``None`` -> ``1/sqrt(head_dim)``; else a finite positive number."""
    if sm_scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)) or not math.isfinite(sm_scale) \
            or sm_scale <= 0:
        raise BadInput(f"sm_scale must be None (1/sqrt(head_dim)) or a finite positive number, got {sm_scale!r}")
    return float(sm_scale)


def resolve_device(device: str | None) -> str:
    """``device`` checked against the TPU generations with known budgets, or :func:`default_device`."""
    if device is not None and device not in TPU_GENERATIONS:
        raise BadInput(f"device must be one of {', '.join(TPU_GENERATIONS)}, got {device!r}")
    return device or default_device()


def default_device() -> str:
    """The TPU generation to budget for: the one being compiled for, the local TPU's, else v6e (the
    write-up's)."""
    if (target := AOT_TARGET.get()) is not None:
        return target
    if jax.default_backend() == "tpu":
        kind = jax.devices()[0].device_kind.lower()
        for name, tag in (("v5e", "lite"), ("v5e", "v5e"), ("v5p", "v5"), ("v6e", "v6"), ("v7x", "7x")):
            if tag in kind:
                return name
    return "v6e"


def resolve_config(config: KernelConfig | None, block_q, block_kv, block_kv_compute, fast_path) -> KernelConfig:
    """``config`` as given, or one built (and validated) from the loose keyword arguments."""
    if config is not None:
        if not isinstance(config, KernelConfig):
            raise BadInput(f"config must be a KernelConfig, got {type(config).__name__}")
        if any(x is not None for x in (block_q, block_kv, block_kv_compute)):
            raise BadInput("give either config or block_q / block_kv / block_kv_compute, not both")
        return config
    if block_q is None or block_kv is None:
        raise BadInput("give config=KernelConfig(...) or both block_q and block_kv")
    return KernelConfig(block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute, fast_path=fast_path)


__all__ = ["HEAD_DIMS", "AOT_TARGET", "as_masks", "check_inputs", "check_qkv", "compiling_for", "resolve_interpret",
           "pad_qkv", "check_sm_scale", "default_device", "resolve_device", "resolve_config"]
