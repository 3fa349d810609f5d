"""A whole compiled XLA:TPU program as static cycles: every fusion, kernel and collective of it, weighted
by its loops' trip counts, and by the part of the model it belongs to.

libtpu compiles a jitted program into a *top-level program* (``TLP``) that calls one LLO program per
HLO op it runs: fusions (matmuls with what XLA fused around them), Pallas kernels (custom calls),
collectives, copies.  With ``--xla_jf_dump_to=DIR --xla_jf_dump_llo_text=true`` (set in
``LIBTPU_INIT_ARGS`` before JAX starts: :func:`svgtpu.compiler.dumps.child_env`) it writes, per program,
``<id>-<op name>-NN-final_bundles.txt``, the static VLIW schedule (one line per bundle, one bundle per
issue cycle), next to ``TLP-hlo.txt``, the scheduled HLO module.  This module reads them:

- **one program's cycles** (:func:`program_cycles`): a loop is a backward branch (``sbr.rel`` to the
  start of an earlier region) and its trip count is the constant of the exit test that sets the
  branch's predicate (``scmp.ge ... N /* loop exit test */``); every bundle is counted once per
  iteration of every loop whose span holds it.  A static count covers a loop body *once* (the lone
  matmul of ``tests/test_fusions.py`` proves it: its bundles hold one pass of a loop whose trip count
  makes the whole matmul, at the MXU rate of :func:`svgtpu.compiler.units.core`).  Predicated regions count
  as run (an upper bound of a few bundles per region); a loop whose bound is held in a register (a
  dynamic trip count) counts once and is reported.
- **how often each op runs**: once per call in the top-level program, times the trip counts of the
  loops around the call: a counted loop of the top-level program, or an HLO ``while`` whose trip count
  the HLO states (:func:`while_trips`: a counter from a constant to a constant bound, step 1);
- **which program each op runs** (:func:`read_dump`): libtpu compiles identical HLO computations once
  and dumps them under the first op's name; an op without a dump of its own runs the program of the op
  whose canonical HLO (:func:`canonical_ops`: names and metadata dropped, shapes, layouts, memory
  spaces, attributes and the fused computation kept) is the same.  An op left unmatched is reported,
  never guessed.
- **where each op belongs**: the ``jax.named_scope`` in its HLO ``metadata`` (for a fusion, the scope of
  its matmul or kernel when it has one: the op that dominates its cycles), mapped to a role
  (:data:`ROLES`) by :func:`role_of`; collectives by opcode.
- **what crosses the chips**: the collectives' bytes from the compiled HLO
  (:func:`svgtpu.compiler.multihost.hlo_collectives`).

Static bundles are issue cycles before any stall: time spent waiting on HBM, on the other chips
(collectives run at ICI speed, not at their few hundred issue cycles) or on the host is outside them.
Cycle ratios within one program do not depend on the clock.  Provenance ``compiled-<device>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from pathlib import Path

from svgtpu.compiler.llo import bundle_lines

#: The parts of a transformer block a cycle is attributed to.
ROLES = ("self-attention", "projections", "cross-attention", "ffn", "norms/modulation", "collectives", "other")
#: Named scopes (:data:`svgtpu.model.wan.SCOPES`, and the sharded program's own) -> role.
SCOPE_ROLES = {"self_attention": "self-attention", "projections": "projections",
               "cross_attention": "cross-attention", "ffn": "ffn", "modulation": "norms/modulation",
               "norm": "norms/modulation", "qk_norm_rope": "norms/modulation", "residual": "norms/modulation",
               "weight_gather": "collectives"}
#: HLO opcodes that move data between chips.
COLLECTIVE_OPS = ("all-to-all", "all-gather", "reduce-scatter", "all-reduce", "collective-permute")

_BRANCH = re.compile(r"sbr\.rel \((!?)(%p[\w]+)\) target = \$region(\d+)")
_REGION_START = re.compile(r"(?:Start|Start/End empty) region (\d+)")
_EXIT_TEST = re.compile(r"(%p[\w]+) = scmp\.(?:ge|gt)\.s32\.totalorder (?:\(!?%p\w+\), )?%\w+, (\w+)\s*"
                        r"/\* loop exit test")
_TOTAL = re.compile(r"total scheduled bundles:\s*(\d+)")
_DUMP_NAME = re.compile(r"^\d+-(.+)-\d\d-(schedule-analysis_)?final_bundles\.txt$")
_CALLED = re.compile(r"inlined_call\b[^/]*/\* %([\w.\-]+) = ")


# -- one program's static cycles -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Loop:
    """A loop of a schedule: bundles ``[start, end)`` (branch and delay slots included) and its trip
    count (``None``: the bound is in a register)."""

    start: int
    end: int
    trips: int | None


@dataclasses.dataclass(frozen=True)
class ProgramCycles:
    """One program's static schedule: its bundles (each once), its cycles (each bundle times the trip
    counts of the loops around it) and its loops."""

    bundles: int
    cycles: int
    loops: tuple[Loop, ...]

    @property
    def dynamic_loops(self) -> int:
        """Loops whose trip count is not a constant (counted once)."""
        return sum(lp.trips is None for lp in self.loops)


def bundle_weights(text: str) -> tuple[list[str], list[int], tuple[Loop, ...]]:
    """The bundle lines of a ``final_bundles`` schedule, how many times each is issued (the product of the
    trip counts of the loops whose span holds it; a dynamic trip count counts once) and the loops."""
    bundles = bundle_lines(text)
    starts, tests = {}, {}
    for i, line in enumerate(bundles):
        for region in _REGION_START.findall(line):
            starts.setdefault(int(region), i)
        for predicate, bound in _EXIT_TEST.findall(line):
            tests[predicate] = int(bound) if bound.isdigit() else None
    loops = []
    for i, line in enumerate(bundles):
        for negated, predicate, region in _BRANCH.findall(line):
            start = starts.get(int(region))
            if start is None or start > i:
                continue  # a forward branch: a predicated region, counted as run
            end = next((j + 1 for j in range(i, min(i + 8, len(bundles))) if "End region" in bundles[j]), i + 1)
            loops.append(Loop(start, end, tests.get(predicate) if negated else None))
    weight = [1] * len(bundles)
    for lp in loops:
        for j in range(lp.start, lp.end):
            weight[j] *= lp.trips or 1
    return bundles, weight, tuple(loops)


def program_cycles(text: str) -> ProgramCycles:
    """The static cycles of one ``final_bundles`` schedule (see the module doc for the rules)."""
    bundles, weight, loops = bundle_weights(text)
    return ProgramCycles(len(bundles), sum(weight), loops)


# -- the scheduled HLO module --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class HloOp:
    """One instruction of the entry computation: its name, opcode, result type, the named scope of the
    op that dominates it, and its canonical form (what libtpu's program deduplication compares)."""

    name: str
    opcode: str
    type: str
    scope: str
    canonical: str
    flops: int = 0   # of its matmuls (convolutions and dots), fused ones included
    computation: str = "__entry__"


_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*?) ([a-z][a-z0-9\-]*)\((.*)$")
_COMPUTATION = re.compile(r"^(ENTRY )?%([\w.\-]+) .*\{\s*$")
_NAME = re.compile(r"%([\w.\-]+)")
_CALLS = re.compile(r"(calls|to_apply|condition|body)=%([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_HERO_OPS = ("convolution", "dot", "custom-call")


def _strip_metadata(text: str) -> str:
    """``text`` without its ``metadata={...}`` attribute (names, source lines: not part of the program)."""
    start = text.find("metadata={")
    if start < 0:
        return text
    depth, i = 0, start + len("metadata=")
    for i in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
    return text[:start].rstrip(", ") + text[i + 1:]


def _computations(text: str) -> dict[str, list[str]]:
    """Every computation of an HLO module text: name -> its instruction lines (``__entry__``: the entry's)."""
    out, current = {}, None
    for line in text.splitlines():
        if current is None:
            m = _COMPUTATION.match(line)
            if m:
                current = "__entry__" if m.group(1) else m.group(2)
                out[current] = []
        elif line.startswith("}"):
            current = None
        elif _INSTRUCTION.match(line):
            out[current].append(line)
    return out


def canonical_ops(hlo_text: str) -> dict[str, HloOp]:
    """The instructions of a scheduled HLO module, by name, each with a canonical
    form: its text with metadata dropped, every operand replaced by its type and every called
    computation by that computation's structural digest (a hash over its instructions' graph, not
    their names or order), so two ops whose programs must be identical compare equal."""
    comps = _computations(hlo_text)
    digests: dict[str, str] = {}

    def digest(name: str) -> str:
        if name not in digests:
            lines = {}
            root = None
            for line in comps.get(name, []):
                m = _INSTRUCTION.match(line)
                lines[m.group(1)] = line
                if line.lstrip().startswith("ROOT "):
                    root = m.group(1)
            nodes: dict[str, str] = {}

            def node(n: str) -> str:
                if n not in nodes:
                    text = _strip_metadata(lines[n].split(" = ", 1)[1])
                    text = _CALLS.sub(lambda m: f"{m.group(1)}=<{digest(m.group(2))}>", text)
                    text = _NAME.sub(lambda m: f"<{node(m.group(1))}>" if m.group(1) in lines else "%?", text)
                    nodes[n] = hashlib.sha256(text.encode()).hexdigest()[:16]
                return nodes[n]
            digests[name] = node(root) if root else "empty"
        return digests[name]

    if "__entry__" not in comps:
        raise RuntimeError("no ENTRY computation in the HLO module")
    ops = {}
    for comp, lines in comps.items():  # the entry's ops, and those of while bodies and other called computations
        types = {}
        for line in lines:
            m = _INSTRUCTION.match(line)
            types[m.group(1)] = m.group(2)
        for line in lines:
            name, type_, opcode, rest = _INSTRUCTION.match(line).groups()
            rest = _CALLS.sub(lambda m: f"{m.group(1)}=<{digest(m.group(2))}>", _strip_metadata(rest))
            canonical = f"{type_} {opcode}(" + _NAME.sub(lambda m: types.get(m.group(1), "%?"), rest)
            ops[name] = HloOp(name, opcode, type_, _scope(line, comps), canonical, _flops(line, lines, comps), comp)
    return ops


_WHILE = re.compile(r"while\(%([\w.\-]+)\), condition=%([\w.\-]+), body=%([\w.\-]+)")
_INDEX = re.compile(r"index=(\d+)")
_DIRECTION = re.compile(r"direction=(\w+)")


def _defs(lines: list[str]) -> dict[str, tuple[str, str, str]]:
    """name -> (type, opcode, rest) of a computation's instructions."""
    out = {}
    for line in lines:
        name, type_, opcode, rest = _INSTRUCTION.match(line).groups()
        out[name] = (type_, opcode, rest)
    return out


def _constant(name: str, defs: dict) -> int | None:
    """The integer a value is, following copies and bitcasts to a scalar ``constant``; else ``None``."""
    while name in defs:
        _, opcode, rest = defs[name]
        if opcode == "constant":
            value = rest.split(")", 1)[0]
            return int(value) if value.lstrip("-").isdigit() else None
        if opcode not in ("copy", "bitcast", "convert"):
            return None
        name = _NAME.findall(rest)[0]
    return None


def _element(name: str, defs: dict) -> int | None:
    """The tuple index ``name`` reads of its computation's parameter (``get-tuple-element``, via copies)."""
    while name in defs:
        _, opcode, rest = defs[name]
        if opcode == "get-tuple-element":
            return int(_INDEX.search(rest).group(1))
        if opcode not in ("copy", "bitcast", "convert"):
            return None
        name = _NAME.findall(rest)[0]
    return None


def while_trips(hlo_text: str) -> dict[str, int | None]:
    """How often every ``while`` body of a module runs, by body computation (nested loops multiplied): a
    counter element of the loop state starting at a constant, compared ``LT`` with a constant in the
    condition and incremented by a constant 1 in the body (the loops ``lax.map`` / ``scan`` /
    ``fori_loop`` make); ``None`` when the loop does not have that form."""
    comps = _computations(hlo_text)
    own, parent = {}, {}
    for comp, lines in comps.items():
        defs = _defs(lines)
        for line in lines:
            m = _WHILE.search(line)
            if not m:
                continue
            state, cond, body = m.groups()
            own[body] = _trips(defs, state, _defs(comps.get(cond, [])), _defs(comps.get(body, [])),
                               comps.get(cond, []), comps.get(body, []))
            parent[body] = comp

    def total(body: str) -> int | None:  # a loop inside a loop body runs once per outer iteration
        outer = 1 if parent[body] not in own else total(parent[body])
        return None if own[body] is None or outer is None else own[body] * outer
    return {body: total(body) for body in own}


def _trips(defs, state, cond, body, cond_lines, body_lines) -> int | None:
    root = next((_INSTRUCTION.match(x).group(1) for x in cond_lines if x.lstrip().startswith("ROOT ")), None)
    if root is None or cond.get(root, ("", "", ""))[1] != "compare":
        return None
    a, b = _NAME.findall(cond[root][2].split(")", 1)[0])[:2]
    direction = _DIRECTION.search(cond[root][2])
    index, bound = _element(a, cond), _constant(b, cond)
    if index is None or bound is None or not direction or direction.group(1) != "LT":
        return None
    if defs.get(state, ("", "", ""))[1] != "tuple":
        return None
    start = _constant(_NAME.findall(defs[state][2])[index], defs)
    broot = next((_INSTRUCTION.match(x).group(1) for x in body_lines if x.lstrip().startswith("ROOT ")), None)
    if start is None or broot is None or body.get(broot, ("", "", ""))[1] != "tuple":
        return None
    step = _NAME.findall(body[broot][2])[index]
    if body.get(step, ("", "", ""))[1] != "add":
        return None
    x, y = _NAME.findall(body[step][2])[:2]
    if not ((_element(x, body) == index and _constant(y, body) == 1) or
            (_element(y, body) == index and _constant(x, body) == 1)):
        return None
    return max(0, bound - start)


def _scope(line: str, comps: dict[str, list[str]]) -> str:
    """The ``op_name`` of an entry instruction, or of the matmul / kernel inside the fusion it calls."""
    called = _CALLS.search(line)
    if called and called.group(1) == "calls":
        for inner in _descendants(called.group(2), comps):
            m = _INSTRUCTION.match(inner)
            if m and m.group(3) in _HERO_OPS and (name := _OP_NAME.search(inner)):
                return name.group(1)
    name = _OP_NAME.search(line)
    return name.group(1) if name else ""


_DIMS = re.compile(r"\[([\d,]*)\]")
_DIM_LABELS = re.compile(r"dim_labels=(\w+)_")
_LHS_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")


def _dims(type_: str) -> list[int]:
    m = _DIMS.search(type_)
    return [int(d) for d in m.group(1).split(",") if d] if m else []


def _matmul_flops(line: str, types: dict[str, str]) -> int:
    """``2 x result elements x contracted size`` of a ``convolution`` (contracting its lhs ``f`` dimension)
    or ``dot`` (its ``lhs_contracting_dims``) instruction; 0 for anything else."""
    m = _INSTRUCTION.match(line)
    if not m or m.group(3) not in ("convolution", "dot"):
        return 0
    lhs = _dims(types.get(_NAME.findall(m.group(4))[0], ""))
    if m.group(3) == "convolution":
        labels = _DIM_LABELS.search(line)
        contracted = [lhs[labels.group(1).index("f")]] if labels and "f" in labels.group(1) and lhs else []
    else:
        dims = _LHS_CONTRACTING.search(line)
        contracted = [lhs[int(d)] for d in dims.group(1).split(",") if d] if dims and lhs else []
    out = 2
    for d in _dims(m.group(2)) + contracted:
        out *= d
    return out if contracted else 0


def _flops(line: str, entry: list[str], comps: dict[str, list[str]]) -> int:
    """Matmul FLOPs of an entry instruction: its own, or those inside the computations it calls."""
    lines = [line]
    for _, inner in _CALLS.findall(line):
        lines += _descendants(inner, comps)
    types = {}
    for text in entry + lines:
        if (m := _INSTRUCTION.match(text)):
            types.setdefault(m.group(1), m.group(2))
    return sum(_matmul_flops(text, types) for text in lines)


def _descendants(name: str, comps: dict[str, list[str]], seen=None) -> list[str]:
    """Instruction lines of computation ``name`` and of the computations it calls, depth first."""
    seen = set() if seen is None else seen
    if name in seen:
        return []
    seen.add(name)
    out = []
    for line in comps.get(name, []):
        out.append(line)
        for _, inner in _CALLS.findall(line):
            out += _descendants(inner, comps, seen)
    return out


def role_of(scope: str, opcode: str) -> str:
    """The role (:data:`ROLES`) of an op: collectives by opcode, else the first named scope of its
    ``op_name`` path that :data:`SCOPE_ROLES` knows, else ``other``."""
    if opcode.removesuffix("-start") in COLLECTIVE_OPS:
        return "collectives"
    for part in scope.split("/"):
        if part in SCOPE_ROLES:
            return SCOPE_ROLES[part]
    return "other"


# -- a dump folder ---------------------------------------------------------------------------------

def _dumped(folder: Path) -> dict[str, Path]:
    """Final schedules in a dump folder by program name (``TLP``, op names, ``<late-...>``)."""
    out = {}
    for path in folder.glob("*final_bundles.txt"):
        m = _DUMP_NAME.match(path.name)
        if m and not m.group(2):
            if m.group(1) in out:
                raise RuntimeError(f"two final schedules of {m.group(1)} in {folder}")
            out[m.group(1)] = path
    return out


def read_dump(folder: str | Path, hlo_text: str | None = None) -> dict:
    """Every op the top-level program calls, with the static cycles of the program it runs and its role,
    and the top-level program's own cycles.  ``hlo_text``: the compiled module (default: the dump's
    ``TLP-hlo.txt``).

    Returns ``{"ops": [...], "top_level": {...}, "unmatched": [...], "programs": n}``; each op row:
    ``name, opcode, scope, role, program, bundles, cycles, calls, dynamic_loops``: ``calls`` counts the
    top-level program's calls of the op, each times the trip counts of its loops around it (a while loop's
    body); ``dynamic_loops`` the loops counted once for want of a constant trip count, its own or around it.
    """
    folder = Path(folder)
    if hlo_text is None:
        hlo_files = list(folder.glob("*TLP-hlo.txt"))
        if len(hlo_files) != 1:
            raise RuntimeError(f"expected one TLP-hlo.txt in {folder}, found {len(hlo_files)}")
        hlo_text = hlo_files[0].read_text()
    ops = canonical_ops(hlo_text)
    files = _dumped(folder)
    if "TLP" not in files:
        raise RuntimeError(f"no top-level program (TLP final_bundles) in {folder}")
    tlp_bundles, tlp_weight, tlp_loops = bundle_weights(files["TLP"].read_text())
    top = ProgramCycles(len(tlp_bundles), sum(tlp_weight), tlp_loops)
    trips = while_trips(hlo_text)
    calls, in_dynamic = Counter(), set()
    for i, line in enumerate(tlp_bundles):
        for name in _CALLED.findall(line):
            body = ops[name].computation if name in ops else "__entry__"
            if body != "__entry__":  # an op of a while body: the loop's trip count from the HLO
                if tlp_weight[i] != 1:
                    raise RuntimeError(f"{name}: a while body's op inside a counted loop of the top-level program")
                calls[name] += trips.get(body) or 1
                if trips.get(body) is None:
                    in_dynamic.add(name)
                continue
            calls[name] += tlp_weight[i]
            if any(lp.trips is None and lp.start <= i < lp.end for lp in tlp_loops):
                in_dynamic.add(name)
    by_canonical = {}
    for name in files:
        if name in ops:
            by_canonical.setdefault(ops[name].canonical, name)
    cache: dict[str, ProgramCycles] = {}
    rows, unmatched = [], []
    for name, n in calls.items():
        op = ops.get(name)
        program = name if name in files else (by_canonical.get(op.canonical) if op else None)
        if program is None:
            unmatched.append(name)
            continue
        if program not in cache:
            cache[program] = program_cycles(files[program].read_text())
        p = cache[program]
        rows.append({"name": name, "opcode": op.opcode if op else "?", "scope": op.scope if op else "",
                     "flops": op.flops * n if op else 0,
                     "role": role_of(op.scope, op.opcode) if op else "other", "program": program,
                     "bundles": p.bundles, "cycles": p.cycles * n, "calls": n,
                     "dynamic_loops": p.dynamic_loops + (name in in_dynamic)})
    return {"ops": rows, "unmatched": unmatched, "programs": len(files),
            "top_level": {"bundles": top.bundles, "cycles": top.cycles, "dynamic_loops": top.dynamic_loops}}


def role_cycles(reading: dict) -> dict[str, int]:
    """Static cycles per role (:data:`ROLES`) of a :func:`read_dump` reading; the top-level program's
    own bundles (launching, DMA issue, waits) count as ``other``."""
    out = dict.fromkeys(ROLES, 0)
    for row in reading["ops"]:
        out[row["role"]] += row["cycles"]
    out["other"] += reading["top_level"]["cycles"]
    return out


def scheduled_bundles(folder: str | Path, name: str) -> int:
    """``total scheduled bundles`` of program ``name`` as libtpu's own schedule analysis states it."""
    for path in Path(folder).glob("*schedule-analysis_final_bundles.txt"):
        m = _DUMP_NAME.match(path.name)
        if m and m.group(1) == name:
            return int(_TOTAL.search(path.read_text()).group(1))
    raise RuntimeError(f"no schedule analysis of {name} in {folder}")


__all__ = ["ROLES", "SCOPE_ROLES", "COLLECTIVE_OPS", "Loop", "ProgramCycles", "bundle_weights",
           "program_cycles", "HloOp", "while_trips",
           "canonical_ops", "role_of", "read_dump", "role_cycles", "scheduled_bundles"]
