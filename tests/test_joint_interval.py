"""C1's joint interval (svgtpu.costmodel.joint): every end a refit that meets the calibration, the sparse stretch
over its plausible range, the H200 evidence once (bias), and each C1 row names its kernels."""

import math
from pathlib import Path

import pytest

from svgtpu import costmodel as cm
from svgtpu.costmodel import joint
from svgtpu.recipes import DEFAULT_RECIPE


#: Priced with the compiled tile table fixture, as tests/test_against_tpu.py (the sparse layers need its v6e rows).
FIXTURE = Path(__file__).with_name("data") / "compiled_tiles_fixture.json"


@pytest.fixture(scope="module")
def setup():
    return cm.calibrated_setup("wan2.1-14b", "1440p", "v6e", chips=8, compiled=cm.load_compiled(FIXTURE),
                               **cm.recipe_fields(DEFAULT_RECIPE))


def test_the_interval_is_two_sided_and_built_from_its_parts(setup):
    result = cm.model_video(setup)
    interval = cm.joint_interval(setup, result)
    c = result["speedup"]
    assert interval["min"] < c < interval["max"]
    knobs = cm.sensitivity(setup, central_result=result)
    assert interval["knobs"]["names"] == knobs["knobs"] and "sparse_stretch" in knobs["knobs"]
    rows = knobs["tornado"]
    down = math.sqrt(sum(max(0.0, c - r["speedup_low"], c - r["speedup_high"]) ** 2 for r in rows))
    assert interval["knobs"]["down"] == pytest.approx(down)
    # a slower sparse tile (stretch 1.5) is a smaller speedup, the efficiency refitted at that end
    stretch = next(r for r in rows if r["knob"] == "sparse_stretch")
    assert stretch["speedup_high"] < c < stretch["speedup_low"]
    bias = interval["bias"]   # the H200 model's DiT-speedup error at this resolution: the interval holds the corrected value
    assert bias["corrected_central"] == pytest.approx(c / (1 + bias["h200_dit_speedup_error"]))
    assert interval["min"] == pytest.approx(min(c - down, bias["corrected_central"]))
    assert "transfer" not in interval and "transfer" not in joint.h200_evidence()   # the H200 run enters once


def test_c1_rows_name_their_kernels(setup):
    rows = cm.claim_rows(setup)
    splash, ours, user = (rows[f"C1.{k}"] for k in ("speedup_splash_both", "speedup", "speedup_user_dense"))
    assert (splash["dense_kernel"], splash["svg_kernel"]) == ("splash", "splash")
    assert (ours["dense_kernel"], ours["svg_kernel"]) == ("ours", "ours")
    assert (user["dense_kernel"], user["svg_kernel"]) == ("splash", "ours") and user["role"] == "check"
    assert ours["value"] == pytest.approx(cm.model_video(setup)["speedup"])
    for r in (splash, ours, user):
        assert r["interval"][0] < r["value"] < r["interval"][1]