"""The environment svgtpu sets up without a TPU: XLA flags merged without overriding the user's, and Pallas'
interpreter compiled to a grid loop that updates its operands in place (no whole-operand copy per grid step)."""

import json
import os
import subprocess
import sys

import pytest

from svgtpu.tpu_env import INTERPRET_CPU_FLAGS, has_tpu_chip, with_fast_cpu_compile, without_cpu_compile_flags

FLAG = INTERPRET_CPU_FLAGS[0].split("=")[0]

# An interpret-mode pallas_call over a [4, 256, 128] operand in 128 x 128 blocks, compiled for CPU; prints how many
# copies of a whole operand each while loop's body makes (the loop is the interpreter's grid).
_PROBE = """
import json, re, sys
import svgtpu  # noqa: F401  (sets XLA_FLAGS before the CPU backend starts)
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

x = jnp.ones((4, 256, 128))
spec = pl.BlockSpec((1, 128, 128), lambda h, i: (h, i, 0))
call = jax.jit(lambda x: pl.pallas_call(double, grid=(4, 2), in_specs=[spec], out_specs=spec,
                                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x))
assert (call(x) == 2).all()
text = call.lower(x).compile().as_text()
bodies = set(re.findall(r"while\\(.*?body=%?([\\w.\\-]+)", text))
copies, current = {}, None
for line in text.splitlines():
    head = re.match(r"\\s*%?([\\w.\\-]+) \\(.*\\{\\s*$", line)
    if head:
        current = head.group(1) if head.group(1) in bodies else None
    elif current and "f32[4,256,128]" in line and " copy(" in line:
        copies[current] = copies.get(current, 0) + 1
print(json.dumps({"bodies": sorted(bodies), "copies": copies}))
"""


def _probe(xla_flags: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = xla_flags
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_flags_are_added_once_and_the_users_own_setting_wins():
    assert with_fast_cpu_compile("") == "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    mine = "--xla_backend_optimization_level=3 --xla_force_host_platform_device_count=8"
    assert with_fast_cpu_compile(mine) == mine + " --xla_llvm_disable_expensive_passes=true"
    assert without_cpu_compile_flags(with_fast_cpu_compile("--xla_dump_to=/tmp/x")) == "--xla_dump_to=/tmp/x"


@pytest.mark.skipif(has_tpu_chip(), reason="on a TPU host the kernels compile; nothing is interpreted")
def test_the_interpreters_grid_loop_updates_its_operands_in_place():
    ours = _probe("")                     # svgtpu adds the flag
    assert ours["bodies"], "the interpreter's grid is a while loop"
    assert ours["copies"] == {}, ours
    theirs = _probe(f"{FLAG}=false")      # a user's own setting is kept, and then XLA copies at every grid step
    assert theirs["bodies"] and sum(theirs["copies"].values()) >= 1, theirs
