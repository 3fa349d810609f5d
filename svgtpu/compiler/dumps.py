"""Compile for a TPU in a child process with libtpu's dumps on, and hand back what it dumped.

libtpu reads its flags (``LIBTPU_INIT_ARGS``) once, when it starts, so every compile whose dumps we
read runs in a child process of its own with:

- ``--xla_jf_dump_to=DIR --xla_jf_dump_llo_text=true``: the LLO backend's passes, one text file per
  fusion or kernel; ``--xla_jf_dump_llo_pass_label_regex=final_bundles`` keeps only the last pass,
  the static VLIW schedule (about half the compile time of dumping every pass);
- ``--xla_mosaic_dump_to=DIR`` where the Mosaic passes are wanted too (:mod:`svgtpu.compiler.llo`).

A function from the caller reaches the child as a serialized ``jax.export`` of itself lowered for
TPU (Pallas kernels ride inside as Mosaic custom calls), so any function works, a notebook's too.

What a compile yields is cached (:func:`cached`) in ``build/compiled/<device>/`` under a content key:
the caller's description of what it compiled (shapes, dtypes, tiles, the mask), the source files the
program comes from, :data:`SCHEMA` (the reading code) and the jax / libtpu / tokamax versions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.tpu_env import PERSISTENT_CACHE_VARS, without_cpu_compile_flags

#: Bump when what the cached results hold, or how they are read, changes.
SCHEMA = 2

#: libtpu flags that dump the final bundle schedules of every fusion and kernel into a folder.
SCHEDULE_FLAGS = ("--xla_jf_dump_to={dir}", "--xla_jf_dump_llo_text=true",
                  "--xla_jf_dump_llo_pass_label_regex=final_bundles")
_CUSTOM_CALL = re.compile(r'%([\w.\-]+) = [^\n]*?custom-call\([^\n]*custom_call_target="tpu_custom_call"')


def child_env(jf: Path | None = None, mosaic: Path | None = None, all_passes: bool = False) -> dict:
    """The environment of a child compile that dumps schedules into ``jf`` (only the final ones
    unless ``all_passes``) and Mosaic's passes into ``mosaic``; never the test suite's CPU compile flags
    or its persistent compilation cache (a hit would dump nothing)."""
    flags = [os.environ.get("LIBTPU_INIT_ARGS", "")]
    if jf is not None:
        flags += [f.format(dir=jf) for f in SCHEDULE_FLAGS[:2 if all_passes else 3]]
    if mosaic is not None:
        flags.append(f"--xla_mosaic_dump_to={mosaic}")
    env = dict(os.environ, LIBTPU_INIT_ARGS=" ".join(flags).strip())
    env["XLA_FLAGS"] = without_cpu_compile_flags(env.get("XLA_FLAGS", ""))
    for name in PERSISTENT_CACHE_VARS:
        env.pop(name, None)
    return env


def run_child(code: str, env: dict, what: str) -> subprocess.CompletedProcess:
    """Run ``python -c code`` in ``env``; a refusal exits with ``not compiled: <reason>`` on its last
    line (returned for the caller to read), anything else that fails raises."""
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    last = (done.stderr.strip().splitlines() or [""])[-1]
    if done.returncode and not last.startswith("not compiled: "):
        raise RuntimeError(f"compiling {what} failed: {last}")
    return done


def custom_call_names(jf: Path) -> list[str]:
    """Names of the Pallas (Mosaic) kernels in a dump folder's scheduled module, in program order."""
    names = []
    for hlo in sorted(jf.glob("*TLP-hlo.txt")):
        names += [n for n in _CUSTOM_CALL.findall(hlo.read_text()) if n not in names]
    return names


def final_schedule(jf: Path, name: str) -> str:
    """The ``final_bundles`` text of the fusion or kernel ``name`` in a dump folder."""
    files = [p for p in jf.glob(f"*-{name}-*final_bundles.txt") if "schedule-analysis" not in p.name]
    if len(files) != 1:
        raise RuntimeError(f"expected one final schedule of {name} in the dump, found {len(files)}")
    return files[0].read_text()


def _compile_exported(path: str, device: str) -> None:
    """Child process: compile a serialized ``jax.export`` for one core of ``device``."""
    import jax

    from svgtpu.compiler.compile import topology_device
    exported = jax.export.deserialize(bytearray(Path(path).read_bytes()))
    sharding = jax.sharding.SingleDeviceSharding(topology_device(device))
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in exported.in_avals]
    try:
        jax.jit(exported.call).lower(*specs).compile()
    except Exception as e:  # noqa: BLE001 - the compiler's refusal, in one line
        from svgtpu.compiler.compile import first_line
        sys.exit(f"not compiled: {first_line(e)}")


def kernel_schedules(fn, *args, device: str = "v6e") -> dict[str, str]:
    """Compile ``fn(*args)`` for one core of ``device`` in a child process; the final schedule of each
    Pallas kernel in it, by kernel name.  One clear line when the compiler refuses it."""
    import jax
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args]
    from svgtpu.kernels.common import compiling_for
    with compiling_for(device):
        exported = jax.export.export(jax.jit(fn), platforms=["tpu"])(*specs)
    with tempfile.TemporaryDirectory() as tmp:
        blob, jf = Path(tmp, "fn.bin"), Path(tmp, "jf")
        blob.write_bytes(exported.serialize())
        code = f"import svgtpu.compiler.dumps as m; m._compile_exported({str(blob)!r}, {device!r})"
        done = run_child(code, child_env(jf), f"{getattr(fn, '__name__', 'fn')} for {device}")
        if done.returncode:
            raise BadInput(f"{device} compiler refused it: {done.stderr.strip().splitlines()[-1][len('not compiled: '):]}")
        return {name: final_schedule(jf, name) for name in custom_call_names(jf)}


def versions() -> dict:
    """The versions a compiled result depends on: jax, libtpu (the compiler) and tokamax."""
    return {p: metadata.version(p) for p in ("jax", "libtpu", "tokamax")}


def cache_key(description: dict, sources=()) -> str:
    """A content key: ``description`` (JSON), the bytes of ``sources`` (paths inside the package),
    :data:`SCHEMA` and :func:`versions`."""
    h = hashlib.sha256(json.dumps([description, versions(), SCHEMA], sort_keys=True, default=str).encode())
    package = Path(__file__).resolve().parents[1]
    for src in sources:
        h.update((package / src).read_bytes())
    return h.hexdigest()[:20]


def cached_json(path: Path, compute) -> dict:
    """``compute()`` (a JSON-able dict), kept in the file ``path`` (written whole or not at all).  A fresh
    result is returned as read back from its JSON, so the first call and every later one give the same value
    (tuples come back as lists either way)."""
    if path.exists():
        return json.loads(path.read_text())
    text = json.dumps(compute())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return json.loads(text)


def cached(device: str, name: str, key: str, compute) -> dict:
    """``compute()`` (a JSON-able dict), cached in ``build/compiled/<device>/<name>-<key>.json``
    (:func:`cached_json`)."""
    from svgtpu.facts.paths import REPO_ROOT
    return cached_json(Path(REPO_ROOT, "build", "compiled", device, f"{name}-{key}.json"), compute)


__all__ = ["SCHEMA", "versions", "cache_key", "cached_json", "cached", "SCHEDULE_FLAGS", "child_env", "run_child", "custom_call_names", "final_schedule", "kernel_schedules"]
