"""Block-sparse flash attention as a Pallas TPU kernel: compressed tile traversal + mask-free fast path.

The grid is ``(heads, steps)``: step ``s`` of head ``h`` is one non-empty tile of the static mask,
read from the scalar-prefetched :class:`~svgtpu.kernels.plan.TilePlan` (q tile, kv tile, kind,
first/last-in-row flags).  Empty tiles take no grid step at all, so they are never fetched or
computed.  Each step runs one of two bodies:

- **full** tiles (fast path): ``QK^T``, online softmax, ``PV``; no mask fetch, no masking ops;
- **partial** tiles: the same plus the element-wise mask, built from iotas (band + sink masks,
  padded keys) or read from a compacted mask block (arbitrary masks).

``fast_path=False`` keeps the traversal but sends every tile through the masked body: the ablation.
Softmax statistics and the accumulator live in float32 VMEM scratch; bf16 inputs feed the MXU in
bf16.  A query row with no allowed key gets output **zeros** (its running maximum never rose above
the masked score, :data:`MASK_VALUE`).

The traversal is the flat, ragged one (not a rectangular grid padded to the longest q row): the
output block index changes exactly when the q row does, so each output tile is written back once.
Only per-head masks pay no-op steps (padding to the longest head, see ``TilePlan.wasted_steps``).
The plan lives in SMEM, one packed int32 word per step and plan head (two with mask blocks); a plan
longer than the device's SMEM budget (:mod:`svgtpu.kernels.budget`) runs as one ``pallas_call``
per q-row chunk.  ``vmem_limit_bytes`` is set from the VMEM budget.

Precision: scores are scaled by ``sm_scale`` in float32 inside the tile update (scaling bf16 ``q``
first would round it).  float32 inputs ask the MXU for ``Precision.HIGHEST``: on TPU the default
precision runs float32 matmuls as one bf16 pass, i.e. bf16 accuracy; HIGHEST emulates float32 with
several passes (the compiled v6e kernel holds many times the MXU instructions of the bf16 one:
``svgtpu.compiler.llo.compiled_tile_counts``).  bfloat16 inputs use bf16 products with float32
accumulation.  The tolerances the tests hold interpret mode to (1e-5 relative for float32 inputs,
2e-2 for bfloat16, against float64) are what a TPU should give too; no TPU has checked that yet.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from svgtpu.kernels.budget import check_vmem, device_memory
from svgtpu.kernels.common import (check_inputs, check_sm_scale, pad_qkv, resolve_config, resolve_device,
                                   resolve_interpret)
from svgtpu.kernels.config import LANES, KernelConfig  # softmax statistics are lane-replicated: [block_q, LANES]
from svgtpu.kernels.plan import FIRST, KIND_SHIFT, KV_SHIFT, LAST, PlanChunk, TilePlan, tile_plan
from svgtpu.masks.core import BandSinkMask, Mask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL

LOG2E = math.log2(math.e)
#: The score of a masked pair: finite (a row maximum is never ``-inf``), far below any real score, and
#: ``MASK_VALUE - m`` stays finite for every real ``m`` (see :func:`tile_update`).
MASK_VALUE = -0.5 * float(jnp.finfo(jnp.float32).max)
#: The most ``block_kv_compute`` chunks of a tile the kernel unrolls (see ``run`` in :func:`_kernel`).
MAX_UNROLL = 8
NT_DIMS = (((1,), (1,)), ((), ()))  # q @ k.T
NN_DIMS = (((1,), (0,)), ((), ()))  # p @ v
TN_DIMS = (((0,), (0,)), ((), ()))  # a.T @ b


def tile_update(q, k, v, m_prev, l_prev, acc_prev, mask=None, sm_scale=1.0):
    """One online-softmax step on a ``[bq, d] x [bkv, d]`` tile; ``mask`` (bool) only for partial tiles.

    The float32 scores are multiplied by ``sm_scale * log2(e)`` and exponentiated with ``exp2``: the
    same softmax, in base 2 (``exp`` lowers to a multiply by ``log2(e)`` per score and ``exp2``; folded
    into the scale, that multiply is gone).  ``m`` is therefore the running row maximum in base-2
    units; float32 operands use ``Precision.HIGHEST``.

    ``m`` and ``l`` are ``[bq, 128]`` lane-replicated float32, ``acc`` is ``[bq, d]`` float32.  Masked
    scores become :data:`MASK_VALUE`, finite, so no row maximum is ever ``-inf`` and no guard is needed
    (two ops per row and update less than a ``-inf`` mask).  A row that has seen only masked keys so
    far has ``m = MASK_VALUE`` and collects junk in ``l`` and ``acc``; its first allowed key multiplies
    the junk by ``alpha = exp2(MASK_VALUE - m) = 0``, and a row that never sees one is written as zeros
    (``m <= MASK_VALUE`` at the finish).  Returns ``(m, l, acc)``.
    """
    (bq, d), (bkv, _) = q.shape, k.shape
    assert k.shape == v.shape == (bkv, d) and m_prev.shape == l_prev.shape == (bq, LANES)
    assert acc_prev.shape == (bq, d) and (mask is None or mask.shape[-1] == bkv)
    precision = lax.Precision.HIGHEST if q.dtype == jnp.float32 else None
    s = lax.dot_general(q, k, NT_DIMS, preferred_element_type=jnp.float32, precision=precision)
    s = s * (sm_scale * LOG2E)
    if mask is not None:
        s = jnp.where(mask, s, MASK_VALUE)
    m_next = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
    p = jnp.exp2(s - jnp.tile(m_next, (1, bkv // LANES)))
    alpha = jnp.exp2(m_prev - m_next)
    l_next = alpha * l_prev + p.sum(axis=-1, keepdims=True)
    pv = lax.dot_general(p.astype(v.dtype), v, NN_DIMS, preferred_element_type=jnp.float32, precision=precision)
    acc_next = jnp.tile(alpha, (1, -(-d // LANES)))[:, :d] * acc_prev + pv
    return m_next, l_next, acc_next


def iota_mask(mask: Mask, q0, rows: int, k_ids, L: int, pad: bool):
    """``mask.allowed`` of query rows ``q0 .. q0 + rows`` (a column) and the key ids ``k_ids`` (a row),
    keys ``>= L`` disallowed when ``pad``.

    A band + sink mask takes a short form whose work per score vreg is one subtraction and one
    compare: the band ``|q - k| <= W`` is the unsigned compare ``q + W - k <= 2W``; padded keys are
    moved out of every band on the key row; and when the band is wider than the tile's rows
    (``2W >= rows + 2``) the sink keys are moved onto the tile's middle row, inside the band of every
    row, so the sink costs nothing per score either (else it is or'ed in).  On the 3024 x 2048 SVG
    partial tile: 24.2k -> 19.7k static v6e bundles with the finite mask value of :func:`tile_update`."""
    q_ids = q0 + lax.broadcasted_iota(jnp.int32, (rows, 1), 0)
    if not isinstance(mask, BandSinkMask):
        allowed = mask.allowed(q_ids, k_ids)
        return allowed & (k_ids < L) if pad else allowed
    sink = k_ids < mask.sink
    if pad:
        k_ids = jnp.where(k_ids < L, k_ids, jnp.int32(2 ** 30))  # outside every band and sink
    fold = mask.sink > 0 and 2 * mask.window >= rows + 2
    if fold:
        k_ids = jnp.where(sink, q0 + rows // 2, k_ids)
    band = ((q_ids + mask.window) - k_ids).astype(jnp.uint32) <= jnp.uint32(2 * mask.window)
    return band | sink if mask.sink > 0 and not fold else band


def _decode(word, kv_bits: int):
    """``(q_tile, kv_tile, kind, flags)`` of a packed plan word (layout in :mod:`svgtpu.kernels.plan`)."""
    return (word >> (KV_SHIFT + kv_bits), (word >> KV_SHIFT) & ((1 << kv_bits) - 1),
            (word >> KIND_SHIFT) & 3, word & 3)


def _kernel(words_ref, *refs, mask: Mask | None, source: str, L: int, row0: int, kv_bits: int, steps: int,
            config: KernelConfig, sm_scale: float, per_head: bool):
    block_q, block_kv, block_kv_compute = config.block_q, config.block_kv, config.block_kv_compute
    mask_ref = ql_ref = kl_ref = table_ref = None
    if source == "blocks":
        _, q_ref, k_ref, v_ref, mask_ref, o_ref, m_ref, l_ref, acc_ref = refs
    elif source == "clusters":
        q_ref, k_ref, v_ref, ql_ref, kl_ref, table_ref, o_ref, m_ref, l_ref, acc_ref = refs
    else:
        q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref = refs
    d = q_ref.shape[-1]
    assert q_ref.shape == o_ref.shape == acc_ref.shape == (block_q, d), (q_ref.shape, o_ref.shape)
    assert k_ref.shape == v_ref.shape == (block_kv, d), (k_ref.shape, v_ref.shape)
    assert m_ref.shape == l_ref.shape == (block_q, LANES)
    assert mask_ref is None or mask_ref.shape == (block_q, block_kv)
    step = (pl.program_id(0) * steps if per_head else 0) + pl.program_id(1)
    q_tile, kv_tile, kind, flags = _decode(words_ref[step], kv_bits)

    @pl.when((flags & FIRST) != 0)
    def _init():
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    chunks = block_kv // block_kv_compute
    # Keys of the last kv tile that are real (< L): a "padding" plan's partial tiles all sit there.
    tail = L - (-(-L // block_kv) - 1) * block_kv

    def chunk_mask(c, chunk, row_clusters):
        """bool mask of kv chunk ``c``; ids are a column and a row, broadcast by the comparisons."""
        if source == "blocks":
            return mask_ref[:, chunk] != 0
        if source == "clusters":  # [bq, Ck] @ onehot(key labels)^T [Ck, bkc]: counts 0 / 1, exact in bf16
            key_onehot = (lax.broadcasted_iota(jnp.int32, (table_ref.shape[1], block_kv_compute), 0)
                          == kl_ref[:, chunk]).astype(jnp.bfloat16)
            return lax.dot_general(row_clusters, key_onehot, NN_DIMS, preferred_element_type=jnp.float32) > 0
        k_ids = kv_tile * block_kv + c * block_kv_compute + lax.broadcasted_iota(jnp.int32, (1, block_kv_compute), 1)
        if source == "padding":
            return k_ids < L  # [1, bkc]
        return iota_mask(mask, (q_tile + row0) * block_q, block_q, k_ids, L, pad=bool(L % block_kv))

    def run(masked: bool):
        row_clusters = None
        if masked and source == "clusters":  # the kept key clusters of each row: onehot(q labels) @ table
            query_onehot_t = (lax.broadcasted_iota(jnp.int32, (table_ref.shape[0], block_q), 0) == ql_ref[...])
            row_clusters = lax.dot_general(query_onehot_t.astype(jnp.bfloat16), table_ref[...], TN_DIMS,
                                           preferred_element_type=jnp.float32).astype(jnp.bfloat16)

        q = q_ref[...]  # read once per tile (read at every chunk: 14.2k -> 15.1k bundles, full 3024 x 2048)

        def update(c, chunk, state, chunk_masked):
            """One chunk's update: of the carried ``state``, or (``state`` None) through the scratch."""
            k, v = k_ref[chunk, :], v_ref[chunk, :]
            mask_c = chunk_mask(c, chunk, row_clusters) if chunk_masked else None
            if state is not None:
                return tile_update(q, k, v, *state, mask_c, sm_scale)
            m_ref[...], l_ref[...], acc_ref[...] = tile_update(q, k, v, m_ref[...], l_ref[...], acc_ref[...],
                                                               mask_c, sm_scale)
            return None

        # The full body carries the softmax state from chunk to chunk as values (read from its VMEM
        # scratch once per tile, written back once); the masked body keeps it in the scratch (static
        # v6e bundles of the 3024 x 2048 tiles, svgtpu.compiler.units: full 15.2k -> 14.2k carried, while
        # carrying made the SVG-masked body spill more, 20.7k -> 22.5k).  Up to MAX_UNROLL chunks are
        # unrolled (the scheduler overlaps one chunk's softmax with the next one's matmuls); beyond that
        # a loop keeps code size and compile time from growing with block_kv / block_kv_compute, with
        # the state in the scratch (carried through a loop, it is copied in and out at every chunk).
        if chunks > MAX_UNROLL:
            lax.fori_loop(0, chunks, lambda c, _: update(
                c, pl.ds(pl.multiple_of(c * block_kv_compute, block_kv_compute), block_kv_compute), None, masked), None)
            return
        state = None if masked else (m_ref[...], l_ref[...], acc_ref[...])
        for c in range(chunks):
            lo, chunk_masked = c * block_kv_compute, masked
            if masked and source == "padding" and config.fast_path:
                # a padding plan's partial tiles are its last kv tile: only the chunk that straddles L
                # needs the mask, and chunks of padded keys alone are skipped
                if lo >= tail:
                    continue
                chunk_masked = lo + block_kv_compute > tail
            state = update(c, pl.ds(lo, block_kv_compute), state, chunk_masked)
        if state is not None:
            m_ref[...], l_ref[...], acc_ref[...] = state

    if config.fast_path:
        pl.when(kind == FULL)(lambda: run(masked=False))
        pl.when(kind == PARTIAL)(lambda: run(masked=True))
    else:
        pl.when(kind != EMPTY)(lambda: run(masked=True))

    @pl.when((flags & LAST) != 0)
    def _finish():
        l = l_ref[...]
        inv = jnp.where(m_ref[...] > MASK_VALUE, 1.0 / l, 0.0)  # rows with no allowed key -> 0
        o_ref[...] = (acc_ref[...] * jnp.tile(inv, (1, -(-d // LANES)))[:, :d]).astype(o_ref.dtype)


def run_plan_chunk(q, k, v, mask_operands, chunk: PlanChunk, *, source: str, L: int, kv_bits: int, per_head: bool,
                mask, config: KernelConfig, interpret, sm_scale: float, vmem_limit: int):
    """One ``pallas_call`` over q tile rows ``[chunk.row0, chunk.row1)``: output ``[heads, rows * block_q, d]``.

    ``chunk.words`` may be a numpy plan (static masks) or a traced array (:mod:`svgtpu.kernels.dynamic`).
    ``mask_operands``: ``(blocks,)`` for ``blocks`` plans, ``(q_labels [H, nq, 1, block_q], k_labels
    [H, 1, Lk], table [H, Cq, Ck])`` for ``clusters`` (labels lane-dense: a ``[Lq, 1]`` column would
    take 128 lanes per label in HBM), else ``()``."""
    heads, _, d = q.shape
    bq, bkv = config.block_q, config.block_kv
    steps, row0 = chunk.steps, chunk.row0

    def flat(h, s):  # index of grid step (h, s) in the head-major plan arrays
        return (h * steps if per_head else 0) + s

    def word(h, s, words_ref):
        return words_ref[flat(h, s)]

    def q_map(h, s, words_ref, *_):
        return h, row0 + _decode(word(h, s, words_ref), kv_bits)[0], 0

    def out_map(h, s, words_ref, *_):
        return h, _decode(word(h, s, words_ref), kv_bits)[0], 0

    def kv_map(h, s, words_ref, *_):
        return h, _decode(word(h, s, words_ref), kv_bits)[1], 0

    # The plan rides in scalar prefetch.  (The optimization barrier only matters in interpret mode:
    # it keeps XLA from constant-folding a uniform plan, e.g. all-full tiles, which would hoist
    # the tile body out of its conditional and copy all of q, k, v at every grid step.)
    prefetch = [chunk.words]
    in_specs = [pl.BlockSpec((None, bq, d), q_map), pl.BlockSpec((None, bkv, d), kv_map),
                pl.BlockSpec((None, bkv, d), kv_map)]
    operands = [q, k, v]
    if source == "blocks":
        prefetch.append(chunk.block_index)
        in_specs.append(pl.BlockSpec(
            (None, bq, bkv), lambda h, s, words_ref, index_ref: (index_ref[flat(h, s)], 0, 0)))
    elif source == "clusters":
        cq, ck = mask_operands[2].shape[1:]
        def query_labels_map(h, s, words_ref, *_):
            return h, row0 + _decode(word(h, s, words_ref), kv_bits)[0], 0, 0

        def key_labels_map(h, s, words_ref, *_):
            return h, 0, _decode(word(h, s, words_ref), kv_bits)[1]

        in_specs += [pl.BlockSpec((None, None, 1, bq), query_labels_map), pl.BlockSpec((None, 1, bkv), key_labels_map),
                     pl.BlockSpec((None, cq, ck), lambda h, *_: (h, 0, 0))]
    operands += list(mask_operands)
    kernel = functools.partial(_kernel, mask=mask, source=source, L=L, row0=row0, kv_bits=kv_bits,
                               steps=steps, config=config, sm_scale=sm_scale, per_head=per_head)
    return pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=len(prefetch),
            grid=(heads, steps),
            in_specs=in_specs,
            out_specs=pl.BlockSpec((None, bq, d), out_map),
            scratch_shapes=[pltpu.VMEM((bq, LANES), jnp.float32), pltpu.VMEM((bq, LANES), jnp.float32),
                            pltpu.VMEM((bq, d), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct((heads, (chunk.row1 - row0) * bq, d), q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"),
                                             vmem_limit_bytes=vmem_limit),
        interpret=interpret,
        name="block_sparse_attention",
    )(*lax.optimization_barrier(tuple(jnp.asarray(p) for p in prefetch)), *operands)


@functools.partial(jax.jit, static_argnames=("mask", "config", "device", "interpret", "sm_scale"))
def _block_sparse(q, k, v, *, mask, config: KernelConfig, device: str, interpret, sm_scale):
    heads, L, d = q.shape
    plan: TilePlan = tile_plan(mask, L, config.block_q, config.block_kv, config.fast_path)
    memory = device_memory(device)
    vmem_limit = check_vmem(config, d, q.dtype.itemsize, plan.mask_source == "blocks", memory)
    q, k, v = pad_qkv(q, k, v, config.block_q, config.block_kv)
    mask_operands = (jnp.asarray(plan.blocks, jnp.int8),) if plan.mask_source == "blocks" else ()
    outs = [run_plan_chunk(q, k, v, mask_operands, chunk, source=plan.mask_source, L=plan.L, kv_bits=plan.kv_bits,
                        per_head=plan.plan_heads > 1, mask=None if isinstance(mask, tuple) else mask,
                        config=config, interpret=interpret, sm_scale=sm_scale, vmem_limit=vmem_limit)
            for chunk in plan.chunks(memory.smem_budget)]
    out = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=1)
    return out[:, :L]


def block_sparse_attention(q, k, v, mask, *, block_q: int | None = None, block_kv: int | None = None,
                           block_kv_compute: int | None = None, fast_path: bool = True,
                           config: KernelConfig | None = None, device: str | None = None, interpret=None,
                           sm_scale: float | None = None):
    """Masked attention ``softmax(q k^T * sm_scale + mask) v`` over the non-empty tiles only.

    ``q, k, v``: ``[heads, L, d]``, float32 or bfloat16, ``d`` in (64, 128); ``L`` is padded up to
    the block sizes inside and sliced back.  ``mask``: an svgtpu mask (all heads) or a numpy bool
    ``[L, L]`` / ``[heads, L, L]`` array; it is static (hashable) and its tile plan is cached, so
    calling this inside ``jax.jit`` with the same mask and shapes compiles once.  Tiles: either
    ``config`` (a :class:`~svgtpu.kernels.config.KernelConfig`) or ``block_q``, ``block_kv``,
    ``block_kv_compute``, ``fast_path`` (validated by ``KernelConfig``: block_q a multiple of 8,
    block_kv a multiple of 128).  ``fast_path=False`` masks full tiles too (ablation).
    ``device`` (``v5e``, ``v5p``, ``v6e``, ``v7x``; default: the local TPU, else ``v6e``) sets the SMEM and
    VMEM budgets.  ``interpret=None``: compiled on TPU, else ``True``, Pallas' generic interpreter;
    pass ``pltpu.InterpretParams()`` for the TPU interpreter (simulated DMAs, race detection).
    ``sm_scale=None`` means ``1/sqrt(d)``.  Rows with no allowed key return zeros.  The GPU port
    with the same plan and semantics is :func:`svgtpu.kernels.gpu.gpu_block_sparse_attention`;
    :func:`svgtpu.kernels.api.block_sparse` picks one of the two for the backend.
    """
    config = resolve_config(config, block_q, block_kv, block_kv_compute, fast_path)
    masks = check_inputs(q, k, v, mask)
    scale = check_sm_scale(sm_scale, q.shape[-1])
    return _block_sparse(q, k, v, mask=masks, config=config, device=resolve_device(device),
                         interpret=resolve_interpret(interpret), sm_scale=scale)


__all__ = ["block_sparse_attention", "tile_update", "iota_mask"]
