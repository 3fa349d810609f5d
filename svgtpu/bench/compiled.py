"""Whole-kernel static v6e estimate from the real compiler: ours vs JAX Splash vs tokamax (C4).

Each kernel is compiled ahead of time for v6e (libtpu on the CPU, as :mod:`svgtpu.bench.llo` does
for one tile body) and its LLO ``final_bundles`` schedule is read as a program, one bundle = one
issue cycle:

- the **grid loop** is the outermost back branch (``sbr.rel`` to an earlier region); its
  ``loop exit test`` constant is the number of iterations, the grid steps plus the software
  pipeline's fill/drain iterations;
- a **predicated region** is a forward ``sbr.rel``: when taken, the branch and its delay slots
  (the bundles up to the first ``End region``) run and the region's body is skipped;
- a **nested loop** (the ``block_kv_compute`` loop of a tile body) costs its static bundles times its
  exit-test trip count;
- the **tile bodies** are the regions holding MXU work (``vmatmul``/``vmatres``) directly inside
  the step guard, in source order: ours ``full, partial`` (fast path) or ``masked`` (off), tokamax
  ``full, partial``, Splash one ``masked`` body; **init** is the region before them that stores
  without MXU work, **finish** the one after them with a reciprocal (``vrcp``).
- everything else in the grid loop is **step overhead**: pipeline bookkeeping, DMA issue and wait,
  the plan lookup, the guards' branches; it runs at every iteration (the DMA-issue regions are
  counted as taken at every step: an upper bound of a few bundles).

Per grid step: ``cycles = overhead + [first] init + [last] finish + body(kind)``; the fill/drain
iterations cost the overhead; the code before and after the loop is counted once per call.  Step
kinds come from each kernel's own plan (ours: :func:`~svgtpu.kernels.plan.tile_plan`; Splash and
tokamax: their mask info), as do the **HBM bytes** of each step: a q block when the q block index
changes, k and v blocks when the kv block index changes, a mask block (int8) when the mask-block
index changes, the output block when a row finishes (Pallas' pipeline fetches a block only when its
index changes between consecutive steps).  **Rule:** a step takes ``max(compute, memory)``, the
steady state of a double-buffered pipeline whose next fetch overlaps the current step's compute;
summed over the steps, plus the once-per-call code.  Cycles are clock-free; the time converts
them at the v6e clock of :func:`svgtpu.costmodel.specs.get_device` (the compiled probe's, else the prior) with
the HBM bandwidth of :data:`svgtpu.costmodel.specs.DEVICES`.

Provenance ``compiled-v6e``: read from what the compiler produced, nothing run.  Compiles are cached
in ``build/compiled-v6e/`` keyed by the variant, the sources it depends on, :data:`SCHEMA` and the
jax / libtpu / tokamax versions.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from importlib import metadata
from pathlib import Path

import numpy as np

from svgtpu.bench.llo import bundle_lines
from svgtpu.geometry import parse_tiles
from svgtpu.production import PRODUCTION
from svgtpu.recipes import MAXDIFFUSION_DEFAULT_TILE, MAXDIFFUSION_V6E_TILE, TILES as TILE_RECIPES

KERNELS = ("ours", "splash", "tokamax")
#: The tiles compared: MaxDiffusion's Wan tiles for v6e (the production tile) and its default square
#: tile (:mod:`svgtpu.recipes` cites both).
TILES = tuple((t.block_q, t.block_kv) for t in (MAXDIFFUSION_V6E_TILE, MAXDIFFUSION_DEFAULT_TILE))
GEOMETRIES = ("720p", "1440p")
_EXIT = re.compile(r"scmp\.(?:ge|gt)\.s32\.totalorder %\w+, (\d+) /\* loop exit test")
_BRANCH = re.compile(r"sbr\.rel \((!?)%\w+\) target = \$region(\d+)")
_STARTS = re.compile(r"(?:Start|Start/End empty) region (\d+)")
#: Our kernel's sources (the cache key of an ``ours`` variant hashes them).  Every key also holds the
#: mask itself (its parameters, or its tiles), the versions and :data:`SCHEMA`, which stands for this
#: module's compile-and-read code: bump it when that changes.
_OUR_SOURCES = ("kernels/block_sparse.py", "kernels/common.py", "kernels/budget.py", "kernels/plan.py",
                "kernels/config.py")
SCHEMA = 1
#: Compiles run at once (each a child process of about 3-4 GB): the cores, at most 4.
COMPILE_WORKERS = max(1, min(4, os.cpu_count() or 1))


# -- reading one schedule ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Schedule:
    """The static cost structure of one compiled Pallas kernel (bundles = cycles)."""

    total: int            # bundles of the whole program
    loop: int             # static bundles of the grid loop
    iterations: int | None  # the grid loop's exit-test trip count (None: a bound in a register)
    overhead: int         # cycles of one grid-loop iteration outside init / bodies / finish
    init: int             # cycles of the init region when taken
    finish: int           # cycles of the finish region when taken
    bodies: tuple         # cycles of each tile body when taken (nested loops times their trips)
    body_static: tuple    # static bundles of each body (one pass of any nested loop)
    body_trips: tuple     # trip count of the nested loop of each body (1 if none)

    @property
    def once(self) -> int:
        """Bundles outside the grid loop (run once per call)."""
        return self.total - self.loop


def read_schedule(text: str) -> Schedule:
    """Parse a ``final_bundles`` dump of one kernel into its :class:`Schedule` (see the module doc)."""
    bundles = bundle_lines(text)
    starts: dict[int, int] = {}
    for i, line in enumerate(bundles):
        for r in _STARTS.findall(line):
            starts.setdefault(int(r), i)
    forward, loops = [], []  # (branch, body start, end) / (start, end incl. delay)
    for i, line in enumerate(bundles):
        for _, region in _BRANCH.findall(line):
            target = starts[int(region)]
            delay = next(j for j in range(i, min(i + 8, len(bundles))) if "End region" in bundles[j]) - i \
                if any("End region" in bundles[j] for j in range(i, min(i + 8, len(bundles)))) else 0
            if target > i:
                forward.append((i, min(i + 1 + delay, target), target))
            else:
                loops.append((target, i + 1 + delay))
    if not loops:
        raise RuntimeError("no grid loop in the schedule")
    exits = [(i, int(m.group(1))) for i, line in enumerate(bundles) for m in [_EXIT.search(line)] if m]

    def trip(loop) -> int:
        a, b = loop
        inner = [lp for lp in loops if lp != loop and a <= lp[0] and lp[1] <= b]
        own = [n for i, n in exits if a <= i < b and not any(x <= i < y for x, y in inner)]
        if len(own) > 1:
            raise RuntimeError(f"loop {loop}: expected one exit test, found {own}")
        return own[0] if own else None  # a bound held in a register (a dynamic grid)

    trips = {lp: trip(lp) for lp in loops}
    grid = max(loops, key=lambda lp: lp[1] - lp[0])
    if any(trips[lp] is None for lp in loops if lp != grid):
        raise RuntimeError("a loop inside the grid loop has no constant trip count")

    def cost(a: int, b: int) -> int:
        """Cycles of bundles [a, b) with every nested loop run its trip count."""
        return (b - a) + sum((trips[lp] - 1) * (lp[1] - lp[0]) for lp in loops
                             if lp != grid and a <= lp[0] and lp[1] <= b)

    mxu = [any("vmatmul" in bundles[j] or "vmatres" in bundles[j] for j in range(s, e)) for _, s, e in forward]
    regions = [(s, e) for (_, s, e) in forward if grid[0] <= s and e <= grid[1]]
    mxu_regions = [(s, e) for (_, s, e), m in zip(forward, mxu) if m and grid[0] <= s and e <= grid[1]]

    def children(parent, pool):
        inside = [r for r in pool if r != parent and parent[0] <= r[0] and r[1] <= parent[1]]
        return [r for r in inside if not any(o != r and o[0] <= r[0] and r[1] <= o[1] for o in inside)]

    level = children(grid, mxu_regions)
    while len(level) == 1 and children(level[0], mxu_regions):
        level = children(level[0], mxu_regions)
    bodies = sorted(level)
    if not bodies:
        raise RuntimeError("no tile body (MXU region) in the grid loop")
    parent = min((r for r in regions + [grid] if all(r[0] <= b[0] and b[1] <= r[1] for b in bodies)
                  and r not in bodies), key=lambda r: r[1] - r[0])
    siblings = [r for r in children(parent, regions) if r not in bodies]

    def has(region, op):
        return any(op in bundles[j] for j in range(*region))
    before = [r for r in siblings if r[1] <= bodies[0][0] and has(r, "vst") and not has(r, "dma")]
    after = [r for r in siblings if r[0] >= bodies[-1][1] and has(r, "vrcp")]
    init = cost(*before[-1]) if before else 0
    finish = cost(*after[0]) if after else 0
    body_costs = tuple(cost(*b) for b in bodies)
    inner = [tuple(trips[lp] for lp in loops if b[0] <= lp[0] and lp[1] <= b[1]) or (1,) for b in bodies]
    one_pass = cost(*grid)  # one iteration, nested loops run
    return Schedule(total=len(bundles), loop=grid[1] - grid[0], iterations=trips[grid],
                    overhead=one_pass - init - finish - sum(body_costs),
                    init=init, finish=finish, bodies=body_costs,
                    body_static=tuple(b[1] - b[0] for b in bodies), body_trips=tuple(max(t) for t in inner))


# -- compiling one variant (child process: libtpu reads its dump flags at start-up) -------------

@dataclasses.dataclass(frozen=True)
class Variant:
    """One kernel on one mask at one tile size: ``kernel`` in :data:`KERNELS`, ``mask`` ``dense`` /
    ``svg`` / ``svg-aligned`` (SVG's default kept fraction, snapped to the tiles) or ``empty`` (no
    allowed pair: the tests' known answer)."""

    kernel: str
    mask: str
    geometry: str
    block_q: int
    block_kv: int
    block_kv_compute: int
    fast_path: bool = True
    head_dim: int = 128
    dtype: str = "bfloat16"

    @property
    def name(self) -> str:
        tail = "" if self.kernel != "ours" else ("-fast" if self.fast_path else "-nofast")
        return f"{self.kernel}-{self.mask}{tail}"


MASKS = ("dense", "svg", "svg-aligned")


def _mask_of(v: Variant):
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.geometry import get_geometry
    from svgtpu.masks.core import DenseMask
    g = get_geometry(v.geometry)
    if v.mask == "dense":
        return g, DenseMask(g.L)
    if v.mask == "empty":  # the known-answer case of the tests: every row takes one zero-writing step
        from svgtpu.masks.core import TileMask
        return g, TileMask(g.L, v.block_q, v.block_kv, np.zeros((-(-g.L // v.block_q), -(-g.L // v.block_kv)), bool))
    if v.mask not in MASKS:
        raise ValueError(f"mask must be one of {', '.join(MASKS)}, got {v.mask!r}")
    return g, SVGConfig(block_q=v.block_q, block_kv=v.block_kv,
                        align="snap" if v.mask == "svg-aligned" else None).mask(g)


def _computed_in_kernel(mask) -> bool:
    """Whether the libraries get ``mask`` as a function of the token ids (computed in the kernel, on
    every tile: a band mask's partial tiles are nearly all different) or as materialized partial blocks
    (the dense and tile-aligned masks: their only partial blocks are the padded ones, one or a few
    distinct blocks, and their full tiles then skip the mask)."""
    from svgtpu.masks.core import DenseMask
    return mask.computable and not isinstance(mask, DenseMask)


def _library_mask(lib, mask, shape):
    """Our mask as a Splash / tokamax mask of ``shape`` (padded rows and keys disallowed): computed in
    the kernel from iotas when ours is (``computable``), else read block by block (partial blocks
    materialized by the library, as a ``NumpyMask`` would be, without the full array).  Blocks our
    mask counts as all-allowed or all-disallowed are handed over without evaluating them."""
    L = mask.L

    def allowed(q, k):
        return mask.allowed(q, k) & (q < L) & (k < L)

    def whole(idx):  # an all-allowed or all-disallowed block without evaluating it element by element
        qs, ks = (slice(s.start or 0, s.stop or n) for s, n in zip(idx, shape))
        inside = max(0, min(qs.stop, L) - qs.start) * max(0, min(ks.stop, L) - ks.start)
        count = int(mask.count_grid([min(qs.start, L), min(qs.stop, L)], [min(ks.start, L), min(ks.stop, L)])[0, 0]) \
            if inside else 0
        size = (qs.stop - qs.start, ks.stop - ks.start)
        if count == 0:
            return np.zeros(size, bool)
        if count == size[0] * size[1]:
            return np.ones(size, bool)
        return None

    if _computed_in_kernel(mask):
        class Computed(lib._ComputableMask):
            def __getitem__(self, idx):
                block = whole(idx)
                return super().__getitem__(idx) if block is None else block

            def __eq__(self, other):
                return type(other) is type(self) and other.shape == self.shape

            def __hash__(self):
                return hash((mask, self.shape))
        return Computed(shape, allowed)

    class Blocks(lib.Mask):
        @property
        def shape(self):
            return shape

        def __getitem__(self, idx):
            block = whole(idx)
            qs, ks = idx
            return mask.block(qs.start or 0, qs.stop or shape[0], ks.start or 0, ks.stop or shape[1]) \
                if block is None else block

        def __eq__(self, other):
            return type(other) is type(self)

        def __hash__(self):
            return hash((mask, shape))
    return Blocks()


def _steps_ours(v: Variant, mask, L: int) -> list[list]:
    """Per ``pallas_call`` (plan chunk): rows ``[body, first, last, q, kv, mask_block]`` of each grid step."""
    from svgtpu.kernels.budget import device_memory
    from svgtpu.kernels.plan import FIRST, LAST, tile_plan
    from svgtpu.masks.tiles import FULL, PARTIAL
    plan = tile_plan(mask, L, v.block_q, v.block_kv, v.fast_path)
    kinds = {FULL: 0, PARTIAL: 1} if v.fast_path else {FULL: 0, PARTIAL: 0}
    calls, s0 = [], 0
    for chunk in plan.chunks(device_memory("v6e").smem_budget):
        rows = []
        for s in range(s0, s0 + chunk.steps):
            kind, flags = int(plan.kind[0, s]), int(plan.flags[0, s])
            rows.append([kinds.get(kind), bool(flags & FIRST), bool(flags & LAST), int(plan.q_tile[0, s]),
                         int(plan.kv_tile[0, s]), -1 if plan.block_index is None else int(plan.block_index[0, s])])
        calls.append(rows)
        s0 += chunk.steps
    return calls


def _steps_splash(info) -> list[list]:
    block_mask = np.asarray(info.block_mask)[0]
    nq, width = block_mask.shape
    data_next = None if info.data_next is None else np.asarray(info.data_next)[0]
    mask_next = None if info.mask_next is None else np.asarray(info.mask_next)[0]
    return [[0 if block_mask[i, j] > 0 else None, j == 0, j == width - 1, i,
             int(data_next[i, j]) if data_next is not None else j,
             int(mask_next[i, j]) if mask_next is not None else -1] for i in range(nq) for j in range(width)]


def _steps_tokamax(info, info_lib) -> list[list]:
    rows, cols = np.asarray(info.active_rows), np.asarray(info.active_cols)
    start, end = (np.asarray(a) for a in info_lib.find_bounds(info.active_rows))
    block_mask = np.asarray(info.block_mask).reshape(-1)
    mask_next = None if info.mask_next is None else np.asarray(info.mask_next).reshape(-1)
    return [[1 if block_mask[s] == 1 else 0, bool(start[s]), bool(end[s]), int(rows[s]), int(cols[s]),
             int(mask_next[s]) if mask_next is not None else -1] for s in range(len(rows))]


def _with_vmem_limit(module) -> None:
    """Make a library kernel module's ``pallas_call``s ask for the VMEM our kernel asks for: Splash
    and tokamax set no limit, and the default (32 MiB) refuses Splash at MaxDiffusion's own 3024 x 2048
    tiles, which MaxDiffusion runs on v6e."""
    import types

    from svgtpu.kernels.budget import device_memory
    base, limit = module.pltpu, device_memory("v6e").vmem_budget
    proxy = types.SimpleNamespace(**{n: getattr(base, n) for n in dir(base) if not n.startswith("__")})
    proxy.CompilerParams = lambda **kw: base.CompilerParams(**{"vmem_limit_bytes": limit, **kw})
    module.pltpu = proxy


def _compile_child(spec: dict, out: str) -> None:
    """Child process: compile one variant for v6e (libtpu dumps into the folders it was given) and
    write its grid steps (per ``pallas_call``) to ``out``."""
    import jax
    import jax.numpy as jnp

    from svgtpu.bench.compile import compile_fn, topology_device
    from svgtpu.geometry import round_up
    from svgtpu.kernels import KernelConfig
    from svgtpu.kernels.api import block_sparse
    from svgtpu.kernels.common import compiling_for
    v = Variant(**spec)
    g, mask = _mask_of(v)
    device = jax.sharding.SingleDeviceSharding(topology_device("v6e"))
    dtype = jnp.dtype(v.dtype)
    if v.kernel == "ours":
        config = KernelConfig(v.block_q, v.block_kv, v.block_kv_compute, v.fast_path)
        x = jax.ShapeDtypeStruct((1, g.L, v.head_dim), dtype, sharding=device)
        fn, args = (lambda q, k, vv: block_sparse(q, k, vv, mask, config=config, implementation="mosaic",
                                                  device="v6e")), (x, x, x)
        calls = _steps_ours(v, mask, g.L)
    else:
        Lq, Lk = round_up(g.L, v.block_q), round_up(g.L, v.block_kv)
        if v.kernel == "splash":
            from jax.experimental.pallas.ops.tpu import splash_attention as lib
            from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel
            from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mlib
            _with_vmem_limit(splash_attention_kernel)
            kernel = lib.make_splash_mha(
                lib.MultiHeadMask([_library_mask(mlib, mask, (Lq, Lk))]),
                block_sizes=lib.BlockSizes(block_q=v.block_q, block_kv=v.block_kv,
                                           block_kv_compute=v.block_kv_compute),
                head_shards=1, q_seq_shards=1)
            calls = [_steps_splash(kernel.fwd_mask_info)]
        elif v.kernel == "tokamax":
            from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_kernel as lib
            from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask as mlib
            from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask_info as ilib
            _with_vmem_limit(lib)
            kernel = lib.make_splash_mha_single_device(
                _library_mask(mlib, mask, (Lq, Lk)),
                config=lib.SplashConfig(block_q=v.block_q, block_kv=v.block_kv, block_kv_compute=v.block_kv_compute))
            calls = [_steps_tokamax(kernel.fwd_mask_info, ilib)]
        else:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {v.kernel!r}")
        xq = jax.ShapeDtypeStruct((1, Lq, v.head_dim), dtype, sharding=device)
        xk = jax.ShapeDtypeStruct((1, Lk, v.head_dim), dtype, sharding=device)
        fn, args = (lambda q, k, vv: kernel(q, k, vv)), (xq, xk, xk)
    with compiling_for("v6e"):
        result = compile_fn(fn, args)
    if not result["compiled"]:
        sys.exit(f"not compiled: {result['reason']}")
    Path(out).write_text(json.dumps(calls))


def _dumped_schedules(jf: Path, kernel: str) -> list[str]:
    """The final bundle schedules of the Pallas kernels in an LLO dump folder, in dump order."""
    tag = {"ours": "block_sparse_attention", "splash": "splash", "tokamax": "splash"}[kernel]
    files = sorted((p for p in jf.glob("*final_bundles.txt") if "analysis" not in p.name and tag in p.name.lower()),
                   key=lambda p: p.name.split("-")[0])
    return [p.read_text() for p in files]


def compile_variant(v: Variant) -> dict:
    """Compile ``v`` for v6e in a child process; its schedules (one per ``pallas_call``) as
    :class:`Schedule` dicts and its grid steps, or ``{"refused": <the compiler's reason>}``."""
    with tempfile.TemporaryDirectory() as tmp:
        jf, out = Path(tmp, "jf"), Path(tmp, "steps.json")
        env = dict(os.environ, LIBTPU_INIT_ARGS=" ".join([
            os.environ.get("LIBTPU_INIT_ARGS", ""), f"--xla_jf_dump_to={jf}", "--xla_jf_dump_llo_text=true"]).strip())
        code = (f"import json, svgtpu.bench.compiled as m; "
                f"m._compile_child(json.loads({json.dumps(json.dumps(dataclasses.asdict(v)))}), {str(out)!r})")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        last = (done.stderr.strip().splitlines() or [""])[-1]
        if done.returncode and last.startswith("not compiled: "):  # the compiler's refusal: a result too
            return {"refused": last[len("not compiled: "):]}
        if done.returncode:
            raise RuntimeError(f"compiling {v.name} for v6e failed: {last}")
        calls = json.loads(out.read_text())
        schedules = [read_schedule(text) for text in _dumped_schedules(jf, v.kernel)]
    if len(schedules) != len(calls):
        raise RuntimeError(f"{v.name}: {len(schedules)} kernel schedules for {len(calls)} pallas_calls")
    # pair each call with the schedule whose grid loop runs its steps (plus the same pipeline fill)
    schedules = sorted(schedules, key=lambda s: s.iterations)
    order = sorted(range(len(calls)), key=lambda i: len(calls[i]))
    paired = [None] * len(calls)
    for i, s in zip(order, schedules):
        paired[i] = s
    return {"schedules": [dataclasses.asdict(s) for s in paired], "calls": calls}


def _versions() -> dict:
    return {p: metadata.version(p) for p in ("jax", "libtpu", "tokamax")}


def _cache_key(v: Variant) -> str:
    _, mask = _mask_of(v)
    h = hashlib.sha256(json.dumps([dataclasses.asdict(v), _versions(), SCHEMA], sort_keys=True).encode())
    tiles = getattr(mask, "tiles", None)   # a tile mask is its tiles; the others are their parameters
    h.update(repr(mask).encode() if tiles is None else repr((mask.L, mask.block_q, mask.block_kv)).encode()
             + np.ascontiguousarray(tiles).tobytes())
    package = Path(__file__).resolve().parents[1]
    for src in _OUR_SOURCES if v.kernel == "ours" else ():
        h.update((package / src).read_bytes())
    if v.kernel != "ours" and not _computed_in_kernel(mask):
        h.update(b"materialized partial blocks")
    return h.hexdigest()[:20]


def cached_compile(v: Variant) -> dict:
    """:func:`compile_variant`, cached in ``build/compiled-v6e/<name>-<content key>.json``."""
    from svgtpu.report.paths import REPO_ROOT
    path = Path(REPO_ROOT, "build", "compiled-v6e", f"{v.geometry}-{v.block_q}x{v.block_kv}-{v.name}-{_cache_key(v)}.json")
    if path.exists():
        return json.loads(path.read_text())
    result = compile_variant(v)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(path)
    return result


# -- from schedules and steps to cycles, bytes and time ------------------------------------------

#: The pipeline's fill/drain iterations of a grid loop whose bound is a register (tokamax's dynamic
#: grid): what every constant-bound grid loop here shows (exit test = steps + 2).
PIPELINE_FILL = 2


def step_bytes(steps: list[list], v: Variant) -> list[int]:
    """HBM bytes each grid step moves: q / k+v / mask blocks when their block index changes from the
    previous step, the output block when the step closes its row."""
    item = 2 if v.dtype == "bfloat16" else 4
    q_b, kv_b, mask_b, out_b = (v.block_q * v.head_dim * item, 2 * v.block_kv * v.head_dim * item,
                                v.block_q * v.block_kv, v.block_q * v.head_dim * item)
    out, prev = [], (None, None, None)
    for _, _, last, q, kv, m in steps:
        out.append((q != prev[0]) * q_b + (kv != prev[1]) * kv_b + (m >= 0 and m != prev[2]) * mask_b
                   + last * out_b)
        prev = (q, kv, m)
    return out


def estimate(compiled: dict, v: Variant) -> dict:
    """Static cycles per head (clock-free), the step-overhead share, HBM bytes and the time band of one
    compiled variant (the rules of the module doc)."""
    from svgtpu.costmodel.compiled import default_compiled
    from svgtpu.costmodel.specs import get_device
    v6e = get_device("v6e", default_compiled())   # the clock of the compiled probe, else the prior
    bandwidth = v6e.hbm_bandwidth
    compute = overhead = once = 0
    per_step: list[tuple[int, int]] = []
    fill_iters, body_cycles, kinds = 0, 0, Counter()
    for s, steps in zip(compiled["schedules"], compiled["calls"]):
        iterations = s["iterations"] if s["iterations"] is not None else len(steps) + PIPELINE_FILL
        fill = iterations - len(steps)
        if not 0 <= fill <= 4:
            raise RuntimeError(f"{v.name}: grid loop runs {iterations} iterations for {len(steps)} steps")
        bodies = s["bodies"]
        for (body, first, last, *_), nbytes in zip(steps, step_bytes(steps, v)):
            b = 0 if body is None else bodies[min(body, len(bodies) - 1)]
            kinds["empty" if body is None else ("full", "partial")[min(body, 1)] if len(bodies) > 1 else
                  "masked"] += 1
            c = s["overhead"] + first * s["init"] + last * s["finish"] + b
            per_step.append((c, nbytes))
            body_cycles += b
        fill_iters += fill
        overhead += iterations * s["overhead"]
        once += s["total"] - s["loop"]
        compute += sum(c for c, _ in per_step[-len(steps):]) + fill * s["overhead"] + s["total"] - s["loop"]
    total_bytes = sum(b for _, b in per_step)
    band = {}
    for mxus, clock in ((v6e.mxus_per_core, v6e.clock_hz),):
        seconds = sum(max(c / clock, b / bandwidth) for c, b in per_step) + (compute - sum(c for c, _ in per_step)) / clock
        band[f"{clock / 1e9:.2f}GHz"] = {
            "mxus_per_core": mxus, "seconds": seconds,
            "memory_bound_steps": sum(b / bandwidth > c / clock for c, b in per_step) / max(len(per_step), 1)}
    return {"variant": v.name, "kernel": v.kernel, "mask": v.mask, "fast_path": v.fast_path,
            "geometry": v.geometry, "block_q": v.block_q, "block_kv": v.block_kv,
            "block_kv_compute": v.block_kv_compute, "steps": len(per_step), "fill_iterations": fill_iters,
            **{f"{k}_steps": n for k, n in sorted(kinds.items())},
            "cycles": compute, "body_cycles": body_cycles, "overhead_cycles": overhead, "once_cycles": once,
            "overhead_share": overhead / compute, "hbm_bytes": total_bytes, "time_band": band,
            "schedules": compiled["schedules"]}


# -- the comparison ------------------------------------------------------------------------------

#: The ``block_kv_compute`` the recipes give Splash at their tiles (MaxDiffusion's: 1024 at 3024 x 2048):
#: the baselines run at it; other tiles use our default.
MAXDIFFUSION_KV_COMPUTE = {(t.block_q, t.block_kv): t.block_kv_compute for t in TILE_RECIPES.values()}


def variants(geometry: str, block_q: int, block_kv: int) -> list[Variant]:
    """Ours on dense, SVG and aligned SVG, fast path on and off; Splash and tokamax on the same masks."""
    from svgtpu.kernels.config import default_block_kv_compute
    ours_kc = default_block_kv_compute(block_q, block_kv)
    theirs_kc = MAXDIFFUSION_KV_COMPUTE.get((block_q, block_kv), ours_kc)
    out = [Variant("ours", m, geometry, block_q, block_kv, ours_kc, fast) for m in MASKS for fast in (True, False)]
    return out + [Variant(k, m, geometry, block_q, block_kv, theirs_kc) for k in ("splash", "tokamax") for m in MASKS]


def _density(v: Variant) -> float:
    from svgtpu.kernels.plan import tile_plan
    g, mask = _mask_of(v)
    return tile_plan(mask, g.L, v.block_q, v.block_kv, True).as_dict()["density"]


def ratios(rows: dict) -> dict:
    """The headline ratios of one geometry and tile size (``rows``: estimate by variant name): ours /
    ideal (ideal = our dense cycles x the mask's tile density), ours / Splash and ours / tokamax on the
    same mask, fast path on / off."""
    c = {name: r["cycles"] for name, r in rows.items() if r.get("compiled", True)}

    def over(a, b, scale=1.0):  # None where a variant did not compile
        return c[a] / (c[b] * scale) if a in c and b in c else None
    out = {}
    for mask in ("svg", "svg-aligned"):
        density = rows[f"ours-{mask}-fast"].get("tile_density", 0.0)
        out[f"{mask}: ours / ideal"] = over(f"ours-{mask}-fast", "ours-dense-fast", density)
        out[f"{mask}: ours (no fast path) / ideal"] = over(f"ours-{mask}-nofast", "ours-dense-fast", density)
        out[f"{mask}: ours / splash"] = over(f"ours-{mask}-fast", f"splash-{mask}")
        out[f"{mask}: ours / tokamax"] = over(f"ours-{mask}-fast", f"tokamax-{mask}")
        out[f"{mask}: fast path on / off"] = over(f"ours-{mask}-fast", f"ours-{mask}-nofast")
        out[f"{mask}: step-overhead share"] = rows[f"ours-{mask}-fast"].get("overhead_share")
    out["dense: ours / splash"] = over("ours-dense-fast", "splash-dense")
    out["dense: ours / tokamax"] = over("ours-dense-fast", "tokamax-dense")
    out["dense: fast path on / off"] = over("ours-dense-fast", "ours-dense-nofast")
    return out


def bench_compiled(geometry: str = PRODUCTION.resolution, tiles=TILES, *, progress: bool = False) -> dict:
    """Every variant of :func:`variants` at each tile size, compiled for v6e (cached), estimated, with
    :func:`ratios`; provenance ``compiled-v6e``."""
    from svgtpu.bench.compile import topology_device
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.config import KernelConfig
    get_geometry(geometry)
    tiles = [tuple(t) for t in tiles]
    for bq, bkv in tiles:
        KernelConfig(bq, bkv)  # one clear line on bad tiles
    topology_device("v6e")  # one clear line without libtpu
    todo = [v for bq, bkv in tiles for v in variants(geometry, bq, bkv)]
    # each compile is a child process of its own (its own dump folder): COMPILE_WORKERS run at once
    with concurrent.futures.ThreadPoolExecutor(max_workers=COMPILE_WORKERS) as pool:
        results = pool.map(cached_compile, todo)
        if progress:
            from tqdm.auto import tqdm
            results = tqdm(results, total=len(todo), desc=f"compiling for v6e ({geometry})", unit="variant")
        results = list(results)
    rows = []
    for v, compiled in zip(todo, results):
        if "refused" in compiled:  # e.g. a plan beyond SMEM at small tiles: the compiler's own words
            rows.append({"variant": v.name, "kernel": v.kernel, "mask": v.mask, "fast_path": v.fast_path,
                         "geometry": v.geometry, "block_q": v.block_q, "block_kv": v.block_kv,
                         "block_kv_compute": v.block_kv_compute, "compiled": False, "reason": compiled["refused"]})
            continue
        row = estimate(compiled, v)
        row.update(compiled=True, tile_density=_density(v))
        rows.append(row)
    per_tile = []
    for bq, bkv in tiles:
        mine = {r["variant"]: r for r in rows if (r["block_q"], r["block_kv"]) == (bq, bkv)}
        per_tile.append({"block_q": bq, "block_kv": bkv, "ratios": ratios(mine)})
    return {"provenance": "compiled-v6e", "geometry": geometry, "versions": _versions(),
            "rule": "per grid step max(compute cycles / clock, HBM bytes / bandwidth), summed; ratios use "
                    "the clock-free compute cycles",
            "clocks": list(next(r["time_band"] for r in rows if r["compiled"])),
            "rows": rows, "tiles": per_tile}


def run_command(args):
    """``svgtpu bench compiled``: ``(result, table)``."""
    from svgtpu.report.tables import format_table
    try:
        result = bench_compiled(args.geometry or PRODUCTION.resolution, parse_tiles(args.tiles, "--tiles"), progress=not args.json)
    except RuntimeError as e:  # no libtpu
        raise ValueError(str(e)) from None
    clocks = result["clocks"]
    rows = [{"tiles": f"{r['block_q']}x{r['block_kv']}", "variant": r["variant"], "kv_compute": r["block_kv_compute"],
             "steps": r["steps"], "cycles": r["cycles"], "overhead_share": round(r["overhead_share"], 4),
             "hbm_MB": round(r["hbm_bytes"] / 1e6, 1),
             **{f"us@{c}": round(r["time_band"][c]["seconds"] * 1e6, 1) for c in clocks}}
            if r["compiled"] else {"tiles": f"{r['block_q']}x{r['block_kv']}", "variant": r["variant"],
                                   "kv_compute": r["block_kv_compute"], "steps": "not compiled: " + r["reason"][:120]}
            for r in result["rows"]]
    head = (f"{result['geometry']}, one head, bf16, d=128 [{result['provenance']}; jax {result['versions']['jax']}, "
            f"libtpu {result['versions']['libtpu']}, tokamax {result['versions']['tokamax']}]; cycles = static "
            f"bundles of the whole kernel; time: {result['rule']}")
    ratio_rows = [{"tiles": f"{t['block_q']}x{t['block_kv']}", "ratio": k, "value": None if x is None else round(x, 3)}
                  for t in result["tiles"] for k, x in t["ratios"].items()]
    return result, "\n\n".join([head, format_table(rows), format_table(ratio_rows)])


def sparse_cycles_over_ideal(geometry: str = PRODUCTION.resolution, *, block_q: int = PRODUCTION.block_q,
                              block_kv: int = PRODUCTION.block_kv,
                              mask: str = "svg-aligned", fast_path: bool = True) -> float:
    """Our kernel's static v6e cycles on ``mask`` over the ideal (our dense cycles x the mask's tile
    density): the sparse layer's kernel efficiency is its inverse.  Compiles two variants (cached in
    ``build/compiled-v6e``; about a minute each when not); needs libtpu.  For the cost model's
    ``sparse_efficiency`` evidence (the cost model sits below bench, so its caller passes the value)."""
    from svgtpu.kernels.config import default_block_kv_compute
    if mask not in ("svg", "svg-aligned"):
        raise ValueError(f"mask must be svg or svg-aligned, got {mask!r}")
    kc = default_block_kv_compute(block_q, block_kv)
    sparse, dense = (Variant("ours", m, geometry, block_q, block_kv, kc, f)
                     for m, f in ((mask, fast_path), ("dense", True)))
    cycles = {}
    for v in (sparse, dense):
        compiled = cached_compile(v)
        if "refused" in compiled:
            raise ValueError(f"{v.name} at {block_q}x{block_kv} does not compile for v6e: {compiled['refused']}")
        cycles[v.mask] = estimate(compiled, v)["cycles"]
    return cycles[mask] / (cycles["dense"] * _density(sparse))


__all__ = ["KERNELS", "MASKS", "TILES", "GEOMETRIES", "MAXDIFFUSION_KV_COMPUTE", "PIPELINE_FILL", "SCHEMA",
           "Schedule", "Variant", "read_schedule", "compile_variant", "cached_compile", "step_bytes", "estimate",
           "variants", "ratios", "bench_compiled", "run_command", "sparse_cycles_over_ideal"]
