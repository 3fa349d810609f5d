"""Figure styles: the colours and markers every figure uses, so the same thing has the same colour everywhere.

Plain values, no matplotlib: the report's figures (:mod:`svgtpu.report.plots`, the notebooks) and the
explorer (:mod:`svgtpu.explore`) both import them from here, downwards.
"""

from __future__ import annotations

from svgtpu.errors import BadInput
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL

#: Tile-kind colours, used by every tile map (index = tile kind).
TILE_COLORS = {EMPTY: "#f2f2f2", PARTIAL: "#e6842a", FULL: "#1f5f9e"}
TILE_NAMES = {EMPTY: "empty (skipped)", PARTIAL: "partial (masked)", FULL: "full (mask-free)"}

#: One colour per variant family, so the same thing has the same colour in every figure.
PALETTE = {"dense": "#7f7f7f", "splash": "#9467bd", "unaligned": "#e6842a", "aligned": "#1f5f9e",
           "measured": "#2ca02c", "modeled": "#1f5f9e", "reported": "#d62728"}


#: One colour per sparse method (:data:`svgtpu.bench.methods.METHODS`); its ``-aligned`` variant draws
#: solid with filled markers, the unaligned one dashed with hollow markers.
METHOD_COLORS = {"svg": "#1f5f9e", "svg2": "#d62728", "sta": "#2ca02c", "radial": "#9467bd"}
METHOD_MARKERS = {"svg": "o", "svg2": "s", "sta": "^", "radial": "D"}


def method_style(variant: str) -> dict:
    """Matplotlib line/marker keywords for a sparse-method variant (``sta``, ``sta-aligned``, ...)."""
    method = variant.removesuffix("-aligned")
    if method not in METHOD_COLORS:
        raise BadInput(f"variant must be one of {', '.join(METHOD_COLORS)} (each also -aligned), got {variant!r}")
    aligned = variant.endswith("-aligned")
    color = METHOD_COLORS[method]
    return {"color": color, "marker": METHOD_MARKERS[method], "linestyle": "-" if aligned else "--",
            "markerfacecolor": color if aligned else "white", "markeredgecolor": color, "label": variant}


__all__ = ["TILE_COLORS", "TILE_NAMES", "PALETTE", "METHOD_COLORS", "METHOD_MARKERS", "method_style"]
