"""What every self-attention backend shares: the call signature, plain dense attention, and SVG's
dense warm-up, written once.

SVG runs the first steps and the first layers of every step dense (:func:`svgtpu.warmup.warmup_count`
counts them).  :func:`with_warmup` makes that decision for every sparse backend (SVG, SVG2, one
static mask): in Python when ``step`` and ``layer`` are Python ints, so only one branch is traced,
else as a runtime ``lax.cond``, so one compiled program serves every step and layer.  Each backend
passes its own dense branch: the same kernel it runs sparse calls through, on a dense mask.
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.warmup import warmup_count
from svgtpu.errors import BadInput

#: A self-attention backend: ``attention(q, k, v, *, layer, step, num_steps, num_layers, key)``.
Attention = Callable[..., jax.Array]


def dense_attention(q, k, v, *, layer=0, step=0, num_steps=1, num_layers=1, key=None):
    """Plain softmax attention in XLA, float32 accumulation; q/k/v ``[B, heads, L, d]``."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    probs = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs.astype(v.dtype), v).astype(q.dtype)


def static_int(name: str, value) -> int:
    """``value`` as a positive Python int (a count that shapes the program), else one clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise BadInput(f"{name} must be a positive Python int (static under jit), got {value!r}")
    return int(value)


def index_below(name: str, index, limit: int, n: int):
    """``index < limit`` as a Python bool for Python ints (checked against ``[0, n)``), else as a
    traced bool."""
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        if not 0 <= index < n:
            raise BadInput(f"{name} must be in [0, {n}), got {index}")
        return bool(index < limit)
    index = jnp.asarray(index)
    if index.shape != () or not jnp.issubdtype(index.dtype, jnp.integer):
        raise BadInput(f"{name} must be an integer scalar, got {index.dtype}{list(index.shape)}")
    return index < limit


def is_warmup(*, step, num_steps: int, layer, num_layers: int, step_fraction: float, layer_fraction: float):
    """Whether this (step, layer) call runs dense under SVG's schedule: a Python bool when both
    indices are Python ints, else a traced bool."""
    num_steps, num_layers = static_int("num_steps", num_steps), static_int("num_layers", num_layers)
    warm_step = index_below("step", step, warmup_count(step_fraction, num_steps), num_steps)
    warm_layer = index_below("layer", layer, warmup_count(layer_fraction, num_layers), num_layers)
    if warm_step is True or warm_layer is True:
        return True
    if warm_step is False and warm_layer is False:
        return False
    return jnp.logical_or(warm_step, warm_layer)


def with_warmup(dense: Callable, sparse: Callable, *operands, step, num_steps: int, layer, num_layers: int,
                step_fraction: float, layer_fraction: float):
    """``dense(*operands)`` in SVG's warm-up, else ``sparse(*operands)`` (both return the same pytree
    structure when the decision is traced)."""
    warm = is_warmup(step=step, num_steps=num_steps, layer=layer, num_layers=num_layers,
                     step_fraction=step_fraction, layer_fraction=layer_fraction)
    if warm is True:
        return dense(*operands)
    if warm is False:
        return sparse(*operands)
    return jax.lax.cond(warm, dense, sparse, *operands)


__all__ = ["Attention", "dense_attention", "index_below", "is_warmup", "static_int", "with_warmup"]
