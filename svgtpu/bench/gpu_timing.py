"""Timing inside a fixed budget, for a machine lent for minutes (:mod:`svgtpu.bench.gpu`).

The run's sections share one budget (:class:`Budget`); within a section, :func:`time_variants` compiles
and warms each call (a call that fails is recorded as skipped with the reason: out of memory,
unsupported by the installed jax) and then times the survivors in interleaved rounds
(:func:`svgtpu.bench.timing.interleaved_times`), as many as the section's time allows.
"""

from __future__ import annotations

import math
import os
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

import jax
from tqdm.auto import tqdm

from svgtpu.bench.gpu_clocks import ClockLog
from svgtpu.bench.timing import interleaved_times
from svgtpu.errors import BadInput


#: What the run is doing now, in words (``check ours-svg-fast``, ``compile cudnn-dense``, ...), for the record of a
#: run the :class:`Watchdog` ended.
NOW = {"step": "starting"}


class Watchdog:
    """Saves what a run has so far and ends the process when it is still running ``seconds`` after it started.

    A kernel that hangs on the device (an mbarrier that never completes, a compile that never returns) would
    otherwise hold the call until the machine's limit and lose every number of it; this way the sections that
    finished are written (``save(reason)``) and the process exits with status :data:`EXIT_STATUS`."""

    EXIT_STATUS = 3

    def __init__(self, seconds: float, save: Callable[[str], None], end: Callable[[], None] = lambda: None,
                 started: float | None = None):
        """``seconds`` after ``started`` (``time.monotonic()``, default now): ``end()`` (the run's child
        processes), ``save(why)``, exit."""
        self.seconds, self.save, self.end = seconds, save, end
        waited = 0.0 if started is None else time.monotonic() - started
        self.timer = threading.Timer(max(seconds - waited, 0.0), self._fire)
        self.timer.daemon = True

    def _fire(self) -> None:
        try:
            self.end()
            self.save(f"watchdog: still at {NOW['step']!r} {self.seconds:.0f} s after the start; the process was ended")
        finally:
            os._exit(self.EXIT_STATUS)

    def __enter__(self) -> "Watchdog":
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()


def check_budget(budget_s, typical: str) -> float:
    """``--budget`` as seconds: a positive finite number, or one line naming what a run takes (``typical``)."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not 0 < budget_s < math.inf:
        raise BadInput(f"budget must be a positive number of seconds ({typical}), got {budget_s!r}")
    return float(budget_s)


class Budget:
    """Seconds left of the run and of the current section."""

    def __init__(self, seconds: float):
        self.start = time.monotonic()
        self.deadline = self.start + seconds
        self.section_deadline = self.deadline

    def section(self, share_of_rest: float) -> None:
        now = time.monotonic()
        self.section_deadline = now + share_of_rest * max(self.deadline - now, 0.0)

    def left(self) -> float:
        return min(self.deadline, self.section_deadline) - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def reason(error: BaseException) -> str:
    """One line in words: the error's type and the first line of its message (OOM, unsupported, ...); for an
    error without a message (a bare ``assert`` in a library), the check that failed and where, from its
    traceback's last frame."""
    text = str(error).strip().splitlines()
    if text:
        return f"{type(error).__name__}: {text[0][:300]}"
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return f"{type(error).__name__} without a message"
    last = frames[-1]
    where = "/".join(Path(last.filename).parts[-3:])
    check = f"`{last.line}` failed" if last.line else "a check failed"
    return f"{type(error).__name__} without a message: {check} in {last.name} ({where}:{last.lineno})"


def time_variants(calls: dict[str, Callable], budget: Budget, max_rounds: int, desc: str,
                  clocks: ClockLog | None = None) -> tuple[dict, dict]:
    """Warm each call up (compile + one run, failures -> skipped), then time the survivors in
    interleaved rounds, as many as the section's budget allows (at most ``max_rounds``; without time
    for one, the second warm-up call of each is its one round); ``clocks`` notes when each timed call ran.

    Returns ``(times, skipped)``: per-round seconds of each timed call, and ``{name: reason}``.
    """
    skipped, steady = {}, {}
    for name, call in tqdm(calls.items(), desc=f"{desc}: compile", leave=False):
        if budget.left() <= 0:
            skipped[name] = "time budget: no time left to compile it"
            continue
        NOW["step"] = f"{desc}: compile {name}"
        try:
            jax.block_until_ready(call())
            start = time.perf_counter()
            jax.block_until_ready(call())
            steady[name] = time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - OOM, unsupported on this jax / GPU: the run goes on
            skipped[name] = reason(error)
    if not steady:
        return {}, skipped
    per_round = sum(steady.values())
    if budget.left() < 2 * per_round:  # no time for a warm-up and a round: the warm calls' times are the round
        return {n: [t] for n, t in steady.items()}, skipped
    rounds = int(min(max_rounds, budget.left() // per_round - 1))  # -1: interleaved_times' warm-up call
    NOW["step"] = f"{desc}: {rounds} timing rounds"
    timed = {n: clocks.timed(n, calls[n]) if clocks is not None else calls[n] for n in steady}
    times = interleaved_times(timed, rounds=rounds, desc=f"{desc}: rounds")
    return times, skipped


__all__ = ["NOW", "Watchdog", "Budget", "check_budget", "reason", "time_variants"]
