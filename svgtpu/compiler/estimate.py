"""The whole kernel from its compiled schedule: static cycles, HBM bytes and a time band per call.

Per grid step: ``cycles = overhead + [first] init + [last] finish + body(kind)`` (the parts of
:class:`svgtpu.compiler.llo.Schedule`); the grid loop's extra pipeline iterations cost the overhead; the
code before and after the loop is counted once per call.  The **HBM bytes** of each step: a q block
when the q block index changes, k and v blocks when the kv block index changes, a mask block (int8)
when the mask-block index changes, the output block when a row finishes (Pallas' pipeline fetches a
block only when its index changes between consecutive steps).

**Static bundles are not latency**: they are the compiler's cycles before any stall on memory.  The
time band takes, per step, ``max(compute, memory)`` -- the steady state of a double-buffered pipeline
whose next fetch overlaps the current step's compute -- with the device spec's clock
(:class:`svgtpu.costmodel.specs.Mxu`: the published peak over the flops per cycle the schedule shows) and one
core's share of the chip's HBM bandwidth (:data:`svgtpu.costmodel.specs.DEVICES`).
"""

from __future__ import annotations

from collections import Counter

#: The pipeline's fill/drain iterations of a grid loop whose bound is a register (tokamax's dynamic
#: grid): what every constant-bound grid loop here shows (exit test = steps + 2).
PIPELINE_FILL = 2


def clock_hz(device: str) -> float:
    """The device's clock: its spec's one definition (the published bf16 peak at its MXU's flops per cycle)."""
    from svgtpu.costmodel.specs import DEVICES
    return DEVICES[device].clock_hz


def core_bandwidth(device: str) -> float:
    """One TensorCore's share of the chip's HBM bandwidth, bytes/s."""
    from svgtpu.costmodel.specs import DEVICES
    spec = DEVICES[device]
    return spec.hbm_bandwidth / spec.cores


def block_bytes(v) -> dict:
    """HBM bytes of one q, k + v, mask and output block of variant ``v``."""
    item = 2 if v.dtype == "bfloat16" else 4
    return {"q": v.block_q * v.head_dim * item, "kv": 2 * v.block_kv * v.head_dim * item,
            "mask": v.block_q * v.block_kv, "out": v.block_q * v.head_dim * item}


def step_bytes(steps: list[list], v) -> list[int]:
    """HBM bytes each grid step moves (module doc)."""
    b = block_bytes(v)
    out, prev = [], (None, None, None)
    for _, _, last, q, kv, m in steps:
        out.append((q != prev[0]) * b["q"] + (kv != prev[1]) * b["kv"] + (m >= 0 and m != prev[2]) * b["mask"]
                   + last * b["out"])
        prev = (q, kv, m)
    return out


def estimate(compiled: dict, v) -> dict:
    """Static cycles per head (clock-free), the step-overhead share, HBM bytes and the time band of one
    compiled variant (:func:`svgtpu.compiler.variants.cached_compile`'s result)."""
    clock, bandwidth = clock_hz(v.device), core_bandwidth(v.device)
    compute = overhead = once = 0
    per_step: list[tuple[int, int]] = []
    fill_iters, body_cycles, kinds = 0, 0, Counter()
    for s, fill, steps in zip(compiled["schedules"], compiled["fills"], compiled["calls"]):
        fill = PIPELINE_FILL if fill is None else fill
        if not 0 <= fill <= 4:
            raise RuntimeError(f"{v.name}: grid loop runs {fill} iterations beyond its steps")
        bodies = s["bodies"]
        for (body, first, last, *_), nbytes in zip(steps, step_bytes(steps, v)):
            b = 0 if body is None else bodies[min(body, len(bodies) - 1)]
            kinds["empty" if body is None else ("full", "partial")[min(body, 1)] if len(bodies) > 1 else
                  "masked"] += 1
            c = s["overhead"] + first * s["init"] + last * s["finish"] + b
            per_step.append((c, nbytes))
            body_cycles += b
        fill_iters += fill
        overhead += (len(steps) + fill) * s["overhead"]
        once += s["total"] - s["loop"]
        compute += sum(c for c, _ in per_step[-len(steps):]) + fill * s["overhead"] + s["total"] - s["loop"]
    total_bytes = sum(b for _, b in per_step)
    seconds = sum(max(c / clock, b / bandwidth) for c, b in per_step) + (compute - sum(c for c, _ in per_step)) / clock
    return {"variant": v.name, "kernel": v.kernel, "mask": v.mask, "fast_path": v.fast_path, "device": v.device,
            "geometry": v.geometry, "block_q": v.block_q, "block_kv": v.block_kv,
            "block_kv_compute": v.block_kv_compute, "steps": len(per_step), "fill_iterations": fill_iters,
            **{f"{k}_steps": n for k, n in sorted(kinds.items())},
            "cycles": compute, "body_cycles": body_cycles, "overhead_cycles": overhead, "once_cycles": once,
            "overhead_share": overhead / compute, "hbm_bytes": total_bytes, "clock_ghz": clock / 1e9,
            "seconds": seconds, "memory_bound_steps": sum(b / bandwidth > c / clock for c, b in per_step) / max(len(per_step), 1),
            "schedules": compiled["schedules"]}


__all__ = ["PIPELINE_FILL", "clock_hz", "core_bandwidth", "block_bytes", "step_bytes", "estimate"]
