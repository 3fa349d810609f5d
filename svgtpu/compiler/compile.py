"""Ahead-of-time compilation for a TPU topology on any machine: ``svgtpu compile``.

With ``libtpu`` installed (``jax[tpu]``), ``jax.experimental.topologies.get_topology_desc`` gives
TPU devices of a named topology (``v6e:2x2x1``) without a TPU; ``jax.jit(f).lower(...).compile()``
for them runs the full XLA:TPU + Mosaic pipeline on the CPU.  It proves that the compiler accepts
the program (block layouts, VMEM within ``vmem_limit_bytes``, the scalar-prefetched plan within
SMEM, lowering of every op); it measures no time.  :mod:`svgtpu.kernels.budget` checks SMEM and VMEM
first, so that a long plan is split into chunks that compile instead of being refused.

Targets: ``kernel`` (our block-sparse kernel on the SVG mask of a geometry), ``svg-layer`` (the
whole :func:`~svgtpu.attention.svg.svg_attention`: profiling, layout transform, kernel),
``svg2-layer`` (one warm-started :func:`~svgtpu.attention.svg2.svg2_attention`: k-means, permutation, the
traced plan and the data-mask kernel, with the production cluster counts of
:data:`svgtpu.attention.svg2.WAN_CLUSTERS`) and ``dit-step`` (one guided velocity evaluation of the toy DiT with SVG attention, at the toy's own
geometry).
"""

from __future__ import annotations

import dataclasses
import re
import time

from svgtpu.kernels.budget import TPU_GENERATIONS, device_memory, vmem_bytes
from svgtpu.kernels.config import KernelConfig, check_blocks_cover
from svgtpu.kernels.common import HEAD_DIMS, compiling_for
from svgtpu.kernels.plan import tile_plan
from svgtpu.setting import PRODUCTION
from svgtpu.tpu_env import package_version
from svgtpu.errors import BadInput

TARGETS = ("kernel", "svg-layer", "dit-step", "svg2-layer")
#: The topology compiled for when none is given: one host of each generation.
DEFAULT_TOPOLOGY = {"v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2x1", "v7x": "tpu7x:2x2x1"}
#: How libtpu spells a generation in a topology name where it differs from ours (``tpu7x:2x2x1``;
#: ``v7x:...`` is refused).
TOPOLOGY_PREFIX = {"v7x": "tpu7x"}


def libtpu_available() -> bool:
    """True when the TPU compiler (the ``libtpu`` package) is installed."""
    import importlib.util
    return importlib.util.find_spec("libtpu") is not None


def require_libtpu() -> None:
    """Refuse (:class:`BadInput`, one line saying how to install it) where the TPU compiler is missing."""
    if not libtpu_available():
        raise BadInput('the TPU compiler is not installed: pip install "jax[tpu]==<jax version>" '
                       '(requirements.txt pins it)')


def topology_device(device: str, topology: str | None = None):
    """The first device of a TPU topology, for lowering and compiling ahead of time."""
    if device not in TPU_GENERATIONS:
        raise BadInput(f"device must be one of {', '.join(TPU_GENERATIONS)}, got {device!r}")
    require_libtpu()
    from jax.experimental import topologies
    name = topology or DEFAULT_TOPOLOGY[device]
    if not name.startswith(TOPOLOGY_PREFIX.get(device, device) + ":"):
        raise BadInput(f"topology must name a {device} slice like {DEFAULT_TOPOLOGY[device]!r}, got {name!r}")
    try:
        return topologies.get_topology_desc(platform="tpu", topology_name=name).devices[0]
    except Exception as e:  # libtpu's own words: unknown chip / shape
        raise BadInput(f"topology {name!r} is not one libtpu knows: {first_line(e)}") from None


def first_line(error: BaseException) -> str:
    """The line of a compiler error that says what went wrong (``RESOURCE_EXHAUSTED: ...``)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if any(tag in line for tag in ("RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "UNIMPLEMENTED", "INTERNAL",
                                       "Mosaic", "error:")):
            return line[:400]
    return (lines[0] if lines else type(error).__name__)[:400]


SCOPED_VMEM = re.compile(r"Scoped allocation with size ([\d.]+[KMG]?) and limit ([\d.]+[KMG]?)")


def _bytes(text: str) -> int:
    """``"50.30M"`` -> bytes (the compiler's units are binary)."""
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
    return int(float(text.rstrip("KMG")) * scale)


def refusal(error: BaseException) -> dict:
    """A compiler refusal as the reports give it: ``reason``, the line that says what went wrong, and
    ``compiler_vmem_bytes``, the scoped VMEM the compiler wanted, where it says so."""
    out = {"reason": first_line(error)}
    scoped = SCOPED_VMEM.search(str(error))
    if scoped:  # the compiler's own VMEM figure for this kernel
        out["compiler_vmem_bytes"] = _bytes(scoped.group(1))
        out["reason"] += f" (scoped VMEM {scoped.group(1)}, limit {scoped.group(2)})"
    return out


def compile_program(fn, args) -> tuple[object | None, dict]:
    """``(compiled, row)``: trace, lower and compile ``jax.jit(fn)(*args)`` (``args``: ShapeDtypeStructs on
    TPU devices); ``row`` says ``compiled``, ``reason``, ``refused_by`` and ``compile_s``.

    Tracing runs our code: a :class:`BadInput` raised there (a plan over the SMEM budget) is our own
    refusal, recorded as such; any other exception there is a bug of ours and propagates.  Lowering
    and compiling are the compiler's (Pallas/Mosaic lowering, XLA:TPU): what they raise is its
    refusal, recorded in its own words (``compiled`` is then ``None``).
    """
    import jax
    start = time.perf_counter()
    try:
        traced = jax.jit(fn).trace(*args)
    except BadInput as e:
        return None, {"compiled": False, "reason": str(e), "refused_by": "svgtpu",
                      "compile_s": time.perf_counter() - start}
    try:
        compiled = traced.lower().compile()
    except Exception as e:  # noqa: BLE001 - the compiler's refusal, reported in one line
        return None, {"compiled": False, **refusal(e), "refused_by": "compiler",
                      "compile_s": time.perf_counter() - start}
    return compiled, {"compiled": True, "reason": None, "refused_by": None, "compile_s": time.perf_counter() - start}


def compile_fn(fn, args) -> dict:
    """:func:`compile_program`'s row, with the compiled program's HBM temporaries and code size."""
    compiled, out = compile_program(fn, args)
    memory = compiled.memory_analysis() if compiled is not None else None
    if memory is not None:
        out["hbm_temp_bytes"] = int(memory.temp_size_in_bytes)
        out["code_bytes"] = int(memory.generated_code_size_in_bytes)
    return out


@dataclasses.dataclass(frozen=True)
class CompileJob:
    """What to compile: a geometry, a kernel config, a dtype and head count, for one TPU generation."""

    geometry: str = "720p"
    config: KernelConfig = KernelConfig(block_q=PRODUCTION.block_q, block_kv=PRODUCTION.block_kv)
    device: str = PRODUCTION.device
    topology: str | None = None
    dtype: str = "bfloat16"
    heads: int = 5
    head_dim: int = 128
    kept: float | None = None
    multiplier: float | None = None
    align: str | None = None

    def __post_init__(self):  # one line on a bad geometry, block or head size, before any compile
        from svgtpu.geometry import get_geometry
        check_blocks_cover(self.config.block_q, self.config.block_kv, get_geometry(self.geometry).L)
        if self.head_dim not in HEAD_DIMS:
            raise BadInput(f"head_dim must be one of {HEAD_DIMS} (the kernel's head sizes), got {self.head_dim!r}")

    def svg_config(self):
        from svgtpu.attention.svg import SVGConfig
        return SVGConfig(multiplier=self.multiplier, kept=self.kept, block_q=self.config.block_q,
                         block_kv=self.config.block_kv, block_kv_compute=self.config.block_kv_compute,
                         align=self.align, fast_path=self.config.fast_path)


def _plan_facts(mask, L: int, job: CompileJob, head_dim: int, dtype: str) -> dict:
    """The plan's SMEM use (largest chunk), steps and chunks, and the VMEM estimate, before compiling."""
    config, memory = job.config, device_memory(job.device)
    plan = tile_plan(mask, L, config.block_q, config.block_kv, config.fast_path)
    chunks = plan.chunks(memory.smem_budget)
    return {"smem_bytes": max(c.smem_bytes for c in chunks), "smem_budget": memory.smem_budget,
            "unsplit_smem_bytes": plan.smem_bytes, "plan_chunks": len(chunks),
            "plan_steps": sum(c.steps for c in chunks), "tile_density": plan.as_dict()["density"],
            "vmem_bytes": vmem_bytes(config, head_dim, 2 if dtype == "bfloat16" else 4,
                                     plan.mask_source == "blocks"),
            "mask_source": plan.mask_source}


def _kernel_target(job: CompileJob, dev):
    import jax
    import jax.numpy as jnp
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.api import block_sparse
    g = get_geometry(job.geometry)
    mask = job.svg_config().mask(g)
    x = jax.ShapeDtypeStruct((job.heads, g.L, job.head_dim), jnp.dtype(job.dtype),
                             sharding=jax.sharding.SingleDeviceSharding(dev))
    fn = lambda q, k, v: block_sparse(q, k, v, mask, config=job.config, implementation="mosaic",  # noqa: E731
                                      device=job.device)
    return fn, (x, x, x), _plan_facts(mask, g.L, job, job.head_dim, job.dtype), str(g)


def _svg_layer_target(job: CompileJob, dev):
    import jax
    import jax.numpy as jnp
    from svgtpu.attention.svg import svg_attention
    from svgtpu.geometry import get_geometry
    g = get_geometry(job.geometry)
    svg = job.svg_config()
    sharding = jax.sharding.SingleDeviceSharding(dev)
    x = jax.ShapeDtypeStruct((job.heads, g.L, job.head_dim), jnp.dtype(job.dtype), sharding=sharding)
    key = jax.ShapeDtypeStruct((2,), jnp.uint32, sharding=sharding)

    def fn(q, k, v, key):  # a call past SVG's dense warm-up: the sparse path compiles
        return svg_attention(q, k, v, g, svg, key=key, **PRODUCTION.sparse_call())
    return fn, (x, x, x, key), _plan_facts(svg.mask(g), g.L, job, job.head_dim, job.dtype), str(g)


def dit_step_program(model, attention, sharding, num_steps: int = 20):
    """``(fn, abstract args)`` of one guided toy-DiT step (CFG pair, ``attention`` backend) with every
    input placed by ``sharding``: what the single-chip and the multi-host compile targets lower."""
    import jax
    import jax.numpy as jnp
    from svgtpu.toy.dit import init_params
    from svgtpu.toy.sampler import guided_velocity

    def spec(shape, dtype):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

    params = jax.tree.map(lambda a: spec(a.shape, a.dtype),
                          jax.eval_shape(lambda key: init_params(model, key), jax.random.key(0)))
    x = spec((1, model.frames, model.height, model.width, model.channels), jnp.float32)
    args = (params, x, spec((), jnp.float32), spec((1,), jnp.int32), spec((), jnp.float32), spec((), jnp.int32),
            spec((2,), jnp.uint32))

    def fn(params, x, t, labels, guidance, step, key):
        return guided_velocity(params, x, t, labels, guidance, step, jax.random.wrap_key_data(key),
                               config=model, attention=attention, num_steps=num_steps)[0]
    return fn, args


def _dit_step_target(job: CompileJob, dev):
    import jax
    from svgtpu.attention.backends import attention_backend
    from svgtpu.toy.dit import DiTConfig
    model = DiTConfig()
    g = model.geometry
    svg = job.svg_config()
    fn, args = dit_step_program(model, attention_backend("svg", g, svg_config=svg),
                                jax.sharding.SingleDeviceSharding(dev))
    return fn, args, _plan_facts(svg.mask(g), g.L, job, model.head_dim, "float32"), str(g)


def _svg2_layer_target(job: CompileJob, dev):
    import jax
    import jax.numpy as jnp
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.dynamic import cluster_vmem_bytes, plan_facts
    from svgtpu.attention.svg2 import WAN_CLUSTERS, SVG2Config, SVG2State, svg2_attention
    g = get_geometry(job.geometry)
    svg2 = SVG2Config(**WAN_CLUSTERS,
                      block_q=job.config.block_q, block_kv=job.config.block_kv, align=job.align,
                      fast_path=job.config.fast_path)
    sharding = jax.sharding.SingleDeviceSharding(dev)
    x = jax.ShapeDtypeStruct((job.heads, g.L, job.head_dim), jnp.dtype(job.dtype), sharding=sharding)
    centroids = [jax.ShapeDtypeStruct((job.heads, c, job.head_dim), jnp.float32, sharding=sharding)
                 for c in (svg2.q_clusters, svg2.k_clusters)]

    def fn(q, k, v, q_centroids, k_centroids):  # a warm-started call: every step after SVG2's first
        return svg2_attention(q, k, v, svg2, SVG2State(q_centroids, k_centroids))[0]
    facts = plan_facts(job.heads, g.L, job.config, device=job.device)
    extra = 0 if job.align else cluster_vmem_bytes(job.config, svg2.q_clusters, svg2.k_clusters)
    return fn, (x, x, x, *centroids), {
        "smem_bytes": facts["smem_bytes"], "smem_budget": facts["smem_budget"], "plan_chunks": facts["chunks"],
        "plan_steps": facts["steps_per_head"], "clusters": f"{svg2.q_clusters}x{svg2.k_clusters}",
        "vmem_bytes": vmem_bytes(job.config, job.head_dim, 2 if job.dtype == "bfloat16" else 4, False, extra),
        "mask_source": "padding" if job.align else "clusters"}, str(g)


_BUILDERS = {"kernel": _kernel_target, "svg-layer": _svg_layer_target, "dit-step": _dit_step_target,
             "svg2-layer": _svg2_layer_target}


def compile_targets(job: CompileJob, targets=("kernel", "svg-layer"), progress: bool = False) -> dict:
    """Compile each target for ``job.device``; per target: compiled or the compiler's one-line reason,
    compile seconds and the plan's SMEM / VMEM figures (provenance ``compiled-<device>``)."""
    for t in targets:
        if t not in TARGETS:
            raise BadInput(f"target must be one of {', '.join(TARGETS)}, got {t!r}")
    dev = topology_device(job.device, job.topology)
    rows = []
    items = targets
    if progress:
        from tqdm.auto import tqdm
        items = tqdm(targets, desc="compiling", unit="target")
    for target in items:
        with compiling_for(job.device):
            try:
                fn, args, facts, where = _BUILDERS[target](job, dev)
            except BadInput as e:  # the plan does not fit: refused before compiling
                rows.append({"target": target, "compiled": False, "reason": str(e), "refused_by": "svgtpu",
                             "compile_s": 0.0})
                continue
            result = compile_fn(fn, args)
        rows.append({"target": target, "geometry": where, **facts, **result})
    return {"provenance": f"compiled-{job.device}", "device": job.device,
            "topology": job.topology or DEFAULT_TOPOLOGY[job.device], "geometry": job.geometry,
            "block_q": job.config.block_q, "block_kv": job.config.block_kv,
            "block_kv_compute": job.config.block_kv_compute, "fast_path": job.config.fast_path,
            "dtype": job.dtype, "heads": job.heads, "head_dim": job.head_dim,
            "vmem_budget": device_memory(job.device).vmem_budget,
            "compiled": all(r["compiled"] for r in rows), "targets": rows,
            "libtpu": package_version("libtpu"), "jax": package_version("jax")}


def format_targets(result: dict) -> str:
    """:func:`compile_targets` as ``svgtpu compile`` prints it: the setting and budgets, one row per target."""
    from svgtpu.facts.tables import format_table
    columns = ["target", "geometry", "compiled", "compile_s", "plan_steps", "plan_chunks", "smem_bytes",
               "vmem_bytes", "reason"]
    head = (f"{result['topology']} ({result['provenance']}): tiles {result['block_q']}x{result['block_kv']}, "
            f"block_kv_compute {result['block_kv_compute']}, fast path {'on' if result['fast_path'] else 'off'}, "
            f"{result['dtype']}, {result['heads']} heads x {result['head_dim']}; SMEM budget per plan chunk "
            f"{device_memory(result['device']).smem_budget} B, VMEM limit {result['vmem_budget']} B "
            f"(vmem_bytes: our lower estimate; the compiler checks the real use)")
    return head + "\n" + format_table([{c: r.get(c) for c in columns} for r in result["targets"]])


__all__ = ["TARGETS", "format_targets", "dit_step_program", "DEFAULT_TOPOLOGY", "CompileJob", "compile_targets", "compile_fn", "compile_program",
           "topology_device", "libtpu_available", "require_libtpu", "first_line", "refusal"]
