"""The MXU count, flops per cycle and clock of a TPU core, read from the compiler (issue 28, item 2).

Two small Pallas kernels are compiled ahead of time for one core of the device (v6e, v7x) and their
static schedules read (:mod:`svgtpu.compiler.units`):

- **a lone matmul** (:data:`MATMUL`, bf16, every dimension a multiple of 256, so each push fills the
  256-column array): which MXUs it uses (``mxu0``, ``mxu1``, ...), the flops one push carries
  (flops / pushes), and how many bundles apart the compiler keeps pushes on one MXU in the steady
  run (the most common gap) and on average;
- **one tile body** of our kernel (a full tile at ``head_dim`` 128): its pushes per MXU and its MXU
  cycles against its flops, the fill that attention's 128-wide contraction (``QK^T``) and 128-wide
  output (``PV``) leave.

Flops per cycle per core = MXUs x flops per push / push interval; the clock is the published bf16
peak per chip over (cores per chip x flops per cycle).  The published peaks and core counts are the
cost model's (:data:`svgtpu.costmodel.specs.DEVICES`, which cites Google's pages); the MXU count and
width also stand in JAX's ``tpu_info`` (:data:`SOURCES`).  A static bundle is at least one cycle, so
a pure matmul's flops per bundle can never exceed the true flops per cycle: the probe checks that.
"""

from __future__ import annotations

import functools
from collections import Counter

#: The lone matmul ``[M, K] @ [K, N]`` (bf16 in, f32 out): one block, no grid.
MATMUL = (2048, 512, 2048)
#: The tile body: our kernel on a dense 8x32x34 grid (L = 8704 = 17 x 512: every tile full).
TILE = dict(geometry="8x32x34", block_q=512, block_kv=512, head_dim=128)
#: Where the MXU count, width and the published peaks come from.
SOURCES = {
    "v6e": ["https://cloud.google.com/tpu/docs/v6e (System architecture: 'Each TensorCore has 2 matrix-multiply "
            "units (MXU)'; 'Peak compute per chip (bf16) 918 TFLOPs'; one TensorCore per chip)",
            "jax-ml/jax jax/_src/pallas/mosaic/tpu_info.py at jax-v0.10.2 (990e6a0b84138346e6a38785412f36356e0e5dc3), "
            "lines 424-449: ChipVersion.TPU_V6E num_mxus=2, mxu_column_size=256"],
    "v7x": ["https://docs.cloud.google.com/tpu/docs/tpu7x (System architecture: 'Each TPU7x chip contains two "
            "TensorCores'; 'Peak compute per chip (BF16) 2307 TFLOPs')",
            "jax-ml/jax jax/_src/pallas/mosaic/tpu_info.py at jax-v0.10.2 (990e6a0b84138346e6a38785412f36356e0e5dc3), "
            "lines 451-476: ChipVersion.TPU_7X num_mxus=2, mxu_column_size=256"],
}


def _matmul_fn():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    m, _, n = MATMUL

    def matmul(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    return lambda x, y: pl.pallas_call(matmul, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), name="probe_matmul")(x, y)


def push_gaps(bundles, mxu: str = "mxu0") -> Counter:
    """Bundles between consecutive pushes on one MXU, counted (``mxu0``: the first MXU)."""
    at = [i for i, ops in enumerate(bundles) for op in ops if op.startswith("vmatmul") and op.endswith("." + mxu)]
    return Counter(b - a for a, b in zip(at, at[1:]))


@functools.lru_cache(maxsize=4)
def probe(device: str = "v6e") -> dict:
    """The compiled probe of ``device`` (module doc); provenance ``compiled-<device>`` (once per process:
    the compiler's answer does not change; treat the dict as read-only)."""
    import jax
    import jax.numpy as jnp

    from svgtpu.compiler.dumps import kernel_schedules
    from svgtpu.compiler.llo import parse_bundles
    from svgtpu.compiler.units import core, unit_cycles
    from svgtpu.costmodel.specs import DEVICES
    c = core(device)
    m, k, n = MATMUL
    (text,) = kernel_schedules(_matmul_fn(), jax.ShapeDtypeStruct((m, k), jnp.bfloat16),
                               jax.ShapeDtypeStruct((k, n), jnp.bfloat16), device=device).values()
    bundles = parse_bundles(text)
    flops = 2 * m * k * n
    mm = unit_cycles(bundles, flops, device)
    used = [f"mxu{i}" for i, p in enumerate(mm.pushes) if p]
    gaps = push_gaps(bundles)
    steady = gaps.most_common(1)[0][0]
    at = [i for i, ops in enumerate(bundles) for op in ops if op.startswith("vmatmul") and op.endswith(".mxu0")]
    mean = (at[-1] - at[0]) / (len(at) - 1)
    flops_per_push = flops / sum(mm.pushes)
    measured_fpc = len(used) * flops_per_push / steady
    spec = DEVICES[device]
    tile = _tile_body(device)
    out = {
        "device": device, "provenance": f"compiled-{device}",
        "mxus_per_core": len(used), "mxu_units": used, "mxu_columns": c.mxu_columns,
        "matmul": {"shape": list(MATMUL), "flops": flops, "bundles": mm.bundles, "pushes": list(mm.pushes),
                   "flops_per_push": flops_per_push, "push_gap_mode": steady, "push_gap_mean": mean,
                   "flops_per_bundle": flops / mm.bundles},
        "push_interval": c.push_interval,
        "push_interval_source": "measured" if steady == c.push_interval else
        f"assumed as v6e's: the {device} schedule keeps pushes on one MXU {steady} bundles apart in the steady "
        f"run ({mean:.2f} on average; 2 where they accumulate in the MXU result buffer), which the published "
        f"peak allows at no plausible clock: its static MXU cycles are a queue, not a throughput",
        "flops_per_cycle": c.flops_per_cycle, "flops_per_cycle_at_measured_gap": measured_fpc,
        "published_peak_tflops_per_chip": spec.matmul_flops / 1e12, "cores_per_chip": spec.cores,
        "clock_ghz": spec.matmul_flops / spec.cores / c.flops_per_cycle / 1e9,
        "clock_ghz_at_measured_gap": spec.matmul_flops / spec.cores / measured_fpc / 1e9,
        "tile_body": tile, "sources": SOURCES[device] + [f"peak and cores: svgtpu.costmodel.specs.DEVICES[{device!r}]: "
                                                         f"{spec.source}"],
    }
    return out


def _tile_body(device: str) -> dict:
    """Pushes per MXU and MXU cycles over flops of our full tile body (:data:`TILE`, dense, bf16)."""
    import jax
    import jax.numpy as jnp

    from svgtpu.compiler.dumps import kernel_schedules
    from svgtpu.compiler.llo import bundle_lines, parse_bundles
    from svgtpu.compiler.units import unit_cycles
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels import block_sparse_attention
    from svgtpu.masks.core import DenseMask
    g = get_geometry(TILE["geometry"])
    bq, bkv, d = TILE["block_q"], TILE["block_kv"], TILE["head_dim"]
    x = jax.ShapeDtypeStruct((1, g.L, d), jnp.bfloat16)
    (text,) = kernel_schedules(lambda q, k, v: block_sparse_attention(q, k, v, DenseMask(g.L), block_q=bq, block_kv=bkv,
                                                                      device=device), x, x, x, device=device).values()
    lines = bundle_lines(text)
    marks = [i for i, line in enumerate(lines) if " PF:" in line.partition("{")[0]]
    full = parse_bundles(text)[marks[0]:marks[1]]  # the first predicated region: the full-tile body
    u = unit_cycles(full, 4 * bq * bkv * d, device)
    return {"tile": f"{bq}x{bkv}", "head_dim": d, "bundles": u.bundles, "pushes": list(u.pushes), "mxu": u.mxu,
            "roofline": u.roofline, "mxu_over_roofline": u.mxu / u.roofline, "binding": u.binding()}


__all__ = ["MATMUL", "TILE", "SOURCES", "probe", "push_gaps"]
