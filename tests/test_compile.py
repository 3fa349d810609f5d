"""The real TPU compiler (libtpu's XLA:TPU + Mosaic), run ahead of time on this CPU for v6e / v5e.

Small shapes only: compiling is what is tested (block layouts, VMEM, lowering of every op), not
speed.  Skipped, with the reason, where libtpu is not installed.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.compiler.compile import CompileJob, compile_fn, compile_targets, libtpu_available, topology_device
from svgtpu.kernels import KernelConfig, block_sparse_attention
from svgtpu.kernels.common import compiling_for
from svgtpu.masks.core import BandSinkMask

pytestmark = pytest.mark.skipif(not libtpu_available(),
                                reason='libtpu not installed (pip install "jax[tpu]==0.10.2"): no TPU compiler')


def _compile_kernel(mask, L, config, dtype, heads=2, d=128, device="v6e"):
    x = jax.ShapeDtypeStruct((heads, L, d), jnp.dtype(dtype),
                             sharding=jax.sharding.SingleDeviceSharding(topology_device(device)))
    with compiling_for(device):
        return compile_fn(lambda q, k, v: block_sparse_attention(q, k, v, mask, config=config, device=device),
                          (x, x, x))


# (id, mask builder, L, config, dtype): f32 / bf16, fast path on / off, iota / blocks / per-head
# plans, and q blocks that are multiples of 8 but not of 16 or 128 (bf16 included).
KERNELS = [
    ("iota-bf16-q24-fast", lambda L: BandSinkMask(L, 40, 200), 600, KernelConfig(24, 128), "bfloat16"),
    ("blocks-f32-q136-nofast", lambda L: np.random.default_rng(0).random((L, L)) < 0.3, 600,
     KernelConfig(136, 256, 128, fast_path=False), "float32"),
    ("per-head-bf16", lambda L: np.random.default_rng(1).random((2, L, L)) < 0.2, 300,
     KernelConfig(128, 128), "bfloat16"),
]


@pytest.mark.parametrize("case", KERNELS, ids=[c[0] for c in KERNELS])
def test_kernel_compiles_for_v6e(case):
    name, build, L, config, dtype = case
    result = _compile_kernel(build(L), L, config, dtype)
    assert result["compiled"], result["reason"]


def test_compiler_refusal_is_one_line_with_its_vmem_figure(monkeypatch):
    """With a VMEM limit far too small Mosaic refuses (as it would on a TPU); we report its line."""
    import svgtpu.kernels.block_sparse as kernel_module
    monkeypatch.setattr(kernel_module, "check_vmem", lambda *args: 1 << 18)
    result = _compile_kernel(BandSinkMask(512, 50, 150), 512, KernelConfig(256, 256), "float32", heads=1)
    assert not result["compiled"]
    assert "RESOURCE_EXHAUSTED" in result["reason"] and "\n" not in result["reason"]
    assert result["compiler_vmem_bytes"] > 1 << 18


def test_a_scalar_prefetch_plan_over_smem_is_refused_by_the_compiler(capsys):
    """What libtpu does with a plan larger than SMEM (observed with jax 0.10.2, libtpu 0.0.42.1): it refuses,
    RESOURCE_EXHAUSTED, naming the prefetched SMEM operand; half the budget compiles.  The package still
    splits long plans itself (``TilePlan.chunks``) so that they run instead of being refused."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from svgtpu.compiler.aot import compile_report
    from svgtpu.kernels import device_memory

    def planned_copy(words, x):
        def kernel(plan_ref, x_ref, o_ref):
            o_ref[...] = x_ref[...]
        return pl.pallas_call(kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(words.shape[0],),
            in_specs=[pl.BlockSpec((8, 128), lambda s, plan: (plan[s] % 4, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda s, plan: (0, 0))),
            out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype))(words, x)

    smem = device_memory("v6e").smem
    x = jax.ShapeDtypeStruct((32, 128), jnp.float32)
    fits = compile_report(planned_copy, jax.ShapeDtypeStruct((smem // 8,), jnp.int32), x)
    over = compile_report(planned_copy, jax.ShapeDtypeStruct((smem // 2,), jnp.int32), x)
    assert fits["compiled"] and not over["compiled"]
    assert "RESOURCE_EXHAUSTED" in over["reason"] and "prefetched SMEM operand" in over["reason"]
    assert "refused: RESOURCE_EXHAUSTED" in capsys.readouterr().out


def test_svg_layer_compiles_for_v5e_with_plan_facts():
    """The whole SVG layer (profiling, layout transform, kernel) for another generation."""
    job = CompileJob(geometry="4x8x16", config=KernelConfig(128, 128), device="v5e", heads=2, head_dim=64)
    result = compile_targets(job, ("svg-layer",))
    row, = result["targets"]
    assert result["compiled"] and result["provenance"] == "compiled-v5e", row.get("reason")
    assert row["plan_chunks"] == 1 and row["smem_bytes"] == 512 * -(-row["plan_steps"] // 128)  # 128-word tiles


def test_compile_command_exit_status(capsys):
    from svgtpu.cli import main
    assert main(["compile", "--device", "v4"]) == 2
    assert "device must be one of v5e, v5p, v6e" in capsys.readouterr().err
    assert main(["compile", "--block-q", "100"]) == 2
    assert "block_q must be a positive multiple of 8" in capsys.readouterr().err
    assert main(["compile", "--topology", "v5e:2x2"]) == 2
    # refused before compiling: the VMEM estimate is over v5p's budget; the line names a block_kv_compute that fits
    assert main(["compile", "--device", "v5p", "--geometry", "3x32x32", "--block-q", "3024", "--block-kv", "2048",
                 "--block-kv-compute", "2048", "--dtype", "float32", "--what", "kernel", "--json"]) == 1
    row, = json.loads(capsys.readouterr().out)["targets"]
    assert not row["compiled"] and "over the v5p budget" in row["reason"] and "block_kv_compute=" in row["reason"]
    assert main(["compile", "--geometry", "4x8x16", "--block-q", "128", "--block-kv", "128", "--heads", "1",
                 "--head-dim", "64", "--what", "kernel", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    row, = result["targets"]
    assert row["compiled"] and {"smem_bytes", "vmem_bytes", "plan_steps", "compile_s"} <= set(row)
    assert result["device"] == "v6e" and result["compiled"]


def test_llo_parsers_on_a_hand_written_dump():
    from svgtpu.compiler.llo import region_bundles, top_level_regions
    llo = """module {
  func.func @block_sparse_attention(%arg0: i32) {
    %0 = llo.constant 1 : i32
    scf.if %0 {
      llo.vector_store %1 into %arg7 : vector<8x128xf32> into i32
    } {in_layout = []}
    scf.if %2 {
      %3 = llo.vadd.f32 %4, %5 : vector<8x128xf32>
      %6 = "llo.vmatres"() <{mxu_id = 0 : i32}> : () -> vector<8x128xf32>
      scf.if %7 {
        %8 = llo.vcmp.ge.s32 %9, %10 : vector<8x128xi32>
      }
    } {in_layout = []}
  }
}"""
    first, second = top_level_regions(llo)
    assert first == {"vector_store": 1} and second == {"vadd.f32": 1, "vmatres": 1, "vcmp.ge.s32": 1}
    schedule = "\n".join(["= key", "     0   :  { a }", "   0x1   : > { b }", "   0x2 PF: > { c }",
                          "   0x3   : > { d }", "   0x4 LB: > { e }", "   0x5 PF: > { f }", "   0x6   : > { g }"])
    assert region_bundles(schedule) == [3]


def test_bundle_slots_on_a_hand_written_schedule():
    from collections import Counter

    from svgtpu.compiler.llo import bundle_unit, region_slots
    schedule = "\n".join([
        "= key", "     0   :  { %s1 = smov 0 }",
        "   0x1 PF: > { %p2 = scmp.ne.s32.totalorder %s3, 2 }",
        "   0x2   : > { %v4 = vpop.f32.mrf.mxu0  ;;  %v5 = vsel /*vm=*/%vm6, %v7, %v8  ;;  %9 = vst [vmem:[#a]] %v5 }",
        "   0x3   : > {}",
        "   0x4 PF: > { %v10 = vpow2.f32 %v11  ;;  %vm12 = vcmp.ge.s32.totalorder %v13, 4  ;;  "
        "%14 = vmax.xlane.f32.xlu0 %v15 }",
        "   0x5 PF: > { %v16 = vmatmul.mubr.bf16 %v17  ;;  %v18 = vadd.f32 %v19, %v20  ;;  %v21 = vld [vmem:[#b]] }"])
    first, second = region_slots(schedule)
    assert first == [Counter(scalar=1), Counter(mxu=1, cmp_select=1, load_store=1), Counter()]
    assert second == [Counter(eup=1, cmp_select=1, xlu=1)]
    assert [bundle_unit(op) for op in ("vpop.eup", "vmand", "vmul.f32", "sbr.rel", "vpop.xlane.xlu1")] == \
        ["eup", "cmp_select", "vpu", "scalar", "xlu"]


def test_compiled_full_tile_body_has_no_compares_with_the_fast_path():
    """C4 as libtpu builds it: the full body holds no vcmp/vselect and no mask work; the partial body masks (this
    band is wide enough for :mod:`svgtpu.kernels.band_table`: a bias per score vreg, 16 per 128 x 128 tile, instead
    of a compare and a select).  Since the scale moved into the QK product (704e549) the partial body's score is the
    product plus the bias, and libtpu schedules it with 16 more vector loads and no more VPU ops than the full body
    (the add no longer shows as a VPU op), so the mask's cost is counted over loads and VPU ops together."""
    from svgtpu.compiler.llo import compiled_tile_counts
    spec = dict(geometry="4x8x16", mask="svg", multiplier=1.0, block_q=128, block_kv=128, block_kv_compute=128,
                head_dim=128, dtype="bfloat16", fast_path=True)
    full, partial = compiled_tile_counts(spec)
    assert (full["tile"], partial["tile"]) == ("full", "partial")
    mask_work = {tile["tile"]: tile["llo_vpu"] + tile["llo_load_store"] for tile in (full, partial)}
    assert full["llo_cmp_select"] == 0 and mask_work["partial"] - mask_work["full"] >= 128 * 128 // 1024
    assert full["llo_mxu"] == partial["llo_mxu"] > 0 and full["llo_eup"] == partial["llo_eup"] > 0
    assert 0 < full["bundles"] <= partial["bundles"]


def test_a_refusal_is_the_compilers_only_when_the_compiler_refused():
    """Tracing runs our code: a bug there propagates (it is never "the compiler's refusal"); a BadInput there is
    our own refusal, recorded as ours; what lowering or compiling raises is the compiler's, in its words."""
    from jax.experimental import pallas as pl

    from svgtpu.errors import BadInput

    x = jax.ShapeDtypeStruct((64, 256), jnp.float32, sharding=jax.sharding.SingleDeviceSharding(topology_device("v6e")))

    def copy(block, bug=None):
        def kernel(x_ref, o_ref):
            if bug is not None:
                raise bug
            o_ref[...] = x_ref[...]
        spec = pl.BlockSpec(block, lambda i: (i, 0))
        return lambda x: pl.pallas_call(kernel, grid=(64 // block[0],), in_specs=[spec], out_specs=spec,
                                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    with compiling_for("v6e"):
        with pytest.raises(AttributeError, match="our bug"):
            compile_fn(copy((8, 256), AttributeError("our bug")), (x,))
        ours = compile_fn(copy((8, 256), BadInput("plan over the SMEM budget")), (x,))
        theirs = compile_fn(copy((8, 100)), (x,))       # 100 lanes: Mosaic's block-shape rule refuses it
        fine = compile_fn(copy((8, 256)), (x,))
    assert (ours["compiled"], ours["refused_by"], ours["reason"]) == (False, "svgtpu", "plan over the SMEM budget")
    assert not theirs["compiled"] and theirs["refused_by"] == "compiler" and "divisible by 8 and 128" in theirs["reason"]
    assert fine["compiled"] and fine["refused_by"] is None
