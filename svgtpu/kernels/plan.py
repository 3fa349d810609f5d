"""Input checks and the tile plan of the block-sparse attention kernel.

The plan is everything the kernel needs to know about a static mask, computed once with numpy at
trace time and cached (masks are hashable): a flat, ragged traversal of the non-empty tiles.
Step ``s`` of head ``h`` visits q tile ``q_tile[h, s]`` and kv tile ``kv_tile[h, s]`` of kind
``kind[h, s]`` (:mod:`svgtpu.masks.tiles` kinds), and ``flags[h, s]`` says whether it opens (``FIRST``)
and/or closes (``LAST``) its q row.  Rows run one after the other, so the output block changes
exactly when the q row does.  A q row without any non-empty tile still takes one step (kind
``EMPTY``, ``FIRST | LAST``) so that its output is written: zeros.  Per-head masks pad every head
to the longest traversal with no-op steps (kind ``EMPTY``, no flags, same tiles as the last real
step so nothing is fetched); :attr:`TilePlan.wasted_steps` counts them.

How partial tiles get their mask (``mask_source``):

- ``padding``: every masked tile is "partial" only because of padded keys, so the mask is just
  ``key < L`` (dense masks, tile-aligned masks at their own block size);
- ``iota``: the mask is ``computable`` (band + sink), evaluated on iotas inside the kernel;
- ``blocks``: anything else; the boolean blocks of the masked tiles are compacted (deduplicated)
  into ``blocks[num_blocks, block_q, block_kv]`` and ``block_index[h, s]`` says which to use.
  Steps that need no mask repeat the previous index, so full tiles fetch no mask block.

What the kernel reads from SMEM is smaller (:meth:`TilePlan.chunks`): one int32 word per step,
``flags | kind << 2 | kv_tile << 4 | q_tile << (4 + kv_bits)``, in a 1-D array (2-D SMEM arrays
are padded to 8 x 128 words), plus one int32 mask-block index per step for ``blocks`` plans.  When
that does not fit the SMEM budget the q rows are cut into chunks, each run by its own
``pallas_call`` with its own plan (q tiles counted from the chunk's first row).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from svgtpu.geometry import Tile, round_up
from svgtpu.kernels.config import KernelConfig
from svgtpu.masks.core import Mask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL, TileStats, classify
from svgtpu.errors import BadInput

FIRST, LAST = 1, 2
#: Bit layout of a packed plan word (see the module doc): flags in bits 0-1, kind in bits 2-3.
KIND_SHIFT, KV_SHIFT = 2, 4
SMEM_TILE_WORDS = 128


@dataclasses.dataclass(frozen=True, eq=False)
class TilePlan:
    """The ragged traversal of one mask (or one per head) at one tile size; see the module doc."""

    L: int
    block_q: int
    block_kv: int
    fast_path: bool
    q_tile: np.ndarray        # int32 [plan_heads, steps]
    kv_tile: np.ndarray       # int32 [plan_heads, steps]
    kind: np.ndarray          # int32 [plan_heads, steps]: EMPTY / PARTIAL / FULL
    flags: np.ndarray         # int32 [plan_heads, steps]: FIRST | LAST bits
    mask_source: str          # "padding" | "iota" | "blocks"
    block_index: np.ndarray | None  # int32 [plan_heads, steps] into blocks ("blocks" only)
    blocks: np.ndarray | None       # bool [num_blocks, block_q, block_kv] ("blocks" only)
    tile_stats: tuple[TileStats, ...]  # per plan head
    real_steps: tuple[int, ...]        # steps before no-op padding, per plan head

    @property
    def plan_heads(self) -> int:
        """1 when one mask serves all heads, else the number of heads."""
        return self.kind.shape[0]

    @property
    def num_steps(self) -> int:
        """Grid steps per head (the longest traversal)."""
        return self.kind.shape[1]

    @property
    def wasted_steps(self) -> int:
        """No-op steps added to pad per-head traversals to the same length (over all plan heads)."""
        return self.plan_heads * self.num_steps - sum(self.real_steps)

    @property
    def empty_row_steps(self) -> int:
        """Steps spent only to write zeros for q rows without any non-empty tile."""
        return int(np.sum((self.kind == EMPTY) & (self.flags == FIRST | LAST)))

    @property
    def masked_steps(self) -> int:
        """Steps that run the masking arithmetic (partial tiles; every tile without the fast path)."""
        masked = (self.kind == PARTIAL) if self.fast_path else (self.kind != EMPTY)
        return int(masked.sum())

    @property
    def kv_bits(self) -> int:
        """Bits of a packed word that hold the kv tile index."""
        return kv_bits_for(self.L, self.block_kv)

    @property
    def words_per_step(self) -> int:
        """int32 words of SMEM per step and plan head: the packed word, plus a block index."""
        return 2 if self.mask_source == "blocks" else 1

    @property
    def smem_bytes(self) -> int:
        """SMEM bytes of the whole plan if it ran as one ``pallas_call``."""
        return self.smem_bytes_for(self.num_steps)

    def smem_bytes_for(self, steps: int) -> int:
        """SMEM bytes of a plan (chunk) of ``steps`` steps per plan head, in whole 128-word tiles."""
        return self.words_per_step * smem_array_bytes(self.plan_heads * steps)

    def chunks(self, max_bytes: int | None = None) -> tuple[PlanChunk, ...]:
        """The packed plan, cut at q-row boundaries into chunks of at most ``max_bytes`` of SMEM each
        (``None``: one chunk); cached per ``max_bytes``."""
        return _chunks(self, max_bytes)

    def as_dict(self) -> dict:
        """Plan statistics for reports (all heads of the plan summed)."""
        nq, nk = -(-self.L // self.block_q), -(-self.L // self.block_kv)
        full = sum(s.full for s in self.tile_stats)
        partial = sum(s.partial for s in self.tile_stats)
        total = sum(s.total for s in self.tile_stats)
        return {
            "L": self.L, "block_q": self.block_q, "block_kv": self.block_kv, "fast_path": self.fast_path,
            "plan_heads": self.plan_heads, "steps_per_head": self.num_steps,
            "dense_steps_per_head": nq * nk, "full": full, "partial": partial, "empty": total - full - partial,
            "density": (full + partial) / total, "partial_share": partial / max(full + partial, 1),
            "masked_steps": self.masked_steps, "empty_row_steps": self.empty_row_steps,
            "wasted_steps": self.wasted_steps, "mask_source": self.mask_source,
            "mask_blocks": 0 if self.blocks is None else int(self.blocks.shape[0]),
        }


@dataclasses.dataclass(frozen=True, eq=False)
class PlanChunk:
    """The packed SMEM plan of q tile rows ``[row0, row1)``: ``words`` (int32 ``[plan_heads * steps]``,
    head-major, q tiles counted from ``row0``) and ``block_index`` (same shape, ``blocks`` plans only)."""

    row0: int
    row1: int
    steps: int
    words: np.ndarray
    block_index: np.ndarray | None

    @property
    def smem_bytes(self) -> int:
        """SMEM of this chunk: its plan words and, for ``blocks`` plans, its mask-block indices."""
        arrays = (self.words,) if self.block_index is None else (self.words, self.block_index)
        return sum(smem_array_bytes(a.size) for a in arrays)


def smem_array_bytes(words: int) -> int:
    """SMEM bytes of a 1-D int32 array of ``words`` words: Mosaic tiles 1-D SMEM arrays by 128 words
    (``memref<Nxi32, #tpu.tiled<(128),[1]>>`` in its dump), so it takes whole 512-byte tiles."""
    return 4 * round_up(words, SMEM_TILE_WORDS)


def kv_bits_for(L: int, block_kv: int) -> int:
    """Bits of a packed plan word that hold the kv tile index at sequence length ``L``."""
    return max(1, (-(-L // block_kv) - 1).bit_length())


def check_packable(L: int, block_q: int, block_kv: int) -> None:
    """One clear line when the tile indices of an ``L x L`` grid do not fit a 31-bit plan word."""
    rows = -(-L // block_q)
    if KV_SHIFT + kv_bits_for(L, block_kv) + max(1, (rows - 1).bit_length()) > 31:
        raise BadInput(f"tiles {block_q}x{block_kv} at L={L} need {rows} x {-(-L // block_kv)} tiles, too many "
                       f"to pack a plan step into 31 bits: use larger block_q / block_kv")


def pack_words(q_tile, kv_tile, kind, flags, kv_bits: int):
    """Packed plan words ``flags | kind << 2 | kv_tile << 4 | q_tile << (4 + kv_bits)``, element-wise on
    numpy or jax integer arrays (the one definition of the layout; the kernel decodes it)."""
    return flags | kind << KIND_SHIFT | kv_tile << KV_SHIFT | q_tile << (KV_SHIFT + kv_bits)


def noop_word(word):
    """The no-op step padding a traversal after ``word``: same tiles (nothing fetched), kind ``EMPTY``,
    no flags."""
    return word & ~((1 << KV_SHIFT) - 1) | EMPTY << KIND_SHIFT


def _row_starts(q_tile: np.ndarray, real: int, rows: int) -> np.ndarray:
    """``[rows + 1]``: index of the first step of each q row in one head's traversal (every row has one)."""
    return np.searchsorted(q_tile[:real], np.arange(rows + 1), side="left")


@functools.lru_cache(maxsize=64)
def _chunks(plan: TilePlan, max_bytes: int | None) -> tuple[PlanChunk, ...]:
    check_packable(plan.L, plan.block_q, plan.block_kv)
    rows = -(-plan.L // plan.block_q)
    starts = np.stack([_row_starts(plan.q_tile[h], plan.real_steps[h], rows) for h in range(plan.plan_heads)])
    def size(row0, row1):  # SMEM bytes of the chunk [row0, row1)
        return plan.smem_bytes_for(int((starts[:, row1] - starts[:, row0]).max()))

    bounds, row0 = [], 0
    while row0 < rows:
        row1 = row0 + 1
        if max_bytes is not None:
            while row1 < rows and size(row0, row1 + 1) <= max_bytes:
                row1 += 1
            need = size(row0, row0 + 1)
            if need > max_bytes:
                raise BadInput(f"one q tile row of the plan needs {need} bytes of SMEM, over the budget of "
                               f"{max_bytes}: use a larger block_kv")
        else:
            row1 = rows
        bounds.append((row0, row1))
        row0 = row1
    out = []
    for row0, row1 in bounds:
        lo, hi = starts[:, row0], starts[:, row1]
        steps = int((hi - lo).max())
        words = np.empty((plan.plan_heads, steps), np.int64)
        index = np.empty((plan.plan_heads, steps), np.int32) if plan.block_index is not None else None
        for h in range(plan.plan_heads):
            sl = slice(int(lo[h]), int(hi[h]))
            n = int(hi[h] - lo[h])
            word = pack_words(plan.q_tile[h, sl].astype(np.int64) - row0, plan.kv_tile[h, sl].astype(np.int64),
                              plan.kind[h, sl].astype(np.int64), plan.flags[h, sl].astype(np.int64), plan.kv_bits)
            words[h, :n] = word
            words[h, n:] = noop_word(word[-1])
            if index is not None:
                index[h, :n] = plan.block_index[h, sl]
                index[h, n:] = plan.block_index[h, int(hi[h]) - 1]
        words = words.astype(np.int32).reshape(-1)
        words.setflags(write=False)
        if index is not None:
            index = index.reshape(-1)
            index.setflags(write=False)
        out.append(PlanChunk(row0=row0, row1=row1, steps=steps, words=words, block_index=index))
    return tuple(out)


def _traversal(kinds: np.ndarray) -> np.ndarray:
    """``int64 [steps, 4]`` rows ``(q_tile, kv_tile, kind, flags)`` walking the non-empty tiles."""
    rows = []
    kv_prev = 0
    for i in range(kinds.shape[0]):
        js = np.flatnonzero(kinds[i])
        if len(js) == 0:  # nothing to compute, but the output row must still be written (zeros)
            rows.append(np.array([[i, kv_prev, EMPTY, FIRST | LAST]]))
            continue
        row = np.empty((len(js), 4), dtype=np.int64)
        row[:, 0], row[:, 1], row[:, 2], row[:, 3] = i, js, kinds[i, js], 0
        row[0, 3] |= FIRST
        row[-1, 3] |= LAST
        rows.append(row)
        kv_prev = int(js[-1])
    return np.concatenate(rows)


@functools.lru_cache(maxsize=64)
def tile_plan(mask: Mask | tuple[Mask, ...], L: int, block_q: int, block_kv: int,
              fast_path: bool = True) -> TilePlan:
    """Build (and cache) the tile plan of ``mask`` (one mask, or a tuple with one per head)."""
    masks = mask if isinstance(mask, tuple) else (mask,)
    if any(m.L != L for m in masks):
        raise BadInput(f"every mask must have L={L}, got {[m.L for m in masks]}")
    KernelConfig(block_q=block_q, block_kv=block_kv)  # validates the tile sizes
    classes = [classify(m, Tile(block_q, block_kv)) for m in masks]
    traversals = [_traversal(c.kinds) for c in classes]
    steps = max(len(t) for t in traversals)
    padded = np.empty((len(masks), steps, 4), dtype=np.int64)
    for h, t in enumerate(traversals):
        padded[h, :len(t)] = t
        padded[h, len(t):] = (t[-1, 0], t[-1, 1], EMPTY, 0)  # no-op: same tiles, nothing to do
    q_tile, kv_tile, kind, flags = (padded[..., c].astype(np.int32) for c in range(4))

    masked_kinds = (PARTIAL,) if fast_path else (PARTIAL, FULL)
    if all(c.only_padding_masked for c in classes):  # full tiles never hold padding: fast path or not
        source = "padding"
    elif not isinstance(mask, tuple) and mask.computable:
        source = "iota"
    else:
        source = "blocks"

    block_index = blocks = None
    if source == "blocks":
        block_index = np.zeros(kind.shape, dtype=np.int32)
        unique: dict[bytes, int] = {}
        stored: list[np.ndarray] = []
        for h, m in enumerate(masks):
            current = 0
            for s in range(steps):
                if np.isin(kind[h, s], masked_kinds):
                    q0, k0 = int(q_tile[h, s]) * block_q, int(kv_tile[h, s]) * block_kv
                    b = m.block(q0, q0 + block_q, k0, k0 + block_kv)
                    key = np.packbits(b).tobytes()
                    if key not in unique:
                        unique[key] = len(stored)
                        stored.append(b)
                    current = unique[key]
                block_index[h, s] = current  # unmasked steps keep the last block: no new fetch
        blocks = np.stack(stored) if stored else np.zeros((1, block_q, block_kv), dtype=bool)

    for a in (q_tile, kv_tile, kind, flags) + ((block_index,) if block_index is not None else ()):
        a.setflags(write=False)
    return TilePlan(L=L, block_q=block_q, block_kv=block_kv, fast_path=fast_path,
                    q_tile=q_tile, kv_tile=kv_tile, kind=kind, flags=flags, mask_source=source,
                    block_index=block_index, blocks=blocks,
                    tile_stats=tuple(c.stats for c in classes),
                    real_steps=tuple(len(t) for t in traversals))
