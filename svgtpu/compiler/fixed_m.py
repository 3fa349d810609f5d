"""Our fixed-maximum kernel (``KernelConfig.fixed_max``, :mod:`svgtpu.kernels.fixed_max`) compiled: its bodies and
its pass, for the compiled tile table (:func:`svgtpu.compiler.tile_table.fixed_rows`) and the cost model's fixed-M
dense control.

A fixed-max kernel holds four tile bodies, in this order (:func:`svgtpu.kernels.block_sparse._kernel`): the
running-maximum full and partial bodies (for the q tiles the pass refuses), then the fixed-maximum full and
partial bodies.  The pass (norms and a dot product per query, in XLA, before the kernel) is compiled on its own
and read as the static cycles of its fusions per head.  Records as every compile's
(:func:`svgtpu.compiler.dumps.cached`), keyed by this module too: it holds only what compiles and reads them,
and it leaves :mod:`svgtpu.compiler.variants` (whose source keys every record) as it is.  Provenance
``compiled-<device>``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from svgtpu.compiler.variants import Variant, mask_of, program_kind, program_name, sources_of

#: The bodies of a fixed-max program, by index in its schedule.
BODY_INDEX = {"full": 0, "partial": 1, "fixed_full": 2, "fixed_partial": 3}
#: The package files a fixed-max record is also made of.
FIXED_SOURCES = ("kernels/fixed_max.py", "compiler/fixed_m.py")


@dataclasses.dataclass(frozen=True)
class FixedMaxVariant(Variant):
    """:class:`~svgtpu.compiler.variants.Variant` of ours with ``KernelConfig.fixed_max``."""

    fixed_max: bool = True

    @property
    def name(self) -> str:
        return f"{super().name}-fixed-m"


def _compile_child(spec: dict) -> None:
    """Child process: compile one fixed-max variant for its device (libtpu dumps where it was told)."""
    import jax
    import jax.numpy as jnp

    from svgtpu.compiler.compile import compile_fn, topology_device
    from svgtpu.kernels import KernelConfig
    from svgtpu.kernels.api import block_sparse
    from svgtpu.kernels.common import compiling_for
    v = FixedMaxVariant(**spec)
    g, mask = mask_of(v)
    config = KernelConfig(v.block_q, v.block_kv, v.block_kv_compute, v.fast_path, v.layout, fixed_max=True)
    x = jax.ShapeDtypeStruct((1, g.L, v.head_dim), jnp.dtype(v.dtype),
                             sharding=jax.sharding.SingleDeviceSharding(topology_device(v.device)))
    with compiling_for(v.device):
        result = compile_fn(lambda q, k, vv: block_sparse(q, k, vv, mask, config=config, implementation="mosaic",
                                                          device=v.device), (x, x, x))
    if not result["compiled"]:
        sys.exit(f"not compiled: {result['reason']}")


def _pass_child(spec: dict) -> None:
    """Child process: compile the fixed-maximum pass alone (one head) for the variant's device."""
    import jax
    import jax.numpy as jnp

    from svgtpu.compiler.compile import compile_fn, topology_device
    from svgtpu.kernels.common import as_masks
    from svgtpu.kernels.fixed_max import fixed_maxima
    v = FixedMaxVariant(**spec)
    g, mask = mask_of(v)
    x = jax.ShapeDtypeStruct((1, g.L, v.head_dim), jnp.dtype(v.dtype),
                             sharding=jax.sharding.SingleDeviceSharding(topology_device(v.device)))
    masks = as_masks(mask, 1, g.L)
    result = compile_fn(lambda q, k, vv: fixed_maxima(q, k, vv, masks, v.head_dim ** -0.5, v.block_q), (x, x, x))
    if not result["compiled"]:
        sys.exit(f"not compiled: {result['reason']}")


def _run(v: FixedMaxVariant, child: str) -> tuple[Path, object] | dict:
    from svgtpu.compiler.dumps import child_env, run_child
    tmp = tempfile.TemporaryDirectory()
    jf = Path(tmp.name, "jf")
    code = f"import json, svgtpu.compiler.fixed_m as m; m.{child}(json.loads({json.dumps(json.dumps(dataclasses.asdict(v)))}))"
    done = run_child(code, child_env(jf), f"{v.name} for {v.device}")
    if done.returncode:
        tmp.cleanup()
        return {"refused": done.stderr.strip().splitlines()[-1][len("not compiled: "):]}
    return jf, tmp


def compile_fixed(v: FixedMaxVariant) -> dict:
    """Compile ``v`` (child process): its kernel's schedule (as a dict), the unit counts of each of its four
    bodies (:data:`BODY_INDEX`) and the static cycles of its pass per head; or ``{"refused": ...}``."""
    from svgtpu.compiler.fusions import program_cycles
    from svgtpu.compiler.llo import parse_bundles, read_schedule
    from svgtpu.compiler.units import count_units
    ran = _run(v, "_compile_child")
    if isinstance(ran, dict):
        return ran
    jf, tmp = ran
    with tmp:
        texts = [p.read_text() for p in sorted(jf.glob("*final_bundles.txt"))
                 if "schedule-analysis" not in p.name and "block_sparse_attention" in p.name.lower()]
    if len(texts) != 1:
        raise RuntimeError(f"{v.name}: {len(texts)} kernel schedules, expected one pallas_call")
    schedule, bundles = read_schedule(texts[0]), parse_bundles(texts[0])
    units = []
    for segments in schedule.body_segments:
        counts = None
        for a, b, passes in segments:
            part = count_units(bundles[a:b], v.device).times(passes)
            counts = part if counts is None else counts + part
        units.append(dataclasses.asdict(counts))
    ran = _run(v, "_pass_child")
    if isinstance(ran, dict):
        return ran
    jf, tmp = ran
    with tmp:
        fusions = [p.read_text() for p in sorted(jf.glob("*final_bundles.txt")) if "schedule-analysis" not in p.name]
        pass_cycles = sum(program_cycles(t).cycles for t in fusions)
    return {"schedule": dataclasses.asdict(schedule), "body_units": units, "pass_cycles": pass_cycles,
            "variant": dataclasses.asdict(v)}


def cached_fixed(v: FixedMaxVariant) -> dict:
    """:func:`compile_fixed` of ``v``, a record keyed by its program (as :func:`~svgtpu.compiler.variants.program_of`
    describes it) and its sources with :data:`FIXED_SOURCES`."""
    from svgtpu.compiler.dumps import cached
    fields = {k: val for k, val in dataclasses.asdict(v).items() if k != "mask"}
    return cached(v.device, f"{program_name(v)}-fixed-m", {**fields, "program": program_kind(v)},
                  sources_of(v) + FIXED_SOURCES, lambda: compile_fixed(v))


__all__ = ["BODY_INDEX", "FIXED_SOURCES", "FixedMaxVariant", "compile_fixed", "cached_fixed"]
