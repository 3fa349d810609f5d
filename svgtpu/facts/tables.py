"""The plain fixed-width table every command prints (``--json`` prints the same rows as JSON)."""

from __future__ import annotations


#: The width a table with ``fit`` keeps to: a terminal's, less a margin.
FIT_WIDTH = 100
#: Text cells longer than this are the ones a fitted table moves into its legend.
LEGEND_CELL = 24


def format_table(rows: list[dict], columns: list[str] | None = None, *, fit: bool = False) -> str:
    """A plain fixed-width table of ``rows`` (floats to 4 significant digits).

    ``fit``: a table wider than :data:`FIT_WIDTH` shows each long text cell as a short key (``[1]``, ``[2]``, ...;
    one per distinct text) and lists the keys' texts beneath it, a legend, wrapped to the width.
    """
    import textwrap
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    legend: dict[str, str] = {}
    if fit and len(_lines(columns, cells)[0]) > FIT_WIDTH:
        long = {i for i, c in enumerate(columns) if all(isinstance(r.get(c, ""), str) for r in rows)
                and max(len(row[i]) for row in cells) > LEGEND_CELL}
        for row in cells:
            for i in long:
                row[i] = legend.setdefault(row[i], f"[{len(legend) + 1}]")
    table = "\n".join(_lines(columns, cells))
    if not legend:
        return table
    notes = [textwrap.fill(text, FIT_WIDTH, initial_indent=f"{key} ", subsequent_indent=" " * (len(key) + 1))
             for text, key in legend.items()]
    return table + "\n" + "\n".join(notes)


def _lines(columns: list[str], cells: list[list[str]]) -> list[str]:
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths))  # noqa: E731
    return [line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
