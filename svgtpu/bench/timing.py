"""How we time things on a shared machine (docs/design.md, "How we measure"), in one place.

Every call is run once first (compile, warm up).  Then the calls run interleaved, round-robin, the
order rotating each round; in each round a call runs ``repeats`` times back to back and keeps its
fastest time (other processes only ever add time, so the minimum filters their spikes).  Compare
calls by :func:`paired_ratio`, the median of per-round ratios: back-to-back blocks of runs drift with
the machine's load, paired ratios do not.  Absolute CPU times mean little.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import jax
import numpy as np
from tqdm.auto import tqdm

from svgtpu.geometry import check_positive_int


def interleaved_times(calls: dict[str, Callable[[], Any]], *, rounds: int = 9, repeats: int = 1,
                      desc: str = "timing rounds", progress: bool = True) -> dict[str, list[float]]:
    """Seconds per round of each call (``{name: [round 0, round 1, ...]}``), timed as above.

    Each call's result is passed to ``jax.block_until_ready`` so asynchronous dispatch is timed in full.
    """
    check_positive_int("rounds", rounds)
    check_positive_int("repeats", repeats)
    names = list(calls)
    for name in names:
        jax.block_until_ready(calls[name]())
    times: dict[str, list[float]] = {name: [] for name in names}
    with tqdm(total=rounds * len(names), desc=desc, disable=not progress) as bar:
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                fastest = float("inf")
                for _ in range(repeats):
                    start = time.perf_counter()
                    jax.block_until_ready(calls[name]())
                    fastest = min(fastest, time.perf_counter() - start)
                times[name].append(fastest)
                bar.update()
    return times


def paired_ratio(times: dict[str, list[float]], a: str, b: str) -> float:
    """Median over rounds of ``time[a] / time[b]``."""
    return statistics.median(x / y for x, y in zip(times[a], times[b]))


def paired_ratio_iqr(times: dict[str, list[float]], a: str, b: str) -> list[float]:
    """The interquartile range ``[q1, q3]`` over rounds of ``time[a] / time[b]``: the spread of
    :func:`paired_ratio` (one round gives ``[r, r]``)."""
    ratios = [x / y for x, y in zip(times[a], times[b])]
    return [float(q) for q in np.percentile(ratios, [25, 75])]


#: Fewest timing rounds whose interquartile range is reported: with fewer, three quartiles rest on one or two
#: points and the range says little about the spread of a rerun (issue 54), so the median stands alone.
MIN_ROUNDS_FOR_IQR = 5


def reported_iqr(times: dict[str, list[float]], a: str, b: str) -> list[float] | None:
    """:func:`paired_ratio_iqr` when at least :data:`MIN_ROUNDS_FOR_IQR` rounds ran, else ``None`` (no IQR)."""
    return paired_ratio_iqr(times, a, b) if len(times[a]) >= MIN_ROUNDS_FOR_IQR else None


__all__ = ["interleaved_times", "paired_ratio", "paired_ratio_iqr", "MIN_ROUNDS_FOR_IQR", "reported_iqr"]
