"""What the real TPU compiler emits for each tile body: LLO instructions and static bundles (C4).

The kernel is compiled ahead of time for v6e (:mod:`svgtpu.compiler.compile`) in a child process whose
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
counts of :func:`svgtpu.bench.kernel_timing.count_tile_ops` do).  :mod:`svgtpu.compiler.tile_table` reads the
loop trip counts and weighs each body by them.

The whole program is read too (:func:`read_schedule`, for :mod:`svgtpu.compiler.estimate`):

- the **grid loop** is the outermost back branch (``sbr.rel`` to an earlier region); its
  ``loop exit test`` constant is the number of iterations, the grid steps plus the software
  pipeline's fill/drain iterations;
- a **predicated region** is a forward ``sbr.rel``: when taken, the branch and its delay slots
  (the bundles up to the first ``End region``) run and the region's body is skipped;
- a **nested loop** (the ``block_kv_compute`` loop of a tile body) costs its static bundles times its
  exit-test trip count;
- the **tile bodies** are the regions holding MXU work (``vmatmul``/``vmatres``) directly inside
  the step guard, in source order: ours ``full, partial`` (fast path) or ``masked`` (off), tokamax
  ``full, partial``, Splash one ``masked`` body; **init** is the region before them that stores
  without MXU work, **finish** the one after them with a reciprocal (``vrcp``);
- everything else in the grid loop is **step overhead**: pipeline bookkeeping, DMA issue and wait,
  the plan lookup, the guards' branches; it runs at every iteration (the DMA-issue regions are
  counted as taken at every step: an upper bound of a few bundles).

Compiling happens in :mod:`svgtpu.compiler.dumps`; this module only reads.  Provenance
``compiled-v6e`` (or ``compiled-v7x``): counted from what the compiler produced, nothing run.
"""

from __future__ import annotations

import dataclasses
import json
import re
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


# -- the whole program: grid loop, bodies, per-step code ----------------------------------------

_EXIT = re.compile(r"scmp\.(?:ge|gt)\.s32\.totalorder %\w+, (\d+) /\* loop exit test")
_BRANCH = re.compile(r"sbr\.rel \((!?)%\w+\) target = \$region(\d+)")
_STARTS = re.compile(r"(?:Start|Start/End empty) region (\d+)")


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The static cost structure of one compiled Pallas kernel (bundles = cycles)."""

    total: int            # bundles of the whole program
    loop: int             # static bundles of the grid loop
    iterations: int | None  # the grid loop's exit-test trip count (None: a bound in a register)
    overhead: int         # cycles of one grid-loop iteration outside init / bodies / finish
    init: int             # cycles of the init region when taken
    finish: int           # cycles of the finish region when taken
    bodies: tuple         # cycles of each tile body when taken (nested loops times their trips)
    body_static: tuple    # static bundles of each body (one pass of any nested loop)
    body_trips: tuple     # trip count of the nested loop of each body (1 if none)
    body_segments: tuple = ()  # per body: ((start, end, passes), ...): its bundles, plus each nested
    #                            loop's extra passes; weighted, they count the body's cycles

    @property
    def once(self) -> int:
        """Bundles outside the grid loop (run once per call)."""
        return self.total - self.loop


def read_schedule(text: str) -> Schedule:
    """Parse a ``final_bundles`` dump of one kernel into its :class:`Schedule` (see the module doc)."""
    bundles = bundle_lines(text)
    starts: dict[int, int] = {}
    for i, line in enumerate(bundles):
        for r in _STARTS.findall(line):
            starts.setdefault(int(r), i)
    forward, loops = [], []  # (branch, body start, end) / (start, end incl. delay)
    for i, line in enumerate(bundles):
        for _, region in _BRANCH.findall(line):
            target = starts[int(region)]
            delay = next(j for j in range(i, min(i + 8, len(bundles))) if "End region" in bundles[j]) - i \
                if any("End region" in bundles[j] for j in range(i, min(i + 8, len(bundles)))) else 0
            if target > i:
                forward.append((i, min(i + 1 + delay, target), target))
            else:
                loops.append((target, i + 1 + delay))
    if not loops:
        raise RuntimeError("no grid loop in the schedule")
    exits = [(i, int(m.group(1))) for i, line in enumerate(bundles) for m in [_EXIT.search(line)] if m]

    def trip(loop) -> int:
        a, b = loop
        inner = [lp for lp in loops if lp != loop and a <= lp[0] and lp[1] <= b]
        own = [n for i, n in exits if a <= i < b and not any(x <= i < y for x, y in inner)]
        if len(own) > 1:
            raise RuntimeError(f"loop {loop}: expected one exit test, found {own}")
        return own[0] if own else None  # a bound held in a register (a dynamic grid)

    trips = {lp: trip(lp) for lp in loops}
    grid = max(loops, key=lambda lp: lp[1] - lp[0])
    if any(trips[lp] is None for lp in loops if lp != grid):
        raise RuntimeError("a loop inside the grid loop has no constant trip count")

    def cost(a: int, b: int) -> int:
        """Cycles of bundles [a, b) with every nested loop run its trip count."""
        return (b - a) + sum((trips[lp] - 1) * (lp[1] - lp[0]) for lp in loops
                             if lp != grid and a <= lp[0] and lp[1] <= b)

    mxu = [any("vmatmul" in bundles[j] or "vmatres" in bundles[j] for j in range(s, e)) for _, s, e in forward]
    regions = [(s, e) for (_, s, e) in forward if grid[0] <= s and e <= grid[1]]
    mxu_regions = [(s, e) for (_, s, e), m in zip(forward, mxu) if m and grid[0] <= s and e <= grid[1]]

    def children(parent, pool):
        inside = [r for r in pool if r != parent and parent[0] <= r[0] and r[1] <= parent[1]]
        return [r for r in inside if not any(o != r and o[0] <= r[0] and r[1] <= o[1] for o in inside)]

    level = children(grid, mxu_regions)
    while len(level) == 1 and children(level[0], mxu_regions):
        level = children(level[0], mxu_regions)
    bodies = sorted(level)
    if not bodies:
        raise RuntimeError("no tile body (MXU region) in the grid loop")
    parent = min((r for r in regions + [grid] if all(r[0] <= b[0] and b[1] <= r[1] for b in bodies)
                  and r not in bodies), key=lambda r: r[1] - r[0])
    siblings = [r for r in children(parent, regions) if r not in bodies]

    def has(region, op):
        return any(op in bundles[j] for j in range(*region))
    before = [r for r in siblings if r[1] <= bodies[0][0] and has(r, "vst") and not has(r, "dma")]
    after = [r for r in siblings if r[0] >= bodies[-1][1] and has(r, "vrcp")]
    init = cost(*before[-1]) if before else 0
    finish = cost(*after[0]) if after else 0
    body_costs = tuple(cost(*b) for b in bodies)
    inner = [tuple(trips[lp] for lp in loops if b[0] <= lp[0] and lp[1] <= b[1]) or (1,) for b in bodies]
    segments = tuple(((a, b, 1),) + tuple((lp[0], lp[1], trips[lp] - 1) for lp in loops
                                          if lp != grid and a <= lp[0] and lp[1] <= b) for a, b in bodies)
    one_pass = cost(*grid)  # one iteration, nested loops run
    return Schedule(total=len(bundles), loop=grid[1] - grid[0], iterations=trips[grid],
                    overhead=one_pass - init - finish - sum(body_costs),
                    init=init, finish=finish, bodies=body_costs,
                    body_static=tuple(b[1] - b[0] for b in bodies), body_trips=tuple(max(t) for t in inner),
                    body_segments=segments)



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
    slots = _reading(spec)["slots"]
    if isinstance(slots, str):
        raise RuntimeError(slots)
    return {tile: [dict(zip(BUNDLE_UNITS, bundle)) for bundle in region] for tile, region in slots.items()}


def _bundle_slots(schedule: str) -> dict[str, list[list[int]]] | str:
    """Per bundle of the full and the partial body of a fast-path ``schedule``, its instructions per unit
    (:data:`BUNDLE_UNITS` order); or why the schedule does not hold them."""
    first_pf = next((line.split("}")[0] for line in schedule.splitlines()
                     if BUNDLE.match(line) and " PF:" in line.split("{")[0]), "")
    if not first_pf.rstrip().endswith(", 2"):  # the first body must be the full tile's (kind == FULL)
        return "schedule layout changed: the first predicated region is not the full-tile body"
    regions = region_slots(schedule)
    if len(regions) < 2:
        return f"expected the full and partial bodies in the schedule, found {len(regions)} regions"
    return {tile: [[bundle[u] for u in BUNDLE_UNITS] for bundle in region]
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

    from svgtpu.compiler.compile import compile_fn, topology_device
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels import KernelConfig
    from svgtpu.kernels.api import block_sparse
    from svgtpu.kernels.common import compiling_for
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
        mask = _mask(spec)
        with compiling_for("v6e"):
            result = compile_fn(lambda q, k, v: block_sparse(q, k, v, mask, config=config, implementation="mosaic",
                                                             device="v6e"), (x, x, x))
    if not result["compiled"]:
        sys.exit(f"not compiled: {result['reason']}")


#: What a kernel variant compiled for its dumps is built from: the key of its record (:func:`_reading`) hashes them.
DUMP_SOURCES = ("compiler/llo.py", "kernels/api.py", "kernels/block_sparse.py", "kernels/band_table.py",
                "kernels/common.py", "kernels/budget.py", "kernels/plan.py", "kernels/config.py", "kernels/dynamic.py")


def _reading(spec: dict) -> dict:
    """What one kernel variant's compile says (``counts``: :func:`compiled_tile_counts`; ``slots``: the
    bundles of its tile bodies, fast path only), a record keyed by ``spec`` and :data:`DUMP_SOURCES` (notebooks
    02 and 04 read them; the dumps themselves are megabytes and stay in the child's temporary folder)."""
    from svgtpu.compiler.dumps import cached

    def compute():
        llo_text, schedule = _compile_dumps(spec)
        return {"counts": _tile_counts(spec, llo_text, schedule),
                "slots": _bundle_slots(schedule) if spec["fast_path"] else None}
    from svgtpu.compiler.dumps import content_of
    mask = None if spec["mask"] == "block-table" else _mask(spec)
    return cached("v6e", "llo-reading", {**spec, "mask_content": content_of(mask)}, DUMP_SOURCES, compute)


def _mask(spec: dict):
    """The mask a (not block-table) ``spec`` compiles its kernel for."""
    from svgtpu.geometry import get_geometry
    from svgtpu.masks.core import make_mask
    return make_mask("spatial" if spec["mask"] == "svg" else spec["mask"], get_geometry(spec["geometry"]),
                     spec["multiplier"])


def _compile_dumps(spec: dict) -> tuple[str, str]:
    """Compile one kernel variant in a child process: its Mosaic ``post-finalize-llo`` text and its LLO
    ``final_bundles`` schedule."""
    from svgtpu.compiler.dumps import child_env, run_child
    with tempfile.TemporaryDirectory() as tmp:
        mosaic, jf = Path(tmp, "mosaic"), Path(tmp, "jf")
        code = f"import json, svgtpu.compiler.llo as m; m._compile_for_dump(json.loads({json.dumps(json.dumps(spec))}))"
        done = run_child(code, child_env(jf, mosaic), f"{spec} for the LLO dump")
        if done.returncode:
            raise RuntimeError(f"compiling {spec} for the LLO dump failed: {done.stderr.strip().splitlines()[-1:]}")
        llo = [p for p in mosaic.glob("*post-finalize-llo.txt") if "func.func @block_sparse" in p.read_text()]
        bundles = [p for p in jf.glob("*block_sparse_attention*final_bundles.txt")
                   if "schedule-analysis" not in p.name]
        if len(llo) != 1 or len(bundles) != 1:
            raise RuntimeError(f"expected one kernel in the dumps, found {len(llo)} LLO and {len(bundles)} bundle files")
        return llo[0].read_text(), bundles[0].read_text()


def compiled_tile_counts(spec: dict) -> list[dict]:
    """Per tile body of one kernel variant (``spec``: geometry, mask, multiplier, block sizes,
    head_dim, dtype, fast_path): LLO instructions by unit and static bundles.  ``mask="block-table"``
    compiles the data-plan kernel instead (``q_clusters``, ``k_clusters``, optional ``align``)."""
    return _reading(spec)["counts"]


def _tile_counts(spec: dict, llo_text: str, schedule: str) -> list[dict]:
    """:func:`compiled_tile_counts` from the two texts of a compile."""
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


def compiled_ops(geometry: str, *, block_q: int, block_kv: int,
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


__all__ = ["UNITS", "BUNDLE_UNITS", "BUNDLE", "BUNDLE_OP", "bundle_lines", "bundle_ops", "parse_bundles",
           "Schedule", "read_schedule", "compiled_ops", "compiled_tile_counts", "compiled_bundle_slots",
           "top_level_regions", "region_bundles", "region_slots", "bundle_unit", "unit_of"]
