"""Compile for a TPU in a child process with libtpu's dumps on, and hand back what it dumped.

libtpu reads its flags (``LIBTPU_INIT_ARGS``) once, when it starts, so every compile whose dumps we
read runs in a child process of its own with:

- ``--xla_jf_dump_to=DIR --xla_jf_dump_llo_text=true``: the LLO backend's passes, one text file per
  fusion or kernel; ``--xla_jf_dump_llo_pass_label_regex=final_bundles`` keeps only the last pass,
  the static VLIW schedule (about half the compile time of dumping every pass);
- ``--xla_mosaic_dump_to=DIR`` where the Mosaic passes are wanted too (:mod:`svgtpu.compiler.llo`).

A function from the caller reaches the child as a serialized ``jax.export`` of itself lowered for
TPU (Pallas kernels ride inside as Mosaic custom calls), so any function works, a notebook's too.

What a compile yields is a *record* (:func:`cached`): a gzipped JSON file named by a content key of what it
is made of (:func:`made_of`: the caller's description of what it compiled (shapes, dtypes, tiles, the mask,
flags), the hash of each source file the program and its reading come from, the jax / libtpu / tokamax
versions, libtpu's flags and :data:`SCHEMA`), which it holds beside its value.  Records are looked for in
the folder a run writes to (``$SVGTPU_RECORDS_DIR``: ``svgtpu reproduce`` sets it to ``figures/compiled/``),
then in the committed ``figures/compiled/`` (:data:`svgtpu.facts.paths.COMPILED_RECORDS`), then in
``build/compiled/`` (what tests and commands compiled); a record found nowhere is compiled and written to
the run's folder, else to ``build/compiled/``.  So a checkout reads the compiles its figures came from
instead of repeating them, and a changed kernel source changes the keys of the records made of it: those
compile again, nothing else.
"""

from __future__ import annotations

import gzip
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

#: Bump when what the records hold, or how they are read, changes.
SCHEMA = 3
#: The package folder: a record's sources are named relative to it.
PACKAGE = Path(__file__).resolve().parents[1]
#: The folder new records go to (``svgtpu reproduce`` sets it for its notebooks); unset: ``build/compiled/``.
RECORDS_DIR_VAR = "SVGTPU_RECORDS_DIR"
#: A file that hears the path of every record read or written (``svgtpu reproduce``: which records a run used).
RECORD_LOG_VAR = "SVGTPU_RECORD_LOG"

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


def made_of(description: dict, sources=()) -> dict:
    """What a record depends on: ``description`` (what was compiled: shapes, dtypes, tiles, mask, flags), the
    sha256 of each of ``sources`` (paths inside the package; a folder: its ``.py`` files), :func:`versions`,
    the libtpu flags a compile child inherits (``LIBTPU_INIT_ARGS``) and :data:`SCHEMA`."""
    files = {}
    for source in sources:
        path = PACKAGE / source
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            files[file.relative_to(PACKAGE).as_posix()] = hashlib.sha256(file.read_bytes()).hexdigest()[:16]
    return {"description": description, "sources": files, "versions": versions(),
            "libtpu_flags": os.environ.get("LIBTPU_INIT_ARGS", ""), "schema": SCHEMA}


def content_of(value):
    """``value`` as a key's description holds it: a dataclass (a mask) field by field with its type, a numpy array
    by shape, dtype and sha256 (a repr elides a large array), lists item by item."""
    import dataclasses

    import numpy as np
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__,
                **{f.name: content_of(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, np.ndarray):
        return {"shape": list(value.shape), "dtype": str(value.dtype),
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]}
    if isinstance(value, (list, tuple)):
        return [content_of(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def cache_key(description: dict, sources=()) -> str:
    """The content key of :func:`made_of`."""
    return _digest(made_of(description, sources))


def _digest(key_of: dict) -> str:
    return hashlib.sha256(json.dumps(key_of, sort_keys=True, default=str).encode()).hexdigest()[:20]


def record_file(folder: str, name: str, key: str) -> Path:
    """Where a record lies inside a folder of records: ``<folder>/<name>-<key>.json.gz`` (JSON, gzipped: a plan's
    grid steps at 1440p are a few hundred kB of text, a tenth of that compressed)."""
    return Path(folder, f"{name}-{key}.json.gz")


def read_record(path: Path) -> dict:
    """A record file's ``{"key", "made_of", "value"}``, checked (:func:`svgtpu.inputs.records.compile_record`)."""
    from svgtpu.inputs.records import compile_record
    return compile_record(path, path.read_bytes())


def record_dirs() -> list[Path]:
    """Where records are looked for, in order (module doc); the first is where new ones go."""
    from svgtpu.facts.paths import COMPILED_CACHE, COMPILED_RECORDS
    first = Path(os.environ[RECORDS_DIR_VAR]) if os.environ.get(RECORDS_DIR_VAR) else COMPILED_CACHE
    return list(dict.fromkeys([first, COMPILED_RECORDS, COMPILED_CACHE]))


def _write(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (two processes may write one record)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def cached(folder: str, name: str, description: dict, sources, compute) -> dict:
    """The value of the record :func:`record_file` names (key: :func:`cache_key` of ``description`` and
    ``sources``): read from the first of :func:`record_dirs` that holds it (and copied into the first, so a
    run's folder holds every record it used), else ``compute()`` (a JSON-able dict) written there.  A fresh
    value is returned as read back from its JSON, so the first call and every later one give the same value
    (tuples come back as lists either way)."""
    key_of = json.loads(json.dumps(made_of(description, sources), sort_keys=True, default=str))
    key = _digest(key_of)
    relative = record_file(folder, name, key)
    target, *others = record_dirs()
    found = next((d / relative for d in (target, *others) if (d / relative).exists()), None)
    if found is None:
        text = json.dumps({"key": key, "made_of": key_of, "value": compute()}, sort_keys=True)
        data = gzip.compress(text.encode(), mtime=0)  # no time stamp: one record, one byte string
        _write(target / relative, data)
    else:
        data = found.read_bytes()
        if found != target / relative and os.environ.get(RECORDS_DIR_VAR):
            _write(target / relative, data)
    if os.environ.get(RECORD_LOG_VAR):
        with open(os.environ[RECORD_LOG_VAR], "a") as log:
            log.write(f"{relative.as_posix()}\n")
    from svgtpu.inputs.records import compile_record
    return compile_record(found or target / relative, data)["value"]


def prune(folder: Path, used) -> list[str]:
    """Remove the records in ``folder`` not among ``used`` (paths relative to it, as :data:`RECORD_LOG_VAR`'s file
    names them): after a run of every notebook, the records of keys no longer made (a changed source, a
    size no profile runs); the paths removed."""
    used = set(used)
    stale = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.json.gz")) if folder.is_dir() else []
    stale = [p for p in stale if p not in used]
    for path in stale:
        (folder / path).unlink()
    return stale


__all__ = ["SCHEMA", "versions", "RECORDS_DIR_VAR", "RECORD_LOG_VAR", "made_of", "content_of", "cache_key", "record_file", "read_record", "record_dirs", "cached", "prune", "SCHEDULE_FLAGS", "child_env", "run_child", "custom_call_names", "final_schedule", "kernel_schedules"]
