"""What the cost model's fitted constants may plausibly be, written before any fit (docs/plausibility.md), and
every fitted constant with the published rows it reads.

A fit that lands outside its bound does not fail loudly in the model (the model still answers); the test
``tests/test_plausible.py`` fails instead, so a fit that absorbs unpriced seconds is caught where it is made:

- the TPU matmul efficiency (:func:`~svgtpu.costmodel.validate.family_efficiency`) between
  :data:`MATMUL_FLOOR` x the compiled Wan block's matmul MXU share (:func:`compiled_matmul_mxu_share`: the
  share the real compiler scheduled for the block's matmul fusions; what the hardware reaches can fall short of a
  static schedule by stalls, not by more than a seventh of it) and 1;
- the sparse stretch (:func:`~svgtpu.costmodel.validate.family_stretch`) in :data:`STRETCH` (sparse tiles at most
  5 % faster than their own compiled schedule relative to dense ones, at most half again slower);
- the host time per denoising step in :data:`HOST_SECONDS_PER_STEP`.

JAX-free: the compiled block is read from its committed record (``figures/compiled/wan-block/``).
"""

from __future__ import annotations

import dataclasses
import gzip
import json

from svgtpu.costmodel.specs import get_device
from svgtpu.errors import BadInput
from svgtpu.facts.paths import COMPILED_RECORDS

#: The fitted TPU matmul efficiency is at least this share of the compiled block's matmul MXU share.
MATMUL_FLOOR = 0.85
#: The sparse stretch's plausible range (realized over static time of sparse tiles relative to dense ones).
STRETCH = (0.95, 1.5)
#: Host seconds per denoising step: 0, JAX's asynchronous dispatch hides the host's work behind the device's
#: (https://docs.jax.dev/en/latest/async_dispatch.html) and MaxDiffusion's Wan 2.2 loop waits on nothing inside
#: it (``src/maxdiffusion/pipelines/wan/wan_pipeline_2_2.py`` at 7cfb8801, ``run_inference_2_2``: one jitted
#: transformer pass and one scheduler step per step, ``block_until_ready`` once after the loop); 0.1 s, the
#: sensitivity's upper end (an assumption: Python loop, scheduler and dispatch of a step left unhidden).
HOST_SECONDS_PER_STEP = (0.0, 0.1)
#: The compiled block whose matmul fusions set the floor: the production setting's (Wan 2.1 14B at 1440p on v6e-8,
#: the dense variant), as notebook 05 records it (``compiled_matmul_mxu_share``).
BLOCK = ("wan2.1-14b", "1440p", "v6e", "dense")
#: The roles of a compiled block's matmul fusions (:mod:`svgtpu.compiler.fusions`).
MATMUL_ROLES = ("projections", "ffn", "cross-attention")


def matmul_mxu_share(ops: list[dict], flops_per_cycle: float) -> float:
    """The matmul fusions of a compiled block (``ops`` with ``flops``, ``cycles`` and ``role``): their FLOPs over
    their static cycles at the MXU peak of ``flops_per_cycle``."""
    matmuls = [op for op in ops if op["flops"] and op["role"] in MATMUL_ROLES]
    if not matmuls:
        raise BadInput("a compiled block without matmul fusions has no matmul MXU share")
    return sum(op["flops"] for op in matmuls) / (sum(op["cycles"] for op in matmuls) * flops_per_cycle)


def block_record(model: str = BLOCK[0], resolution: str = BLOCK[1], device: str = BLOCK[2],
                 variant: str = BLOCK[3]) -> dict:
    """The committed compiled record of one Wan block (:mod:`svgtpu.compiler.wan_block`), its value."""
    folder = COMPILED_RECORDS / "wan-block"
    found = sorted(folder.glob(f"{model}-{resolution}-{device}-{variant}-*.json.gz"))
    if len(found) != 1:
        raise BadInput(f"need exactly one compiled {model} {resolution} {device} {variant} block record in {folder}, "
                       f"found {len(found)} (`make figures` writes it and prunes stale ones)")
    return json.loads(gzip.decompress(found[0].read_bytes()))["value"] | {"record": found[0].name}


def compiled_matmul_mxu_share() -> dict:
    """:func:`matmul_mxu_share` of the :data:`BLOCK` record, with the record it comes from (``compiled-v6e``)."""
    block = block_record()
    return {"value": matmul_mxu_share(block["ops"], get_device(BLOCK[2]).core_flops_per_cycle), "record": block["record"],
            "provenance": block["provenance"]}


def matmul_bounds() -> tuple[float, float]:
    """``(MATMUL_FLOOR x compiled share, 1)``: where a fitted TPU matmul efficiency may lie."""
    return MATMUL_FLOOR * compiled_matmul_mxu_share()["value"], 1.0


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
    from svgtpu.costmodel.compiled import AUTO, resolve
    from svgtpu.costmodel.gpu_rates import CALIBRATION_RESOLUTION, hopper_rates
    from svgtpu.costmodel.validate import calibration_point, family_efficiency, family_stretch, published_points
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


__all__ = ["MATMUL_FLOOR", "STRETCH", "HOST_SECONDS_PER_STEP", "BLOCK", "MATMUL_ROLES", "matmul_mxu_share",
           "block_record", "compiled_matmul_mxu_share", "matmul_bounds", "Fitted", "fitted_constants"]
