"""Figure helpers: one seaborn style, labelled axes, provenance on every figure, a takeaway under it.

The colours and markers (:data:`svgtpu.styles.PALETTE`, the tile kinds', the sparse methods') are
:mod:`svgtpu.styles`, which the explorer draws with too.

Every figure the notebooks write says how its numbers were made (``measured-cpu-interpret``,
``measured-tpu``, ``modeled-v6e`` or ``computed``) in a footer line, together with the profile and
the versions, so a figure lifted out of the paper still carries its caveats.  :func:`takeaway`
puts one sentence under a figure whose numbers are filled in from the recorded results.

No matplotlib backend is chosen here: in JupyterLab and in papermill's executed copies the
inline backend shows every figure in the notebook; headless scripts get matplotlib's own
fallback (Agg).
"""

from __future__ import annotations

import string
import types

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.styles import PALETTE, TILE_COLORS, TILE_NAMES


def set_style() -> None:
    """The house style: seaborn whitegrid, readable fonts, no top/right spines."""
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.95)
    plt.rcParams.update({"figure.dpi": 100, "axes.spines.top": False, "axes.spines.right": False,
                         "axes.titleweight": "bold", "axes.titlesize": 11, "legend.frameon": False,
                         "figure.constrained_layout.use": True, "svg.hashsalt": "svgtpu"})


def provenance_footer(fig, provenance: str, profile: str, note: str = "") -> None:
    """A small grey line under the figure: provenance, profile, versions (and a note)."""
    from svgtpu.facts.results import check_provenance, environment
    env = environment()
    text = (f"{check_provenance(provenance)} · profile {profile} · svgtpu {env['svgtpu']} · "
            f"jax {env['jax']} ({env['backend']})")
    if note:
        text += f" · {note}"
    # place the line under everything already drawn (tick labels and axis labels included)
    fig.canvas.draw()
    bottom = fig.get_tightbbox(fig.canvas.get_renderer()).y0 / fig.get_figheight()
    fig.text(0.5, min(bottom, 0.0) - 0.015, text, ha="center", va="top", fontsize=7.5, color="#666666")


def tile_map(ax, kinds: np.ndarray, title: str = "", *, legend: bool = False) -> None:
    """Draw an ``int8 [nq, nk]`` tile-kind map (0 empty, 1 partial, 2 full) with its counts."""
    cmap = ListedColormap([TILE_COLORS[k] for k in (EMPTY, PARTIAL, FULL)])
    ax.imshow(kinds, cmap=cmap, vmin=-0.5, vmax=2.5, interpolation="nearest", aspect="equal")
    nq, nk = kinds.shape
    ax.set_xticks(np.arange(-0.5, nk, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, nq, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=0.4 if max(nq, nk) < 60 else 0)
    ax.grid(which="major", visible=False)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("kv tile index")
    ax.set_ylabel("q tile index")
    counts = np.bincount(kinds.ravel(), minlength=3)
    computed = counts[PARTIAL] + counts[FULL]
    share = counts[PARTIAL] / computed if computed else 0.0
    ax.set_title(f"{title}\npartial share {share:.1%} · density {computed / kinds.size:.1%}")
    if legend:
        tile_legend(ax)


def tile_legend(ax, **kwargs) -> None:
    handles = [Patch(facecolor=TILE_COLORS[k], edgecolor="#999999", label=TILE_NAMES[k])
               for k in (FULL, PARTIAL, EMPTY)]
    ax.legend(handles=handles, **{"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), **kwargs})


def mask_image(ax, allowed: np.ndarray, title: str = "", *, tile: Tile | None = None) -> None:
    """Draw a small boolean mask (allowed = dark) with the boundaries of ``tile``'s tiles, if given."""
    ax.imshow(allowed, cmap=ListedColormap(["white", "#333333"]), vmin=0, vmax=1,
              interpolation="nearest", aspect="equal")
    L = allowed.shape[0]
    for block, draw in zip(tile or (), (ax.axhline, ax.axvline)):
        for edge in range(block, L, block):
            draw(edge - 0.5, color=PALETTE["unaligned"], linewidth=0.6)
    ax.grid(False)
    ax.set_xlabel("key token k")
    ax.set_ylabel("query token q")
    ax.set_title(f"{title}\nkept {allowed.mean():.1%} of pairs" if title else "")


def reference_line(ax, value: float, label: str, *, axis: str = "y", color: str | None = None,
                   linestyle: str = "--") -> None:
    """A line for a reported number (or an ideal), labelled in the legend."""
    draw = ax.axhline if axis == "y" else ax.axvline
    draw(value, linestyle=linestyle, linewidth=1.2, color=color or PALETTE["reported"], label=label)


def bar_labels(ax, fmt: str = "{:.2f}", *, inside: bool = False) -> None:
    """Write each bar's value on top of it (or inside it, clear of error bars)."""
    from matplotlib.container import BarContainer
    for container in ax.containers:
        if isinstance(container, BarContainer):
            ax.bar_label(container, labels=[fmt.format(v) for v in container.datavalues], fontsize=8,
                         padding=2, label_type="center" if inside else "edge",
                         color="white" if inside else None)


def _recorded(run) -> dict[str, types.SimpleNamespace]:
    """``{claim: namespace of recorded values}`` of a NotebookRun or a loaded results dict."""
    claims = run.claims if hasattr(run, "claims") else run.get("claims", {})
    return {claim: types.SimpleNamespace(**{name: e["value"] for name, e in entries.items()})
            for claim, entries in claims.items()}


def takeaway(run, figure: str | None, template: str, **context) -> None:
    """Show the one-sentence takeaway of a figure, its numbers filled in from the recorded results.

    ``template`` is a format string whose fields name recorded values as ``{C3.partial_share_after:.2%}``
    (``run`` is the notebook's :class:`~svgtpu.facts.results.NotebookRun` or a loaded results dict); other
    fields come from ``context`` (values the notebook computed with the package).  So a sentence
    never holds a number typed by hand.  When ``figure`` names a figure saved by ``run``, the
    sentence is stored with it in the results file (``figures[figure]["takeaway"]``).  Displayed as
    Markdown in a notebook, printed elsewhere (returns nothing, so a cell does not echo it twice).
    """
    fields = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    values = {**_recorded(run), **context}
    missing = sorted(f for f in fields if f.split(".")[0].split("[")[0] not in values)
    if missing:
        raise BadInput(f"takeaway fields must name recorded claims ({', '.join(sorted(_recorded(run)))}) "
                       f"or context values, got unknown {', '.join(missing)}")
    text = template.format_map(values)
    if figure is not None and figure in getattr(run, "figures", {}):
        run.figures[figure]["takeaway"] = text
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover -- IPython ships with the notebook stack
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        display(Markdown(f"**Takeaway.** {text}"))
    else:
        print(f"Takeaway: {text}")


__all__ = ["set_style", "provenance_footer", "tile_map", "tile_legend", "mask_image", "reference_line", "bar_labels", "takeaway"]
