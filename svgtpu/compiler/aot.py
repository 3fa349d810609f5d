"""One call that compiles a function ahead of time for a TPU and says what the compiler made of it.

For the teaching notebooks: a student's kernel runs in interpret mode on any machine, and
:func:`compile_report` then hands the same function to the real TPU compiler (libtpu, on this CPU) for
one core of a TPU — refused, in the compiler's own words, or accepted, with the static schedule of each
Pallas kernel in it read per unit (:mod:`svgtpu.compiler.units`): the bundles the compiler issues (one per
cycle) and the fewest cycles the MXU, the vector loads, the vector stores, the vector ALUs, the
transcendental unit (EUP) and the cross-lane unit (XLU) need for the kernel's instructions.  The unit
needing the most *binds*: a faster kernel must give it less to do.  Nothing is executed.

The schedules come from a child compile with libtpu's dumps on (:mod:`svgtpu.compiler.dumps`); starting
that child costs seconds, so :func:`compile_reports` compiles several functions in one child (a
block-size sweep).  A schedule is the program text: a loop body (a grid step, a ``fori_loop``) counts
once, and both sides of a ``pl.when`` count.  Provenance ``compiled-<device>``.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from svgtpu.compiler.compile import libtpu_available, refusal

#: What a schedule holds when its grid is split between the two TensorCores of a megacore (v5p, grid axes
#: marked ``parallel``): a check of the megacore barrier both cores pass (libtpu 0.0.42.1).  With every axis
#: ``arbitrary`` the v5p program reads its core id and the second core branches past the kernel; compiled
#: for v6e or v7x, where a JAX device is one core, neither appears.
CORE_SPLIT = "BarrierMegacore"
#: What the unit columns of a report mean, in table order (after ``bundles``).
UNIT_NAMES = {"mxu": "MXU", "vector_load": "vector load", "vector_store": "vector store", "valu": "VALU",
              "eup": "EUP", "xlu": "XLU"}


def _first_sentence(reason: str) -> str:
    reason = re.sub(r"\x1b\[[0-9;]*m", "", reason)  # no terminal colours
    return reason.split(". ")[0].rstrip(".") + "."


def _compile_exports(paths: list[str], device: str, folder: str) -> None:
    """Child process: compile each serialized ``jax.export`` for one core of ``device``; after each,
    move what libtpu dumped into ``folder/<i>`` and, on a refusal, write its words to ``folder/<i>.refused``."""
    import jax

    from svgtpu.compiler.compile import topology_device
    sharding = jax.sharding.SingleDeviceSharding(topology_device(device))
    dump = Path(folder, "jf")
    for i, path in enumerate(paths):
        exported = jax.export.deserialize(bytearray(Path(path).read_bytes()))
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding) for a in exported.in_avals]
        try:
            jax.jit(exported.call).lower(*specs).compile()
        except Exception as e:  # noqa: BLE001 - the compiler's refusal, in one line
            Path(folder, f"{i}.refused").write_text(str(e))
        target = Path(folder, str(i))
        target.mkdir()
        for p in dump.glob("*") if dump.exists() else ():
            shutil.move(str(p), target / p.name)


def compile_reports(jobs: dict, device: str = "v6e") -> dict[str, dict]:
    """Compile several functions for one core of ``device`` in one child process, without printing.

    ``jobs``: ``{label: (fn, examples)}`` or ``{label: (fn, examples, flops)}``; ``examples`` are arrays or
    ``jax.ShapeDtypeStruct``s (only shapes and dtypes are used), ``flops`` one grid step's matmul flops
    (for the roofline).  Per label: ``{"compiled": True, "device", "kernels": {name: UnitCycles}, "core_split":
    {name: bool}}`` (units ``None`` on a TPU :mod:`svgtpu.compiler.units` has no table for; ``core_split``: the
    grid is split between two cores, :data:`CORE_SPLIT`) or
    ``{"compiled": False, "device", "reason"}``; without libtpu ``compiled`` is ``None``.
    """
    import jax

    from svgtpu.compiler.dumps import child_env, custom_call_names, final_schedule, run_child
    from svgtpu.compiler.llo import parse_bundles
    from svgtpu.compiler.units import CORES, unit_cycles
    from svgtpu.kernels.common import compiling_for
    if not libtpu_available():
        return {label: {"compiled": None, "reason": "libtpu not installed", "device": device} for label in jobs}
    results, exports = {}, {}
    for label, (fn, examples, *flops) in jobs.items():
        specs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in examples]
        try:
            with compiling_for(device):
                exports[label] = (jax.export.export(jax.jit(fn), platforms=["tpu"])(*specs), *flops)
        except ValueError as e:  # refused while lowering the kernel (block shapes, our budgets)
            results[label] = {"compiled": False, "device": device, "reason": str(e)}
        except Exception as e:  # noqa: BLE001 - Mosaic's refusal while lowering ``fn``, in one line
            results[label] = {"compiled": False, "device": device, **refusal(e)}
    if exports:
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, (exported, *_) in enumerate(exports.values()):
                paths.append(str(Path(tmp, f"{i}.bin")))
                Path(paths[-1]).write_bytes(exported.serialize())
            code = f"import svgtpu.compiler.aot as m; m._compile_exports({paths!r}, {device!r}, {tmp!r})"
            run_child(code, child_env(Path(tmp, "jf")), f"{len(paths)} function(s) for {device}")
            for i, (label, (_, *flops)) in enumerate(exports.items()):
                refused = Path(tmp, f"{i}.refused")
                if refused.exists():
                    results[label] = {"compiled": False, "device": device, **refusal(RuntimeError(refused.read_text()))}
                    continue
                folder = Path(tmp, str(i))
                names = custom_call_names(folder)
                schedules = {name: final_schedule(folder, name) for name in names}
                results[label] = {
                    "compiled": True, "device": device,
                    "kernels": {name: unit_cycles(parse_bundles(text), flops[0] if flops and len(names) == 1 else None,
                                                  device) if device in CORES else None
                                for name, text in schedules.items()},
                    "core_split": {name: CORE_SPLIT in text for name, text in schedules.items()}}
    return {label: results[label] for label in jobs}


def describe(label: str, result: dict) -> str:
    """The line :func:`compile_report` prints for one result of :func:`compile_reports`."""
    prefix = f"{label + ': ' if label else ''}{result['device']}"
    if result["compiled"] is None:
        return f"{prefix}: not compiled (the TPU compiler, libtpu, is not installed)"
    if not result["compiled"]:
        return f"{prefix}: refused: {_first_sentence(result['reason'])}"
    lines = [f"{prefix}: compiled (nothing run)"]
    if not result["kernels"]:
        lines.append("  it holds no Pallas TPU kernel: was the function called with interpret=True?")
    for name, u in result["kernels"].items():
        kernel = f"kernel {name}: " if len(result["kernels"]) > 1 else ""
        split = "; the grid is split between two cores (megacore)" if result["core_split"][name] else ""
        if u is None:
            lines.append(f"  {kernel}(svgtpu.compiler.units has no slot table for {result['device']}){split}")
            continue
        units = ", ".join(f"{UNIT_NAMES[k]} {getattr(u, k):,}" for k in UNIT_NAMES)
        roofline = f"; the MXU at full fill: {u.roofline:,.0f}" if u.roofline is not None else ""
        lines.append(f"  {kernel}{u.bundles:,} bundles; fewest cycles per unit: {units}{roofline}; "
                     f"binds: {UNIT_NAMES[u.binding()]}{split}")
    return "\n".join(lines)


def compile_report(fn, *examples, device: str = "v6e", label: str = "", flops: float | None = None) -> dict:
    """Compile ``fn(*examples)`` ahead of time for one core of ``device`` and print what the compiler
    made of it: refused in its own words, or each kernel's static bundles and per-unit cycles.

    Returns :func:`compile_reports`' dict for this function (``reason`` on a refusal, ``kernels`` on
    success).  ``flops``: one grid step's matmul flops, for the roofline column.
    """
    result = compile_reports({label: (fn, examples, flops)}, device)[label]
    print(describe(label, result))
    return result


def unit_table(reports: dict[str, dict]):
    """A pandas table of :func:`compile_reports`' results: one row per compiled kernel (refusals left
    out), columns ``bundles``, the units' fewest cycles, ``binds`` and ``roofline``."""
    import pandas as pd
    rows = []
    for label, result in reports.items():
        for name, u in (result.get("kernels") or {}).items():
            if u is None:
                continue
            label_name = label if len(result["kernels"]) == 1 else f"{label} ({name})"
            rows.append({"compiled": label_name, "bundles": u.bundles, **{UNIT_NAMES[k]: getattr(u, k) for k in UNIT_NAMES},
                         "binds": UNIT_NAMES[u.binding()],
                         "roofline": None if u.roofline is None else round(u.roofline, 1)})
    return pd.DataFrame(rows).set_index("compiled") if rows else pd.DataFrame()


__all__ = ["CORE_SPLIT", "UNIT_NAMES", "compile_report", "compile_reports", "describe", "unit_table"]
