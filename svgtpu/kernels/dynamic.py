"""Block-sparse attention whose mask is data: one compiled kernel for every mask of a shape.

:func:`block_table_attention` runs the kernel of :mod:`svgtpu.kernels.block_sparse` on a
*block-table* mask given as arrays, ``allowed(i, j) = table[a, b]`` for row ``i`` in block ``a``
(``[q_edges[a], q_edges[a + 1])``) and key ``j`` in block ``b``: SVG2's kept cluster pairs in the
permuted, cluster-contiguous order.  Everything is traced, so it runs inside ``jax.jit``:

- tile kinds from the edges and table (:func:`~svgtpu.kernels.dynamic_plan.block_table_kinds`,
  or aligned to whole tiles by a :func:`svgtpu.masks.core.align` mode), then the traversal as packed words padded to a
  static length (:func:`~svgtpu.kernels.dynamic_plan.traced_plan`), riding in scalar prefetch
  exactly like a static plan;
- full tiles take the mask-free fast path; a partial tile builds its mask in the kernel from the
  block labels of its rows and keys (lane-dense int32 rows): ``onehot(q labels) @ table @
  onehot(k labels)^T > 0``, two small bf16 matmuls (0/1 values, exact) and iota compares.  Padded
  keys carry label ``Ck``, which matches no column, so padding is masked by the same product.
  Aligned masks have no partial tile but those holding padded keys, masked by ``key < L`` alone.

Cost (see ``docs/sparse_methods.md``): the grid has ``heads x steps`` steps whatever the mask, so
the no-op steps after a head's real traversal still cost the per-step overhead; ``max_steps``
bounds them.  A head whose plan needs more steps than the bound gets NaN output (never a silent
truncation) and ``info.overflow``.  Edges must be non-decreasing from 0 to ``L`` (as
:func:`svgtpu.attention.svg2.cluster_order` makes them); data cannot be checked inside ``jit``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from svgtpu.geometry import ceil_div, round_up
from svgtpu.kernels.block_sparse import run_plan_chunk
from svgtpu.kernels.common import (check_qkv, check_sm_scale, pad_qkv, resolve_config, resolve_device,
                                   resolve_interpret)
from svgtpu.kernels.budget import check_vmem, device_memory
from svgtpu.kernels.config import LANES, SUBLANES, KernelConfig
from svgtpu.kernels.dynamic_plan import (block_labels, block_table_kinds, check_traced_align, plan_length,
                                         traced_plan)
from svgtpu.kernels.plan import PlanChunk, kv_bits_for, smem_array_bytes
from svgtpu.errors import BadInput

#: The cluster table is zero-padded to multiples of this on both sides before it enters the kernel,
#: so the two mask matmuls have MXU-shaped operands (bf16 packs 16 rows per vreg).
TABLE_QUANTUM = 16


class PlanInfo(NamedTuple):
    """What the traced plan of one call holds, per head (jnp arrays)."""

    kinds: jax.Array          # int32 [H, nq, nkv]: EMPTY / PARTIAL / FULL of the mask the kernel ran
    kept_fraction: jax.Array  # float32 [H]: allowed pairs / L^2 of that mask
    needed_steps: jax.Array   # int32 [H]: real plan steps (over all q-row chunks)
    overflow: jax.Array       # bool [H]: the plan needed more steps than max_steps (output is NaN)


def cluster_vmem_bytes(config: KernelConfig, q_blocks: int, k_blocks: int) -> int:
    """VMEM of the label and table inputs (double-buffered, padded to vreg tiles: a ``[1, n]`` int32
    block takes 8 sublanes) and the mask matmuls' temporaries."""
    bq, bkv, bkc = config.block_q, config.block_kv, config.block_kv_compute
    inputs = 4 * SUBLANES * (round_up(bq, LANES) + bkv) + 2 * q_blocks * round_up(k_blocks, LANES)
    temporaries = 4 * bq * (round_up(q_blocks, LANES) + round_up(k_blocks, LANES)) + 4 * k_blocks * bkc
    return 2 * inputs + temporaries


def chunk_rows(heads: int, nq: int, nkv: int, steps: int, smem_budget: int) -> int:
    """Most q tile rows per ``pallas_call`` whose padded plan (``min(steps, rows * nkv)`` words per head)
    fits ``smem_budget`` bytes of SMEM."""
    def smem(rows):
        return smem_array_bytes(heads * min(steps, rows * nkv))

    if smem(1) > smem_budget:
        raise BadInput(f"one q tile row of the traced plan needs {smem(1)} bytes of SMEM for {heads} heads, over "
                       f"the budget of {smem_budget}: use a larger block_kv or fewer heads per call")
    rows = 1
    while rows < nq and smem(rows + 1) <= smem_budget:
        rows += 1
    return rows


def plan_facts(heads: int, L: int, config: KernelConfig, max_steps: int | None = None,
               device: str = "v6e") -> dict:
    """The traced plan's static shape for ``heads`` heads at length ``L``, known before compiling: grid
    steps per head, q-row chunks (``pallas_call`` s), SMEM of the largest chunk and the budget."""
    nq, nkv = ceil_div(L, config.block_q), ceil_div(L, config.block_kv)
    bound = plan_length(nq, nkv, max_steps)
    budget = device_memory(device).smem_budget
    rows = chunk_rows(heads, nq, nkv, bound, budget)
    return {"tiles": nq * nkv, "steps_per_head": bound, "chunks": ceil_div(nq, rows),
            "smem_bytes": smem_array_bytes(heads * min(bound, rows * nkv)), "smem_budget": budget}


def _check_table(q_edges, k_edges, table, heads: int) -> None:
    for name, x in (("q_edges", q_edges), ("k_edges", k_edges)):
        if getattr(x, "ndim", None) != 2 or x.shape[0] != heads or x.shape[1] < 2 \
                or not jnp.issubdtype(x.dtype, jnp.integer):
            raise BadInput(f"{name} must be an integer [heads={heads}, blocks + 1] array of block edges, "
                           f"got {getattr(x, 'dtype', None)} {getattr(x, 'shape', None)}")
    expected = (heads, q_edges.shape[1] - 1, k_edges.shape[1] - 1)
    if getattr(table, "dtype", None) != jnp.bool_ or tuple(table.shape) != expected:
        raise BadInput(f"table must be a bool [heads, q blocks, k blocks] = {expected} array, "
                       f"got {getattr(table, 'dtype', None)} {getattr(table, 'shape', None)}")


def block_table_attention(q, k, v, q_edges, k_edges, table, *, align: str | None = None,
                          config: KernelConfig | None = None, block_q: int | None = None,
                          block_kv: int | None = None, block_kv_compute: int | None = None, fast_path: bool = True,
                          max_steps: int | None = None, device: str | None = None, interpret=None,
                          sm_scale: float | None = None) -> tuple[jax.Array, PlanInfo]:
    """Attention of ``q, k, v [H, L, d]`` under the block-table mask ``(q_edges, k_edges, table)``;
    returns ``(out [H, L, d], PlanInfo)``.  Jit-able: edges and table may be traced.

    ``q_edges [H, Cq + 1]``, ``k_edges [H, Ck + 1]``: integer block edges from 0 to ``L``; ``table``
    bool ``[H, Cq, Ck]``; ``align``: ``None`` (the exact mask) or a :func:`svgtpu.masks.core.align` mode
    (whole tiles, kept by the same rule).  Tiles, ``fast_path``, ``device``, ``interpret`` and
    ``sm_scale`` as in :func:`~svgtpu.kernels.block_sparse_attention`.  ``max_steps``: plan steps per
    head and ``pallas_call`` (default: the worst case, every tile; see the module doc).
    """
    config = resolve_config(config, block_q, block_kv, block_kv_compute, fast_path)
    if config.fixed_max:
        raise BadInput("fixed_max needs a static mask (the fixed-maximum pass reads each row's keys from it on the "
                       "host): use block_sparse_attention, or fixed_max=False here")
    check_qkv(q, k, v)
    _check_table(q_edges, k_edges, table, q.shape[0])
    check_traced_align(align)
    L = q.shape[1]
    plan_length(ceil_div(L, config.block_q), ceil_div(L, config.block_kv), max_steps)  # validates the bound
    scale = check_sm_scale(sm_scale, q.shape[-1])
    return _block_table(q, k, v, q_edges, k_edges, table, align=align, config=config, max_steps=max_steps,
                        device=resolve_device(device), interpret=resolve_interpret(interpret), sm_scale=scale)


@functools.partial(jax.jit, static_argnames=("align", "config", "max_steps", "device", "interpret", "sm_scale"))
def _block_table(q, k, v, q_edges, k_edges, table, *, align, config: KernelConfig, max_steps, device: str,
                 interpret, sm_scale: float):
    heads, L, d = q.shape
    bq, bkv = config.block_q, config.block_kv
    nq, nkv = ceil_div(L, bq), ceil_div(L, bkv)
    kinds, kept = block_table_kinds(q_edges, k_edges, table, L=L, block_q=bq, block_kv=bkv, align=align)
    memory = device_memory(device)
    source = "clusters" if align is None else "padding"
    operands, extra = (), 0
    if source == "clusters":
        cq, ck = table.shape[1:]
        cq_padded, ck_padded = round_up(cq, TABLE_QUANTUM), round_up(ck, TABLE_QUANTUM)
        extra = cluster_vmem_bytes(config, cq_padded, ck_padded)
        padded = jnp.pad(table, ((0, 0), (0, cq_padded - cq), (0, ck_padded - ck)))
        operands = (block_labels(q_edges, nq * bq).reshape(heads, nq, 1, bq),
                    block_labels(k_edges, nkv * bkv)[:, None, :], padded.astype(jnp.bfloat16))
    vmem_limit = check_vmem(config, d, q.dtype.itemsize, False, memory, extra)
    q, k, v = pad_qkv(q, k, v, bq, bkv)
    bound = plan_length(nq, nkv, max_steps)
    rows = chunk_rows(heads, nq, nkv, bound, memory.smem_budget)
    outs, needed, overflow = [], jnp.zeros(heads, jnp.int32), jnp.zeros(heads, bool)
    for row0 in range(0, nq, rows):
        row1 = min(nq, row0 + rows)
        steps = min(bound, (row1 - row0) * nkv)
        words, need = traced_plan(kinds[:, row0:row1], L=L, block_q=bq, block_kv=bkv, steps=steps)
        chunk = PlanChunk(row0=row0, row1=row1, steps=steps, words=words, block_index=None)
        outs.append(run_plan_chunk(q, k, v, operands, chunk, source=source, L=L, kv_bits=kv_bits_for(L, bkv),
                                per_head=True, mask=None, config=config, interpret=interpret, sm_scale=sm_scale,
                                vmem_limit=vmem_limit))
        needed, overflow = needed + need, overflow | (need > steps)
    out = (outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1))[:, :L]
    out = jnp.where(overflow[:, None, None], jnp.asarray(jnp.nan, out.dtype), out)
    return out, PlanInfo(kinds, kept, needed, overflow)


__all__ = ["block_table_attention", "PlanInfo", "chunk_rows", "plan_facts", "cluster_vmem_bytes", "TABLE_QUANTUM"]
