"""Every constant the cost model fits, with its value, the bounds written before the fit
(:mod:`~svgtpu.costmodel.plausible`, docs/plausibility.md) and the published rows it reads: what
``tests/test_plausible.py`` holds to those bounds, and to reading no validation row."""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.compiled import AUTO, resolve
from svgtpu.costmodel.compiled_block import PRICED_ELSEWHERE, block_record, other_ops_cycles, priced_elsewhere
from svgtpu.costmodel.gpu_rates import CALIBRATION_RESOLUTION, hopper_rates
from svgtpu.costmodel.block_pricing import EXTRA_KEYS, layer_shape, realized
from svgtpu.costmodel.plausible import (HOST_SECONDS_PER_STEP, MATMUL_FLOOR, OTHER_REALIZED, STRETCH, matmul_bounds,
                                      matmul_mxu_share)
from svgtpu.costmodel.pipeline import other_ops_seconds
from svgtpu.costmodel.policy import get_policy
from svgtpu.costmodel.roofline import OP_ROLES
from svgtpu.costmodel.sparse_layers import AttentionLayout, run_seconds, run_setup
from svgtpu.costmodel.validate import (DENSE_CONTROL, calibration_point, family_efficiency, family_stretch,
                                       fit_efficiency, point_setup, published_points, solve, with_compute)
from svgtpu.costmodel.workload import get_model
from svgtpu.errors import BadInput
from svgtpu.geometry import ceil_div


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
    reads = (point.id,) if point else ()
    if compiled is not None and tpu["fitted"] is not None:   # the block's factor, carried by the matmul efficiency
        out.append(Fitted("tpu non-attention realized over static", realized(tpu["efficiency"]), OTHER_REALIZED, reads,
                          "solved so the model meets the calibration point's seconds, the per-layer non-attention "
                          "ops at the compiled Wan block's static cycles over it (svgtpu.costmodel.block_pricing)"))
        how = ("derived, not fitted: the realized over static time above x the production block's matmul MXU share "
               "(the roofline's matmul rate where no block prices a setup)")
    else:
        how = "Efficiency.matmul solved so the model meets the calibration point's seconds"
    out.append(Fitted("tpu matmul efficiency", tpu["fitted"], matmul_bounds(), reads, how))
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
        svg_rows = f"{rates.run}: {CALIBRATION_RESOLUTION} SVG block and attention rows"
        for kernel, rate, source in rates.sparse_rates:
            out.append(Fitted(f"hopper {kernel} attention rate on a sparse mask", rate, None, (svg_rows,), source))
        for kernel, work, source in rates.svg_work:
            out.append(Fitted(f"hopper SVG's own work around {kernel} (s per head and token)", work, None, (svg_rows,),
                              source))
        hopper = family_efficiency("hopper", compiled)
        out.append(Fitted("hopper matmul efficiency (non-attention ops)", hopper["fitted"], (0.0, 1.0), (rows,),
                          "solved so the 720p dense-cuDNN block minus its self-attention is met"))
    return out


#: The compiled block whose non-attention ops stand beside the TPU calibration run's (Wan 2.1 14B at 720p on a
#: data 2 x seq 4 v6e-8, dense: a Wan 2.2 A14B expert's layer shape on the run's token grid).
ACCOUNTING_BLOCK = ("wan2.1-14b", "720p", "v6e", "dense")
def collective_schedule(record: dict) -> dict:
    """How the compiler scheduled a compiled block's collectives (``record``: a :func:`block_record`), per kind: its
    ops in the top-level program and how many were issued asynchronously (``-start``, compute free to run until the
    matching ``-done``).  A kind with none asynchronous runs as one synchronous op each: no compute overlaps it, the
    instrument for pricing it serially."""
    kinds: dict[str, dict] = {}
    for op in record["ops"]:
        kind = op["opcode"].removesuffix("-start")
        if kind in record["collectives"]:   # the kinds the compiled HLO moves bytes with
            k = kinds.setdefault(kind, {"ops": 0, "asynchronous": 0})
            k["ops"] += 1
            k["asynchronous"] += op["opcode"].endswith("-start")
    return kinds


def tpu_fit_accounting(compiled=None) -> dict | None:
    """What the TPU's fitted constant absorbs: the calibration run's published seconds less every term priced from a
    named instrument (its attention calls at their compiled schedule and realized over static time, the collectives
    and weight gather at the slice's ICI, the work outside the blocks, the host), less the ops of a pass outside its
    layers (patch embedding and head, at the roofline), the seconds left to the layers' non-attention ops; beside them
    the static schedule of the same ops in the compiled :data:`ACCOUNTING_BLOCK`
    (:func:`~svgtpu.costmodel.compiled_block.other_ops_cycles`) and the realized-over-static ratio those seconds need,
    which is the fitted factor where the block prices the run (:mod:`~svgtpu.costmodel.block_pricing`, no role at its
    HBM floor), held to the floor written before any fit (:data:`~svgtpu.costmodel.plausible.MATMUL_FLOOR`,
    ``inside_floor``; and the same reading with the host term at each end of its cited range,
    ``realized_over_static_at_host_s_per_step``); the roofline form's readings of the same run (``roofline``: the
    matmul efficiency it fits with every op at the roofline, and the one at which it prices the run's non-attention
    ops at the block's static seconds); and how the block's collectives were scheduled (:func:`collective_schedule`:
    the instrument for pricing the weight gathers serially).  ``None`` without the compiled table or the calibration
    point."""
    compiled = resolve(AUTO if compiled is None else compiled)
    point = calibration_point("tpu")
    if compiled is None or point is None:
        return None
    fit = family_efficiency("tpu", compiled)
    layout = AttentionLayout(dense_kernel=DENSE_CONTROL)
    setup = run_setup(point_setup(point, fit["efficiency"], compiled), layout)
    run = run_seconds(setup, layout, get_policy(point.policy)[0])
    terms = run["terms"]
    priced = {"weight_gather": terms["weight_gather"], "host": terms["host"], "outside_blocks": terms["outside_blocks"],
              "dense_calls": terms["dense_calls"],
              **{f"sparse_{k}": v for k, v in terms["sparse"].items()}}
    block = block_record(*ACCOUNTING_BLOCK)
    ours, theirs = get_model(ACCOUNTING_BLOCK[0]), setup.model
    if layer_shape(ours) != layer_shape(theirs) or ours.layers != theirs.layers:
        raise BadInput(f"the accounting block {ACCOUNTING_BLOCK[0]} has not the layer shape of {point.model}")
    clock = setup.device.clock_hz
    passes = setup.steps * ceil_div(setup.passes, layout.data)   # passes per data group
    layers = setup.model.layers * passes                           # layer runs per data group
    static = {role: cycles / clock * layers for role, cycles in other_ops_cycles(block).items()}
    by_op = other_ops_seconds(setup)
    outside_layers = passes * sum(v for k, v in by_op.items() if k not in OP_ROLES and k not in EXTRA_KEYS.values())
    left = point.seconds - sum(priced.values())
    layers_left = left - outside_layers
    # the host term is an assumption inside its cited range: the reading at each end, the other terms as priced
    at_host = {h: sum(static.values()) / (layers_left + priced["host"] - h * setup.steps) for h in HOST_SECONDS_PER_STEP}
    # the roofline form's readings: its fit, and the matmul efficiency at which it prices the run's non-attention ops
    # at the block's static seconds (its elementwise ops at HBM time whatever the efficiency)
    roofline = fit_efficiency("tpu", compiled, change=lambda s: dataclasses.replace(s, other_pricing="roofline"))

    def other(e):
        at = run_setup(point_setup(point, with_compute(fit["efficiency"], e, tied=False), compiled), layout)
        return run_seconds(dataclasses.replace(at, other_pricing="roofline"), layout, None)["terms"]["other"]
    at_static = solve(other, sum(static.values()) + outside_layers, 0.01, 1.0, iterations=24)
    return {"calibrated_on": point.id, "published_s": point.seconds, "fitted_matmul_efficiency": fit["fitted"],
            "fitted_realized_over_static": realized(fit["efficiency"]),
            "priced_s": priced, "left_for_other_ops_s": left, "other_ops_modeled_s": terms["other"],
            "outside_layers_s": outside_layers, "left_for_layers_s": layers_left,
            "compiled_block": block["record"], "compiled_other_ops_static_s": static,
            "compiled_ops_priced_elsewhere": {
                why: sum(op["cycles"] for op in block["ops"] if priced_elsewhere(op, block) == why) / clock * layers
                for why in PRICED_ELSEWHERE},
            "realized_over_static_needed": sum(static.values()) / layers_left, "floor": MATMUL_FLOOR,
            "collective_schedule": collective_schedule(block),
            "inside_floor": sum(static.values()) / layers_left >= MATMUL_FLOOR,
            "realized_over_static_at_host_s_per_step": at_host,
            "roofline": {"fitted_matmul_efficiency": roofline["fitted"], "matmul_efficiency_at_static": at_static},
            "compiled_matmul_mxu_share": matmul_mxu_share(block["ops"], setup.device.core_flops_per_cycle),
            "provenance": f"modeled-v6e; the block {block['provenance']}"}


__all__ = ["ACCOUNTING_BLOCK", "Fitted", "collective_schedule", "fitted_constants", "tpu_fit_accounting"]
