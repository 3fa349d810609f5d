"""The kernel-writing notebooks' exercises: every untouched skeleton fails its check, and so does every named wrong
answer a student plausibly writes.  That every hidden solution passes its check is the notebooks' own quick run
(``tests/test_notebooks.py``: ``svgtpu reproduce`` runs them with ``show_solutions = True``, every check cell included).

The notebooks' cells are tagged ``given`` (code the student is handed), ``skeleton``, ``solution`` and
``check``, and with their exercise (``ex1`` ... ``ex5`` in 01, ``ex6`` ... ``ex11`` in 01b).  The cells run
here in order in one namespace, as a student would run them, without the compile, figure and TPU cells.
A wrong answer replaces the solution cell: it is put into the namespace after the skeleton ran.
"""

import functools

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from svgtpu.course import lessons, lessons_by_hand
from svgtpu.course.lessons import MASK_VALUE, online_softmax_update, tile_mask
from svgtpu.kernels.plan import FIRST, LAST
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.report.reproduce import NOTEBOOK_DIR

NOTEBOOKS = {"01_pallas_in_five_kernels": ("ex1", "ex2", "ex3", "ex4", "ex5"),
             "01b_block_sparse_by_hand": ("ex6", "ex7", "ex8", "ex9", "ex10", "ex11")}
#: The deadline the DMA check gives each run in these tests, its last resort only: a wait that nothing will signal
#: fails as it starts ("a deadlock: ...", never "no result after"), so no case here waits for it, and a slow right
#: answer on a loaded machine (the worked pipeline's first run compiles) is never stopped by it.
DMA_DEADLINE_S = 120
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


def _run_to_check(notebook, namespace, exercise: str, instead: dict) -> str:
    """Run the given, skeleton and solution cells in order up to ``exercise``'s check; return that check.

    ``instead``: what to put into the namespace in place of ``exercise``'s solution cell (``{}``: nothing,
    the untouched skeleton; a dict of names: a wrong answer or its right twin).
    """
    for tags, source in _cells(notebook):
        current = next((t for t in tags if t.startswith("ex") and t[2:].isdigit()), None)
        if "check" in tags and current == exercise:
            return source
        if "solution" in tags and current == exercise:
            namespace.update(instead)
        elif "given" in tags or "skeleton" in tags or "solution" in tags:
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


def _softmax_update(*, f32_result=True, cast_p=True, rescale=True, keep_m_prev=True, sum_of="p", pv_dtype=None):
    """A student's exercise 3: ``keep_m_prev=False`` takes this tile's row max alone for ``m``; ``sum_of="p16"`` sums
    ``p`` after its cast to bfloat16; ``pv_dtype="v"``: the PV result cast to ``v.dtype`` before it is added to ``acc``."""
    def update(s, v, m_prev, l_prev, acc_prev):
        m_tile = s.max(axis=-1, keepdims=True)
        m_new = jnp.maximum(m_prev, m_tile) if keep_m_prev else m_tile
        alpha = jnp.exp(m_prev - m_new) if rescale else 1.0
        p32 = jnp.exp(s - m_new)
        p = p32.astype(v.dtype) if cast_p else p32
        pv = jnp.dot(p, v, preferred_element_type=jnp.float32) if f32_result else jnp.dot(p, v)
        pv = pv.astype(v.dtype) if pv_dtype == "v" else pv
        summed = p if sum_of == "p16" else p32
        return m_new, alpha * l_prev + summed.sum(axis=-1, keepdims=True), alpha * acc_prev + pv
    return update


def _sparse_kernel(*, fast_path=False, guard="m", masking="finite", f32_scores=True, reset=True,
                   mask_full_tiles=False, scale_after_mask=False, seen=None):
    """A student's kernel 4 (``fast_path=False``) or 5, with one of the usual slips; the defaults are right.
    ``seen``: a set that records the input dtype and mask rule of every trace (what the check ran)."""
    start, masked = (MASK_VALUE, MASK_VALUE) if masking == "finite" else (-jnp.inf, -jnp.inf)

    def kernel(q_tile_ref, kv_tile_ref, kind_ref, flags_ref, q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref,
               *, tiles):
        s = pl.program_id(0)
        kind, flags = kind_ref[s], flags_ref[s]
        if seen is not None:
            seen.add((str(q_ref.dtype), tiles.allowed.__name__))

        if reset:
            @pl.when((flags & FIRST) != 0)
            def _reset():
                m_ref[...] = jnp.full(m_ref.shape, start, jnp.float32)
                l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
                acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        def update(with_mask):
            dot = functools.partial(jax.lax.dot_general, dimension_numbers=(((1,), (1,)), ((), ())))
            scores = (dot(q_ref[...], k_ref[...], preferred_element_type=jnp.float32) if f32_scores
                      else dot(q_ref[...], k_ref[...]))
            scores = scores if scale_after_mask else scores * tiles.scale
            if with_mask:
                scores = jnp.where(tile_mask(tiles, q_tile_ref[s], kv_tile_ref[s]), scores, masked)
            scores = scores * tiles.scale if scale_after_mask else scores
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


def _plan(*, placeholder=True, flags=True, order="rows", placeholder_kv=0):
    """A student's row plan: the worked one, with one slip (``placeholder_kv``: the kv tile an EMPTY
    placeholder carries, ``"past"`` one past the last tile)."""
    def row_plan(kinds):
        plan = lessons.row_plan(kinds)
        kv = kinds.shape[1] if placeholder_kv == "past" else placeholder_kv
        plan["kv_tile"] = np.where(plan["kind"] == EMPTY, kv, plan["kv_tile"]).astype(np.int32)
        if not placeholder:
            plan = {key: value[plan["kind"] != EMPTY] for key, value in plan.items()}
        if not flags:
            plan["flags"] = np.full_like(plan["flags"], FIRST | LAST)
        if order == "columns":
            columns = np.argsort(plan["kv_tile"], kind="stable")
            plan = {key: value[columns] for key, value in plan.items()}
        return plan
    return row_plan


def _sparse_grid(*, kv_reads="kv_tile", semantics="arbitrary"):
    """A student's scalar-prefetch grid: the worked one, or with the kv index map reading the wrong plan array,
    or with the plan axis marked ``semantics``."""
    if semantics != "arbitrary":
        def sparse_attention(q, k, v, kernel, plan, tiles, interpret=True):
            Lq, Lk = -(-q.shape[0] // tiles.block_q) * tiles.block_q, -(-k.shape[0] // tiles.block_kv) * tiles.block_kv
            q, k, v = (jnp.pad(x, ((0, n - x.shape[0]), (0, 0))) for x, n in ((q, Lq), (k, Lk), (v, Lk)))
            d = q.shape[1]
            q_spec = pl.BlockSpec((tiles.block_q, d), lambda s, qt, kt, kind, flags: (qt[s], 0))
            kv_spec = pl.BlockSpec((tiles.block_kv, d), lambda s, qt, kt, kind, flags: (kt[s], 0))
            out = pl.pallas_call(
                functools.partial(kernel, tiles=tiles),
                grid_spec=pltpu.PrefetchScalarGridSpec(
                    num_scalar_prefetch=4, grid=(len(plan["q_tile"]),), in_specs=[q_spec, kv_spec, kv_spec],
                    out_specs=q_spec,
                    scratch_shapes=[pltpu.VMEM((tiles.block_q, 1), jnp.float32), pltpu.VMEM((tiles.block_q, 1), jnp.float32),
                                    pltpu.VMEM((tiles.block_q, d), jnp.float32)]),
                out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)), interpret=interpret,
            )(*(jnp.asarray(plan[key], jnp.int32) for key in ("q_tile", "kv_tile", "kind", "flags")), q, k, v)
            return out[:tiles.L]
        return sparse_attention
    if kv_reads == "kv_tile":
        return lessons.sparse_attention

    def sparse_attention(q, k, v, kernel, plan, tiles, interpret=True):
        return lessons.sparse_attention(q, k, v, kernel, {**plan, "kv_tile": plan["q_tile"]}, tiles, interpret)
    return sparse_attention


def _chunked_kernel(*, offset=True, f32_scores=True, chunks=None, state_read_once=False):
    """``chunks``: the chunk loop's bound written as a number instead of ``k_ref.shape[0] // block_kv_compute``;
    ``state_read_once``: every chunk updates the state read before the loop (the refs are written, never re-read)."""
    def chunked_flash_kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, scale, block_kv_compute):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _reset():
            m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
            l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)
            acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

        before = (m_ref[...], l_ref[...], acc_ref[...])

        def chunk(c, carry):
            keys = pl.ds(c * block_kv_compute if offset else 0, block_kv_compute)
            kw = {"preferred_element_type": jnp.float32} if f32_scores else {}
            s = lax.dot_general(q_ref[...], k_ref[keys, :], (((1,), (1,)), ((), ())), **kw) * scale
            state = before if state_read_once else (m_ref[...], l_ref[...], acc_ref[...])
            m_ref[...], l_ref[...], acc_ref[...] = online_softmax_update(s, v_ref[keys, :], *state)
            return carry

        lax.fori_loop(0, chunks or k_ref.shape[0] // block_kv_compute, chunk, 0)

        @pl.when(j == pl.num_programs(1) - 1)
        def _write():
            o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)
    return chunked_flash_kernel


def _dma_kernel(*, slots=2, wait="before"):
    """A student's hand-written pipeline: ``slots=1`` prefetches into the slot being read; ``wait="after"``
    computes on a slot before waiting for its copy."""
    def double_buffered_matmul_kernel(x_hbm, w_ref, o_ref, buffers, copied, *, block_rows):
        n = x_hbm.shape[0] // block_rows

        def copy(i, slot):
            return pltpu.make_async_copy(x_hbm.at[pl.ds(i * block_rows, block_rows)], buffers.at[slot],
                                         copied.at[slot])

        copy(0, 0).start()

        def step(i, carry):
            slot = i % slots
            if wait == "before":
                copy(i, slot).wait()

            @pl.when(i + 1 < n)
            def _prefetch():
                copy(i + 1, (i + 1) % slots).start()

            rows = pl.ds(i * block_rows, block_rows)
            o_ref[rows, :] = jnp.dot(buffers[slot], w_ref[...], preferred_element_type=jnp.float32)
            if wait == "after":
                copy(i, slot).wait()
            return carry

        lax.fori_loop(0, n, step, 0)
    return double_buffered_matmul_kernel


def _prefetching_kernel(*, first=True, into="other", guard="when"):
    """The worked pipeline's order (start block 0; per step: prefetch block i + 1, wait for block i, compute)
    with one slip: ``first=False`` never starts block 0's copy; ``into="read"`` prefetches into the slot
    being read (two slots); ``guard=None`` prefetches on the last step too, past the end of ``x``;
    ``guard="modular"`` prefetches block ``(i + 1) % n`` unguarded, in range but never waited for."""
    def double_buffered_matmul_kernel(x_hbm, w_ref, o_ref, slots, copied, *, block_rows):
        n = x_hbm.shape[0] // block_rows

        def copy(i, slot):
            return pltpu.make_async_copy(x_hbm.at[pl.ds(i * block_rows, block_rows)], slots.at[slot], copied.at[slot])

        if first:
            copy(0, 0).start()

        def step(i, carry):
            slot = i % 2
            target = 1 - slot if into == "other" else slot
            if guard in ("when", "strict"):   # strict: one block short, which a later step waits for
                pl.when(i + 1 < n - (guard == "strict"))(lambda: copy(i + 1, target).start())
            else:
                copy((i + 1) % n if guard == "modular" else i + 1, target).start()
            copy(i, slot).wait()
            o_ref[pl.ds(i * block_rows, block_rows), :] = jnp.dot(slots[slot], w_ref[...],
                                                                  preferred_element_type=jnp.float32)
            return carry

        lax.fori_loop(0, n, step, 0)
    return double_buffered_matmul_kernel


def _emit_kernel(*, block_index="i", out_block="i"):
    def emit_pipeline_matmul_kernel(x_hbm, w_ref, o_hbm, *, block_rows):
        def body(x_block, o_block):
            o_block[...] = jnp.dot(x_block[...], w_ref[...], preferred_element_type=jnp.float32)

        index = {"i": lambda i: (i, 0), "0": lambda i: (0, 0), "ahead": lambda i: (i + 1, 0)}
        pltpu.emit_pipeline(body, grid=(x_hbm.shape[0] // block_rows,),
                            in_specs=[pl.BlockSpec((block_rows, x_hbm.shape[1]), index[block_index])],
                            out_specs=[pl.BlockSpec((block_rows, o_hbm.shape[1]), index[out_block])])(x_hbm, o_hbm)
    return emit_pipeline_matmul_kernel


def _heads(*, semantics=("parallel", "parallel", "arbitrary"), head_index="h", kv_block="block_kv"):
    def mha_flash_attention(q, k, v, kernel, block_q=128, block_kv=128, interpret=True):
        heads, L, d = q.shape
        pick = (lambda h: h) if head_index == "h" else (lambda h: 0)
        q_spec = pl.BlockSpec((None, block_q, d), lambda h, i, j: (pick(h), i, 0))
        kv_spec = pl.BlockSpec((None, block_kv if kv_block == "block_kv" else block_q, d),
                               lambda h, i, j: (pick(h), j, 0))
        return pl.pallas_call(
            functools.partial(kernel, scale=1 / d ** 0.5), grid=(heads, L // block_q, L // block_kv),
            in_specs=[q_spec, kv_spec, kv_spec], out_specs=pl.BlockSpec((None, block_q, d), lambda h, i, j: (h, i, 0)),
            scratch_shapes=[pltpu.VMEM((block_q, 1), jnp.float32), pltpu.VMEM((block_q, 1), jnp.float32),
                            pltpu.VMEM((block_q, d), jnp.float32)],
            out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics), interpret=interpret)(q, k, v)
    return mha_flash_attention


def _key_major_update(*, product="v^T p", cast_p=True, f32_result=True, keep_m_prev=True, sum_of="p", pv_dtype=None):
    """A student's exercise 11: ``product="p v, transposed"`` keeps kernel 3's query-major product; the other
    slips as in :func:`_softmax_update`."""
    def key_major_update(s, v, m_prev, l_prev, acc_prev):
        m_tile = s.max(axis=0, keepdims=True)
        m_new = jnp.maximum(m_prev, m_tile) if keep_m_prev else m_tile
        alpha = jnp.exp(m_prev - m_new)
        p = jnp.exp(s - m_new)
        p_in = p.astype(v.dtype) if cast_p else p
        kw = {"preferred_element_type": jnp.float32} if f32_result else {}
        if product == "v^T p":
            pv = lax.dot_general(v, p_in, (((0,), (0,)), ((), ())), **kw)
        else:
            pv = jnp.dot(p_in.T, v, **kw).T
        pv = pv.astype(v.dtype) if pv_dtype == "v" else pv
        summed = p_in if sum_of == "p16" else p
        return m_new, alpha * l_prev + summed.sum(axis=0, keepdims=True), alpha * acc_prev + pv
    return key_major_update


NB, NB_B = "01_pallas_in_five_kernels", "01b_block_sparse_by_hand"

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
    ("01_pallas_in_five_kernels", "ex3", "m_prev dropped: the tile's own row max"):
        ({"online_softmax_update": _softmax_update(keep_m_prev=False)}, "maximum lies in an earlier tile"),
    ("01_pallas_in_five_kernels", "ex3", "l summed over p in bfloat16"):
        ({"online_softmax_update": _softmax_update(sum_of="p16")}, "a sum over bfloat16 values"),
    ("01_pallas_in_five_kernels", "ex3", "PV result rounded to bfloat16 before it is added"):
        ({"online_softmax_update": _softmax_update(pv_dtype="v")}, "before it is accumulated"),
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
    ("01_pallas_in_five_kernels", "ex5", "scores scaled after the mask"):
        ({"fast_path_kernel": _sparse_kernel(fast_path=True, scale_after_mask=True)}, "scaled after the mask"),
    ("01_pallas_in_five_kernels", "ex5", "-inf masking without a guard"):
        ({"fast_path_kernel": _sparse_kernel(fast_path=True, masking="-inf")}, "no sink"),
    (NB_B, "ex6", "no placeholder step for a q row with no tile"):
        ({"row_plan": _plan(placeholder=False), "sparse_attention": _sparse_grid()}, "some q row has no step"),
    (NB_B, "ex6", "FIRST | LAST on every step"):
        ({"row_plan": _plan(flags=False), "sparse_attention": _sparse_grid()}, "FIRST is not exactly"),
    (NB_B, "ex6", "plan in column order"):
        ({"row_plan": _plan(order="columns"), "sparse_attention": _sparse_grid()}, "q-row order"),
    (NB_B, "ex6", "the kv index map reads q_tile"):
        ({"row_plan": _plan(), "sparse_attention": _sparse_grid(kv_reads="q_tile")}, "sink"),
    (NB_B, "ex6", "the EMPTY placeholder carries kv_tile -1"):
        ({"row_plan": _plan(placeholder_kv=-1), "sparse_attention": _sparse_grid()},
         r"Out-of-bounds block index \(-1, 0\).*EMPTY placeholder"),
    (NB_B, "ex6", "the EMPTY placeholder carries kv_tile one past the last tile"):
        ({"row_plan": _plan(placeholder_kv="past"), "sparse_attention": _sparse_grid()},
         "Out-of-bounds block index.*EMPTY placeholder"),
    (NB_B, "ex6", "the plan axis marked parallel"):
        ({"row_plan": _plan(), "sparse_attention": _sparse_grid(semantics="parallel")},
         "two cores: Revisited block.*one core"),
    (NB_B, "ex7", "every chunk reads the first keys"):
        ({"chunked_flash_kernel": _chunked_kernel(offset=False)}, "float32, block_kv_compute"),
    (NB_B, "ex7", "the chunk loop bound hard-coded"):
        ({"chunked_flash_kernel": _chunked_kernel(chunks=4)}, "float32, block_kv_compute 256"),
    (NB_B, "ex7", "the softmax state read once before the chunk loop"):
        ({"chunked_flash_kernel": _chunked_kernel(state_read_once=True)}, "only the last chunk of each kv tile counts"),
    (NB_B, "ex7", "chunk scores without preferred_element_type"):
        ({"chunked_flash_kernel": _chunked_kernel(f32_scores=False)}, "returns bfloat16"),
    (NB_B, "ex8", "next block prefetched into the slot being read"):
        ({"double_buffered_matmul_kernel": _dma_kernel(slots=1)}, "a race"),
    (NB_B, "ex8", "a slot read before its copy is waited for"):
        ({"double_buffered_matmul_kernel": _dma_kernel(wait="after")}, "copies land at their wait"),
    (NB_B, "ex8", "hang: next block prefetched into the slot being read, waited for in the other"):
        ({"double_buffered_matmul_kernel": _prefetching_kernel(into="read")}, "a deadlock: .*other slot"),
    (NB_B, "ex8", "hang: block 0's copy never started"):
        ({"double_buffered_matmul_kernel": _prefetching_kernel(first=False)}, "a deadlock: .*block 0's copy"),
    (NB_B, "ex8", "hang: the prefetch guarded one block short"):
        ({"double_buffered_matmul_kernel": _prefetching_kernel(guard="strict")}, r"a deadlock: .*pl.when\(i \+ 1 < n\)"),
    (NB_B, "ex8", "prefetch unguarded: the last step copies past the end of x"):
        ({"double_buffered_matmul_kernel": _prefetching_kernel(guard=None)}, "Out-of-bounds read.*pl.when"),
    (NB_B, "ex8", "prefetch unguarded, wrapped to block 0: a copy never waited for"):
        ({"double_buffered_matmul_kernel": _prefetching_kernel(guard="modular")}, "never waited for.*pl.when"),
    (NB_B, "ex9", "every step reads block 0"):
        ({"emit_pipeline_matmul_kernel": _emit_kernel(block_index="0")}, "TPU interpreter"),
    (NB_B, "ex9", "the out spec's index map one block ahead: a write past the end of o"):
        ({"emit_pipeline_matmul_kernel": _emit_kernel(out_block="ahead")}, "TPU interpreter: Out-of-bounds write.*-> an out spec"),
    (NB_B, "ex10", "the kv axis marked parallel"):
        ({"mha_flash_attention": _heads(semantics=("parallel",) * 3)}, "random order"),
    (NB_B, "ex10", "every axis arbitrary"):
        ({"mha_flash_attention": _heads(semantics=("arbitrary",) * 3)}, "dimension_semantics"),
    (NB_B, "ex10", "the index maps always pick head 0"):
        ({"mha_flash_attention": _heads(head_index="0")}, "interpret=True"),
    (NB_B, "ex10", "kv blocks sized with block_q"):
        ({"mha_flash_attention": _heads(kv_block="block_q")}, "block_q 64, block_kv 128"),
    (NB_B, "ex11", "the PV product still query-major (p turned around and back)"):
        ({"key_major_update": _key_major_update(product="p v, transposed")}, "still query-major"),
    (NB_B, "ex11", "p not cast before the PV matmul"):
        ({"key_major_update": _key_major_update(cast_p=False)}, "bfloat16 x float32"),
    (NB_B, "ex11", "PV matmul without preferred_element_type"):
        ({"key_major_update": _key_major_update(f32_result=False)}, "returns bfloat16"),
    (NB_B, "ex11", "l summed over p in bfloat16"):
        ({"key_major_update": _key_major_update(sum_of="p16")}, "a sum over bfloat16 values"),
    (NB_B, "ex11", "PV result rounded to bfloat16 before it is added"):
        ({"key_major_update": _key_major_update(pv_dtype="v")}, "before it is accumulated"),
    (NB_B, "ex11", "m_prev dropped: the tile's own row max"):
        ({"key_major_update": _key_major_update(keep_m_prev=False)}, "maximum lies in an earlier tile"),
}

#: The input dtype and mask rule of every trace of kernels 4 and 5's right twins, per exercise.
SEEN = {"ex4": set(), "ex5": set()}
#: The same factories' right answers: they pass, so a wrong answer fails for its slip, not for the factory.  Ex11 has
#: none (each compile costs seconds): its factory's right answer is the worked one, which passes above.
RIGHT = {
    ("01_pallas_in_five_kernels", "ex2"): {"matmul_kernel": _matmul_kernel()},
    ("01_pallas_in_five_kernels", "ex3"): {"online_softmax_update": _softmax_update()},
    ("01_pallas_in_five_kernels", "ex4"): {"sparse_kernel": _sparse_kernel(seen=SEEN["ex4"])},
    ("01_pallas_in_five_kernels", "ex5"): {"fast_path_kernel": _sparse_kernel(fast_path=True, seen=SEEN["ex5"])},
    (NB_B, "ex6"): {"row_plan": _plan(), "sparse_attention": _sparse_grid()},
    (NB_B, "ex7"): {"chunked_flash_kernel": _chunked_kernel()},
    (NB_B, "ex8"): {"double_buffered_matmul_kernel": _dma_kernel()},
    (NB_B, "ex8 prefetching"): {"double_buffered_matmul_kernel": _prefetching_kernel()},
    (NB_B, "ex9"): {"emit_pipeline_matmul_kernel": _emit_kernel()},
    (NB_B, "ex10"): {"mha_flash_attention": _heads()},
}


@pytest.mark.parametrize("notebook, exercise, name", list(WRONG), ids=[f"{e}: {n}" for _, e, n in WRONG])
def test_every_named_wrong_answer_fails_its_check(notebook, exercise, name, tmp_path, capsys):
    namespace = _parameters(notebook, tmp_path, show_solutions=True)
    instead, reason = WRONG[notebook, exercise, name]
    check = _run_to_check(notebook, namespace, exercise, instead=instead)
    namespace["dma_deadline_s"] = DMA_DEADLINE_S
    with pytest.raises(AssertionError, match=reason):
        exec(check, namespace)
    assert "checking your code" in capsys.readouterr().out


@pytest.mark.parametrize("notebook, exercise", list(RIGHT))
def test_the_wrong_answers_right_twin_passes(notebook, exercise, tmp_path, capsys):
    namespace = _parameters(notebook, tmp_path, show_solutions=True)
    check = _run_to_check(notebook, namespace, exercise.split()[0], instead=RIGHT[notebook, exercise])
    namespace["dma_deadline_s"] = DMA_DEADLINE_S
    exec(check, namespace)
    assert "checking your code" in capsys.readouterr().out
    if exercise in SEEN:   # what kernels 4 and 5 print on passing ("with and without a sink, ...") is what ran
        assert {(dtype, rule) for dtype in ("float32", "bfloat16") for rule in ("allowed", "band_only")} <= SEEN[exercise]


def test_a_check_reads_the_kernel_as_edited_not_its_first_trace(tmp_path):
    """Ex2's check traces the given ``matmul`` wrapper; JAX caches a trace by function, so a check that reused
    it would fail a kernel the student fixed (and pass one broken later) in the same session."""
    namespace = _parameters(NB, tmp_path, show_solutions=True)
    check = _run_to_check(NB, namespace, "ex2", instead={"matmul_kernel": _matmul_kernel(f32_result=False)})
    with pytest.raises(AssertionError, match="returns bfloat16"):
        exec(check, namespace)
    namespace["matmul_kernel"] = _matmul_kernel()              # fixed, the check rerun
    exec(check, namespace)
    namespace["matmul_kernel"] = _matmul_kernel(f32_result=False)  # broken again, the check rerun
    with pytest.raises(AssertionError, match="returns bfloat16"):
        exec(check, namespace)


def test_the_lessons_updates_are_the_production_update():
    """The course's online-softmax updates (query-major, exercise 3; key-major, exercise 11) carry the same state
    as the production kernels' ``tile_update`` and ``tile_update_key_major`` over a masked tile in three chunks:
    the sums ``l`` and outputs ``acc`` agree step by step (the production kernels keep ``m`` in base 2 and
    scale inside; a row with no allowed key yet collects the same junk in both), and the finished rows are
    float64 attention."""
    from svgtpu.kernels.block_sparse import LOG2E, tile_update, tile_update_key_major
    seed = 52
    print("seed", seed)
    rng = np.random.default_rng(seed)
    bq, bkv, d, chunks = 136, 72, 40, 3  # no tile multiple
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for n in (bq, chunks * bkv, chunks * bkv))
    allowed = rng.random((bq, chunks * bkv)) < 0.5
    allowed[:4] = False                 # rows with no key at all
    allowed[4:9, :2 * bkv] = False      # rows whose first allowed key comes in the last chunk
    scale = 1 / np.sqrt(d)
    ours = (jnp.full((bq, 1), -jnp.inf), jnp.zeros((bq, 1)), jnp.zeros((bq, d)))
    ours_km = (jnp.full((8, bq), -jnp.inf), jnp.zeros((8, bq)), jnp.zeros((d, bq)))
    lesson = (jnp.full((bq, 1), MASK_VALUE), jnp.zeros((bq, 1)), jnp.zeros((bq, d)))
    lesson_km = (jnp.full((1, bq), MASK_VALUE), jnp.zeros((1, bq)), jnp.zeros((d, bq)))

    @jax.jit   # one compile for the three chunks
    def step(k, v, mask, s, ours, ours_km, lesson, lesson_km):
        return (tile_update(q, k, v, *ours, mask, scale), tile_update_key_major(q, k, v, *ours_km, mask.T, scale),
                online_softmax_update(s, v, *lesson), lessons_by_hand.key_major_update(s.T, v, *lesson_km))

    for c in range(chunks):
        keys = slice(c * bkv, (c + 1) * bkv)
        s = np.where(allowed[:, keys], q @ k[keys].T * np.float32(scale), np.float32(MASK_VALUE))
        ours, ours_km, lesson, lesson_km = step(k[keys], v[keys], allowed[:, keys], s, ours, ours_km, lesson, lesson_km)
        for name, (_, l, acc) in {"query-major": lesson, "key-major": (None, lesson_km[1].T, lesson_km[2].T)}.items():
            production = ours if name == "query-major" else (None, ours_km[1][:1].T, ours_km[2].T)
            np.testing.assert_allclose(l, production[1], rtol=1e-5, err_msg=f"{name} l, chunk {c}")
            np.testing.assert_allclose(acc, production[2], rtol=1e-5, atol=1e-4, err_msg=f"{name} acc, chunk {c}")
    seen = allowed.any(axis=1)
    np.testing.assert_allclose(np.asarray(ours[0])[seen, 0], np.asarray(lesson[0])[seen, 0] * LOG2E, rtol=1e-6)
    logits = np.where(allowed, q.astype(np.float64) @ k.T.astype(np.float64) * scale, -np.inf)[seen]
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    reference = weights @ v.astype(np.float64) / weights.sum(axis=1, keepdims=True)
    for out in (np.asarray(lesson[2] / lesson[1]), np.asarray(lesson_km[2] / lesson_km[1]).T):
        assert np.abs(out[seen] - reference).max() <= 1e-5 * np.abs(reference).max()


def test_a_run_past_its_deadline_fails_naming_it():
    """The DMA check's last resort (a hang the deadlock rule cannot see, e.g. a wait another core could signal):
    a run not done by ``deadline_s`` is stopped and fails naming the deadline and the likely slips."""
    import threading

    from svgtpu.course.checks import interpreted
    release = threading.Event()
    with pytest.raises(AssertionError, match=r"check: no result after 0.2 s: .*deadlock.*look at the guard"):
        interpreted(lambda: release.wait(2) and jnp.zeros(1), "check", deadline_s=0.2, on_hang="look at the guard")
