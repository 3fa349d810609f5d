"""What the cost model's fitted constants may plausibly be, written before any fit (docs/plausibility.md); every
fitted constant with the published rows it reads is :func:`svgtpu.costmodel.fits.fitted_constants`.

A fit that lands outside its bound does not fail loudly in the model (the model still answers); the test
``tests/test_plausible.py`` fails instead, so a fit that absorbs unpriced seconds is caught where it is made:

- the TPU matmul efficiency (:func:`~svgtpu.costmodel.validate.family_efficiency`) between
  :data:`MATMUL_FLOOR` x the compiled Wan block's matmul MXU share (:func:`compiled_matmul_mxu_share`: the
  share the real compiler scheduled for the block's matmul fusions; what the hardware reaches can fall short of a
  static schedule by stalls, not by more than a seventh of it) and 1;
- the sparse stretch (:func:`~svgtpu.costmodel.validate.family_stretch`) in :data:`STRETCH` (sparse tiles at most
  5 % faster than their own compiled schedule relative to dense ones, at most half again slower);
- the host time per denoising step in :data:`HOST_SECONDS_PER_STEP`;
- a TPU attention kernel's realized over static time, instrumented and never fitted, in :data:`ATTENTION_REALIZED`;
- the non-attention ops' realized over static time where a compiled block prices them (fitted) in
  :data:`OTHER_REALIZED`, the matmul efficiency it carries in the matmul bound above.

JAX-free: the compiled block is read from its committed record (``figures/compiled/wan-block/``).
"""

from __future__ import annotations

import functools

from svgtpu.costmodel.compiled_block import block_record
from svgtpu.costmodel.roofline import REALIZED_CEILING
from svgtpu.costmodel.specs import get_device
from svgtpu.errors import BadInput

#: The fitted TPU matmul efficiency is at least this share of the compiled block's matmul MXU share.
MATMUL_FLOOR = 0.85
#: The sparse stretch's plausible range (realized over static time of sparse tiles relative to dense ones).
STRETCH = (0.95, 1.5)
#: A TPU attention kernel's realized over static time (``Efficiency.attention``: the static seconds the model prices a
#: call at over its measured seconds), written before its instrument was applied (docs/plausibility.md): at most a
#: seventh under the static schedule (the matmuls' floor), at most 5 % over it (one published timing's noise and the
#: measured kernel not being the program compiled in its place).
ATTENTION_REALIZED = (MATMUL_FLOOR, REALIZED_CEILING)
#: The non-attention ops' realized over static time where a compiled Wan block prices them (the one fitted TPU
#: constant since 2026-12-06, :mod:`~svgtpu.costmodel.block_pricing`), written before that refit
#: (docs/plausibility.md, "The non-attention ops priced from the compiled block"): the range of
#: :data:`ATTENTION_REALIZED`, for the same reasons.
OTHER_REALIZED = ATTENTION_REALIZED
#: Host seconds per denoising step: 0, JAX's asynchronous dispatch hides the host's work behind the device's
#: (https://docs.jax.dev/en/latest/async_dispatch.html) and MaxDiffusion's Wan 2.2 loop waits on nothing inside
#: it (``src/maxdiffusion/pipelines/wan/wan_pipeline_2_2.py`` at 7cfb8801, ``run_inference_2_2``: one jitted
#: transformer pass and one scheduler step per step, ``block_until_ready`` once after the loop); 0.1 s, the
#: sensitivity's upper end (an assumption: Python loop, scheduler and dispatch of a step left unhidden).
HOST_SECONDS_PER_STEP = (0.0, 0.1)
#: The compiled block whose matmul fusions set the floor: the production setting's (Wan 2.1 14B at 1440p on v6e-8,
#: the dense variant), as notebook 05 records it (``compiled_matmul_mxu_share``).
BLOCK = ("wan2.1-14b", "1440p", "v6e", "dense")
#: The roles of a compiled block's matmul fusions (:mod:`svgtpu.compiler.fusions`).
MATMUL_ROLES = ("projections", "ffn", "cross-attention")


def matmul_mxu_share(ops: list[dict], flops_per_cycle: float) -> float:
    """The matmul fusions of a compiled block (``ops`` with ``flops``, ``cycles`` and ``role``): their FLOPs over
    their static cycles at the MXU peak of ``flops_per_cycle``."""
    matmuls = [op for op in ops if op["flops"] and op["role"] in MATMUL_ROLES]
    if not matmuls:
        raise BadInput("a compiled block without matmul fusions has no matmul MXU share")
    return sum(op["flops"] for op in matmuls) / (sum(op["cycles"] for op in matmuls) * flops_per_cycle)


def compiled_matmul_mxu_share() -> dict:
    """:func:`matmul_mxu_share` of the :data:`BLOCK` record, with the record it comes from (``compiled-v6e``)."""
    return dict(_share(block_record(*BLOCK)["record"]))


@functools.lru_cache(maxsize=4)
def _share(record: str) -> tuple:
    block = block_record(*BLOCK)
    return (("value", matmul_mxu_share(block["ops"], get_device(BLOCK[2]).core_flops_per_cycle)),
            ("record", record), ("provenance", block["provenance"]))


def matmul_bounds() -> tuple[float, float]:
    """``(MATMUL_FLOOR x compiled share, 1)``: where a fitted TPU matmul efficiency may lie."""
    return MATMUL_FLOOR * compiled_matmul_mxu_share()["value"], 1.0


__all__ = ["MATMUL_FLOOR", "STRETCH", "ATTENTION_REALIZED", "OTHER_REALIZED", "HOST_SECONDS_PER_STEP", "BLOCK", "MATMUL_ROLES", "matmul_mxu_share",
           "compiled_matmul_mxu_share", "matmul_bounds"]
