"""Kernel benchmarks for claim C4: timings of the attention variants and vector-op counts per tile kind.

- :func:`bench_kernels` times XLA dense attention, JAX's Splash and tokamax's splash (dense, SVG
  mask, aligned mask) and our kernel (dense; SVG and aligned SVG mask, fast path off/on) on one
  geometry and block size.
  Variants are compiled first, then run interleaved round-robin (rotating the order each round)
  and every round's time is divided by the same round's time of our dense run: on a shared machine
  the paired ratios are stable where back-to-back blocks drift.  ``overhead_vs_ideal =
  (t / t_dense) / density``: 1.0 means time proportional to the tiles computed.
- :func:`count_tile_ops` counts the primitives of the kernel's own jaxpr (what Pallas lowers to
  Mosaic) in the branch each tile kind takes, fast path on and off: deterministic evidence of
  the masking work the fast path removes from full tiles.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import textwrap
from collections import Counter
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.geometry import Tile, get_geometry
from svgtpu.kernels.jaxpr_walk import pallas_kernel_body, sub_jaxprs, when_bodies
from svgtpu.baselines.splash import splash_attention
from svgtpu.kernels import tile_plan
from svgtpu.kernels.api import block_sparse
from svgtpu.kernels.config import KernelConfig
from svgtpu.kernels.common import as_masks, resolve_interpret
from svgtpu.baselines.tokamax import tokamax_attention
from svgtpu.masks.core import DenseMask, align, alignment_diff, make_mask, svg_mask
from svgtpu.facts.results import provenance
from svgtpu.masks.tiles import classify
from svgtpu.bench.timing import interleaved_times, paired_ratio, paired_ratio_iqr
from svgtpu.errors import BadInput

BASELINE = "ours-dense"


def xla_dense_attention(q, k, v):
    """Unmasked attention written in plain XLA ops (the dense reference timing)."""
    s = jnp.einsum("hqd,hkd->hqk", q, k, preferred_element_type=jnp.float32) / math.sqrt(q.shape[-1])
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1).astype(v.dtype), v).astype(q.dtype)


def _variants(geometry, multiplier: float, tile: KernelConfig, interpret):
    """``name -> (jitted fn(q, k, v), mask or None)`` for every variant of the benchmark, each at ``tile``'s
    blocks (our kernel's fast path set per variant)."""
    g = get_geometry(geometry)
    dense, svg = DenseMask(g.L), svg_mask(g, multiplier)
    aligned = align(svg, Tile(tile.block_q, tile.block_kv), "snap")
    blocks = dict(block_q=tile.block_q, block_kv=tile.block_kv, block_kv_compute=tile.block_kv_compute,
                  interpret=interpret)

    def ours(mask, fast_path):  # the Mosaic kernel, as the Splash and tokamax baselines next to it
        config = dataclasses.replace(tile, fast_path=fast_path)
        return jax.jit(lambda q, k, v: block_sparse(q, k, v, mask, config=config, implementation="mosaic",
                                                    interpret=interpret))

    def theirs(mask):
        return jax.jit(lambda q, k, v: splash_attention(q, k, v, mask, **blocks))

    def maintained(mask):
        return jax.jit(lambda q, k, v: tokamax_attention(q, k, v, mask, **blocks))

    return {
        "xla-dense": (jax.jit(xla_dense_attention), None),
        "splash-dense": (theirs(dense), dense),
        "splash-svg": (theirs(svg), svg),
        "splash-aligned": (theirs(aligned), aligned),
        "tokamax-dense": (maintained(dense), dense),
        "tokamax-svg": (maintained(svg), svg),
        "tokamax-aligned": (maintained(aligned), aligned),
        BASELINE: (ours(dense, True), dense),
        "ours-svg-nofast": (ours(svg, False), svg),
        "ours-svg-fast": (ours(svg, True), svg),
        "ours-aligned-nofast": (ours(aligned, False), aligned),
        "ours-aligned-fast": (ours(aligned, True), aligned),
    }


def bench_kernels(geometry: str, *, tile: KernelConfig, heads: int = 2, head_dim: int = 128,
                  dtype: str = "float32", multiplier: float = 1.0, rounds: int = 9, repeats: int = 3,
                  seed: int = 0, interpret=None, progress: bool = True) -> dict:
    """Time all variants interleaved at ``tile``'s blocks (a :class:`KernelConfig`: its fast path is each
    variant's); returns per-variant medians, paired ratios and headline numbers.

    Each round times every variant ``repeats`` times back to back and keeps the fastest call:
    other processes on a shared machine only ever add time, so the minimum filters their spikes.
    """
    g = get_geometry(geometry)
    block_q, block_kv = tile.block_q, tile.block_kv
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.standard_normal((heads, g.L, head_dim)), dtype) for _ in range(3))
    variants = _variants(g, multiplier, tile, interpret)
    names = list(variants)

    times = interleaved_times({name: functools.partial(variants[name][0], q, k, v) for name in names},
                              rounds=rounds, repeats=repeats, progress=progress)
    ratio = functools.partial(paired_ratio, times)

    rows = []
    for name in names:
        mask = variants[name][1]
        stats = classify(mask, Tile(block_q, block_kv)).stats if mask is not None else None
        plan = tile_plan(mask, g.L, block_q, block_kv, not name.endswith("nofast")) \
            if mask is not None and name.startswith("ours") else None
        density = stats.density if stats else 1.0
        r = ratio(name, BASELINE)
        rows.append({
            "variant": name, "median_s": statistics.median(times[name]), "ratio_to_ours_dense": r,
            "density": density, "partial_share": stats.partial_share if stats else 0.0,
            "overhead_vs_ideal": r / density, "grid_steps_per_head": plan.num_steps if plan else None,
            "masked_steps_per_head": plan.masked_steps if plan else None, "times_s": times[name],
        })
    aligned = align(svg_mask(g, multiplier), Tile(block_q, block_kv), "snap")
    by_name = {row["variant"]: row for row in rows}
    return {
        "provenance": provenance("measured", interpret=resolve_interpret(interpret)),
        "backend": jax.default_backend(), "geometry": str(g), "T": g.T, "H": g.H, "W": g.W, "F": g.F, "L": g.L,
        "multiplier": multiplier, "window": svg_mask(g, multiplier).window, "heads": heads,
        "head_dim": head_dim, "dtype": dtype, "block_q": block_q, "block_kv": block_kv,
        "block_kv_compute": tile.block_kv_compute,
        "rounds": rounds, "repeats": repeats,
        "baseline": BASELINE,
        "variants": rows,
        "headline": {
            "aligned_fast_overhead_vs_ideal": by_name["ours-aligned-fast"]["overhead_vs_ideal"],
            "ours_over_splash_svg": ratio("ours-svg-fast", "splash-svg"),
            "ours_over_splash_aligned": ratio("ours-aligned-fast", "splash-aligned"),
            "ours_over_tokamax_svg": ratio("ours-svg-fast", "tokamax-svg"),
            "ours_over_tokamax_aligned": ratio("ours-aligned-fast", "tokamax-aligned"),
            "aligned_fast_speedup_over_dense": 1.0 / by_name["ours-aligned-fast"]["ratio_to_ours_dense"],
            "fast_path_speedup_svg": ratio("ours-svg-nofast", "ours-svg-fast"),
            "fast_path_speedup_aligned": ratio("ours-aligned-nofast", "ours-aligned-fast"),
            "ours_dense_over_splash_dense": ratio(BASELINE, "splash-dense"),
        },
        "alignment": alignment_diff(svg_mask(g, multiplier), aligned).as_dict(),
    }


# -- vector-op counts ---------------------------------------------------------------------------

MASKING = {"iota", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not", "select_n"}
REDUCTION = {"reduce_max", "reduce_sum", "reduce_min", "argmax"}
MEMORY = {"get", "swap", "load", "store"}
LAYOUT = {"broadcast_in_dim", "reshape", "concatenate", "slice", "squeeze", "transpose",
          "convert_element_type", "dynamic_slice"}


def _category(primitive: str) -> str:
    if primitive == "dot_general":
        return "matmul"
    for name, group in (("masking", MASKING), ("reduction", REDUCTION), ("memory", MEMORY),
                        ("layout", LAYOUT)):
        if primitive in group:
            return name
    return "elementwise"


def _count(jaxpr, ops: Counter, elements: Counter, mask_loads: list) -> None:
    """Count primitives (and output elements) by category, recursing into sub-jaxprs."""
    for eqn in jaxpr.eqns:
        subs = list(sub_jaxprs(eqn))
        if subs:
            for sub in subs:
                _count(sub, ops, elements, mask_loads)
            continue
        category = _category(eqn.primitive.name)
        size = sum(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
        ops[category] += 1
        elements[category] += size
        if eqn.primitive.name == "get" and eqn.outvars[0].aval.dtype in (jnp.bool_, jnp.int8):  # mask block
            mask_loads.append(size)


def _tile_branches(kernel_jaxpr, fast_path: bool) -> dict:
    """``{tile kind: branch jaxpr}``: the ``pl.when`` bodies of the kernel, in trace order
    (init, full, partial, finish with the fast path; init, masked, finish without)."""
    bodies = when_bodies(kernel_jaxpr)
    assert len(bodies) == (4 if fast_path else 3), f"unexpected kernel structure: {len(bodies)} conds"
    return {"full": bodies[1], "partial": bodies[2]} if fast_path else {"full": bodies[1], "partial": bodies[1]}


def count_tile_ops(mask, L: int, *, tile: KernelConfig, head_dim: int = 128, dtype: str = "float32") -> list[dict]:
    """Per tile kind and fast path (both, whatever ``tile``'s): primitives and output elements by category in
    the kernel body at ``tile``'s blocks."""
    masks = as_masks(mask, 1, L)
    x = jax.ShapeDtypeStruct((1, L, head_dim), dtype)
    rows = []
    for fast_path in (False, True):
        config = dataclasses.replace(tile, fast_path=fast_path)
        f = lambda q, k, v: block_sparse(q, k, v, masks, config=config, implementation="mosaic",  # noqa: E731
                                         interpret=True)
        kernel = pallas_kernel_body(jax.make_jaxpr(f)(x, x, x).jaxpr)
        for kind, body in _tile_branches(kernel, fast_path).items():
            ops, elements, mask_loads = Counter(), Counter(), []
            _count(body, ops, elements, mask_loads)
            vector = {c: n for c, n in ops.items() if c not in ("matmul", "memory")}
            rows.append({
                "fast_path": fast_path, "tile": kind, "mask_source": tile_plan(masks, L, tile.block_q, tile.block_kv,
                                                                                fast_path).mask_source,
                "matmul_ops": ops["matmul"], "vector_ops": sum(vector.values()),
                "masking_ops": ops["masking"], "mask_block_loads": len(mask_loads),
                "vector_elements": sum(n for c, n in elements.items() if c not in ("matmul", "memory")),
                "masking_elements": elements["masking"],
                "ops_by_category": dict(sorted(ops.items())),
                "elements_by_category": dict(sorted(elements.items())),
            })
    return rows


def bench_ops(geometry: str, *, tile: KernelConfig, head_dim: int = 128, dtype: str = "float32",
              multiplier: float = 1.0) -> dict:
    """Op counts at ``tile``'s blocks for the SVG mask (partial tiles masked from iota) and the same mask in
    frame-major temporal order (an arbitrary mask: partial tiles read a mask block)."""
    block_q, block_kv, block_kv_compute = tile.block_q, tile.block_kv, tile.block_kv_compute
    g = get_geometry(geometry)
    svg, strided = svg_mask(g, multiplier), make_mask("temporal-frame-major", g, multiplier)
    rows = []
    for name, mask in (("svg", svg), ("temporal-frame-major", strided)):
        for row in count_tile_ops(mask, g.L, tile=tile, head_dim=head_dim, dtype=dtype):
            rows.append({"mask": name, **row})
    plans = [{"mask": name, **tile_plan(mask, g.L, block_q, block_kv).as_dict()} for name, mask in (
        ("dense", DenseMask(g.L)), ("svg", svg), ("svg-aligned", align(svg, Tile(block_q, block_kv))),
        ("temporal-frame-major", strided), ("per-head: svg + temporal-frame-major", (svg, strided)))]
    return {"provenance": provenance("computed"), "geometry": str(g), "L": g.L, "block_q": block_q, "block_kv": block_kv,
            "block_kv_compute": block_kv_compute, "head_dim": head_dim, "dtype": dtype,
            "counted_in": "kernel jaxpr: the pl.when branch each tile kind takes, per kv chunk of "
                          "block_kv_compute (what Pallas lowers to Mosaic)",
            "rows": rows, "plans": plans}


def kernel_dense_attention(svg_config) -> Callable:
    """A toy DiT attention backend: dense attention through the kernel of ``svg_config`` (an
    :class:`svgtpu.attention.svg.SVGConfig`) with an all-allowed mask, the path SVG's own warm-up takes.

    It is the like-for-like baseline of a sparse speedup: same kernel, same tiles, same execution
    mode (compiled on a TPU, Pallas interpret mode elsewhere); only the mask differs.
    """
    from svgtpu.attention.svg import attend

    def dense(q, k, v, **_):
        return attend(q, k, v, DenseMask(q.shape[-2]), svg_config).astype(q.dtype)
    return dense


def bench_sampling(params, config, backends: dict, *, num_steps: int, baseline: str = "dense", rounds: int = 3,
                   seed: int = 0, progress: bool = True) -> dict:
    """End-to-end toy DiT sampling time per attention backend (one video, ``num_steps`` steps).

    ``backends`` maps names to DiT attention backends and must include ``baseline``.  Timed with
    :func:`svgtpu.bench.timing.interleaved_times`; ``speedup`` is the median of the per-round ratios
    ``t_baseline / t`` and ``speedup_iqr`` their interquartile range (the spread over rounds).
    """
    from svgtpu.toy.sampler import sample

    if baseline not in backends:
        raise BadInput(f"baseline must be one of the backends {sorted(backends)}, got {baseline!r}")
    calls = {name: functools.partial(sample, params, config, [seed % config.num_labels], seed=seed,
                                     num_steps=num_steps, attention=attention, progress=False)
             for name, attention in backends.items()}
    times = interleaved_times(calls, rounds=rounds, desc="sampling rounds", progress=progress)
    return {"num_steps": num_steps, "rounds": rounds, "L": config.geometry.L, "baseline": baseline,
            "times_s": times,
            "variants": [{"variant": name, "median_s": statistics.median(times[name]),
                          "speedup": paired_ratio(times, baseline, name),
                          "speedup_iqr": paired_ratio_iqr(times, baseline, name)} for name in backends]}


def bench_profiling(geometry, config, *, heads: int = 2, head_dim: int = 64, rounds: int = 9,
                    seed: int = 0, progress: bool = True) -> dict:
    """Time online head profiling against one sparse attention call on planted heads.

    ``config`` is an :class:`svgtpu.attention.svg.SVGConfig`.  Three jitted calls run interleaved
    (:func:`svgtpu.bench.timing.interleaved_times`) after a compile run: ``profile``
    (:func:`svgtpu.attention.profiling.classify_heads`), ``kernel`` (the band + sink mask through the
    configured kernel) and ``svg_sparse`` (:func:`svgtpu.attention.svg.sparse_attention`: layout
    transform + kernel + transform back).  Reports medians of the per-round ratios, plus the ratio
    of multiply-adds as ``flop_ratio`` (``computed``): profiling does ``8 r L d`` flops per head,
    the kernel ``4 d`` per pair of every tile it visits.  Off TPU the kernels run in Pallas
    interpret mode, which inflates the kernel time.
    """
    from svgtpu.attention.svg import attend, sparse_attention
    from svgtpu.geometry import check_positive_int, round_up
    from svgtpu.attention.profiling import classify_heads, planted_heads

    g = get_geometry(geometry)
    check_positive_int("heads", heads)
    check_positive_int("rounds", rounds)
    if config.kernel == "reference":
        raise BadInput("kernel must be ours or splash to time profiling against a sparse attention call; "
                       "reference materializes every L x L score")
    kinds = jnp.asarray(np.arange(heads) % 2, jnp.int32)
    q, k, v = planted_heads(g, np.asarray(kinds), seed, head_dim=head_dim)
    key = jax.random.PRNGKey(seed + 1)
    mask, rows = config.mask(g), min(config.num_sampled_rows, g.L)
    profile = jax.jit(lambda q, k, v, key: classify_heads(q, k, v, g, mask, key, num_rows=rows))
    kernel = jax.jit(lambda q, k, v: attend(q, k, v, mask, config))
    sparse = jax.jit(lambda q, k, v, kinds: sparse_attention(q, k, v, kinds, g, config))
    calls = {"profile": lambda: profile(q, k, v, key), "kernel": lambda: kernel(q, k, v),
             "svg_sparse": lambda: sparse(q, k, v, kinds)}
    times = interleaved_times(calls, rounds=rounds, desc="profiling cost", progress=progress)
    visited = classify(mask, Tile(config.block_q, config.block_kv)).stats.density * \
        (round_up(g.L, config.block_q) * round_up(g.L, config.block_kv))
    return {
        "geometry": str(g), "L": g.L, "heads": heads, "head_dim": head_dim, "rounds": rounds,
        "num_sampled_rows": rows, "kernel": config.kernel, "block_q": config.block_q,
        "block_kv": config.block_kv, "mask_density": mask.density(),
        **{f"{name}_s": float(np.median(values)) for name, values in times.items()},
        "profile_over_kernel": paired_ratio(times, "profile", "kernel"),
        "profile_over_svg_sparse": paired_ratio(times, "profile", "svg_sparse"),
        "provenance": provenance("measured", interpret=resolve_interpret(None)),
        "flop_ratio": 8 * rows * g.L / (4 * visited), "flop_ratio_provenance": "computed",
    }


# -- tables -------------------------------------------------------------------------------------

def format_kernels(result: dict) -> str:
    """:func:`bench_kernels` as ``svgtpu bench kernels`` prints it: the setting, one row per variant, the headline."""
    from svgtpu.facts.tables import format_table
    rows = [{k: r[k] for k in ("variant", "median_s", "ratio_to_ours_dense", "density", "partial_share",
                               "overhead_vs_ideal", "grid_steps_per_head", "masked_steps_per_head")}
            for r in result["variants"]]
    head = (f"{result['geometry']} L={result['L']} heads={result['heads']} d={result['head_dim']} "
            f"{result['dtype']} tiles {result['block_q']}x{result['block_kv']}, {result['rounds']} rounds "
            f"(fastest of {result['repeats']} calls each) "
            f"[{result['provenance']}]; ratios are medians of per-round ratios")
    headline = "\n".join(f"{k}: {v:.3f}" for k, v in result["headline"].items())
    return "\n\n".join([head, format_table(rows), headline])


def format_ops(result: dict) -> str:
    """:func:`bench_ops` (with ``compiled``: :func:`svgtpu.compiler.llo.compiled_ops` too) as tables within
    :data:`~svgtpu.facts.tables.FIT_WIDTH`: short headers, a legend, the mask sources in a line (``--json``: all)."""
    from svgtpu.facts.tables import FIT_WIDTH, format_table
    wrap = lambda text: textwrap.fill(text, FIT_WIDTH, subsequent_indent="  ", break_on_hyphens=False)  # noqa: E731
    rows = [{"mask": r["mask"], "fast": r["fast_path"], "tile": r["tile"], "matmul": r["matmul_ops"],
             "vector": r["vector_ops"], "masking": r["masking_ops"], "loads": r["mask_block_loads"],
             "vector el": r["vector_elements"], "masking el": r["masking_elements"]} for r in result["rows"]]
    sources = {r["mask"]: r["mask_source"] for r in result["rows"] + result["plans"]}
    legend = wrap("fast: the fast path; matmul, vector, masking: ops per kv chunk of the tile kind; loads: mask "
                  "block loads; vector el, masking el: elements the vector and masking ops process; mask sources: "
                  + ", ".join(f"{m} {s}" for m, s in sources.items()))
    dense = {r["dense_steps_per_head"] for r in result["plans"]}
    plan_rows = [{"mask": r["mask"], "steps": r["steps_per_head"], **({} if len(dense) == 1 else {
                  "dense": r["dense_steps_per_head"]}), "full": r["full"], "partial": r["partial"], "empty": r["empty"],
                  "masked": r["masked_steps"], "empty row": r["empty_row_steps"], "wasted": r["wasted_steps"],
                  "blocks": r["mask_blocks"]} for r in result["plans"]]
    heading = wrap("tile plans (grid steps per head" + (f", {dense.pop()} in a dense plan" if len(dense) == 1 else "")
                   + "; masked: steps running the masking arithmetic; empty row: steps only writing zeros for "
                     "q rows without a kept tile; wasted: no-op padding of per-head plans; blocks: mask blocks)")
    tables = [format_table(rows) + "\n" + legend + "\n" + wrap(f"({result['provenance']}: {result['counted_in']})"),
              heading + "\n" + format_table(plan_rows)]
    if "compiled" in result:
        compiled = result["compiled"]
        llo = [{k.removeprefix("llo_").replace("fast_path", "fast"): v for k, v in r.items()} for r in compiled["rows"]]
        tables.append(format_table(llo) + "\n" + wrap(f"(LLO instructions per unit and static bundles of each tile "
                                                      f"body; {compiled['provenance']}: {compiled['counted_in']})"))
    return "\n\n".join(tables)


def format_profiling(timing: dict) -> str:
    """:func:`bench_profiling` as one table row."""
    from svgtpu.facts.tables import format_table
    return format_table([{k: timing[k] for k in (
        "L", "heads", "profile_s", "kernel_s", "svg_sparse_s", "profile_over_kernel", "profile_over_svg_sparse",
        "flop_ratio", "provenance")}])
