"""The TPU preflight (svgtpu reproduce --preflight) at the smallest profile: every check compiles for v6e."""

import pytest

from svgtpu.compiler.compile import libtpu_available
from svgtpu.setting import PRODUCTION
from svgtpu.report.preflight import checks, preflight
from svgtpu.report.reproduce import tuned_tiles


def test_checks_follow_the_profile_sizes():
    # the tpu profile runs the tiles `svgtpu tune --record` found (figures/tuned_tiles.json)
    tuned_720p, tuned_production = tuned_tiles("720p"), tuned_tiles(PRODUCTION.resolution)
    tpu = {(c.notebook, c.what): c for c in checks("tpu")}
    kernel = tpu["04_fast_path_ablation", "kernel, fast path on"].job
    assert (kernel.geometry, kernel.config.block_q, kernel.config.block_kv, kernel.heads) == ("720p", *tuned_720p, 8)
    sharded = next(c for c in tpu.values() if c.target == "sharded-svg-layer")
    assert sharded.job.topology == "v6e:4x4x1" and sharded.job.heads == 40 and sharded.hosts == "several"
    assert {c.target for c in tpu.values()} == {"kernel", "svg-layer", "dit-step", "sharded-svg-layer",
                                                "sharded-dit-step", "wan-block"}
    # notebook 05's blocks: 720p and 1440p on v6e-8 and v7x, dense and SVG, the kernel compiled in the block
    blocks = [c.job for c in tpu.values() if c.target == "wan-block"]
    assert sorted((b.resolution, b.device, b.variant) for b in blocks) == sorted(
        [(r, d, v) for r in ("720p", "1440p") for d in ("v6e", "v7x") for v in ("dense", "svg")])
    assert {(b.model, b.block_q, b.block_kv, b.kernel) for b in blocks} == {("wan2.1-14b", *tuned_production, "in-block")}


@pytest.mark.system
@pytest.mark.skipif(not libtpu_available(), reason="libtpu not installed: no TPU compiler")
def test_preflight_quick_profile_compiles_one_host_and_several():
    # the DiT steps (a minute of compiling each here) are left out of the test; the CLI runs them
    result = preflight("quick", dit=False)
    assert {r["topology"] for r in result["checks"]} == {"v6e:2x2x1", "v6e:4x4x1"}
    assert len(result["checks"]) == 6
    # the quick profile is CPU-only: notebook 03's 64-wide tiles are what a TPU would refuse, and it says so
    refused = [r for r in result["checks"] if not r["compiled"]]
    assert [r["notebook"] for r in refused] == ["03_mask_alignment"] * 2 and result["failed"] == 2
    assert all("block_kv must be a positive multiple of 128" in r["reason"] for r in refused)
    assert all(r["compiled"] for r in result["checks"] if r["notebook"] != "03_mask_alignment")
