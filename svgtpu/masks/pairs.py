"""Pairs executed after tile alignment vs the exact SVG mask's: why "aligned vs unaligned" needs a balanced mode.

An aligned mask runs whole tiles, so it executes a different number of ``(q, k)`` pairs than the SVG mask it
came from: snap alignment drifts by a few percent at 720p, enough that comparing aligned and unaligned quality
compares two densities.  The balanced modes of :func:`svgtpu.masks.core.align` keep the count.  This module
counts, exactly (analytic tile counts), the pairs each alignment mode executes for the SVG band + first-frame
sink at our kept fractions and at MaxDiffusion's densities (its density -> band rule,
:func:`svgtpu.masks.core.density_band_window`), per resolution and tile.  ``svgtpu align-pairs`` prints it.
"""

from __future__ import annotations

import itertools
from typing import Sequence

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, check_tile, get_geometry
from svgtpu.masks.core import (ALIGN_MODE_LEGEND, ALIGN_MODE_SHORT, ALIGN_MODES, BandSinkMask, alignment_diff, align,
                               balanced_keep, density_band_window, svg_mask, tile_grid, tile_valid_pairs)
from svgtpu.recipes import MAXDIFFUSION_SVG_DENSITIES, MAXDIFFUSION_SVG_TILE, PRODUCTION_TILE

#: C3's pair accounting covers (notebook 03, ``svgtpu align-pairs``'s defaults): the resolutions, the tiles (the
#: production tile and MaxDiffusion's SVG tile) and our kept fraction; :func:`pair_accounting` takes them from its caller.
GEOMETRIES = ("720p", "1440p")
TILES = (PRODUCTION_TILE.tile, MAXDIFFUSION_SVG_TILE.tile)
KEPT = (0.3,)


def masks_for(geometry, kept=KEPT, densities=MAXDIFFUSION_SVG_DENSITIES) -> list[tuple[str, BandSinkMask]]:
    """``(setting in words, mask)``: the SVG mask at each of our kept fractions and each MaxDiffusion density."""
    g = get_geometry(geometry)
    return ([(f"kept {k:g}", svg_mask(g, kept=k)) for k in kept]
            + [(f"MaxDiffusion density {d:g}", BandSinkMask(g.L, g.F, density_band_window(g, d))) for d in densities])


def pair_accounting(geometries, tiles: Sequence[Tile], *, kept=KEPT, densities=MAXDIFFUSION_SVG_DENSITIES,
                    modes=ALIGN_MODES) -> dict:
    """Per resolution, setting, tile and alignment mode: the pairs the SVG mask allows and the aligned mask executes
    (``tiles``: :class:`~svgtpu.geometry.Tile` values, as the caller resolved them; C3's are :data:`TILES`).

    ``pair_error`` is ``(aligned - exact) / exact``; ``balanced-row`` rows also give ``row_no_carry_error``, the
    same for per-row budgets that carry nothing between rows (MaxDiffusion's ``row_balanced``).  ``computed``.
    """
    bad = [m for m in modes if m not in ALIGN_MODES]
    if bad:
        raise BadInput(f"modes must be among {', '.join(ALIGN_MODES)}, got {', '.join(map(repr, bad))}")
    rows, tiles = [], [check_tile(t) for t in tiles]
    for name in geometries:
        for (setting, mask), tile in itertools.product(masks_for(name, kept, densities), tiles):
            for mode in modes:
                diff = alignment_diff(mask, align(mask, tile, mode))
                row = {"geometry": name, "setting": setting, "window": mask.window, "block_q": tile.block_q,
                       "block_kv": tile.block_kv,
                       "mode": mode, "exact_pairs": diff.original, "aligned_pairs": diff.aligned,
                       "exact_density": mask.density(), "pair_error": diff.pair_error}
                if mode == "balanced-row":
                    qe, ke = tile_grid(mask.L, tile)
                    counts, valid = mask.count_grid(qe, ke), tile_valid_pairs(mask.L, qe, ke)
                    executed = int(valid[balanced_keep(counts, valid, per_row=True, carry=False)].sum())
                    row["row_no_carry_error"] = (executed - diff.original) / diff.original
                rows.append(row)
    return {"rows": rows, "geometries": list(geometries), "tiles": [f"{q}x{k}" for q, k in tiles],
            "kept": list(kept), "densities": list(densities), "modes": list(modes), "provenance": "computed"}


def format_pair_accounting(result: dict) -> str:
    """:func:`pair_accounting` as ``svgtpu align-pairs`` prints it: one line per setting and tile, a column per mode.

    The band half-width and the exact pair count are left to ``--json``; the table keeps to ``FIT_WIDTH``."""
    import textwrap
    from svgtpu.facts.tables import FIT_WIDTH, format_table
    table = {}
    for r in result["rows"]:
        line = table.setdefault((r["geometry"], r["setting"], r["block_q"], r["block_kv"]), {
            "geometry": r["geometry"], "setting": r["setting"].removeprefix("MaxDiffusion "),
            "tiles": f"{r['block_q']}x{r['block_kv']}", "kept": f"{r['exact_density']:.2%}"})
        line[ALIGN_MODE_SHORT[r["mode"]]] = f"{r['pair_error']:+.3%}"
        if "row_no_carry_error" in r:
            line["row nc"] = f"{r['row_no_carry_error']:+.3%}"
    legend = ("pairs each alignment executes minus the SVG mask's, over the SVG mask's; computed. setting: kept k is "
              "our band rule at kept fraction k, density d MaxDiffusion's density -> band rule; kept: the pairs the "
              f"mask keeps. {ALIGN_MODE_LEGEND}; row nc: balanced-row with nothing carried between rows "
              "(MaxDiffusion's row_balanced). Band width W and exact pairs: --json")
    return format_table(list(table.values())) + "\n" + textwrap.fill(legend, FIT_WIDTH, break_on_hyphens=False)


__all__ = ["GEOMETRIES", "KEPT", "TILES", "format_pair_accounting", "masks_for", "pair_accounting"]
