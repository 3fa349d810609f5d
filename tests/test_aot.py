"""compile_report / compile_reports: the compiler's verdict and each kernel's static schedule per unit.

Hand-worked: a copy of a ``[64, 256]`` float32 block is 16 vregs of 8 x 128, each loaded once and stored
once, so its schedule holds 16 vector loads and 16 stores (the kernel adds its grid index: VALU work, no
matmul).  A megacore split is what the v5p program holds only for ``parallel`` grid axes.
"""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from svgtpu.compiler.aot import compile_report, compile_reports, describe, unit_table
from svgtpu.compiler.compile import libtpu_available
from svgtpu.course import lessons

pytestmark = pytest.mark.skipif(not libtpu_available(), reason="needs libtpu (the TPU compiler)")


def test_one_child_compiles_several_functions_and_reports_refusals_in_the_compilers_words(capsys):
    x = jnp.zeros((64 * 5, 256), jnp.float32)
    reports = compile_reports({
        "64-row blocks": (lambda x: lessons.stamped_copy(x, 64, interpret=False), (x,)),
        "36-row blocks": (lambda x: lessons.stamped_copy(x, 36, interpret=False), (x[:36 * 5],)),
        "interpreted": (lambda x: lessons.stamped_copy(x, 64, interpret=True), (x,)),
    })
    assert reports["interpreted"]["kernels"] == {} and "interpret=True" in describe("", reports["interpreted"])
    ok, refused = reports["64-row blocks"], reports["36-row blocks"]
    assert ok["compiled"] and refused["compiled"] is False
    assert "divisible by 8 and 128" in refused["reason"]
    [units] = ok["kernels"].values()
    counts = dict(units.counts)
    assert counts["vector_load"] == 16 and counts["vector_store"] == 16   # 64 x 256 / (8 x 128) vregs
    assert units.mxu == 0 and units.vector_load == -(-16 // 3) and units.vector_store == 16 // 2
    assert units.bundles >= units.bound
    table = unit_table(reports)
    assert list(table.index) == ["64-row blocks"] and table.loc["64-row blocks", "vector store"] == 8
    assert "refused: The Pallas TPU lowering" in describe("36-row blocks", refused)
    compile_report(lambda x: lessons.stamped_copy(x, 64, interpret=False), x, label="copy")
    line = capsys.readouterr().out
    assert "copy: v6e: compiled (nothing run)" in line and "vector store 8" in line and "binds:" in line


def _grid_copy(x, semantics):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    spec = pl.BlockSpec((None, 128, 128), lambda h, i: (h, i, 0))
    return pl.pallas_call(kernel, grid=(x.shape[0], x.shape[1] // 128), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=semantics))(x)


@pytest.mark.parametrize("device", ["v5p", "v7x"])
def test_only_a_megacore_splits_a_parallel_grid_between_its_cores(device):
    x = jnp.zeros((2, 256, 128), jnp.float32)
    reports = compile_reports({s[0]: (functools.partial(_grid_copy, semantics=s), (x,))
                               for s in (("parallel", "parallel"), ("arbitrary", "arbitrary"))}, device)
    split = {label: next(iter(r["core_split"].values())) for label, r in reports.items()}
    assert split == {"parallel": device == "v5p", "arbitrary": False}
