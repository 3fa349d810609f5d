"""Whether the compiler overlapped a compiled block's collectives: the scheduled module read by hand, and the committed
reading of the calibration run's block compiled with MaxDiffusion's flags."""

import pytest

from svgtpu.compiler import collective_overlap as co

#: A scheduled module by hand: one asynchronous all-gather with two fusions between its start and done, one
#: synchronous all-to-all.
HLO = """HloModule m, is_scheduled=true

%fc (x: bf16[8]) -> bf16[8] {
  %x = bf16[8]{0} parameter(0)
  ROOT %n = bf16[8]{0} negate(%x)
}

ENTRY %main (p: bf16[8]) -> bf16[32] {
  %p = bf16[8]{0} parameter(0)
  %ag = (bf16[8]{0}, bf16[32]{0}) all-gather-start(%p), channel_id=1, dimensions={0}
  %f = bf16[8]{0} fusion(%p), kind=kLoop, calls=%fc
  %g = bf16[8]{0} fusion(%f), kind=kLoop, calls=%fc
  %agd = bf16[32]{0} all-gather-done(%ag)
  %a2 = bf16[32]{0} all-to-all(%agd), channel_id=2, dimensions={0}
  ROOT %r = bf16[32]{0} add(%a2, %agd)
}
"""


def test_schedule_read_by_hand():
    got = co.hlo_collective_schedule(HLO)
    assert got == {"all-gather": {"ops": 1, "asynchronous": 1, "ops_between": [2]},
                   "all-to-all": {"ops": 1, "asynchronous": 0, "ops_between": []}}
    # the same gather issued synchronously: nothing between, nothing asynchronous
    sync = HLO.replace("all-gather-start(%p)", "all-gather(%p)").replace("  %agd = bf16[32]{0} all-gather-done(%ag)\n", "")
    assert co.hlo_collective_schedule(sync)["all-gather"] == {"ops": 1, "asynchronous": 0, "ops_between": []}


def test_flags_are_maxdiffusions_cited():
    assert co.FLAGS.startswith("--xla_tpu_enable_async_collective_fusion=true")
    assert "7cfb8801" in co.MAXDIFFUSION_WAN_FLAGS.cite()


def test_the_calibration_blocks_gathers_stay_synchronous_under_maxdiffusions_flags():
    """The committed reading (the 720p block the TPU fit's accounting reads, compiled with MaxDiffusion README's Wan
    flags): every collective one synchronous op, so the flags give the weight gathers no overlap to price."""
    records = [r for r in co.read_records() if r["flags"] == co.FLAGS]
    if not records:
        pytest.fail(f"no committed reading in {co.RECORDS} (svgtpu.compiler.collective_overlap.flagged_block)")
    for r in records:
        assert r["collectives"]["all-gather"]["ops"] > 0
        assert all(v["asynchronous"] == 0 for v in r["collectives"].values()), r["collectives"]
