"""What the real TPU compiler emits for each tile body: LLO instructions and static bundles (C4).

The kernel is compiled ahead of time for v6e (:mod:`svgtpu.bench.compile`) in a child process whose
libtpu dumps its work (``LIBTPU_INIT_ARGS``):

- ``--xla_mosaic_dump_to``: Mosaic's passes; after ``post-finalize-llo`` the kernel body is a list
  of LLO instructions, the ones the chip runs, with one top-level ``scf.if`` per ``pl.when`` of the
  kernel: init, full body, partial body, finish (fast path on) or init, masked body, finish (off).
  We count the instructions inside each body by unit: MXU (``vmatmul``, ``vmatprep``, ``vmatres``),
  EUP (``vexp``, ``vrecip``), XLU (cross-lane reductions), compares and selects (``vcmp``,
  ``vselect``, ``vmand``, ``vmor``: the masking, plus the lane selects a ``head_dim`` below 128
  needs), other VPU arithmetic, and vector loads / stores.
- ``--xla_jf_dump_to`` with ``--xla_jf_dump_llo_text``: the LLO backend's passes down to
  ``final_bundles``, the static VLIW schedule: one line per bundle (one issue cycle), the
  predicated regions marked ``PF`` where each begins.  Bundles between region starts are the
  static cycle count of a tile body, before any stall on memory: the closest thing to a timing
  the compiler gives without a TPU.  The VLIW packer can hide extra VPU work in slots a body
  leaves idle (small tiles wait on the MXU), so more instructions need not mean more bundles.

When ``block_kv > block_kv_compute`` a body runs several kv chunks: the kernel unrolls up to
``svgtpu.kernels.block_sparse.MAX_UNROLL`` of them (then the counts cover the whole tile) and loops
over more (then they count one pass of the loop plus the per-tile code around it, as the jaxpr
counts of :func:`svgtpu.bench.kernels.count_tile_ops` do).  :mod:`svgtpu.bench.compiled` reads the
loop trip counts and weighs each body by them.

Provenance ``compiled-v6e``: counted from what the compiler produced, nothing run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from svgtpu.errors import BadInput

UNITS = ("mxu", "eup", "xlu", "cmp_select", "vpu", "load_store")
_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?llo\.([a-z][\w.]*)')
#: One bundle line of a ``final_bundles`` schedule: its address, an optional control mark (``PF:``,
#: ``LB:``, ...) and the bundle's instructions in braces.
BUNDLE = re.compile(r"^\s*(?:0x[0-9a-f]+|\d+)\s+(?:[A-Z]{2}:\s*)?[>:]")
#: One instruction of a bundle as the schedule spells it: ``vmatmul.mubr.bf16.gmra.mrb[4].mxu0``.
BUNDLE_OP = re.compile(r"(?:%[\w.]+\s*=\s*)?([a-z_][\w.\[\]]*)")


def bundle_lines(text: str) -> list[str]:
    """The bundle lines of a final schedule, in order (continuation lines folded into their bundle)."""
    out = []
    for line in text.splitlines():
        if BUNDLE.match(line):
            out.append(line)
        elif out:
            out[-1] += " " + line
    return out


def bundle_ops(line: str) -> tuple[str, ...]:
    """The instruction names of one bundle line (``()`` for an empty bundle)."""
    body = line.partition("{")[2].rsplit("}", 1)[0]
    return tuple(m.group(1) for part in body.split(";;") if (m := BUNDLE_OP.match(part.strip())))


def parse_bundles(text: str) -> list[tuple[str, ...]]:
    """Every bundle of a final schedule as the tuple of its instruction names: one entry per issue cycle."""
    return [bundle_ops(line) for line in bundle_lines(text)]


def unit_of(op: str) -> str | None:
    """The unit an LLO instruction runs on (``None`` for scalar / control instructions)."""
    base = op.split(".")[0]
    if base in ("vmatmul", "vmatprep", "vmatres", "vlatchi", "vdwg"):
        return "mxu"
    if base in ("vexp", "vrecip", "vpow2", "vlog2", "vrsqrt", "vtanh", "vrcp"):
        return "eup"
    if "xlane" in op or base in ("vperm", "vrot", "vxpose"):
        return "xlu"
    if base.startswith("vcmp") or base in ("vselect", "vmand", "vmor", "vmxor", "vmnot"):
        return "cmp_select"
    if base in ("vector_load", "vector_store"):
        return "load_store"
    if base.startswith("v"):
        return "vpu"
    return None


def top_level_regions(text: str) -> list[Counter]:
    """LLO instruction counts inside each top-level ``scf.if`` of the kernel function, in order."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("func.func @block_sparse"))
    regions, current = [], None
    for line in lines[start + 1:]:
        if line.startswith("  }"):  # end of the kernel function
            break
        if line.startswith("    scf.if "):
            current = Counter()
        elif current is not None and line.startswith("    }"):
            regions.append(current)
            current = None
        elif current is not None:
            match = _OP.match(line)
            if match:
                current[match.group(1)] += 1
    return regions


def region_bundles(text: str) -> list[int]:
    """Bundles between consecutive predicated-region fallthroughs (``PF``) of a final schedule."""
    marks, count = [], 0
    for line in text.splitlines():
        if BUNDLE.match(line):
            if " PF:" in line.split("{")[0]:
                marks.append(count)
            count += 1
    return [b - a for a, b in zip(marks, marks[1:])]


#: What a bundle's instructions run on, as :func:`bundle_unit` sorts them (``scalar``: scalar ALU,
#: branches, DMA and sync).
BUNDLE_UNITS = ("mxu", "eup", "xlu", "cmp_select", "vpu", "load_store", "scalar")


def bundle_unit(op: str) -> str:
    """The unit of one instruction as the final schedule spells it (``vmatmul.mubr``, ``vpop.eup``, ``vsel``)."""
    base = op.split(".")[0]
    if "mxu" in op or base.startswith(("vmatmul", "vmatprep", "vmatpush", "vmatres", "vlatch")):
        return "mxu"
    if "eup" in op or base in ("vpow2", "vexp", "vrcp", "vrsqrt", "vtanh", "vlog2"):
        return "eup"
    if "xlane" in op or "xlu" in op or base in ("vperm", "vrot", "vxpose"):
        return "xlu"
    if base.startswith("vcmp") or base in ("vsel", "vselect", "vmand", "vmor", "vmxor", "vmnot"):
        return "cmp_select"
    if base.startswith(("vld", "vst")):
        return "load_store"
    return "vpu" if base.startswith("v") else "scalar"


def region_slots(text: str) -> list[list[Counter]]:
    """Per predicated region of a final schedule (the spans :func:`region_bundles` counts), each
    bundle's instructions by :func:`bundle_unit`."""
    regions, current = [], None
    for line in text.splitlines():
        if not BUNDLE.match(line):
            continue
        if " PF:" in line.partition("{")[0]:
            if current is not None:
                regions.append(current)
            current = []
        if current is not None:
            current.append(Counter(bundle_unit(op) for op in bundle_ops(line)))
    return regions


def compiled_bundle_slots(spec: dict) -> dict[str, list[dict]]:
    """The static schedule of the full and the partial tile body of one fast-path kernel variant
    (``spec`` as :func:`compiled_tile_counts`): per bundle, its instructions by unit."""
    if not spec["fast_path"]:
        raise BadInput("fast_path must be True: only then do full and partial tiles have bodies of their own")
    schedule = _dumps(spec)[1]
    first_pf = next((line.split("}")[0] for line in schedule.splitlines()
                     if BUNDLE.match(line) and " PF:" in line.split("{")[0]), "")
    if not first_pf.rstrip().endswith(", 2"):  # the first body must be the full tile's (kind == FULL)
        raise RuntimeError("schedule layout changed: the first predicated region is not the full-tile body")
    regions = region_slots(schedule)
    if len(regions) < 2:
        raise RuntimeError(f"expected the full and partial bodies in the schedule, found {len(regions)} regions")
    return {tile: [{u: bundle[u] for u in BUNDLE_UNITS} for bundle in region]
            for tile, region in zip(("full", "partial"), regions)}


def _by_unit(ops: Counter) -> dict:
    units = Counter()
    for op, n in ops.items():
        unit = unit_of(op)
        if unit:
            units[unit] += n
    return {u: units[u] for u in UNITS}


def _compile_for_dump(spec: dict) -> None:
    """Child process: compile one kernel variant for v6e (libtpu dumps into the folders it was given)."""
    import jax
    import jax.numpy as jnp

    from svgtpu.bench.compile import compile_fn, topology_device
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels import KernelConfig
    from svgtpu.kernels.api import block_sparse
    from svgtpu.kernels.common import compiling_for
    from svgtpu.masks.core import make_mask
    g = get_geometry(spec["geometry"])
    config = KernelConfig(spec["block_q"], spec["block_kv"], spec["block_kv_compute"], spec["fast_path"])
    device = jax.sharding.SingleDeviceSharding(topology_device("v6e"))
    x = jax.ShapeDtypeStruct((1, g.L, spec["head_dim"]), jnp.dtype(spec["dtype"]), sharding=device)
    if spec["mask"] == "block-table":  # the traced plan with the in-kernel cluster mask (svgtpu.kernels.dynamic)
        from svgtpu.kernels.dynamic import block_table_attention
        cq, ck = spec["q_clusters"], spec["k_clusters"]
        table = [jax.ShapeDtypeStruct(shape, jnp.dtype(t), sharding=device)
                 for shape, t in (((1, cq + 1), "int32"), ((1, ck + 1), "int32"), ((1, cq, ck), "bool"))]
        with compiling_for("v6e"):
            result = compile_fn(lambda q, k, v, qe, ke, t: block_table_attention(
                q, k, v, qe, ke, t, config=config, align=spec.get("align"), device="v6e")[0], (x, x, x, *table))
    else:
        mask = make_mask("spatial" if spec["mask"] == "svg" else spec["mask"], g, spec["multiplier"])
        with compiling_for("v6e"):
            result = compile_fn(lambda q, k, v: block_sparse(q, k, v, mask, config=config, implementation="mosaic",
                                                             device="v6e"), (x, x, x))
    if not result["compiled"]:
        sys.exit(f"not compiled: {result['reason']}")


def _dumps(spec: dict) -> tuple[str, str]:
    """Compile one kernel variant in a child process; its Mosaic ``post-finalize-llo`` text and its
    LLO ``final_bundles`` schedule."""
    with tempfile.TemporaryDirectory() as tmp:
        mosaic, jf = Path(tmp, "mosaic"), Path(tmp, "jf")
        env = dict(os.environ, LIBTPU_INIT_ARGS=" ".join([
            os.environ.get("LIBTPU_INIT_ARGS", ""), f"--xla_mosaic_dump_to={mosaic}",
            f"--xla_jf_dump_to={jf}", "--xla_jf_dump_llo_text=true"]).strip())
        code = f"import json, svgtpu.bench.llo as m; m._compile_for_dump(json.loads({json.dumps(json.dumps(spec))}))"
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"compiling {spec} for the LLO dump failed: {done.stderr.strip().splitlines()[-1:]}")
        llo = [p for p in mosaic.glob("*post-finalize-llo.txt") if "func.func @block_sparse" in p.read_text()]
        bundles = [p for p in jf.glob("*block_sparse_attention*final_bundles.txt")
                   if "analysis" not in p.name]
        if len(llo) != 1 or len(bundles) != 1:
            raise RuntimeError(f"expected one kernel in the dumps, found {len(llo)} LLO and {len(bundles)} bundle files")
        return llo[0].read_text(), bundles[0].read_text()


def compiled_tile_counts(spec: dict) -> list[dict]:
    """Per tile body of one kernel variant (``spec``: geometry, mask, multiplier, block sizes,
    head_dim, dtype, fast_path): LLO instructions by unit and static bundles.  ``mask="block-table"``
    compiles the data-plan kernel instead (``q_clusters``, ``k_clusters``, optional ``align``)."""
    llo_text, schedule = _dumps(spec)
    regions = top_level_regions(llo_text)
    cycles = region_bundles(schedule)
    pf_lines = [line.split("}")[0] + "}" for line in schedule.splitlines()
                if BUNDLE.match(line) and " PF:" in line.split("{")[0]]
    names = ("init", "full", "partial", "finish") if spec["fast_path"] else ("init", "masked", "finish")
    if len(regions) != len(names):
        raise RuntimeError(f"kernel structure changed: {len(regions)} top-level regions, expected {names}")
    # PF marks open every predicated region after the first: bodies are the spans between them.
    bodies = dict(zip(names[1:], cycles)) if len(cycles) >= len(names) - 1 else {}
    if spec["fast_path"] and not (pf_lines and pf_lines[0].rstrip().endswith(", 2 }")):
        bodies = {}  # the first region is not the full-tile body (kind != FULL): schedule layout changed
    rows = []
    for name, ops in zip(names, regions):
        if name in ("init", "finish"):
            continue
        tiles = ("full", "partial") if name == "masked" else (name,)
        units = _by_unit(ops)
        for tile in tiles:
            rows.append({"fast_path": spec["fast_path"], "tile": tile, "llo_ops": sum(units.values()),
                         **{f"llo_{u}": n for u, n in units.items()},
                         "bundles": bodies.get(name)})
    return rows


def compiled_ops(geometry: str = "8x32x34", *, block_q: int = 512, block_kv: int = 512,
                 block_kv_compute: int | None = None, head_dim: int = 128, dtype: str = "bfloat16",
                 multiplier: float = 1.0, masks=("svg", "temporal-frame-major"), progress: bool = False) -> dict:
    """LLO counts and bundles per tile kind, fast path on and off, for the SVG mask (iota-masked
    partial tiles) and its frame-major temporal twin (mask-block partial tiles); v6e."""
    from svgtpu.kernels import KernelConfig
    config = KernelConfig(block_q, block_kv, block_kv_compute)
    specs = [{"geometry": geometry, "mask": mask, "multiplier": multiplier, "block_q": block_q,
              "block_kv": block_kv, "block_kv_compute": config.block_kv_compute, "head_dim": head_dim,
              "dtype": dtype, "fast_path": fast} for mask in masks for fast in (True, False)]
    if progress:
        from tqdm.auto import tqdm
        specs = tqdm(specs, desc="compiling for v6e", unit="variant")
    rows = [{"mask": spec["mask"], **row} for spec in specs for row in compiled_tile_counts(spec)]
    from svgtpu.tpu_env import package_version
    return {"provenance": "compiled-v6e", "geometry": geometry, "block_q": block_q, "block_kv": block_kv,
            "block_kv_compute": config.block_kv_compute, "head_dim": head_dim, "dtype": dtype,
            "libtpu": package_version("libtpu"),
            "counted_in": "Mosaic post-finalize-llo (instructions per top-level scf.if = tile body) and "
                          "the LLO final_bundles schedule (bundles per predicated region)",
            "rows": rows}


__all__ = ["UNITS", "BUNDLE_UNITS", "BUNDLE", "BUNDLE_OP", "bundle_lines", "bundle_ops", "parse_bundles", "compiled_ops", "compiled_tile_counts", "compiled_bundle_slots",
           "top_level_regions", "region_bundles", "region_slots", "bundle_unit", "unit_of"]
