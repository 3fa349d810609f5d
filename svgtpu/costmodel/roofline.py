"""The DiT forward pass as roofline ops: FLOPs, bytes and vector work per op, timed as
``max(compute, vector, exp, memory)`` divided by an efficiency.

Self-attention is not here: it is timed tile by tile in :mod:`svgtpu.costmodel.tile_costs`.
"""

from __future__ import annotations

import dataclasses
import math

from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.costmodel.workload import ModelConfig
from svgtpu.errors import BadInput

#: The most ``Efficiency.attention`` may be: 1 (a roofline's fraction) but for a TPU priced from the compiled tile
#: table, where it is a kernel's realized over static time, at most 5 % over its static schedule (one published
#: timing's noise: the top of :data:`svgtpu.costmodel.plausible.ATTENTION_REALIZED`, written before its instrument).
REALIZED_CEILING = 1.05


@dataclasses.dataclass(frozen=True)
class Efficiency:
    """Fractions of the roofline bound each kind of op reaches.  Never fitted to C1/C2.

    The defaults are priors (what a TPU runs at before any calibration); a device family with a
    published calibration point gets ``matmul`` and ``attention`` replaced by the one fitted value
    (:func:`svgtpu.costmodel.validate.family_efficiency`).  On a TPU priced from the compiled tables ``matmul``
    carries the non-attention ops' realized over static time where a compiled Wan block prices them
    (:mod:`svgtpu.costmodel.block_pricing`: that factor times the production block's matmul MXU share).

    - ``matmul`` 0.6: a single large GEMM reaches ~0.79 of peak (H100: 780 of 989 TFLOP/s, Horace
      He's public torch.mm benchmark), whole models less; band 0.35-0.8.
    - ``attention`` 0.6: a tuned flash-attention forward reaches 50-73 % of its bound unit
      (FlashAttention-2 paper, Dao 2023); band 0.4-0.8.  On a TPU priced from the compiled tile table, the
      attention kernels' realized over static time instead, up to :data:`REALIZED_CEILING`.
    - ``memory`` 0.8: streaming kernels reach 80-90 % of peak HBM bandwidth (assumption); band 0.6-0.9.
    - ``vector_scale`` 1.0: multiplies the derived VPU/EUP rates; 0.5 if the derived TPU clock is
      2x too high (no public clock figure).
    - ``ici`` 0.7: fraction of a link's bandwidth a collective reaches once the mesh's bisection
      is modeled (:mod:`svgtpu.costmodel.parallel`); assumption, band 0.4-0.9.
    """

    matmul: float = 0.6
    attention: float = 0.6
    memory: float = 0.8
    vector_scale: float = 1.0
    ici: float = 0.7

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value, top = getattr(self, field.name), REALIZED_CEILING if field.name == "attention" else 1
            if not 0 < value <= top:
                raise BadInput(f"Efficiency.{field.name} must be in (0, {top:g}], got {value!r}")


@dataclasses.dataclass(frozen=True)
class Op:
    """One op of a forward pass, counted for the whole model (all chips together).

    ``kind`` is ``matmul``, ``elementwise`` or ``cross_attention``; ``count`` is how many times it
    runs per forward (``layers`` for per-block ops).
    """

    name: str
    kind: str
    flops: float = 0.0
    bytes: float = 0.0
    vector_ops: float = 0.0
    exp_ops: float = 0.0
    count: int = 1
    widths: tuple[int, ...] = ()   # matmul widths (contraction, output) that may underfill the MXU

    def total(self, field: str) -> float:
        return getattr(self, field) * self.count


def matmul_op(name: str, m: int, k: int, n: int, dtype_bytes: int, count: int = 1) -> Op:
    """``[m, k] @ [k, n]``: ``2mkn`` FLOPs, inputs, weights and output read/written once."""
    return Op(name, "matmul", flops=2.0 * m * k * n, bytes=float(dtype_bytes) * (m * k + k * n + m * n),
              count=count, widths=(k, n))


def elementwise_op(name: str, elements: float, reads: float, writes: float, vector_ops: float,
                   exp_ops: float, dtype_bytes: int, count: int = 1) -> Op:
    """A memory-streaming op over ``elements`` values: ``reads + writes`` passes over HBM."""
    return Op(name, "elementwise", bytes=float(dtype_bytes) * elements * (reads + writes),
              vector_ops=vector_ops * elements, exp_ops=exp_ops * elements, count=count)


def self_attention_flops(L: int, heads: int, head_dim: int) -> float:
    """Dense self-attention matmul FLOPs: ``QK^T`` and ``PV``, ``2 * 2 * L^2 * d`` per head."""
    return 4.0 * L * L * head_dim * heads


# Softmax work per cross-attention score (max, subtract, sum, cast) and its exp: cross-attention
# runs through XLA/flash kernels whose op counts we do not have; these are the hand counts.
CROSS_SOFTMAX_VECTOR_OPS, CROSS_SOFTMAX_EXP_OPS = 4.0, 1.0


def forward_ops(model: ModelConfig, L: int, dtype_bytes: int = 2) -> list[Op]:
    """Every op of one forward pass over ``L`` tokens (batch 1), except self-attention.

    Per block (Wan 2.1): adaLN-modulated LayerNorm, Q/K/V projections, q/k RMSNorm, 3D RoPE,
    self-attention, O projection, gated residual; LayerNorm, cross-attention (Q from video tokens,
    K/V from ``text_len`` context tokens, q RMSNorm), residual; modulated LayerNorm, GELU MLP, gated
    residual.  Once per pass: patch embedding and output head.  Vector-op counts per element are
    rough (LayerNorm ~8, RMSNorm ~5, RoPE ~6, GELU-tanh ~8 + 1 transcendental); these ops are
    memory-bound on every device here, so the counts barely matter.
    """
    D, F, H, d, Lt, n = model.dim, model.ffn, model.heads, model.head_dim, model.text_len, model.layers
    b = dtype_bytes
    return [
        matmul_op("patch_embed", L, model.patch_in, D, b),
        matmul_op("qkv_proj", L, D, 3 * D, b, n),
        matmul_op("o_proj", L, D, D, b, n),
        matmul_op("cross_q_proj", L, D, D, b, n),
        matmul_op("cross_kv_proj", Lt, D, 2 * D, b, n),
        Op("cross_attention", "cross_attention", flops=4.0 * L * Lt * D,
           bytes=float(b) * (2 * L * D + 2 * Lt * D),
           vector_ops=CROSS_SOFTMAX_VECTOR_OPS * L * Lt * H, exp_ops=CROSS_SOFTMAX_EXP_OPS * L * Lt * H,
           count=n, widths=(d,)),
        matmul_op("cross_o_proj", L, D, D, b, n),
        matmul_op("ffn_in", L, D, F, b, n),
        matmul_op("ffn_out", L, F, D, b, n),
        elementwise_op("norm_modulate", L * D, 1, 1, 8, 1 / D, b, 2 * n),    # norm1, norm2 (+shift/scale)
        elementwise_op("norm_cross", L * D, 1, 1, 8, 1 / D, b, n),           # norm3 before cross-attn
        elementwise_op("qk_rmsnorm", L * D, 1, 1, 5, 1 / d, b, 3 * n),       # q, k, cross q
        elementwise_op("rope", L * D, 1, 1, 6, 0, b, 2 * n),                 # q, k
        elementwise_op("residual", L * D, 2, 1, 2, 0, b, 3 * n),             # gated adds
        elementwise_op("gelu", L * F, 1, 1, 8, 1, b, n),
        matmul_op("head", L, D, model.patch_in, b),
    ]


#: The role each op's compiled counterpart has in a compiled Wan block (:data:`svgtpu.compiler.fusions.ROLES`, the roles
#: the block's ops are read into); patch embedding and head run outside a block and have none.  The block prices a
#: TPU pass's ops by role where one is committed (:mod:`~svgtpu.costmodel.block_pricing`).  ``svgtpu.compiler.wan_block``'s
#: ``MODELED_ROLES`` restates it for the compiler's own comparison (record-hashed: it reads this one at its next
#: remake); ``tests/test_plausible.py`` holds the two equal.
OP_ROLES = {"qkv_proj": "projections", "o_proj": "projections", "cross_q_proj": "cross-attention",
            "cross_kv_proj": "cross-attention", "cross_attention": "cross-attention", "cross_o_proj": "cross-attention",
            "norm_cross": "cross-attention", "ffn_in": "ffn", "ffn_out": "ffn", "gelu": "ffn",
            "norm_modulate": "norms/modulation", "qk_rmsnorm": "norms/modulation", "rope": "norms/modulation",
            "residual": "norms/modulation"}


def forward_flops(model: ModelConfig, L: int) -> dict[str, float]:
    """FLOPs of one forward pass by op (self-attention dense), for checking by hand."""
    out = {op.name: op.total("flops") for op in forward_ops(model, L) if op.flops}
    out["self_attention"] = self_attention_flops(L, model.heads, model.head_dim) * model.layers
    return out


def op_seconds(op: Op, device: DeviceSpec, eff: Efficiency, chips: int = 1) -> float:
    """Roofline time of ``op`` (all ``count`` runs) on one of ``chips`` chips sharing it evenly."""
    mm_util = math.prod(device.matmul_utilization(w) for w in op.widths)
    compute = op.total("flops") / (device.matmul_flops * eff.matmul * mm_util)
    vector = op.total("vector_ops") / (device.vector_ops * eff.vector_scale)
    exp = op.total("exp_ops") / (device.exp_ops * eff.vector_scale)
    memory = op.total("bytes") / (device.hbm_bandwidth * eff.memory)
    return max(compute, vector, exp, memory) / chips


__all__ = ["REALIZED_CEILING", "OP_ROLES", "Efficiency", "Op", "matmul_op", "elementwise_op", "self_attention_flops", "forward_ops",
           "forward_flops", "op_seconds"]
