"""One call that compiles a function ahead of time for a TPU and says what the compiler said.

For the teaching notebooks: a student's kernel runs in interpret mode on any machine, and
:func:`compile_report` then hands the same function to the real TPU compiler (libtpu, on this CPU,
through :func:`svgtpu.bench.compile.compile_fn`) for one device of a TPU topology — accepted, with
the size of the code it built, or refused, in the compiler's own words.  Nothing is executed.
"""

from __future__ import annotations

import re

from svgtpu.bench.compile import compile_fn, libtpu_available, topology_device


def compile_report(fn, *examples, device: str = "v6e", label: str = "") -> dict:
    """Compile ``fn(*examples)`` for ``device`` ahead of time and print one line: what the compiler said.

    ``examples`` are arrays or ``jax.ShapeDtypeStruct``s (only their shapes and dtypes are used).
    Returns :func:`~svgtpu.bench.compile.compile_fn`'s dict plus ``device``; without libtpu,
    ``{"compiled": None, "reason": ...}`` and the line says so.
    """
    import jax

    prefix = f"{label + ': ' if label else ''}{device}"
    if not libtpu_available():
        print(f"{prefix}: not compiled (the TPU compiler, libtpu, is not installed)")
        return {"compiled": None, "reason": "libtpu not installed", "device": device}
    sharding = jax.sharding.SingleDeviceSharding(topology_device(device))
    specs = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding) for x in examples]
    result = {**compile_fn(fn, specs), "device": device}
    if result["compiled"]:
        size = f", {result['code_bytes']:,} bytes of code" if "code_bytes" in result else ""
        print(f"{prefix}: compiled{size} (nothing run)")
    else:  # the first sentence of the compiler's words, without terminal colours
        reason = re.sub(r"\x1b\[[0-9;]*m", "", result["reason"])
        print(f"{prefix}: refused: {reason.split('. ')[0].rstrip('.')}.")
    return result


__all__ = ["compile_report"]
