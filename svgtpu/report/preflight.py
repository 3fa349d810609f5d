"""Before renting a TPU: compile, for v6e on this CPU, what a profile's notebooks and multi-host
sampling will run, at the profile's shapes (``svgtpu reproduce --profile tpu --preflight``).

The checks come from :data:`svgtpu.report.reproduce.PROFILES` (one definition of the sizes):

- one chip (``v6e:2x2x1``, chip 0): the kernel of notebook 03's error study (unaligned and snapped
  masks), the kernel of notebook 04 with the fast path on and off and the whole SVG layer there,
  and the toy DiT step with SVG attention, unaligned and aligned (notebooks 05-07 sample it);
- several hosts (``v6e:4x4x1``, 16 chips on 4 hosts): the sharded SVG layer with Wan 2.1 14B's 40
  heads at notebook 04's geometry (CFG x Ulysses), and the shipped toy DiT's step as
  ``svgtpu generate --distributed --devices 6`` runs it;
- the slices of notebook 05: one Wan 2.1 block per resolution and device of the profile, dense and SVG,
  as :mod:`svgtpu.compiler.wan_block` compiles it (cached in ``build/``, so the notebook reuses the compiles).

Profile ``tpu-bench`` (``svgtpu bench tpu --preflight``) is instead every program of the prepared TPU run,
:func:`svgtpu.bench.tpu.all_programs`, each compiled for the slice it runs on (:data:`svgtpu.bench.tpu.SLICES`).
That preflight leaves a dated record, ``figures/preflight/<date>-<commit>.json`` (:func:`bench_preflight`, never
overwritten; what it holds and how it is read: :mod:`svgtpu.report.preflight_record`).

A failure prints the compiler's own line (VMEM, SMEM, lowering) next to the check.  What this cannot
see: run-time errors, speed, and anything outside these programs (the host loop, file output).
Provenance ``compiled-v6e``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.compiler.compile import CompileJob, compile_targets, require_libtpu
from svgtpu.compiler.multihost import MultihostJob, compile_multihost
from svgtpu.compiler.wan_block import VARIANTS, BlockJob, SLICES, cached_compile_block
from svgtpu.kernels.config import KernelConfig
from svgtpu.models import MODELS
from svgtpu.setting import PRODUCTION, Setting, model_label
from svgtpu.report.preflight_record import (check_record_out, default_record_path, host, host_checks, slice_name,
                                            sources_key)
from svgtpu.report.reproduce import settings

ONE_HOST, MULTI_HOST = "v6e:2x2x1", "v6e:4x4x1"


@dataclasses.dataclass(frozen=True)
class Check:
    """One program to compile: which notebook runs it, what it is, and the job."""

    notebook: str
    what: str
    job: "CompileJob | BlockJob | Program | None"   # None: the profile's sizes are refused before compiling (``error``)
    target: str
    dit_config: str | None = None
    error: str | None = None

    @property
    def hosts(self) -> str:
        if self.target == "tpu-bench":
            return "several" if self.job.chips > 1 else "one"
        return "several" if self.target.startswith("sharded") or self.target == "wan-block" else "one"


#: The profile of the prepared TPU run's programs (:mod:`svgtpu.bench.tpu`).
TPU_BENCH = "tpu-bench"


def tpu_bench_checks() -> list[Check]:
    """Every program of ``svgtpu bench tpu`` (:func:`svgtpu.bench.tpu.all_programs`) as a compile check."""
    from svgtpu.bench.tpu import FULL, all_programs
    return [Check("bench tpu", p.name, p, "tpu-bench") for p in all_programs(FULL)]


def compile_bench_program(p) -> dict:
    """Compile one :class:`svgtpu.bench.tpu.Program` for v6e on the topology of its slice (in this process)."""
    from jax.experimental import topologies

    from svgtpu.bench.tpu import SLICES, program
    from svgtpu.compiler.compile import compile_program
    from svgtpu.kernels.common import compiling_for
    devices = topologies.get_topology_desc(platform="tpu", topology_name=SLICES[p.chips]).devices[:p.chips]
    start = time.perf_counter()
    try:
        fn, args = program(p, devices)
    except BadInput as e:
        return {"compiled": False, "reason": str(e), "compile_s": 0.0, "build_s": time.perf_counter() - start}
    build_s = time.perf_counter() - start   # the program built: masks, Splash's mask info (the run builds it too)
    with compiling_for("v6e"):
        return compile_program(fn, args)[1] | {"build_s": build_s}


def checks(profile: str, dit: bool = True) -> list[Check]:
    """The programs ``profile`` will run, as compile checks (``dit=False`` leaves out the DiT steps,
    the slow ones to compile)."""
    if profile == TPU_BENCH:
        return tpu_bench_checks()
    out = []
    err = settings("03_mask_alignment", profile)
    if "error_geometry" in err:
        for align in (None, "snap"):
            what = f"kernel, SVG mask {'snapped' if align else 'unaligned'}"
            try:
                job = CompileJob(geometry=err["error_geometry"], device="v6e", topology=ONE_HOST,
                                 config=KernelConfig(err["error_block"], err["error_block"]),
                                 heads=err["error_heads"], head_dim=err["error_head_dim"], align=align)
            except BadInput as e:  # tiles the TPU kernel refuses (the quick profile's CPU-only 64)
                out.append(Check("03_mask_alignment", what, None, "kernel", error=str(e)))
                continue
            out.append(Check("03_mask_alignment", what, job, "kernel"))
    fast = settings("04_fast_path_ablation", profile)
    geometry = fast.get("geometry", "720p")
    tiles = (fast.get("block_q", PRODUCTION.block_q), fast.get("block_kv", PRODUCTION.block_kv))
    for fast_path in (True, False):
        out.append(Check("04_fast_path_ablation", f"kernel, fast path {'on' if fast_path else 'off'}",
                         CompileJob(geometry=geometry, device="v6e", topology=ONE_HOST,
                                    config=KernelConfig(*tiles, fast_path=fast_path), heads=fast.get("heads", 1),
                                    head_dim=fast.get("head_dim", 128)), "kernel"))
    out.append(Check("04_fast_path_ablation", "SVG layer (profiling, layout, kernel)",
                     CompileJob(geometry=geometry, device="v6e", topology=ONE_HOST, config=KernelConfig(*tiles),
                                heads=fast.get("heads", 1), head_dim=fast.get("head_dim", 128)), "svg-layer"))
    out.append(Check("multi-host", f"sharded SVG layer, {model_label(PRODUCTION.model)} {PRODUCTION.heads} heads, CFG x Ulysses",
                     CompileJob(geometry=geometry, device="v6e", topology=MULTI_HOST, config=KernelConfig(*tiles),
                                heads=PRODUCTION.heads, head_dim=MODELS[PRODUCTION.model].head_dim), "sharded-svg-layer"))
    if dit:
        for align in (None, "snap"):
            out.append(Check("05-07 (toy DiT)", f"DiT step, SVG {'aligned' if align else 'unaligned'}",
                             CompileJob(device="v6e", topology=ONE_HOST, align=align, dtype="float32",
                                        head_dim=64), "dit-step"))
        out.append(Check("multi-host", "toy DiT step as generate --distributed --devices 6 runs it",
                         CompileJob(device="v6e", topology=MULTI_HOST, dtype="float32", head_dim=64),
                         "sharded-dit-step", dit_config="toy"))
        out += wan_block_checks(profile)
    return out


def wan_block_checks(profile: str) -> list[Check]:
    """Notebook 05's compiled blocks under ``profile`` (per resolution and device: the variants it names,
    else dense and SVG)."""
    from svgtpu.models import ModelConfig
    blocks = settings("05_quadratic_scaling", profile)
    shapes = None if isinstance(blocks["block_model"], str) else ModelConfig(**blocks["block_model"])
    model = shapes.name if shapes else blocks["block_model"]
    bq, bkv = blocks["block_tiles"]
    return [Check("05_quadratic_scaling", f"{variant} block, {res}, {SLICES[device]['topology']}",
                  BlockJob(Setting(model=model, resolution=res, device=device, block_q=bq, block_kv=bkv), variant,
                           kernel=blocks["block_kernel"], shapes=shapes),
                  "wan-block") for res, device, *variants in blocks["blocks"] for variant in variants or VARIANTS]


def preflight(profile: str, dit: bool = True, progress: bool = False) -> dict:
    """Compile every check of ``profile``; rows with the compiler's verdict, and the failures."""
    require_libtpu()
    items = checks(profile, dit)
    if progress:
        from tqdm.auto import tqdm
        items = tqdm(items, desc="preflight", unit="program")
    rows = []
    for c in items:
        if c.job is None:
            rows.append({"notebook": c.notebook, "what": c.what, "target": c.target, "topology": ONE_HOST,
                         "geometry": None, "compiled": False, "compile_s": 0.0, "reason": c.error})
            continue
        if c.target == "tpu-bench":
            from svgtpu.bench.tpu import SLICES
            row = compile_bench_program(c.job)
            rows.append({"notebook": c.notebook, "what": c.what, "target": c.target, "topology": SLICES[c.job.chips],
                         "chips": c.job.chips, "geometry": c.job.geometry, "compiled": row["compiled"],
                         "compile_s": row["compile_s"], "build_s": row.get("build_s", 0.0),
                         "reason": row.get("reason")})
            continue
        if c.target == "wan-block":
            result = cached_compile_block(c.job)
            rows.append({"notebook": c.notebook, "what": c.what, "target": c.target,
                         "topology": SLICES[c.job.setting.device]["topology"], "geometry": c.job.setting.resolution,
                         "compiled": "refused" not in result, "compile_s": result.get("compile_s", 0.0),
                         "reason": result.get("refused")})
            continue
        if c.hosts == "one":
            result = compile_targets(c.job, (c.target,))
            row = result["targets"][0]
        else:
            result = compile_multihost(MultihostJob(c.job, topology=c.job.topology, dit_config=c.dit_config),
                                       (c.target,))
            row = result["targets"][0]
        rows.append({"notebook": c.notebook, "what": c.what, "target": c.target, "topology": c.job.topology,
                     "geometry": row.get("geometry", c.job.geometry), "compiled": row["compiled"],
                     "compile_s": row["compile_s"], "reason": row.get("reason")})
    failed = [r for r in rows if not r["compiled"]]
    return {"profile": profile, "provenance": "compiled-v6e", "checks": rows, "failed": len(failed),
            "passed": not failed}


def format_preflight(result: dict) -> str:
    """:func:`preflight` as one row per program and the verdict."""
    from svgtpu.facts.tables import format_table
    table = format_table(result["checks"], ["notebook", "what", "topology", "geometry", "compiled", "compile_s",
                                            "reason"])
    return table + (f"\n\npreflight of profile {result['profile']} ({result['provenance']}): "
                    + ("every program compiles" if result["passed"] else f"{result['failed']} would fail"))


# -- the record of the TPU run's preflight (:mod:`svgtpu.report.preflight_record`) -----------------------

def bench_record(result: dict, started: dict, wall_s: float) -> dict:
    """The record of a ``tpu-bench`` :func:`preflight` (``result``): provenance, commit, date, versions, the host
    (``started``: :func:`host` and the date, taken before the first compile), the sources' key, one row per
    program, per-slice totals (the programs a run on that slice runs), the verdict and the wall seconds."""
    from svgtpu.bench.tpu import FULL, SLICES, commit, programs
    from svgtpu.compiler.dumps import versions
    rows = [{"name": r["what"], "chips": r["chips"], "topology": r["topology"], "geometry": r["geometry"],
             "compiled": r["compiled"], "compile_s": r["compile_s"], "build_s": r.get("build_s", 0.0),
             "reason": r["reason"]} for r in result["checks"]]
    by_program = {(r["name"], r["chips"]): r for r in rows}
    slices = {}
    for chips in SLICES:
        ran = [by_program[p.name, p.chips] for p in programs(FULL, chips)]
        slices[slice_name(chips)] = {"chips": chips, "topology": SLICES[chips], "programs": len(ran),
                                     "compiled": sum(bool(r["compiled"]) for r in ran),
                                     "compile_s": sum(r["compile_s"] for r in ran),
                                     "build_s": sum(r["build_s"] for r in ran)}
    return {"kind": "preflight of svgtpu bench tpu", "provenance": result["provenance"], "commit": commit(),
            "date": started["date"], **versions(), "host": started["host"], "sources": sources_key(),
            "programs": rows, "slices": slices, "host_check": started.get("host_check", {}),
            "failed": result["failed"], "passed": result["passed"], "wall_s": wall_s}


def bench_preflight(out: str | Path | None = None, progress: bool = False) -> dict:
    """``svgtpu bench tpu --preflight``: :func:`preflight` of the TPU run's programs, its record written to ``out``
    (default :func:`default_record_path`; an existing file refused before any compile).  The preflight's result
    with ``record`` and ``written``."""
    path = check_record_out(out) if out is not None else check_record_out(default_record_path(), named=False)
    require_libtpu()
    started = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": host()}
    start = time.monotonic()
    started["host_check"] = host_checks()   # a few seconds: what the run's float64 checks cost on a host
    result = preflight(TPU_BENCH, progress=progress)
    record = bench_record(result, started, time.monotonic() - start)
    from svgtpu.facts.outputs import write_text
    check_record_out(path, named=False)   # still new: a record is never overwritten, even by a parallel preflight
    write_text(path, json.dumps(record, indent=1) + "\n")
    return result | {"record": record, "written": str(path)}


__all__ = ["ONE_HOST", "MULTI_HOST", "TPU_BENCH", "Check", "checks", "tpu_bench_checks", "compile_bench_program", "wan_block_checks", "preflight",
           "format_preflight", "bench_record", "bench_preflight"]
