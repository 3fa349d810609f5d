"""Notebook 01's five exercises: every hidden solution passes its check, every untouched skeleton fails it.

The notebook's cells are tagged ``given`` (code the student is handed), ``skeleton``, ``solution`` and
``check``, and ``ex1`` ... ``ex5``.  The cells run here in order in one namespace, as a student would
run them, without the compile, figure and TPU cells.
"""

import nbformat
import pytest

from svgtpu.report.reproduce import NOTEBOOK_DIR

NOTEBOOK = NOTEBOOK_DIR / "01_pallas_in_five_kernels.ipynb"
EXERCISES = ("ex1", "ex2", "ex3", "ex4", "ex5")


def _cells():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return [(set(c.metadata.get("tags", [])), c.source) for c in nb.cells if c.cell_type == "code"]


def _parameters(tmp_path, show_solutions):
    [source] = [s for tags, s in _cells() if "parameters" in tags]
    namespace = {}
    exec(source, namespace)
    namespace.update(show_solutions=show_solutions, figures_dir=str(tmp_path), profile="quick")
    return namespace


def _exercise(tags):
    return next((t for t in tags if t in EXERCISES), None)


def _run_to_check(namespace, exercise: str, skeleton_of: str | None = None) -> str:
    """Run the given, skeleton and solution cells in order up to ``exercise``'s check; return that check.

    ``skeleton_of``: the exercise whose solution cell is skipped, so that its check sees the untouched
    skeleton.  Without it every earlier check runs too.
    """
    for tags, source in _cells():
        current = _exercise(tags)
        if "check" in tags and current == exercise:
            return source
        if "given" in tags or "skeleton" in tags or ("solution" in tags and current != skeleton_of):
            exec(source, namespace)
        elif "check" in tags and skeleton_of is None:
            exec(source, namespace)
    raise AssertionError(f"no check cell for {exercise}")


def test_every_cell_is_tagged_and_each_exercise_has_its_three_cells():
    cells = _cells()
    for exercise in EXERCISES:
        kinds = sorted(k for tags, _ in cells if exercise in tags for k in tags & {"skeleton", "solution", "check"})
        assert kinds == ["check", "skeleton", "solution"], exercise
    for tags, source in cells:
        if "solution" in tags:
            assert source.startswith("if show_solutions:"), "a solution is imported only when asked for"


def test_every_hidden_solution_passes_its_check(tmp_path):
    namespace = _parameters(tmp_path, show_solutions=True)
    exec(_run_to_check(namespace, EXERCISES[-1]), namespace)   # and every check on the way


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_untouched_skeleton_fails_its_check(exercise, tmp_path):
    namespace = _parameters(tmp_path, show_solutions=True)
    check = _run_to_check(namespace, exercise, skeleton_of=exercise)   # everything before it runs cleanly
    with pytest.raises(AssertionError):
        exec(check, namespace)
