"""Worked answers of ``notebooks/01_pallas_in_five_kernels``: five Pallas kernels a student writes.

The notebook gives each exercise as a skeleton, a check and a hidden answer; the answers live here so
the notebook imports them only when its parameter ``show_solutions`` is set, and so the tests can run
them.  Each kernel body is the part the student writes; the ``pallas_call`` around it is given in the
notebook.  Kept small on purpose: one head, float32 or bfloat16, no chunked plans (the package's
kernel, :mod:`svgtpu.kernels.block_sparse`, adds those).

1. :func:`stamp_kernel` — a copy over a grid, each block stamped with its grid index;
2. :func:`matmul_kernel` — a tiled matmul accumulating in float32 VMEM scratch;
3. :func:`online_softmax_update` — the flash-attention update of one tile, in plain JAX;
4. :func:`sparse_kernel` — attention over a scalar-prefetched, row-ordered tile plan (every tile masked);
5. :func:`fast_path_kernel` — the same with a mask-free branch for full tiles.

:func:`row_plan` and :func:`sparse_attention` (the plan and the scalar-prefetch grid around kernels 4 and
5) are given in notebook 01 and written by the student in ``notebooks/01b_block_sparse_by_hand``, whose
other answers live in :mod:`svgtpu.course.lessons_by_hand`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from svgtpu.kernels.plan import FIRST, LAST
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL

#: Splash Attention's finite mask value: ``jax/experimental/pallas/ops/tpu/splash_attention/
#: splash_attention_kernel.py`` (``DEFAULT_MASK_VALUE``, jax 0.10.2).  A masked score of this value
#: needs no ``-inf`` guard: ``exp(MASK_VALUE - m)`` is 0 once the row has seen any real score.
MASK_VALUE = -0.7 * float(np.finfo(np.float32).max)


# -- 1. copy ---------------------------------------------------------------------------------

def stamp_kernel(x_ref, o_ref):
    """Copy this step's block and add the step's grid index (so the check sees which step wrote it)."""
    o_ref[...] = x_ref[...] + pl.program_id(0).astype(x_ref.dtype)


def stamped_copy(x, block_rows: int, interpret: bool = True):
    """``x`` [rows, cols] block by block: grid step ``i`` reads row block ``i`` into VMEM and writes
    output row block ``i`` (:func:`stamp_kernel`)."""
    spec = pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(stamp_kernel, grid=(x.shape[0] // block_rows,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)


# -- 2. tiled matmul ---------------------------------------------------------------------------

def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    """Grid ``(i, j, k)``, k innermost: zero the float32 scratch at ``k == 0``, add one partial
    product per step, write the output block at the last ``k``.  The output block index ``(i, j)``
    repeats on consecutive steps, so it stays in VMEM and is written back once, when it changes."""
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _write():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


# -- 3. online softmax -------------------------------------------------------------------------

def online_softmax_update(s, v, m_prev, l_prev, acc_prev):
    """One tile of flash attention: scores ``s`` [bq, bkv] (float32, scaled), values ``v`` [bkv, d],
    running row max ``m`` and row sum ``l`` [bq, 1], unnormalized output ``acc`` [bq, d].

    The new maximum rescales what was summed so far by ``alpha = exp(m_prev - m_new)``; then this
    tile's ``p = exp(s - m_new)`` is added.  At the end, ``acc / l`` is the softmax-weighted sum.
    """
    m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
    alpha = jnp.exp(m_prev - m_new)
    p = jnp.exp(s - m_new)
    l_new = alpha * l_prev + p.sum(axis=-1, keepdims=True)
    acc_new = alpha * acc_prev + jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return m_new, l_new, acc_new


# -- 4. and 5. block-sparse attention over a plan -----------------------------------------------

@dataclasses.dataclass(frozen=True)
class Tiles:
    """What a sparse kernel body needs besides its refs: tile sizes, the real length ``L`` (keys at
    or past it are padding), the score scale and the mask rule ``allowed(q_ids, k_ids) -> bool``."""

    block_q: int
    block_kv: int
    L: int
    scale: float
    allowed: Callable


def tile_mask(tiles: Tiles, q_tile, kv_tile):
    """The bool mask of tile ``(q_tile, kv_tile)`` from iotas: the rule, and no padded key."""
    q_ids = q_tile * tiles.block_q + lax.broadcasted_iota(jnp.int32, (tiles.block_q, 1), 0)
    k_ids = kv_tile * tiles.block_kv + lax.broadcasted_iota(jnp.int32, (1, tiles.block_kv), 1)
    return tiles.allowed(q_ids, k_ids) & (k_ids < tiles.L)


def _scores(q_ref, k_ref, scale):
    return lax.dot_general(q_ref[...], k_ref[...], (((1,), (1,)), ((), ())),
                           preferred_element_type=jnp.float32) * scale


def _masked_update(tiles, q_tile, kv_tile, q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref):
    """A partial tile: masked scores take Splash's finite :data:`MASK_VALUE` (no ``-inf`` guard)."""
    s = jnp.where(tile_mask(tiles, q_tile, kv_tile), _scores(q_ref, k_ref, tiles.scale), MASK_VALUE)
    m_ref[...], l_ref[...], acc_ref[...] = online_softmax_update(s, v_ref[...], m_ref[...], l_ref[...],
                                                                 acc_ref[...])


def _open_and_close(kind, flags, m_ref, l_ref, acc_ref, o_ref, body):
    """FIRST: reset the row's state; then ``body``; LAST: normalize and write the output block.  A row
    whose only step is an ``EMPTY`` placeholder (no tile at all) writes zeros."""
    @pl.when((flags & FIRST) != 0)
    def _reset():
        m_ref[...] = jnp.full(m_ref.shape, MASK_VALUE, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    body()

    @pl.when((flags & LAST) != 0)
    def _write():
        # a row whose every score was masked: m stayed at MASK_VALUE; its output is zero
        seen = m_ref[...] > 0.5 * MASK_VALUE
        o_ref[...] = jnp.where(seen, acc_ref[...] / jnp.where(seen, l_ref[...], 1.0), 0.0).astype(o_ref.dtype)


def sparse_kernel(q_tile_ref, kv_tile_ref, kind_ref, flags_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref,
                  acc_ref, *, tiles: Tiles):
    """Step ``s`` of a row-ordered plan: every non-empty tile through the masked update."""
    s = pl.program_id(0)
    kind, flags = kind_ref[s], flags_ref[s]

    def body():
        @pl.when(kind != EMPTY)
        def _tile():
            _masked_update(tiles, q_tile_ref[s], kv_tile_ref[s], q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref)

    _open_and_close(kind, flags, m_ref, l_ref, acc_ref, o_ref, body)


def fast_path_kernel(q_tile_ref, kv_tile_ref, kind_ref, flags_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref,
                     acc_ref, *, tiles: Tiles):
    """:func:`sparse_kernel` with a mask-free branch: a full tile builds no mask at all."""
    s = pl.program_id(0)
    kind, flags = kind_ref[s], flags_ref[s]

    def body():
        @pl.when(kind == FULL)
        def _full():
            m_ref[...], l_ref[...], acc_ref[...] = online_softmax_update(
                _scores(q_ref, k_ref, tiles.scale), v_ref[...], m_ref[...], l_ref[...], acc_ref[...])

        @pl.when(kind == PARTIAL)
        def _partial():
            _masked_update(tiles, q_tile_ref[s], kv_tile_ref[s], q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref)

    _open_and_close(kind, flags, m_ref, l_ref, acc_ref, o_ref, body)


def sparse_attention(q, k, v, kernel, plan: dict, tiles: Tiles, interpret=True):
    """One head of block-sparse attention over a row-ordered ``plan`` (:func:`row_plan`): ``q``, ``k``,
    ``v`` [L, d] padded up to the tiles, the four plan arrays scalar-prefetched into SMEM, one grid step
    per plan step; the index maps read the step's q and kv tile from the plan.  ``kernel``:
    :func:`sparse_kernel` or :func:`fast_path_kernel` (or a student's)."""
    Lq, Lk = -(-q.shape[0] // tiles.block_q) * tiles.block_q, -(-k.shape[0] // tiles.block_kv) * tiles.block_kv
    q, k, v = (jnp.pad(x, ((0, n - x.shape[0]), (0, 0))) for x, n in ((q, Lq), (k, Lk), (v, Lk)))

    def q_map(s, q_tile, kv_tile, kind, flags):  # the prefetched plan arrays follow the grid index
        return q_tile[s], 0

    def kv_map(s, q_tile, kv_tile, kind, flags):
        return kv_tile[s], 0

    d = q.shape[1]
    out = pl.pallas_call(
        functools.partial(kernel, tiles=tiles),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=4, grid=(len(plan["q_tile"]),),
            in_specs=[pl.BlockSpec((tiles.block_q, d), q_map), pl.BlockSpec((tiles.block_kv, d), kv_map),
                      pl.BlockSpec((tiles.block_kv, d), kv_map)],
            out_specs=pl.BlockSpec((tiles.block_q, d), q_map),
            scratch_shapes=[pltpu.VMEM((tiles.block_q, 1), jnp.float32), pltpu.VMEM((tiles.block_q, 1), jnp.float32),
                            pltpu.VMEM((tiles.block_q, d), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        interpret=interpret,
    )(*(jnp.asarray(plan[key], jnp.int32) for key in ("q_tile", "kv_tile", "kind", "flags")), q, k, v)
    return out[:tiles.L]


def row_plan(kinds: np.ndarray) -> dict[str, np.ndarray]:
    """The row-ordered plan of a ``[q_tiles, kv_tiles]`` tile-kind map: every non-empty tile, q row by
    q row, with FIRST/LAST flags; a q row with no tile gets one ``EMPTY`` step flagged FIRST | LAST so
    its output block is still written (zeros).  int32 arrays ``q_tile``, ``kv_tile``, ``kind``, ``flags``."""
    steps = []
    for row in range(kinds.shape[0]):
        cols = np.flatnonzero(kinds[row] != EMPTY)
        if cols.size == 0:
            steps.append((row, 0, EMPTY, FIRST | LAST))
        for n, col in enumerate(cols):
            steps.append((row, col, kinds[row, col], FIRST * (n == 0) | LAST * (n == cols.size - 1)))
    columns = np.asarray(steps, np.int32).T
    return dict(zip(("q_tile", "kv_tile", "kind", "flags"), columns))


def tile_kinds(allowed: np.ndarray, block_q: int, block_kv: int) -> np.ndarray:
    """EMPTY / PARTIAL / FULL per tile of a bool ``[L, L]`` mask padded up to the tiles (padded keys
    and queries count as not allowed, so an edge tile is never full)."""
    L = allowed.shape[0]
    rows, cols = -(-L // block_q), -(-L // block_kv)
    padded = np.zeros((rows * block_q, cols * block_kv), bool)
    padded[:L, :L] = allowed
    counts = padded.reshape(rows, block_q, cols, block_kv).sum(axis=(1, 3))
    full = counts == block_q * block_kv
    return np.where(counts == 0, EMPTY, np.where(full, FULL, PARTIAL)).astype(np.int32)


__all__ = ["MASK_VALUE", "Tiles", "stamp_kernel", "stamped_copy", "matmul_kernel", "online_softmax_update",
           "tile_mask", "sparse_kernel", "fast_path_kernel", "sparse_attention", "row_plan", "tile_kinds"]
