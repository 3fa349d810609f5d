"""One Wan block compiled for a TPU slice and read by role (:mod:`svgtpu.compiler.wan_block`), at a tiny shape
that compiles in seconds (the production block takes minutes: ``svgtpu compile --what wan-block``): its
roles, its collectives against the cost model's Ulysses count, our kernel inside the block against the
kernel's own compile, the cost model's split, and C5's fits (:mod:`svgtpu.compiler.scaling`)."""

import dataclasses

import numpy as np
import pytest

from svgtpu.compiler import wan_block as wb
from svgtpu.compiler.compile import libtpu_available
from svgtpu.compiler.fusions import ROLES
from svgtpu.compiler.scaling import bootstrap_exponent, kernel_sweep, loglog_fit
from svgtpu.cli import main
from svgtpu.models import ModelConfig
from svgtpu.setting import PRODUCTION, Setting

# one worker runs the file (make test: --dist loadgroup): the module's compiled block is made once
pytestmark = pytest.mark.xdist_group("wan_block")
needs_libtpu = pytest.mark.skipif(not libtpu_available(), reason="needs the TPU compiler (libtpu)")
TINY = ModelConfig("tiny", layers=40, dim=512, heads=8, head_dim=64, ffn=1024, text_len=16, patch_in=64, source="test")
JOB = wb.BlockJob(Setting(model="tiny", resolution="2x8x20", block_q=128, block_kv=128), "dense",
                  shapes=TINY)   # L = 320: no tile multiple


@pytest.fixture(scope="module")
def dense():
    return wb.compile_block(JOB)


@needs_libtpu
def test_a_tiny_block_is_read_by_role_with_every_op_accounted_for(dense):
    assert dense["provenance"] == "compiled-v6e" and not dense["unmatched"]
    assert set(dense["roles"]) == set(ROLES) and sum(r["share"] for r in dense["roles"].values()) == pytest.approx(1)
    assert dense["total_cycles"] == sum(op["cycles"] for op in dense["ops"]) + dense["top_level"]["cycles"]
    for role in ("self-attention", "projections", "cross-attention", "ffn", "norms/modulation", "collectives"):
        assert dense["roles"][role]["cycles"] > 0, role
    assert any(op["program"] != op["name"] for op in dense["ops"])   # deduplicated programs were matched
    # our kernel is read by tile kind, not as a program that runs both bodies at every step
    assert 0 < dense["kernel"]["cycles"] < dense["kernel"]["generic_cycles"]
    assert dense["roles"]["self-attention"]["cycles"] >= dense["kernel"]["cycles"]


@needs_libtpu
def test_the_compiled_all_to_alls_are_the_ulysses_ones_the_cost_model_counts(dense):
    from svgtpu.costmodel.parallel import ulysses_collectives
    seq = dense["plan"]["mesh"]["seq"]
    model = ulysses_collectives(320, TINY.dim, seq)["all-to-all"]
    assert dense["collectives"]["all-to-all"] == {"count": model["count"], "bytes": model["count"] * model["bytes"]}


@needs_libtpu
def test_our_kernel_in_the_block_reads_as_its_own_compile_does(dense):
    """The kernel compiled alone (one head, ``bench compiled``) has the tile bodies, init and finish of the
    kernel compiled inside the block; its step overhead lacks the few cycles a head axis adds, so re-bounded
    to the block's heads and plan it gives the block's kernel cycles within 2 % at these 128-wide tiles
    (a step of a 3024 x 2048 tile is thousands of times longer than that difference)."""
    from svgtpu.compiler.variants import compile_program
    [alone] = compile_program(wb.kernel_variant(JOB))["calls"]
    schedule, inside = alone["schedule"], dense["kernel"]["schedule"]
    assert (schedule["bodies"], schedule["init"], schedule["finish"]) == (inside["bodies"], inside["init"],
                                                                          inside["finish"])
    assert 0 <= inside["overhead"] - schedule["overhead"] <= 10
    composed = wb.kernel_cycles(JOB, dense["kernel"]["heads"], [schedule], alone["fill"])
    print(f"in the block {dense['kernel']['cycles']:,} cycles, its own compile {composed['cycles']:,}")
    # within the 3 % a head axis makes at these tiles (2 % before issue 37: the key-major bodies are shorter, so
    # the per-step difference weighs more; the bodies themselves are equal, asserted above)
    assert composed["cycles"] == pytest.approx(dense["kernel"]["cycles"], rel=0.03)


@needs_libtpu
def test_the_block_without_its_kernel_plus_the_kernels_own_compile_reads_as_the_whole_block(dense):
    """The cpu profile's reading (the block compiled with the kernel call left out, the kernel from its own
    compile) against the block compiled whole: the same kernel cycles within the 3 % a head axis makes at
    these tiles, every other role within 10 % (the kernel's pad and slice are not in the left-out block)."""
    own = wb.compile_block(dataclasses.replace(JOB, kernel="own-compile"))
    assert not own["unmatched"] and not [op for op in own["ops"] if "block_sparse_attention" in op["program"]]
    assert own["kernel"]["cycles"] == pytest.approx(dense["kernel"]["cycles"], rel=0.03)
    for role in ("projections", "cross-attention", "ffn"):
        assert own["roles"][role]["cycles"] == pytest.approx(dense["roles"][role]["cycles"], rel=0.1), role
    assert own["total_cycles"] == pytest.approx(dense["total_cycles"], rel=0.1)


@needs_libtpu
def test_kernel_sweep_counts_every_tile_and_grows_with_it(dense):
    rows = kernel_sweep(JOB, dense["kernel"]["schedule"], dense["kernel"]["fill"], ["2x8x20", "4x8x20", "4x16x20"])
    for row in rows:   # a dense mask computes every tile of the padded grid
        assert row["steps"] == (-(-row["L"] // 128)) ** 2
        assert row["flops"] == 4 * row["steps"] * 128 * 128 * TINY.head_dim
    assert rows[0]["cycles"] < rows[1]["cycles"] < rows[2]["cycles"]


def test_the_split_is_the_one_the_cost_model_picks():
    from svgtpu.costmodel.multihost import multihost_sweep
    for resolution in ("720p", "1440p"):
        plan = wb.parallel_plan(wb.BlockJob(dataclasses.replace(PRODUCTION, resolution=resolution)))
        [picked] = multihost_sweep("wan2.1-14b", resolution, "v6e", chip_counts=(8,))["picked"]
        assert (plan["cfg_split"], plan["chips_per_pass"], plan["weights_sharded"]) == (
            picked["cfg_split"], picked["chips_per_pass"], picked["weights_sharded"])
        assert plan["mesh"]["data"] * plan["mesh"]["seq"] == plan["devices"] == 8


#: Modules the record's modules import (often inside a function) that a block's record is not made of, and why.
NOT_IN_A_BLOCK = {
    "svgtpu.baselines.tokamax": "tokamax self-attention (the block runs ours)",
    "svgtpu.kernels.gpu": "GPU backends of our kernel", "svgtpu.kernels.mosaic_gpu": "GPU backends of our kernel",
    "svgtpu.costmodel": "parallel_plan and modeled_block: the plan is in the key, the model is not in the record",
    "svgtpu.costmodel.multihost": "parallel_plan: the plan is in the key",
    "svgtpu.costmodel.parallel": "compiler.multihost's DiT-step comparison with the model",
    "svgtpu.costmodel.workload": "compiler.multihost's DiT-step programs",
    "svgtpu.toy.dit": "the toy DiT's step programs", "svgtpu.toy.sampler": "the toy DiT's step programs",
    "svgtpu.toy.train": "the toy DiT's step programs",
    "svgtpu.facts.paths": "where records lie, not what they hold", "svgtpu.facts.tables": "the commands' tables",
    "svgtpu.inputs.records": "checks a record file as it is read, not what a block is built from",
}


@pytest.mark.system   # a fresh process lowering the 720p SVG block (7 CPU-s), as test_preflight's record-key check
@needs_libtpu
def test_the_records_key_holds_every_source_the_block_is_built_and_read_from():
    """A fresh process builds and lowers the 720p SVG block as the compile child does (from a plan: the key holds
    it) and imports the compile's readers: every package module it then holds is one of :data:`SOURCES` (of the cost
    model only its device specs: it picks the plan), and every module those import anywhere (inside functions
    too) is either in :data:`SOURCES` or one a block is not made of (:data:`NOT_IN_A_BLOCK`).  A new import fails here until it is keyed or said why not."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from test_imports import PACKAGE, import_graph
    # the cost model's package re-exports all of it: the child loads it bare, so only the modules used count
    code = f"""
import json, sys, types
costmodel = types.ModuleType("svgtpu.costmodel")
costmodel.__path__ = [{str(PACKAGE / "costmodel")!r}]
sys.modules["svgtpu.costmodel"] = costmodel
import jax
import svgtpu.compiler.wan_block as wb
import svgtpu.compiler.dumps, svgtpu.compiler.estimate, svgtpu.compiler.fusions, svgtpu.compiler.llo
import svgtpu.compiler.multihost, svgtpu.compiler.units, svgtpu.compiler.variants
from svgtpu.kernels.common import compiling_for
from svgtpu.setting import Setting
job = wb.BlockJob(Setting(resolution="720p", device="v6e"), "svg")
fn, args = wb.block_program(job, wb.slice_devices("v6e"), {{"mesh": {{"data": 2, "seq": 4}}, "weights_sharded": True}})
with compiling_for("v6e"):
    jax.jit(fn).lower(*args)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "svgtpu" and m != "svgtpu.costmodel")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))

    def file_of(module):
        rel = Path(*module.split(".")[1:])
        init = PACKAGE / rel / "__init__.py"
        return (init if init.exists() else (PACKAGE / rel).with_suffix(".py")).relative_to(PACKAGE).as_posix()
    keyed = set(wb.SOURCES)
    unkeyed = {file_of(m) for m in loaded} - keyed
    assert not unkeyed
    graph = import_graph()
    reached = {e for m in loaded for e in graph[m]} - loaded
    unsaid = {m for m in reached if file_of(m) not in keyed} - set(NOT_IN_A_BLOCK)
    assert not unsaid


def test_the_modeled_block_has_every_role_and_svg_shrinks_its_attention():
    dense, svg = (wb.modeled_block(wb.BlockJob(PRODUCTION, v)) for v in wb.VARIANTS)
    for m in (dense, svg):
        assert sum(r["share"] for r in m["roles"].values()) == pytest.approx(1) and m["provenance"] == "modeled-v6e"
    assert svg["roles"]["self-attention"]["seconds"] < dense["roles"]["self-attention"]["seconds"]
    assert svg["roles"]["ffn"]["seconds"] == pytest.approx(dense["roles"]["ffn"]["seconds"])


def test_loglog_fit_and_its_bootstrap_on_hand_made_powers():
    L = np.array([1e3, 4e3, 1.6e4])
    fit = loglog_fit(L, 3e-9 * L ** 2)
    assert fit["exponent"] == pytest.approx(2.0) and np.allclose(fit["residuals"], 0, atol=1e-12)
    bent = loglog_fit(L, [1.0, 4.0, 32.0])   # the last point sits above a straight line
    assert bent["residuals"][2] > 0 > bent["residuals"][1]
    rng = np.random.default_rng(5)
    rounds = [2e-9 * x ** 1.5 * rng.uniform(0.9, 1.1, 9) for x in L]
    lo, hi = bootstrap_exponent(L, rounds, n=400, seed=1)
    assert lo < 1.5 < hi and hi - lo < 0.2
    assert bootstrap_exponent(L, [[x ** 2] * 5 for x in L], n=50) == pytest.approx([2.0, 2.0])


def test_a_load_every_length_shared_in_a_round_does_not_widen_the_interval():
    """Rounds resampled whole: a round's load (here up to 3x) multiplies every length of it alike and leaves the
    slope alone; drawn per length instead, it would spread the exponent over several tenths."""
    L = np.array([280.0, 560.0, 1120.0, 2240.0])
    rng = np.random.default_rng(11)
    print("seed 11")
    load = rng.uniform(1.0, 3.0, 9)
    rounds = [1e-9 * x ** 1.8 * load * rng.uniform(0.99, 1.01, 9) for x in L]
    lo, hi = bootstrap_exponent(L, rounds, n=400, seed=2)
    assert lo < 1.8 < hi and hi - lo < 0.02
    with pytest.raises(ValueError, match="same number"):
        bootstrap_exponent(L, [r[:5] for r in rounds[:3]] + [rounds[3]])


def test_a_job_holds_the_slices_chips_and_comes_back_whole_through_json():
    """The child compile gets the job as JSON (``dataclasses.asdict``): it must rebuild the same job; the setting's
    chips are the slice's compiled (v7x: 4), whatever the setting said."""
    import json
    for job in (JOB, wb.BlockJob(Setting(device="v7x", chips=8), "svg", kernel="own-compile")):
        assert wb.BlockJob(**json.loads(json.dumps(dataclasses.asdict(job)))) == job
    assert wb.BlockJob(Setting(device="v7x")).setting.chips == wb.SLICES["v7x"]["chips"] == 4
    assert JOB.name == "tiny-2x8x20-v6e-dense" and JOB.config is TINY


def test_bad_jobs_are_refused_in_one_line(capsys):
    with pytest.raises(ValueError, match="device must be one of v6e, v7x"):
        wb.BlockJob(Setting(device="v5e"))
    with pytest.raises(ValueError, match="variant must be one of"):
        wb.BlockJob(PRODUCTION, "sparse")
    with pytest.raises(ValueError, match="model must be one of wan2.1-14b"):
        wb.BlockJob(Setting(model="wan9"))
    with pytest.raises(ValueError, match="shapes must be the setting's model"):
        dataclasses.replace(JOB, setting=PRODUCTION)
    with pytest.raises(ValueError, match="kept must be in"):
        dataclasses.replace(JOB, setting=dataclasses.replace(JOB.setting, kept=1.5))
    with pytest.raises(ValueError, match="not a band multiplier"):
        wb.BlockJob(Setting(multiplier=2.0))
    assert main(["compile", "--what", "wan-block", "--device", "v5e"]) == 2
    assert "device must be one of v6e, v7x" in capsys.readouterr().err
