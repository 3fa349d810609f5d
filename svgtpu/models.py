"""The transformer's architecture, JAX-free: one Wan-style DiT block repeated ``layers`` times.

:class:`ModelConfig` is read by the setting and the cost model (which must not load JAX) and by
:class:`svgtpu.model.wan.WanBlock`, the one block the toy DiT, the GPU benchmark and the TPU compile
run; so the published numbers of Wan live here once.

Wan 2.1, as published (``github.com/Wan-Video/Wan2.1`` at :data:`svgtpu.recipes.WAN_COMMIT`):

- ``wan/configs/wan_t2v_14B.py``: dim 5120, ffn_dim 13824, freq_dim 256, num_heads 40, num_layers 40,
  patch_size (1, 2, 2), qk_norm True, cross_attn_norm True, eps 1e-6;
- ``wan/configs/wan_t2v_1_3B.py``: dim 1536, ffn_dim 8960, 12 heads, 30 layers, the rest as 14B;
- ``wan/configs/shared_config.py``: text_len 512 (umT5 tokens), param_dtype bfloat16;
- ``wan/modules/model.py``: ``WanAttentionBlock`` -- adaLN modulation ``(modulation + e).chunk(6)``
  (shift, scale, gate for self-attention and for the FFN), LayerNorm without affine before both,
  q/k ``WanRMSNorm(dim)`` over the whole width *before* splitting heads (self- and cross-attention),
  an affine LayerNorm before cross-attention (``cross_attn_norm``), FFN ``Linear, GELU(tanh), Linear``;
  3D RoPE splitting a head's ``d`` channels ``d - 4 (d // 6)``, ``2 (d // 6)``, ``2 (d // 6)`` over
  (t, h, w), ``theta = 10000``; in_dim 16 latent channels, so ``16 x 1 x 2 x 2 = 64`` values per token.

Wan 2.2 (``github.com/Wan-Video/Wan2.2`` at :data:`WAN22_COMMIT`, ``wan/configs/wan_t2v_A14B.py`` and
``wan_ti2v_5B.py``): A14B is two experts (high noise, low noise) each of Wan 2.1 14B's shape, a step runs one;
TI2V-5B has dim 3072, ffn 14336, 24 heads, 30 layers, and its VAE's 48 latent channels (``wan/modules/vae2_2.py``,
``z_dim=48``) x patch (1, 2, 2) = 192 values per token; it runs one timestep per token (``wan/textimage2video.py``).

The whole model's fields (``text_dim``, ``image_dim``, ``out_channels``) are Wan's ``WanModel`` arguments
(``wan/modules/model.py``: text_dim 4096, umT5-XXL's width; an image-to-video model's CLIP ViT-H image tokens,
1280 wide, ``MLPProj(1280, dim)``; out_dim 16 for every Wan 2.1, whose I2V takes 36 channels in).
:mod:`svgtpu.model.weights` reads a checkpoint's shapes into this class and returns one of :data:`MODELS`
itself when the shapes are a published model's.
"""

from __future__ import annotations

import dataclasses
import math

from svgtpu.errors import BadInput
from svgtpu.geometry import WAN_PATCH, check_positive_int
from svgtpu.recipes import WAN_COMMIT, WAN_REPO, Source

#: How q and k are RMS-normalized: over the whole width before the heads split (Wan), per head (the
#: toy), or not at all.
QK_NORMS = ("model", "head", None)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The transformer's shape and its block's options (a Wan-style DiT block repeated ``layers`` times)."""

    name: str
    layers: int
    dim: int
    heads: int
    head_dim: int
    ffn: int
    text_len: int       # cross-attention context tokens
    patch_in: int       # values per token entering the patch embedding (and leaving the head)
    source: str
    patch: tuple[int, int, int] = WAN_PATCH
    qk_norm: str | None = "model"     # QK_NORMS: self-attention's q/k RMSNorm
    cross_norm: bool = True           # affine LayerNorm before cross-attention (Wan's cross_attn_norm)
    cross_qk_norm: bool = True        # RMSNorm of cross-attention's q and k (over the width)
    eps: float = 1e-6
    rope_theta: float = 10000.0
    freq_dim: int = 256               # sinusoidal timestep embedding width
    text_dim: int = 4096              # text encoder's width (umT5-XXL) entering the text embedder
    image_dim: int | None = None      # image-to-video: image encoder's width (CLIP ViT-H: 1280); None: no image
    out_channels: int | None = None   # latent channels leaving the head (None: as many as enter)

    def __post_init__(self):
        for field in ("layers", "dim", "heads", "head_dim", "ffn", "text_len", "patch_in", "freq_dim", "text_dim"):
            check_positive_int(f"ModelConfig.{field}", getattr(self, field))
        for field in ("image_dim", "out_channels"):
            if getattr(self, field) is not None:
                check_positive_int(f"ModelConfig.{field}", getattr(self, field))
        if self.heads * self.head_dim != self.dim:
            raise BadInput(f"ModelConfig: heads * head_dim = {self.heads * self.head_dim} != dim {self.dim}")
        object.__setattr__(self, "patch", tuple(int(p) for p in self.patch))
        if len(self.patch) != 3 or min(self.patch) <= 0:
            raise BadInput(f"ModelConfig.patch must be three positive integers (t, h, w), got {self.patch}")
        if self.qk_norm not in QK_NORMS:
            raise BadInput(f"ModelConfig.qk_norm must be one of {QK_NORMS}, got {self.qk_norm!r}")
        if not self.eps > 0 or not self.rope_theta > 0:
            raise BadInput(f"ModelConfig.eps and rope_theta must be positive, got {self.eps}, {self.rope_theta}")

    @property
    def in_channels(self) -> int:
        """Latent channels entering the patch embedding."""
        return self.patch_in // math.prod(self.patch)

    @property
    def patch_out(self) -> int:
        """Values per token leaving the head: output latent channels x the patch."""
        return (self.out_channels or self.in_channels) * math.prod(self.patch)

    @property
    def params(self) -> int:
        """Weights of the matmuls (what must sit in memory): per block Q/K/V/O of self- and
        cross-attention (8 D^2) and the MLP (2 D F), plus patch embedding and head."""
        D = self.dim
        return self.layers * (8 * D * D + 2 * D * self.ffn) + 2 * self.patch_in * D

    @classmethod
    def from_dit(cls, config) -> "ModelConfig":
        """The toy DiT (:class:`svgtpu.toy.dit.DiTConfig`) as a model config: per-head q/k norms, a
        plain LayerNorm before cross-attention, ``context_tokens`` label tokens as its text."""
        return cls("toy", config.depth, config.dim, config.heads, config.head_dim,
                   config.dim * config.mlp_ratio, config.context_tokens, config.patch_dim,
                   source="svgtpu.toy.dit.DiTConfig", patch=config.patch, qk_norm="head", cross_norm=False,
                   cross_qk_norm=False, rope_theta=config.rope_theta, freq_dim=config.freq_dim)




#: Wan 2.2's repository and the commit its published shapes were read at.
WAN22_REPO = "Wan-Video/Wan2.2"
WAN22_COMMIT = "42bf4cfaa384bc21833865abc2f9e6c0e67233dc"


def _wan21(config: str) -> str:
    return (Source(WAN_REPO, f"wan/configs/wan_t2v_{config}.py", WAN_COMMIT).cite()
            + " and wan/modules/model.py (the block)")


MODELS: dict[str, ModelConfig] = {
    "wan2.1-14b": ModelConfig("wan2.1-14b", layers=40, dim=5120, heads=40, head_dim=128, ffn=13824,
                              text_len=512, patch_in=64, source=_wan21("14B")),
    "wan2.1-1.3b": ModelConfig("wan2.1-1.3b", layers=30, dim=1536, heads=12, head_dim=128, ffn=8960,
                               text_len=512, patch_in=64, source=_wan21("1_3B")),
    "wan2.2-a14b": ModelConfig("wan2.2-a14b", layers=40, dim=5120, heads=40, head_dim=128, ffn=13824,
                               text_len=512, patch_in=64,
                               source=Source(WAN22_REPO, "wan/configs/wan_t2v_A14B.py", WAN22_COMMIT,
                                             "per expert: high- and low-noise, a step runs one").cite()),
    "wan2.2-5b": ModelConfig("wan2.2-5b", layers=30, dim=3072, heads=24, head_dim=128, ffn=14336,
                             text_len=512, patch_in=192,
                             source=Source(WAN22_REPO, "wan/configs/wan_ti2v_5B.py", WAN22_COMMIT,
                                           "48 latent channels in and out: wan/modules/vae2_2.py z_dim").cite()),
}


@dataclasses.dataclass(frozen=True)
class VAEConfig:
    """Wan 2.1's causal 3D VAE (``wan/modules/vae.py``: ``_video_vae`` builds ``WanVAE_(dim=96, z_dim=16,
    dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[], temperal_downsample=[False, True, True])``; the
    decoder upsamples in time where the encoder downsampled, ``temperal_upsample`` = that list reversed):
    ``base`` channels times ``mult`` per stage, ``res_blocks`` residual blocks per encoder stage (one more per
    decoder stage), ``z`` latent channels, ``temporal_up``: which decoder stages also double the frames."""

    base: int = 96
    mult: tuple[int, ...] = (1, 2, 4, 4)
    res_blocks: int = 2
    z: int = 16
    temporal_up: tuple[bool, ...] = (True, True, False)
    source: str = Source(WAN_REPO, "wan/modules/vae.py", WAN_COMMIT, "_video_vae, Decoder3d, Encoder3d").cite()

    def __post_init__(self):
        for field in ("base", "res_blocks", "z"):
            check_positive_int(f"VAEConfig.{field}", getattr(self, field))
        if len(self.temporal_up) != len(self.mult) - 1:
            raise BadInput(f"VAEConfig.temporal_up needs one flag per upsampling stage ({len(self.mult) - 1}), "
                           f"got {len(self.temporal_up)}")

    @property
    def decoder_dims(self) -> tuple[int, ...]:
        """Decoder widths, deepest first: ``base x (mult[-1], *reversed(mult))`` (384, 384, 384, 192, 96)."""
        return tuple(self.base * m for m in (self.mult[-1], *self.mult[::-1]))


#: Wan 2.1's VAE (also Wan 2.2 A14B's; TI2V-5B has its own, ``vae2_2.py``).
WAN21_VAE = VAEConfig()

__all__ = ["QK_NORMS", "ModelConfig", "MODELS", "WAN22_COMMIT", "WAN22_REPO", "VAEConfig", "WAN21_VAE"]
