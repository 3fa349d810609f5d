"""``svgtpu paper``: fill the paper's tables and figure blocks from the results file.

The write-up (``paper/svgtpu.md``, a short note), its appendix (``paper/appendix.md``, the long
per-claim tables) and the README never contain a typed number of ours.  They hold marker pairs and inline
markers, and :func:`generate` regenerates what is between them from ``figures/results.json``, one job per module:

- :mod:`svgtpu.report.blocks`: the markers and what each renders (:func:`~svgtpu.report.blocks.fill`);
- :mod:`svgtpu.report.tables`: the tables (claims, per-claim results, figures, compiled, GPU runs);
- :mod:`svgtpu.report.verdicts`: does it reproduce? the rules and the verdict rows;
- :mod:`svgtpu.report.published`: the published numbers prose may quote, and the stray numbers typed by hand;
- :mod:`svgtpu.report.budget`: the note's word budget.
"""

from __future__ import annotations

import os
from pathlib import Path

from svgtpu.errors import BadInput, user_file
from svgtpu.facts.outputs import write_text
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.facts.results import RESULTS_NAME, load_results, results_path, write_results
from svgtpu.report.blocks import fill

PAPER = REPO_ROOT / "paper" / "svgtpu.md"
#: The paper's appendix: every result of every claim, so the note itself prints each table once.
APPENDIX = REPO_ROOT / "paper" / "appendix.md"
README = REPO_ROOT / "README.md"
#: Each claim's verdict per round and why it moved, generated from ``figures/verdict_history.json``.
VERDICT_HISTORY_DOC = REPO_ROOT / "docs" / "verdict_history.md"
NOTEBOOKS = REPO_ROOT / "notebooks"
#: The results the paper and README are filled from: what ``make figures`` writes and git tracks.
COMMITTED_RESULTS = REPO_ROOT / "figures" / RESULTS_NAME


def _with_tpu_runs_recorded(data: dict, path: Path) -> dict:
    """``data`` with the entries the counted TPU runs beside it give (``tpu-runs/``,
    :func:`svgtpu.facts.tpu_runs.with_tpu_runs`), written back into the results file ``path`` when they change it:
    how a committed run reaches ``figures/results.json`` (``svgtpu paper``, ``make figures``)."""
    from svgtpu.facts.tpu_runs import TPU_RUNS_DIR, with_tpu_runs
    updated = with_tpu_runs(data, path.parent / TPU_RUNS_DIR.name)
    if updated != data:
        write_results(updated, path)
    return updated


def generate(results: str | os.PathLike | None = None,
             targets: list[str | os.PathLike] | None = None, blocks: dict[str, str] | None = None) -> list[dict]:
    """Regenerate the marker blocks of each target file (default: the paper, its appendix and the
    README) from the results file, and the :data:`~svgtpu.report.blocks.GIVEN_BLOCKS` from ``blocks``; returns what was done per file.

    The paper and README are filled only from the committed results (:data:`COMMITTED_RESULTS`): a
    scratch or test run must name its own target files, so it never writes its numbers into them.
    """
    path = Path(results) if results is not None else results_path()
    if not targets and path.resolve() != COMMITTED_RESULTS.resolve():
        raise BadInput(f"results must be {COMMITTED_RESULTS.relative_to(REPO_ROOT)} to fill the paper and the "
                       f"README, got {path}; name the files to fill to use another results file")
    with user_file("results", path):
        data = load_results(path)
    figures = path.parent
    data = _with_tpu_runs_recorded(data, path)
    files = [Path(t) for t in targets] if targets else [PAPER, APPENDIX, VERDICT_HISTORY_DOC] + (
        [README] if README.exists() else [])
    filled = []   # every file filled before any is written: a refused one leaves all as they were
    for target in files:
        if not target.exists():
            raise BadInput(f"paper target {target} does not exist")
        with user_file("paper target", target):
            text = target.read_text()
        new, names = fill(text, data, target.resolve(), figures.resolve(), blocks)
        if not names:
            raise BadInput(f"paper target {target} has no svgtpu markers (<!-- svgtpu:begin NAME --> ... <!-- svgtpu:end "
                           "NAME --> or <!-- svgtpu:value CLAIM.NAME --> ... <!-- /svgtpu -->): nothing to fill")
        filled.append((target, text, new, names))
    report = []
    for target, text, new, names in filled:
        if new != text:
            with user_file("paper target", target):
                write_text(target, new)
        report.append({"file": str(target), "blocks": len(names), "changed": new != text})
    return report


__all__ = ["PAPER", "APPENDIX", "README", "VERDICT_HISTORY_DOC", "NOTEBOOKS", "COMMITTED_RESULTS", "generate"]
