"""The Wan transformer block, once: the toy DiT, the GPU benchmark and the TPU compile all run it.

One block of Wan 2.1's ``WanAttentionBlock`` (``wan/modules/model.py``; its numbers and options are a
:class:`~svgtpu.models.ModelConfig`), on ``x [B, L, dim]`` in frame-major token order::

    shift1, scale1, gate1, shift2, scale2, gate2 = modulation + t_mod        adaLN, per sample (or token)
    x += gate1 * o(SelfAttention(q, k, v))     q, k, v = Linear(LayerNorm(x) * (1 + scale1) + shift1)
                                               q, k RMS-normed (over the width, or per head), 3D RoPE
    x += o'(CrossAttention(q', k', v'))        q' from [affine] LayerNorm(x), k', v' from the context
         [+ CrossAttention(q', k_img, v_img)]  image-to-video: keys and values of the image tokens
    x += gate2 * FFN(LayerNorm(x) * (1 + scale2) + shift2)                   Linear, GELU (tanh), Linear

Self-attention is a pluggable function ``attention(q, k, v, *, layer, step, num_steps, num_layers,
key)`` on ``[B, heads, L, head_dim]`` (:data:`svgtpu.attention.base.Attention`); :func:`self_attention`
gives the ones the benchmarks compare: XLA, Splash, tokamax and our kernel dense, and SVG (our kernel on
the SVG plan).  Dtypes: matmuls take the weights' dtype (bfloat16 for Wan, float32 for the toy), norms,
modulation and residual adds run in float32 and return to the residual stream's dtype (Wan keeps its
stream in float32).  Every part runs under a ``jax.named_scope`` (:data:`SCOPES`), so a compiled program
says which op belongs to which part (:mod:`svgtpu.compiler.fusions` reads them).

Parameters are a plain dict of arrays; the toy's names are the shipped checkpoint's.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable

import jax
import jax.numpy as jnp
import numpy as np
from einops import rearrange

from svgtpu.attention.base import Attention, dense_attention
from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.models import ModelConfig

Params = dict[str, Any]

#: The named scopes of one block, what each holds, and the role it has in a cost breakdown.
SCOPES = {
    "modulation": "adaLN: shift, scale, gate from the timestep (norms/modulation)",
    "norm": "LayerNorm and modulation before self-attention and the FFN (norms/modulation)",
    "projections": "q, k, v and output projections of self-attention",
    "qk_norm_rope": "q/k RMSNorm and 3D RoPE (norms/modulation)",
    "self_attention": "the self-attention function (kernel, SVG profiling and layout, Ulysses all-to-alls)",
    "residual": "gated residual adds (norms/modulation)",
    "cross_attention": "cross-attention to the text: its norm, projections, attention and residual",
    "ffn": "Linear, GELU, Linear",
}


# -- 3D rotary position embedding ------------------------------------------------------------------

def rope_split(head_dim: int) -> tuple[int, int, int]:
    """Channels of one head given to the (t, h, w) axes, as Wan splits them (all even)."""
    hw = 2 * (head_dim // 6)
    return head_dim - 2 * hw, hw, hw


def rope_angles(geometry: VideoGeometry, head_dim: int, theta: float = 10000.0) -> jax.Array:
    """Rotation angles ``[L, head_dim // 2]`` of every frame-major token: per axis, its position
    times ``theta ** (-2i / axis_dim)``, concatenated over (t, h, w)."""
    t, h, w = np.meshgrid(np.arange(geometry.T), np.arange(geometry.H), np.arange(geometry.W), indexing="ij")
    parts = []
    for pos, dim in zip((t, h, w), rope_split(head_dim)):
        inv_freq = theta ** (-np.arange(0, dim, 2) / dim)
        parts.append(pos.reshape(-1, 1) * inv_freq[None, :])
    return jnp.asarray(np.concatenate(parts, axis=1), jnp.float32)


def apply_rope(x: jax.Array, angles: jax.Array) -> jax.Array:
    """Rotate channel pairs ``(2i, 2i+1)`` of ``x [..., L, d]`` by ``angles [L, d/2]`` (in float32,
    returned in ``x``'s dtype)."""
    pairs = rearrange(x, "... (n two) -> ... n two", two=2)
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    a, b = pairs[..., 0], pairs[..., 1]
    out = rearrange(jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1), "... n two -> ... (n two)")
    return out.astype(x.dtype)


# -- layers ------------------------------------------------------------------------------------------

def linear(p: Params, x: jax.Array) -> jax.Array:
    """``x @ w + b`` in the weights' dtype."""
    return x.astype(p["w"].dtype) @ p["w"] + p["b"]


def layer_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """LayerNorm without affine, in float32."""
    x = x.astype(jnp.float32)
    mean = x.mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)


def rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-6) -> jax.Array:
    """RMSNorm over the last axis, in float32, returned in ``x``'s dtype."""
    y = x.astype(jnp.float32)
    return (y * jax.lax.rsqrt((y * y).mean(-1, keepdims=True) + eps) * scale).astype(x.dtype)


def modulation(mod: jax.Array) -> list[jax.Array]:
    """adaLN's shift / scale / gate vectors from ``mod [B, n, dim]`` (one per sample, each ``[B, 1, dim]``) or
    ``[B, L, n, dim]`` (one per token, Wan 2.2 TI2V's per-token timesteps: each ``[B, L, dim]``)."""
    parts = jnp.unstack(mod, axis=-2)
    return parts if mod.ndim == 4 else [m[:, None] for m in parts]


def _init_linear(key, fan_in: int, fan_out: int, dtype) -> Params:
    w = jax.random.normal(key, (fan_in, fan_out)) / math.sqrt(fan_in)
    return {"w": w.astype(dtype), "b": jnp.zeros((fan_out,), dtype)}


@dataclasses.dataclass(frozen=True)
class WanBlock:
    """One Wan block of shape ``config`` (hashable: a static argument under ``jit``)."""

    config: ModelConfig

    #: PRNG keys :meth:`init` draws, in order: q, k, v, o, cross q, cross kv, cross o, FFN in, FFN out.
    INIT_KEYS = 9

    def __post_init__(self):
        if not isinstance(self.config, ModelConfig):
            raise BadInput(f"WanBlock needs a ModelConfig, got {type(self.config).__name__}")
        if self.config.head_dim % 2:
            raise BadInput(f"head_dim must be even (RoPE rotates channel pairs), got {self.config.head_dim}")

    def init(self, keys: Iterable[jax.Array], dtype=jnp.float32) -> Params:
        """Fresh parameters from the next :attr:`INIT_KEYS` of ``keys``: linear weights normal /
        sqrt(fan_in), biases zero, norms one, modulation zero (the block starts as the identity)."""
        c, keys = self.config, iter(keys)
        D = c.dim
        p = {"modulation": jnp.zeros((6, D), dtype)}
        for name in ("q", "k", "v", "o"):
            p[name] = _init_linear(next(keys), D, D, dtype)
        p["cross_q"] = _init_linear(next(keys), D, D, dtype)
        kv_key = next(keys)
        p["cross_kv"] = _init_linear(kv_key, D, 2 * D, dtype)
        if c.image_dim is not None:   # I2V: the image tokens' keys and values (their key drawn from cross kv's)
            p["cross_image_kv"] = _init_linear(jax.random.fold_in(kv_key, 1), D, 2 * D, dtype)
        p["cross_o"] = _init_linear(next(keys), D, D, dtype)
        p["mlp_in"] = _init_linear(next(keys), D, c.ffn, dtype)
        p["mlp_out"] = _init_linear(next(keys), c.ffn, D, dtype)
        if c.qk_norm:
            width = D if c.qk_norm == "model" else c.head_dim
            p["q_norm"], p["k_norm"] = jnp.ones((width,), dtype), jnp.ones((width,), dtype)
        if c.cross_norm:
            p["cross_norm"] = {"scale": jnp.ones((D,), dtype), "bias": jnp.zeros((D,), dtype)}
        if c.cross_qk_norm:
            p["cross_q_norm"], p["cross_k_norm"] = jnp.ones((D,), dtype), jnp.ones((D,), dtype)
            if c.image_dim is not None:
                p["cross_image_k_norm"] = jnp.ones((D,), dtype)
        return p

    def _heads(self, y: jax.Array) -> jax.Array:
        return rearrange(y, "b l (h d) -> b h l d", h=self.config.heads)

    def _qk(self, p: Params, y: jax.Array, norm: str, angles: jax.Array) -> jax.Array:
        """q or k: RMS-normed as configured, split into heads, rotated."""
        c = self.config
        if c.qk_norm == "model":
            y = self._heads(rms_norm(y, p[norm], c.eps))
        elif c.qk_norm == "head":
            y = rms_norm(self._heads(y), p[norm], c.eps)
        else:
            y = self._heads(y)
        return apply_rope(y, angles)

    def __call__(self, p: Params, x: jax.Array, t_mod: jax.Array, context: jax.Array, angles: jax.Array, *,
                 attention: Attention = dense_attention, image: jax.Array | None = None, **call):
        """``(x, info)``: the block applied to ``x [B, L, dim]`` with time modulation ``t_mod [B, 6, dim]`` (or
        one per token, ``[B, L, 6, dim]``: Wan 2.2 TI2V), text ``context [B, text_len, dim]``, RoPE ``angles
        [L, head_dim / 2]`` and, for an image-to-video model (``config.image_dim``), the embedded image tokens
        ``image [B, image_len, dim]``.  ``call`` (layer, step, num_steps, num_layers, key) goes to
        ``attention``; ``info`` is what it returned beside its output (``None`` when it returns the output alone)."""
        c = self.config
        if (image is None) != (c.image_dim is None):
            raise BadInput(f"WanBlock: image tokens are needed exactly when the model has image cross-attention "
                           f"(image_dim {c.image_dim}), got {'none' if image is None else 'some'}")
        merge = lambda y: rearrange(y, "b h l d -> b l (h d)")  # noqa: E731
        with jax.named_scope("modulation"):
            mod = t_mod.astype(jnp.float32) + p["modulation"].astype(jnp.float32)
            shift1, scale1, gate1, shift2, scale2, gate2 = modulation(mod)

        with jax.named_scope("norm"):
            h = layer_norm(x, c.eps) * (1 + scale1) + shift1
        with jax.named_scope("projections"):
            q, k, v = linear(p["q"], h), linear(p["k"], h), linear(p["v"], h)
        with jax.named_scope("qk_norm_rope"):
            q, k = self._qk(p, q, "q_norm", angles), self._qk(p, k, "k_norm", angles)
        with jax.named_scope("self_attention"):
            out = attention(q, k, self._heads(v), **call)
            out, info = out if isinstance(out, tuple) else (out, None)
        with jax.named_scope("projections"):
            y = linear(p["o"], merge(out))
        with jax.named_scope("residual"):
            x = (x + gate1 * y).astype(x.dtype)

        with jax.named_scope("cross_attention"):
            h = layer_norm(x, c.eps)
            if c.cross_norm:
                h = h * p["cross_norm"]["scale"] + p["cross_norm"]["bias"]
            cq = linear(p["cross_q"], h)
            ck, cv = jnp.split(linear(p["cross_kv"], context), 2, axis=-1)
            if c.cross_qk_norm:
                cq, ck = rms_norm(cq, p["cross_q_norm"], c.eps), rms_norm(ck, p["cross_k_norm"], c.eps)
            cross = dense_attention(self._heads(cq), self._heads(ck), self._heads(cv))
            if image is not None:   # Wan 2.1 I2V: the image tokens' own keys and values, attended apart, added
                ik, iv = jnp.split(linear(p["cross_image_kv"], image), 2, axis=-1)
                if c.cross_qk_norm:
                    ik = rms_norm(ik, p["cross_image_k_norm"], c.eps)
                cross = cross + dense_attention(self._heads(cq), self._heads(ik), self._heads(iv))
            x = (x + linear(p["cross_o"], merge(cross))).astype(x.dtype)

        with jax.named_scope("norm"):
            h = layer_norm(x, c.eps) * (1 + scale2) + shift2
        with jax.named_scope("ffn"):
            y = linear(p["mlp_out"], jax.nn.gelu(linear(p["mlp_in"], h), approximate=True))
        with jax.named_scope("residual"):
            x = (x + gate2 * y).astype(x.dtype)
        return x, info


# -- the self-attention functions a block can plug in --------------------------------------------------

#: Self-attention choices (:func:`self_attention`): dense through XLA, JAX's Splash, tokamax or our
#: kernel; ``svg``: Sparse VideoGen (online profiling, layout transform, our kernel on the SVG plan).
SELF_ATTENTIONS = ("xla", "splash", "tokamax", "ours-dense", "svg")


def self_attention(name: str, geometry: VideoGeometry | None = None, *, tile: Tile | None = None, svg_config=None,
                   implementation: str | None = None) -> Attention:
    """The self-attention function ``name`` (one of :data:`SELF_ATTENTIONS`) for a :class:`WanBlock`.

    Tiled kernels need a ``tile`` (``Tile(block_q, block_kv)``); ``svg`` needs ``geometry`` and an
    :class:`~svgtpu.attention.svg.SVGConfig` (its tiles are the config's); ``xla`` needs neither;
    ``implementation`` picks our kernel's backend (:func:`svgtpu.kernels.api.block_sparse`).
    """
    from svgtpu.kernels.config import KernelConfig
    from svgtpu.masks.core import DenseMask
    if name not in SELF_ATTENTIONS:
        raise BadInput(f"attention must be one of {', '.join(SELF_ATTENTIONS)}, got {name!r}")
    if name == "xla":
        return dense_attention
    if name == "svg":
        from svgtpu.attention.backends import attention_backend
        if geometry is None or svg_config is None:
            raise BadInput("attention 'svg' needs the model geometry and an SVGConfig (svg_config)")
        return attention_backend("svg", geometry, svg_config=svg_config)
    if tile is None:
        raise BadInput(f"attention {name!r} needs a tile (Tile(block_q, block_kv))")
    block_q, block_kv = tile
    config = KernelConfig(block_q, block_kv)

    def kernel(q, k, v):  # [heads, L, d] -> [heads, L, d], one dense mask for every head
        L = q.shape[1]
        if name == "splash":
            from svgtpu.baselines.splash import splash_attention
            return splash_attention(q, k, v, DenseMask(L), block_q=block_q, block_kv=block_kv)
        if name == "tokamax":
            from svgtpu.baselines.tokamax import tokamax_attention
            return tokamax_attention(q, k, v, DenseMask(L), block_q=block_q, block_kv=block_kv)
        from svgtpu.kernels.api import block_sparse
        return block_sparse(q, k, v, DenseMask(L), config=config, implementation=implementation)

    def attend(q, k, v, **_):
        B, H, L, d = q.shape
        return kernel(*(x.reshape(B * H, L, d) for x in (q, k, v))).reshape(B, H, L, d)
    return attend


__all__ = ["SCOPES", "SELF_ATTENTIONS", "WanBlock", "Params", "apply_rope", "layer_norm", "linear", "modulation",
           "rms_norm", "rope_angles", "rope_split", "self_attention"]
