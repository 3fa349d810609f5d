"""The compiled MXU/clock probe (svgtpu.compiler.probe): what the v6e schedule says about the MXUs."""

import pytest

from svgtpu.compiler.compile import libtpu_available

pytestmark = pytest.mark.skipif(not libtpu_available(), reason="needs libtpu (the TPU compiler)")


@pytest.mark.system
@pytest.mark.slow
def test_v6e_probe_reads_two_mxus_at_eight_bundles_a_push():
    from svgtpu.compiler.probe import MATMUL, probe
    from svgtpu.costmodel.specs import DEVICES
    p = probe("v6e")
    m, k, n = MATMUL
    assert p["mxus_per_core"] == 2 and p["mxu_units"] == ["mxu0", "mxu1"] and p["mxu_columns"] == 256
    mm = p["matmul"]
    # one push carries 16 bf16 rows x 256 x 256 columns; 2 x 2048 x 512 x 2048 flop need 2048 of them
    assert mm["flops_per_push"] == 2 * 16 * 256 * 256 and sum(mm["pushes"]) == 2 * m * k * n // (2 * 16 * 256 * 256)
    assert mm["push_gap_mode"] == p["push_interval"] == 8 and p["push_interval_source"] == "measured"
    # a bundle is at least a cycle: the matmul's flops per bundle stay below the flops per cycle, and close to it
    assert 0.9 * p["flops_per_cycle"] < mm["flops_per_bundle"] <= p["flops_per_cycle"] == 524288
    assert p["clock_ghz"] == pytest.approx(DEVICES["v6e"].matmul_flops / 524288 / 1e9)
    # attention at head_dim 128 fills half the array: twice the pushes its flops need
    # our 512 x 512 tile body is key-major: QK^T contracts 128 of the 256 columns (2x the full-fill pushes); PV as
    # [v^T; 1] p has output width 512 (full fill) and 128 + 16 rows (the ones rows carry the key sums): 9/8
    assert p["tile_body"]["mxu_over_roofline"] == pytest.approx((2 + (128 + 16) / 128) / 2)
    assert p["tile_body"]["binding"] == "mxu"
