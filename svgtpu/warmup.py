"""SVG's warm-up: how many leading steps and layers run dense, and the profiling rows.

Sparse VideoGen keeps the first steps and the first layers of every step dense.  The defaults here
are the package's default recipe (:data:`svgtpu.recipes.DEFAULT_RECIPE`, SVG's own Wan 2.1 T2V-14B
script, cited there).  The toy sampler (:mod:`svgtpu.attention`) and the cost model
(:mod:`svgtpu.costmodel`) both count them with :func:`warmup_count`; it has no dependencies so the
cost model stays free of JAX.
"""

from __future__ import annotations

import math

from svgtpu.recipes import DEFAULT_RECIPE

#: The leading share of steps and of layers that run dense by default (the warm-up of every SVG
#: backend: :func:`svgtpu.attention.base.with_warmup`): the default recipe's dense steps and layers as shares.
DEFAULT_WARMUP_STEP_FRACTION = DEFAULT_RECIPE.dense_step_share
DEFAULT_WARMUP_LAYER_FRACTION = DEFAULT_RECIPE.dense_layer_share
#: Query rows online profiling samples per head (the default recipe's ``num_sampled_rows``).
DEFAULT_PROFILE_ROWS = DEFAULT_RECIPE.num_sampled_rows


def warmup_count(fraction: float, n: int) -> int:
    """How many leading steps (or layers) of ``n`` run dense: ``floor(fraction * n)``, SVG's count.

    SVG's later Wan scripts take ``math.floor(first_times_fp * num_inference_steps)`` steps and
    ``math.floor(first_layers_fp * num_layers)`` layers (:mod:`svgtpu.recipes`); the product is
    rounded to 9 decimals first so that ``0.29 * 100`` gives 29, not 28.
    """
    return min(n, math.floor(round(fraction * n, 9)))


def layer_calls(steps: int, layers: int, dense_steps: int, dense_layers: int) -> tuple[int, int]:
    """``(dense, sparse)``: how many (step, layer) attention calls of one pass run dense and sparse
    under SVG's schedule -- every layer of the ``dense_steps`` warm-up steps and the first
    ``dense_layers`` layers of every later step run dense, the rest sparse."""
    sparse_steps = steps - dense_steps
    return dense_steps * layers + sparse_steps * dense_layers, sparse_steps * (layers - dense_layers)
