"""Every constant the cost model fits, with its value, the bounds written before the fit
(:mod:`~svgtpu.costmodel.plausible`, docs/plausibility.md) and the published rows it reads: what
``tests/test_plausible.py`` holds to those bounds, and to reading no validation row."""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.compiled import AUTO, resolve
from svgtpu.costmodel.gpu_rates import CALIBRATION_RESOLUTION, hopper_rates
from svgtpu.costmodel.plausible import STRETCH, matmul_bounds
from svgtpu.costmodel.validate import calibration_point, family_efficiency, family_stretch, published_points


@dataclasses.dataclass(frozen=True)
class Fitted:
    """One fitted constant: its value, the bounds written before it was fitted, and what it reads."""

    name: str
    value: float | None
    bounds: tuple[float, float] | None   # None: no bound written (a measured rate)
    reads: tuple[str, ...]               # published point ids, or a committed run's rows
    how: str

    @property
    def inside(self) -> bool:
        return self.bounds is None or (self.value is not None and self.bounds[0] <= self.value <= self.bounds[1])


def fitted_constants(compiled=None) -> list[Fitted]:
    """Every constant the cost model fits, with the rows it reads (``compiled``: the tile table, default the
    committed one)."""
    compiled = resolve(AUTO if compiled is None else compiled)
    out = []
    tpu = family_efficiency("tpu", compiled)
    point = calibration_point("tpu")
    out.append(Fitted("tpu matmul efficiency", tpu["fitted"], matmul_bounds(), (point.id,) if point else (),
                      "Efficiency.matmul solved so the model meets the calibration point's seconds"))
    stretch = family_stretch("tpu", compiled)
    svg = calibration_point("tpu", "svg")
    if stretch["calibrated_on"] is not None:   # its speedup reads the dense control: the published dense row
        control = [p.id for p in published_points() if p.maxdiffusion_svg and p.variant == "dense"
                   and p.seconds == svg.dense_control_s]
        out.append(Fitted("tpu sparse stretch", stretch["stretch"], STRETCH, (svg.id, *control),
                          "solved so the modeled speedup over the same-node dense control meets the published one"))
    rates = hopper_rates()
    if rates is not None:
        rows = f"{rates.run}: {CALIBRATION_RESOLUTION} dense blocks"
        for kernel, rate, source in rates.rates:
            if source.startswith("fitted"):
                out.append(Fitted(f"hopper {kernel} attention rate", rate, None, (rows,), source))
        hopper = family_efficiency("hopper", compiled)
        out.append(Fitted("hopper matmul efficiency (non-attention ops)", hopper["fitted"], (0.0, 1.0), (rows,),
                          "solved so the 720p dense-cuDNN block minus its self-attention is met"))
    return out


__all__ = ["Fitted", "fitted_constants"]
