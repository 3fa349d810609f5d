"""The reader of whole compiled programs (:mod:`svgtpu.compiler.fusions`), checked on programs small enough
to compile in seconds for v6e: what a static count covers (a loop body once: proved on a lone matmul at
two sizes), a matmul's cycles against its FLOPs at the MXU rate, deduplicated programs, and roles from
named scopes.  Needs libtpu."""

import json
import subprocess
import sys

import pytest

from svgtpu.compiler import fusions
from svgtpu.compiler.compile import libtpu_available
from svgtpu.compiler.dumps import child_env
from svgtpu.compiler.units import core

pytestmark = pytest.mark.skipif(not libtpu_available(), reason="needs the TPU compiler (libtpu)")

#: A child process: compile ``body`` (a function of bf16 arrays of ``shapes``) for one v6e core.
CHILD = """
import jax, jax.numpy as jnp
from svgtpu.compiler.compile import topology_device
device = jax.sharding.SingleDeviceSharding(topology_device("v6e"))
args = [jax.ShapeDtypeStruct(s, jnp.bfloat16, sharding=device) for s in {shapes}]
def body(*x):
{body}
jax.jit(body).lower(*args).compile()
"""


def compile_and_read(tmp_path, shapes, body: str) -> dict:
    jf = tmp_path / "jf"
    code = CHILD.format(shapes=json.dumps(shapes), body="\n".join("    " + line for line in body.splitlines()))
    done = subprocess.run([sys.executable, "-c", code], env=child_env(jf), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return fusions.read_dump(jf)


@pytest.mark.system
@pytest.mark.slow
def test_a_static_count_is_one_loop_body_and_the_matmul_runs_near_the_mxu_rate(tmp_path):
    """Two bf16 matmuls, one twice the other along M: libtpu schedules the same loop body for both (its
    bundles, counted once, stay the same) and only the loop's trip count grows, so the trip-weighted
    cycles grow with the FLOPs.  Against the formula's 2 MXUs x 256^2 MACs x 2 flop per cycle (JAX's
    tpu_info: 2 MXUs of 256 on v6e), v6e's schedule issues a 16-row push per MXU every 8 bundles, twice
    that rate: the large matmul comes out between 1.6x and 2x the formula (never above 2x), and the
    iterations the larger one adds run at >= 85 % of the core's rate (:func:`svgtpu.compiler.units.core`)."""
    from jax.experimental.pallas import tpu as pltpu
    info = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion.TPU_V6E, 1)
    formula = info.num_mxus * info.mxu_column_size ** 2 * 2
    ops = {}
    for m in (8192, 16384):
        reading = compile_and_read(tmp_path / str(m), [[m, 2048], [2048, 2048]],
                                   "with jax.named_scope('ffn'):\n    return x[0] @ x[1]")
        [ops[m]] = reading["ops"]
        assert not reading["unmatched"] and ops[m]["role"] == "ffn" and ops[m]["flops"] == 2 * m * 2048 * 2048
    small, large = ops[8192], ops[16384]
    added = (large["flops"] - small["flops"]) / (large["cycles"] - small["cycles"])
    ratio = large["flops"] / large["cycles"] / formula
    print({m: (o["bundles"], o["cycles"]) for m, o in ops.items()},
          f"whole matmul {ratio:.3f}x the formula, added iterations {added / formula:.3f}x")
    assert abs(large["bundles"] - small["bundles"]) <= 0.01 * small["bundles"]   # one loop body, not unrolled
    assert large["cycles"] > 1.7 * small["cycles"]                                # the trip count makes the work
    assert 1.6 < ratio <= 2.0
    assert 0.85 * core("v6e").flops_per_cycle < added <= core("v6e").flops_per_cycle == 2 * formula


def test_an_op_in_a_while_body_counts_once_per_trip(tmp_path):
    """``lax.map`` over 6 slices compiles to an HLO while whose bound the top-level program keeps in a
    register; the reader takes the trip count from the HLO (counter 0 to 6, step 1)."""
    reading = compile_and_read(tmp_path, [[6, 512, 512], [512, 512]], "return jax.lax.map(lambda a: jnp.tanh(a @ x[1]), x[0])")
    [matmul] = [r for r in reading["ops"] if r["flops"]]
    assert matmul["calls"] == 6 and matmul["flops"] == 6 * 2 * 512 ** 3 and matmul["dynamic_loops"] == 0
    assert not reading["unmatched"]


HLO = """HloModule m, is_scheduled=true

%region_a (p0: f32[], p1: f32[]) -> f32[] {
  %p1 = f32[] parameter(1)
  %p0 = f32[] parameter(0), metadata={op_name="x"}
  ROOT %add.1 = f32[] add(%p0, %p1)
}

%region_b (q0: f32[], q1: f32[]) -> f32[] {
  %q0 = f32[] parameter(0)
  %q1 = f32[] parameter(1)
  ROOT %add.2 = f32[] add(%q0, %q1), metadata={op_name="y"}
}

%fused_a (a0: bf16[8,128], a1: bf16[128,128]) -> f32[8] {
  %a0 = bf16[8,128]{1,0} parameter(0)
  %a1 = bf16[128,128]{1,0} parameter(1)
  %conv.1 = bf16[8,128]{1,0} convolution(%a0, %a1), dim_labels=bf_io->bf, metadata={op_name="jit(f)/projections/dot_general"}
  %c.1 = f32[] constant(0)
  %cvt.1 = f32[8,128]{1,0} convert(%conv.1)
  ROOT %r.1 = f32[8]{0} reduce(%cvt.1, %c.1), dimensions={1}, to_apply=%region_a
}

%fused_b (b0: bf16[8,128], b1: bf16[128,128]) -> f32[8] {
  %b1 = bf16[128,128]{1,0} parameter(1)
  %b0 = bf16[8,128]{1,0} parameter(0)
  %conv.2 = bf16[8,128]{1,0} convolution(%b0, %b1), dim_labels=bf_io->bf, metadata={op_name="jit(f)/ffn/dot_general"}
  %cvt.2 = f32[8,128]{1,0} convert(%conv.2)
  %c.2 = f32[] constant(0)
  ROOT %r.2 = f32[8]{0} reduce(%cvt.2, %c.2), dimensions={1}, to_apply=%region_b
}

%fused_c (d0: bf16[8,128], d1: bf16[128,128]) -> f32[8] {
  %d0 = bf16[8,128]{1,0} parameter(0)
  %d1 = bf16[128,128]{1,0} parameter(1)
  %conv.3 = bf16[8,128]{1,0} convolution(%d0, %d1), dim_labels=bf_io->bf
  %c.3 = f32[] constant(1)
  %cvt.3 = f32[8,128]{1,0} convert(%conv.3)
  ROOT %r.3 = f32[8]{0} reduce(%cvt.3, %c.3), dimensions={1}, to_apply=%region_a
}

ENTRY %main (x: bf16[8,128], w: bf16[128,128], v: bf16[128,128]) -> f32[8] {
  %x = bf16[8,128]{1,0} parameter(0)
  %w = bf16[128,128]{1,0} parameter(1)
  %v = bf16[128,128]{1,0} parameter(2)
  %fusion.1 = f32[8]{0} fusion(%x, %w), kind=kOutput, calls=%fused_a, metadata={op_name="jit(f)/projections/dot_general"}
  %fusion.2 = f32[8]{0} fusion(%x, %v), kind=kOutput, calls=%fused_b, metadata={op_name="jit(f)/ffn/dot_general"}
  %fusion.3 = f32[8]{0} fusion(%x, %v), kind=kOutput, calls=%fused_c
  %all-gather.1 = f32[32]{0} all-gather(%fusion.3), dimensions={0}, metadata={op_name="jit(f)/ffn/all_gather"}
  ROOT %add.9 = f32[8]{0} add(%fusion.1, %fusion.2)
}
"""


def test_ops_whose_programs_must_be_identical_compare_equal_whatever_their_names():
    """libtpu dumps one program for identical HLO computations; the reader finds an op's twin by its
    canonical form: names, metadata and instruction order do not count, shapes and constants do."""
    ops = fusions.canonical_ops(HLO)
    assert ops["fusion.1"].canonical == ops["fusion.2"].canonical      # renamed, reordered, other metadata
    assert ops["fusion.3"].canonical != ops["fusion.1"].canonical      # another constant: another program
    assert ops["fusion.1"].flops == ops["fusion.2"].flops == 2 * 8 * 128 * 128
    assert (fusions.role_of(ops["fusion.1"].scope, "fusion"), fusions.role_of(ops["fusion.2"].scope, "fusion"),
            fusions.role_of(ops["fusion.3"].scope, "fusion"),
            fusions.role_of(ops["all-gather.1"].scope, "all-gather")) == ("projections", "ffn", "other", "collectives")


def test_program_cycles_weighs_nested_loops_by_their_own_exit_tests():
    """A hand-written schedule: an outer loop of 3 around an inner loop of 4 whose exit tests are
    if-converted into the inner body (the outer one predicated on the inner one's), as libtpu emits them."""
    text = "\n".join([
        "   0x0   :  { %1 = smov 0 } /* Start region 1 */",
        "   0x1 LB: > { %2 = sadd.s32 1, %s1 } /* Start region 2 */",
        "   0x2 LB: >> { %3 = sadd.s32 1, %s2 } /* Start region 3 */",
        "   0x3   : >> { %p4_p1 = scmp.ge.s32.totalorder %s3_s1, 4 /* loop exit test */ }",
        "   0x4   : >> { %p5_p2 = scmp.ge.s32.totalorder (%p4_p1), %s2_s2, 3 /* loop exit test */ }",
        "   0x5   : >> { %6 = sbr.rel (!%p4_p1) target = $region3 }",
        "   0x6   : >> {} /* End region 3 */",
        "   0x7   :  { %7 = sbr.rel (!%p5_p2) target = $region2 }",
        "   0x8   :  {} /* End region 2 */",
        "   0x9   :  { %8 = sbr.rel (%p9_p3) target = $region9 }",
        "   0xa   :  {} /* End region 4 */",
        "   0xb   :  { %10 = vnop } /* Start region 9 */",
    ])
    p = fusions.program_cycles(text)
    assert p.bundles == 12 and p.dynamic_loops == 0
    assert sorted(lp.trips for lp in p.loops) == [3, 4]
    # bundle 0: once; 1: 3x; 2-6: 3 x 4 each; 7-8: 3x; 9-11 (a forward branch, its region): once
    assert p.cycles == 1 + 3 + 5 * 12 + 2 * 3 + 3
