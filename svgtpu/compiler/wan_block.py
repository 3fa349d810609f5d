"""One Wan 2.1 block compiled ahead of time for a TPU slice and read as static cycles per role (C1, C2).

``svgtpu compile --what wan-block``: one :class:`~svgtpu.model.wan.WanBlock` of Wan 2.1 14B (bf16 weights,
float32 residual stream) at a resolution, compiled with libtpu on this CPU for every chip of a slice
(``v6e:2x4x1``: v6e-8; ``tpu7x:2x2x1``: 4 v7x chips, 8 TensorCores), sharded as the cost model picks it
(:func:`parallel_plan`: CFG pair over ``data`` or not, Ulysses over ``seq``: q, k, v and the output
re-sharded by all-to-alls around self-attention; weights sharded over ``seq`` and all-gathered when
replicas do not fit).  Self-attention is our kernel at the production tiles, dense (``dense``) or Sparse
VideoGen with the default recipe's kept fraction snapped to the tiles (``svg``: online profiling, layout
transform, our kernel), at a step and layer past SVG's dense warm-up.

The compile runs in a child process with libtpu's schedule dumps on (:mod:`svgtpu.compiler.dumps`);
:mod:`svgtpu.compiler.fusions` reads every op's static cycles and role.  Our kernel's cycles are read as
``bench compiled`` reads a kernel (:func:`svgtpu.compiler.estimate.estimate`: per grid step the step
overhead, init / finish and the body of that step's tile kind, from the kernel's own plan), not as a
generic program (which would count its full and partial tile bodies at every step).  Results are records
(:func:`svgtpu.compiler.dumps.cached`) keyed by content: the job, its plan, the versions of jax and libtpu and
the sources the program is built and read from (:data:`SOURCES`).  Provenance ``compiled-<device>``: nothing ran.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.models import MODELS, ModelConfig
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION, Setting
from svgtpu.tpu_env import package_version

#: The slices compiled for: a TPU generation -> its libtpu topology and the chips the cost model counts.
SLICES = {"v6e": {"topology": "v6e:2x4x1", "chips": 8}, "v7x": {"topology": "tpu7x:2x2x1", "chips": 4}}
VARIANTS = ("dense", "svg")
#: Where our kernel's cycles come from: compiled inside the block (``in-block``), or from its own compile
#: (``own-compile``: ``bench compiled``'s cached kernel at the same tiles and mask, re-bounded to the block's
#: plan; the block is then compiled with the kernel call left out, ``q + 0 * (k + v)`` in its place, one
#: elementwise pass that keeps everything feeding the kernel live: cheaper to compile; the cpu profile runs it).
KERNEL_READINGS = ("in-block", "own-compile")
#: Bump when the way a block is compiled or read changes (the cache key holds it).
SCHEMA = 1
#: The package files a block record is made of (its key hashes them): every module building and lowering the
#: block imports, the readers of its compile and the device specs they price cycles with (``costmodel/specs.py``);
#: ``tests/test_wan_block.py`` checks a fresh build imports nothing else.  The rest of the cost model decides
#: only the mesh (:func:`parallel_plan`): the plan is in the key, not the cost model's sources.
SOURCES = ("__init__.py", "errors.py", "tpu_env.py", "geometry.py", "recipes.py", "setting.py", "warmup.py",
           "facts/__init__.py", "facts/kernels.py", "model/__init__.py", "models.py", "model/sharded.py",
           "model/wan.py", "masks/__init__.py", "masks/core.py", "masks/families.py", "masks/tiles.py",
           "kernels/__init__.py", "kernels/api.py", "kernels/band_table.py", "kernels/block_sparse.py",
           "kernels/budget.py", "kernels/common.py", "kernels/config.py", "kernels/dynamic.py",
           "kernels/dynamic_plan.py", "kernels/fixed_max.py", "kernels/plan.py", "kernels/reference.py", "baselines/__init__.py",
           "baselines/splash.py", "attention/__init__.py", "attention/backends.py", "attention/base.py",
           "attention/profiling.py", "attention/sharding.py", "attention/svg.py", "attention/svg2.py",
           "costmodel/specs.py", "compiler/__init__.py", "compiler/compile.py", "compiler/dumps.py",
           "compiler/estimate.py", "compiler/fusions.py", "compiler/llo.py", "compiler/multihost.py",
           "compiler/units.py", "compiler/variants.py", "compiler/wan_block.py")


@dataclasses.dataclass(frozen=True)
class BlockJob:
    """One block to compile: the run's :class:`~svgtpu.setting.Setting` (the model, its resolution, the TPU
    generation (:data:`SLICES`, whose chip count it takes), the kernel's tiles and SVG's kept fraction), the
    self-attention variant (:data:`VARIANTS`) and where the kernel's cycles come from (:data:`KERNEL_READINGS`).
    ``shapes``: a model of its own instead of the setting's named one (the cpu profile's tiny block; the setting
    names it)."""

    setting: Setting
    variant: str = "dense"
    kernel: str = "in-block"
    shapes: ModelConfig | None = None

    def __post_init__(self):
        from svgtpu.geometry import get_geometry
        from svgtpu.kernels.config import KernelConfig, check_blocks_cover
        # a job that went through JSON to the child compile comes back as dicts
        if isinstance(self.setting, dict):
            object.__setattr__(self, "setting", Setting(**self.setting))
        if isinstance(self.shapes, dict):
            object.__setattr__(self, "shapes", ModelConfig(**self.shapes))
        s = self.setting
        if self.shapes is None and s.model not in MODELS:
            raise BadInput(f"model must be one of {', '.join(MODELS)}, got {s.model!r}")
        if self.shapes is not None and self.shapes.name != s.model:
            raise BadInput(f"shapes must be the setting's model {s.model!r}, got {self.shapes.name!r}")
        if s.device not in SLICES:
            raise BadInput(f"device must be one of {', '.join(SLICES)} (the slices compiled for), "
                             f"got {s.device!r}")
        object.__setattr__(self, "setting", dataclasses.replace(s, chips=SLICES[s.device]["chips"]))
        if self.variant not in VARIANTS:
            raise BadInput(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        KernelConfig(s.block_q, s.block_kv)
        check_blocks_cover(s.block_q, s.block_kv, get_geometry(s.resolution).L)
        if s.kept is None or not 0 < s.kept < 1:
            raise BadInput(f"kept must be in the open interval (0, 1) (a block compiles SVG at a kept fraction, "
                           f"not a band multiplier), got kept {s.kept!r}, multiplier {s.multiplier!r}")
        if self.kernel not in KERNEL_READINGS:
            raise BadInput(f"kernel must be one of {', '.join(KERNEL_READINGS)}, got {self.kernel!r}")

    @property
    def model(self) -> "str | ModelConfig":
        """The model as the cost model takes it: the setting's name, or the block's own shapes."""
        return self.shapes or self.setting.model

    @property
    def config(self) -> ModelConfig:
        """The model's shapes."""
        return self.shapes or MODELS[self.setting.model]

    @property
    def name(self) -> str:
        s = self.setting
        return f"{s.model}-{s.resolution}-{s.device}-{self.variant}" + ("" if self.kernel == "in-block" else
                                                                           "-own-kernel")

    def svg_config(self):
        """SVG's settings: the kept fraction snapped to the kernel's tiles."""
        from svgtpu.attention.svg import SVGConfig
        s = self.setting
        return SVGConfig(kept=s.kept, block_q=s.block_q, block_kv=s.block_kv, align="snap")

    def mask(self):
        """The mask our kernel runs in this block (dense, or SVG's aligned band)."""
        from svgtpu.geometry import get_geometry
        from svgtpu.masks.core import DenseMask
        g = get_geometry(self.setting.resolution)
        return DenseMask(g.L) if self.variant == "dense" else self.svg_config().mask(g)


def parallel_plan(job: BlockJob) -> dict:
    """How the cost model runs one pass on the slice: of its one-slice configurations
    (:func:`svgtpu.costmodel.multihost.configurations`: CFG split or not) the one with the shortest SVG
    video, as :func:`~svgtpu.costmodel.multihost.multihost_sweep` picks; with the mesh that gives on the
    slice's devices (``data`` = the CFG pair when split, ``seq`` = the rest)."""
    from svgtpu.costmodel.multihost import configurations, model_configuration
    from svgtpu.costmodel.specs import get_device
    chips = SLICES[job.setting.device]["chips"]
    options = [model_configuration(job.model, job.setting.resolution, job.setting.device, chips, **c)
               for c in configurations(chips, get_device(job.setting.device)) if c["slices"] == 1]
    best = min(options, key=lambda r: r["svg_minutes"])
    cores = get_device(job.setting.device).cores
    data = 2 if best["cfg_split"] else 1
    return {"chips": chips, "devices": chips * cores, "cfg_split": best["cfg_split"],
            "chips_per_pass": best["chips_per_pass"], "weights_sharded": best["weights_sharded"],
            "mesh": {"data": data, "seq": chips * cores // data}, "why": "shortest modeled SVG video of "
            + ", ".join(f"{'CFG split' if r['cfg_split'] else 'no CFG split'} {r['svg_minutes']:.2f} min"
                        for r in options)}


def block_program(job: BlockJob, devices, plan: dict):
    """``(fn, abstract args)``: one block on every device of ``devices`` under ``plan``'s mesh
    (:func:`svgtpu.model.sharded.block_program`), self-attention our kernel dense or SVG."""
    from svgtpu.geometry import get_geometry
    from svgtpu.model.sharded import block_program as sharded_block
    from svgtpu.model.wan import self_attention
    g = get_geometry(job.setting.resolution)
    attention = self_attention("ours-dense" if job.variant == "dense" else "svg", g, tile=job.setting.tile,
                               svg_config=job.svg_config())
    return sharded_block(job.config, g, devices, plan["mesh"]["data"], attention,
                         shard_weights=plan["weights_sharded"], name=job.name)


def slice_devices(device: str) -> list:
    """Every device of the slice compiled for on ``device`` (:data:`SLICES`), from libtpu's topology."""
    from jax.experimental import topologies

    from svgtpu.compiler.compile import require_libtpu
    require_libtpu()
    return list(topologies.get_topology_desc(platform="tpu", topology_name=SLICES[device]["topology"]).devices)


def _compile_child(spec: dict, out: str) -> None:
    """Child process: compile one block (libtpu dumps into the folder its flags name)."""
    import sys

    import jax

    from svgtpu.compiler.compile import first_line
    from svgtpu.kernels.common import compiling_for
    job = BlockJob(**spec["job"])
    if job.kernel == "own-compile":  # this process compiles the program around the kernel (KERNEL_READINGS)
        from svgtpu.kernels import api
        api.block_sparse = lambda q, k, v, mask, **_: q + 0 * (k + v)
    devices = slice_devices(job.setting.device)
    fn, args = block_program(job, devices, spec["plan"])
    with compiling_for(job.setting.device):
        lowered = jax.jit(fn).lower(*args)  # our tracing: a bug here is a traceback, never a refusal
        start = time.perf_counter()
        try:
            compiled = lowered.compile()
        except Exception as e:  # noqa: BLE001 - the compiler's refusal, in one line
            sys.exit(f"not compiled: {first_line(e)}")
    memory = compiled.memory_analysis()
    Path(out).write_text(json.dumps({"compile_s": time.perf_counter() - start,
                                     "hbm_temp_bytes": int(memory.temp_size_in_bytes) if memory else None}))


def kernel_variant(job: BlockJob, geometry: str | None = None):
    """Our kernel in ``job``'s block as :mod:`svgtpu.compiler.variants` names a variant (one head, fast path on),
    at ``geometry`` (default: the block's resolution)."""
    from svgtpu.compiler.variants import Variant
    from svgtpu.kernels.config import KernelConfig
    config = KernelConfig(job.setting.block_q, job.setting.block_kv)
    return Variant("ours", "dense" if job.variant == "dense" else "svg-aligned", geometry or job.setting.resolution,
                   job.setting.block_q, job.setting.block_kv, config.block_kv_compute, head_dim=job.config.head_dim,
                   device=job.setting.device)


def kernel_cycles(job: BlockJob, heads: int, schedules: list[dict], fill: int | None = None) -> dict:
    """Our kernel's cycles in ``job``'s block, read as :func:`svgtpu.compiler.estimate.estimate` reads a
    compiled kernel: ``heads`` heads per device, each walking the plan of the block's mask, with
    ``schedules`` (:class:`~svgtpu.compiler.llo.Schedule` dicts).  Given ``fill`` (the grid loop's iterations
    beyond its steps), one schedule stands for every plan chunk at any length: the program is the same but
    for its grid loop's bound (its tile bodies, step overhead and once-per-call code do not depend on the
    sequence length)."""
    from svgtpu.compiler.estimate import estimate
    from svgtpu.compiler.variants import steps_ours
    from svgtpu.geometry import get_geometry
    v = kernel_variant(job)
    calls = [steps * heads for steps in steps_ours(v, job.mask(), get_geometry(job.setting.resolution).L)]
    if fill is not None:
        schedules = [schedules[0]] * len(calls)
    if len(schedules) != len(calls):
        raise RuntimeError(f"{job.name}: {len(schedules)} kernel programs for {len(calls)} plan chunks")
    order = sorted(range(len(calls)), key=lambda i: len(calls[i]))  # pair by grid size, as bench compiled does
    paired = [None] * len(calls)
    for i, s in zip(order, sorted(schedules, key=lambda s: s["iterations"] or 0)):
        paired[i] = s
    fills = [fill if fill is not None else s["iterations"] - len(c) for s, c in zip(paired, calls)]
    row = estimate({"schedules": paired, "fills": fills, "calls": calls}, v)
    return {"cycles": row["cycles"], "steps": row["steps"], "heads": heads, "body_cycles": row["body_cycles"],
            "overhead_cycles": row["overhead_cycles"], "hbm_bytes": row["hbm_bytes"], "schedule": paired[0],
            "fill": fills[0]}


def own_compile_schedule(job: BlockJob) -> tuple[dict, int]:
    """Our kernel's schedule from its own compile (``bench compiled``'s cached variant, one head, same tiles
    and mask): at the production resolution for the production tiles (notebook 04 compiles it), else at the
    block's resolution; ``(schedule, fill)``."""
    from svgtpu.compiler.variants import cached_compile
    if job.setting.kept != DEFAULT_KEPT:
        raise BadInput(f"the kernel's own compile (bench compiled) is at the default kept fraction ({DEFAULT_KEPT}); "
                       f"got kept {job.setting.kept}")
    production = (job.setting.block_q, job.setting.block_kv) == (PRODUCTION.block_q, PRODUCTION.block_kv)
    compiled = cached_compile(kernel_variant(job, PRODUCTION.resolution if production else job.setting.resolution))
    if "refused" in compiled:
        raise BadInput(f"our kernel does not compile for {job.setting.device} at {job.setting.block_q}x{job.setting.block_kv}: "
                       f"{compiled['refused']}")
    return compiled["schedules"][0], compiled["fills"][0]


def compile_in_child(job: BlockJob, read, flags: str = ""):
    """Compile ``job`` in a child process with its schedules dumped (``flags`` put before ``LIBTPU_INIT_ARGS``) and
    return ``read(facts, dump folder, scheduled HLO text)`` while the dumps exist, or ``{"refused": reason}``."""
    from svgtpu.compiler.dumps import child_env, run_child
    spec = {"job": dataclasses.asdict(job), "plan": parallel_plan(job)}
    with tempfile.TemporaryDirectory() as tmp:
        jf, out = Path(tmp, "jf"), Path(tmp, "facts.json")
        code = (f"import json, svgtpu.compiler.wan_block as m; "
                f"m._compile_child(json.loads({json.dumps(json.dumps(spec))}), {str(out)!r})")
        env = child_env(jf)
        env["LIBTPU_INIT_ARGS"] = f"{flags} {env['LIBTPU_INIT_ARGS']}".strip()
        done = run_child(code, env, job.name)
        if done.returncode:
            return {"refused": done.stderr.strip().splitlines()[-1][len("not compiled: "):]}
        return read(json.loads(out.read_text()), jf, next(jf.glob("*TLP-hlo.txt")).read_text())


def compile_block(job: BlockJob) -> dict:
    """Compile ``job`` in a child process with the dumps on and read it: cycles per role, our kernel's
    reading, the collectives' bytes per device (or ``{"refused": reason}``)."""
    from svgtpu.compiler.dumps import final_schedule
    from svgtpu.compiler.fusions import ROLES, read_dump, role_cycles
    from svgtpu.compiler.llo import read_schedule
    from svgtpu.compiler.multihost import hlo_collectives

    def read(facts, jf, hlo):
        reading = read_dump(jf, hlo)
        kernels = [r for r in reading["ops"] if "block_sparse_attention" in r["program"]]
        schedules = [dataclasses.asdict(read_schedule(final_schedule(jf, r["program"]))) for r in kernels]
        return {"facts": facts, "hlo": hlo, "reading": reading, "kernels": kernels, "schedules": schedules}
    done = compile_in_child(job, read)
    if "refused" in done:
        return done
    facts, hlo, reading, kernels, schedules = (done[k] for k in ("facts", "hlo", "reading", "kernels", "schedules"))
    plan = parallel_plan(job)
    heads = job.config.heads // plan["mesh"]["seq"]
    generic = sum(r["cycles"] for r in kernels)
    if job.kernel == "in-block":
        kernel = kernel_cycles(job, heads, schedules)
        for r in kernels:  # the kernel's reading replaces the generic count of its programs
            r["cycles"] = kernel["cycles"] * r["cycles"] // generic if generic else 0
    else:
        if kernels:
            raise RuntimeError(f"{job.name}: the kernel was to be left out, yet the block holds {len(kernels)}")
        schedule, fill = own_compile_schedule(job)
        kernel = kernel_cycles(job, heads, [schedule], fill)
        reading["ops"].append({"name": "our kernel (own compile)", "opcode": "custom-call", "scope": "self_attention",
                               "role": "self-attention", "program": "bench compiled", "flops": 0,
                               "bundles": None, "cycles": kernel["cycles"], "calls": 1, "dynamic_loops": 0})
    roles = role_cycles(reading)
    total = sum(roles.values())
    collectives = {k: c for k, c in hlo_collectives(hlo).items() if c["count"]}
    return {"job": dataclasses.asdict(job), "name": job.name, "provenance": f"compiled-{job.setting.device}",
            "topology": SLICES[job.setting.device]["topology"], "plan": plan, "compile_s": facts["compile_s"],
            "hbm_temp_bytes": facts["hbm_temp_bytes"], "total_cycles": total,
            "roles": {role: {"cycles": roles[role], "share": roles[role] / total} for role in ROLES},
            "kernel": kernel | {"generic_cycles": generic, "share": kernel["cycles"] / total},
            "collectives": collectives,
            "dynamic": {"ops": sum(r["dynamic_loops"] > 0 for r in reading["ops"]),
                        "share": sum(r["cycles"] for r in reading["ops"] if r["dynamic_loops"]) / total},
            "top_level": reading["top_level"], "unmatched": reading["unmatched"], "programs": reading["programs"],
            "ops": sorted(reading["ops"], key=lambda r: -r["cycles"]),
            "versions": {"jax": package_version("jax"), "libtpu": package_version("libtpu")}}


def cached_compile_block(job: BlockJob) -> dict:
    """:func:`compile_block`, a record (:func:`svgtpu.compiler.dumps.cached`) in ``wan-block/`` keyed by the job,
    its plan (:func:`parallel_plan`, less the reason), :data:`SCHEMA` and :data:`SOURCES`; its plan's reason as
    the cost model gives it now."""
    from svgtpu.compiler.dumps import cached
    plan = parallel_plan(job)
    decided = {k: v for k, v in plan.items() if k != "why"}
    record = cached("wan-block", job.name, {"job": dataclasses.asdict(job), "plan": decided, "block_schema": SCHEMA},
                    SOURCES, lambda: compile_block(job))
    return record if "refused" in record else record | {"plan": plan}


def compile_blocks(jobs, workers: int = 2, progress: bool = False) -> list[dict]:
    """:func:`cached_compile_block` of every job, in the order given, ``workers`` child compiles at once (each
    a few GB), the longest first (SVG before dense, then by tokens), so the
    last to start is a short one."""
    import concurrent.futures

    from svgtpu.geometry import get_geometry
    jobs = list(jobs)
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].variant != "svg", -get_geometry(jobs[i].setting.resolution).L))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(cached_compile_block, jobs[i]): i for i in order}
        done = concurrent.futures.as_completed(futures)
        if progress:
            from tqdm.auto import tqdm
            done = tqdm(done, total=len(jobs), desc="compiling Wan blocks", unit="block")
        results = {futures[f]: f.result() for f in done}
    return [results[i] for i in range(len(jobs))]


#: The cost model's ops (:func:`svgtpu.costmodel.forward_breakdown`) by the role their compiled
#: counterpart has (:data:`svgtpu.compiler.fusions.ROLES`); patch embedding and head are outside a block.
MODELED_ROLES = {"qkv_proj": "projections", "o_proj": "projections", "cross_q_proj": "cross-attention",
                 "cross_kv_proj": "cross-attention", "cross_attention": "cross-attention",
                 "cross_o_proj": "cross-attention", "norm_cross": "cross-attention", "ffn_in": "ffn", "ffn_out": "ffn",
                 "gelu": "ffn", "norm_modulate": "norms/modulation", "qk_rmsnorm": "norms/modulation",
                 "rope": "norms/modulation", "residual": "norms/modulation", "communication": "collectives",
                 "weight_gather": "collectives", "self_attention": "self-attention"}


def modeled_block(job: BlockJob) -> dict:
    """The cost model's seconds of the same block on one chip, by role, with the same split as the compile
    (:func:`parallel_plan`): the dense block from :func:`~svgtpu.costmodel.forward_breakdown`, the SVG
    block's self-attention the model's sparse layer (kernel tiles, profiling, layout transform, its
    sparse efficiency) without warm-up.  Provenance ``modeled-<device>``."""
    from svgtpu import costmodel
    from svgtpu.compiler.fusions import ROLES
    plan = parallel_plan(job)
    setup = costmodel.calibrated_setup(job.model, job.setting.resolution, job.setting.device, chips=plan["chips"],
                                       cfg_split=plan["cfg_split"], block_q=job.setting.block_q, block_kv=job.setting.block_kv,
                                       kept=job.setting.kept)
    breakdown, layers = costmodel.forward_breakdown(setup), setup.model.layers
    roles = dict.fromkeys(ROLES, 0.0)
    for op, seconds in breakdown.items():
        if op in MODELED_ROLES:
            roles[MODELED_ROLES[op]] += seconds / layers
    if job.variant == "svg":
        sparse = dataclasses.replace(setup, warmup_steps=0.0, warmup_layers=0.0)
        per_pass = costmodel.dit_seconds(sparse, "svg-aligned", True) / (setup.sequential_passes * setup.steps)
        others = sum(v for k, v in breakdown.items() if k != "self_attention")
        roles["self-attention"] = (per_pass - others) / layers
    total = sum(roles.values())
    return {"provenance": setup.provenance, "total_seconds": total,
            "roles": {role: {"seconds": roles[role], "share": roles[role] / total} for role in ROLES}}


def role_rows(results: list[dict]) -> list[dict]:
    """One row per (block, role): resolution, device, variant, role, static cycles and share of the block."""
    from svgtpu.compiler.fusions import ROLES
    return [{"resolution": r["job"]["setting"]["resolution"], "device": r["job"]["setting"]["device"], "variant": r["job"]["variant"],
             "role": role, "cycles": r["roles"][role]["cycles"], "share": r["roles"][role]["share"]}
            for r in results if "roles" in r for role in ROLES]


def wan_block_command(resolution: str, device: str, block_q: int, block_kv: int, kept: float | None, *,
                      progress: bool) -> tuple[dict, str, int]:
    """``svgtpu compile --what wan-block``: dense and SVG blocks at ``resolution`` (``wan-`` prefix allowed) for
    ``device``; ``(result, table, exit status)`` (1 when the compiler refused one)."""
    from svgtpu.facts.tables import format_table
    setting = dataclasses.replace(PRODUCTION, resolution=resolution.removeprefix("wan-"), device=device,
                                  block_q=block_q, block_kv=block_kv, kept=kept)
    jobs = [BlockJob(setting, variant) for variant in VARIANTS]
    results = compile_blocks(jobs, progress=progress)
    refused = {r_job.name: r["refused"] for r_job, r in zip(jobs, results) if "refused" in r}
    lines = [f"one {setting.model} block, {setting.resolution}, {SLICES[device]['topology']} "
             f"({results[0].get('provenance', 'compiled-' + device)}); static cycles per device by role "
             "(issue cycles: stalls on memory, the other chips and the host are outside them)"]
    lines.append(format_table(role_rows(results), ["variant", "role", "cycles", "share"]))
    for job, r in zip(jobs, results):
        if "refused" in r:
            lines.append(f"{job.name}: not compiled: {r['refused']}")
            continue
        plan, k = r["plan"], r["kernel"]
        lines.append(f"{job.variant}: mesh {plan['mesh']} ({'CFG split' if plan['cfg_split'] else 'no CFG split'}, "
                     f"weights {'sharded' if plan['weights_sharded'] else 'replicated'}); our kernel {k['heads']} "
                     f"heads x {k['steps'] // k['heads']} steps = {k['cycles']:,} cycles; collectives per device: "
                     + ", ".join(f"{kind} {c['count']} x, {c['bytes'] / 1e6:.1f} MB" for kind, c in
                                 r["collectives"].items()))
    if all("roles" in r for r in results):
        dense, svg = results
        lines.append(f"SVG / dense block cycles: {svg['total_cycles'] / dense['total_cycles']:.3f}")
    return {"blocks": results, "refused": refused}, "\n".join(lines), 1 if refused else 0


__all__ = ["SLICES", "VARIANTS", "KERNEL_READINGS", "SCHEMA", "SOURCES", "MODELED_ROLES", "BlockJob",
           "parallel_plan", "block_program", "slice_devices", "kernel_variant", "kernel_cycles", "own_compile_schedule",
           "compile_block", "cached_compile_block", "compile_blocks", "modeled_block", "role_rows",
           "wan_block_command"]
