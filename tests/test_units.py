"""The per-unit reading of a static schedule (svgtpu.compiler.units): a hand-countable body, and a lone
matmul compiled for v6e whose MXU cycles must equal its flops over the MXU's full-fill peak."""

import pytest

from svgtpu.compiler.compile import libtpu_available
from svgtpu.compiler.llo import parse_bundles
from svgtpu.compiler.units import UNITS, count_units, cycles_of, slot_of, unit_cycles

SCHEDULE = "\n".join([
    "= control target key start", "PF: predicated region fallthrough", "= control target key end", "",
    "     0   :  { %s1_s0 = smov 0 }",
    "   0x1   :  { %3 = vmatmul.mubr.bf16.gmra.mxu0 %v1  ;;  %v4 = vld [vmem:[#a]]  ;;  %v5 = vld [vmem:[#a + $0x8]] }",
    "   0x2   :  { %6 = vst [vmem:[#b]] %v4  ;;  %7 = vst [vmem:[#b + $0x8]] %v5  ;;  %v8 = vadd.f32 %v4, %v5  ;;",
    "        %v9 = vmul.f32 %v4, %v5  ;;  %vm10 = vcmp.ge.f32.partialorder %v4, %v5  ;;  %vm11 = vmand %vm10, %vm10 }",
    "   0x3 PF: > { %v12 = vpow2.f32 %v8  ;;  %13 = vmax.xlane.f32.xlu1 %v9  ;;  %v14 = vstv %s1_s0 }",
    "   0x4   :  { %v15 = vpop.eup %v12  ;;  %v16 = vpop.xlane.xlu1 %13  ;;  %v17 = vpop.f32.mrf.mxu0 }",
    "   0x5   :  { %18 = vmatmul.mubr.bf16.gmra.mrb[4].mxu1 %v15  ;;  %19 = vmatmul.mubr.bf16.gmra.mxu0 %v15 }",
    "   0x6   :  { %20 = vst [vmem:[#c]] %v16 }",
])


def test_hand_countable_schedule():
    bundles = parse_bundles(SCHEDULE)
    assert len(bundles) == 7  # the continuation line folds into bundle 0x2
    assert bundles[2] == ("vst", "vst", "vadd.f32", "vmul.f32", "vcmp.ge.f32.partialorder", "vmand")
    u = unit_cycles(bundles, flops=3 * 2 * 16 * 256 * 256, device="v6e")  # three full pushes
    # mxu0 takes two pushes, mxu1 one: 2 x 8 bundles; 3 stores at 2 a bundle; 2 loads at 3; the vector
    # ALU ops are vadd, vmul, vcmp and vstv (vmand is mask logic) at 4 a bundle; one EUP push and pop;
    # one cross-lane op and its pop on xlu1
    assert u.pushes == (2, 1) and u.mxu == 16
    assert (u.vector_store, u.vector_load, u.valu, u.eup, u.xlu) == (2, 1, 1, 1, 2)
    assert dict(u.counts)["mask"] == 1 and dict(u.counts)["valu"] == 4 and dict(u.counts)["scalar"] == 1
    assert u.binding() == "mxu" and u.bundles == 7
    assert u.roofline == 12.0  # 3 pushes of 2,097,152 flop at 524,288 flop a cycle (2 MXUs, 8 bundles a push)
    d = u.as_dict()
    assert set(UNITS) <= set(d) and d["binding"] == "mxu" and d["mxu_share"] == 16 / 7


def test_counts_add_and_scale_like_a_loop():
    bundles = parse_bundles(SCHEDULE)
    once, loop = count_units(bundles[:3]), count_units(bundles[3:])
    whole = cycles_of(once + loop.times(4))
    assert whole.bundles == 3 + 4 * 4
    assert whole.pushes == (1 + 4, 4) and whole.vector_store == 3  # (2 + 4) stores, 2 a bundle
    assert whole.eup == 4 and whole.xlu == 8


def test_slots_of_scheduled_instructions():
    assert [slot_of(op) for op in ("vmatmul.mubr.bf16.vlgmr.msra.gmra.mrb[0].mxu0", "vmatprep.subr.bf16.mxu1",
                                   "vpop.f32.mrb[3].mxu1", "vpop.f32.mrf.mxu0", "vpop.eup", "vrcp.f32",
                                   "vadd.xlane.f32.xlu0", "vpop.xlane.xlu0", "vld", "vst", "vstv", "vsel",
                                   "vmor", "sld", "dma.hbm_to_vmem")] == \
        ["mxu", "mxu_other", "mxu_other", "mxu_other", "eup_pop", "eup", "xlu", "xlu_pop", "vector_load",
         "vector_store", "valu", "valu", "mask", "scalar", "scalar"]


def test_refuses_a_bundle_the_slot_table_does_not_allow():
    five = "   0x0   :  { %v1 = vadd.f32 %v0, %v0  ;;  %v2 = vadd.f32 %v0, %v0  ;;  %v3 = vadd.f32 %v0, %v0  ;;  " \
           "%v4 = vadd.f32 %v0, %v0  ;;  %v5 = vadd.f32 %v0, %v0 }"
    with pytest.raises(RuntimeError, match="5 valu instructions, more than the 4"):
        unit_cycles(parse_bundles(five))
    with pytest.raises(ValueError, match="device must be one of"):
        unit_cycles([], device="v5e")


@pytest.mark.system
@pytest.mark.slow
@pytest.mark.skipif(not libtpu_available(), reason="needs libtpu (the TPU compiler)")
def test_lone_matmul_is_mxu_bound_at_its_flops():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from svgtpu.compiler.units import CORES, kernel_unit_cycles

    def matmul(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    for m, k, n in ((2048, 512, 2048), (1024, 128, 1024)):
        flops = 2 * m * k * n
        fn = lambda x, y: pl.pallas_call(matmul, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32))(x, y)  # noqa: B023
        (name, u), = kernel_unit_cycles(fn, jax.ShapeDtypeStruct((m, k), jnp.bfloat16),
                                        jax.ShapeDtypeStruct((k, n), jnp.bfloat16), flops=flops).items()
        assert u.binding() == "mxu" and len(u.pushes) == CORES["v6e"].mxus and u.pushes[0] == u.pushes[1]
        assert u.roofline == flops / (2 * 256 ** 2 * 2 * 2)  # 2 MXUs x 256^2 MACs x 2 rows a cycle
        # a 256-deep contraction fills the array: MXU cycles = the roofline; a 128-deep one fills half
        assert u.mxu == u.roofline * (1 if k >= 256 else 2)
        assert u.mxu <= u.bundles <= 1.2 * u.mxu  # the static schedule cannot beat the MXU, and nearly reaches it


def test_an_f32_push_takes_half_a_bf16_push():
    # a float32 left operand goes in 8 rows a push, 4 bundles apart on one MXU (the bf16 one: 16 rows, 8)
    line = "   0x0   :  { %1 = vmatmul.mubr.f32.gmra.mxu0 %v0  ;;  %2 = vmatmul.mubr.bf16.gmra.mxu1 %v0 }"
    u = unit_cycles(parse_bundles(line))
    assert u.pushes == (1, 1) and u.mxu == 8 and dict(u.counts)["mxu"] == 2
    assert unit_cycles(parse_bundles(line.replace(".bf16.gmra.mxu1", ".f32.gmra.mxu1"))).mxu == 4
