"""Why the 720p Wan block schedules its norm reductions far above the 1440p block's cycles per token (issue 61).

The compiled 720p block (``figures/compiled/wan-block/``, mesh data 2 x seq 4) holds 75,600 / 4 = 18,900 tokens per
device, not a multiple of the vreg's 8 sublanes; the 1440p block holds 75,600.  A Wan LayerNorm + modulation over
``[1, N, 5120]`` float32 compiled alone for one v6e core shows the same: at N = 18,900 its lane reduction is scheduled
many times above N = 18,896 or 18,904, which are multiples of 8, per token.  So the block's reading is the compiler's
schedule for these shapes (MaxDiffusion's 720p run on a context axis of 4 holds the same tokens per device), not a
misreading of the dump.  System tier: two small child compiles."""

import tempfile
from pathlib import Path

import pytest

from svgtpu.compiler.compile import libtpu_available

pytestmark = [pytest.mark.system,
              pytest.mark.skipif(not libtpu_available(), reason="needs the TPU compiler (libtpu)")]

_CHILD = """
import sys
import jax, jax.numpy as jnp
from svgtpu.compiler.compile import topology_device
tokens = int(sys.argv[1])
sharding = jax.sharding.SingleDeviceSharding(topology_device("v6e"))
def norm(x, shift, scale):   # Wan's LayerNorm without affine, then adaLN modulation, in float32
    mean = jnp.mean(x, axis=-1, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True) + 1e-6)
    return (y * (1 + scale) + shift).astype(jnp.bfloat16)
shapes = [(1, tokens, 5120), (1, 1, 5120), (1, 1, 5120)]
jax.jit(norm).lower(*[jax.ShapeDtypeStruct(s, jnp.float32, sharding=sharding) for s in shapes]).compile()
"""


def norm_cycles(tokens: int) -> dict[str, int]:
    """Static cycles of the norm over ``tokens`` tokens, by opcode and in total, from a child compile's dump."""
    from svgtpu.compiler.dumps import child_env, run_child
    from svgtpu.compiler.fusions import read_dump
    with tempfile.TemporaryDirectory() as tmp:
        jf = Path(tmp, "jf")
        run_child(f"import sys; sys.argv = ['norm', '{tokens}']; exec({_CHILD!r})", child_env(jf), f"norm {tokens}")
        reading = read_dump(jf)
    out = {"total": sum(op["cycles"] for op in reading["ops"])}
    for op in reading["ops"]:
        out[op["opcode"]] = out.get(op["opcode"], 0) + op["cycles"]
    return out


def test_a_token_count_off_the_sublane_tile_multiplies_the_norms_reduction():
    ragged, aligned = norm_cycles(18_900), norm_cycles(18_904)
    print(f"cycles at 18,900 tokens {ragged}, at 18,904 {aligned}")
    assert ragged["reduce"] > 5 * aligned["reduce"]
    assert ragged["total"] / 18_900 > 3 * aligned["total"] / 18_904
    # the block's own reading holds that very program: a reduce of its norm scope scheduled cycle for cycle alike
    from svgtpu.costmodel.compiled_block import block_record
    block = block_record("wan2.1-14b", "720p", "v6e", "dense")
    assert ragged["reduce"] in {op["cycles"] for op in block["ops"]
                                if op["opcode"] == "reduce" and op["scope"].endswith("/norm/reduce_sum")}
