"""Block-sparse flash attention as a Pallas TPU kernel: compressed tile traversal + mask-free fast path.

The grid is ``(heads, steps)``: step ``s`` of head ``h`` is one non-empty tile of the static mask,
read from the scalar-prefetched :class:`~svgtpu.kernels.plan.TilePlan` (q tile, kv tile, kind,
first/last-in-row flags).  Empty tiles take no grid step at all, so they are never fetched or
computed.  Each step runs one of two bodies:

- **full** tiles (fast path): ``QK^T``, online softmax, ``PV``; no mask fetch, no masking ops;
- **partial** tiles: the same plus the element-wise mask, built from iotas (band + sink masks,
  padded keys; a band wider than the tile costs one compare and one select per score,
  :class:`BandTile`), added as a precomputed bias (band + sink masks in the key-major layout: one
  add per score, :mod:`svgtpu.kernels.band_table`) or read from a compacted mask block (arbitrary
  masks).

``fast_path=False`` keeps the traversal but sends every tile through the masked body: the ablation.
``fixed_max=True`` adds a fixed-maximum full and partial body (:func:`tile_update_fixed`,
:func:`softmax_update_key_major_fixed`: each query's shift set once by the pass of
:mod:`svgtpu.kernels.fixed_max`, no running maximum, no rescale), run by the q tiles the pass proves safe
(a flag per head and q tile in scalar prefetch, the shifts a ``[1, block_q]`` block per q row); the other
tiles run the running-maximum bodies (``docs/fixed_max.md``).
Softmax statistics and the accumulator live in float32 VMEM scratch; bf16 inputs feed the MXU in
bf16.

Two layouts of a tile's scores (``KernelConfig.layout``; key-major wherever ``block_q`` is a multiple
of 128, :func:`~svgtpu.kernels.config.default_layout`):

- **query-major** (:func:`tile_update`): scores ``q k^T`` ``[block_q, bkc]``, ``acc += p v``
  ``[block_q, d]``, the row statistics ``m``, ``l`` replicated over 128 lanes ``[block_q, 128]``.
  At ``d = 128`` both matmuls half-fill the 256-wide MXU: ``q k^T`` contracts over 128, ``p v``
  has 128 output columns.
- **key-major** (:func:`tile_update_key_major`): scores ``k q^T`` ``[bkc, block_q]`` (K the left
  operand), ``acc += v^T p`` ``[d, block_q]``.  The PV product's output width is now the query
  block, not ``d``, so it fills the MXU: 25 % fewer pushes per tile at ``d = 128`` (the QK product
  still contracts over 128 of 256: the full-fill ceiling is 2/3).  The per-query statistics are
  compact ``[8, block_q]`` rows (one vreg per 128 queries): the maximum over keys runs down the
  sublanes, element-wise across vregs, instead of a cross-lane reduction per row, and the rescale is
  one exponential per 128 queries instead of one per query row and lane; the sum over keys comes out
  of the PV matmul itself (a block of ones under ``v^T``).  The tile runs as updates of 256 queries
  x ``bkc`` keys, every chunk unrolled, the scores issued ahead of the softmax they feed (the MXU
  works in program order: see ``run_key_major`` in :func:`_kernel` for the static bundles of each
  step of that design).  The accumulator is transposed back to ``[block_q, d]`` once per q row, when
  the output block is written.  ``block_q`` is the lane dimension of the scores, statistics and
  accumulator there, so a multiple of 128 (Mosaic's block-shape rule, :mod:`svgtpu.kernels.config`).

Both layouts exponentiate with ``exp2``, ``log2(e)`` folded into the float32 score scale.  A query row with no allowed key gets output **zeros** (its running maximum never rose above
the masked score, :data:`MASK_VALUE`).

The traversal is the flat, ragged one (not a rectangular grid padded to the longest q row): the
output block index changes exactly when the q row does, so each output tile is written back once.
Only per-head masks pay no-op steps (padding to the longest head, see ``TilePlan.wasted_steps``).
The plan lives in SMEM, one packed int32 word per step and plan head (two with mask blocks); a plan
longer than the device's SMEM budget (:mod:`svgtpu.kernels.budget`) runs as one ``pallas_call``
per q-row chunk.  ``vmem_limit_bytes`` is set from the VMEM budget.

Precision: scores are scaled by ``sm_scale`` in float32 inside the tile update (scaling bf16 ``q``
first would round it), or, key-major with bf16 inputs (``KernelConfig.scale_in_qk``, the default there),
inside the ``QK`` product: ``q * sm_scale * log2(e)`` split into bf16 ``hi + lo`` once per q row
(:func:`scaled_queries`), the keys repeated (:func:`folded_scores`), no multiply per score; a base-2 score
then moves at most ``2^-16 sum_i |k_i q_i| sm_scale log2(e)`` off the float32 multiply's
(``docs/compiled_schedule.md``).  float32 inputs ask the MXU for ``Precision.HIGHEST``: on TPU the default
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

from svgtpu.kernels.band_table import BandTable, band_table
from svgtpu.kernels.budget import check_vmem, device_memory
from svgtpu.kernels.common import (check_inputs, check_sm_scale, pad_qkv, resolve_config, resolve_device,
                                   resolve_interpret)
from svgtpu.kernels.config import LANES, SUBLANES, KernelConfig
from svgtpu.kernels.fixed_max import fixed_maxima
from svgtpu.kernels.plan import FIRST, KIND_SHIFT, KV_SHIFT, LAST, PlanChunk, TilePlan, tile_plan
from svgtpu.masks.core import BandSinkMask, Mask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL

LOG2E = math.log2(math.e)
#: The score of a masked pair: finite (a row maximum is never ``-inf``), far below any real score, and
#: ``MASK_VALUE - m`` stays finite for every real ``m`` (see :func:`tile_update`).
MASK_VALUE = -0.5 * float(jnp.finfo(jnp.float32).max)
#: Queries per strip of the key-major body: the MXU's width, so each strip's matmuls fill it (a
#: multiple of 128; a tile's last strip may be narrower).
STRIP = 256
#: Updates whose scores ``k q^T`` the key-major body issues ahead of the softmax they feed (module doc),
#: and in a body that computes its mask from iotas (its key and query operands hold registers: with
#: more scores in flight it spills); the measurements are in ``run_key_major`` (:func:`_kernel`).
#: A body that adds a :class:`~svgtpu.kernels.band_table.BandTable` pattern to its scores holds no mask
#: operands but loads a bias vreg per score vreg: 6 ahead.  Each was picked on the compiled v6e bodies at the
#: production tile (the bundles of each lookahead tried are in this file's commit messages).
LOOKAHEAD = 7
LOOKAHEAD_IOTA_MASK = 3
LOOKAHEAD_TABLE_MASK = 6
NT_DIMS = (((1,), (1,)), ((), ()))  # q @ k.T
NN_DIMS = (((1,), (0,)), ((), ()))  # p @ v
TN_DIMS = (((0,), (0,)), ((), ()))  # a.T @ b


def tile_update(q, k, v, m_prev, l_prev, acc_prev, mask=None, sm_scale=1.0):
    """One online-softmax step on a ``[bq, d] x [bkv, d]`` tile; ``mask`` (bool) only for partial tiles.
    The production kernels' one update: the TPU kernel's query-major body and the GPU kernel
    (:mod:`svgtpu.kernels.gpu`) both run it; the key-major body is its transpose
    (:func:`tile_update_key_major`).

    The float32 scores are multiplied by ``sm_scale * log2(e)`` and exponentiated with ``exp2``: the
    same softmax, in base 2 (``exp`` lowers to a multiply by ``log2(e)`` per score and ``exp2``; folded
    into the scale, that multiply is gone).  ``m`` is therefore the running row maximum in base-2
    units; float32 operands use ``Precision.HIGHEST``.

    ``m`` and ``l`` are float32 ``[bq, 128]`` (lane-replicated: one vreg per 8 rows, the TPU body's
    layout) or ``[bq, 1]`` (one register per row, Triton's); ``acc`` is ``[bq, d]`` float32.  Masked
    scores become :data:`MASK_VALUE`, finite, so no row maximum is ever ``-inf`` and no guard is needed
    (two ops per row and update less than a ``-inf`` mask).  A row that has seen only masked keys so
    far has ``m = MASK_VALUE`` and collects junk in ``l`` and ``acc``; its first allowed key multiplies
    the junk by ``alpha = exp2(MASK_VALUE - m) = 0``, and a row that never sees one is written as zeros
    (``m <= MASK_VALUE`` at the finish).  Returns ``(m, l, acc)``.
    """
    (bq, d), (bkv, _) = q.shape, k.shape
    assert k.shape == v.shape == (bkv, d) and m_prev.shape == l_prev.shape and m_prev.shape in ((bq, 1), (bq, LANES))
    assert acc_prev.shape == (bq, d) and (mask is None or mask.shape[-1] == bkv)
    precision = lax.Precision.HIGHEST if q.dtype == jnp.float32 else None
    s = lax.dot_general(q, k, NT_DIMS, preferred_element_type=jnp.float32, precision=precision)
    s = s * (sm_scale * LOG2E)
    if mask is not None:
        s = jnp.where(mask, s, MASK_VALUE)
    m_next = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
    p = jnp.exp2(s - _across(m_next, bkv))
    alpha = jnp.exp2(m_prev - m_next)
    l_next = alpha * l_prev + p.sum(axis=-1, keepdims=True)
    pv = lax.dot_general(p.astype(v.dtype), v, NN_DIMS, preferred_element_type=jnp.float32, precision=precision)
    acc_next = _across(alpha, d) * acc_prev + pv
    return m_next, l_next, acc_next


def tile_update_fixed(q, k, v, m, l_prev, acc_prev, mask=None, sm_scale=1.0):
    """:func:`tile_update` with each row's shift ``m`` fixed before the first key
    (:mod:`svgtpu.kernels.fixed_max`): no maximum over the keys, no rescale of ``l`` and ``acc``.
    Returns ``(m, l, acc)``."""
    precision = lax.Precision.HIGHEST if q.dtype == jnp.float32 else None
    s = lax.dot_general(q, k, NT_DIMS, preferred_element_type=jnp.float32, precision=precision) * (sm_scale * LOG2E)
    if mask is not None:
        s = jnp.where(mask, s, MASK_VALUE)
    p = jnp.exp2(s - _across(m, k.shape[0]))
    pv = lax.dot_general(p.astype(v.dtype), v, NN_DIMS, preferred_element_type=jnp.float32, precision=precision)
    return m, l_prev + p.sum(axis=-1, keepdims=True), acc_prev + pv


def _across(stat, width: int):
    """A row statistic (``[rows, 1]`` or lane-replicated ``[rows, 128]``) to combine with ``[rows, width]``:
    broadcasting spreads a column; lane-replicated vregs are repeated (and cut to ``width`` when under 128)."""
    if stat.shape[1] == 1:
        return stat
    return jnp.tile(stat, (1, -(-width // LANES)))[:, :width]


def tile_update_key_major(q, k, v, m_prev, l_prev, acc_prev, mask=None, sm_scale=1.0):
    """:func:`tile_update` key-major: scores ``s = k q^T`` of shape ``[bkv, bq]``, ``acc = v^T p``.

    ``m`` and ``l`` are ``[8, bq]`` float32 (eight equal rows: one vreg per 128 queries), ``acc`` is
    ``[d, bq]`` float32.  The maximum over keys runs down the sublanes: element-wise across vregs plus
    one short in-vreg reduction per 128 queries; the sum over keys comes out of the PV matmul
    (:func:`softmax_update_key_major`); the rescale ``alpha`` is one exponential per 128 queries.  ``v^T p`` has output width ``bq`` (a multiple of 128: the production tile's ``block_q``),
    so the PV matmul fills the MXU's 256 columns where ``p v`` fills ``d = 128`` of them.  Scale,
    base 2 and masked scores as in :func:`tile_update`.  Returns ``(m, l, acc)``."""
    return softmax_update_key_major(key_major_scores(q, k, mask, sm_scale), values_with_ones(v), m_prev, l_prev,
                                    acc_prev)


def key_major_scores(q, k, mask=None, sm_scale=1.0, bias=None):
    """The first half of :func:`tile_update_key_major`: float32 scores ``k q^T * sm_scale * log2(e)``,
    ``[bkv, bq]``, masked ones set to :data:`MASK_VALUE` (by ``mask``, or by adding ``bias``: a
    :class:`~svgtpu.kernels.band_table.BandTable` pattern, 0 or :data:`MASK_VALUE`).  (Folding the
    scale into bf16 ``q`` alone would save the multiply per score but rounds ``q``: 0.096 relative
    error where the bf16 bound is 0.02 on the large logits of ``test_bf16_scores_are_scaled_in_float32``;
    :func:`scaled_queries` folds it without that rounding.)"""
    precision = lax.Precision.HIGHEST if q.dtype == jnp.float32 else None
    s = lax.dot_general(k, q, NT_DIMS, preferred_element_type=jnp.float32, precision=precision)
    s = s * (sm_scale * LOG2E)
    if bias is not None:
        s = s + bias
    return s if mask is None else jnp.where(mask, s, MASK_VALUE)


def scaled_queries(q, scale: float):
    """``[hi; lo]``, ``[2 d, bq]`` bf16: bf16 ``q`` ``[bq, d]`` times ``scale`` in float32, split into
    ``hi = bf16(x)`` and ``lo = bf16(x - hi)`` and transposed (the MXU's latched operand of
    :func:`folded_scores`, built once per q row).  ``hi + lo`` is ``x`` within ``2^-16 |x|``
    (``docs/compiled_schedule.md``, "The scale in the QK product")."""
    x = q.astype(jnp.float32) * scale
    hi = x.astype(jnp.bfloat16)
    lo = (x - hi.astype(jnp.float32)).astype(jnp.bfloat16)
    return jnp.concatenate([hi, lo], axis=1).T


def folded_scores(qs, k, mask=None, bias=None):
    """:func:`key_major_scores` with the scale in the product: ``[k | k] [hi; lo]`` (``qs`` from
    :func:`scaled_queries`), a 256-deep contraction at ``d = 128`` in the pushes of the 128-deep one,
    float32 accumulation; no multiply per score."""
    s = lax.dot_general(jnp.concatenate([k, k], axis=1), qs, NN_DIMS, preferred_element_type=jnp.float32)
    if bias is not None:
        s = s + bias
    return s if mask is None else jnp.where(mask, s, MASK_VALUE)


def values_with_ones(v):
    """``[v^T; 1]``, ``[d + 16, bkv]``: ``v`` ``[bkv, d]`` transposed, 16 rows of ones under it (one
    packed bf16 vreg high)."""
    return jnp.concatenate([v.T, jnp.ones((16, v.shape[0]), v.dtype)], axis=0)


def softmax_update_key_major(s, vt, m_prev, l_prev, acc_prev):
    """The second half of :func:`tile_update_key_major`: the online-softmax step on base-2 scores ``s``
    ``[bkv, bq]`` with ``vt`` = :func:`values_with_ones` of the chunk's values.  One matmul gives both
    ``v^T p`` (rows ``:d``) and the sums of ``p`` over keys (the ones rows): ``l`` costs one more MXU
    push per 256 queries (9 instead of 8 at d = 128) instead of a vector add per score vreg, and it
    sums the very bf16 ``p`` the numerator uses."""
    (bkv, bq), d = s.shape, acc_prev.shape[0]
    assert vt.shape == (d + 16, bkv) and m_prev.shape == l_prev.shape == (SUBLANES, bq) and acc_prev.shape == (d, bq)
    precision = lax.Precision.HIGHEST if vt.dtype == jnp.float32 else None
    m_next = jnp.maximum(m_prev, max_over_keys(s))
    p = jnp.exp2(s - m_next[:1])
    alpha = jnp.exp2(m_prev - m_next)
    pv = lax.dot_general(vt, p.astype(vt.dtype), NN_DIMS, preferred_element_type=jnp.float32, precision=precision)
    return m_next, alpha * l_prev + pv[d:d + SUBLANES], alpha[:1] * acc_prev + pv[:d]


def softmax_update_key_major_fixed(s, vt, m, l_prev, acc_prev):
    """:func:`softmax_update_key_major` with the shift ``m`` (``[1, bq]``) fixed
    (:mod:`svgtpu.kernels.fixed_max`): no maximum over the keys, no rescale.  Returns ``(l, acc)``."""
    d = acc_prev.shape[0]
    precision = lax.Precision.HIGHEST if vt.dtype == jnp.float32 else None
    p = jnp.exp2(s - m)
    pv = lax.dot_general(vt, p.astype(vt.dtype), NN_DIMS, preferred_element_type=jnp.float32, precision=precision)
    return l_prev + pv[d:d + SUBLANES], acc_prev + pv[:d]


def max_over_keys(s):
    """``s.max(axis=0, keepdims=True)`` of key-major scores ``[bkv, bq]``, as a tree: the element-wise
    maximum of the two halves, halved again down to one vreg row (8 sublanes), then the maximum within
    it.  The same ``bkv / 8 - 1`` element-wise maxima per 128 queries as a chain, but ``log2(bkv / 8)``
    deep instead of ``bkv / 8 - 1``: the exponentials, and the ``v^T p`` push behind them, wait on it."""
    while s.shape[0] > SUBLANES and s.shape[0] % (2 * SUBLANES) == 0:
        half = s.shape[0] // 2
        s = jnp.maximum(s[:half], s[half:])
    return s.max(axis=0, keepdims=True)


#: A key id outside every band (padded keys; its negation is inside every one-edge band: sink keys).
FAR = 2 ** 30


class BandTile:
    """How one tile tests a band + sink mask (:class:`~svgtpu.masks.core.BandSinkMask`), split so
    that the work per score is one or two vector ops: :meth:`keys` once per key (per kv chunk),
    :meth:`queries` once per query (per strip), :meth:`allowed` per score.

    - **one edge** (:func:`one_edge`: no tile of this size crosses both edges of the band, e.g. the
      SVG band, far wider than a tile): the scalar unit picks the edge the tile can cross
      (:attr:`side` ``+1``: ``k - q <= W``, ``-1``: ``q - k <= W``) and a score's test is the one
      compare ``side k <= side q + W``; padded keys go to ``FAR``, sink keys to ``-FAR``;
    - **both edges**: ``|q - k| <= W`` as the unsigned compare ``q + W - k <= 2W`` (a subtraction
      and a compare per score); padded keys go to ``FAR``; when the band is wider than the tile's
      rows (``2W >= rows + 2``) the sink keys move onto the tile's middle row, inside every row's
      band, else the sink is or'ed in per score.

    ``q0``, ``k0``: the tile's first query and key (traced scalars); ``rows`` x ``cols`` its size;
    keys ``>= L`` are disallowed when ``pad``.  (The key-major body adds a
    :class:`~svgtpu.kernels.band_table.BandTable` pattern instead wherever one fits.)
    """

    def __init__(self, mask: BandSinkMask, q0, rows: int, k0, cols: int, L: int, pad: bool):
        self.mask, self.L, self.pad = mask, L, pad
        self.side = jnp.where(crosses_upper_edge(mask, q0, k0, cols), 1, -1) if one_edge(mask, rows, cols) else None
        fold = self.side is None and mask.sink > 0 and 2 * mask.window >= rows + 2
        self.mid = q0 + rows // 2 if fold else None
        self.sink_per_score = self.side is None and mask.sink > 0 and not fold

    def keys(self, k_ids):
        """The key operand of :meth:`allowed` for the key ids ``k_ids``."""
        keys = k_ids if self.side is None else self.side * k_ids
        if self.pad:
            keys = jnp.where(k_ids < self.L, keys, jnp.int32(FAR))
        if self.mask.sink > 0 and not self.sink_per_score:
            keys = jnp.where(k_ids < self.mask.sink, jnp.int32(-FAR) if self.mid is None else self.mid, keys)
        return keys, (k_ids < self.mask.sink) if self.sink_per_score else None

    def queries(self, q_ids):
        """The query operand of :meth:`allowed` for the query ids ``q_ids``."""
        return (q_ids if self.side is None else self.side * q_ids) + self.mask.window

    def allowed(self, keys, queries):
        """``mask.allowed`` of every query of ``queries`` and key of ``keys`` (:meth:`queries`,
        :meth:`keys`; a row and a column, broadcast by the compare)."""
        keys, sink = keys
        if self.side is not None:
            return keys <= queries
        band = (queries - keys).astype(jnp.uint32) <= jnp.uint32(2 * self.mask.window)
        return band | sink if sink is not None else band


def one_edge(mask: BandSinkMask, rows: int, cols: int) -> bool:
    """Whether no ``rows x cols`` tile crosses both edges of ``mask``'s band: a tile's offsets
    ``k - q`` span ``rows + cols - 2``, so with ``rows + cols <= 2W + 3`` a tile with ``k - q > W``
    somewhere has ``k - q >= -W`` everywhere, and the other way round."""
    return rows + cols <= 2 * mask.window + 3


def crosses_upper_edge(mask: BandSinkMask, q0, k0, cols: int):
    """Whether a one-edge tile (:func:`one_edge`) with first query ``q0`` and keys ``k0 .. k0 + cols``
    can cross the band's upper edge ``k - q <= W`` (else only the lower one): its largest offset is past it."""
    return k0 + (cols - 1) - q0 > mask.window


def _decode(word, kv_bits: int):
    """``(q_tile, kv_tile, kind, flags)`` of a packed plan word (layout in :mod:`svgtpu.kernels.plan`)."""
    return (word >> (KV_SHIFT + kv_bits), (word >> KV_SHIFT) & ((1 << kv_bits) - 1),
            (word >> KIND_SHIFT) & 3, word & 3)


def _kernel(words_ref, *refs, mask: Mask | None, source: str, L: int, row0: int, kv_bits: int, steps: int,
            config: KernelConfig, sm_scale: float, per_head: bool, band: BandTable | None = None, q_tiles: int = 0,
            scale_in_qk: bool = False):
    block_q, block_kv, block_kv_compute = config.block_q, config.block_kv, config.block_kv_compute
    key_major = config.layout == "key-major"
    mask_ref = ql_ref = kl_ref = table_ref = bias_ref = ok_ref = fixed_m_ref = qs_ref = None
    if scale_in_qk:  # the scaled queries' scratch (scaled_queries), after the statistics and accumulator
        qs_ref, refs = refs[-1], refs[:-1]
    if config.fixed_max:  # the fixed-maximum pass's tile flags (last scalar prefetch) and shifts (last input)
        ok_index = 1 if source == "blocks" else 0
        ok_ref = refs[ok_index]
        fixed_m_ref = refs[-5]
        refs = refs[:ok_index] + refs[ok_index + 1:-5] + refs[-4:]
    if source == "blocks":
        _, q_ref, k_ref, v_ref, mask_ref, o_ref, m_ref, l_ref, acc_ref = refs
    elif source == "clusters":
        q_ref, k_ref, v_ref, ql_ref, kl_ref, table_ref, o_ref, m_ref, l_ref, acc_ref = refs
    elif band is not None:
        q_ref, k_ref, v_ref, bias_ref, o_ref, m_ref, l_ref, acc_ref = refs
    else:
        q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref = refs
    d = q_ref.shape[-1]
    assert q_ref.shape == o_ref.shape == (block_q, d), (q_ref.shape, o_ref.shape)
    assert k_ref.shape == v_ref.shape == (block_kv, d), (k_ref.shape, v_ref.shape)
    stats = (SUBLANES, block_q) if key_major else (block_q, LANES)
    assert m_ref.shape == l_ref.shape == stats and acc_ref.shape == ((d, block_q) if key_major else (block_q, d))
    assert mask_ref is None or mask_ref.shape == ((block_kv, block_q) if key_major else (block_q, block_kv))
    step = (pl.program_id(0) * steps if per_head else 0) + pl.program_id(1)
    q_tile, kv_tile, kind, flags = _decode(words_ref[step], kv_bits)
    # fixed: this q tile runs the fixed-maximum bodies (None: the kernel has none)
    fixed = ok_ref[pl.program_id(0) * q_tiles + row0 + q_tile] != 0 if config.fixed_max else None

    @pl.when((flags & FIRST) != 0)
    def _init():
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        if fixed is not None:
            @pl.when(fixed)
            def _fixed_init():
                m_ref[...] = jnp.broadcast_to(fixed_m_ref[...], m_ref.shape)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)
        if qs_ref is not None:
            qs_ref[...] = scaled_queries(q_ref[...], sm_scale * LOG2E)

    chunks = block_kv // block_kv_compute
    pad = bool(L % block_kv)
    # Keys of the last kv tile that are real (< L): a "padding" plan's partial tiles all sit there.
    tail = L - (-(-L // block_kv) - 1) * block_kv

    def tile_origin():
        """The tile's first query and key (traced scalars)."""
        return (q_tile + row0) * block_q, kv_tile * block_kv

    def chunk_masker(row_clusters):
        """``mask(lo, q_lo, width)``: the bool mask of the kv chunk at ``lo`` and the queries ``q_lo ..
        q_lo + width`` of the tile, oriented as the scores (ids a column and a row, broadcast by the
        comparisons).  One per body: what depends only on the keys is built once per chunk, what
        depends only on the queries once per strip (a band + sink mask: :class:`BandTile`)."""
        q0, k0 = tile_origin()
        band = BandTile(mask, q0, block_q, k0, block_kv, L, pad) if isinstance(mask, BandSinkMask) else None
        per_chunk, per_strip = {}, {}

        def key_ids(lo):
            shape, axis = ((block_kv_compute, 1), 0) if key_major else ((1, block_kv_compute), 1)
            return k0 + lo + lax.broadcasted_iota(jnp.int32, shape, axis)

        def query_ids(q_lo, width):
            shape, axis = ((1, width), 1) if key_major else ((width, 1), 0)
            return q0 + q_lo + lax.broadcasted_iota(jnp.int32, shape, axis)

        def once(cache, key, make):
            if key not in cache:
                cache[key] = make()
            return cache[key]

        def chunk_mask(lo, q_lo: int, width: int):
            cols = slice(q_lo, q_lo + width)
            if source == "blocks":
                return (mask_ref[pl.ds(lo, block_kv_compute), cols] if key_major
                        else mask_ref[:, pl.ds(lo, block_kv_compute)]) != 0
            if source == "clusters":  # onehot(key labels) against the kept clusters: counts 0 / 1, exact in bf16
                key_onehot = once(per_chunk, lo, lambda: (lax.broadcasted_iota(
                    jnp.int32, (table_ref.shape[1], block_kv_compute), 0)
                    == kl_ref[:, pl.ds(lo, block_kv_compute)]).astype(jnp.bfloat16))
                if key_major:  # [bkc, Ck] @ clusters^T [Ck, width]
                    return lax.dot_general(key_onehot, row_clusters[:, cols], TN_DIMS,
                                           preferred_element_type=jnp.float32) > 0
                return lax.dot_general(row_clusters, key_onehot, NN_DIMS, preferred_element_type=jnp.float32) > 0
            if source == "padding":
                return once(per_chunk, lo, lambda: key_ids(lo) < L)
            if band is not None:
                return band.allowed(once(per_chunk, lo, lambda: band.keys(key_ids(lo))),
                                    once(per_strip, (q_lo, width), lambda: band.queries(query_ids(q_lo, width))))
            k_ids = once(per_chunk, lo, lambda: key_ids(lo))
            allowed = mask.allowed(once(per_strip, (q_lo, width), lambda: query_ids(q_lo, width)), k_ids)
            return allowed & (k_ids < L) if pad else allowed
        return chunk_mask

    def kv_chunks(masked: bool):
        """``(lo, masked)`` of each kv chunk a body runs.  A padding plan's partial tiles are its last
        kv tile: only the chunk that straddles L needs the mask, chunks of padded keys alone are skipped."""
        out = []
        for c in range(chunks):
            lo = c * block_kv_compute
            if masked and source == "padding" and config.fast_path:
                if lo >= tail:
                    continue
                out.append((lo, lo + block_kv_compute > tail))
            else:
                out.append((lo, masked))
        return out

    def row_clusters_of(masked: bool):
        """The kept key clusters of each query (``clusters`` source): onehot(q labels) @ table,
        ``[bq, Ck]`` query-major, its transpose ``[Ck, bq]`` key-major."""
        if not (masked and source == "clusters"):
            return None
        query_onehot_t = (lax.broadcasted_iota(jnp.int32, (table_ref.shape[0], block_q), 0)
                          == ql_ref[...]).astype(jnp.bfloat16)
        product = ((table_ref[...], query_onehot_t) if key_major else (query_onehot_t, table_ref[...]))
        return lax.dot_general(*product, TN_DIMS, preferred_element_type=jnp.float32).astype(jnp.bfloat16)

    def run(masked: bool, fixed_body: bool = False):
        """Query-major: one pass over the kv chunks, each update on the whole ``[bq, bkc]`` score block.
        Every chunk is unrolled: a straight-line body is what the scheduler overlaps (one chunk's
        softmax with the next one's matmuls) and what the static schedule shows.  The full body carries
        the softmax state from chunk to chunk as values (read from its VMEM scratch once per tile,
        written back once): fewer static bundles for the full body; the masked body keeps it in the
        scratch, where carrying it made it spill more.  (A loop over the chunks, the state in the
        scratch, schedules worse than straight-line code.)  Each body's bundles are a record:
        ``figures/compiled_tiles.json`` (``svgtpu bench compiled``); the design steps' counts are in
        this file's commit messages.  ``fixed_body``: the fixed-maximum update (:func:`tile_update_fixed`)."""
        chunk_mask = chunk_masker(row_clusters_of(masked))
        update = tile_update_fixed if fixed_body else tile_update
        q = q_ref[...]  # read once per tile (read at every chunk, the full body took more bundles)
        state = None if masked else (m_ref[...], l_ref[...], acc_ref[...])
        for lo, chunk_masked in kv_chunks(masked):
            chunk = pl.ds(lo, block_kv_compute)
            mask_c = chunk_mask(lo, 0, block_q) if chunk_masked else None
            prev = state if state is not None else (m_ref[...], l_ref[...], acc_ref[...])
            new = update(q, k_ref[chunk, :], v_ref[chunk, :], *prev, mask_c, sm_scale)
            if state is not None:
                state = new
            else:
                m_ref[...], l_ref[...], acc_ref[...] = new
        if state is not None:
            m_ref[...], l_ref[...], acc_ref[...] = state

    def run_key_major(masked: bool, fixed_body: bool = False):
        """Key-major: the tile as updates of :data:`STRIP` queries x ``block_kv_compute`` keys, chunk
        by chunk, the strips of a chunk side by side (independent: each has its own columns of the
        statistics and accumulator scratch).  Straight-line code whose MXU work the compiler keeps in
        program order, so the scores of update ``i + LOOKAHEAD`` are issued before the softmax and
        ``v^T p`` of update ``i``: the MXU computes them while the vector units and the EUP work on
        update ``i``.  The design steps, each of which cut the full body's static v6e bundles: strips
        issued ahead (in order, each strip's ``v^T p`` waits on its own softmax), the sums of ``p`` on
        the MXU (:func:`softmax_update_key_major`), ``[v^T; 1]`` built once per chunk, the maximum over
        keys as a tree (:func:`max_over_keys`), and a lookahead short of spilling.  The SVG partial
        body's: :class:`BandTile` (one compare and a select, key operands once per chunk) in place of
        the band test per strip, then the band as a :class:`~svgtpu.kernels.band_table.BandTable` bias
        (one add and one load per score vreg, no mask operands in registers).  The bodies' bundles are
        a record, ``figures/compiled_tiles.json`` (``svgtpu bench compiled``; read with
        :func:`svgtpu.compiler.variants.compile_program`, bodies 0 and 1 of the schedule); each design
        step's counts are in this file's commit messages.  ``fixed_body``: the fixed-maximum update
        (:func:`softmax_update_key_major_fixed`; ``m`` is read, never written)."""
        chunk_mask = chunk_masker(row_clusters_of(masked))
        strips = [(q_lo, min(STRIP, block_q - q_lo)) for q_lo in range(0, block_q, STRIP)]
        items = [(lo, chunk_masked, q_lo, width) for lo, chunk_masked in kv_chunks(masked) for q_lo, width in strips]

        q0, k0 = tile_origin()
        upper = crosses_upper_edge(mask, q0, k0, block_kv) if band is not None else None

        def scores(item):
            lo, chunk_masked, q_lo, width = item
            mask_c = bias = None
            if chunk_masked and band is not None:
                bias = bias_ref[band.index(upper, k0 + lo, q0 + q_lo), :, pl.ds(0, width)]
            elif chunk_masked:
                mask_c = chunk_mask(lo, q_lo, width)
            if qs_ref is not None:
                return folded_scores(qs_ref[:, pl.ds(q_lo, width)], k_ref[pl.ds(lo, block_kv_compute), :], mask_c,
                                     bias)
            return key_major_scores(q_ref[pl.ds(q_lo, width), :], k_ref[pl.ds(lo, block_kv_compute), :], mask_c,
                                    sm_scale, bias)

        lookahead = LOOKAHEAD
        if masked and source == "iota":
            lookahead = LOOKAHEAD_IOTA_MASK if band is None else LOOKAHEAD_TABLE_MASK
        ahead = [scores(item) for item in items[:lookahead]]
        values = {}  # [v^T; 1] of the current chunk
        for i, (lo, _, q_lo, width) in enumerate(items):
            if i + lookahead < len(items):
                ahead.append(scores(items[i + lookahead]))
            if lo not in values:
                values = {lo: values_with_ones(v_ref[pl.ds(lo, block_kv_compute), :])}
            cols = pl.ds(q_lo, width)
            if fixed_body:
                l_ref[:, cols], acc_ref[:, cols] = softmax_update_key_major_fixed(
                    ahead.pop(0), values[lo], m_ref[:1, cols], l_ref[:, cols], acc_ref[:, cols])
            else:
                m_ref[:, cols], l_ref[:, cols], acc_ref[:, cols] = softmax_update_key_major(
                    ahead.pop(0), values[lo], m_ref[:, cols], l_ref[:, cols], acc_ref[:, cols])

    body = run_key_major if key_major else run
    # the bodies in this order: the running-maximum ones first (the schedule reader's bodies 0 and 1),
    # then the fixed-maximum ones (2 and 3), each taken by the q tiles the fixed-maximum pass proved safe
    whens = [(kind == FULL, False), (kind == PARTIAL, True)] if config.fast_path else [(kind != EMPTY, True)]
    for when, masked in whens:
        pl.when(when if fixed is None else when & jnp.logical_not(fixed))(functools.partial(body, masked))
    if fixed is not None:
        for when, masked in whens:
            pl.when(when & fixed)(functools.partial(body, masked, True))

    @pl.when((flags & LAST) != 0)
    def _finish():
        l = l_ref[...]
        live = m_ref[...] > MASK_VALUE
        if config.fixed_max:  # a fixed shift is never MASK_VALUE: a row with no allowed key has l = 0
            live = live & (l > 0)
        inv = jnp.where(live, 1.0 / l, 0.0)  # queries with no allowed key -> 0
        if key_major:  # [d, bq] -> [bq, d] once per q row
            o_ref[...] = (acc_ref[...] * inv[:1]).T.astype(o_ref.dtype)
        else:
            o_ref[...] = (acc_ref[...] * jnp.tile(inv, (1, -(-d // LANES)))[:, :d]).astype(o_ref.dtype)


def scales_in_qk(config: KernelConfig, dtype) -> bool:
    """Whether the kernel folds the scale into the ``QK`` product (``KernelConfig.scale_in_qk``): bf16
    inputs only (float32 ones keep the float32 multiply after their ``HIGHEST`` product)."""
    return config.scale_in_qk and jnp.dtype(dtype) == jnp.bfloat16


def run_plan_chunk(q, k, v, mask_operands, chunk: PlanChunk, *, source: str, L: int, kv_bits: int, per_head: bool,
                   mask, config: KernelConfig, interpret, sm_scale: float, vmem_limit: int,
                   band: BandTable | None = None, fixed=None):
    """One ``pallas_call`` over q tile rows ``[chunk.row0, chunk.row1)``: output ``[heads, rows * block_q, d]``.

    ``chunk.words`` may be a numpy plan (static masks) or a traced array (:mod:`svgtpu.kernels.dynamic`).
    ``mask_operands``: ``(blocks,)`` for ``blocks`` plans, ``(q_labels [H, nq, 1, block_q], k_labels
    [H, 1, Lk], table [H, Cq, Ck])`` for ``clusters`` (labels lane-dense: a ``[Lq, 1]`` column would
    take 128 lanes per label in HBM), ``(table,)`` with ``band`` (the
    :class:`~svgtpu.kernels.band_table.BandTable` patterns: one VMEM copy, fetched once), else ``()``.
    ``fixed``: ``(m, tile_ok)`` of :func:`~svgtpu.kernels.fixed_max.fixed_maxima` with ``config.fixed_max``."""
    heads, _, d = q.shape
    bq, bkv = config.block_q, config.block_kv
    steps, row0 = chunk.steps, chunk.row0
    key_major = config.layout == "key-major"

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
    if source == "blocks":  # [n, bq, bkv] blocks; key-major reads them transposed, [n, bkv, bq]
        prefetch.append(chunk.block_index)
        in_specs.append(pl.BlockSpec(
            (None, bkv, bq) if key_major else (None, bq, bkv),
            lambda h, s, words_ref, index_ref, *_: (index_ref[flat(h, s)], 0, 0)))
        if key_major:
            mask_operands = (jnp.swapaxes(mask_operands[0], 1, 2),)
    elif source == "clusters":
        cq, ck = mask_operands[2].shape[1:]
        def query_labels_map(h, s, words_ref, *_):
            return h, row0 + _decode(word(h, s, words_ref), kv_bits)[0], 0, 0

        def key_labels_map(h, s, words_ref, *_):
            return h, 0, _decode(word(h, s, words_ref), kv_bits)[1]

        in_specs += [pl.BlockSpec((None, None, 1, bq), query_labels_map), pl.BlockSpec((None, 1, bkv), key_labels_map),
                     pl.BlockSpec((None, cq, ck), lambda h, *_: (h, 0, 0))]
    elif band is not None:
        in_specs.append(pl.BlockSpec(mask_operands[0].shape, lambda *_: (0, 0, 0), pipeline_mode=pl.Buffered(1)))
    operands += list(mask_operands)
    q_tiles = 0
    if config.fixed_max:  # the tile flags ride in scalar prefetch, each q tile's shifts as a block
        m, tile_ok = fixed
        q_tiles = tile_ok.shape[1]
        prefetch.append(tile_ok.reshape(-1))
        if key_major:
            in_specs.append(pl.BlockSpec((None, 1, bq), lambda h, s, words_ref, *_: (h, 0, row0 + _decode(
                word(h, s, words_ref), kv_bits)[0])))
            operands.append(m[:, None, :])
        else:
            in_specs.append(pl.BlockSpec((None, bq, 1), q_map))
            operands.append(m[:, :, None])
    stats = (SUBLANES, bq) if key_major else (bq, LANES)  # m and l: compact rows, or lane-replicated
    scratch = [pltpu.VMEM(stats, jnp.float32), pltpu.VMEM(stats, jnp.float32),
               pltpu.VMEM((d, bq) if key_major else (bq, d), jnp.float32)]
    scale_in_qk = scales_in_qk(config, q.dtype)
    if scale_in_qk:
        scratch.append(pltpu.VMEM((2 * d, bq), jnp.bfloat16))
    kernel = functools.partial(_kernel, mask=mask, source=source, L=L, row0=row0, kv_bits=kv_bits,
                               steps=steps, config=config, sm_scale=sm_scale, per_head=per_head, band=band,
                               q_tiles=q_tiles, scale_in_qk=scale_in_qk)
    return pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=len(prefetch),
            grid=(heads, steps),
            in_specs=in_specs,
            out_specs=pl.BlockSpec((None, bq, d), out_map),
            scratch_shapes=scratch),
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
    band = None
    if config.layout == "key-major" and plan.mask_source == "iota" and isinstance(mask, BandSinkMask) \
            and one_edge(mask, config.block_q, config.block_kv):
        band = band_table(mask, plan.L, config.block_q, config.block_kv_compute, STRIP)
    fixed = None
    if config.fixed_max:
        fixed = fixed_maxima(q, k, v, mask, sm_scale, config.block_q)
    # the fixed shifts' blocks (double-buffered; a query-major [block_q, 1] block takes 128 lanes)
    fixed_bytes = 2 * 4 * config.block_q * (SUBLANES if config.layout == "key-major" else LANES) \
        if config.fixed_max else 0
    vmem_limit = check_vmem(config, d, q.dtype.itemsize, plan.mask_source == "blocks", memory,
                            (band.nbytes if band is not None else 0) + fixed_bytes)
    q, k, v = pad_qkv(q, k, v, config.block_q, config.block_kv)
    mask_operands = (jnp.asarray(plan.blocks, jnp.int8),) if plan.mask_source == "blocks" else ()
    if band is not None:
        mask_operands = (band.build(MASK_VALUE),)
    outs = [run_plan_chunk(q, k, v, mask_operands, chunk, source=plan.mask_source, L=plan.L, kv_bits=plan.kv_bits,
                        per_head=plan.plan_heads > 1, mask=None if isinstance(mask, tuple) else mask,
                        config=config, interpret=interpret, sm_scale=sm_scale, vmem_limit=vmem_limit, band=band,
                        fixed=fixed)
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


__all__ = ["block_sparse_attention", "tile_update", "tile_update_fixed", "BandTile", "one_edge", "crosses_upper_edge"]
