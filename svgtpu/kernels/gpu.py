"""Block-sparse flash attention as a Pallas GPU kernel (Triton backend): the TPU kernel's plan on GPUs.

The same static :class:`~svgtpu.kernels.plan.TilePlan` drives it: empty tiles are never visited,
full tiles run a mask-free body (the fast path, C4) and partial tiles the masked one, with masks
from iotas (band + sink, padded keys) or from the plan's compacted mask blocks.  What changes is
how a GPU walks it.  A TPU core runs the grid sequentially, so the TPU kernel takes one grid step
per tile; a GPU runs thousands of programs at once, so here one program owns one row of q tiles of
one head and loops over that row's kv tiles itself.  The plan is regrouped per row (:class:`RowPlan`):
its full tiles first, then its partial ones, so each program runs two loops, a mask-free one and a
masked one, with no per-tile branch.  ``fast_path=False`` sends every tile through the masked loop.

**Why Triton, not Mosaic GPU.**  Pallas' Triton backend runs on every CUDA GPU JAX supports (Ampere,
Hopper, Blackwell) and its kernels are plain array code, so this file reads like the TPU kernel;
Mosaic GPU targets Hopper/Blackwell only and needs explicit warpgroup, TMA and barrier scheduling.
Its one advantage here, asynchronous WGMMA pipelines, is measured rather than assumed: the GPU
benchmark times JAX's own Mosaic GPU flash attention (dense) next to this kernel.  JAX deprecated
Pallas' Triton backend in July 2026 (warning ``jax-pallas-triton``, still lowered in 0.11); where a
later jax drops it, the GPU benchmark records this kernel's runs as skipped with that error, and a
Mosaic GPU body for the same row plan is the way on.

**GPU tile rules.**  Two tile sizes matter.  The *plan tile* ``block_q x block_kv`` is the unit of
the mask (which tiles are empty, partial or full; what an aligned mask snaps to), validated by the
TPU rules (:class:`~svgtpu.kernels.config.KernelConfig`), so one aligned mask serves both platforms.  The *program tile*
``gpu_block_q x gpu_block_kv`` is what one Triton program holds in registers: Triton
needs power-of-two block shapes (``tl.arange``) of at least 16 (``tl.dot`` operands), and a
``[bq, d]`` float32 accumulator plus ``[bq, bkv]`` scores must fit the 64k 32-bit registers of an
SM (Hopper/Ampere), so ``gpu_block_q <= 128`` and ``gpu_block_kv <= 128``; both must divide
their plan tile.  Defaults: 128 x 64, the FlashAttention-2 forward tile for ``d = 128`` (Dao 2023),
8 warps for ``d = 128``, 4 for ``d = 64``.

Scores are computed in base 2 (``exp2`` is the GPU's native transcendental; ``sm_scale * log2 e``
is folded into the scores), softmax statistics and the accumulator stay float32 in registers,
bf16 inputs feed the tensor cores in bf16 and float32 inputs are multiplied at full float32
precision (no TF32).  Rows with no allowed key return zeros, as on TPU.

**One update on both platforms.**  Each kv chunk runs the TPU kernel's own online-softmax step,
:func:`svgtpu.kernels.block_sparse.tile_update`: base-2 scores, masked ones at the same finite
:data:`~svgtpu.kernels.block_sparse.MASK_VALUE` (no row maximum is ever ``-inf``, so no guard), and a row
whose maximum never rose above it written as zeros.  What differs is layout only: here the row statistics
are ``[bq, 1]`` (one float32 register per query row) where the TPU body keeps a lane-replicated vreg per row.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from svgtpu.kernels.block_sparse import MASK_VALUE, tile_update
from svgtpu.kernels.common import check_inputs, check_sm_scale, pad_qkv, resolve_config
from svgtpu.kernels.config import KernelConfig
from svgtpu.kernels.plan import TilePlan, tile_plan
from svgtpu.masks.core import Mask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.errors import BadInput

#: Triton program tiles: powers of two from 16 (``tl.dot`` minimum) to 128 (register file, see above).
PROGRAM_TILES = (16, 32, 64, 128)
DEFAULT_GPU_BLOCK_Q = 128
DEFAULT_GPU_BLOCK_KV = 64


def default_program_tile(name: str, plan_tile: int, cap: int) -> int:
    """The largest program tile up to ``cap`` dividing ``plan_tile`` (16 for MaxDiffusion's 3024 rows)."""
    fits = [t for t in PROGRAM_TILES if t <= cap and plan_tile % t == 0]
    if not fits:
        raise BadInput(f"block_{name.removeprefix('gpu_block_')}={plan_tile} must be a multiple of "
                       f"{PROGRAM_TILES[0]} on GPU (the smallest Triton tl.dot operand)")
    return fits[-1]


def check_program_tile(name: str, value, plan_tile: int) -> int:
    """A program tile must be a power of two in 16..128 dividing its plan tile (see the module doc)."""
    if value is None:
        return default_program_tile(name, plan_tile, DEFAULT_GPU_BLOCK_Q if name == "gpu_block_q"
                                    else DEFAULT_GPU_BLOCK_KV)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) not in PROGRAM_TILES:
        raise BadInput(
            f"{name} must be one of {PROGRAM_TILES} (Triton block shapes are powers of two, tl.dot needs "
            f">= 16, and a 128-row float32 accumulator already fills an SM's registers), got {value!r}")
    if plan_tile % value:
        raise BadInput(f"{name}={value} must divide its plan tile size {plan_tile}")
    return int(value)


@dataclasses.dataclass(frozen=True, eq=False)
class RowPlan:
    """A :class:`TilePlan` regrouped by q tile row, for one GPU program per row.

    For plan head ``h`` and q tile row ``i``, steps ``start[h, i] ... start[h, i] + n_full[h, i]``
    of ``kv_tile[h]`` are the row's full tiles (mask-free body) and the next ``n_partial[h, i]``
    its partial ones (masked body); ``block_index[h]`` (``blocks`` masks only) is aligned with
    ``kv_tile[h]``.  Without the fast path every non-empty tile counts as partial.
    """

    plan: TilePlan
    start: np.ndarray        # int32 [plan_heads, q_tiles]
    n_full: np.ndarray       # int32 [plan_heads, q_tiles]
    n_partial: np.ndarray    # int32 [plan_heads, q_tiles]
    kv_tile: np.ndarray      # int32 [plan_heads, max tiles]
    block_index: np.ndarray | None  # int32 [plan_heads, max tiles]

    @property
    def tiles_computed(self) -> int:
        """Non-empty tiles visited, summed over plan heads."""
        return int(self.n_full.sum() + self.n_partial.sum())


def row_plan(plan: TilePlan) -> RowPlan:
    """Regroup the flat traversal of ``plan`` by q row: full tiles first, then partial ones."""
    q_tiles = -(-plan.L // plan.block_q)
    heads = plan.plan_heads
    visited = plan.kind != EMPTY
    for h, n in enumerate(plan.real_steps):
        visited[h, n:] = False  # no-op padding of per-head plans
    width = max(int(visited.sum(axis=1).max()), 1)
    start = np.zeros((heads, q_tiles), np.int32)
    n_full = np.zeros((heads, q_tiles), np.int32)
    n_partial = np.zeros((heads, q_tiles), np.int32)
    kv_tile = np.zeros((heads, width), np.int32)
    block_index = np.zeros((heads, width), np.int32) if plan.block_index is not None else None
    for h in range(heads):
        steps = np.flatnonzero(visited[h])
        full = plan.kind[h, steps] == FULL if plan.fast_path else np.zeros(len(steps), bool)
        # stable sort by (row, partial-after-full): rows stay contiguous, full tiles lead each row
        order = np.lexsort((~full, plan.q_tile[h, steps]))
        steps, full = steps[order], full[order]
        rows = plan.q_tile[h, steps]
        kv_tile[h, :len(steps)] = plan.kv_tile[h, steps]
        if block_index is not None:
            block_index[h, :len(steps)] = plan.block_index[h, steps]
        counts = np.bincount(rows, minlength=q_tiles)
        start[h] = np.concatenate([[0], np.cumsum(counts)[:-1]])
        n_full[h] = np.bincount(rows, weights=full, minlength=q_tiles).astype(np.int32)
        n_partial[h] = counts - n_full[h]
    assert np.all(np.isin(plan.kind[visited], (PARTIAL, FULL)))
    for a in (start, n_full, n_partial, kv_tile) + ((block_index,) if block_index is not None else ()):
        a.setflags(write=False)
    return RowPlan(plan, start, n_full, n_partial, kv_tile, block_index)


@functools.lru_cache(maxsize=32)
def row_plan_for(mask, L: int, block_q: int, block_kv: int, fast_path: bool) -> RowPlan:
    """The (cached) row plan the kernel runs for ``mask``: :func:`row_plan` of its :func:`tile_plan`."""
    return row_plan(tile_plan(mask, L, block_q, block_kv, fast_path))


def _kernel(start_ref, n_full_ref, n_partial_ref, kv_tile_ref, *refs, mask: Mask | None, source: str,
            L: int, block_q: int, block_kv: int, bqc: int, bkc: int, per_head: bool, sm_scale: float):
    if source == "blocks":
        block_index_ref, q_ref, k_ref, v_ref, blocks_ref, o_ref = refs
    else:
        q_ref, k_ref, v_ref, o_ref = refs
    r, h = pl.program_id(0), pl.program_id(1)
    ph = h if per_head else 0
    sub_rows = block_q // bqc
    row, sub = r // sub_rows, r % sub_rows  # plan row of this program, and which bqc rows of it
    start, n_full, n_partial = start_ref[ph, row], n_full_ref[ph, row], n_partial_ref[ph, row]
    q = q_ref[...]
    d = q.shape[-1]
    q_ids = r * bqc + jnp.arange(bqc)[:, None]

    def chunk_mask(t, c, block):
        """bool mask of kv chunk ``c`` of tile ``t`` (``block``: its mask block's index, ``blocks`` only)."""
        if source == "blocks":
            return blocks_ref[block, pl.ds(sub * bqc, bqc), pl.ds(c * bkc, bkc)] != 0
        k_ids = t * block_kv + c * bkc + jnp.arange(bkc)[None, :]
        keep = k_ids < L
        if source == "iota":
            allowed = mask.allowed(q_ids, k_ids)
            keep = allowed & keep if L % block_kv else allowed
        return keep

    def visit(j, state, masked: bool):
        t = kv_tile_ref[ph, j]
        block = block_index_ref[ph, j] if masked and source == "blocks" else None
        for c in range(block_kv // bkc):  # static: the plan tile in program-tile chunks
            k0 = pl.multiple_of(t * block_kv + c * bkc, bkc)
            k, v = k_ref[pl.ds(k0, bkc), :], v_ref[pl.ds(k0, bkc), :]
            state = tile_update(q, k, v, *state, chunk_mask(t, c, block) if masked else None, sm_scale)
        return state

    state = (jnp.full((bqc, 1), -jnp.inf, jnp.float32), jnp.zeros((bqc, 1), jnp.float32),
             jnp.zeros((bqc, d), jnp.float32))
    state = lax.fori_loop(start, start + n_full, functools.partial(visit, masked=False), state)
    state = lax.fori_loop(start + n_full, start + n_full + n_partial, functools.partial(visit, masked=True), state)
    m, l, acc = state
    inv = jnp.where(m > MASK_VALUE, 1.0 / l, 0.0)  # rows with no allowed key -> 0
    o_ref[...] = (acc * inv).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("mask", "block_q", "block_kv", "bqc", "bkc", "fast_path",
                                             "interpret", "sm_scale", "num_warps", "num_stages"))
def _gpu_block_sparse(q, k, v, *, mask, block_q, block_kv, bqc, bkc, fast_path, interpret, sm_scale,
                      num_warps, num_stages):
    heads, L, d = q.shape
    rp = row_plan_for(mask, L, block_q, block_kv, fast_path)
    plan = rp.plan
    q, k, v = pad_qkv(q, k, v, block_q, block_kv)
    Lq, Lk = q.shape[1], k.shape[1]

    def whole(a):  # small plan arrays: every program sees all of them and reads scalars
        return pl.BlockSpec(a.shape, lambda r, h: (0,) * a.ndim)

    tables = [rp.start, rp.n_full, rp.n_partial, rp.kv_tile]
    if plan.mask_source == "blocks":
        tables.append(rp.block_index)
    tables = [jnp.asarray(a) for a in tables]
    q_spec = pl.BlockSpec((None, bqc, d), lambda r, h: (h, r, 0))
    kv_spec = pl.BlockSpec((None, Lk, d), lambda r, h: (h, 0, 0))
    in_specs = [whole(a) for a in tables] + [q_spec, kv_spec, kv_spec]
    operands = [*tables, q, k, v]
    if plan.mask_source == "blocks":
        blocks = jnp.asarray(plan.blocks.astype(np.int8))  # Triton loads no i1 tensors
        in_specs.append(whole(blocks))
        operands.append(blocks)

    kernel = functools.partial(
        _kernel, mask=None if isinstance(mask, tuple) else mask, source=plan.mask_source, L=L,
        block_q=block_q, block_kv=block_kv, bqc=bqc, bkc=bkc, per_head=plan.plan_heads > 1,
        sm_scale=sm_scale)
    out = pl.pallas_call(
        kernel,
        grid=(Lq // bqc, heads),  # q rows vary fastest: programs running together share one head's K, V in L2
        in_specs=in_specs,
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct((heads, Lq, d), q.dtype),
        compiler_params=pltriton.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
        name="block_sparse_attention_gpu",
    )(*operands)
    return out[:, :L]


def gpu_block_sparse_attention(q, k, v, mask, *, block_q: int | None = None, block_kv: int | None = None,
                               fast_path: bool = True, config: KernelConfig | None = None,
                               gpu_block_q: int | None = None, gpu_block_kv: int | None = None,
                               num_warps: int | None = None, num_stages: int = 2, interpret=None,
                               sm_scale: float | None = None):
    """Masked attention over the non-empty tiles on a GPU; inputs, masks, tiles (``config`` or
    ``block_q`` / ``block_kv`` / ``fast_path``) and conventions as
    :func:`~svgtpu.kernels.block_sparse_attention` (zeros for rows without keys).

    The plan tile is ``config``'s (its ``block_kv_compute``, a TPU VMEM setting, is not used);
    ``gpu_block_q`` (default: the largest of 16..128 dividing ``block_q``) and ``gpu_block_kv``
    (default: the largest of 16..64 dividing ``block_kv``) are the Triton program tile, powers of
    two in 16..128 dividing the plan tile.  ``num_warps`` (default 8 for ``d = 128``, 4 for
    ``d = 64``) and ``num_stages`` are Triton's launch settings.  ``interpret=None``: compiled on a
    GPU backend, Pallas' interpreter anywhere else.
    """
    config = resolve_config(config, block_q, block_kv, None, fast_path)
    masks = check_inputs(q, k, v, mask)
    scale = check_sm_scale(sm_scale, q.shape[-1])
    bqc = check_program_tile("gpu_block_q", gpu_block_q, config.block_q)
    bkc = check_program_tile("gpu_block_kv", gpu_block_kv, config.block_kv)
    warps = (8 if q.shape[-1] >= 128 else 4) if num_warps is None else num_warps
    if warps not in (1, 2, 4, 8, 16):
        raise BadInput(f"num_warps must be one of 1, 2, 4, 8, 16 (Triton), got {num_warps!r}")
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
        raise BadInput(f"num_stages must be a positive integer (Triton software pipelining), got {num_stages!r}")
    if interpret is None:
        interpret = jax.default_backend() != "gpu"
    return _gpu_block_sparse(q, k, v, mask=masks, block_q=config.block_q, block_kv=config.block_kv, bqc=bqc,
                             bkc=bkc, fast_path=config.fast_path, interpret=interpret, sm_scale=scale,
                             num_warps=warps, num_stages=num_stages)


__all__ = ["gpu_block_sparse_attention", "RowPlan", "row_plan", "row_plan_for", "check_program_tile", "default_program_tile",
           "PROGRAM_TILES"]
