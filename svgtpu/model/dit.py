"""The whole Wan DiT: latent video, timestep and text (and an image) in, the flow prediction out.

Diffusers' ``WanTransformer3DModel`` (``transformer_wan.py``) and Wan's ``WanModel`` (``wan/modules/model.py``),
for any :class:`~svgtpu.models.ModelConfig` and any latent shape whose frames, height and width divide
into patches::

    latent [B, C, F, H, W] --patches (1, 2, 2), Linear--> x [B, L, dim]          frame-major tokens
    t [B] (or [B, L]) --sinusoid, Linear, SiLU, Linear--> temb; SiLU, Linear --> t_mod [B, 6, dim] ([B, L, 6, dim])
    text [B, text_len, text_dim] --Linear, GELU (tanh), Linear--> context [B, text_len, dim]
    image [B, n, image_dim] --LayerNorm, Linear, GELU, Linear, LayerNorm--> [B, n, dim]   (image-to-video only)
    layers x WanBlock(x, t_mod, context, RoPE angles of the grid[, image])         (svgtpu.model.wan)
    head: LayerNorm(x) * (1 + scale) + shift, (shift, scale) = head_modulation + temb; Linear --> patches
    --unpatchify--> [B, out_channels, F, H, W]

Timesteps are Wan's, 0..1000 (a sampler's flow time times 1000).  A timestep per token (``t [B, L]``) is Wan 2.2
TI2V-5B's: its image-conditioned first frame runs at ``t = 0`` while the rest denoise (``wan/textimage2video.py``
of :data:`~svgtpu.models.WAN22_REPO`), so shift, scale and gate differ per token.  Self-attention is any
:data:`svgtpu.attention.base.Attention` (dense, a kernel or SVG: :func:`svgtpu.model.wan.self_attention` with
:meth:`WanDiT.geometry`).  Parameters are a dict (:mod:`svgtpu.model.weights` fills it from a checkpoint).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from einops import rearrange

from svgtpu.attention.base import Attention, dense_attention
from svgtpu.errors import BadInput
from svgtpu.geometry import VideoGeometry
from svgtpu.models import ModelConfig
from svgtpu.model.wan import Params, WanBlock, layer_norm, linear, modulation, rope_angles

#: The image embedder's LayerNorms keep torch's default eps (``torch.nn.LayerNorm(in_dim)`` in Wan's ``MLPProj``,
#: ``FP32LayerNorm(in_features)`` in diffusers' ``WanImageEmbedding``), not the model's.
IMAGE_NORM_EPS = 1e-5


def sinusoid(t: jax.Array, dim: int) -> jax.Array:
    """Wan's timestep embedding ``[..., dim]`` of timesteps ``t [...]``: ``cos`` then ``sin`` of ``t x 10000 **
    (-i / (dim / 2))``, in float32 (diffusers' ``get_timestep_embedding`` with ``flip_sin_to_cos``)."""
    half = dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half) / half)
    args = t[..., None].astype(jnp.float32) * freqs
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def _affine_norm(p: Params, x: jax.Array, eps: float) -> jax.Array:
    return layer_norm(x, eps) * p["scale"] + p["bias"]


@dataclasses.dataclass(frozen=True)
class WanDiT:
    """The Wan transformer of shape ``config`` (hashable: a static argument under ``jit``)."""

    config: ModelConfig

    def __post_init__(self):
        if not isinstance(self.config, ModelConfig):
            raise BadInput(f"WanDiT needs a ModelConfig, got {type(self.config).__name__}")

    def geometry(self, latent_shape) -> VideoGeometry:
        """The token grid of a latent ``[B, C, F, H, W]``; refused when a side does not divide into patches."""
        c = self.config
        if len(latent_shape) != 5 or latent_shape[1] != c.in_channels:
            raise BadInput(f"latent must be [batch, {c.in_channels} channels, frames, height, width], "
                           f"got {tuple(latent_shape)}")
        sides = latent_shape[2:]
        if any(s % p for s, p in zip(sides, c.patch)):
            raise BadInput(f"latent frames, height, width {tuple(sides)} must be multiples of the patch {c.patch}")
        return VideoGeometry(*(s // p for s, p in zip(sides, c.patch)), name="wan-latent")

    def embed_time(self, params: Params, t: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(temb, t_mod)``: the time embedding ``[..., dim]`` the head modulates with and the blocks' six
        vectors ``[..., 6, dim]``, of timesteps ``t [B]`` or ``[B, L]``."""
        D = self.config.dim
        temb = linear(params["time_out"], jax.nn.silu(linear(params["time_in"], sinusoid(t, self.config.freq_dim))))
        t_mod = linear(params["time_proj"], jax.nn.silu(temb))
        return temb, t_mod.reshape(*t_mod.shape[:-1], 6, D)

    def embed_text(self, params: Params, text: jax.Array) -> jax.Array:
        """Text encoder states ``[B, text_len, text_dim]`` to the blocks' context ``[B, text_len, dim]``."""
        return linear(params["text_out"], jax.nn.gelu(linear(params["text_in"], text), approximate=True))

    def embed_image(self, params: Params, image: jax.Array) -> jax.Array:
        """Image encoder states ``[B, n, image_dim]`` to image tokens ``[B, n, dim]`` (exact GELU, Wan's MLPProj)."""
        h = _affine_norm(params["image_norm_in"], image, IMAGE_NORM_EPS)
        h = linear(params["image_out"], jax.nn.gelu(linear(params["image_in"], h), approximate=False))
        return _affine_norm(params["image_norm_out"], h, IMAGE_NORM_EPS)

    def __call__(self, params: Params, latent: jax.Array, t: jax.Array, text: jax.Array,
                 image: jax.Array | None = None, *, attention: Attention = dense_attention, step=0,
                 num_steps: int = 1, key: jax.Array | None = None, with_info: bool = False):
        """The prediction ``[B, out_channels, F, H, W]`` for ``latent [B, C, F, H, W]`` at timesteps ``t [B]`` (or
        one per token, ``[B, L]``), text states ``text [B, text_len, text_dim]`` and, for an image-to-video
        model, image states ``image [B, n, image_dim]``.  ``step``, ``num_steps``, ``key`` and the layer go to
        ``attention``; ``with_info=True`` also returns each layer's info from it."""
        c = self.config
        g = self.geometry(latent.shape)
        B = latent.shape[0]
        if t.shape not in ((B,), (B, g.L)):
            raise BadInput(f"timesteps must be [{B}] or one per token [{B}, {g.L}], got {tuple(t.shape)}")
        if text.ndim != 3 or text.shape[0] != B or text.shape[2] != c.text_dim:
            raise BadInput(f"text must be [{B}, tokens, {c.text_dim}], got {tuple(text.shape)}")
        if (image is None) != (c.image_dim is None) or (image is not None and image.shape[2] != c.image_dim):
            raise BadInput(f"image states [batch, tokens, {c.image_dim}] are needed exactly when the model has "
                           f"image cross-attention (image_dim {c.image_dim}), got "
                           f"{None if image is None else tuple(image.shape)}")
        pt, ph, pw = c.patch
        x = linear(params["patch_embed"], rearrange(latent, "b c (f pf) (h ph) (w pw) -> b (f h w) (c pf ph pw)",
                                                    pf=pt, ph=ph, pw=pw))
        temb, t_mod = self.embed_time(params, t)
        context = self.embed_text(params, text)
        image = None if image is None else self.embed_image(params, image)
        angles = rope_angles(g, c.head_dim, c.rope_theta)
        block = WanBlock(c)
        keys = jax.random.split(jax.random.PRNGKey(0) if key is None else key, c.layers)
        infos = []
        for layer, p in enumerate(params["blocks"]):
            x, info = block(p, x, t_mod, context, angles, attention=attention, image=image, layer=layer, step=step,
                            num_steps=num_steps, num_layers=c.layers, key=keys[layer])
            infos.append(info)
        shift, scale = modulation(params["head_modulation"].astype(jnp.float32) + temb[..., None, :])
        x = linear(params["head"], layer_norm(x, c.eps) * (1 + scale) + shift)
        out = rearrange(x, "b (f h w) (pf ph pw c) -> b c (f pf) (h ph) (w pw)", f=g.T, h=g.H, w=g.W,
                        pf=pt, ph=ph, pw=pw)
        return (out, infos) if with_info else out


__all__ = ["IMAGE_NORM_EPS", "WanDiT", "sinusoid"]
