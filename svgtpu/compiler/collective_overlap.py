"""Whether the compiler overlaps a compiled Wan block's collectives with compute under a run's libtpu flags: the
instrument for pricing the weight gathers serially (docs/plausibility.md, "Weight-gather overlap").

XLA issues a collective it overlaps as an asynchronous ``-start`` op whose ``-done`` comes later in the scheduled
module, with compute scheduled between them; a collective it does not overlap is one op.
:func:`hlo_collective_schedule` reads that off a scheduled module (``TLP-hlo.txt``); :func:`flagged_block` compiles a
block (:mod:`svgtpu.compiler.wan_block`'s child compile, unchanged) with ``LIBTPU_INIT_ARGS`` set to a run's flags and
reads it; :func:`write_record` keeps the reading in ``figures/collective-schedule/`` (:data:`RECORDS`).  The flags compiled
with: MaxDiffusion README's Wan command (:data:`MAXDIFFUSION_WAN_FLAGS`); the SVG study states none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from svgtpu.recipes import MAXDIFFUSION_COMMIT, MAXDIFFUSION_REPO, Source

#: The flags MaxDiffusion's README runs Wan with (its Wan 2.1 T2V command's ``LIBTPU_INIT_ARGS``).
MAXDIFFUSION_WAN_FLAGS = Source(MAXDIFFUSION_REPO, "README.md", MAXDIFFUSION_COMMIT,
                                "Wan Models, the Wan2.1 T2V command: LIBTPU_INIT_ARGS="
                                "--xla_tpu_enable_async_collective_fusion=true "
                                "--xla_tpu_enable_async_collective_fusion_fuse_all_reduce=true "
                                "--xla_tpu_enable_async_collective_fusion_multiple_steps=true "
                                "--xla_tpu_overlap_compute_collective_tc=true --xla_enable_async_all_reduce=true")
FLAGS = MAXDIFFUSION_WAN_FLAGS.what.split("LIBTPU_INIT_ARGS=", 1)[1]
#: The collective opcodes read (an asynchronous one as ``<opcode>-start`` ... ``<opcode>-done``).
KINDS = ("all-gather", "all-to-all", "all-reduce", "reduce-scatter", "collective-permute")
_OP = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*? ([a-z][a-z-]*)\(")


def hlo_collective_schedule(hlo_text: str) -> dict:
    """Per collective kind of the scheduled module's entry computation: its ops, how many are asynchronous, and how
    many other ops the schedule puts between each ``-start`` and the ``-done`` that takes it (what could overlap
    it)."""
    entry = hlo_text[hlo_text.index("\nENTRY "):].splitlines()[1:]
    ops = [(m.group(1), m.group(2), line) for line in entry if (m := _OP.match(line))]
    out = {kind: {"ops": 0, "asynchronous": 0, "ops_between": []} for kind in KINDS}
    for i, (name, opcode, _) in enumerate(ops):
        kind = opcode.removesuffix("-start")
        if kind not in out:
            continue
        out[kind]["ops"] += 1
        if opcode.endswith("-start"):
            done = next(j for j in range(i + 1, len(ops))
                        if ops[j][1] == f"{kind}-done" and (f"%{name})" in ops[j][2] or f"%{name}," in ops[j][2]))
            out[kind]["asynchronous"] += 1
            out[kind]["ops_between"].append(done - i - 1)
    return {kind: v for kind, v in out.items() if v["ops"]}


def flagged_block(job, flags: str) -> dict:
    """Compile ``job`` (a :class:`~svgtpu.compiler.wan_block.BlockJob`) with ``flags`` in ``LIBTPU_INIT_ARGS`` and
    read its collectives' schedule (or ``{"refused": reason}``)."""
    from svgtpu.compiler import wan_block
    done = wan_block.compile_in_child(job, lambda facts, jf, hlo: hlo_collective_schedule(hlo), flags)
    if isinstance(done, dict) and "refused" in done:
        return done
    return {"job": job.name, "flags": flags, "collectives": done,
            "versions": {"jax": wan_block.package_version("jax"), "libtpu": wan_block.package_version("libtpu")}}


#: Where the readings are kept: dated records (like the preflight's), outside ``figures/compiled`` (whose records
#: every full ``make figures`` prunes unless a notebook reads them; none needs this one).
RECORDS = Path(__file__).resolve().parents[2] / "figures" / "collective-schedule"


def write_record(reading: dict, folder: Path = RECORDS) -> Path:
    """``reading`` (:func:`flagged_block`'s) as ``<job>-<libtpu>.json`` in ``folder``, with the commit it was compiled
    at; the path."""
    import subprocess
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=folder.parents[1]).stdout.strip()
    path = folder / f"{reading['job']}-libtpu-{reading['versions']['libtpu']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reading | {"compiled_at": commit, "flags_source": MAXDIFFUSION_WAN_FLAGS.cite()
                                          if reading["flags"] == FLAGS else None}, indent=1, sort_keys=True) + "\n")
    return path


def read_records(folder: Path = RECORDS) -> list[dict]:
    """Every committed reading in ``folder``, with its file's name."""
    return [json.loads(p.read_text()) | {"record": p.name} for p in sorted(folder.glob("*.json"))]


__all__ = ["MAXDIFFUSION_WAN_FLAGS", "FLAGS", "KINDS", "RECORDS", "hlo_collective_schedule", "flagged_block",
           "write_record", "read_records"]
