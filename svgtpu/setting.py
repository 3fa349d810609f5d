"""The setting: what a run is about, one frozen value resolved once at the edges and passed down.

A :class:`Setting` holds the model, resolution, device and chip count, the tile, the mask's density
(a kept fraction *or* a band multiplier: :func:`mask_density`, the one rule) and the recipe.  The
command line, the explorer, the notebooks and the benchmarks resolve one from their arguments; the
functions below them take what they need as required arguments, so a default is defined here (or
in :mod:`svgtpu.recipes`, where it is cited) and nowhere else.

:data:`PRODUCTION` is the setting the write-up's headline claims are about, as we assume it.  The
write-up names neither its model nor its mask (docs/design.md, "The claims").  Our assumption: Wan
2.1 T2V 14B at 1440p on a v6e-8 slice with MaxDiffusion's Wan tiles and SVG's own current Wan 2.1
recipe (:data:`svgtpu.recipes.DEFAULT_RECIPE`); so a label such as "Wan 2.1 14B 1440p, v6e-8" is
generated, never typed.  No JAX here: the cost model imports this.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, format_tile
from svgtpu.models import MODELS
from svgtpu.recipes import DEFAULT_RECIPE, PRODUCTION_TILE, SPLASH_DEFAULT_TILE

#: The tile of the toy DiT's attention (its SVG and SVG2 layers: ``SVGConfig`` and ``SVG2Config`` take a tile as
#: given, and the toy's callers give this one): one 128-lane square, Splash's default blocks
#: (:data:`svgtpu.recipes.SPLASH_DEFAULT_TILE`, cited there).  A GPU's kernels run their own tile
#: (:data:`svgtpu.costmodel.gpu_rates.GPU_TILE`).
SMALL_TILE = SPLASH_DEFAULT_TILE
#: The SVG kept fraction when neither a kept fraction nor a band multiplier is given (the default recipe's).
DEFAULT_KEPT = DEFAULT_RECIPE.kept


def check_multiplier(multiplier, name: str = "multiplier") -> float:
    """``multiplier``, SVG's band half-width in frames (:func:`svgtpu.masks.core.band_window`), as a float: a
    finite number above 0, else :class:`BadInput` naming ``name``.  The one positive-multiplier check."""
    if isinstance(multiplier, bool) or not isinstance(multiplier, numbers.Real) or not math.isfinite(multiplier) \
            or multiplier <= 0:
        raise BadInput(f"{name} must be a positive number, got {multiplier!r}")
    return float(multiplier)


def mask_density(kept: float | None, multiplier: float | None) -> tuple[float | None, float | None]:
    """``(kept, multiplier)`` of an SVG mask, the one rule: a band multiplier if one is given (positive:
    :func:`check_multiplier`), else the kept fraction, else :data:`DEFAULT_KEPT`; exactly one of the two comes back
    ``None``.  Both given: ``BadInput``.  Every record holding a mask density applies it (``Setting``, ``SVGConfig``,
    the cost model's ``Setup``, the explorer's ``Settings``, the masks' own constructors)."""
    if kept is not None and multiplier is not None:
        raise BadInput(f"give at most one of kept or multiplier, got kept {kept} and multiplier {multiplier}")
    if multiplier is not None:
        check_multiplier(multiplier)
        return None, multiplier
    return (DEFAULT_KEPT if kept is None else kept), None


def model_label(model: str) -> str:
    """``wan2.1-14b`` -> ``Wan 2.1 14B`` (``wan2.2-a14b`` -> ``Wan 2.2 A14B``); other names unchanged."""
    family, _, size = model.partition("-")
    if not family.startswith("wan") or not size:
        return model
    return f"Wan {family[3:]} {size.upper()}"


@dataclasses.dataclass(frozen=True)
class Setting:
    """Model, resolution, device and chip count, steps and guidance, tile, mask density and recipe of a run;
    the defaults are the claims' main line (:data:`PRODUCTION`).  ``kept`` and ``multiplier`` come out of
    :func:`mask_density` (give at most one)."""

    model: str = "wan2.1-14b"        # a :data:`svgtpu.costmodel.MODELS` name
    resolution: str = "1440p"        # a :data:`svgtpu.geometry.PRESETS` name
    device: str = "v6e"              # a :data:`svgtpu.costmodel.DEVICES` name
    chips: int = 8                   # chips of the slice (v6e: one TensorCore each)
    block_q: int = PRODUCTION_TILE.block_q     # MaxDiffusion's Wan tiles on v6e, block_q a lane multiple
    block_kv: int = PRODUCTION_TILE.block_kv   # (svgtpu.recipes.PRODUCTION_TILE)
    block_kv_compute: int = PRODUCTION_TILE.block_kv_compute
    kept: float | None = None        # None and no multiplier: DEFAULT_KEPT (mask_density)
    multiplier: float | None = None
    recipe: str = DEFAULT_RECIPE.name
    steps: int = DEFAULT_RECIPE.steps   # denoising steps: the recipe's (SVG's Wan 2.1 script, cited there)
    cfg: bool = True                 # classifier-free guidance: two transformer passes per step, as Wan samples

    def __post_init__(self):
        kept, multiplier = mask_density(self.kept, self.multiplier)
        object.__setattr__(self, "kept", kept)
        object.__setattr__(self, "multiplier", multiplier)

    @property
    def heads(self) -> int:
        """Attention heads of the model (Wan 2.1 14B: 40, cited in :mod:`svgtpu.models`)."""
        return MODELS[self.model].heads

    @property
    def layers(self) -> int:
        return MODELS[self.model].layers

    def sparse_call(self) -> dict:
        """``step``, ``num_steps``, ``layer``, ``num_layers`` of a call past SVG's dense warm-up (the last step
        and layer): where a compile sees the sparse path."""
        return {"step": self.steps - 1, "num_steps": self.steps, "layer": self.layers - 1, "num_layers": self.layers}

    @property
    def slice(self) -> str:
        """``v6e-8``."""
        return f"{self.device}-{self.chips}"

    @property
    def tile(self) -> Tile:
        """The run's tile as one value, ``Tile(block_q, block_kv)``."""
        return Tile(self.block_q, self.block_kv)

    @property
    def tiles(self) -> str:
        """``block_q x block_kv`` as ``--tiles`` takes it (:func:`svgtpu.geometry.parse_tiles` reads it back)."""
        return format_tile(self.tile)

    def label(self, resolution: str | None = None) -> str:
        """``Wan 2.1 14B 1440p, v6e-8`` (at another ``resolution`` if given)."""
        return f"{model_label(self.model)} {resolution or self.resolution}, {self.slice}"


#: The setup of the claims' main line (C1, C2 and C4's compiled rows).
PRODUCTION = Setting()

__all__ = ["DEFAULT_KEPT", "PRODUCTION", "SMALL_TILE", "Setting", "check_multiplier", "mask_density", "model_label"]
