"""Multi-chip terms: the slice's mesh, the Ulysses all-to-alls across its bisection, and weight
sharding (whether bf16 weights fit next to the activations, and the all-gathers when they do not).

TPU slices are meshes of chips, each with ``ici_ports`` links; the per-chip ICI figure of the specs
is bidirectional over all ports, so one link carries ``ici_bandwidth / ports / 2`` each way.  A small
slice has no wraparound links (Cloud TPU docs: the torus closes at full-pod dimensions, 16 chips
for v5e/v6e), so an all-to-all is limited by the few links across the middle of the mesh, not by a
chip's own bandwidth.  GPUs (``ici_ports=None``) sit on a switch: a chip's full NVLink bandwidth.
"""

from __future__ import annotations

import math

from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.costmodel.workload import ModelConfig
from svgtpu.errors import BadInput

#: Slice shapes by chip count: 2D for 4-port chips (v5e, v6e: Cloud TPU docs, "TPU v6e"
#: configurations v6e-1 1x1 ... v6e-8 2x4 ... v6e-256 16x16), 3D for 6-port chips (v5p: 2x2x1,
#: 2x2x2, ...).  A dimension wraps around only at full-pod size (16 in 2D, 4 and more in 3D cubes).
MESHES = {
    4: {1: (1, 1), 2: (1, 2), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8), 128: (8, 16),
        256: (16, 16)},
    6: {1: (1, 1, 1), 2: (1, 1, 2), 4: (2, 2, 1), 8: (2, 2, 2), 16: (2, 2, 4), 32: (2, 4, 4), 64: (4, 4, 4)},
}
WRAP_AT = {4: 16, 6: 4}
#: Share of HBM a model may fill (the rest: XLA scratch, fragmentation); an assumption.
HBM_USABLE = 0.9


def mesh_shape(device: DeviceSpec, chips: int) -> tuple[int, ...] | None:
    """The mesh a slice of ``chips`` forms, or ``None`` for switched GPUs."""
    if device.ici_ports is None:
        return None
    shapes = MESHES.get(device.ici_ports, {})
    if chips not in shapes:
        raise BadInput(f"chips must be one of {', '.join(map(str, shapes))} for {device.name} slices "
                       f"(Cloud TPU slice shapes), got {chips}")
    return shapes[chips]


def link_bandwidth(device: DeviceSpec) -> float:
    """One ICI link, one direction, bytes/s."""
    return device.ici_bandwidth / device.ici_ports / 2


def _mesh_links(shape: tuple[int, ...], wrap_at: int) -> tuple[int, float]:
    """(links across the bisection of the longest dimension, mean links per chip)."""
    n = math.prod(shape)
    longest = max(range(len(shape)), key=lambda i: shape[i])
    wraps = [s >= wrap_at for s in shape]
    others = n // shape[longest]
    bisection = others * (2 if wraps[longest] else 1)
    links = sum((s if w else s - 1) * (n // s) for s, w in zip(shape, wraps) if s > 1)
    return bisection, 2 * links / n


def _check_ici(device: DeviceSpec) -> None:
    if device.ici_bandwidth is None:
        raise BadInput(f"device {device.name} has no ici_bandwidth; model it on chips=1")


def all_to_all_seconds(bytes_per_chip: float, chips: int, device: DeviceSpec, eff: Efficiency,
                       shape: tuple[int, ...] | None = None) -> float:
    """One all-to-all in which each chip sends ``(chips-1)/chips`` of its ``bytes_per_chip``.

    Mesh (``shape``, default the slice shape of ``chips``): the slower of the bisection (``chips * bytes / 4``
    cross the middle each way) and a chip's own links; switch: a chip's one-way bandwidth.
    """
    if chips == 1:
        return 0.0
    _check_ici(device)
    sent = bytes_per_chip * (chips - 1) / chips
    if shape is not None and math.prod(shape) != chips:
        raise BadInput(f"mesh shape {shape} does not hold {chips} chips")
    shape = shape if shape is not None or device.ici_ports is None else mesh_shape(device, chips)
    if shape is None:
        return sent / (device.ici_bandwidth / 2 * eff.ici)
    bisection, degree = _mesh_links(shape, WRAP_AT[device.ici_ports])
    link = link_bandwidth(device) * eff.ici
    return max(chips * bytes_per_chip / 4 / (bisection * link), sent / (degree * link))


#: Ulysses all-to-alls around one self-attention layer: Q, K and V from sequence to heads, O back.
ULYSSES_ALL_TO_ALLS = 4


def ulysses_collectives(L: int, dim: int, chips: int, dtype_bytes: int = 2) -> dict[str, dict]:
    """The collectives one Ulysses attention layer needs on each of ``chips`` chips: per kind, the
    count and the bytes of each (a chip's ``L / chips x dim`` slice re-sharded); none on one chip."""
    if chips == 1:
        return {}
    return {"all-to-all": {"count": ULYSSES_ALL_TO_ALLS, "bytes": L // chips * dim * dtype_bytes}}


def all_gather_seconds(total_bytes: float, chips: int, device: DeviceSpec, eff: Efficiency) -> float:
    """Every chip gathers the ``(chips-1)/chips`` of ``total_bytes`` it does not hold: a
    bidirectional ring (two links per chip) on a mesh, a chip's one-way bandwidth on a switch."""
    if chips == 1:
        return 0.0
    _check_ici(device)
    received = total_bytes * (chips - 1) / chips
    rate = device.ici_bandwidth / 2 if device.ici_ports is None else 2 * link_bandwidth(device)
    return received / (rate * eff.ici)


def memory_per_chip(model: ModelConfig, L: int, chips: int, heads_per_chip: int, dtype_bytes: int = 2) -> dict:
    """Bytes one chip holds under Ulysses: replicated weights, and peak activations (the sequence
    shard's hidden state, Q/K/V/attention-out and MLP hidden; Q/K/V/O of its heads over all ``L``)."""
    weights = float(model.params) * dtype_bytes
    shard = L / chips * (4 * model.dim + model.ffn) * dtype_bytes
    heads = 4.0 * L * heads_per_chip * model.head_dim * dtype_bytes
    return {"weights": weights, "activations": shard + heads}


__all__ = ["MESHES", "HBM_USABLE", "ULYSSES_ALL_TO_ALLS", "ulysses_collectives", "mesh_shape", "link_bandwidth", "all_to_all_seconds", "all_gather_seconds",
           "memory_per_chip"]
