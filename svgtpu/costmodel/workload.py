"""What is being generated: the transformer's shape (:class:`ModelConfig`) and the video's token grid.

Model configs are defined once, JAX-free, in :mod:`svgtpu.model.config` (Wan's published numbers, cited
there); resolutions are the Wan presets of :mod:`svgtpu.geometry` plus a 3840x2160 grid for the C5 sweep.
"""

from __future__ import annotations

from svgtpu.geometry import PRESETS, VideoGeometry, get_geometry
from svgtpu.model.config import MODELS, ModelConfig

MODEL_NAMES = (*MODELS, "toy")


def get_model(name: "str | ModelConfig") -> ModelConfig:
    """A model config by name: ``wan2.1-14b``, ``wan2.1-1.3b``, ``wan2.2-a14b``, ``wan2.2-5b`` or ``toy``."""
    if isinstance(name, ModelConfig):
        return name
    if name == "toy":
        from svgtpu.toy.dit import DiTConfig
        return ModelConfig.from_dit(DiTConfig())
    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODEL_NAMES)}, got {name!r}")
    return MODELS[name]


#: Resolutions of the sweep: the Wan presets plus a 4K-ish 3840x2160 geometry (81 frames).
RESOLUTIONS: dict[str, VideoGeometry] = {
    **{name.removeprefix("wan-"): g for name, g in PRESETS.items()},
    "2160p": VideoGeometry.from_pixels(3840, 2160, 81, "wan-2160p"),
}


def get_resolution(spec: "str | VideoGeometry") -> VideoGeometry:
    """``480p`` ... ``2160p``, a preset name (``wan-720p``) or a token grid ``TxHxW``."""
    if isinstance(spec, VideoGeometry):
        return spec
    if spec in RESOLUTIONS:
        return RESOLUTIONS[spec]
    try:
        return get_geometry(spec)
    except ValueError:
        raise ValueError(f"resolution must be one of {', '.join(RESOLUTIONS)}, a preset "
                         f"({', '.join(PRESETS)}) or a token grid TxHxW, got {spec!r}") from None


__all__ = ["ModelConfig", "MODELS", "MODEL_NAMES", "get_model", "RESOLUTIONS", "get_resolution"]
