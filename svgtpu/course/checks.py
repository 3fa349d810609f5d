"""What the checks of the teaching notebooks (01, 01b) look at besides a kernel's numbers.

A check that compares outputs only passes some wrong kernels on this CPU: the interpreter computes a
bfloat16 matmul in float32 and keeps it (XLA folds the rounding away), a kernel that builds the whole
score tile instead of chunks gives the same numbers, and a grid axis wrongly marked ``parallel`` runs
in order anyway.  So the checks also read the traced program:

- :func:`attention64` — the float64 reference every attention check compares with;
- :func:`check_running_max` — that an online-softmax update keeps the row maximum of earlier tiles;
- :func:`check_row_plan` — the properties a row-ordered tile plan must have, on random tile maps;
- :func:`check_scale_before_mask` — that scores are scaled before the mask, never after (kernel 5);
- :func:`check_state_carried` — whether a chunked kernel's miss is the state read once, not carried (kernel 7);
- :func:`whose` — whether a check runs the student's code or the worked solution;
- :func:`traced` — the program a function traces to, traced anew on every call (so a check reads the
  student's *current* kernel, never JAX's cached first trace);
- :func:`matmuls` / :func:`check_bf16_matmuls` — every ``dot_general`` with its operand and result
  dtypes (the MXU takes bfloat16 and accumulates in float32);
- :func:`largest_matmul_output` — the biggest block a matmul produces (the score temporaries);
- :func:`copies_in_flight` — whether a hand-written DMA pipeline overlaps its copies with compute;
- :func:`dimension_semantics` — the grid axes' semantics a ``pallas_call`` was given;
- :func:`races_found` — what the TPU interpreter's race detector saw (``InterpretParams(detect_races=True)``);
- :func:`interpreted` — a kernel run whose TPU-interpreter errors (out-of-bounds blocks, revisited output
  blocks, copies never waited for) and deadlocks (caught as the wait starts) become one failed check naming the likely slip;
- :func:`tracing_for` — a TPU to trace for on a CPU, for code that asks which chip it runs on
  (``pltpu.emit_pipeline`` picks its DMA tiling from it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import threading
from typing import Callable, Iterator

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

from svgtpu.kernels.jaxpr_walk import sub_jaxprs
from svgtpu.kernels.plan import FIRST, LAST
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL

#: ``device_kind`` and TensorCores per JAX device of each TPU, as libtpu's topology devices report them
#: (``jax.experimental.topologies.get_topology_desc(...).devices[0]``, libtpu of jax 0.10.2): a v5p
#: device is a megacore (two cores), a v7x device is one core (a chip is two devices).
DEVICE_KINDS = {"v5e": ("TPU v5 lite", 1), "v5p": ("TPU v5", 2), "v6e": ("TPU v6 lite", 1), "v7x": ("TPU7x", 1)}
#: bfloat16's unit roundoff (half its machine epsilon): one rounding to bfloat16 moves a value by at most this
#: fraction of it.
BF16_ROUNDING = float(jnp.finfo(jnp.bfloat16).eps) / 2
#: Modules whose functions are worked solutions (what :func:`whose` calls "the worked solution").
SOLUTION_MODULES = ("svgtpu.course.lessons", "svgtpu.course.lessons_by_hand")


def attention64(q, k, v, allowed=None) -> np.ndarray:
    """``softmax(q kᵀ / √d) v`` in float64 over the ``allowed`` keys (bool ``[L, L]``, ``None``: all): the
    reference every attention check compares with.  A query with no allowed key gets zeros."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[-1])
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    l = p.sum(axis=-1, keepdims=True)
    return np.where(l > 0, p @ v / np.where(l > 0, l, 1.0), 0.0)


def check_running_max(update, key_major: bool = False) -> None:
    """Assert that an online-softmax ``update(s, v, m_prev, l_prev, acc_prev)`` keeps the running row maximum over
    the tiles: rows whose scores in the first kv tile lie far above those of the next ones (the maximum sits in an
    earlier tile).  An update that takes this tile's maximum alone for ``m`` (``m_prev`` dropped) still gives the
    right numbers on random scores, which never differ by much; here it rescales by ``exp(m_prev - m_tile)``,
    which overflows float32, as it would two exercises later on a masked tile.  ``key_major``: scores
    ``[block_kv, block_q]``, state ``[1, block_q]`` and ``acc`` ``[d, block_q]`` (notebook 01b, section 11)."""
    rng = np.random.default_rng(0)
    bq, bkv, d = 8, 128, 16
    tiles = [rng.standard_normal((bq, bkv)) + shift for shift in (60.0, -60.0, 0.0)]
    values = [rng.standard_normal((bkv, d)) for _ in tiles]
    rows = (1, bq) if key_major else (bq, 1)
    m, l = jnp.full(rows, -jnp.inf, jnp.float32), jnp.zeros(rows, jnp.float32)
    acc = jnp.zeros((d, bq) if key_major else (bq, d), jnp.float32)
    for s, v in zip(tiles, values):
        m, l, acc = update(jnp.asarray(s.T if key_major else s, jnp.float32), jnp.asarray(v, jnp.float32), m, l, acc)
    got = np.asarray(acc / l, np.float64)
    got = got.T if key_major else got
    s, v = np.concatenate(tiles, axis=1), np.concatenate(values)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = p @ v / p.sum(axis=1, keepdims=True)
    assert np.isfinite(got).all() and np.allclose(got, want, rtol=1e-4, atol=1e-5), (
        "the row maximum lies in an earlier tile (scores near 60 there, near -60 in the next): the update gives "
        f"{'non-finite values' if not np.isfinite(got).all() else 'wrong values'}. Is m_new the larger of m_prev and "
        "this tile's row maximum (jnp.maximum(m_prev, ...)), and alpha = exp(m_prev - m_new)?")


def check_row_plan(row_plan, rng: np.random.Generator, maps: int = 12) -> int:
    """Assert that ``row_plan`` (a student's) turns tile-kind maps into a valid row-ordered plan, on
    ``maps`` random maps with rows of no tile, rows of one tile and an empty last row; the maps checked.

    What a kernel over the plan relies on, each checked on its own: int32 arrays of one length; every
    non-empty tile exactly once with its kind; each q row's steps consecutive, rows in order; FIRST on
    a row's first step and LAST on its last, nowhere else; a row with no tile as one ``EMPTY`` step
    flagged FIRST | LAST.
    """
    for n in range(maps):
        rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        kinds = rng.choice([EMPTY, PARTIAL, FULL], size=(rows, cols), p=[0.5, 0.3, 0.2]).astype(np.int32)
        if n % 3 == 0:
            kinds[-1] = EMPTY                       # the last q row has no tile
        if n % 4 == 1 and rows > 1:
            kinds[0] = EMPTY
            kinds[0, cols - 1] = PARTIAL            # a row of one tile, in the last column
        plan = row_plan(kinds)
        where = f"on the tile-kind map\n{kinds}\n(0 empty, 1 partial, 2 full)"
        keys = ("q_tile", "kv_tile", "kind", "flags")
        assert set(keys) <= set(plan), f"the plan must hold the arrays {keys}, got {sorted(plan)}"
        arrays = {key: np.asarray(plan[key]) for key in keys}
        assert all(a.dtype == np.int32 and a.ndim == 1 for a in arrays.values()), "the plan arrays must be 1-D int32"
        assert len({a.size for a in arrays.values()}) == 1, f"the plan arrays differ in length {where}"
        q_tile, kv_tile, kind, flags = (arrays[key] for key in keys)
        visited = sorted(zip(q_tile[kind != EMPTY].tolist(), kv_tile[kind != EMPTY].tolist()))
        assert visited == sorted(zip(*np.nonzero(kinds != EMPTY))), f"not every non-empty tile exactly once {where}"
        real = kind != EMPTY
        assert np.array_equal(kind[real], kinds[q_tile[real], kv_tile[real]]), f"a step's kind is not its tile's {where}"
        assert np.all(np.diff(q_tile) >= 0), f"the steps are not in q-row order {where}"
        assert np.array_equal(np.unique(q_tile), np.arange(rows)), f"some q row has no step at all {where}"
        first = np.r_[True, q_tile[1:] != q_tile[:-1]]
        last = np.r_[q_tile[1:] != q_tile[:-1], True]
        assert np.array_equal((flags & FIRST) != 0, first), f"FIRST is not exactly on each row's first step {where}"
        assert np.array_equal((flags & LAST) != 0, last), f"LAST is not exactly on each row's last step {where}"
        for row in np.flatnonzero((kinds == EMPTY).all(axis=1)):
            assert np.sum(q_tile == row) == 1 and kind[q_tile == row][0] == EMPTY, (
                f"q row {row} has no tile: it needs exactly one EMPTY step (so its output block is written) {where}")
    return maps


def whose(*functions) -> str:
    """``"the worked solution (svgtpu/course/lessons.py)"`` when every function comes from it, else
    ``"your code"``: each check prints it, so a student always knows what passed."""
    from_solutions = [getattr(f, "__module__", None) in SOLUTION_MODULES for f in functions]
    if all(from_solutions):
        return "the worked solution (svgtpu/course/lessons.py)"
    return "your code" if not any(from_solutions) else "your code with parts of the worked solution"


@dataclasses.dataclass(frozen=True)
class Matmul:
    """One ``dot_general`` of a traced program: operand and result dtypes, result shape."""

    lhs: str
    rhs: str
    out: str
    shape: tuple[int, ...]


def _jaxprs(jaxpr) -> Iterator:
    """``jaxpr`` and every jaxpr inside it (kernel bodies, loop bodies, branches): each a scope of its own vars."""
    yield jaxpr
    for eqn in jaxpr.eqns:
        for sub in sub_jaxprs(eqn):
            yield from _jaxprs(sub)


def _equations(jaxpr) -> Iterator:
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in sub_jaxprs(eqn):
            yield from _equations(sub)


def traced(fn, *args):
    """The jaxpr of ``fn(*args)``, traced now.

    ``jax.make_jaxpr`` (like ``jax.jit``) caches a trace by the function object: tracing the given wrapper
    (``matmul``) again after the student edited the kernel it calls would return the first trace, so a
    fixed kernel would still fail and a kernel broken later would still pass.  A new function per call
    misses that cache.
    """
    if hasattr(fn, "clear_cache"):   # a jitted function keeps its own cache
        fn.clear_cache()
    return jax.make_jaxpr(lambda *a: fn(*a))(*args).jaxpr


def check_scale_before_mask(fn, *args) -> None:
    """Assert that no multiply of ``fn(*args)`` takes a masked select's output (``jnp.where(mask, s, MASK_VALUE) *
    scale``): scaled after the mask, a masked score becomes ``scale x MASK_VALUE``, above the ``MASK_VALUE`` the
    running maximum starts from, so a row whose keys are all masked reads as seen and is written as an average."""
    def selects(jaxpr, var) -> bool:   # var is a select's output, seen through jnp.where's own jit
        made = {out: (eqn, i) for eqn in jaxpr.eqns for i, out in enumerate(eqn.outvars)}
        if isinstance(var, jax.extend.core.Literal) or var not in made:
            return False
        eqn, i = made[var]
        if eqn.primitive.name == "select_n":
            return True
        inner = [j for j in sub_jaxprs(eqn)]
        return eqn.primitive.name in ("pjit", "jit") and len(inner) == 1 and selects(inner[0], inner[0].outvars[i])

    for jaxpr in _jaxprs(traced(fn, *args)):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "mul" and any(selects(jaxpr, v) for v in eqn.invars):
                raise AssertionError("the scores are scaled after the mask: jnp.where(mask, s, MASK_VALUE) * scale "
                                     "turns a masked score into scale x MASK_VALUE, above the MASK_VALUE m starts "
                                     "from, so a query with no allowed key reads as seen; scale s first, then mask it")


def check_state_carried(got, q, k, v, block_kv: int, chunk: int) -> None:
    """Where a chunked kernel's output ``got`` misses the reference, say whether it is the attention over each kv
    tile's last chunk only: every chunk updated from the state read once before the loop, not the previous
    chunk's."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    last = np.zeros(k.shape[0], bool)
    for start in range(0, k.shape[0], block_kv):
        last[start + block_kv - chunk:start + block_kv] = True
    if np.allclose(np.asarray(got, np.float64), attention64(q, k, v, np.broadcast_to(last, (q.shape[0], k.shape[0]))),
                   rtol=1e-4, atol=1e-4):
        raise AssertionError(f"only the last chunk of each kv tile counts (block_kv_compute {chunk}): each chunk "
                             "updates the softmax state read once before the loop; carry m, l and acc across the "
                             "chunks (read the refs inside the loop body, or pass them as fori_loop's carry)")


def matmuls(fn, *args) -> list[Matmul]:
    """Every matmul of ``fn(*args)`` as traced, inside Pallas kernels, loops and branches too."""
    return _matmuls(traced(fn, *args))


def _matmuls(jaxpr) -> list[Matmul]:
    return [Matmul(str(e.invars[0].aval.dtype), str(e.invars[1].aval.dtype), str(e.outvars[0].aval.dtype),
                   tuple(e.outvars[0].aval.shape))
            for e in _equations(jaxpr) if e.primitive.name == "dot_general"]


def check_bf16_matmuls(fn, *args) -> int:
    """Assert that every matmul of ``fn(*args)`` (bfloat16 inputs) takes bfloat16 operands and returns
    float32, that its result stays float32 until it is accumulated, and that no sum runs over bfloat16 values
    (:func:`_check_bf16_sums`); the number of matmuls checked.

    On a TPU the MXU multiplies bfloat16 and accumulates in float32; ``preferred_element_type`` asks
    for that float32 result (without it the result is rounded to bfloat16 after every matmul), and a
    float32 operand (``p`` not cast to ``v.dtype``) is rounded to bfloat16 by the MXU anyway unless float32
    precision is requested (JAX's Pallas TPU guide, ``docs/pallas/tpu/details.rst``, "Precision control",
    jax-ml/jax@2483cdab76ee6a9b9eca6d002a16423cbbc75269) while it holds twice the bytes in VMEM and
    registers.  The interpreter on this CPU hides both: it computes in float32 anyway.
    """
    jaxpr = traced(fn, *args)
    found = _matmuls(jaxpr)
    assert found, "no matmul found in the traced program"
    for scope in _jaxprs(jaxpr):
        _check_bf16_sums(scope)
    for m in found:
        assert m.lhs == m.rhs == "bfloat16", (
            f"a matmul takes {m.lhs} x {m.rhs} operands (result {m.shape}): cast both to bfloat16 first "
            "(p.astype(v.dtype)); at default precision the MXU rounds a float32 operand to bfloat16 anyway, and "
            "it holds twice the bytes")
        assert m.out == "float32", (
            f"a matmul returns {m.out} (result {m.shape}): ask for preferred_element_type=jnp.float32, or every "
            "partial product is rounded to bfloat16 on a TPU (this CPU's interpreter hides it)")
    return len(found)


#: Primitives that move a value without computing on it: a matmul's result followed through them is still that result.
_MOVES = ("transpose", "reshape", "squeeze", "broadcast_in_dim", "copy", "copy_p")


def _check_bf16_sums(jaxpr) -> None:
    """Within one scope: no sum over bfloat16 summands (``p.astype(bfloat16).sum()``: each ``p`` rounded before it
    counts in ``l``), and no float32 matmul result rounded to bfloat16 before it is accumulated (``(p · v)
    .astype(bfloat16)`` added to ``acc``); a result cast to bfloat16 only to be stored as the output is fine.
    The interpreter on this CPU keeps such errors below a loose tolerance; on a TPU they add up over the tiles."""
    made = {id(out): eqn for eqn in jaxpr.eqns for out in eqn.outvars}
    used: dict[int, list] = {}
    for eqn in jaxpr.eqns:
        for var in eqn.invars:
            used.setdefault(id(var), []).append(eqn)

    def bf16(var) -> bool:
        return str(getattr(getattr(var, "aval", None), "dtype", "")) == "bfloat16"

    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "reduce_sum":
            x = eqn.invars[0]
            source = made.get(id(x))
            rounded = bf16(x) or (source is not None and source.primitive.name == "convert_element_type"
                                  and bf16(source.invars[0]))
            assert not rounded, ("a sum over bfloat16 values (l summed from p after p.astype(bfloat16)?): every "
                                 "term is rounded to bfloat16 first; sum the float32 p, and cast only the matmul's "
                                 "operand")
        if eqn.primitive.name == "dot_general" and str(eqn.outvars[0].aval.dtype) == "float32":
            frontier = [eqn.outvars[0]]
            while frontier:
                var = frontier.pop()
                for consumer in used.get(id(var), []):
                    name = consumer.primitive.name
                    if name in _MOVES:
                        frontier.extend(consumer.outvars)
                    elif name == "convert_element_type" and bf16(consumer.outvars[0]):
                        later = {c.primitive.name for c in used.get(id(consumer.outvars[0]), [])}
                        assert later <= {"swap"}, (
                            "a matmul's float32 result is rounded to bfloat16 before it is accumulated "
                            "((p · v).astype(bfloat16) added to acc?): keep it float32 until the output is written")


def largest_matmul_output(fn, *args) -> tuple[int, ...]:
    """The largest result block of any matmul in ``fn(*args)`` (by element count)."""
    shapes = [m.shape for m in matmuls(fn, *args)]
    assert shapes, "no matmul found in the traced program"
    return max(shapes, key=lambda s: int(jnp.prod(jnp.asarray(s))))


def copies_in_flight(fn, *args) -> list[int]:
    """For each matmul of ``fn(*args)`` in program order (a loop body once, every branch as if taken):
    how many DMAs were started (``make_async_copy(...).start()``) and not yet waited for when it runs.
    A pipeline that overlaps copies with compute has one in flight at its steady-state matmul; a copy
    started and waited for before each matmul has none."""
    in_flight, at = 0, []
    for eqn in _equations(traced(fn, *args)):
        name = eqn.primitive.name
        in_flight += (name == "dma_start") - (name == "dma_wait")
        if name == "dot_general":
            at.append(in_flight)
    return at


def dimension_semantics(fn, *args) -> tuple[str, ...]:
    """The ``dimension_semantics`` of the first ``pallas_call`` in ``fn(*args)`` (``()`` if none given)."""
    for eqn in _equations(traced(fn, *args)):
        if eqn.primitive.name == "pallas_call":
            params = eqn.params["compiler_params"]
            params = params.get("mosaic_tpu", params) if isinstance(params, dict) else params
            semantics = getattr(params, "dimension_semantics", None) or ()
            return tuple(str(getattr(s, "value", s)) for s in semantics)
    raise AssertionError("no pallas_call found in the traced program")


def races_found() -> bool:
    """Whether the last kernel run with ``pltpu.InterpretParams(detect_races=True)`` had a data race.

    jax 0.10.2 documents the flag (``InterpretParams``: "races.races_found will be set to True") but
    exports no accessor; the state lives in the interpreter module, read here in one place.
    """
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as interpreter
    state = getattr(interpreter, "races", None)
    return bool(state is not None and state.races_found)


#: The TPU interpreter's errors (its words) and what they usually mean in the lessons' kernels.
INTERPRETER_ERRORS = {
    "Out-of-bounds block index": "an index map returned a block outside the array: every plan step, the EMPTY "
                                 "placeholder too, must name a q_tile and a kv_tile in range (block numbers, not "
                                 "element offsets)",
    "Revisited block": "an output block was left and visited again, or visited on two cores: the steps of one q "
                       "row must run in order on one core (dimension_semantics \"arbitrary\" on that axis)",
    "Out-of-bounds read": "a copy or a load reads outside its buffer",
    "Out-of-bounds write": "a copy or a store writes outside its buffer",
}
#: What the TPU interpreter prints when a kernel ends with a semaphore still counting (jax 0.10.2,
#: ``interpret_pallas_call._validate``): a copy was started and never waited for.
UNWAITED = "has non-zero count"


def _stop_interpreter(why: str) -> None:
    """Make every semaphore wait of the running TPU-interpreter kernel fail (they poll for a failure
    every 0.1 s, jax 0.10.2 ``shared_memory.Semaphore.wait``); the state lives in the interpreter module."""
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as interpreter
    memory = getattr(interpreter, "_shared_memory", None)
    if memory is not None:
        memory.set_failed(TimeoutError(why), top_level=False)


#: The words a wait that nothing will ever signal fails with (:func:`_deadlocks_fail_at_once`).
DEADLOCK = "waits on a DMA semaphore that nothing will ever signal"


@contextlib.contextmanager
def _deadlocks_fail_at_once() -> Iterator[None]:
    """While the block runs, a TPU-interpreter wait that can never be satisfied fails at once, not at a deadline.

    On one core the interpreter has no other thread that could signal a semaphore: a DMA runs when it is
    started (``dma_execution_mode="eager"``) or when a wait on its own semaphore runs it (``"on_wait"``, the
    semaphore's pending tasks; jax 0.10.2 ``shared_memory.Semaphore.wait``).  So a wait whose count is short and
    whose semaphore has no pending copy is a deadlock the moment it starts, on a TPU as here; it sets the
    interpreter's failure, which the wait then raises.  With several cores another core could still signal, and
    the caller's deadline decides."""
    from jax._src.pallas.mosaic.interpret import shared_memory
    original = shared_memory.Semaphore.wait

    def wait(self, value, global_core_id, **kwargs):
        core = int(global_core_id)
        with self.cv:
            stuck = (self.num_cores == 1 and self.count_by_core[core] < value and not self.tasks[core])
        if stuck:
            self.shared_memory.set_failed(RuntimeError(DEADLOCK), top_level=False)
        return original(self, value, global_core_id, **kwargs)

    shared_memory.Semaphore.wait = wait
    try:
        yield
    finally:
        shared_memory.Semaphore.wait = original


def interpreted(run: Callable, name: str, hints: dict[str, str] | None = None, deadline_s: float | None = None,
                on_hang: str = ""):
    """``run()`` (a kernel call, under ``pltpu.InterpretParams`` or ``interpret=True``) as a check step: the
    TPU interpreter's state reset first, its errors turned into one ``AssertionError`` naming the likely
    slip (``hints``: more of :data:`INTERPRETER_ERRORS`), a semaphore still counting at the end (a copy never
    waited for) failed too.  ``deadline_s``: a run not done by then (a wait no copy will signal deadlocks the
    interpreter) is stopped and fails with ``on_hang``.  Returns ``run()``'s result as numpy."""
    from jax.experimental.pallas import tpu as pltpu
    hints = {**INTERPRETER_ERRORS, **(hints or {})}
    pltpu.reset_tpu_interpret_mode_state()
    done: dict = {}

    def target():
        try:
            done["result"] = np.asarray(jax.block_until_ready(run()))
        except Exception as e:  # noqa: BLE001 - turned into the check's message below
            done["error"] = e

    printed, log = io.StringIO(), logging.getLogger("jax._src.callback")   # it logs each failed callback
    worker = threading.Thread(target=target, daemon=True)
    log.disabled = True
    try:
        with contextlib.redirect_stdout(printed), _deadlocks_fail_at_once():
            worker.start()
            worker.join(deadline_s)
            hung = worker.is_alive()
            if hung:
                _stop_interpreter(f"{name}: no result after {deadline_s} s")
                worker.join(30)
    finally:
        log.disabled = False
    if hung or "error" in done:   # a failed run leaves the interpreter's state behind; a good one keeps races_found
        pltpu.reset_tpu_interpret_mode_state()
    if hung:
        raise AssertionError(f"{name}: no result after {deadline_s:g} s: the kernel waits on a DMA semaphore that no "
                             f"copy will signal (a deadlock, stopped by the check). {on_hang}")
    if "error" in done and DEADLOCK in str(done["error"]):
        raise AssertionError(f"{name}: a deadlock: the kernel {DEADLOCK} (no copy started into it is pending, and "
                             f"one core has no one else to signal it; a TPU would hang here). {on_hang}") from None
    if "error" in done:
        text = str(done["error"])
        for words, hint in hints.items():
            line = next((l for l in text.splitlines() if words in l), None)
            if line:
                raise AssertionError(f"{name}: {line.split('Error: ')[-1].strip()} -> {hint}") from None
        raise done["error"]
    print(printed.getvalue(), end="")   # the interpreter's own reports (races, debug prints), shown as they were
    unwaited = [l for l in printed.getvalue().splitlines() if UNWAITED in l]
    assert not unwaited, (f"{name}: a copy was started and never waited for ({unwaited[0].strip()}): every started "
                          f"copy needs its wait. {hints.get(UNWAITED, '')}")
    return done["result"]


@contextlib.contextmanager
def tracing_for(device: str = "v6e"):
    """Trace Pallas code for TPU ``device`` on any machine: an abstract mesh whose device is that TPU.

    ``pltpu.emit_pipeline`` asks which TPU it runs on (for the DMA tiling) while tracing; on a CPU
    there is none, and it stops with "Unsupported TPU device kind: cpu".  Interpret mode and ahead-of-time
    compilation both work inside this block.
    """
    if device not in DEVICE_KINDS:
        raise ValueError(f"device must be one of {', '.join(DEVICE_KINDS)}, got {device!r}")
    kind, cores = DEVICE_KINDS[device]
    mesh = jax.sharding.AbstractMesh((1,), ("tpu",),
                                     abstract_device=jax.sharding.AbstractDevice(kind, cores, "tpu"))
    with jax.sharding.use_abstract_mesh(mesh):
        yield


__all__ = ["BF16_ROUNDING", "DEADLOCK", "DEVICE_KINDS", "INTERPRETER_ERRORS", "SOLUTION_MODULES", "UNWAITED", "attention64", "check_scale_before_mask", "check_state_carried",
           "check_running_max", "check_row_plan", "whose", "Matmul", "traced", "matmuls", "check_bf16_matmuls", "largest_matmul_output",
           "copies_in_flight", "dimension_semantics", "races_found", "interpreted", "tracing_for"]
