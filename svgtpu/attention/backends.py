"""The toy DiT's self-attention backends, by name: dense, Splash, SVG, SVG2, or one static mask.

Each is a callable ``attention(q, k, v, *, layer, step, num_steps, num_layers, key)`` on
``[B, heads, L, d]`` (:data:`svgtpu.attention.base.Attention`); this module sits above the methods
(:mod:`~svgtpu.attention.svg`, :mod:`~svgtpu.attention.svg2`) so that none of them imports another.
"""

from __future__ import annotations

import numpy as np

from svgtpu.attention.base import Attention, dense_attention, with_warmup
from svgtpu.attention.svg import svg_attention
from svgtpu.attention.svg2 import svg2_backend
from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.baselines.splash import splash_attention
from svgtpu.kernels import KernelConfig
from svgtpu.kernels.api import block_sparse
from svgtpu.masks.core import DenseMask, Mask
from svgtpu.warmup import DEFAULT_WARMUP_LAYER_FRACTION, DEFAULT_WARMUP_STEP_FRACTION
from svgtpu.errors import BadInput

#: The self-attention choices of the toy DiT (:func:`attention_backend`).
ATTENTION_BACKENDS = ("dense", "splash", "svg", "svg2")


def attention_backend(name: str, geometry: VideoGeometry | None = None, **options) -> Attention:
    """The self-attention backend ``name`` (one of :data:`ATTENTION_BACKENDS`) for the toy DiT.

    ``svg`` needs ``geometry`` and ``svg_config=`` (an :class:`~svgtpu.attention.svg.SVGConfig`) and takes
    ``return_info=`` (then it returns ``(out, SVGInfo)``); ``svg2`` needs ``svg2_config=`` (an
    :class:`svgtpu.attention.svg2.SVG2Config`); ``splash`` needs ``tile=`` (a :class:`~svgtpu.geometry.Tile`, the
    caller's) and runs JAX's Splash Attention kernel on a dense mask (interpret mode off TPU).
    """
    if name == "dense":
        return dense_attention
    if name == "svg":
        if geometry is None:
            raise BadInput("attention backend 'svg' needs the model geometry")
        config = options.get("svg_config")
        if config is None:
            raise BadInput("attention backend 'svg' needs svg_config (an SVGConfig: its tile is the caller's)")
        return_info = bool(options.get("return_info", False))

        def svg(q, k, v, *, layer, step, num_steps, num_layers, key):
            return svg_attention(q, k, v, geometry, config, key=key, step=step, num_steps=num_steps,
                                 layer=layer, num_layers=num_layers, return_info=return_info)
        return svg
    if name == "svg2":  # SVG2 k-means clusters, its tile plan traced as data (see svgtpu.attention.svg2)
        if options.get("svg2_config") is None:
            raise BadInput("attention backend 'svg2' needs svg2_config (an SVG2Config: its tile is the caller's)")
        return svg2_backend(options["svg2_config"])
    if name == "splash":
        tile = options.get("tile")
        if tile is None:
            raise BadInput("attention backend 'splash' needs tile (a Tile: the caller's)")

        def splash(q, k, v, **_):
            B, H, L, d = q.shape
            merged = [x.reshape(B * H, L, d) for x in (q, k, v)]
            return splash_attention(*merged, DenseMask(L), block_q=tile.block_q,
                                    block_kv=tile.block_kv).reshape(B, H, L, d)
        return splash
    raise BadInput(f"attention must be one of {', '.join(ATTENTION_BACKENDS)}, got {name!r}")


def mask_backend(mask: Mask, *, tile: Tile, order: np.ndarray | None = None):
    """A toy-DiT self-attention backend running one static ``mask`` through our kernel.

    ``order`` (a permutation, ``x_mask_order = x[order]``) puts the model's frame-major tokens in the
    mask's order (STA: :func:`svgtpu.masks.families.sta_order`) and back.  Dense warm-up steps and
    layers follow the default recipe's schedule (:data:`svgtpu.warmup.DEFAULT_WARMUP_STEP_FRACTION`,
    :func:`svgtpu.attention.base.with_warmup`) and run the same kernel on a dense mask, as SVG's
    own backend does.
    """
    inverse = None if order is None else np.argsort(order)
    config = KernelConfig(tile.block_q, tile.block_kv)

    def attention(q, k, v, *, layer, step, num_steps, num_layers, key=None):
        B, H, L, d = q.shape
        merged = [x.reshape(B * H, L, d) for x in (q, k, v)]

        def dense(_):
            return block_sparse(*merged, DenseMask(L), config=config)

        def sparse(_):
            permuted = merged if order is None else [x[:, order] for x in merged]
            out = block_sparse(*permuted, mask, config=config)
            return out if inverse is None else out[:, inverse]

        out = with_warmup(dense, sparse, None, step=step, num_steps=num_steps, layer=layer, num_layers=num_layers,
                          step_fraction=DEFAULT_WARMUP_STEP_FRACTION, layer_fraction=DEFAULT_WARMUP_LAYER_FRACTION)
        return out.reshape(B, H, L, d)

    return attention


__all__ = ["ATTENTION_BACKENDS", "Attention", "attention_backend", "dense_attention", "mask_backend"]
