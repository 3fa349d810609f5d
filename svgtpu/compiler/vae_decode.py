"""Wan 2.1's VAE decoder compiled ahead of time for one TPU chip, read as static cycles: the VAE-decode stage's
instrument (issue 61).

``svgtpu compile --what vae-decode``: :func:`svgtpu.model.vae.decode_chunk` (random weights, float32 as Wan and
MaxDiffusion decode) compiled with libtpu on this CPU for one chip of ``device``, twice, as Wan decodes a video:
the first latent frame (one output frame, the temporal upsamplers skipped) and a later one (four frames, the
caches of the chunk before it as inputs), each in a child process of its own (a fresh libtpu and dump folder
per program), the later chunk first.  Each program is read as :mod:`svgtpu.compiler.fusions` reads a Wan
block: every fusion's static cycles weighted by its loops' trip counts, plus the top-level program's own.  One
difference: a top-level program as large as the 720p later chunk's calls its ops' programs with ``call`` where a
smaller one writes ``inlined_call`` (same operands, same ``/* %op = ... */`` note naming the op), which the block's
reader does not look for; :func:`calls_as_inlined` rewrites the one word before reading, so each called program counts
once per call either way (a call's own bundle is the top-level program's, counted there).  A video
of ``T`` latent frames is ``first + (T - 1) x later`` (:func:`svgtpu.costmodel.stages.decode_cycles`).  Records are content-keyed like the
block's (:func:`svgtpu.compiler.dumps.cached`: the job, :data:`SOURCES`, jax and libtpu versions) under
``vae-decode/``; the cost model reads them JAX-free (:mod:`svgtpu.costmodel.stages`).  Static cycles are issue
cycles: stalls on HBM are outside them.  Provenance ``compiled-<device>``: nothing ran.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

from svgtpu.errors import BadInput

#: The package files a record is made of (its key hashes them).
SOURCES = ("__init__.py", "errors.py", "tpu_env.py", "geometry.py", "recipes.py", "models.py", "model/__init__.py",
           "model/vae.py", "kernels/common.py", "compiler/__init__.py", "compiler/compile.py", "compiler/dumps.py",
           "compiler/fusions.py", "compiler/llo.py", "compiler/vae_decode.py")
#: The two programs of a record, in the order a video runs them.
CHUNKS = ("first", "later")
#: The TPU generations a decode compiles for (one chip each: v6e's one TensorCore).
DEVICES = ("v6e",)


@dataclasses.dataclass(frozen=True)
class DecodeJob:
    """One decode to compile: the video's resolution (a preset, :data:`svgtpu.geometry.PRESETS`) and the TPU."""

    resolution: str
    device: str = "v6e"
    dtype: str = "float32"

    def __post_init__(self):
        from svgtpu.geometry import PRESETS
        if self.resolution not in PRESETS:
            raise BadInput(f"resolution must be one of {', '.join(PRESETS)}, got {self.resolution!r}")
        if self.device not in DEVICES:
            raise BadInput(f"device must be one of {', '.join(DEVICES)} (the chips a decode compiles for), "
                           f"got {self.device!r}")
        if self.dtype != "float32":
            raise BadInput(f"dtype must be float32 (Wan's and MaxDiffusion's VAE), got {self.dtype!r}")

    @property
    def name(self) -> str:
        return f"wan2.1-vae-{self.resolution}-{self.device}"

    @property
    def latent(self) -> tuple[int, int, int]:
        """Latent frames and pixels ``(T, h, w)``: the token grid's frames, twice its rows and columns."""
        from svgtpu.geometry import get_geometry
        g = get_geometry(self.resolution)
        return g.T, 2 * g.H, 2 * g.W


def programs(job: DecodeJob):
    """``{chunk: (fn, abstract args)}``: the first and a later chunk on one latent frame of ``job``."""
    import jax
    import jax.numpy as jnp

    from svgtpu.model import vae
    dtype = jnp.dtype(job.dtype)
    _, h, w = job.latent
    params = jax.eval_shape(lambda: vae.init_decoder(jax.random.key(0), dtype=dtype))
    z = jax.ShapeDtypeStruct((1, 1, h, w, 16), dtype)
    _, caches = jax.eval_shape(lambda p, x: vae.decode_chunk(p, x, first=True), params, z)
    return {"first": (lambda p, x: vae.decode_chunk(p, x, first=True)[0], (params, z)),
            "later": (lambda p, x, c: vae.decode_chunk(p, x, c, first=False), (params, z, caches))}


_CALL = re.compile(r"(%\w+ = )call (?=[^/{}]*/\* %)")


def calls_as_inlined(jf: Path) -> int:
    """Rewrite the top-level program's out-of-line ``call``s of ops in dump folder ``jf`` as the ``inlined_call``s the
    dump reader counts (module doc); how many it rewrote."""
    files = [p for p in jf.glob("*-TLP-*final_bundles.txt") if "schedule-analysis" not in p.name]
    if len(files) != 1:
        raise RuntimeError(f"expected one top-level final schedule in {jf}, found {len(files)}")
    text, n = _CALL.subn(r"\1inlined_call ", files[0].read_text())
    files[0].write_text(text)
    return n


def _compile_child(spec: dict, chunk: str, folder: str) -> None:
    """Child process: compile one chunk of ``spec``'s decode for one core, its dumps in ``folder/jf``."""
    import jax

    from svgtpu.compiler.compile import first_line, topology_device
    job = DecodeJob(**spec)
    sharding = jax.sharding.SingleDeviceSharding(topology_device(job.device))
    fn, args = programs(job)[chunk]
    specs = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), args)
    start = time.perf_counter()
    try:
        compiled = jax.jit(fn).lower(*specs).compile()
    except Exception as e:  # noqa: BLE001 - the compiler's refusal, in one line
        raise SystemExit(f"not compiled: {chunk} chunk: {first_line(e)}")
    memory = compiled.memory_analysis()
    Path(folder, "facts.json").write_text(json.dumps(
        {"compile_s": time.perf_counter() - start,
         "hbm_temp_bytes": int(memory.temp_size_in_bytes) if memory else None}))


def compile_decode(job: DecodeJob) -> dict:
    """Compile ``job``'s two chunks, each in a child process of its own with the dumps on, and read them: per
    chunk its static cycles (fusions and the top-level program), its matmul FLOPs, its largest ops; or
    ``{"refused": reason}``.  A chunk whose reading is empty stops the compile (no record), its dumps kept
    under ``build/vae-decode-dumps/`` for a look."""
    from svgtpu.compiler.dumps import child_env, run_child
    from svgtpu.compiler.fusions import read_dump
    chunks = {}
    for chunk in CHUNKS[::-1]:   # the later chunk first: the larger reading, the one that failed before
        with tempfile.TemporaryDirectory() as tmp:
            code = (f"import json, svgtpu.compiler.vae_decode as m; m._compile_child("
                    f"json.loads({json.dumps(json.dumps(dataclasses.asdict(job)))}), {chunk!r}, {tmp!r})")
            done = run_child(code, child_env(Path(tmp, "jf")), f"{job.name} {chunk}")
            if done.returncode:
                return {"refused": done.stderr.strip().splitlines()[-1][len("not compiled: "):]}
            facts = json.loads(Path(tmp, "facts.json").read_text())
            facts["out_of_line_calls"] = calls_as_inlined(Path(tmp, "jf"))
            reading = read_dump(Path(tmp, "jf"))
            ops = sorted(reading["ops"], key=lambda r: -r["cycles"])
            if not ops:   # the top-level program's calls went unread: no record is better than its bundles alone
                from svgtpu.facts.paths import BUILD_DIR
                kept = BUILD_DIR / "vae-decode-dumps" / f"{job.name}-{chunk}"
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(tmp, kept)
                raise RuntimeError(f"{job.name}: the {chunk} chunk's top-level program calls no op the dump reader "
                                   f"matched ({reading['top_level']['bundles']} bundles of its own, "
                                   f"{len(reading['unmatched'])} calls unmatched; dumps in {kept})")
        fusions = sum(r["cycles"] for r in ops)
        chunks[chunk] = {**facts, "cycles": fusions + reading["top_level"]["cycles"],
                         "fusion_cycles": fusions, "top_level": reading["top_level"],
                         "flops": sum(r["flops"] for r in ops), "ops": len(ops),
                         "dynamic_ops": sum(r["dynamic_loops"] > 0 for r in ops),
                         "unmatched": reading["unmatched"], "largest_ops": ops[:12]}
    from svgtpu.tpu_env import package_version
    T, h, w = job.latent
    return {"job": dataclasses.asdict(job), "name": job.name, "provenance": f"compiled-{job.device}",
            "latent": {"T": T, "h": h, "w": w}, "chunks": {chunk: chunks[chunk] for chunk in CHUNKS},
            "versions": {"jax": package_version("jax"), "libtpu": package_version("libtpu")}}


def cached_compile_decode(job: DecodeJob) -> dict:
    """:func:`compile_decode`, a record (:func:`svgtpu.compiler.dumps.cached`) in ``vae-decode/`` keyed by the job
    and :data:`SOURCES`."""
    from svgtpu.compiler.dumps import cached
    return cached("vae-decode", job.name, {"job": dataclasses.asdict(job)}, SOURCES, lambda: compile_decode(job))


__all__ = ["SOURCES", "CHUNKS", "DEVICES", "DecodeJob", "programs", "calls_as_inlined", "compile_decode",
           "cached_compile_decode"]
