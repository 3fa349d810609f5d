"""Every constant the cost model fits, with its value, the bounds written before the fit
(:mod:`~svgtpu.costmodel.plausible`, docs/plausibility.md) and the published rows it reads: what
``tests/test_plausible.py`` holds to those bounds, and to reading no validation row."""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.compiled import AUTO, resolve
from svgtpu.costmodel.compiled_block import block_record
from svgtpu.costmodel.gpu_rates import CALIBRATION_RESOLUTION, hopper_rates
from svgtpu.costmodel.plausible import HOST_SECONDS_PER_STEP, MATMUL_FLOOR, STRETCH, matmul_bounds, matmul_mxu_share
from svgtpu.costmodel.policy import get_policy
from svgtpu.costmodel.sparse_layers import AttentionLayout, run_seconds, run_setup
from svgtpu.costmodel.validate import (DENSE_CONTROL, calibration_point, family_efficiency, family_stretch,
                                       point_setup, published_points, solve, with_compute)
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
#: The compiled block's ops the run prices with terms of its own, left out of the non-attention ops it sets beside
#: the fit (:func:`priced_elsewhere`): the attention kernel (the calls at their compiled schedule and realized over
#: static time), the collectives (the all-gathers of the weights and the calls' Ulysses all-to-alls, priced at the
#: slice's ICI: their static cycles are only the issue of transfers those terms already time) and, in a record whose
#: kernel was compiled on its own, the stand-in the block was compiled with in the kernel's place
#: (``q + 0 * (k + v)``, set by ``svgtpu/compiler/wan_block.py``'s compile child: scope ``self_attention/add``), which no
#: run executes.  The rest of the self-attention role, the layout copies around the kernel (the heads' transposes
#: and reshapes for the all-to-alls), no attention term prices: they stay with the non-attention ops.
PRICED_ELSEWHERE = ("attention kernel", "collectives", "own-compile stand-in")
#: The scope of the own-compile stand-in's ops in a compiled block.
STAND_IN_SCOPE = "self_attention/add"


def priced_elsewhere(op: dict, record: dict) -> str | None:
    """Which of :data:`PRICED_ELSEWHERE` prices ``op`` of the compiled block ``record`` (a :func:`block_record`), or
    ``None``: an op of the run's non-attention work."""
    if op["role"] == "collectives":
        return PRICED_ELSEWHERE[1]
    if op["role"] == "self-attention" and op["opcode"] == "custom-call":
        return PRICED_ELSEWHERE[0]
    if (op["role"] == "self-attention" and record["job"]["kernel"] == "own-compile"
            and op["scope"].endswith(STAND_IN_SCOPE)):
        return PRICED_ELSEWHERE[2]
    return None


def other_ops_cycles(record: dict) -> dict[str, int]:
    """Static cycles per role of the compiled block ``record``'s ops that no term of the run prices apart
    (:func:`priced_elsewhere`), its top-level program's own bundles as ``other`` (as the record's roles count them):
    the ops whose static seconds stand beside the fit's non-attention seconds."""
    out: dict[str, int] = {}
    for op in record["ops"]:
        if priced_elsewhere(op, record) is None:
            out[op["role"]] = out.get(op["role"], 0) + op["cycles"]
    out["other"] = out.get("other", 0) + record["top_level"]["cycles"]
    return out


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
    """What the TPU's fitted matmul efficiency absorbs: the calibration run's published seconds less every term
    priced from a named instrument (its attention calls at their compiled schedule, the collectives and weight
    gather at the slice's ICI, the host), the seconds left to the non-attention ops (the fit's), and beside them
    the static schedule of the same ops in the compiled :data:`ACCOUNTING_BLOCK` (:func:`other_ops_cycles`) with the realized-over-static ratio those seconds need: the one factor a model pricing
    those ops from the compiled block would fit on this run, held to the floor written before any fit
    (:data:`~svgtpu.costmodel.plausible.MATMUL_FLOOR`, ``inside_floor``; and the same reading with the host term at
    each end of its cited range, ``realized_over_static_at_host_s_per_step``), and how the block's collectives were
    scheduled (:func:`collective_schedule`: the instrument for pricing the weight gathers serially).  ``None``
    without the compiled table or the calibration point."""
    compiled = resolve(AUTO if compiled is None else compiled)
    point = calibration_point("tpu")
    if compiled is None or point is None:
        return None
    fit = family_efficiency("tpu", compiled)
    layout = AttentionLayout(dense_kernel=DENSE_CONTROL)
    setup = run_setup(point_setup(point, fit["efficiency"], compiled), layout)
    terms = run_seconds(setup, layout, get_policy(point.policy)[0])["terms"]
    priced = {"weight_gather": terms["weight_gather"], "host": terms["host"], "outside_blocks": terms["outside_blocks"],
              "dense_calls": terms["dense_calls"],
              **{f"sparse_{k}": v for k, v in terms["sparse"].items()}}
    block = block_record(*ACCOUNTING_BLOCK)
    ours, theirs = get_model(ACCOUNTING_BLOCK[0]), setup.model
    if (ours.dim, ours.ffn, ours.heads, ours.layers) != (theirs.dim, theirs.ffn, theirs.heads, theirs.layers):
        raise BadInput(f"the accounting block {ACCOUNTING_BLOCK[0]} has not the layer shape of {point.model}")
    clock = setup.device.clock_hz
    layers = setup.model.layers * setup.steps * ceil_div(setup.passes, layout.data)   # layer runs per data group
    static = {role: cycles / clock * layers for role, cycles in other_ops_cycles(block).items()}
    left = point.seconds - sum(priced.values())
    # the host term is an assumption inside its cited range: the reading at each end, the other terms as priced
    at_host = {h: sum(static.values()) / (left + priced["host"] - h * setup.steps) for h in HOST_SECONDS_PER_STEP}
    # the roofline's reading of the same shortfall: the matmul efficiency at which it prices the run's non-attention
    # ops at the block's static seconds (its elementwise ops at HBM time whatever the efficiency)
    def other(e):
        at = run_setup(point_setup(point, with_compute(fit["efficiency"], e, tied=False), compiled), layout)
        return run_seconds(at, layout, None)["terms"]["other"]
    at_static = solve(other, sum(static.values()), 0.01, 1.0, iterations=24)
    return {"calibrated_on": point.id, "published_s": point.seconds, "fitted_matmul_efficiency": fit["fitted"],
            "priced_s": priced, "left_for_other_ops_s": left, "other_ops_modeled_s": terms["other"],
            "compiled_block": block["record"], "compiled_other_ops_static_s": static,
            "compiled_ops_priced_elsewhere": {
                why: sum(op["cycles"] for op in block["ops"] if priced_elsewhere(op, block) == why) / clock * layers
                for why in PRICED_ELSEWHERE},
            "realized_over_static_needed": sum(static.values()) / left, "floor": MATMUL_FLOOR,
            "collective_schedule": collective_schedule(block),
            "inside_floor": sum(static.values()) / left >= MATMUL_FLOOR,
            "realized_over_static_at_host_s_per_step": at_host,
            "matmul_efficiency_at_static": at_static,
            "compiled_matmul_mxu_share": matmul_mxu_share(block["ops"], setup.device.core_flops_per_cycle),
            "provenance": f"modeled-v6e; the block {block['provenance']}"}


__all__ = ["ACCOUNTING_BLOCK", "PRICED_ELSEWHERE", "STAND_IN_SCOPE", "Fitted", "collective_schedule", "fitted_constants",
           "other_ops_cycles", "priced_elsewhere", "tpu_fit_accounting"]
