"""The write-up's claims and the numbers it reports: one definition, imported wherever they are used.

These are the targets we compare with (results file, paper, cost model), never numbers of ours and
never something to fit a model to.  Fractions are stored as fractions (0.882, not 88.2).
"""

#: The claims this package reproduces; ``Q`` collects video quality (SVG's own metric).
CLAIMS = {
    "C1": "end-to-end speedup of 1440p video generation",
    "C2": "share of total time in self-attention at 1440p",
    "C3": "share of boundary-masking (partial) tiles before -> after mask alignment",
    "C4": "mask-free fast paths lower self-attention latency",
    "C5": "attention cost grows quadratically with resolution",
    "Q": "dense vs sparse video fidelity (not claimed by the write-up; SVG's own metric)",
}

#: What the write-up reports, keyed by ``(claim, name)``: Wan 2.1 14B at 1440p on TPU v6e-8.
REPORTED = {
    ("C1", "speedup"): 1.69,                   # end-to-end generation, SVG vs dense
    ("C1", "minutes_saved"): 16.0,             # "over 16 minutes" saved per video
    ("C2", "attention_share_1440p"): 0.882,    # self-attention share of total time
    ("C3", "partial_share_before"): 0.2755,    # partial tiles / computed tiles, SVG mask
    ("C3", "partial_share_after"): 0.0222,     # the same after tile alignment
}

#: The write-up prints shares as percentages with two decimals (27.55 %): one unit of its last digit.
REPORTED_SHARE_UNIT = 1e-4


def rounds_to(value: float, target: float) -> bool:
    """``value`` printed as the write-up prints shares equals ``target`` (``0.27554`` -> 27.55 %): within
    half a unit of its last digit."""
    return abs(value - target) <= REPORTED_SHARE_UNIT / 2 + 1e-12


def reported_json() -> dict[str, float]:
    """:data:`REPORTED` keyed ``"claim.name"`` (``"C1.speedup"``), for JSON output."""
    return {f"{claim}.{name}": value for (claim, name), value in REPORTED.items()}


__all__ = ["CLAIMS", "REPORTED", "REPORTED_SHARE_UNIT", "reported_json", "rounds_to"]
