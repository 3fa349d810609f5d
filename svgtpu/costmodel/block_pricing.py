"""A TPU pass's non-attention ops priced from a compiled Wan block where one is committed (docs/plausibility.md, "The
non-attention ops priced from the compiled block"), else from the roofline.

Where a dense block record (:func:`~svgtpu.costmodel.compiled_block.dense_records`) has the setup's device, layer
shape, token grid and devices per pass (:func:`pricing_block`), each role of the block's ops no other term prices
(:func:`~svgtpu.costmodel.compiled_block.other_ops_cycles`: not the attention kernel, the collectives or the
own-compile stand-in) costs its static cycles at the chip's clock over the ops' realized over static time
(:func:`realized`), and at least the HBM time the roofline counts for the model's ops of that role (a static schedule
holds no HBM stall).  The realized over static time is the one fitted TPU constant, carried by ``Efficiency.matmul``:
the matmul efficiency is that factor times the production block's matmul MXU share
(:func:`~svgtpu.costmodel.plausible.compiled_matmul_mxu_share`), the rate the roofline prices every matmul with where
no block prices it (other resolutions, meshes, devices, models) and the ops outside a block (patch embedding, head,
the stages).  JAX-free.
"""

from __future__ import annotations

from svgtpu.costmodel.compiled_block import dense_records, other_ops_cycles
from svgtpu.costmodel.plausible import compiled_matmul_mxu_share
from svgtpu.costmodel.roofline import OP_ROLES, Efficiency, Op, op_seconds
from svgtpu.costmodel.workload import ModelConfig, get_model
from svgtpu.errors import BadInput
from svgtpu.geometry import VideoGeometry, get_geometry

#: How a setup's non-attention ops are priced: from a compiled block where one matches (``block``, else the
#: roofline), or by the roofline alone (``roofline``: the model's form before 2026-12-06's change, the other reading).
PRICINGS = ("block", "roofline")
#: The role the block's layout copies around the attention kernel and its top-level bundles stand in, as keys of a
#: pass's breakdown (no op of the roofline is theirs).
EXTRA_KEYS = {"self-attention": "attention_layout_copies", "other": "block_top_level"}


def layer_shape(model: ModelConfig) -> tuple:
    """What a compiled block's per-layer ops depend on in a model: everything but its depth and patch."""
    return (model.dim, model.heads, model.head_dim, model.ffn, model.text_len, model.qk_norm, model.cross_norm,
            model.cross_qk_norm, model.image_dim)


def pricing_block(model: ModelConfig, geometry: VideoGeometry, device: str, devices_per_pass: int) -> dict | None:
    """The committed dense block record that prices a pass of ``model`` over ``geometry`` on ``devices_per_pass``
    devices of ``device``: its model's :func:`layer_shape`, its grid and its sequence axis equal to the setup's (each
    device holds the same tokens); ``None`` where none does."""
    for record in dense_records(device):
        setting = record["job"]["setting"]
        grid = get_geometry(setting["resolution"])
        if (layer_shape(get_model(setting["model"])) == layer_shape(model)
                and (grid.T, grid.H, grid.W) == (geometry.T, geometry.H, geometry.W)
                and record["plan"]["mesh"]["seq"] == devices_per_pass):
            return record
    return None


def realized(efficiency: Efficiency) -> float:
    """The non-attention ops' realized over static time a TPU's matmul efficiency carries: ``matmul`` over the
    production block's matmul MXU share."""
    return efficiency.matmul / compiled_matmul_mxu_share()["value"]


def matmul_efficiency(realized_over_static: float) -> float:
    """The matmul efficiency that carries ``realized_over_static`` (:func:`realized`'s inverse)."""
    return realized_over_static * compiled_matmul_mxu_share()["value"]


def block_seconds(record: dict, layers: int, ops: list[Op], roofline: dict[str, float], device, efficiency: Efficiency,
                  chips: int) -> dict[str, float]:
    """The ``layers`` layers' ops of one pass (``ops``, their ``roofline`` seconds by name) on one of ``chips`` chips
    priced from the block ``record``: per role, the static cycles of :func:`other_ops_cycles` at ``device``'s clock
    over :func:`realized`, or the HBM time of the role's ops (their bytes over the chips' bandwidth at
    ``Efficiency.memory``) where that is longer, shared among the role's ops by their roofline seconds; the layout
    copies and top-level bundles under :data:`EXTRA_KEYS`."""
    factor = realized(efficiency)
    out = {}
    for role, cycles in other_ops_cycles(record).items():
        static = layers * cycles / device.clock_hz / factor
        mine = [op for op in ops if OP_ROLES.get(op.name) == role]
        if not mine:
            out[EXTRA_KEYS[role]] = static
            continue
        hbm = sum(op.total("bytes") for op in mine) / (device.hbm_bandwidth * efficiency.memory) / chips
        seconds, weights = max(static, hbm), [roofline[op.name] for op in mine]
        out |= {op.name: seconds * w / sum(weights) for op, w in zip(mine, weights)}
    return out


def other_seconds(model: ModelConfig, geometry: VideoGeometry, device, efficiency: Efficiency, chips: int,
                  ops: list[Op], dtype_bytes: int = 2, pricing: str = "block") -> dict[str, float]:
    """Seconds of one pass's non-attention ``ops`` (the roofline's, :func:`~svgtpu.costmodel.roofline.forward_ops`)
    on one of ``chips`` chips sharing it, by op: at the roofline, the per-layer ones from the compiled block where
    ``pricing`` is ``block`` and :func:`pricing_block` finds one (a TPU with its clock, bfloat16)."""
    if pricing not in PRICINGS:
        raise BadInput(f"pricing must be one of {', '.join(PRICINGS)}, got {pricing!r}")
    out = {op.name: op_seconds(op, device, efficiency, chips) for op in ops}
    record = (pricing_block(model, geometry, device.name, chips * device.cores)
              if pricing == "block" and device.family == "tpu" and device.clock_hz and dtype_bytes == 2 else None)
    if record is None:
        return out
    return {k: v for k, v in out.items() if k not in OP_ROLES} | block_seconds(record, model.layers, ops, out, device,
                                                                                 efficiency, chips)


__all__ = ["PRICINGS", "EXTRA_KEYS", "layer_shape", "pricing_block", "realized", "matmul_efficiency", "block_seconds",
           "other_seconds"]
