"""Multi-chip execution with JAX's own sharding: a named mesh, head-parallel and Ulysses attention.

A 1440p Wan run does not fit one chip.  Attention parallelizes naturally over heads: every head is
an independent problem, so each device profiles, layout-transforms and runs its own heads with the
one shared kernel plan.  When there are fewer heads than devices (or the activations arrive split
along the sequence, as in sequence-parallel DiT blocks), the Ulysses scheme re-shards: an
all-to-all turns ``[heads, L/n]`` shards into ``[heads/n, L]`` shards, attention runs head-parallel,
and a second all-to-all turns the output back.

Mesh axes: ``data`` (the CFG / batch dimension), ``heads`` and ``seq``.

The same code runs as one process per host (``jax.distributed``, :mod:`svgtpu.launch`): the mesh
is then global, over every process's devices, and host values enter and leave it through
:func:`global_array` and :func:`to_host` (JAX's multi-process array utilities).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from svgtpu.geometry import check_positive_int
from svgtpu.errors import BadInput

AXES = ("data", "heads", "seq")

#: attention(q, k, v) -> out on ``[batch, heads, L, d]`` arrays (extra keywords are bound by the caller).
AttentionFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


def make_mesh(data: int = 1, heads: int | None = None, seq: int = 1,
              devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ``(data, heads, seq)`` mesh over ``devices`` (default: all); ``heads=None`` takes the rest."""
    devices = list(jax.devices() if devices is None else devices)
    data, seq = check_positive_int("mesh axis data", data), check_positive_int("mesh axis seq", seq)
    if heads is None:
        if len(devices) % (data * seq):
            raise BadInput(f"data*seq = {data * seq} must divide the {len(devices)} devices")
        heads = len(devices) // (data * seq)
    heads = check_positive_int("mesh axis heads", heads)
    if data * heads * seq > len(devices):
        raise BadInput(f"mesh data*heads*seq = {data}*{heads}*{seq} = {data * heads * seq} needs more "
                       f"than the {len(devices)} available devices")
    grid = np.array(devices[:data * heads * seq]).reshape(data, heads, seq)
    return Mesh(grid, AXES)


def _shard(local: AttentionFn, mesh: Mesh, spec: P, seq_sharded: bool) -> AttentionFn:
    """``local`` under ``shard_map`` with q, k, v and the output all in ``spec``, after checking
    that the mesh divides the batch, the heads (over ``heads x seq``) and, if ``seq_sharded``, L."""
    n_data, n_heads = mesh.shape["data"], mesh.shape["heads"] * mesh.shape["seq"]

    def run(q, k, v):
        if q.ndim != 4 or q.shape != k.shape or q.shape != v.shape:
            raise BadInput(f"q, k, v must share one shape [batch, heads, L, d], got "
                           f"{q.shape}, {k.shape}, {v.shape}")
        batch, heads, L, _ = q.shape
        if batch % n_data:
            raise BadInput(f"batch = {batch} must be divisible by the mesh's data axis ({n_data} devices)")
        if heads % n_heads:
            raise BadInput(f"heads = {heads} must be divisible by the mesh's heads*seq devices ({n_heads})")
        if seq_sharded and L % mesh.shape["seq"]:
            raise BadInput(f"sequence length L = {L} must be divisible by the mesh's seq axis "
                           f"({mesh.shape['seq']} devices)")
        return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec,
                             check_vma=False)(q, k, v)

    return run


def head_parallel(attention: AttentionFn, mesh: Mesh) -> AttentionFn:
    """Run ``attention`` with batch split over ``data`` and heads split over ``heads`` (and ``seq``).

    Every device sees whole sequences of its own heads, so any per-head method (SVG profiling,
    layout transformation) runs unchanged, locally, without communication.
    """
    return _shard(attention, mesh, P("data", ("heads", "seq"), None, None), seq_sharded=False)


def ulysses_local(attention: Callable[..., jax.Array], axis: str = "seq") -> Callable[..., jax.Array]:
    """The per-device body of Ulysses attention, for use inside a ``shard_map`` over ``axis``: an
    all-to-all turns the local ``[b, h, L/n, d]`` into ``[b, h/n, L, d]`` (heads split over the group,
    the sequence gathered), ``attention`` runs on whole sequences, and a second all-to-all turns the
    output back.  Keywords go to ``attention``."""
    def local(q, k, v, **call):
        to_heads = lambda x: jax.lax.all_to_all(x, axis, split_axis=1, concat_axis=2, tiled=True)  # noqa: E731
        out = attention(to_heads(q), to_heads(k), to_heads(v), **call)
        return jax.lax.all_to_all(out, axis, split_axis=2, concat_axis=1, tiled=True)
    return local


def ulysses(attention: AttentionFn, mesh: Mesh) -> AttentionFn:
    """Sequence-parallel attention in the style of DeepSpeed-Ulysses.

    Inputs and outputs are sharded along the sequence (``seq`` axis) and heads (``heads`` axis); inside,
    an all-to-all over ``seq`` gathers the whole sequence for ``heads / seq`` of the local heads, the
    attention runs head-parallel, and an all-to-all scatters the output back along the sequence
    (:func:`ulysses_local`).
    """
    return _shard(ulysses_local(attention), mesh, P("data", "heads", "seq", None), seq_sharded=True)


@functools.lru_cache(maxsize=32)
def sharded_backend(attention: Callable[..., jax.Array], mesh: Mesh, mode: str = "heads"):
    """A DiT attention backend (``attention(q, k, v, *, layer, step, ...)``) run under ``mesh``.

    ``mode``: ``heads`` (:func:`head_parallel`) or ``ulysses`` (:func:`ulysses`).  The backend must
    return the output array only (no per-head info: that would need its own sharding).  Cached: a jitted
    step takes the backend as a static argument, so one backend per (attention, mesh, mode) keeps a second
    sharded run from compiling again.
    """
    wraps = {"heads": head_parallel, "ulysses": ulysses}
    if mode not in wraps:
        raise BadInput(f"mode must be one of {', '.join(wraps)}, got {mode!r}")

    def backend(q, k, v, **call):
        return wraps[mode](functools.partial(attention, **call), mesh)(q, k, v)
    return backend


def mesh_for_model(devices: int, heads: int, batch: int = 2) -> Mesh:
    """The mesh a sharded DiT step uses on the first ``devices`` devices.

    The ``data`` axis takes the classifier-free-guidance pair (2) when ``devices`` and ``batch``
    are even; the ``heads`` axis takes the rest, which must divide the model's ``heads``.
    """
    devices = check_positive_int("devices", devices)
    if devices > jax.device_count():
        raise BadInput(f"devices = {devices} but only {jax.device_count()} are available (on CPU, set "
                       f"XLA_FLAGS=--xla_force_host_platform_device_count={devices} before jax starts)")
    data = math.gcd(2, devices, batch)
    rest = devices // data
    if heads % rest:
        raise BadInput(f"the model's heads = {heads} must be divisible by the {rest} devices of the heads "
                       f"axis ({devices} devices / data axis {data}); use devices in "
                       f"{sorted({data * h for h in range(1, heads + 1) if heads % h == 0})}")
    if devices < jax.process_count():
        raise BadInput(f"devices = {devices} but a multi-process mesh needs a device of each of the "
                       f"{jax.process_count()} processes")
    return make_mesh(data=data, heads=rest, devices=spread_devices()[:devices])


def spread_devices() -> list[jax.Device]:
    """All devices, taken from the processes in turn (process 0's first, process 1's first, ...), so
    that the first ``n >= process_count`` include a device of every process, as a multi-process mesh
    must; with one process, ``jax.devices()``."""
    by_process: dict[int, list] = {}
    for d in jax.devices():
        by_process.setdefault(d.process_index, []).append(d)
    columns = [by_process[p] for p in sorted(by_process)]
    return [d for i in range(max(map(len, columns))) for column in columns if i < len(column) for d in [column[i]]]


def replicated(mesh: Mesh) -> NamedSharding:
    """Sharding that keeps a full copy on every device (weights)."""
    return NamedSharding(mesh, P())


def global_array(value, sharding: NamedSharding) -> jax.Array:
    """A global array in ``sharding`` from a host value that every process holds in full.

    With one process this is a ``device_put``; with several (``jax.distributed``) each process
    contributes the part its own devices hold (``jax.make_array_from_process_local_data``), so the
    result spans devices no single process can address.
    """
    value = np.asarray(value)
    if not sharding.addressable_devices:
        raise BadInput(f"process {jax.process_index()} holds none of the mesh's devices: a multi-process mesh "
                       "must include a device of every process")
    return jax.make_array_from_process_local_data(sharding, value, value.shape)


def to_host(x: jax.Array) -> np.ndarray:
    """The whole value of a (possibly multi-process) array on this host, as numpy; every process
    must call it (``multihost_utils.process_allgather`` when the array spans processes)."""
    if x.is_fully_addressable:
        return np.asarray(x)
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
