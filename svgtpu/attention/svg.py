"""Sparse VideoGen attention as one drop-in function: :func:`svg_attention`.

Per call (one denoising step of one layer):

1. **Dense warm-up.**  The first ``warmup_step_fraction`` of the steps and the first
   ``warmup_layer_fraction`` of the layers run dense attention (defaults: the default recipe's, :mod:`svgtpu.schedule`):
   step ``i`` is a warm-up step iff ``i < floor(fraction * num_steps)`` (step 0 is the noisiest),
   and the same for layers, as SVG's ``wan_t2v_inference.py`` counts them (:func:`warmup_count`).
   Dense runs through the configured kernel with a :class:`DenseMask`.
2. **Online profiling** (:func:`svgtpu.attention.profiling.classify_heads`): sampled rows decide per head
   whether it is spatial or temporal.
3. **Layout transformation** (:func:`sparse_attention`): temporal heads' Q, K, V are permuted to
   spatial-major order, every head runs the *one* band + sink mask through the kernel, and
   temporal heads' outputs are permuted back.  The head choice is a runtime array used in
   ``jnp.where`` on the head axis, so nothing about it is baked into the compiled program.

Jit and recompilation: ``geometry``, ``config``, ``num_steps``, ``num_layers`` and ``return_info``
are static (hashable Python values); ``q, k, v, key, step, layer`` are data.  When ``step`` and
``layer`` are Python ints the warm-up decision is made in Python (only one branch is traced); when
either is a traced array (e.g. ``jax.jit(svg_attention, static_argnames=...)`` with ``step`` passed
as an argument) it is a runtime ``lax.cond``, so one compiled program serves every step and layer.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.geometry import VideoGeometry, check_positive_int, get_geometry
from svgtpu.masks.core import ALIGN_MODES, DenseMask, Mask, align, multiplier_for_sparsity, svg_mask
from svgtpu.attention.profiling import TEMPORAL, classify_heads
from svgtpu.schedule import DEFAULT_PROFILE_ROWS
from svgtpu.schedule import DEFAULT_SPARSITY, warmup_count

#: The attention kernels an :class:`SVGConfig` can run its masks through (``SVGConfig.kernel``).
KERNELS = ("ours", "splash", "reference")
#: The self-attention choices of the toy DiT (:func:`attention_backend`).
ATTENTION_BACKENDS = ("dense", "splash", "svg", "svg2")
#: A self-attention backend: ``attention(q, k, v, *, layer, step, num_steps, num_layers, key)``.
Attention = Callable[..., jax.Array]
#: Head kind reported by ``return_info`` for a dense warm-up call.
DENSE = -1


@dataclasses.dataclass(frozen=True)
class SVGConfig:
    """Everything :func:`svg_attention` needs besides the data; hashable, so it can be static.

    - ``multiplier`` or ``sparsity`` (at most one; neither means the default recipe's kept fraction, ``DEFAULT_SPARSITY``): the band
      width, ``W = ceil(multiplier * F / 128) * 128``; ``sparsity`` is SVG's *kept* fraction,
      turned into a multiplier by :func:`svgtpu.masks.core.multiplier_for_sparsity`.  Words for how much
      of the ``L x L`` score matrix a mask keeps, in this package:

      ============  =============================================================================
      sparsity      SVG's word, what users type (``--sparsity``): the kept fraction of pairs
      density       the same fraction measured on a mask (``Mask.density()``), 0.3 means 30 % kept
      tile density  the share of tiles a kernel computes (``TileStats.density``, partial + full)
      multiplier    the band width in frames, ``W = ceil(multiplier * F / 128) * 128``
      ============  =============================================================================
    - ``num_sampled_rows``: query rows profiling samples per call (SVG: 64).
    - ``warmup_step_fraction`` / ``warmup_layer_fraction``: leading share of steps / layers that
      run dense, each in ``[0, 1]``.
    - ``block_q``, ``block_kv``: kernel tile sizes, as :class:`~svgtpu.kernels.KernelConfig` checks
      them (block_q a multiple of 8, block_kv a multiple of 128).  The default
      128 x 128 runs at any geometry: at wan-1440p its plan outgrows SMEM and the kernel splits it
      into q-row chunks; the production tile is MaxDiffusion's (:data:`svgtpu.recipes.PRODUCTION_TILE`).  ``block_kv_compute``:
      keys per online-softmax update (``None``: the kernel's default for the tile).
    - ``align``: ``None`` or a :func:`svgtpu.masks.core.align` mode (``snap``, ``cover``, ``inner``).
    - ``fast_path``: mask-free execution of full tiles (``ours`` kernel only).
    - ``kernel``: one of :data:`KERNELS`: ``ours`` (our block-sparse kernel), ``splash`` (JAX's
      Splash Attention) or ``reference`` (plain masked attention in jnp).
    """

    multiplier: float | None = None
    sparsity: float | None = None
    num_sampled_rows: int = DEFAULT_PROFILE_ROWS
    warmup_step_fraction: float = 0.2
    warmup_layer_fraction: float = 0.03
    block_q: int = 128
    block_kv: int = 128
    block_kv_compute: int | None = None
    align: str | None = None
    fast_path: bool = True
    kernel: str = "ours"

    def __post_init__(self):
        if self.multiplier is not None and self.sparsity is not None:
            raise ValueError("give at most one of multiplier or sparsity, "
                             f"got multiplier={self.multiplier!r} and sparsity={self.sparsity!r}")
        if self.multiplier is not None and not (isinstance(self.multiplier, (int, float))
                                                and math.isfinite(self.multiplier) and self.multiplier > 0):
            raise ValueError(f"multiplier must be a positive number, got {self.multiplier!r}")
        if self.sparsity is not None and not (isinstance(self.sparsity, (int, float)) and 0 < self.sparsity < 1):
            raise ValueError(f"sparsity must be in the open interval (0, 1), got {self.sparsity!r}")
        check_positive_int("num_sampled_rows", self.num_sampled_rows)
        self.kernel_config  # validates block_q, block_kv against the Mosaic block rules
        for name in ("warmup_step_fraction", "warmup_layer_fraction"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        if self.align is not None and self.align not in ALIGN_MODES:
            raise ValueError(f"align must be None or one of {', '.join(ALIGN_MODES)}, got {self.align!r}")
        if not isinstance(self.fast_path, bool):
            raise ValueError(f"fast_path must be True or False, got {self.fast_path!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}")

    @property
    def kernel_config(self):
        """The :class:`~svgtpu.kernels.KernelConfig` of the ``ours`` kernel."""
        from svgtpu.kernels.config import KernelConfig
        return KernelConfig(block_q=self.block_q, block_kv=self.block_kv, block_kv_compute=self.block_kv_compute,
                            fast_path=self.fast_path)

    def multiplier_for(self, geometry: VideoGeometry) -> float:
        """The band multiplier this config means for ``geometry``."""
        if self.multiplier is not None:
            return float(self.multiplier)
        sparsity = DEFAULT_SPARSITY if self.sparsity is None else self.sparsity
        return multiplier_for_sparsity(geometry, sparsity)

    def mask(self, geometry: VideoGeometry) -> Mask:
        """The one band + sink mask every head runs (tile-aligned if ``align`` is set); cached."""
        return _config_mask(self, get_geometry(geometry))

    def dense_steps(self, num_steps: int) -> int:
        """How many leading steps of ``num_steps`` run dense."""
        return warmup_count(self.warmup_step_fraction, num_steps)

    def dense_layers(self, num_layers: int) -> int:
        """How many leading layers of ``num_layers`` run dense."""
        return warmup_count(self.warmup_layer_fraction, num_layers)


@functools.lru_cache(maxsize=64)
def _config_mask(config: SVGConfig, geometry: VideoGeometry) -> Mask:
    mask = svg_mask(geometry, config.multiplier_for(geometry))
    return align(mask, config.block_q, config.block_kv, config.align) if config.align else mask


class SVGInfo(NamedTuple):
    """What :func:`svg_attention` decided (a pytree: fine to return from jit)."""

    dense: jax.Array   # bool []: this call was a dense warm-up
    kinds: jax.Array   # int32 [..., heads]: 0 spatial, 1 temporal, -1 dense warm-up
    mse: jax.Array     # float32 [..., heads, 2]: profiled (spatial, temporal) MSE; NaN in warm-up


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: Mask, config: SVGConfig) -> jax.Array:
    """Run ``mask`` through the configured kernel for ``[..., heads, L, d]`` inputs."""
    from svgtpu import kernels
    from svgtpu.kernels.api import block_sparse

    lead, (L, d) = q.shape[:-2], q.shape[-2:]
    q, k, v = (x.reshape(-1, L, d) for x in (q, k, v))
    scale = 1.0 / math.sqrt(d)
    if config.kernel == "reference":
        out = kernels.reference_attention(q, k, v, mask, sm_scale=scale)
    elif config.kernel == "splash":
        out = kernels.splash_attention(q, k, v, mask, block_q=config.block_q, block_kv=config.block_kv,
                                       sm_scale=scale)
    else:
        out = block_sparse(q, k, v, mask, config=config.kernel_config, sm_scale=scale)  # TPU or GPU kernel
    return out.reshape(*lead, L, d)


def sparse_attention(q: jax.Array, k: jax.Array, v: jax.Array, kinds: jax.Array,
                     geometry: VideoGeometry, config: SVGConfig) -> jax.Array:
    """SVG sparse attention for given head kinds (``int32 [..., heads]``, 1 = temporal).

    Temporal heads are permuted to spatial-major order, all heads run ``config.mask(geometry)``,
    and temporal heads' outputs are permuted back to frame-major.  ``kinds`` is data: changing it
    does not retrace.
    """
    g = get_geometry(geometry)
    temporal = (jnp.asarray(kinds) == TEMPORAL)[..., None, None]

    def to_kernel_layout(x):
        return jnp.where(temporal, g.to_spatial_major(x), x)

    out = attend(*(to_kernel_layout(x) for x in (q, k, v)), config.mask(g), config)
    return jnp.where(temporal, g.to_frame_major(out), out)


def _static_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive Python int (static under jit), got {value!r}")
    return int(value)


def _index_below(name: str, index, limit: int, n: int):
    """``index < limit`` as a Python bool for Python ints, else as a traced bool."""
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        if not 0 <= index < n:
            raise ValueError(f"{name} must be in [0, {n}), got {index}")
        return bool(index < limit)
    index = jnp.asarray(index)
    if index.shape != () or not jnp.issubdtype(index.dtype, jnp.integer):
        raise ValueError(f"{name} must be an integer scalar, got {index.dtype}{list(index.shape)}")
    return index < limit


def svg_attention(q: jax.Array, k: jax.Array, v: jax.Array, geometry: VideoGeometry, config: SVGConfig, *,
                  key: jax.Array, step, num_steps: int, layer, num_layers: int, return_info: bool = False):
    """Sparse VideoGen self-attention of one layer at one denoising step.

    ``q, k, v``: ``[heads, L, d]`` or ``[batch, heads, L, d]``, frame-major, ``L = geometry.L``;
    softmax scale ``1 / sqrt(d)``.  ``key`` seeds the row sampling of profiling.  ``step`` and
    ``layer`` are Python ints or integer scalars (traced is fine: then warm-up is a runtime
    ``lax.cond``); ``num_steps`` and ``num_layers`` are Python ints.  Returns the output, shaped
    like ``q``, and with ``return_info`` also an :class:`SVGInfo`.
    """
    geometry = get_geometry(geometry)
    if not isinstance(config, SVGConfig):
        raise ValueError(f"config must be an SVGConfig, got {type(config).__name__}")
    if q.ndim not in (3, 4) or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must share one shape [heads, L, d] or [batch, heads, L, d], "
                         f"got {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-2] != geometry.L:
        raise ValueError(f"sequence length {q.shape[-2]} does not match geometry {geometry} (L={geometry.L})")
    num_steps, num_layers = _static_int("num_steps", num_steps), _static_int("num_layers", num_layers)
    warm_step = _index_below("step", step, config.dense_steps(num_steps), num_steps)
    warm_layer = _index_below("layer", layer, config.dense_layers(num_layers), num_layers)

    heads_shape = q.shape[:-2]

    def dense(q, k, v, key):
        info = SVGInfo(jnp.array(True), jnp.full(heads_shape, DENSE, jnp.int32),
                       jnp.full((*heads_shape, 2), jnp.nan, jnp.float32))
        return attend(q, k, v, DenseMask(geometry.L), config).astype(q.dtype), info

    def sparse(q, k, v, key):
        kinds, mse = classify_heads(q, k, v, geometry, config.mask(geometry), key,
                                    num_rows=config.num_sampled_rows, return_mse=True)
        out = sparse_attention(q, k, v, kinds, geometry, config).astype(q.dtype)
        return out, SVGInfo(jnp.array(False), kinds, mse.astype(jnp.float32))

    if warm_step is True or warm_layer is True:
        out, info = dense(q, k, v, key)
    elif warm_step is False and warm_layer is False:
        out, info = sparse(q, k, v, key)
    else:
        out, info = jax.lax.cond(jnp.logical_or(warm_step, warm_layer), dense, sparse, q, k, v, key)
    return (out, info) if return_info else out


def dense_attention(q, k, v, *, layer=0, step=0, num_steps=1, num_layers=1, key=None):
    """Plain softmax attention, float32 accumulation; q/k/v ``[B, heads, L, d]``."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    probs = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", probs.astype(v.dtype), v).astype(q.dtype)


def attention_backend(name: str, geometry: VideoGeometry | None = None, **options) -> Attention:
    """The self-attention backend ``name`` (one of :data:`ATTENTION_BACKENDS`) for the toy DiT.

    ``svg`` needs ``geometry`` and takes ``svg_config=`` (an :class:`SVGConfig`) and
    ``return_info=`` (then it returns ``(out, SVGInfo)``); ``svg2`` takes ``svg2_config=`` (an
    :class:`svgtpu.attention.svg2.SVG2Config`); ``splash`` runs JAX's Splash Attention
    kernel on a dense mask (interpret mode off TPU), tiles of ``block=128``.
    """
    if name == "dense":
        return dense_attention
    if name == "svg":
        if geometry is None:
            raise ValueError("attention backend 'svg' needs the model geometry")
        config = options.get("svg_config") or SVGConfig()
        return_info = bool(options.get("return_info", False))

        def svg(q, k, v, *, layer, step, num_steps, num_layers, key):
            return svg_attention(q, k, v, geometry, config, key=key, step=step, num_steps=num_steps,
                                 layer=layer, num_layers=num_layers, return_info=return_info)
        return svg
    if name == "svg2":  # SVG2 k-means clusters, its tile plan traced as data (see svgtpu.attention.svg2)
        from svgtpu.attention.svg2 import SVG2Config, svg2_backend
        return svg2_backend(options.get("svg2_config") or SVG2Config())
    if name == "splash":
        from svgtpu.kernels import splash_attention
        block = int(options.get("block", 128))

        def splash(q, k, v, **_):
            B, H, L, d = q.shape
            merged = [x.reshape(B * H, L, d) for x in (q, k, v)]
            return splash_attention(*merged, DenseMask(L), block_q=block, block_kv=block).reshape(B, H, L, d)
        return splash
    raise ValueError(f"attention must be one of {', '.join(ATTENTION_BACKENDS)}, got {name!r}")


__all__ = ["ATTENTION_BACKENDS", "Attention", "DEFAULT_SPARSITY", "DENSE", "KERNELS", "SVGConfig", "SVGInfo",
           "attend", "attention_backend", "dense_attention", "sparse_attention", "svg_attention", "warmup_count"]
