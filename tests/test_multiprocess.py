"""Several JAX processes on localhost (svgtpu.launch): 2 processes x 3 fake CPU devices, gloo collectives.

The sharded SVG layer and sampling across processes equal one process; the CLI's two-process video
is byte-identical to the one-process one; a process that dies or hangs is a clear error and leaves
nothing running.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from svgtpu.cli import main
from svgtpu.launch import LaunchError, first_json, launch
from svgtpu.tpu_env import with_fast_cpu_compile
from svgtpu.warmup import DEFAULT_WARMUP_STEP_FRACTION, warmup_count

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Every test here starts processes of its own (make test-system runs them).
pytestmark = pytest.mark.system


def _gone(pid: int) -> bool:
    """True when no process ``pid`` exists any more (or only a zombie awaiting its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.slow
def test_svg_layer_across_two_processes_equals_one():
    done = launch([sys.executable, str(ROOT / "tests/multiprocess/worker.py")], processes=2,
                  devices_per_process=3, timeout=400)
    out = first_json(done.stdout[0])
    assert out["process_count"] == 2 and out["devices"] == 6
    # the SVG layer: profiling, layout transform and kernel per head, the same numbers bit for bit
    assert out["svg heads 2x3"] == 0.0
    assert out["svg ulysses 2x3 (seq across processes)"] == 0.0


#: Sampling steps of the generate runs: every step runs the one compiled program (the step index is data), and
#: SVG's default dense warm-up leaves this step sparse (checked below), so one step runs the whole sparse path.
STEPS = 1


def _generate(tmp_path, name, *extra):
    """``svgtpu generate`` run outside the checkout (the shipped checkpoint is found from the package)."""
    gif = tmp_path / f"{name}.gif"
    proc = subprocess.run([sys.executable, "-m", "svgtpu", "generate", "--devices", "6", "--attention", "svg",
                           "--steps", str(STEPS), "--labels", "0", "3", "--out", str(gif), "--json", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, XLA_FLAGS=with_fast_cpu_compile("")))  # no device count: --devices sets it
    assert proc.returncode == 0, proc.stderr[-3000:]
    return gif.read_bytes(), json.loads(proc.stdout)


@pytest.mark.slow
def test_generate_two_processes_equal_one(tmp_path):
    assert warmup_count(DEFAULT_WARMUP_STEP_FRACTION, STEPS) < STEPS   # a sparse step runs, not the warm-up only
    one_gif, one = _generate(tmp_path, "one")
    two_gif, two = _generate(tmp_path, "two", "--processes", "2")
    assert two["processes"] == 2 and two["launcher"]["processes"] == 2 and one["processes"] == 1
    assert two["mesh"] == one["mesh"] == {"data": 2, "heads": 3, "seq": 1}
    assert two_gif == one_gif
    assert two["video"] == one["video"]
    assert (tmp_path / "two.png").read_bytes() == (tmp_path / "one.png").read_bytes()


_START_FAIL = """
import os, subprocess, sys, time
pid = os.environ["PIDS"]
me = int(sys.argv[sys.argv.index("--process-id") + 1])
child = subprocess.Popen(["sleep", "300"])            # a grandchild in the same process group
open(os.path.join(pid, f"{me}"), "w").write(f"{os.getpid()} {child.pid}")
if me == 1 and os.environ.get("MODE") == "fail":
    while not os.path.exists(os.path.join(pid, "0")):  # process 0 has started (and goes on to the coordinator)
        time.sleep(0.05)
    time.sleep(1)
    sys.exit("process 1 cannot start: no such device")
if me == 0 and os.environ.get("MODE") == "fail":      # the real thing: wait for process 1 at the coordinator
    from svgtpu.launch import initialize
    a = sys.argv
    initialize(a[a.index("--coordinator") + 1], int(a[a.index("--num-processes") + 1]), 0)
time.sleep(300)
"""


#: How long the launcher waits for the hanging processes: they start (no jax import) and write their ids well within it.
HANG_TIMEOUT_S = 3


@pytest.mark.parametrize("mode", ["fail", "hang"])
def test_a_failing_or_hanging_process_is_a_clear_error_and_nothing_is_left(tmp_path, mode):
    env = dict(os.environ, PIDS=str(tmp_path), MODE=mode)
    with pytest.raises(LaunchError) as error:
        launch([sys.executable, "-c", _START_FAIL], processes=2, env=env,
               timeout=60 if mode == "fail" else HANG_TIMEOUT_S)
    message = str(error.value)
    if mode == "fail":
        assert "process 1 of 2" in message and "exited with status 1" in message
        assert "process 1 cannot start: no such device" in message
    else:
        assert f"processes 0, 1 of 2 still running after the {HANG_TIMEOUT_S} s timeout" in message
    pids = [int(p) for f in tmp_path.iterdir() for p in f.read_text().split()]
    assert len(pids) == 4
    left = [p for p in pids if not _gone(p)]
    assert not left, f"still running after the launcher returned: {left}"


def test_generate_processes_must_divide_devices(capsys):
    # in this process: refused before anything starts (the `python -m svgtpu` entry itself: test_cli)
    assert main(["generate", "--processes", "2", "--devices", "5"]) == 2
    assert "--devices (5) must be divisible by --processes (2)" in capsys.readouterr().err
