"""The kernels compared on the compiled schedule: ours, JAX's Splash and tokamax, as compiled variants.

A :class:`Variant` is one kernel on one mask at one tile size for one TPU (v6e, v7x).  Compiling it
(in a child process, :mod:`svgtpu.compiler.dumps`) gives the final schedule of each of its
``pallas_call``\\s, read by :func:`svgtpu.compiler.llo.read_schedule`, with the instruction counts of each
tile body by unit (:mod:`svgtpu.compiler.units`); the kernel's own plan gives its grid **steps** (which
body each runs, whether it opens or closes its row, the blocks it reads).

Several variants are one **program**: the compiled code depends on the mask only through how the
kernel gets it.  Ours on the dense and on the tile-aligned mask both mask only padded keys (a
``padding`` plan) and compile to the same tile bodies, per-step code, init and finish, only the grid
loop's bound differs; JAX's Splash and tokamax read both as materialized partial blocks.  Such
variants share one compile (:func:`program_key`); the steps of each come from its own plan, and the
grid loop's extra pipeline iterations (its fill) are the compiled program's.
``tests/test_tile_table.py`` checks that sharing on a small grid.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from svgtpu.errors import BadInput
from svgtpu.facts.kernels import kernel_names
from svgtpu.kernels.config import default_layout

#: The kernels whose schedules are compiled and read (:data:`svgtpu.facts.kernels.KERNELS`).
KERNELS = kernel_names(compiled=True)
MASKS = ("dense", "svg", "svg-aligned")
#: Our kernel's sources: the cache key of a program of ours hashes them.
OUR_SOURCES = ("kernels/block_sparse.py", "kernels/band_table.py", "kernels/common.py", "kernels/budget.py",
               "kernels/plan.py", "kernels/config.py")
#: This module and the schedule readers: every key hashes them.
READER_SOURCES = ("compiler/variants.py", "compiler/llo.py", "compiler/units.py")


def sources_of(v: "Variant") -> tuple[str, ...]:
    """The package files a record of ``v`` is made of: the readers and, for ours, the kernel (the mask enters
    its key by content: :func:`svgtpu.compiler.dumps.content_of`)."""
    return READER_SOURCES + (OUR_SOURCES + ("kernels/api.py",) if v.kernel == "ours" else ())


@dataclasses.dataclass(frozen=True)
class Variant:
    """One kernel on one mask at one tile size: ``kernel`` in :data:`KERNELS`, ``mask`` ``dense`` /
    ``svg`` / ``svg-aligned`` (SVG's default kept fraction, snapped to the tiles) or ``empty`` (no
    allowed pair: the tests' known answer); ``geometry`` a preset (``1440p``) or a ``TxHxW`` grid;
    ``device`` ``v6e`` or ``v7x``."""

    kernel: str
    mask: str
    geometry: str
    block_q: int
    block_kv: int
    block_kv_compute: int
    fast_path: bool = True
    head_dim: int = 128
    dtype: str = "bfloat16"
    device: str = "v6e"
    layout: str | None = None  # ours: None is the kernel's default for the tile (KernelConfig)

    @property
    def name(self) -> str:
        """``ours-svg-fast`` (our default layout for the tile), ``ours-svg-fast-query-major`` (the other
        one, named), ``splash-svg``."""
        tail = "" if self.kernel != "ours" else ("-fast" if self.fast_path else "-nofast")
        if self.kernel == "ours" and self.layout is not None and self.layout != default_layout(self.block_q):
            tail += f"-{self.layout}"
        return f"{self.kernel}-{self.mask}{tail}"

    @property
    def kernel_layout(self) -> str:
        """How the kernel lays a tile's scores: ours as configured, the libraries ``query-major``
        (``q k^T``, then ``p v``)."""
        if self.kernel != "ours":
            return "query-major"
        return self.layout or default_layout(self.block_q)


def mask_of(v: Variant):
    """``(geometry, mask)`` of a variant."""
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
        raise BadInput(f"mask must be one of {', '.join(MASKS)}, got {v.mask!r}")
    return g, SVGConfig(block_q=v.block_q, block_kv=v.block_kv,
                        align="snap" if v.mask == "svg-aligned" else None).mask(g)


def computed_in_kernel(mask) -> bool:
    """Whether the libraries get ``mask`` as a function of the token ids (computed in the kernel, on
    every tile: a band mask's partial tiles are nearly all different) or as materialized partial blocks
    (the dense and tile-aligned masks: their only partial blocks are the padded ones, one or a few
    distinct blocks, and their full tiles then skip the mask)."""
    from svgtpu.masks.core import DenseMask
    return mask.computable and not isinstance(mask, DenseMask)


def library_mask(lib, mask, shape):
    """Our mask as a Splash / tokamax mask of ``shape`` (padded rows and keys disallowed): computed in
    the kernel from iotas when ours is (``computable``), else read block by block (partial blocks
    materialized by the library, as a ``NumpyMask`` would be, without the full array).  Blocks our
    mask counts as all-allowed or all-disallowed are handed over without evaluating them."""
    L = mask.L

    def allowed(q, k):
        return mask.allowed(q, k) & (q < L) & (k < L)

    def corners(idx):  # a slice pair as (q0, q1, k0, k1)
        (q0, q1), (k0, k1) = ((s.start or 0, s.stop or n) for s, n in zip(idx, shape))
        return q0, q1, k0, k1

    grids = {}  # (rows, keys) of a block -> the pair counts of every block of that grid, counted at once

    def count(q0, q1, k0, k1):  # the libraries read every block of one grid, each twice
        rows, keys = q1 - q0, k1 - k0
        if rows > 0 and keys > 0 and not (q0 % rows or k0 % keys or shape[0] % rows or shape[1] % keys):
            if (rows, keys) not in grids:
                grids[rows, keys] = mask.count_grid(np.arange(0, shape[0] + 1, rows), np.arange(0, shape[1] + 1, keys))
            return int(grids[rows, keys][q0 // rows, k0 // keys])
        return int(mask.count_grid([q0, q1], [k0, k1])[0, 0])

    @functools.lru_cache(maxsize=8)
    def constant(value, rows, keys):  # one read-only block per size: the libraries only read them
        block = np.full((rows, keys), value)
        block.setflags(write=False)
        return block

    def whole(idx):  # an all-allowed or all-disallowed block without evaluating it element by element
        q0, q1, k0, k1 = corners(idx)
        n = count(q0, q1, k0, k1)
        if n == 0 or n == (q1 - q0) * (k1 - k0):
            return constant(n > 0, q1 - q0, k1 - k0)
        return None

    if computed_in_kernel(mask):
        class Computed(lib._ComputableMask):
            def __getitem__(self, idx):  # on the host: the same pairs as the kernel's mask function
                block = whole(idx)
                return mask.block(*corners(idx)) if block is None else block

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
            return mask.block(*corners(idx)) if block is None else block

        def __eq__(self, other):
            return type(other) is type(self)

        def __hash__(self):
            return hash((mask, shape))
    return Blocks()


def steps_ours(v: Variant, mask, L: int) -> list[list]:
    """Per ``pallas_call`` (plan chunk): rows ``[body, first, last, q, kv, mask_block]`` of each grid step
    (``body``: 0 full, 1 partial, ``None`` an empty row's zero-writing step)."""
    from svgtpu.kernels.budget import device_memory
    from svgtpu.kernels.plan import FIRST, LAST, tile_plan
    from svgtpu.masks.tiles import FULL, PARTIAL
    plan = tile_plan(mask, L, v.block_q, v.block_kv, v.fast_path)
    kinds = {FULL: 0, PARTIAL: 1} if v.fast_path else {FULL: 0, PARTIAL: 0}
    calls, s0 = [], 0
    for chunk in plan.chunks(device_memory(v.device).smem_budget):
        rows = []
        for s in range(s0, s0 + chunk.steps):
            kind, flags = int(plan.kind[0, s]), int(plan.flags[0, s])
            rows.append([kinds.get(kind), bool(flags & FIRST), bool(flags & LAST), int(plan.q_tile[0, s]),
                         int(plan.kv_tile[0, s]), -1 if plan.block_index is None else int(plan.block_index[0, s])])
        calls.append(rows)
        s0 += chunk.steps
    return calls


def steps_splash(info) -> list[list]:
    """JAX Splash's grid steps (every block of the ``nq x nk`` grid; empty ones run no body)."""
    block_mask = np.asarray(info.block_mask)[0]
    nq, width = block_mask.shape
    data_next = None if info.data_next is None else np.asarray(info.data_next)[0]
    mask_next = None if info.mask_next is None else np.asarray(info.mask_next)[0]
    return [[0 if block_mask[i, j] > 0 else None, j == 0, j == width - 1, i,
             int(data_next[i, j]) if data_next is not None else j,
             int(mask_next[i, j]) if mask_next is not None else -1] for i in range(nq) for j in range(width)]


def steps_tokamax(info, info_lib, grid: tuple[int, int]) -> list[list]:
    """tokamax's grid steps: its compacted list of active blocks, or the whole ``grid`` (``nq x nk``)
    when the mask has no empty or partial block (then its mask info is empty and every step is full)."""
    if info.active_rows is None:
        nq, nk = grid
        return [[0, j == 0, j == nk - 1, i, j, -1] for i in range(nq) for j in range(nk)]
    rows, cols = np.asarray(info.active_rows), np.asarray(info.active_cols)
    start, end = (np.asarray(a) for a in info_lib.find_bounds(info.active_rows))
    block_mask = np.asarray(info.block_mask).reshape(-1)
    mask_next = None if info.mask_next is None else np.asarray(info.mask_next).reshape(-1)
    return [[1 if block_mask[s] == 1 else 0, bool(start[s]), bool(end[s]), int(rows[s]), int(cols[s]),
             int(mask_next[s]) if mask_next is not None else -1] for s in range(len(rows))]


def _with_vmem_limit(module, device: str) -> None:
    """Make a library kernel module's ``pallas_call``s ask for the VMEM our kernel asks for: Splash
    and tokamax set no limit, and the default (32 MiB) refuses Splash at MaxDiffusion's own 3024 x 2048
    tiles, which MaxDiffusion runs on v6e."""
    import types

    from svgtpu.kernels.budget import device_memory
    base = getattr(module.pltpu, "_svgtpu_base", module.pltpu)
    limit = device_memory(device).vmem_budget
    proxy = types.SimpleNamespace(**{n: getattr(base, n) for n in dir(base) if not n.startswith("__")})
    proxy.CompilerParams = lambda **kw: base.CompilerParams(**{"vmem_limit_bytes": limit, **kw})
    proxy._svgtpu_base = base
    module.pltpu = proxy


def library_kernel(v: Variant, mask, L: int, for_compile: bool = False):
    """``(kernel, calls)``: Splash's or tokamax's kernel object for ``mask`` at the variant's tiles
    (padded ``Lq x Lk``), and its grid steps; ``for_compile`` gives the library our VMEM limit (a
    change to the library module: only in the compiling child)."""
    from svgtpu.geometry import round_up
    Lq, Lk = round_up(L, v.block_q), round_up(L, v.block_kv)
    if v.kernel == "splash":
        from jax.experimental.pallas.ops.tpu import splash_attention as lib
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel
        from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mlib
        if for_compile:
            _with_vmem_limit(splash_attention_kernel, v.device)
        full = _unpadded_dense(mask, Lq, Lk)
        kernel = lib.make_splash_mha(
            lib.MultiHeadMask([mlib.FullMask((Lq, Lk)) if full else library_mask(mlib, mask, (Lq, Lk))]),
            block_sizes=lib.BlockSizes(block_q=v.block_q, block_kv=v.block_kv, block_kv_compute=v.block_kv_compute),
            head_shards=1, q_seq_shards=1)
        info = kernel.fwd_mask_info
        if info.block_mask is None:  # a full mask: no mask info, every block computed without a mask
            nq, nk = Lq // v.block_q, Lk // v.block_kv
            return kernel, [[[0, j == 0, j == nk - 1, i, j, -1] for i in range(nq) for j in range(nk)]]
        return kernel, [steps_splash(info)]
    if v.kernel == "tokamax":
        from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_kernel as lib
        from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask as mlib
        from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask_info as ilib
        if for_compile:
            _with_vmem_limit(lib, v.device)
        kernel = lib.make_splash_mha_single_device(
            library_mask(mlib, mask, (Lq, Lk)),
            config=lib.SplashConfig(block_q=v.block_q, block_kv=v.block_kv, block_kv_compute=v.block_kv_compute))
        return kernel, [steps_tokamax(kernel.fwd_mask_info, ilib, (Lq // v.block_q, Lk // v.block_kv))]
    raise BadInput(f"kernel must be one of {', '.join(KERNELS)}, got {v.kernel!r}")


def _unpadded_dense(mask, Lq: int, Lk: int) -> bool:
    """A dense mask at a length both tiles divide: Splash gets a ``FullMask`` (no mask at all; tokamax
    finds the same from the blocks, and its ``FullMask`` path asks for a local TPU)."""
    from svgtpu.masks.core import DenseMask
    return isinstance(mask, DenseMask) and Lq == Lk == mask.L


def steps(v: Variant) -> list[list]:
    """The grid steps of ``v`` per ``pallas_call``, from the kernel's own plan (no compile)."""
    g, mask = mask_of(v)
    return steps_ours(v, mask, g.L) if v.kernel == "ours" else library_kernel(v, mask, g.L)[1]


def program_kind(v: Variant) -> str:
    """What of the mask the compiled program depends on (module doc): ours: its plan's mask source
    (``padding`` / ``iota`` / ``blocks``) and, for ``iota``, the mask itself; the libraries: a full
    mask, a mask computed in the kernel, or materialized blocks."""
    g, mask = mask_of(v)
    if v.kernel == "ours":
        from svgtpu.kernels.budget import device_memory
        from svgtpu.kernels.plan import tile_plan
        plan = tile_plan(mask, g.L, v.block_q, v.block_kv, v.fast_path)
        chunks = len(plan.chunks(device_memory(v.device).smem_budget))
        return f"{plan.mask_source}:{chunks}" + (f":{mask!r}" if plan.mask_source != "padding" else "")
    from svgtpu.geometry import round_up
    if v.kernel == "splash" and _unpadded_dense(mask, round_up(g.L, v.block_q), round_up(g.L, v.block_kv)):
        return "full"
    return f"computed:{mask!r}" if computed_in_kernel(mask) else "blocks"


def program_of(v: Variant) -> tuple[dict, tuple]:
    """``(description, sources)`` of the program ``v`` compiles to: what its record's key is made of."""
    fields = {k: val for k, val in dataclasses.asdict(v).items() if k != "mask"}
    return {**fields, "program": program_kind(v)}, sources_of(v)


def program_key(v: Variant) -> str:
    """The content key of the program ``v`` compiles to (variants with one key share one compile)."""
    from svgtpu.compiler.dumps import cache_key
    return cache_key(*program_of(v))


def _compile_child(spec: dict, out: str) -> None:
    """Child process: compile one variant for its device (libtpu dumps where it was told) and write its
    grid steps to ``out`` (a library's mask info is built once, here)."""
    import jax
    import jax.numpy as jnp

    from svgtpu.compiler.compile import compile_fn, topology_device
    from svgtpu.geometry import round_up
    from svgtpu.kernels import KernelConfig
    from svgtpu.kernels.api import block_sparse
    from svgtpu.kernels.common import compiling_for
    v = Variant(**spec)
    g, mask = mask_of(v)
    device = jax.sharding.SingleDeviceSharding(topology_device(v.device))
    dtype = jnp.dtype(v.dtype)
    if v.kernel == "ours":
        config = KernelConfig(v.block_q, v.block_kv, v.block_kv_compute, v.fast_path, v.layout)
        x = jax.ShapeDtypeStruct((1, g.L, v.head_dim), dtype, sharding=device)
        fn, args = (lambda q, k, vv: block_sparse(q, k, vv, mask, config=config, implementation="mosaic",
                                                  device=v.device)), (x, x, x)
        calls = steps_ours(v, mask, g.L)
    else:
        kernel, calls = library_kernel(v, mask, g.L, for_compile=True)
        xq = jax.ShapeDtypeStruct((1, round_up(g.L, v.block_q), v.head_dim), dtype, sharding=device)
        xk = jax.ShapeDtypeStruct((1, round_up(g.L, v.block_kv), v.head_dim), dtype, sharding=device)
        fn, args = (lambda q, k, vv: kernel(q, k, vv)), (xq, xk, xk)
    with compiling_for(v.device):
        result = compile_fn(fn, args)
    if not result["compiled"]:
        sys.exit(f"not compiled: {result['reason']}")
    Path(out).write_text(json.dumps(calls))


def _kernel_files(jf: Path, kernel: str) -> list[str]:
    """The final schedules of the Pallas kernels in a dump folder, in dump order."""
    tag = {"ours": "block_sparse_attention", "splash": "splash", "tokamax": "splash"}[kernel]
    files = sorted((p for p in jf.glob("*final_bundles.txt")
                    if "schedule-analysis" not in p.name and tag in p.name.lower()), key=lambda p: p.name.split("-")[0])
    return [p.read_text() for p in files]


def compile_program(v: Variant) -> dict:
    """Compile ``v`` in a child process: per ``pallas_call`` its :class:`~svgtpu.compiler.llo.Schedule`
    (as a dict), the fill of its grid loop (iterations beyond the steps of ``v``) and the
    :class:`~svgtpu.compiler.units.UnitCounts` of each tile body; or ``{"refused": <the compiler's words>}``."""
    from svgtpu.compiler.dumps import child_env, run_child
    from svgtpu.compiler.llo import parse_bundles, read_schedule
    from svgtpu.compiler.units import count_units
    with tempfile.TemporaryDirectory() as tmp:
        jf, out = Path(tmp, "jf"), Path(tmp, "steps.json")
        code = (f"import json, svgtpu.compiler.variants as m; "
                f"m._compile_child(json.loads({json.dumps(json.dumps(dataclasses.asdict(v)))}), {str(out)!r})")
        done = run_child(code, child_env(jf), f"{v.name} for {v.device}")
        if done.returncode:
            return {"refused": done.stderr.strip().splitlines()[-1][len("not compiled: "):]}
        texts = _kernel_files(jf, v.kernel)
        calls = json.loads(out.read_text())
    if len(texts) != len(calls):
        raise RuntimeError(f"{v.name}: {len(texts)} kernel schedules for {len(calls)} pallas_calls")
    read = [(read_schedule(t), parse_bundles(t)) for t in texts]
    # pair each call with the schedule whose grid loop runs its steps (the longest plan, the most iterations)
    order = sorted(range(len(calls)), key=lambda i: len(calls[i]))
    paired = [None] * len(calls)
    for i, r in zip(order, sorted(read, key=lambda r: r[0].iterations or 0)):
        paired[i] = r
    out = []
    for (schedule, bundles), call in zip(paired, calls):
        units = []
        for segments in schedule.body_segments:
            counts = None
            for a, b, passes in segments:
                part = count_units(bundles[a:b], v.device).times(passes)
                counts = part if counts is None else counts + part
            units.append(dataclasses.asdict(counts))
        fill = None if schedule.iterations is None else schedule.iterations - len(call)
        out.append({"schedule": dataclasses.asdict(schedule), "fill": fill, "body_units": units})
    return {"calls": out, "variant": dataclasses.asdict(v), "steps": calls}


def program_name(v: Variant) -> str:
    """The name of the record of ``v``'s program (its key follows it in the file name)."""
    return f"{v.geometry}-{v.block_q}x{v.block_kv}-{v.kernel}-program"


def cached_compile(v: Variant) -> dict:
    """``{"schedules", "fills", "body_units", "calls"}`` of ``v`` (or ``{"refused": ...}``): its program
    compiled once per :func:`program_key` and cached (:func:`svgtpu.compiler.dumps.cached`), its steps
    from its own plan (those of the variant compiled come with the compile; others are cached too:
    a library's mask info at 1440p takes a while)."""
    from svgtpu.compiler.dumps import cached
    from svgtpu.compiler.dumps import content_of
    program = cached(v.device, program_name(v), *program_of(v), lambda: compile_program(v))
    if "refused" in program:
        return program
    calls = cached(v.device, f"{v.geometry}-{v.block_q}x{v.block_kv}-{v.name}-steps",
                   {**dataclasses.asdict(v), "what": "steps", "mask": content_of(mask_of(v)[1])}, sources_of(v),
                   lambda: {"calls": steps(v)})
    if len(calls["calls"]) != len(program["calls"]):
        raise RuntimeError(f"{v.name}: {len(calls['calls'])} plan chunks for {len(program['calls'])} compiled calls")
    return {"schedules": [c["schedule"] for c in program["calls"]], "fills": [c["fill"] for c in program["calls"]],
            "body_units": [c["body_units"] for c in program["calls"]], "calls": calls["calls"]}


__all__ = ["KERNELS", "MASKS", "OUR_SOURCES", "READER_SOURCES", "sources_of", "Variant", "mask_of", "computed_in_kernel", "library_mask", "steps", "steps_ours",
           "steps_splash", "steps_tokamax", "library_kernel", "program_kind", "program_of", "program_key", "program_name", "compile_program",
           "cached_compile"]
