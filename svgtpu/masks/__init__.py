"""Masks and tiles, the vocabulary of the whole package (C3).

- :mod:`~svgtpu.masks.core`: attention masks as small immutable objects (SVG's band + sink, dense,
  arrays, tile masks, permutations), their alignment to tiles and the tokens alignment changes;
- :mod:`~svgtpu.masks.families`: the newer methods' masks (STA, radial, variable blocks);
- :mod:`~svgtpu.masks.tiles`: every tile classified as empty, full or partial.

The public names are importable from here: ``from svgtpu.masks import svg_mask, align, classify``.
"""

from svgtpu.masks.core import (
    ALIGN_MODES, BALANCED_MODES, MASK_KINDS, TILE_RULE_MODES, ArrayMask, BandSinkMask, DenseMask, Mask, MaskDiff, PermutedMask, TileMask,
    align, alignment_diff, balanced_keep, band_window, density_band_window, make_mask, multiplier_for_kept, svg_mask, temporal_frame_major_mask,
)
from svgtpu.masks.families import BlockMask, RadialMask, STAMask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL, TileClassification, TileStats, classify

__all__ = [
    "ALIGN_MODES", "BALANCED_MODES", "MASK_KINDS", "TILE_RULE_MODES", "ArrayMask", "BandSinkMask", "DenseMask", "Mask", "MaskDiff", "PermutedMask",
    "TileMask", "align", "alignment_diff", "balanced_keep", "band_window", "density_band_window", "make_mask", "multiplier_for_kept", "svg_mask",
    "temporal_frame_major_mask", "BlockMask", "RadialMask", "STAMask", "EMPTY", "FULL", "PARTIAL",
    "TileClassification", "TileStats", "classify",
]
