"""Tile classification: the vocabulary of the whole package.

A flash-style kernel walks the ``L x L`` score matrix in ``block_q x block_kv`` tiles, with the
sequence padded up to a tile multiple.  Each tile is

- **empty** (0): no allowed pair; skipped, never fetched;
- **partial** (1): some but not all pairs allowed, or a padded key inside: needs element-wise
  masking (padded query rows do *not* make a tile partial; their outputs are discarded);
- **full** (2): every pair allowed and no padded key: needs no mask at all.

``partial_share = partial / (partial + full)`` is the "boundary masking work" of claim C3 and
``density = (partial + full) / all tiles`` the compute actually done.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, get_geometry
from svgtpu.masks.core import Mask, align, alignment_diff, make_mask, tile_grid, tile_valid_lengths
from svgtpu.setting import mask_density

EMPTY, PARTIAL, FULL = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class TileStats:
    """Counts of tile kinds for one mask and block size."""

    full: int
    partial: int
    empty: int

    @property
    def total(self) -> int:
        return self.full + self.partial + self.empty

    @property
    def partial_share(self) -> float:
        """``partial / (partial + full)``: the share of computed tiles that need masking (C3)."""
        computed = self.partial + self.full
        return self.partial / computed if computed else 0.0

    @property
    def density(self) -> float:
        """``(partial + full) / all tiles``: the share of tiles the kernel computes."""
        return (self.partial + self.full) / self.total

    def as_dict(self) -> dict:
        return {"full": self.full, "partial": self.partial, "empty": self.empty, "total": self.total,
                "partial_share": self.partial_share, "density": self.density}


@dataclasses.dataclass(frozen=True)
class TileClassification:
    """The per-tile kind map (``int8 [nq, nk]``: 0 empty, 1 partial, 2 full), the allowed pairs per
    tile it was made from (``counts``), and its stats."""

    kinds: np.ndarray
    block_q: int
    block_kv: int
    L: int
    counts: np.ndarray

    @property
    def tile(self) -> Tile:
        return Tile(self.block_q, self.block_kv)

    @property
    def only_padding_masked(self) -> bool:
        """Every partial tile allows all its in-``L`` pairs: the only masking is of padded keys."""
        partial = self.kinds == PARTIAL
        if not partial.any():
            return True
        qe, ke = tile_grid(self.L, self.tile)
        valid = tile_valid_lengths(self.L, qe)[:, None] * tile_valid_lengths(self.L, ke)[None, :]
        return bool(np.all(self.counts[partial] == valid[partial]))

    @property
    def stats(self) -> TileStats:
        counts = np.bincount(self.kinds.ravel(), minlength=3)
        return TileStats(full=int(counts[FULL]), partial=int(counts[PARTIAL]), empty=int(counts[EMPTY]))


def classify(mask: Mask, tile: Tile) -> TileClassification:
    """Classify every ``tile`` (``block_q x block_kv`` tokens) of ``mask`` as empty, partial or full.

    Uses the mask's analytic pair counts (:meth:`Mask.count_grid`), so 1440p with 512 x 512
    tiles (350k tiles) takes well under a second for the SVG masks.
    """
    block_q, block_kv = tile
    qe, ke = tile_grid(mask.L, tile)
    counts = mask.count_grid(qe, ke)
    kinds = np.full(counts.shape, PARTIAL, dtype=np.int8)
    kinds[counts == 0] = EMPTY
    # padded keys count as masked (a tile holding one is never full); padded query rows do not
    kinds[counts == tile_valid_lengths(mask.L, qe)[:, None] * block_kv] = FULL
    return TileClassification(kinds, block_q, block_kv, mask.L, counts)


def tile_report(geometry: str, kind: str = "spatial", *, multiplier: float | None = None, kept: float | None = None,
                recipe: str | None = None, tile: Tile, align_mode: str | None = None) -> dict:
    """``svgtpu tiles``: the tile kinds of one SVG mask (C3), after tile alignment with ``align_mode``.

    Give at most one of ``multiplier``, ``kept`` or ``recipe`` (a named recipe's kept fraction,
    :mod:`svgtpu.recipes`); none: the default recipe's kept fraction (``DEFAULT_KEPT``, the story's mask).
    Any tile size is counted, also one the kernel would refuse (:func:`svgtpu.kernels.config.tile_refusal`
    says so).
    """
    from svgtpu.recipes import get_recipe
    given = [name for name, value in (("multiplier", multiplier), ("kept", kept), ("recipe", recipe)) if value is not None]
    if recipe is not None and len(given) > 1:
        raise BadInput(f"give a recipe or its density, not both: got recipe {recipe} and {given[0]}")
    if kind == "dense" and given:
        raise BadInput(f"{given[0]} shapes SVG's band: mask dense keeps every pair and takes none of multiplier, kept "
                       "or recipe")
    g = get_geometry(geometry)
    if recipe is not None:
        kept = get_recipe(recipe).kept
        if kept is None:
            raise BadInput(f"recipe {recipe} has an unknown kept fraction: pick one with a number (svgtpu recipes)")
    if kind != "dense":   # a dense mask has no band to size
        kept, multiplier = mask_density(kept, multiplier)
    mask = make_mask(kind, g, multiplier, kept=kept)
    result = {"geometry": geometry, "T": g.T, "H": g.H, "W": g.W, "F": g.F, "L": g.L, "mask": kind,
              "multiplier": multiplier, "kept": kept, "window": getattr(getattr(mask, "base", mask), "window", None),
              "block_q": tile.block_q, "block_kv": tile.block_kv, "align": align_mode}
    if align_mode:
        aligned = align(mask, tile, align_mode)
        result["alignment"] = alignment_diff(mask, aligned).as_dict()
        mask = aligned
    result["mask_density"] = mask.density()
    result.update(classify(mask, tile).stats.as_dict())
    result["provenance"] = "computed"
    return result


def format_tile_report(result: dict) -> str:
    """:func:`tile_report` as one table row, and the kernel's refusal of the tile if ``kernel_refusal`` holds one."""
    from svgtpu.facts.tables import format_table
    table = format_table([{k: result[k] for k in ("geometry", "mask", "align", "block_q", "block_kv", "full",
                                                  "partial", "empty", "partial_share", "density")}])
    refusal = result.get("kernel_refusal")
    return table + (f"\ncounted all the same, but our kernel would refuse this tile: {refusal}" if refusal else "")


__all__ = ["EMPTY", "PARTIAL", "FULL", "TileStats", "TileClassification", "classify", "format_tile_report",
           "tile_report"]
