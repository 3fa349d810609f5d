"""The kernel-writing notebooks' exercises: every hidden solution passes its check, every untouched skeleton
fails it, and so does every named wrong answer a student plausibly writes.

The notebooks' cells are tagged ``given`` (code the student is handed), ``skeleton``, ``solution`` and
``check``, and with their exercise (``ex1`` ... ``ex5`` in 01, ``ex6`` ... ``ex9`` in 01b).  The cells run
here in order in one namespace, as a student would run them, without the compile, figure and TPU cells.
A wrong answer replaces the solution cell: it is put into the namespace after the skeleton ran.
"""

import functools

import jax
import jax.numpy as jnp
import nbformat
import pytest
from jax.experimental import pallas as pl

from svgtpu.kernels import lessons
from svgtpu.kernels.lessons import MASK_VALUE, online_softmax_update, tile_mask
from svgtpu.kernels.plan import FIRST, LAST
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.report.reproduce import NOTEBOOK_DIR

NOTEBOOKS = {"01_pallas_in_five_kernels": ("ex1", "ex2", "ex3", "ex4", "ex5")}
EXERCISES = [(nb, ex) for nb, exercises in NOTEBOOKS.items() for ex in exercises]


def _cells(notebook):
    nb = nbformat.read(NOTEBOOK_DIR / f"{notebook}.ipynb", as_version=4)
    return [(set(c.metadata.get("tags", [])), c.source) for c in nb.cells if c.cell_type == "code"]


def _parameters(notebook, tmp_path, show_solutions):
    [source] = [s for tags, s in _cells(notebook) if "parameters" in tags]
    namespace = {}
    exec(source, namespace)
    namespace.update(show_solutions=show_solutions, figures_dir=str(tmp_path), profile="quick")
    return namespace


def _run_to_check(notebook, namespace, exercise: str, instead: dict | None = None) -> str:
    """Run the given, skeleton and solution cells in order up to ``exercise``'s check; return that check.

    ``instead``: what to put into the namespace in place of ``exercise``'s solution cell (``{}``: nothing,
    the untouched skeleton; a dict of names: a wrong answer).  Without it every earlier check runs too.
    """
    for tags, source in _cells(notebook):
        current = next((t for t in tags if t.startswith("ex") and t[2:].isdigit()), None)
        if "check" in tags and current == exercise:
            return source
        if "solution" in tags and current == exercise and instead is not None:
            namespace.update(instead)
        elif "given" in tags or "skeleton" in tags or "solution" in tags:
            exec(source, namespace)
        elif "check" in tags and instead is None:
            exec(source, namespace)
    raise AssertionError(f"no check cell for {exercise}")


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_cell_is_tagged_and_each_exercise_has_its_three_cells(notebook):
    cells = _cells(notebook)
    for exercise in NOTEBOOKS[notebook]:
        kinds = sorted(k for tags, _ in cells if exercise in tags for k in tags & {"skeleton", "solution", "check"})
        assert kinds == ["check", "skeleton", "solution"], exercise
    for tags, source in cells:
        if "solution" in tags:
            assert source.startswith("if show_solutions:"), "a solution is imported only when asked for"
        if "check" in tags:
            assert "whose(" in source.splitlines()[0], "every check first prints whose code it tests"
    [parameters] = [s for tags, s in cells if "parameters" in tags]
    assert "show_solutions = False" in parameters, "Run All must never replace a student's code"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_hidden_solution_passes_its_check(notebook, tmp_path):
    namespace = _parameters(notebook, tmp_path, show_solutions=True)
    exec(_run_to_check(notebook, namespace, NOTEBOOKS[notebook][-1]), namespace)   # and every check on the way


@pytest.mark.parametrize("notebook, exercise", EXERCISES)
def test_every_untouched_skeleton_fails_its_check(notebook, exercise, tmp_path):
    namespace = _parameters(notebook, tmp_path, show_solutions=True)
    check = _run_to_check(notebook, namespace, exercise, instead={})   # everything before it runs cleanly
    with pytest.raises(AssertionError):
        exec(check, namespace)


# -- wrong answers a student plausibly writes -----------------------------------------------------

def _matmul_kernel(*, accumulate_in="scratch", f32_result=True):
    def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
        k = pl.program_id(2)
        target = acc_ref if accumulate_in == "scratch" else o_ref

        @pl.when(k == 0)
        def _zero():
            target[...] = jnp.zeros(target.shape, target.dtype)

        product = (jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32) if f32_result
                   else jnp.dot(x_ref[...], y_ref[...]))
        target[...] += product.astype(target.dtype)

        if accumulate_in == "scratch":
            @pl.when(k == pl.num_programs(2) - 1)
            def _write():
                o_ref[...] = acc_ref[...].astype(o_ref.dtype)
    return matmul_kernel


def _softmax_update(*, f32_result=True, cast_p=True, rescale=True):
    def update(s, v, m_prev, l_prev, acc_prev):
        m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new) if rescale else 1.0
        p = jnp.exp(s - m_new)
        p = p.astype(v.dtype) if cast_p else p
        pv = jnp.dot(p, v, preferred_element_type=jnp.float32) if f32_result else jnp.dot(p, v)
        return m_new, alpha * l_prev + p.sum(axis=-1, keepdims=True), alpha * acc_prev + pv
    return update


def _sparse_kernel(*, fast_path=False, guard="m", masking="finite", f32_scores=True, reset=True,
                   mask_full_tiles=False):
    """A student's kernel 4 (``fast_path=False``) or 5, with one of the usual slips; the defaults are right."""
    start, masked = (MASK_VALUE, MASK_VALUE) if masking == "finite" else (-jnp.inf, -jnp.inf)

    def kernel(q_tile_ref, kv_tile_ref, kind_ref, flags_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref,
               *, tiles):
        s = pl.program_id(0)
        kind, flags = kind_ref[s], flags_ref[s]

        if reset:
            @pl.when((flags & FIRST) != 0)
            def _reset():
                m_ref[...] = jnp.full(m_ref.shape, start, jnp.float32)
                l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
                acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        def update(with_mask):
            dot = functools.partial(jax.lax.dot_general, dimension_numbers=(((1,), (1,)), ((), ())))
            scores = (dot(q_ref[...], k_ref[...], preferred_element_type=jnp.float32) if f32_scores
                      else dot(q_ref[...], k_ref[...])) * tiles.scale
            if with_mask:
                scores = jnp.where(tile_mask(tiles, q_tile_ref[s], kv_tile_ref[s]), scores, masked)
            m_ref[...], l_ref[...], acc_ref[...] = online_softmax_update(scores, v_ref[...], m_ref[...], l_ref[...],
                                                                         acc_ref[...])

        if fast_path:
            pl.when(kind == FULL)(lambda: update(mask_full_tiles))
            pl.when(kind == PARTIAL)(lambda: update(True))
        else:
            pl.when(kind != EMPTY)(lambda: update(True))

        @pl.when((flags & LAST) != 0)
        def _write():
            if guard == "l":
                seen = l_ref[...] > 0
            else:
                seen = m_ref[...] > (0.5 * MASK_VALUE if masking == "finite" else -jnp.inf)
            o_ref[...] = jnp.where(seen, acc_ref[...] / jnp.where(seen, l_ref[...], 1.0), 0.0).astype(o_ref.dtype)
    return kernel


#: ``(notebook, exercise, name) -> (what replaces the solution, what its check's failure says)``: each fails
#: its check, and for the reason it was written for.
WRONG = {
    ("01_pallas_in_five_kernels", "ex2", "sum kept in the bfloat16 output block"):
        ({"matmul_kernel": _matmul_kernel(accumulate_in="output")}, "bfloat16 inputs"),
    ("01_pallas_in_five_kernels", "ex2", "no preferred_element_type"):
        ({"matmul_kernel": _matmul_kernel(f32_result=False)}, "returns bfloat16"),
    ("01_pallas_in_five_kernels", "ex3", "PV matmul without preferred_element_type"):
        ({"online_softmax_update": _softmax_update(f32_result=False)}, "returns bfloat16"),
    ("01_pallas_in_five_kernels", "ex3", "p not cast before the PV matmul"):
        ({"online_softmax_update": _softmax_update(cast_p=False)}, "float32 x bfloat16"),
    ("01_pallas_in_five_kernels", "ex3", "no rescale by alpha"):
        ({"online_softmax_update": _softmax_update(rescale=False)}, "float32 inputs"),
    ("01_pallas_in_five_kernels", "ex4", "final write guarded on l > 0"):
        ({"sparse_kernel": _sparse_kernel(guard="l")}, "dead queries inside visited tiles"),
    ("01_pallas_in_five_kernels", "ex4", "-inf masking without a guard"):
        ({"sparse_kernel": _sparse_kernel(masking="-inf")}, "no sink"),
    ("01_pallas_in_five_kernels", "ex4", "scores without preferred_element_type"):
        ({"sparse_kernel": _sparse_kernel(f32_scores=False)}, "returns bfloat16"),
    ("01_pallas_in_five_kernels", "ex4", "no reset at a row's first step"):
        ({"sparse_kernel": _sparse_kernel(reset=False)}, "dead queries inside visited tiles"),
    ("01_pallas_in_five_kernels", "ex5", "full tiles still consult the mask"):
        ({"fast_path_kernel": _sparse_kernel(fast_path=True, mask_full_tiles=True)}, "wrong on full tiles only"),
    ("01_pallas_in_five_kernels", "ex5", "final write guarded on l > 0"):
        ({"fast_path_kernel": _sparse_kernel(fast_path=True, guard="l")}, "true rule"),
    ("01_pallas_in_five_kernels", "ex5", "-inf masking without a guard"):
        ({"fast_path_kernel": _sparse_kernel(fast_path=True, masking="-inf")}, "no sink"),
}

#: The same factories' right answers: they pass, so a wrong answer fails for its slip, not for the factory.
RIGHT = {
    ("01_pallas_in_five_kernels", "ex2"): {"matmul_kernel": _matmul_kernel()},
    ("01_pallas_in_five_kernels", "ex3"): {"online_softmax_update": _softmax_update()},
    ("01_pallas_in_five_kernels", "ex4"): {"sparse_kernel": _sparse_kernel()},
    ("01_pallas_in_five_kernels", "ex5"): {"fast_path_kernel": _sparse_kernel(fast_path=True)},
}


@pytest.mark.parametrize("notebook, exercise, name", list(WRONG), ids=[f"{e}: {n}" for _, e, n in WRONG])
def test_every_named_wrong_answer_fails_its_check(notebook, exercise, name, tmp_path, capsys):
    namespace = _parameters(notebook, tmp_path, show_solutions=True)
    instead, reason = WRONG[notebook, exercise, name]
    check = _run_to_check(notebook, namespace, exercise, instead=instead)
    with pytest.raises(AssertionError, match=reason):
        exec(check, namespace)
    assert "checking your code" in capsys.readouterr().out


@pytest.mark.parametrize("notebook, exercise", list(RIGHT))
def test_the_wrong_answers_right_twin_passes(notebook, exercise, tmp_path, capsys):
    namespace = _parameters(notebook, tmp_path, show_solutions=True)
    exec(_run_to_check(notebook, namespace, exercise, instead=RIGHT[notebook, exercise]), namespace)
    assert "checking your code" in capsys.readouterr().out


def test_whose_names_the_worked_solution_only_for_its_own_functions():
    from svgtpu.kernels.lesson_checks import whose
    assert whose(lessons.stamp_kernel, lessons.stamped_copy).startswith("the worked solution")
    assert whose(_sparse_kernel()) == "your code"
    assert whose(lessons.stamp_kernel, _sparse_kernel()) == "your code with parts of the worked solution"
