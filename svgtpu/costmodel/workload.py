"""What is being generated: the transformer's shape (:class:`ModelConfig`).

Model configs are defined once, JAX-free, in :mod:`svgtpu.models` (Wan's published numbers, cited
there); the video's token grid is a preset of :mod:`svgtpu.geometry` (``480p`` ... ``2160p``) or any
``TxHxW``.
"""

from __future__ import annotations

from svgtpu.errors import BadInput
from svgtpu.models import MODELS, ModelConfig

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
