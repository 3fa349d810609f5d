"""Worked answers of ``notebooks/01b_block_sparse_by_hand``: what the package's kernel does by hand.

Notebook 01 hands the student the plan, the grid and the copies; 01b has them write each (the notebook
gives the ``pallas_call`` around a kernel, the student writes the part named here).  The first exercise,
the row plan and the scalar-prefetch grid, has its answers in :mod:`svgtpu.course.lessons`
(:func:`~svgtpu.course.lessons.row_plan`, :func:`~svgtpu.course.lessons.sparse_attention`), where
notebook 01 imports them as given code.

7. :func:`chunked_flash_kernel` — flash attention whose kv tile is walked in ``block_kv_compute`` chunks by
   a ``lax.fori_loop`` inside the grid step, the softmax state in VMEM scratch;
8. :func:`double_buffered_matmul_kernel` — ``x @ w`` with ``x`` left in HBM (``pl.ANY``) and copied in by
   hand, two VMEM slots and two DMA semaphores, the next block's copy in flight while this one computes;
9. :func:`emit_pipeline_matmul_kernel` — the same pipeline written by ``pltpu.emit_pipeline``;
10. :func:`mha_flash_attention` — flash attention over heads, grid ``(heads, q blocks, kv blocks)`` with
    ``dimension_semantics`` that let a two-core chip split heads and q blocks, never kv blocks;
11. :func:`key_major_update` — the online-softmax update with scores key-major (``[block_kv, block_q]``) and
    the PV product as ``vᵀ·p`` (output ``[d, block_q]``): an output as wide as the query block fills the
    MXU's columns, where ``p·v`` (output width ``head_dim``) fills half of them at ``head_dim`` 128.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from svgtpu.course.lessons import online_softmax_update


# -- 7. the kv-chunk loop ------------------------------------------------------------------------

def chunked_flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale: float, block_kv_compute: int):
    """Grid ``(q blocks, kv blocks)``, kv innermost.  The step's kv tile (``block_kv`` keys in VMEM) is
    walked in chunks of ``block_kv_compute``: the score temporaries are ``[block_q, block_kv_compute]``,
    while the copies stay one per tile.  The state crosses chunks (and steps) in the scratch refs."""
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _reset():  # dense tiles: every chunk has a finite row max, so -inf is a safe start
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    q = q_ref[...]

    def chunk(c, carry):
        keys = pl.ds(pl.multiple_of(c * block_kv_compute, block_kv_compute), block_kv_compute)
        s = lax.dot_general(q, k_ref[keys, :], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        m_ref[...], l_ref[...], acc_ref[...] = online_softmax_update(s, v_ref[keys, :], m_ref[...], l_ref[...],
                                                                     acc_ref[...])
        return carry

    lax.fori_loop(0, k_ref.shape[0] // block_kv_compute, chunk, 0)

    @pl.when(j == pl.num_programs(1) - 1)
    def _write():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


# -- 8. a DMA pipeline by hand, then by emit_pipeline ---------------------------------------------

def double_buffered_matmul_kernel(x_hbm, w_ref, o_ref, slots, copied, *, block_rows: int):
    """``o = x @ w`` block by block: ``x_hbm`` stays in HBM; block ``i`` is copied into VMEM slot ``i % 2``
    with DMA semaphore ``copied[i % 2]``.  Before computing block ``i`` the kernel starts block ``i + 1``'s
    copy into the *other* slot, then waits for block ``i``'s: the copy runs while the MXU works."""
    n = x_hbm.shape[0] // block_rows

    def copy(i, slot):
        return pltpu.make_async_copy(x_hbm.at[pl.ds(i * block_rows, block_rows)], slots.at[slot], copied.at[slot])

    copy(0, 0).start()

    def step(i, carry):
        slot = i % 2

        @pl.when(i + 1 < n)
        def _prefetch():
            copy(i + 1, 1 - slot).start()

        copy(i, slot).wait()
        rows = pl.ds(pl.multiple_of(i * block_rows, block_rows), block_rows)
        o_ref[rows, :] = jnp.dot(slots[slot], w_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)
        return carry

    lax.fori_loop(0, n, step, 0)


def emit_pipeline_matmul_kernel(x_hbm, w_ref, o_hbm, *, block_rows: int):
    """The same product, ``x`` and ``o`` both in HBM: ``pltpu.emit_pipeline`` writes the double-buffered
    copies in and out; the body sees one block of each in VMEM."""
    def body(x_block, o_block):
        o_block[...] = jnp.dot(x_block[...], w_ref[...], preferred_element_type=jnp.float32).astype(o_block.dtype)

    pltpu.emit_pipeline(body, grid=(x_hbm.shape[0] // block_rows,),
                        in_specs=[pl.BlockSpec((block_rows, x_hbm.shape[1]), lambda i: (i, 0))],
                        out_specs=[pl.BlockSpec((block_rows, o_hbm.shape[1]), lambda i: (i, 0))])(x_hbm, o_hbm)


# -- 10. a heads axis and dimension_semantics --------------------------------------------------------

def mha_flash_attention(q, k, v, kernel, block_q: int = 128, block_kv: int = 128, interpret=True):
    """``q``, ``k``, ``v`` [heads, L, d]; ``kernel``: the notebook's flash kernel whose grid axis 2 is kv.  Grid ``(heads, L / block_q, L / block_kv)``; each block spec drops
    the head axis (``None``: the kernel sees ``[block, d]``).  Heads and q blocks are independent
    (``parallel``: a two-core chip may split them); kv blocks feed one running state (``arbitrary``)."""
    heads, L, d = q.shape
    q_spec = pl.BlockSpec((None, block_q, d), lambda h, i, j: (h, i, 0))
    kv_spec = pl.BlockSpec((None, block_kv, d), lambda h, i, j: (h, j, 0))
    return pl.pallas_call(
        functools.partial(kernel, scale=1 / d ** 0.5),
        grid=(heads, L // block_q, L // block_kv),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        scratch_shapes=[pltpu.VMEM((block_q, 1), jnp.float32), pltpu.VMEM((block_q, 1), jnp.float32),
                        pltpu.VMEM((block_q, d), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=interpret)(q, k, v)


# -- 11. the PV product key-major ----------------------------------------------------------------

def key_major_update(s, v, m_prev, l_prev, acc_prev):
    """:func:`~svgtpu.course.lessons.online_softmax_update` turned key-major: scores ``s`` [bkv, bq]
    (keys down, queries across), values ``v`` [bkv, d], per-query ``m`` and ``l`` [1, bq] (reduced over
    keys, axis 0), unnormalized output ``acc`` [d, bq].  The PV product is ``vᵀ·p``: it contracts the keys
    (axis 0 of both) and its output is as wide as the query block."""
    m_new = jnp.maximum(m_prev, s.max(axis=0, keepdims=True))
    alpha = jnp.exp(m_prev - m_new)
    p = jnp.exp(s - m_new)
    l_new = alpha * l_prev + p.sum(axis=0, keepdims=True)
    pv = lax.dot_general(v, p.astype(v.dtype), (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)
    return m_new, l_new, alpha * acc_prev + pv


__all__ = ["chunked_flash_kernel", "double_buffered_matmul_kernel", "emit_pipeline_matmul_kernel",
           "mha_flash_attention", "key_major_update"]
