"""What is being generated: the transformer's shape (:class:`ModelConfig`).

Model configs are the public ``config.json`` of each checkpoint; the video's token grid is a preset
of :mod:`svgtpu.geometry` (``480p`` ... ``2160p``) or any ``TxHxW``.
"""

from __future__ import annotations

import dataclasses

from svgtpu.geometry import check_positive_int
from svgtpu.errors import BadInput


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The transformer shape a cost depends on (one Wan-style DiT block repeated ``layers`` times)."""

    name: str
    layers: int
    dim: int
    heads: int
    head_dim: int
    ffn: int
    text_len: int       # cross-attention context tokens
    patch_in: int       # values per token entering the patch embedding (and leaving the head)
    source: str

    def __post_init__(self):
        for field in ("layers", "dim", "heads", "head_dim", "ffn", "text_len", "patch_in"):
            check_positive_int(f"ModelConfig.{field}", getattr(self, field))
        if self.heads * self.head_dim != self.dim:
            raise ValueError(f"ModelConfig: heads * head_dim = {self.heads * self.head_dim} != dim {self.dim}")

    @property
    def params(self) -> int:
        """Weights of the matmuls (what must sit in memory): per block Q/K/V/O of self- and
        cross-attention (8 D^2) and the MLP (2 D F), plus patch embedding and head."""
        D = self.dim
        return self.layers * (8 * D * D + 2 * D * self.ffn) + 2 * self.patch_in * D

    @classmethod
    def from_dit(cls, config) -> "ModelConfig":
        """The toy DiT (:class:`svgtpu.toy.dit.DiTConfig`) as a cost-model config."""
        return cls("toy", config.depth, config.dim, config.heads, config.head_dim,
                   config.dim * config.mlp_ratio, config.context_tokens, config.patch_dim,
                   source="svgtpu.toy.dit.DiTConfig")


# Wan 2.1 public config (Wan-AI/Wan2.1-T2V-14B and -1.3B config.json; Wan 2.1 technical report):
# in_dim 16 latent channels x patch (1, 2, 2) = 64 values per token, text_len 512 (umT5 tokens).
# Wan 2.2 A14B (Wan-AI/Wan2.2-T2V-A14B config.json): two experts (high noise, low noise) each of Wan 2.1
# 14B's shape; a step runs one of them, so a step costs one 14B pass.  Its VAE is Wan 2.1's.
# Wan 2.2 TI2V-5B (Wan-AI/Wan2.2-TI2V-5B config.json): dim 3072, ffn 14336, 24 heads, 30 layers,
# in_dim 48 x patch (1, 2, 2) = 192; its VAE compresses 16x16 spatially, 4x in time.
MODELS: dict[str, ModelConfig] = {
    "wan2.1-14b": ModelConfig("wan2.1-14b", layers=40, dim=5120, heads=40, head_dim=128, ffn=13824,
                              text_len=512, patch_in=64, source="Wan2.1-T2V-14B config.json"),
    "wan2.1-1.3b": ModelConfig("wan2.1-1.3b", layers=30, dim=1536, heads=12, head_dim=128, ffn=8960,
                               text_len=512, patch_in=64, source="Wan2.1-T2V-1.3B config.json"),
    "wan2.2-a14b": ModelConfig("wan2.2-a14b", layers=40, dim=5120, heads=40, head_dim=128, ffn=13824,
                               text_len=512, patch_in=64, source="Wan2.2-T2V-A14B config.json (per expert)"),
    "wan2.2-5b": ModelConfig("wan2.2-5b", layers=30, dim=3072, heads=24, head_dim=128, ffn=14336,
                             text_len=512, patch_in=192, source="Wan2.2-TI2V-5B config.json"),
}
MODEL_NAMES = (*MODELS, "toy")


def get_model(name: "str | ModelConfig") -> ModelConfig:
    """A model config by name: ``wan2.1-14b``, ``wan2.1-1.3b``, ``wan2.2-a14b``, ``wan2.2-5b`` or ``toy``."""
    if isinstance(name, ModelConfig):
        return name
    if name == "toy":
        from svgtpu.toy.dit import DiTConfig
        return ModelConfig.from_dit(DiTConfig())
    if name not in MODELS:
        raise BadInput(f"model must be one of {', '.join(MODEL_NAMES)}, got {name!r}")
    return MODELS[name]


__all__ = ["ModelConfig", "MODELS", "MODEL_NAMES", "get_model"]
