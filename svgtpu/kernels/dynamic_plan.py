"""The tile plan as data: built with ``jax.numpy`` inside ``jit``, padded to a static length.

The static plan (:mod:`svgtpu.kernels.plan`) is computed with numpy from a hashable mask at trace
time, so every new mask compiles a new kernel.  A mask that is only known from data (SVG2's
clusters, decided per call) needs the same plan *traced*: :func:`traced_plan` turns per-head tile
kinds ``[H, nq, nkv]`` into the same packed words (:func:`~svgtpu.kernels.plan.pack_words`: flags,
kind, kv tile, q tile; a q row without any non-empty tile still gets one ``EMPTY`` ``FIRST | LAST``
step so its output is zeros), padded to a **static** number of steps per head with no-op steps
that repeat the last real step's tiles (nothing fetched).  One compile per shape, whatever the mask.

The padded length is the worst case ``nq * nkv`` (every tile non-empty) unless the caller bounds it
(:func:`plan_length`).  A plan that needs more steps than its bound cannot be cut short without a
wrong answer, so :func:`traced_plan` also returns the steps each head needed; the kernel entry
(:mod:`svgtpu.kernels.dynamic`) turns the output of an overflowing head into NaN.

:func:`block_table_kinds` gives the tile kinds of a *block-table* mask as data: contiguous row
blocks ``[q_edges[a], q_edges[a + 1])`` and key blocks, ``allowed = table[a, b]`` (SVG2's clusters in
permuted order, the traced counterpart of :class:`svgtpu.masks.families.BlockMask`).  The allowed
pairs of each tile are ``Oq @ table @ Ok^T`` with ``Oq[i, a]`` the rows of q tile ``i`` in block ``a``;
kinds follow :func:`svgtpu.masks.tiles.classify` and alignment follows :func:`svgtpu.masks.core.align`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from svgtpu.geometry import ceil_div
from svgtpu.kernels.plan import FIRST, LAST, check_packable, kv_bits_for, noop_word, pack_words
from svgtpu.masks.core import TILE_RULE_MODES
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.errors import BadInput

#: Alignment of a block-table mask in data: ``None`` (the exact mask) or a :func:`svgtpu.masks.core.align`
#: mode that judges each tile alone (whole tiles, kept by the same rule; the balanced modes rank tiles on the host).
TRACED_ALIGN = (None,) + TILE_RULE_MODES


def check_traced_align(align) -> None:
    """``align`` must be one of :data:`TRACED_ALIGN`."""
    if align not in TRACED_ALIGN:
        raise BadInput(f"align must be None or one of {', '.join(TILE_RULE_MODES)}, got {align!r}")


def plan_length(nq: int, nkv: int, max_steps: int | None = None) -> int:
    """Steps per head of a traced plan over an ``nq x nkv`` tile grid: ``max_steps``, validated, or the
    worst case ``nq * nkv``."""
    worst = nq * nkv
    if max_steps is None:
        return worst
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or not nq <= max_steps <= worst:
        raise BadInput(f"max_steps must be None (the worst case, {worst}) or an integer from {nq} (one step per "
                       f"q tile row) to {worst} (every tile of the {nq} x {nkv} grid), got {max_steps!r}")
    return int(max_steps)


def traced_plan(kinds, *, L: int, block_q: int, block_kv: int, steps: int):
    """``(words int32 [H * steps], needed int32 [H])`` for tile kinds ``int [H, nq, nkv]`` (jit-able).

    ``words`` is head-major, q tiles counted from row 0 of ``kinds``; ``needed[h]`` is the real steps of
    head ``h`` (its words beyond ``steps`` are dropped: see the module doc).
    """
    H, nq, nkv = kinds.shape
    check_packable(L, block_q, block_kv)
    kinds = kinds.astype(jnp.int32)
    nonempty = kinds != EMPTY
    row_has = nonempty.any(-1)                                     # [H, nq]
    first = jnp.argmax(nonempty, -1)                               # first non-empty kv tile of each row
    last = nkv - 1 - jnp.argmax(nonempty[..., ::-1], -1)           # last one
    # an empty row's step sits on the last kv tile of the nearest non-empty row above (0 if none)
    rows = jnp.arange(nq, dtype=jnp.int32)
    above = lax.cummax(jnp.where(row_has, rows, -1), axis=1)
    above = jnp.concatenate([jnp.full((H, 1), -1, jnp.int32), above[:, :-1]], axis=1)
    kv_above = jnp.where(above >= 0, jnp.take_along_axis(last, jnp.maximum(above, 0), axis=1), 0)

    j = jnp.arange(nkv, dtype=jnp.int32)
    placeholder = ~row_has[..., None] & (j == 0)                   # [H, nq, nkv]
    taken = nonempty | placeholder
    flags = jnp.where(placeholder, FIRST | LAST,
                      jnp.where(j == first[..., None], FIRST, 0) | jnp.where(j == last[..., None], LAST, 0))
    word = pack_words(jnp.broadcast_to(rows[:, None], (nq, nkv)), jnp.where(placeholder, kv_above[..., None], j),
                      jnp.where(placeholder, EMPTY, kinds), flags, kv_bits_for(L, block_kv)).astype(jnp.int32)

    taken, word = taken.reshape(H, -1), word.reshape(H, -1)
    needed = taken.sum(-1, dtype=jnp.int32)
    position = jnp.where(taken, jnp.cumsum(taken, -1) - 1, steps)  # not taken -> out of range: dropped
    heads = jnp.arange(H)[:, None]
    words = jnp.zeros((H, steps), jnp.int32).at[heads, position].set(word, mode="drop")
    last_word = jnp.take_along_axis(words, jnp.minimum(needed, steps)[:, None] - 1, axis=1)
    words = jnp.where(jnp.arange(steps) < needed[:, None], words, noop_word(last_word))
    return words.reshape(-1), needed


def _overlap(edges, L: int, block: int, n: int):
    """``int32 [H, n, C]``: how many positions of tile ``i`` (inside ``L``) lie in block ``a``."""
    t0 = jnp.arange(n, dtype=jnp.int32) * block
    t1 = jnp.minimum(t0 + block, L)
    e0, e1 = edges[:, None, :-1], edges[:, None, 1:]
    return jnp.maximum(0, jnp.minimum(e1, t1[None, :, None]) - jnp.maximum(e0, t0[None, :, None]))


def block_table_kinds(q_edges, k_edges, table, *, L: int, block_q: int, block_kv: int, align: str | None = None):
    """``(kinds int32 [H, nq, nkv], kept float32 [H])`` of the block-table mask (jit-able).

    ``q_edges [H, Cq + 1]`` / ``k_edges [H, Ck + 1]``: non-decreasing block edges from 0 to ``L``;
    ``table`` bool ``[H, Cq, Ck]``.  ``align``: a :func:`svgtpu.masks.core.align` mode (``snap``: each tile
    kept whole iff at least half its valid pairs are allowed; ``cover``: iff any; ``inner``: iff all),
    so only tiles holding padded keys stay partial.  ``kept``: the fraction of the ``L x L`` pairs the
    (aligned) mask allows, per head.
    """
    check_traced_align(align)
    nq, nkv = ceil_div(L, block_q), ceil_div(L, block_kv)
    oq = _overlap(q_edges.astype(jnp.int32), L, block_q, nq)
    ok = _overlap(k_edges.astype(jnp.int32), L, block_kv, nkv)
    counts = jnp.einsum("hia,hab,hjb->hij", oq, table.astype(jnp.int32), ok, preferred_element_type=jnp.int32)
    rows = jnp.minimum(jnp.arange(1, nq + 1) * block_q, L) - jnp.arange(nq) * block_q
    keys = jnp.minimum(jnp.arange(1, nkv + 1) * block_kv, L) - jnp.arange(nkv) * block_kv
    valid = (rows[:, None] * keys[None, :]).astype(jnp.int32)
    if align is not None:
        keep = {"snap": 2 * counts >= valid, "cover": counts > 0, "inner": counts == valid}[align]
        kinds = jnp.where(keep, jnp.where(keys == block_kv, FULL, PARTIAL), EMPTY)
        allowed = jnp.where(keep, valid, 0)
    else:  # padded keys make a tile partial; padded query rows do not (svgtpu.masks.tiles)
        kinds = jnp.where(counts == 0, EMPTY, jnp.where(counts == rows[:, None] * block_kv, FULL, PARTIAL))
        allowed = counts
    # float32 sums: L * L overflows int32 at video lengths (9e10 pairs at 1440p)
    return kinds.astype(jnp.int32), allowed.astype(jnp.float32).sum(axis=(1, 2)) / (float(L) * L)


def block_labels(edges, length: int):
    """``int32 [H, length]``: the block of each position (``C`` = none, for padding beyond ``edges[-1]``)."""
    positions = jnp.arange(length, dtype=edges.dtype)
    return jax.vmap(lambda e: jnp.searchsorted(e[1:], positions, side="right"))(edges).astype(jnp.int32)


__all__ = ["plan_length", "traced_plan", "block_table_kinds", "block_labels", "check_traced_align", "TRACED_ALIGN"]
