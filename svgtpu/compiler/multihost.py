"""Compile for a multi-host TPU slice ahead of time, and count the collectives the compiler emits.

``get_topology_desc(platform="tpu", topology_name="v6e:4x4x1")`` describes all 16 chips of a
4-host v6e slice; a program sharded over a mesh of them compiles on this CPU with the real XLA:TPU
and Mosaic (nothing runs).  Two programs:

- ``sharded-svg-layer``: one Wan 2.1 14B self-attention layer, CFG pair over the ``data`` axis and
  Ulysses over ``seq`` (:func:`svgtpu.attention.sharding.ulysses`): the layout the cost model
  assumes (:func:`svgtpu.costmodel.parallel.ulysses_collectives`);
- ``sharded-dit-step``: one guided velocity evaluation of a toy DiT with one head per chip of the
  ``heads`` axis (or a named config, e.g. the shipped ``toy`` on 2 x 3 chips), head-parallel as
  ``svgtpu generate --devices`` runs it.

The compiled HLO is per chip (SPMD-partitioned); :func:`hlo_collectives` counts each collective and
the bytes of its result on one chip.  Provenance ``compiled-<device>``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re

from svgtpu.compiler.compile import CompileJob, compile_program, dit_step_program, first_line, require_libtpu
from svgtpu.kernels.common import compiling_for
from svgtpu.setting import PRODUCTION
from svgtpu.errors import BadInput

MULTIHOST_TARGETS = ("sharded-svg-layer", "sharded-dit-step")
COLLECTIVES = ("all-to-all", "all-gather", "reduce-scatter", "all-reduce", "collective-permute")
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4,
                "u32": 4, "f64": 8, "s64": 8, "u64": 8}
_SHAPE = re.compile(r"\b(pred|[su](?:8|16|32|64)|bf16|f16|f32|f64)\[([\d,]*)\]")
_OP = re.compile(r"=\s*(\(?[^=]*?\)?)\s+(" + "|".join(COLLECTIVES) + r")(-start)?\(")


def topology_name(device: str, topology: str) -> str:
    """``4x4`` -> ``v6e:4x4x1``; a full name (``v6e:4x4x1``) is kept."""
    name = topology if ":" in topology else f"{device}:{topology}"
    chip, dims = name.split(":", 1)
    if chip != device:
        raise BadInput(f"topology must name a {device} slice like '4x4' or '{device}:4x4x1', got {topology!r}")
    if not re.fullmatch(r"\d+(x\d+){1,2}", dims):
        raise BadInput(f"topology must look like '4x4' or '{device}:4x4x1', got {topology!r}")
    return f"{chip}:{dims}x1" if dims.count("x") == 1 else name


def topology_devices(device: str, topology: str) -> list:
    """All devices of a TPU topology (every host's), for AOT compilation on this machine."""
    require_libtpu()
    from jax.experimental import topologies
    name = topology_name(device, topology)
    try:
        return list(topologies.get_topology_desc(platform="tpu", topology_name=name).devices)
    except Exception as e:  # libtpu's own words: unknown chip / shape
        raise BadInput(f"topology {name!r} is not one libtpu knows: {first_line(e)}") from None


def hlo_collectives(hlo_text: str) -> dict[str, dict]:
    """Per collective kind: how many the compiled (per-chip) HLO holds and the bytes of their results
    on one chip (async ``-start`` ops counted once; their ``-done`` halves are not collectives)."""
    out = {op: {"count": 0, "bytes": 0} for op in COLLECTIVES}
    for line in hlo_text.splitlines():
        m = _OP.search(line)
        if not m:
            continue
        shapes = _SHAPE.findall(m.group(1))
        if m.group(3):  # an async start returns (operands, results, ...): the result half only
            shapes = shapes[len(shapes) // 2:len(shapes) // 2 * 2] or shapes
        nbytes = sum(_DTYPE_BYTES[t] * math.prod(int(d) for d in dims.split(",") if d) for t, dims in shapes)
        out[m.group(2)]["count"] += 1
        out[m.group(2)]["bytes"] += nbytes
    return out


@dataclasses.dataclass(frozen=True)
class MultihostJob:
    """What to compile for a multi-host slice: the single-chip job's geometry, tiles and SVG
    settings (``job.heads`` = the model's heads, split over the mesh) on ``topology``."""

    job: CompileJob
    topology: str = "4x4"
    model: str = PRODUCTION.model
    dit_depth: int = 1
    dit_config: str | None = None   # a named toy config (``toy``: what ``generate --devices 6`` runs, on 6 chips)


def _mesh_devices(mj: MultihostJob):
    devices = topology_devices(mj.job.device, mj.topology)
    return devices, len(devices), len({d.process_index for d in devices})


def _svg_layer(mj: MultihostJob, devices):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from svgtpu.attention.sharding import make_mesh, ulysses
    from svgtpu.attention.svg import svg_attention
    from svgtpu.geometry import get_geometry
    job, n = mj.job, len(devices)
    data = 2 if n % 2 == 0 else 1
    seq = n // data
    if job.heads % seq:
        raise BadInput(f"heads = {job.heads} must be divisible by the {seq} chips of the seq axis "
                       f"({n} chips / CFG {data})")
    g = get_geometry(job.geometry)
    if g.L % seq:
        raise BadInput(f"sequence length L = {g.L} must be divisible by the seq axis ({seq} chips)")
    mesh = make_mesh(data=data, heads=1, seq=seq, devices=devices)
    x = jax.ShapeDtypeStruct((2, job.heads, g.L, job.head_dim), jnp.dtype(job.dtype),
                             sharding=NamedSharding(mesh, P("data", "heads", "seq")))
    # a call past SVG's dense warm-up: the sparse path compiles
    svg = functools.partial(svg_attention, geometry=g, config=job.svg_config(), key=jax.random.PRNGKey(0),
                            **PRODUCTION.sparse_call())
    expected = _expected_ulysses(mj, g.L, seq)
    return ulysses(svg, mesh), (x, x, x), dict(mesh.shape), str(g), expected


def _expected_ulysses(mj: MultihostJob, L: int, seq: int) -> dict:
    """What the cost model assumes for one Ulysses layer on ``seq`` chips (model dim = heads x head_dim)."""
    from svgtpu.costmodel.parallel import ulysses_collectives
    dim = mj.job.heads * mj.job.head_dim
    return ulysses_collectives(L, dim, seq, 2 if mj.job.dtype == "bfloat16" else 4)


def _dit_step(mj: MultihostJob, devices):
    from jax.sharding import NamedSharding, PartitionSpec as P

    from svgtpu.attention.backends import attention_backend
    from svgtpu.attention.sharding import make_mesh, sharded_backend
    from svgtpu.toy.dit import DiTConfig
    if mj.dit_config:   # a shipped config on the chips generate gives it: CFG pair x its heads
        from svgtpu.toy.train import get_config
        model = get_config(mj.dit_config)
        devices = devices[:2 * model.heads]
    n = len(devices)
    data = 2 if n % 2 == 0 else 1
    if not mj.dit_config:
        model = DiTConfig(heads=n // data, head_dim=64, depth=mj.dit_depth)
    mesh = make_mesh(data=data, heads=n // data, devices=devices)
    attention = sharded_backend(attention_backend("svg", model.geometry, svg_config=mj.job.svg_config()), mesh)
    fn, args = dit_step_program(model, attention, NamedSharding(mesh, P()))
    return fn, args, dict(mesh.shape), f"toy DiT {model.heads} heads x 64, depth {model.depth}, {model.geometry}", None


_BUILDERS = {"sharded-svg-layer": _svg_layer, "sharded-dit-step": _dit_step}


def compile_multihost(mj: MultihostJob, targets=MULTIHOST_TARGETS, progress: bool = False) -> dict:
    """Compile each target for every chip of ``mj.topology``; per target: compiled or the
    compiler's one-line reason, seconds, the collectives of the compiled program and, for the SVG
    layer, the cost model's assumption next to them (per layer and per denoising step)."""
    for t in targets:
        if t not in MULTIHOST_TARGETS:
            raise BadInput(f"target must be one of {', '.join(MULTIHOST_TARGETS)}, got {t!r}")
    devices, chips, hosts = _mesh_devices(mj)
    from svgtpu.costmodel.workload import get_model
    layers = get_model(mj.model).layers
    rows = []
    items = targets
    if progress:
        from tqdm.auto import tqdm
        items = tqdm(targets, desc="compiling", unit="target")
    for target in items:
        with compiling_for(mj.job.device):
            try:
                fn, args, mesh, where, expected = _BUILDERS[target](mj, devices)
            except BadInput as e:  # a shape the mesh cannot split, or a plan that does not fit
                rows.append({"target": target, "compiled": False, "reason": str(e), "refused_by": "svgtpu",
                             "compile_s": 0.0})
                continue
            compiled, outcome = compile_program(fn, args)
        row = {"target": target, **outcome, "mesh": mesh, "geometry": where}
        if compiled is None:
            rows.append(row)
            continue
        found = row["collectives"] = hlo_collectives(compiled.as_text())
        if expected is not None:
            row["model"] = expected
            row["per_step"] = {"layers": layers, "compiled_bytes_per_chip": layers * sum(
                c["bytes"] for c in found.values()), "model_bytes_per_chip": layers * sum(
                c["count"] * c["bytes"] for c in expected.values())}
            row["matches_model"] = all(found[op]["count"] == expected.get(op, {"count": 0})["count"] and
                                       found[op]["bytes"] == expected.get(op, {"count": 0})["count"] *
                                       expected.get(op, {"bytes": 0})["bytes"] for op in COLLECTIVES)
        rows.append(row)
    return {"provenance": f"compiled-{mj.job.device}", "device": mj.job.device,
            "topology": topology_name(mj.job.device, mj.topology), "chips": chips, "hosts": hosts,
            "model": mj.model, "geometry": mj.job.geometry, "heads": mj.job.heads, "head_dim": mj.job.head_dim,
            "dtype": mj.job.dtype, "block_q": mj.job.config.block_q, "block_kv": mj.job.config.block_kv,
            "compiled": all(r["compiled"] for r in rows), "targets": rows}


def collective_rows(result: dict) -> list[dict]:
    """One row per (target, collective kind) present in the compiled program or the model."""
    rows = []
    for t in result["targets"]:
        if not t["compiled"]:
            rows.append({"target": t["target"], "collective": "-", "reason": t["reason"]})
            continue
        model = t.get("model", {})
        for op in COLLECTIVES:
            c, m = t["collectives"][op], model.get(op)
            if c["count"] or m:
                rows.append({"target": t["target"], "collective": op, "compiled_count": c["count"],
                             "compiled_bytes_per_chip": c["bytes"],
                             "model_count": m["count"] if m else 0,
                             "model_bytes_per_chip": m["count"] * m["bytes"] if m else 0})
    return rows


def format_multihost(result: dict) -> str:
    """:func:`compile_multihost` as ``svgtpu compile --topology`` prints it: the slice, the collectives
    compiled next to the model's, and per denoising step the bytes each chip moves."""
    from svgtpu.facts.tables import format_table
    lines = [f"{result['topology']}: {result['chips']} chips on {result['hosts']} hosts ({result['provenance']}); "
             f"{result['geometry']}, {result['heads']} heads x {result['head_dim']}, {result['dtype']}, tiles "
             f"{result['block_q']}x{result['block_kv']}; collectives of one call, bytes of their results on one chip; "
             "model: svgtpu.costmodel.parallel.ulysses_collectives", format_table(collective_rows(result))]
    for t in result["targets"]:
        if t.get("per_step"):
            lines.append(f"{t['target']} ({t['mesh']}): per denoising step ({t['per_step']['layers']} layers) "
                         f"{t['per_step']['compiled_bytes_per_chip'] / 1e9:.3g} GB per chip compiled, "
                         f"{t['per_step']['model_bytes_per_chip'] / 1e9:.3g} GB modeled; matches the model: "
                         f"{t['matches_model']}")
    return "\n".join(lines)


def compile_command(job: CompileJob, what: str | None = None, topology: str | None = None, heads: int | None = None,
                    progress: bool = False) -> tuple[dict, str]:
    """``svgtpu compile``: ``(result, table)`` of the comma-separated targets ``what`` of ``job`` on
    ``topology`` (default: one host); a multi-host topology compiles the sharded targets
    (:data:`MULTIHOST_TARGETS`; ``heads``: the model's, default 40), one host the one-chip ones
    (:data:`svgtpu.compiler.compile.TARGETS`; ``heads`` per chip, default 5), never both in one run."""
    from svgtpu.compiler.compile import compile_targets
    name = topology_name(job.device, topology) if topology else None
    hosts = len({d.process_index for d in topology_devices(job.device, name)}) if name else 1
    targets = [t.strip() for t in (what or ",".join(MULTIHOST_TARGETS if hosts > 1 else ("kernel", "svg-layer")))
               .split(",") if t.strip()]
    sharded = [t for t in targets if t in MULTIHOST_TARGETS]
    if sharded and len(sharded) < len(targets):
        raise BadInput(f"what mixes sharded targets ({', '.join(MULTIHOST_TARGETS)}) with one-chip ones; "
                       "compile them in two runs")
    job = dataclasses.replace(job, topology=name, heads=heads or (40 if sharded else 5))
    job.svg_config()  # validates kept / multiplier / align before any compile
    if sharded:
        result = compile_multihost(MultihostJob(job, topology=name or f"{job.device}:4x4x1"), tuple(sharded),
                                   progress=progress)
        return result, format_multihost(result)
    from svgtpu.compiler.compile import format_targets
    result = compile_targets(job, tuple(targets), progress=progress)
    return result, format_targets(result)


__all__ = ["MULTIHOST_TARGETS", "COLLECTIVES", "topology_name", "topology_devices", "hlo_collectives",
           "MultihostJob", "compile_multihost", "collective_rows", "format_multihost", "compile_command"]
