"""The kernel's tile configuration, validated once against the real Mosaic (TPU) block rules.

Mosaic's rule (Pallas TPU docs, "Writing TPU kernels with Pallas", section "Noteworthy properties
and restrictions": *the last two dimensions of a block must be divisible by 8 and 128
respectively, or equal the array's dimensions*): a TPU vector register is 8 sublanes x 128 lanes
of 32 bit, and blocks are laid out in vreg tiles.  bfloat16 packs two rows per sublane (native
tile 16 x 128), yet the compiler accepts bfloat16 blocks of any multiple of 8 rows too (libtpu
0.0.42.1 compiles 24- and 40-row bf16 q blocks for v6e: ``tests/test_compile.py``), so the rule
here is the same for both dtypes.  In this kernel:

- ``block_q`` is the row count of the q / output blocks ``[block_q, d]`` and of the softmax
  scratch: a **sublane** dimension, so a multiple of 8.  MaxDiffusion's Wan tile on v6e,
  ``3024 x 2048``, is legal: 3024 = 8 * 378.
- ``block_kv`` is the row count of the k / v blocks and the **lane** dimension of the scores
  ``[block_q, block_kv]`` and of the mask blocks: a multiple of 128.
- ``block_kv_compute`` is the kv width of one online-softmax update (it feeds the MXU and sets the
  size of the float32 score temporaries in VMEM): a multiple of 128 dividing ``block_kv``.
- ``layout`` is how a tile's scores lie (:data:`LAYOUTS`).  ``query-major``: scores ``[block_q,
  block_kv_compute]``, queries on sublanes.  ``key-major``: scores ``[block_kv_compute, block_q]``,
  the softmax statistics ``[8, block_q]`` and the output block ``[d, block_q]``: there ``block_q`` is
  a **lane** dimension, so a multiple of 128 (3024 is not; the production tile's is).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, format_tile, round_up

LANES = 128
SUBLANES = 8
DTYPES = ("float32", "bfloat16")
#: How a tile's scores lie in the kernel (:mod:`svgtpu.kernels.block_sparse` explains both).
LAYOUTS = ("query-major", "key-major")


def default_layout(block_q: int) -> str:
    """The layout a tile gets unless told: ``key-major`` (fewer MXU pushes, compact statistics: the
    faster body, ``docs/compiled_schedule.md``) wherever ``block_q`` is a multiple of 128, else
    ``query-major``, the only one such a ``block_q`` allows."""
    return "key-major" if block_q % LANES == 0 else "query-major"
#: The f32 score block ``[block_q, block_kv_compute]`` the default ``block_kv_compute`` aims for:
#: 4 MiB keeps the score, probability and mask temporaries of one update (a few copies of it) well
#: inside a v5e/v6e core's VMEM next to the double-buffered q, k, v blocks.
SCORE_BLOCK_BYTES = 4 * 1024 * 1024
#: Where the block rule is stated, and where the lowering for TPU enforces it (jax 0.10.2).
MOSAIC_BLOCK_RULE = ("Mosaic's block-shape rule: https://docs.jax.dev/en/latest/pallas/tpu/details.html, "
                     "'Noteworthy properties and restrictions'; enforced in jax/_src/pallas/mosaic/lowering.py")


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_multiple(name: str, value, quantum: int, why: str) -> int:
    if not _is_int(value) or value <= 0 or value % quantum:
        raise BadInput(f"{name} must be a positive multiple of {quantum} ({why}; {MOSAIC_BLOCK_RULE}), got {value!r}")
    return int(value)


def default_block_kv_compute(block_q: int, block_kv: int) -> int:
    """The widest multiple of 128 dividing ``block_kv`` whose f32 score block stays within
    :data:`SCORE_BLOCK_BYTES` (at least 128): 256 at 3024 x 2048 (a 3024 x 512 f32 block is 6 MiB),
    ``block_kv`` for small tiles."""
    best = LANES
    for width in range(LANES, block_kv + 1, LANES):
        if block_kv % width == 0 and block_q * width * 4 <= SCORE_BLOCK_BYTES:
            best = width
    return best


def tile_refusal(block_q: int, block_kv: int, layout: str | None = None) -> str | None:
    """Why our kernel would refuse a ``block_q x block_kv`` tile in ``layout`` (``None``: its default)
    (:class:`KernelConfig`'s one line, naming Mosaic's rule), or ``None`` when it takes it.  Counting
    tiles of any size is still legitimate analysis: ``svgtpu tiles`` answers and adds this line."""
    try:
        KernelConfig(block_q, block_kv, layout=layout)
    except BadInput as error:
        return str(error)
    return None


def check_blocks_cover(block_q: int, block_kv: int, L: int) -> None:
    """Refuse a block longer than the sequence of ``L`` tokens padded to the block rule (``block_q`` to a
    multiple of 8 rows, ``block_kv`` of 128 keys): one such block already covers every token, and a longer
    one adds only padding.  Checked before any counting or compile (``tiles``, ``explore``, ``compile``)."""
    for name, block, quantum in (("block_q", block_q, SUBLANES), ("block_kv", block_kv, LANES)):
        most = round_up(L, quantum)
        if block > most:
            raise BadInput(f"{name} must be at most {most:,} (the sequence, L = {L:,} tokens, padded to a multiple "
                           f"of {quantum}: one block covers it), got {block:,}")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Tile sizes and the fast-path switch of :func:`~svgtpu.kernels.block_sparse_attention`.

    ``block_q``: q rows per tile, a multiple of 8;
    ``block_kv``: keys per tile, a multiple of 128; ``block_kv_compute``: keys per online-softmax
    update, a multiple of 128 dividing ``block_kv`` (``None``: :func:`default_block_kv_compute`);
    ``fast_path``: mask-free body for full tiles (``False`` is the C4 ablation); ``layout``: one of
    :data:`LAYOUTS` (``key-major`` needs ``block_q`` a multiple of 128; ``None``: :func:`default_layout`);
    ``fixed_max``: each query's softmax shift fixed before the first key (:mod:`svgtpu.kernels.fixed_max`:
    no running maximum, no rescale) on the q tiles where that is proven safe, the running maximum on the
    others; ``scale_in_qk``: the softmax scale folded into the ``QK`` product (key-major only: bf16 ``q``
    times the scale split into bf16 ``hi + lo`` once per q row, the keys repeated, no multiply per score;
    float32 inputs keep the float32 multiply; ``None``: on wherever the layout is key-major,
    ``docs/compiled_schedule.md``).  The rules and their source are in the module docstring.  Frozen and
    hashable, so it can be a static argument.
    """

    block_q: int
    block_kv: int
    block_kv_compute: int | None = None
    fast_path: bool = True
    layout: str | None = None
    fixed_max: bool = False
    scale_in_qk: bool | None = None

    def __post_init__(self):
        if self.layout is not None and self.layout not in LAYOUTS:
            raise BadInput(f"layout must be one of {', '.join(LAYOUTS)} (or None: the default), got {self.layout!r}")
        object.__setattr__(self, "block_q", _check_multiple(
            "block_q", self.block_q, SUBLANES,
            f"it is the sublane dimension of the q block: Mosaic tiles blocks by {SUBLANES} sublanes x "
            f"{LANES} lanes"))
        if self.layout is None:
            object.__setattr__(self, "layout", default_layout(self.block_q))
        if self.layout == "key-major":
            _check_multiple("block_q", self.block_q, LANES,
                            "with layout='key-major' it is the lane dimension of the scores, the softmax "
                            f"statistics and the output block: TPU vregs have {LANES} lanes")
        object.__setattr__(self, "block_kv", _check_multiple(
            "block_kv", self.block_kv, LANES,
            f"it is the lane dimension of the score and mask blocks: TPU vregs have {LANES} lanes"))
        if self.block_kv_compute is None:
            object.__setattr__(self, "block_kv_compute", default_block_kv_compute(self.block_q, self.block_kv))
        object.__setattr__(self, "block_kv_compute", _check_multiple(
            "block_kv_compute", self.block_kv_compute, LANES, "it is the lane width of one score update"))
        if self.block_kv % self.block_kv_compute:
            raise BadInput(f"block_kv_compute must divide block_kv={self.block_kv}, got {self.block_kv_compute}")
        if not isinstance(self.fast_path, (bool, np.bool_)):
            raise BadInput(f"fast_path must be True or False, got {self.fast_path!r}")
        object.__setattr__(self, "fast_path", bool(self.fast_path))
        if not isinstance(self.fixed_max, (bool, np.bool_)):
            raise BadInput(f"fixed_max must be True or False, got {self.fixed_max!r}")
        object.__setattr__(self, "fixed_max", bool(self.fixed_max))
        if self.scale_in_qk is None:
            object.__setattr__(self, "scale_in_qk", self.layout == "key-major")
        if not isinstance(self.scale_in_qk, (bool, np.bool_)):
            raise BadInput(f"scale_in_qk must be True, False or None (the default), got {self.scale_in_qk!r}")
        object.__setattr__(self, "scale_in_qk", bool(self.scale_in_qk))
        if self.scale_in_qk and self.layout != "key-major":
            raise BadInput("scale_in_qk=True needs layout='key-major' (the scaled queries are the MXU's latched "
                           f"operand, [2 d, block_q]), got layout={self.layout!r}")

    @property
    def tile(self) -> str:
        """``"3024x2048"``."""
        return format_tile(Tile(self.block_q, self.block_kv))


__all__ = ["KernelConfig", "default_block_kv_compute", "default_layout", "tile_refusal", "check_blocks_cover", "DTYPES",
           "LAYOUTS", "SUBLANES", "LANES", "MOSAIC_BLOCK_RULE"]
