"""How attention's cost grows with resolution, from instruments that give the same answer every run (C5).

- :func:`kernel_sweep`: per resolution, the FLOPs our kernel computes (its tiles, padding included:
  ``tiles x block_q x block_kv x 4 x head_dim``) and its static cycles, read from one compiled schedule of
  the kernel re-bounded to each resolution's plan (:func:`svgtpu.compiler.wan_block.kernel_cycles`): the
  program is the same at every length but for its grid loop's bound.
- :func:`loglog_fit`: the exponent ``k`` of ``cost ~ L^k`` by least squares on log-log axes, with each
  point's residual (how far it sits off the line, in log units).
- :func:`bootstrap_exponent`: for a timing (the toy DiT on this CPU, every length timed in each round), an
  interval for ``k`` from resampling whole rounds: the spread a rerun could show.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from svgtpu.errors import BadInput


def loglog_fit(L, values) -> dict:
    """``{"exponent", "residuals"}``: the least-squares slope of ``log(values)`` against ``log(L)`` and
    each point's ``log(value) - fitted``."""
    x, y = np.log(np.asarray(L, float)), np.log(np.asarray(values, float))
    if len(x) < 2:
        raise BadInput(f"a fit needs at least two lengths, got {len(x)}")
    slope, intercept = np.polyfit(x, y, 1)
    return {"exponent": float(slope), "residuals": [float(r) for r in y - (slope * x + intercept)]}


def bootstrap_exponent(L, rounds, *, n: int = 2000, seed: int = 0, level: float = 0.95) -> list[float]:
    """``[lo, hi]``: the central ``level`` interval of the log-log slope over ``n`` resamples.  ``rounds[i][r]``
    is length ``L[i]``'s time in round ``r``, every length timed in each round
    (:func:`svgtpu.bench.cpu.toy_attention_scaling`); a resample draws whole rounds with replacement (seeded),
    so the lengths keep what a round shared (the machine's load then), and takes each length's median."""
    rng = np.random.default_rng(seed)
    counts = [len(r) for r in rounds]
    if len(counts) != len(L) or len(set(counts)) != 1 or counts[0] < 2:
        raise BadInput(f"rounds must hold the same number (at least two) of rounds for each of the {len(L)} "
                       f"lengths, got {counts}")
    times = np.asarray(rounds, float)
    x = np.log(np.asarray(L, float))
    picks = rng.integers(0, times.shape[1], size=(n, times.shape[1]))
    slopes = [np.polyfit(x, np.log(np.median(times[:, p], axis=1)), 1)[0] for p in picks]
    tail = (1 - level) / 2 * 100
    return [float(v) for v in np.percentile(slopes, [tail, 100 - tail])]


def kernel_sweep(job, schedule: dict, fill: int, resolutions) -> list[dict]:
    """Per resolution: ``L``, the kernel's grid steps and computed FLOPs for one head, and its static
    cycles for one head, from ``schedule`` (one compiled schedule of ``job``'s kernel, with its ``fill``)."""
    from svgtpu.compiler.wan_block import kernel_cycles
    from svgtpu.costmodel.workload import get_model
    from svgtpu.geometry import get_geometry
    head_dim = get_model(job.model).head_dim
    rows = []
    for name in resolutions:
        at = dataclasses.replace(job, setting=dataclasses.replace(job.setting, resolution=name))
        k = kernel_cycles(at, 1, [schedule], fill)
        rows.append({"resolution": name, "L": get_geometry(name).L, "steps": k["steps"],
                     "flops": 4 * k["steps"] * job.setting.block_q * job.setting.block_kv * head_dim, "cycles": k["cycles"]})
    return rows


__all__ = ["loglog_fit", "bootstrap_exponent", "kernel_sweep"]
