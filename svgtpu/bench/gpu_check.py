"""The GPU run's float64 checks, each under its own watchdog, in a process of their own (:mod:`svgtpu.bench.gpu`).

A kernel that hangs on the device (an mbarrier phase nobody completes) holds its CUDA stream, and with it every
later kernel of that process: the run's own watchdog could only save what it had and end.  So the checks run in a
child process, one variant after another, each reporting the step it is at
and its result as one line; the parent gives each variant ``per_check_s`` seconds.  A variant past its time is
recorded as hung, naming the variant and the step (``compile``, ``run``, ``compare``), the child is ended with its
process group, and a new child checks the variants after it: a hang costs that one check and a child's start.

The child is :func:`svgtpu.bench.gpu.check_child`: it rebuilds the run's profile from the JSON job on its command
line and runs :func:`svgtpu.bench.gpu.check_variants` on the variants named, one after another, reporting
``{"variant", "step"}`` and ``{"row"}`` messages (:func:`report`: lines after :data:`MARK`).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

#: Marks the child's report lines on its stdout (anything else there, a library's print, is passed on to stderr).
MARK = "svgtpu-check "
#: Seconds a child may take to start (python, jax, the device) before its first variant's clock starts.
START_S = 90.0
#: The check children alive now: the run's own watchdog ends them before it ends the run.
CHILDREN: set[subprocess.Popen] = set()


def end_children() -> None:
    """End every live check child with its process group (the run's watchdog calls this before exiting)."""
    for child in list(CHILDREN):
        _end(child)


def _end(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
    CHILDREN.discard(child)


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        if line.startswith(MARK):
            lines.put(json.loads(line[len(MARK):]))
        else:
            sys.stderr.write(line)
    lines.put(None)   # the child's stdout closed: it ended


def isolated_checks(job: dict, names: list[str], per_check_s: float, deadline: float, child: list[str]) -> list[dict]:
    """The check rows of ``names`` (in order), each variant checked in a child process within ``per_check_s``
    seconds and all before ``deadline`` (``time.monotonic()``).  ``child``: the child's command, given ``job`` (what
    it rebuilds the run from) with the names to check as JSON after it (:func:`svgtpu.bench.gpu.check_child`)."""
    rows: dict[str, dict] = {}
    todo = list(names)
    while todo:
        if deadline - time.monotonic() <= 0:
            break
        env = os.environ | {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}   # the parent holds its memory fraction
        proc = subprocess.Popen([*child, json.dumps(job | {"names": todo})], stdout=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        CHILDREN.add(proc)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        current, step, clock = None, "start the check process", time.monotonic() + START_S
        try:
            while True:
                limit = min(clock, deadline) - time.monotonic()
                try:
                    message = lines.get(timeout=max(limit, 0.0))
                except queue.Empty:
                    why = "the run's time budget ended" if deadline <= clock else \
                        f"hung: still at '{step}' {per_check_s:.0f} s into its check (its own watchdog ended it)"
                    for name in ([current] if current is not None else list(todo)):
                        rows[name] = {"variant": name, "ok": None, "reason": why}
                    todo = [n for n in todo if n not in rows]
                    break
                if message is None:   # the child ended: a crash in a check fails that one, between checks the rest
                    status = proc.wait()
                    failed = [current] if current is not None else list(todo)
                    for name in failed:
                        rows[name] = {"variant": name, "ok": None,
                                      "reason": f"the check process ended at '{step}' (exit status {status})"}
                    todo = [n for n in todo if n not in failed]
                    break
                if "step" in message:
                    if message["variant"] != current:
                        current, clock = message["variant"], time.monotonic() + per_check_s
                    step = f"{message['step']} {current}"
                else:
                    rows[message["row"]["variant"]] = message["row"]
                    todo.remove(message["row"]["variant"])
                    current, step, clock = None, "between checks", time.monotonic() + per_check_s
        finally:
            _end(proc)
    return [rows.get(n, {"variant": n, "ok": None, "reason": "time budget: no time left to check it"})
            for n in names]


def report(message: dict) -> None:
    """One report line on stdout, flushed (the parent's clock reads it as it comes)."""
    print(MARK + json.dumps(message, default=float), flush=True)
