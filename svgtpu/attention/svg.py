"""Sparse VideoGen attention as one drop-in function: :func:`svg_attention`.

Per call (one denoising step of one layer):

1. **Dense warm-up.**  The first ``warmup_step_fraction`` of the steps and the first
   ``warmup_layer_fraction`` of the layers run dense attention (defaults: the default recipe's, :mod:`svgtpu.warmup`):
   step ``i`` is a warm-up step iff ``i < floor(fraction * num_steps)`` (step 0 is the noisiest),
   and the same for layers, as SVG's ``wan_t2v_inference.py`` counts them (:func:`warmup_count`;
   the decision: :func:`svgtpu.attention.base.with_warmup`).  Dense runs through the configured
   kernel with a :class:`DenseMask`.
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
from typing import NamedTuple

import jax
import jax.numpy as jnp

from svgtpu.geometry import Tile, VideoGeometry, check_positive_int, get_geometry
from svgtpu.facts.kernels import kernel_names
from svgtpu.masks.core import ALIGN_MODES, DenseMask, Mask, align, check_kept, multiplier_for_kept, svg_mask
from svgtpu.attention.base import with_warmup
from svgtpu.attention.profiling import TEMPORAL, classify_heads
from svgtpu.warmup import DEFAULT_PROFILE_ROWS
from svgtpu.errors import BadInput
from svgtpu.setting import mask_density
from svgtpu.warmup import DEFAULT_WARMUP_LAYER_FRACTION, DEFAULT_WARMUP_STEP_FRACTION, warmup_count

#: The attention kernels an :class:`SVGConfig` can run its masks through (``SVGConfig.kernel``).
#: The kernels an SVG layer can run its mask through (:data:`svgtpu.facts.kernels.KERNELS`).
KERNELS = kernel_names(svg_layer=True)
#: Head kind reported by ``return_info`` for a dense warm-up call.
DENSE = -1


@dataclasses.dataclass(frozen=True)
class SVGConfig:
    """Everything :func:`svg_attention` needs besides the data; hashable, so it can be static.

    - ``multiplier`` or ``kept`` (at most one; neither means ``DEFAULT_KEPT``: :func:`svgtpu.setting.mask_density`): the band
      width, ``W = ceil(multiplier * F / 128) * 128``; ``kept`` is the fraction of (q, k) pairs kept (SVG calls it ``sparsity``),
      turned into a multiplier by :func:`svgtpu.masks.core.multiplier_for_kept`.  Words for how much
      of the ``L x L`` score matrix a mask keeps, in this package:

      ============  =============================================================================
      kept          the kept fraction of pairs (``--kept``; SVG's word ``sparsity``, also accepted)
      density       the same fraction measured on a mask (``Mask.density()``), 0.3 means 30 % kept
      tile density  the share of tiles a kernel computes (``TileStats.density``, partial + full)
      multiplier    the band width in frames, ``W = ceil(multiplier * F / 128) * 128``
      ============  =============================================================================
    - ``num_sampled_rows``: query rows profiling samples per call (SVG: 64).
    - ``warmup_step_fraction`` / ``warmup_layer_fraction``: leading share of steps / layers that
      run dense, each in ``[0, 1]``.
    - ``block_q``, ``block_kv`` (required, by keyword): kernel tile sizes, as :class:`~svgtpu.kernels.KernelConfig`
      checks them (block_q a multiple of 8, block_kv a multiple of 128).  The caller's tile, as Splash's kernel
      takes its ``BlockSizes``: a setting's (:class:`svgtpu.setting.Setting`, the production tile
      :data:`svgtpu.recipes.PRODUCTION_TILE`) or the toy's :data:`svgtpu.setting.SMALL_TILE`, which runs at any
      geometry (at 1440p its plan outgrows SMEM and the kernel splits it into q-row chunks).
      ``block_kv_compute``: keys per online-softmax update (``None``: the kernel's default for the tile).
    - ``align``: ``None`` or a :func:`svgtpu.masks.core.align` mode (``snap``, ``cover``, ``inner``).
    - ``fast_path``: mask-free execution of full tiles (``ours`` kernel only).
    - ``kernel``: one of :data:`KERNELS`: ``ours`` (our block-sparse kernel), ``splash`` (JAX's
      Splash Attention) or ``reference`` (plain masked attention in jnp).
    """

    multiplier: float | None = None
    kept: float | None = None
    num_sampled_rows: int = DEFAULT_PROFILE_ROWS
    warmup_step_fraction: float = DEFAULT_WARMUP_STEP_FRACTION
    warmup_layer_fraction: float = DEFAULT_WARMUP_LAYER_FRACTION
    block_q: int = dataclasses.field(kw_only=True)    # required: the tile is the caller's (see above)
    block_kv: int = dataclasses.field(kw_only=True)
    block_kv_compute: int | None = None
    align: str | None = None
    fast_path: bool = True
    kernel: str = "ours"

    def __post_init__(self):
        kept, multiplier = mask_density(self.kept, self.multiplier)   # the config holds the density it runs
        if self.kept is not None:
            check_kept(self.kept)
        object.__setattr__(self, "kept", kept)
        object.__setattr__(self, "multiplier", multiplier)
        check_positive_int("num_sampled_rows", self.num_sampled_rows)
        self.kernel_config  # validates block_q, block_kv against the Mosaic block rules
        for name in ("warmup_step_fraction", "warmup_layer_fraction"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                raise BadInput(f"{name} must be a number in [0, 1], got {value!r}")
        if self.align is not None and self.align not in ALIGN_MODES:
            raise BadInput(f"align must be None or one of {', '.join(ALIGN_MODES)}, got {self.align!r}")
        if not isinstance(self.fast_path, bool):
            raise BadInput(f"fast_path must be True or False, got {self.fast_path!r}")
        if self.kernel not in KERNELS:
            raise BadInput(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}")

    @property
    def kernel_config(self):
        """The :class:`~svgtpu.kernels.KernelConfig` of the ``ours`` kernel."""
        from svgtpu.kernels.config import KernelConfig
        return KernelConfig(block_q=self.block_q, block_kv=self.block_kv, block_kv_compute=self.block_kv_compute,
                            fast_path=self.fast_path)

    def multiplier_for(self, geometry: VideoGeometry) -> float:
        """The band multiplier this config means for ``geometry``."""
        return float(self.multiplier) if self.multiplier is not None else multiplier_for_kept(geometry, self.kept)

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
    return align(mask, Tile(config.block_q, config.block_kv), config.align) if config.align else mask


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
        from svgtpu.baselines.splash import splash_attention
        out = splash_attention(q, k, v, mask, block_q=config.block_q, block_kv=config.block_kv, sm_scale=scale)
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
        raise BadInput(f"config must be an SVGConfig, got {type(config).__name__}")
    if q.ndim not in (3, 4) or q.shape != k.shape or q.shape != v.shape:
        raise BadInput(f"q, k, v must share one shape [heads, L, d] or [batch, heads, L, d], "
                       f"got {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-2] != geometry.L:
        raise BadInput(f"sequence length {q.shape[-2]} does not match geometry {geometry} (L={geometry.L})")
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

    out, info = with_warmup(dense, sparse, q, k, v, key, step=step, num_steps=num_steps, layer=layer,
                            num_layers=num_layers, step_fraction=config.warmup_step_fraction,
                            layer_fraction=config.warmup_layer_fraction)
    return (out, info) if return_info else out


__all__ = ["DENSE", "KERNELS", "SVGConfig", "SVGInfo", "attend", "sparse_attention",
           "svg_attention", "warmup_count"]
