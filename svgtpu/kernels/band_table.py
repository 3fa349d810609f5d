"""The band + sink mask of a key-major tile as a table of additive score biases, one per sub-block shape.

Why: a partial tile of the SVG mask that tests its band per score pays a compare and a select on every
score vreg (:class:`~svgtpu.kernels.block_sparse.BandTile`), vector-ALU work the full body does not do,
and its key and query operands hold registers.  But the tile's sub-blocks (``block_kv_compute`` keys x
one strip of queries) start at multiples of ``g = gcd(block_q, block_kv_compute, strip)`` on both axes,
and the mask is static: so a sub-block's offset ``k - q`` is one of few values modulo ``g``, and its
mask is one of few patterns, each known before the kernel runs:

- the band edge the tile crosses (one edge per tile: :func:`~svgtpu.kernels.block_sparse.one_edge`)
  leaves a sub-block all allowed, all disallowed, or cut on one of a handful of diagonals;
- the sink's last key and the sequence's last key (padded keys follow it) cut a sub-block at a column
  that is the same in every sub-block they cross (``sink mod bkc``, ``L mod bkc``).

Each pattern becomes a ``[bkc, strip]`` float32 block of ``0`` (allowed) and ``MASK_VALUE``
(disallowed), built once per call; the kernel's scalar unit picks a sub-block's pattern
(:meth:`BandTable.index`) and the masked score is ``s * scale + bias``: one vector add per score vreg
where the per-score test is a compare and a select, and the bias is a load (the load slots, not the
vector ALUs).  ``MASK_VALUE + s`` rounds to ``MASK_VALUE`` for every real score, so a row that sees
only masked keys keeps ``m = MASK_VALUE`` and is written as zeros, as with the select.

The table is used when it fits :data:`TABLE_BYTES`; otherwise (wide chunks, a ``g`` of 128) the
kernel keeps the per-score test.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
from jax import lax

from svgtpu.masks.core import BandSinkMask

#: The most VMEM the table may take (single-buffered).  The 1440p production tile (:data:`svgtpu.setting.PRODUCTION`;
#: sink and padded keys) needs 8 MiB: 2 edges x 4 band states x 2 sink x 2 pad states of 256 KiB.
TABLE_BYTES = 8 * 2 ** 20


@dataclasses.dataclass(frozen=True)
class BandTable:
    """The patterns of one band + sink mask on ``keys x queries`` sub-blocks aligned to ``g``.

    Pattern ``((edge * states + t) * sinks + s) * pads + p``: ``edge`` 0 is ``k - q <= W`` (the tile
    crosses the band's upper edge), 1 is ``q - k <= W``; ``t`` the band state (0 all allowed, then
    the diagonals in order, ``states - 1`` none allowed); ``s`` whether the sink's last key cuts the
    sub-block, ``p`` whether the sequence's last key does."""

    window: int
    sink: int
    L: int
    keys: int      # block_kv_compute: keys per sub-block
    queries: int   # the strip: queries per sub-block
    g: int         # every sub-block starts at a multiple of g on both axes
    states: int
    e_min: tuple   # per edge: the band offset e of state 1 (offset())

    @property
    def sinks(self) -> int:
        return 2 if self.sink % self.keys else 1

    @property
    def pads(self) -> int:
        return 2 if self.L % self.keys else 1

    @property
    def patterns(self) -> int:
        return 2 * self.states * self.sinks * self.pads

    @property
    def nbytes(self) -> int:
        return self.patterns * self.keys * self.queries * 4

    def offset(self, edge: int, t):
        """The band offset ``e`` that pattern state ``t`` of ``edge`` stands for: a sub-block's key ``a``
        and query ``b`` (from its corner) are in the band when ``a - b <= -e`` (edge 0) or
        ``a - b >= e`` (edge 1)."""
        return self.e_min[edge] + (t - 1) * self.g

    def build(self, mask_value: float):
        """The table, ``[patterns, keys, queries]`` float32: 0 where allowed, ``mask_value`` elsewhere."""
        # computed when the call runs: as a constant, XLA would fold the megabytes at compile time
        a, b = lax.optimization_barrier((jnp.arange(self.keys, dtype=jnp.int32)[:, None],
                                         jnp.arange(self.queries, dtype=jnp.int32)[None, :]))
        blocks = []
        for edge in range(2):
            for t in range(self.states):
                e = self.offset(edge, t)
                band = (a - b <= -e) if edge == 0 else (a - b >= e)
                for s in range(self.sinks):
                    sunk = band | (a < self.sink % self.keys) if s else band
                    for p in range(self.pads):
                        allowed = sunk & (a < self.L % self.keys) if p else sunk
                        blocks.append(jnp.where(allowed, 0.0, mask_value).astype(jnp.float32))
        return jnp.stack(blocks)

    def index(self, upper, k, q):
        """The pattern of the sub-block whose first key is ``k`` and first query ``q`` (traced int32
        scalars, multiples of ``g``) in a tile crossing the upper edge when ``upper`` (a traced bool).
        Scalar-unit work: a handful of integer ops per sub-block."""
        c = k - q
        e = jnp.where(upper, c - self.window, -c - self.window)
        e_min = jnp.where(upper, self.e_min[0], self.e_min[1])
        # g divides the strip (256): a power of two, so the division is a shift (Mosaic lowers ``//`` on
        # integers through ``sign``, which needs to know the TPU it compiles for)
        t = jnp.clip(e - e_min + self.g, 0, (self.states - 1) * self.g) >> (self.g.bit_length() - 1)
        i = jnp.where(upper, 0, 1) * self.states + t
        i = i * self.sinks + (((k < self.sink) & (k + self.keys > self.sink)).astype(jnp.int32)
                              if self.sinks == 2 else 0)
        i = i * self.pads + (((k < self.L) & (k + self.keys > self.L)).astype(jnp.int32) if self.pads == 2 else 0)
        all_allowed, none_allowed = 0, (self.states - 1) * self.sinks * self.pads
        i = jnp.where(k + self.keys <= self.sink, all_allowed, i)
        return jnp.where(k >= self.L, none_allowed, i)


def band_table(mask, L: int, block_q: int, block_kv_compute: int, strip: int) -> BandTable | None:
    """The :class:`BandTable` of ``mask`` (sequence length ``L``) for a key-major tile, or ``None`` when
    ``mask`` is not a band + sink mask or the table would exceed :data:`TABLE_BYTES` (the kernel then
    tests per score)."""
    if not isinstance(mask, BandSinkMask):
        return None
    keys, queries = block_kv_compute, min(strip, block_q)
    g = math.gcd(block_q, keys, queries)
    assert g & (g - 1) == 0, g  # a divisor of the strip (256) or of a 128-multiple block_q below it
    r = (-mask.window) % g  # every sub-block's band offset e is r modulo g

    def first_at_least(lo):  # the smallest e >= lo with e = r (mod g)
        return lo + (r - lo) % g

    # Edge 0 (a - b <= -e): all allowed up to e = -(keys - 1), none from e = queries.  Edge 1 (a - b >= e):
    # all allowed up to e = -(queries - 1), none from e = keys.  The states between are the diagonals.
    e_min = (first_at_least(-(keys - 2)), first_at_least(-(queries - 2)))
    cut = (len(range(e_min[0], queries, g)), len(range(e_min[1], keys, g)))
    table = BandTable(window=mask.window, sink=mask.sink, L=L, keys=keys, queries=queries, g=g,
                      states=max(cut) + 2, e_min=e_min)
    return table if table.nbytes <= TABLE_BYTES else None


__all__ = ["BandTable", "band_table", "TABLE_BYTES"]
