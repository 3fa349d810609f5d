"""Several JAX processes, one global mesh: ``jax.distributed`` set-up and a localhost launcher.

A multi-host TPU slice is programmed with one JAX process per host.  Every process runs the same
command; :func:`initialize` joins them (on a TPU VM slice JAX finds the coordinator itself; elsewhere
give ``coordinator``, ``num_processes`` and ``process_id``), after which ``jax.devices()`` lists the
devices of every process and a mesh over them is global.

:func:`launch` imitates a slice on one machine for tests and teaching: it starts N copies of a
command on localhost, each with its own fake CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count``) and a coordinator on a free loopback port.
The CPU backend needs a cross-process collectives implementation for that: :func:`initialize`
selects gloo (``jax.config.update("jax_cpu_collectives_implementation", "gloo")``), which changes
nothing on TPU.  Every process runs in its own process group; when one dies, or the time limit
passes, every group is killed and :class:`LaunchError` names the process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from svgtpu.errors import BadInput

#: Options a launcher adds to each process's command line (see :func:`add_arguments`).
COORDINATOR, NUM_PROCESSES, PROCESS_ID = "--coordinator", "--num-processes", "--process-id"


class LaunchError(ChildProcessError):
    """A launched process failed or hung; the message names it and its logs (not bad input: the CLI
    shows the traceback, exit status 1; bad input is refused before any process starts)."""


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> None:
    """Join this process to a multi-process JAX job, before any JAX computation.

    With no arguments JAX auto-detects the job (a TPU VM slice, SLURM, ...); otherwise all three
    must be given.  Selects gloo for the CPU backend's cross-process collectives.
    """
    given = [a is not None for a in (coordinator, num_processes, process_id)]
    if any(given) and not all(given):
        raise BadInput(f"give all of {COORDINATOR}, {NUM_PROCESSES} and {PROCESS_ID}, or none "
                       "(auto-detected on a TPU VM slice)")
    if num_processes is not None and not 0 <= process_id < num_processes:
        raise BadInput(f"process id must be in [0, {num_processes}), got {process_id}")
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)


def add_arguments(p) -> None:
    """The options of a command that can run as one process of several, on an ``argparse`` parser."""
    from svgtpu.errors import positive_int
    p.add_argument("--processes", type=positive_int, default=1,
                   help="start this many processes on localhost (each with --devices / processes fake CPU "
                        "devices, gloo collectives) and print process 0's result (docs/multihost.md)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="with --processes: kill every process after this many seconds (default 900)")
    p.add_argument("--distributed", action="store_true",
                   help="this is one process of a multi-host job: jax.distributed.initialize(), auto-detected "
                        "on a TPU VM slice (run the same command on every host)")
    p.add_argument(COORDINATOR, help="with --num-processes and --process-id: the coordinator HOST:PORT "
                   "(process 0's host), where JAX cannot detect the job itself")
    p.add_argument(NUM_PROCESSES, type=positive_int)
    p.add_argument(PROCESS_ID, type=int)


def join(distributed: bool, coordinator: str | None, num_processes: int | None, process_id: int | None) -> bool:
    """Run :func:`initialize` if the options of :func:`add_arguments` make this one process of several; True if
    it did."""
    if not (distributed or coordinator or num_processes or process_id is not None):
        return False
    initialize(coordinator, num_processes, process_id)
    return True


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_group(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGTERM, then after ``grace`` seconds SIGKILL, the process group ``proc`` leads: it and
    anything it started, even after it has exited itself."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10.0   # until every member of the group has died
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` is alive (not a zombie); Linux's /proc, else killpg."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
            return True
        except ProcessLookupError:
            return False
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _last_lines(path: str, n: int = 3) -> str:
    with open(path, errors="replace") as f:
        lines = [line.strip() for line in f.read().splitlines() if line.strip()]
    return " | ".join(lines[-n:]) if lines else "(no output)"


@dataclass
class Finished:
    """What :func:`launch` returns: every process's stdout, and the seconds until all had exited."""

    stdout: list[str]
    seconds: float
    port: int


def launch(command: list[str], processes: int, devices_per_process: int = 1, timeout: float = 900.0,
           env: dict | None = None) -> Finished:
    """Run ``command`` (argv) as ``processes`` processes on localhost and wait for all of them.

    Process ``i`` gets ``--coordinator 127.0.0.1:PORT --num-processes N --process-id i`` appended and
    ``devices_per_process`` fake CPU devices.  If one exits non-zero, or ``timeout`` seconds pass,
    every process group is killed and :class:`LaunchError` names the process(es) with the end of
    their stderr.  Nothing is left running, whatever happens (the groups are killed in ``finally``).
    """
    from svgtpu.geometry import check_positive_int
    check_positive_int("processes", processes)
    check_positive_int("devices per process", devices_per_process)
    if not timeout > 0:
        raise BadInput(f"timeout must be a positive number of seconds, got {timeout}")
    port = free_port()
    logs = tempfile.mkdtemp(prefix="svgtpu-launch-")
    base = dict(os.environ if env is None else env)
    flags = " ".join(f for f in base.get("XLA_FLAGS", "").split()
                     if not f.startswith("--xla_force_host_platform_device_count"))
    base.update(XLA_FLAGS=f"{flags} --xla_force_host_platform_device_count={devices_per_process}".strip(),
                JAX_PLATFORMS="cpu")
    procs, files, ok = [], [], False
    start = time.perf_counter()
    try:
        for i in range(processes):
            out, err = (open(os.path.join(logs, f"process{i}.{s}"), "w") for s in ("out", "err"))
            files += [out, err]
            argv = [*command, COORDINATOR, f"127.0.0.1:{port}", NUM_PROCESSES, str(processes), PROCESS_ID, str(i)]
            procs.append(subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=base,
                                          start_new_session=True))   # own process group: killpg reaches all
        while True:
            codes = [p.poll() for p in procs]
            failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i = failed[0]
                raise LaunchError(f"process {i} of {processes} (pid {procs[i].pid}) exited with status {codes[i]}: "
                                  f"{_last_lines(os.path.join(logs, f'process{i}.err'))}; the other processes were "
                                  f"killed (logs in {logs})")
            if all(c == 0 for c in codes):
                break
            if time.perf_counter() - start > timeout:
                hung = [i for i, c in enumerate(codes) if c is None]
                raise LaunchError(f"process{'es' if len(hung) > 1 else ''} {', '.join(map(str, hung))} of {processes} "
                                  f"still running after the {timeout:g} s timeout; all were killed (logs in {logs}); "
                                  f"last words of process {hung[0]}: "
                                  f"{_last_lines(os.path.join(logs, f'process{hung[0]}.err'))}")
            time.sleep(0.05)
        seconds = time.perf_counter() - start
        for f in files:
            f.close()
        stdout = [open(os.path.join(logs, f"process{i}.out")).read() for i in range(processes)]
        ok = True
        return Finished(stdout, seconds, port)
    finally:
        for p in procs:
            _kill_group(p)
        for f in files:
            f.close()
        if ok:
            shutil.rmtree(logs, ignore_errors=True)


def relaunch_argv(argv: list[str]) -> list[str]:
    """This command line for one launched process: ``python -m svgtpu`` and the same arguments less
    ``--processes`` / ``--timeout`` (the launcher's own), with ``--json``."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--processes", "--timeout"):
            skip = True
            continue
        if a.startswith(("--processes=", "--timeout=")):
            continue
        out.append(a)
    return [sys.executable, "-m", "svgtpu", *out, *([] if "--json" in out else ["--json"])]


def first_json(text: str) -> dict:
    """The JSON object a ``--json`` command printed (the first line that opens one)."""
    import json
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("{"):
            return json.loads("\n".join(lines[i:]))
    raise LaunchError(f"process 0 printed no JSON result: {text[-400:]!r}")


def fake_host_devices(argv: list[str]) -> None:
    """Let ``--devices N`` run on a CPU-only machine: ask XLA for N host devices before jax starts.

    The flag only affects the host (CPU) platform, so it changes nothing on a TPU VM.
    """
    import argparse
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--devices", default="1")
    devices = pre.parse_known_args(argv)[0].devices
    devices = int(devices) if devices.isdigit() else 1  # the real parser reports bad values
    flags = os.environ.get("XLA_FLAGS", "")
    if devices > 1 and "jax" not in sys.modules and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()


def run_processes(argv: list[str], processes: int, devices: int, timeout: float, *, distributed: bool,
                  coordinator: str | None) -> dict:
    """The command ``argv`` (with the options of :func:`add_arguments` and ``--devices``) as ``processes`` local
    processes sharing one global mesh of ``devices`` devices: process 0's JSON result, plus ``launcher``."""
    if devices % processes:
        raise BadInput(f"--devices ({devices}) must be divisible by --processes ({processes})")
    if distributed or coordinator:
        raise BadInput("--processes starts its own processes: drop --distributed / --coordinator")
    done = launch(relaunch_argv(argv), processes, devices // processes, timeout=timeout)
    return {**first_json(done.stdout[0]),
            "launcher": {"processes": processes, "wall_seconds": done.seconds, "port": done.port}}


__all__ = ["LaunchError", "add_arguments", "fake_host_devices", "initialize", "join", "free_port", "launch", "Finished",
           "relaunch_argv", "first_json", "run_processes"]
