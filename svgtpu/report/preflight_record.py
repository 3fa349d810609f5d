"""The record a preflight of the prepared TPU run leaves: where it lives, what it is keyed on, reading it.

``svgtpu bench tpu --preflight`` (:func:`svgtpu.report.preflight.bench_preflight`) writes one dated file,
``figures/preflight/<date>-<commit>.json``, never overwritten: provenance ``compiled-v6e``, the commit, date and
jax / libtpu / tokamax versions, the host that compiled (cores, load at the start, platform) and what the run's
float64 check of one head costs there (:func:`host_checks`), the content key of what the programs are built from
(:func:`sources_key`: the program list field by field and the sha256 of each of :data:`PROGRAM_SOURCES`), one row
per program (name, chips, topology, geometry, compiled, compile and build seconds, the compiler's reason),
per-slice totals (``v6e-1``, ``v6e-8``: the programs a run on that slice runs), the verdict and the wall seconds.
:mod:`svgtpu.report.tpu_run_time` computes the run's expected time from the newest one.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
from pathlib import Path

from svgtpu.errors import BadInput

#: The committed preflight records of the prepared TPU run, one dated file each (relative to the checkout).
RECORDS_DIR = Path("figures", "preflight")
#: What the TPU run's programs are built from, as paths in the package (:func:`svgtpu.compiler.dumps.made_of`):
#: the program list and its construction, the kernels, masks, attention and model code they trace, Splash's
#: wrapper and the compile call; not svgtpu.report (how a program is compiled for its slice, how the record is
#: written), nor the run's timing loop.
PROGRAM_SOURCES = ("bench/tpu.py", "kernels", "masks", "attention", "model", "models.py", "baselines", "geometry.py",
                   "setting.py", "recipes.py", "warmup.py", "tpu_env.py", "facts/kernels.py", "compiler/compile.py",
                   "compiler/variants.py", "compiler/tile_table.py", "compiler/tune.py", "compiler/estimate.py",
                   "compiler/wan_block.py")


def slice_name(chips: int) -> str:
    """``v6e-1``, ``v6e-8``: the slice a run on ``chips`` chips rents."""
    return f"v6e-{chips}"


def program_description() -> dict:
    """What the run's programs are, field by field (tiles, masks, models, chips) and the topologies they compile
    for: the description of :func:`sources_key` (a retuned tile changes it, as an edited source does)."""
    from svgtpu.bench.tpu import FULL, SLICES, all_programs
    from svgtpu.compiler.dumps import content_of
    return {"programs": [content_of(p) for p in all_programs(FULL)],
            "slices": {str(chips): topology for chips, topology in SLICES.items()}}


def sources_key() -> dict:
    """``{"key", "made_of"}``: the content key of the TPU run's programs (:func:`program_description`, the sha256
    of each of :data:`PROGRAM_SOURCES`, jax / libtpu / tokamax versions, libtpu's flags)."""
    from svgtpu.compiler.dumps import cache_key, made_of
    description = program_description()
    return {"key": cache_key(description, PROGRAM_SOURCES),
            "made_of": json.loads(json.dumps(made_of(description, PROGRAM_SOURCES), default=str))}


def default_record_path(when: datetime.datetime | None = None) -> Path:
    """``figures/preflight/<date>-<commit>.json`` in the checkout."""
    from svgtpu.bench.tpu import commit
    from svgtpu.facts.paths import REPO_ROOT
    when = when or datetime.datetime.now(datetime.timezone.utc)
    return REPO_ROOT / RECORDS_DIR / f"{when:%Y-%m-%d}-{commit()}.json"


def check_record_out(path: str | Path, named: bool = True) -> Path:
    """Refuse (:class:`BadInput`, one line) a record path that exists (a record is never overwritten), and one the
    user ``named`` where it cannot be written; the default's folder is made."""
    from svgtpu.facts.outputs import check_output
    path = Path(path)
    if path.exists():
        raise BadInput(f"--out {path} exists: a preflight record is never overwritten (name another file)")
    if named:
        return check_output("--out", path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def host() -> dict:
    """The machine compiling: its CPUs, load at the start, platform (compile seconds depend on all three)."""
    return {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg()), "platform": platform.platform(),
            "machine": platform.machine(), "python": platform.python_version()}


def host_checks() -> dict:
    """Seconds of the run's float64 check of one head on this host, per resolution of the run: host numpy
    (:func:`svgtpu.bench.tpu.check_rows`, the sampled rows against every key on SVG's mask) on seeded random
    inputs at the real shapes, provenance ``measured-cpu``: the run pays it once per head of each check."""
    import numpy as np

    from svgtpu.bench.tpu import FULL, _rows, all_programs, check_rows
    from svgtpu.geometry import get_geometry
    out = {}
    for p in all_programs(FULL):
        if p.section != "kernels" or p.mask != "svg" or p.geometry in out:
            continue
        L = get_geometry(p.geometry).L
        q, k, v = np.random.default_rng(0).standard_normal((3, 1, L, 128)).astype(np.float32)
        rows = _rows(L, FULL.check_rows)
        start = time.perf_counter()
        check_rows(q, q, k, v, p.the_mask(), rows)
        out[p.geometry] = {"seconds_per_head": time.perf_counter() - start, "rows": len(rows), "L": L,
                           "provenance": "measured-cpu"}
    return out


def records(folder: str | Path | None = None) -> list[Path]:
    """The preflight records in ``folder`` (default the checkout's :data:`RECORDS_DIR`), oldest first (by the date
    inside, then the name)."""
    from svgtpu.facts.paths import REPO_ROOT
    folder = Path(folder) if folder is not None else REPO_ROOT / RECORDS_DIR
    found = [(json.loads(p.read_text())["date"], p.name, p) for p in folder.glob("*.json") if not p.name.startswith(".")]
    return [p for *_, p in sorted(found)]


def newest_record(folder: str | Path | None = None) -> dict | None:
    """The newest record of :func:`records` (with its ``path``), None where there is none."""
    found = records(folder)
    return None if not found else json.loads(found[-1].read_text()) | {"path": str(found[-1])}


def uncovered(record: dict) -> list[str]:
    """The programs of the run (:func:`svgtpu.bench.tpu.all_programs`) that ``record`` did not compile, by name and
    chips: a program added since the preflight."""
    from svgtpu.bench.tpu import FULL, all_programs
    held = {(r["name"], r["chips"]) for r in record["programs"]}
    return [f"{p.name} ({slice_name(p.chips)})" for p in all_programs(FULL) if (p.name, p.chips) not in held]


def sources_match(record: dict) -> bool:
    """Whether ``record`` compiled the programs the current sources build (:func:`sources_key`)."""
    return record["sources"]["key"] == sources_key()["key"]


__all__ = ["RECORDS_DIR", "PROGRAM_SOURCES", "slice_name", "program_description", "sources_key", "default_record_path",
           "check_record_out", "host", "host_checks", "records", "newest_record", "uncovered", "sources_match"]
