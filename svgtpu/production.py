"""The production setup: the one setting the write-up's headline claims are about, as we assume it.

The write-up names neither its model nor its mask (docs/design.md, "The claims").  Our assumption:
Wan 2.1 T2V 14B at 1440p on a v6e-8 slice with MaxDiffusion's Wan tiles and SVG's own current Wan
2.1 recipe (:data:`svgtpu.recipes.DEFAULT_RECIPE`).  It is defined here once; the command line's
defaults, the notebooks' parameters, the benchmarks and the paper's row labels read
:data:`PRODUCTION`, so a label such as "Wan 2.1 14B 1440p, v6e-8" is generated, never typed.  No JAX
here: the cost model imports this.
"""

from __future__ import annotations

import dataclasses

from svgtpu.geometry import format_tile
from svgtpu.model.config import MODELS
from svgtpu.recipes import BLOCK_KV, BLOCK_Q, DEFAULT_RECIPE


def model_label(model: str) -> str:
    """``wan2.1-14b`` -> ``Wan 2.1 14B`` (``wan2.2-a14b`` -> ``Wan 2.2 A14B``); other names unchanged."""
    family, _, size = model.partition("-")
    if not family.startswith("wan") or not size:
        return model
    return f"Wan {family[3:]} {size.upper()}"


@dataclasses.dataclass(frozen=True)
class ProductionSetup:
    """Model, resolution, device and chip count, steps and guidance, tiles and recipe of the claims' main line."""

    model: str = "wan2.1-14b"        # a :data:`svgtpu.costmodel.MODELS` name
    resolution: str = "1440p"        # a :data:`svgtpu.geometry.PRESETS` name
    device: str = "v6e"              # a :data:`svgtpu.costmodel.DEVICES` name
    chips: int = 8                   # chips of the slice (v6e: one TensorCore each)
    block_q: int = BLOCK_Q           # MaxDiffusion's Wan tiles on v6e (cited in svgtpu.recipes)
    block_kv: int = BLOCK_KV
    recipe: str = DEFAULT_RECIPE.name
    steps: int = DEFAULT_RECIPE.steps   # denoising steps: the recipe's (SVG's Wan 2.1 script, cited there)
    cfg: bool = True                 # classifier-free guidance: two transformer passes per step, as Wan samples

    @property
    def heads(self) -> int:
        """Attention heads of the model (Wan 2.1 14B: 40, cited in :mod:`svgtpu.model.config`)."""
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
    def tiles(self) -> str:
        """``3024x2048`` (:func:`svgtpu.geometry.parse_tiles` reads it back: ``--tiles`` takes it)."""
        return format_tile(self.block_q, self.block_kv)

    def label(self, resolution: str | None = None) -> str:
        """``Wan 2.1 14B 1440p, v6e-8`` (at another ``resolution`` if given)."""
        return f"{model_label(self.model)} {resolution or self.resolution}, {self.slice}"


#: The setup of the claims' main line (C1, C2 and C4's compiled rows).
PRODUCTION = ProductionSetup()

__all__ = ["PRODUCTION", "ProductionSetup", "model_label"]
