"""The GPU's SM clock and power while the benchmark times (``nvidia-smi``), call by call.

Why: a rate measured in a short call need not hold in a long one.  The H200 run of 2026-12-04 timed cuDNN's
attention inside the 1440p block 7.6 % slower per head than the same kernel alone, and our Triton kernel not at all
slower (``svgtpu.costmodel.against_h200()["in_block_over_alone"]``); a GPU held at its power limit lowers its clock,
and the fastest kernel draws the most power, so the clock is the first suspect, but the run kept no clock to tell.
This log keeps one: ``nvidia-smi`` samples the clock, its maximum, the power draw and limit, the temperature and the
reasons the clock is held down, every ``interval_ms``, while :class:`ClockLog` notes when each timed call ran, so
every call gets the samples taken during it (:meth:`ClockLog.summary`).  Where there is no ``nvidia-smi`` (CPU, the
smoke run) the log says so and times nothing differently.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import operator
import shutil
import statistics
import subprocess
import threading
import time
from typing import Any, Callable

import jax

#: The fields asked for, as ``nvidia-smi --query-gpu`` names them (``nvidia-smi --help-query-gpu``).
QUERY = ("timestamp", "clocks.sm", "clocks.max.sm", "power.draw", "power.limit", "temperature.gpu",
         "clocks_throttle_reasons.active")
#: What a driver that refuses one of :data:`QUERY`'s names is asked instead.
BASIC = ("timestamp", "clocks.sm", "power.draw")
#: Why the clock is held down, by bit of ``clocks_throttle_reasons.active`` (NVIDIA NVML API reference,
#: "Clocks Event Reasons": nvmlClocksEventReasonGpuIdle 0x1 ... nvmlClocksEventReasonHwPowerBrakeSlowdown 0x80,
#: DisplayClockSetting 0x100).
REASONS = {0x1: "idle", 0x2: "application clocks setting", 0x4: "software power cap", 0x8: "hardware slowdown",
           0x10: "sync boost", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
           0x80: "hardware power brake", 0x100: "display clock setting"}
TIMESTAMP = "%Y/%m/%d %H:%M:%S.%f"
NOT_FOUND = "nvidia-smi not found on this machine"


@dataclasses.dataclass(frozen=True)
class Sample:
    """One line of the log; a field the driver did not give is ``None``."""

    t: float                                  # seconds since the epoch (``time.time()``'s clock)
    sm_mhz: float | None = None
    max_sm_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    reasons: int | None = None


_FIELDS = {"clocks.sm": "sm_mhz", "clocks.max.sm": "max_sm_mhz", "power.draw": "power_w",
           "power.limit": "power_limit_w", "temperature.gpu": "temperature_c",
           "clocks_throttle_reasons.active": "reasons"}


def _number(text: str) -> float | int | None:
    text = text.strip()
    if text.lower().startswith("0x"):
        return int(text, 16)
    try:
        return float(text)
    except ValueError:   # "[N/A]", "[Not Supported]"
        return None


def parse_line(line: str, fields: tuple[str, ...] = QUERY) -> Sample | None:
    """A :class:`Sample` from one ``--format=csv,noheader,nounits`` line of ``fields``; ``None`` for a line that is
    not one (a header, an error message, a second GPU's line cut short)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(fields) or fields[0] != "timestamp":
        return None
    try:
        t = datetime.datetime.strptime(parts[0], TIMESTAMP).timestamp()
    except ValueError:
        return None
    values = {_FIELDS[f]: _number(p) for f, p in zip(fields[1:], parts[1:])}
    if values.get("reasons") is not None:
        values["reasons"] = int(values["reasons"])
    return Sample(t, **values)


def reason_names(mask: int) -> list[str]:
    """The :data:`REASONS` set in ``mask``, in bit order."""
    return [name for bit, name in REASONS.items() if mask & bit]


class ClockLog:
    """``nvidia-smi`` sampling every ``interval_ms`` while the block runs; :meth:`timed` wraps a call so its
    times are noted.  ``command``: the program (default ``nvidia-smi``, line-buffered through ``stdbuf`` where
    there is one, so no sample waits in a pipe's buffer when the log ends)."""

    def __init__(self, interval_ms: int = 50, command: list[str] | None = None, device: int = 0):
        self.interval_ms, self.device = interval_ms, device
        self.command = command
        self.samples: list[Sample] = []
        self.intervals: list[tuple[str, float, float]] = []
        self.fields: tuple[str, ...] = QUERY
        self.unavailable: str | None = None
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def _argv(self, fields: tuple[str, ...]) -> list[str] | None:
        program = self.command or (["nvidia-smi"] if shutil.which("nvidia-smi") else None)
        if program is None:
            return None
        prefix = ["stdbuf", "-oL"] if self.command is None and shutil.which("stdbuf") else []
        return [*prefix, *program, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits",
                f"--loop-ms={self.interval_ms}", f"--id={self.device}"]

    def _start(self, fields: tuple[str, ...]) -> str | None:
        """Start sampling ``fields``; the reason in words when it ends at once (a refused field, no driver)."""
        argv = self._argv(fields)
        if argv is None:
            return NOT_FOUND
        self.fields = fields
        self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         bufsize=1)
        try:
            self._process.wait(timeout=max(1.0, 3 * self.interval_ms / 1000))
        except subprocess.TimeoutExpired:   # still sampling: it started
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()
            return None
        out = (self._process.stdout.read() or "").strip()
        samples = [s for s in (parse_line(line, fields) for line in out.splitlines()) if s is not None]
        if samples:   # a sampler that ended on its own after a few lines: keep them
            self.samples.extend(samples)
            return None
        return f"nvidia-smi ended with status {self._process.returncode}: {(out.splitlines() or [''])[0][:200]}"

    def _read(self) -> None:
        for line in self._process.stdout:
            sample = parse_line(line, self.fields)
            if sample is not None:
                self.samples.append(sample)

    def __enter__(self) -> "ClockLog":
        why = self._start(QUERY)
        if why is not None and why != NOT_FOUND:
            why = self._start(BASIC) and why   # a driver that refuses a field: the basic fields, or the first reason
        self.unavailable = why
        return self

    def __exit__(self, *exc) -> None:
        if self._process is not None and self._process.poll() is None:
            time.sleep(2 * self.interval_ms / 1000)   # the samples of the last call's end
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def timed(self, name: str, call: Callable[[], Any]) -> Callable[[], Any]:
        """``call`` that notes when it ran, to the end of its device work, under ``name``."""
        def run():
            start = time.time()
            out = jax.block_until_ready(call())
            self.intervals.append((name, start, time.time()))
            return out
        return run

    def summary(self) -> dict:
        """Per timed call: the samples taken while it ran (SM clock median and least, the most it could run at,
        power median and most and its limit, the highest temperature, the reasons the clock was held down); the
        log's settings; or why there is no log."""
        if self.unavailable is not None:
            return {"unavailable": self.unavailable}
        calls = {}
        for name in dict.fromkeys(n for n, *_ in self.intervals):
            spans = [(a, b) for n, a, b in self.intervals if n == name]
            taken = [s for s in self.samples if any(a <= s.t <= b for a, b in spans)]
            calls[name] = _describe(taken) | {"calls": len(spans), "seconds": sum(b - a for a, b in spans)}
        return {"source": "nvidia-smi --query-gpu", "fields": list(self.fields), "interval_ms": self.interval_ms,
                "samples": len(self.samples), "all": _describe(self.samples), "calls": calls}


def _describe(samples: list[Sample]) -> dict:
    def values(field):
        return [v for s in samples if (v := getattr(s, field)) is not None]

    out: dict = {"samples": len(samples)}
    for field, key, how in (("sm_mhz", "sm_mhz_median", statistics.median), ("sm_mhz", "sm_mhz_min", min),
                            ("max_sm_mhz", "max_sm_mhz", max), ("power_w", "power_w_median", statistics.median),
                            ("power_w", "power_w_max", max), ("power_limit_w", "power_limit_w", max),
                            ("temperature_c", "temperature_c_max", max)):
        found = values(field)
        if found:
            out[key] = how(found)
    masks = values("reasons")
    if masks:
        out["reasons"] = reason_names(functools.reduce(operator.or_, masks))
        out["power_capped_share"] = sum(bool(m & 0x4) for m in masks) / len(masks)
    return out


def clock_line(name: str, summary: dict) -> str:
    """One call's clock in words, for the run's printed table."""
    c = summary.get("calls", {}).get(name)
    if not c or "sm_mhz_median" not in c:
        return f"{name}: no clock samples"
    text = f"{name}: SM {c['sm_mhz_median']:.0f} MHz median ({c['sm_mhz_min']:.0f} least"
    text += f" of {c['max_sm_mhz']:.0f})" if "max_sm_mhz" in c else ")"
    if "power_w_median" in c:
        text += f", {c['power_w_median']:.0f} W"
        text += f" of {c['power_limit_w']:.0f}" if "power_limit_w" in c else ""
    if c.get("reasons"):
        text += f", held by {', '.join(c['reasons'])}"
    return text + f" ({c['samples']} samples)"


__all__ = ["QUERY", "BASIC", "REASONS", "NOT_FOUND", "Sample", "parse_line", "reason_names", "ClockLog", "clock_line"]
