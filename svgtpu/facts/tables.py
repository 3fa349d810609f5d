"""The plain fixed-width table every command prints (``--json`` prints the same rows as JSON)."""

from __future__ import annotations


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """A plain fixed-width table of ``rows`` (floats to 4 significant digits)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(rows[0])

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths))  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells])
