"""C4 from the real compiler: ours vs JAX Splash vs tokamax, whole kernel and tile body by tile body.

Every kernel is compiled ahead of time for a TPU (v6e, or v7x as ``tpu7x:2x2x1``) on this CPU
(:mod:`svgtpu.compiler.variants`, cached), its schedule read as a program (:mod:`svgtpu.compiler.llo`) and
applied to every grid step of its own plan (:mod:`svgtpu.compiler.estimate`).  Three tables come out:

- **whole kernels**: static cycles per head, step-overhead share, HBM bytes and a time band, for
  ours on the dense, SVG and aligned SVG masks (fast path on and off) and both libraries on the same
  masks; the **ratios** between them, each next to the **roofline** (the flops of the tiles the mask
  keeps, real rows and keys, at the MXU's full-fill peak, :mod:`svgtpu.compiler.units`) and the **MXU
  bound** (the pushes those tiles need: at ``head_dim`` 128 each push fills half the 256-wide array,
  so twice the roofline).  "Sparse overhead vs our dense" is ours on a mask over our dense kernel
  times the mask's tile density (the ratio this package called "ours / ideal");
- **tile bodies** (:func:`unit_table`): each body's bundles, the fewest cycles each unit needs, the
  binding unit, the share of the bundles the MXUs are busy and the share of the MXU's peak, with the
  HBM bytes a step fetches beside them;
- **the tile table** the cost model reads (:func:`tile_table`; ``figures/compiled_tiles.json``).

**Static bundles are not latency**: they are the compiler's cycles before any stall on memory (DMA
waits, HBM bandwidth).  Provenance ``compiled-v6e`` / ``compiled-v7x``: nothing ran.
"""

from __future__ import annotations

import concurrent.futures
import os

from svgtpu.compiler.estimate import block_bytes, estimate
from svgtpu.errors import BadInput
from svgtpu.compiler.variants import KERNELS, MASKS, Variant, cached_compile, mask_of
from svgtpu.setting import PRODUCTION
from svgtpu.recipes import MAXDIFFUSION_DEFAULT_TILE, PRODUCTION_TILE, TILES as TILE_RECIPES

#: The tiles compared: the production tile (MaxDiffusion's Wan tile for v6e, block_q a lane multiple) and
#: MaxDiffusion's default square tile (:mod:`svgtpu.recipes` cites both).
TILES = tuple((t.block_q, t.block_kv) for t in (PRODUCTION_TILE, MAXDIFFUSION_DEFAULT_TILE))
DEVICES = ("v6e", "v7x")
#: Compiles run at once (each a child process of about 3-4 GB): the cores, at most 4.
COMPILE_WORKERS = max(1, min(4, os.cpu_count() or 1))
#: The ``block_kv_compute`` the recipes give Splash at their tiles (MaxDiffusion's: 1024 at 3024 x 2048):
#: the baselines run at it; other tiles use our default.
MAXDIFFUSION_KV_COMPUTE = {(t.block_q, t.block_kv): t.block_kv_compute for t in TILE_RECIPES.values()}
#: The baselines' ``block_kv_compute`` swept (``--sweep``), at the production tile.
SWEEP_KV_COMPUTE = (512, 1024, 2048)
#: A dense grid whose length both production tiles divide (L = 387,072 = lcm(3024, 2048), a multiple of
#: ours too): the libraries
#: get a full mask there, no padded block, so their unmasked tile body shows.
UNPADDED_GEOMETRY = "21x96x192"


def theirs_kv_compute(block_q: int, block_kv: int) -> int:
    """The libraries' ``block_kv_compute``: the recipe's at its tile, else that of a recipe with the
    same ``block_kv`` (MaxDiffusion's 1024 at 3024 x 2048 for our production tile), else our default."""
    from svgtpu.kernels.config import default_block_kv_compute
    same_kv = [kc for (_, bkv), kc in MAXDIFFUSION_KV_COMPUTE.items() if bkv == block_kv and kc <= block_kv]
    return MAXDIFFUSION_KV_COMPUTE.get((block_q, block_kv), same_kv[0] if same_kv else
                                       default_block_kv_compute(block_q, block_kv))


def other_layouts(block_q: int) -> tuple[str, ...]:
    """Our layouts other than the default one that a ``block_q`` tile allows (compared beside it)."""
    from svgtpu.kernels.config import LAYOUTS, default_layout, tile_refusal
    return tuple(lay for lay in LAYOUTS if lay != default_layout(block_q) and tile_refusal(block_q, 128, lay) is None)


def variants(geometry: str, block_q: int, block_kv: int, device: str = "v6e") -> list[Variant]:
    """Ours (default layout) on dense, SVG and aligned SVG, fast path on and off, and our other layout
    with the fast path (its full and partial bodies, its whole kernel); Splash and tokamax on the same masks."""
    from svgtpu.kernels.config import default_block_kv_compute
    ours_kc = default_block_kv_compute(block_q, block_kv)
    theirs_kc = theirs_kv_compute(block_q, block_kv)
    out = [Variant("ours", m, geometry, block_q, block_kv, ours_kc, fast, device=device)
           for m in MASKS for fast in (True, False)]
    out += [Variant("ours", m, geometry, block_q, block_kv, ours_kc, True, device=device, layout=lay)
            for lay in other_layouts(block_q) for m in MASKS]
    return out + [Variant(k, m, geometry, block_q, block_kv, theirs_kc, device=device)
                  for k in ("splash", "tokamax") for m in MASKS]


def extra_variants(block_q: int, block_kv: int, device: str, sweep: bool) -> list[Variant]:
    """The extra compiles at the production tile: JAX Splash at an unpadded length (its unmasked body: at
    a padded one it masks every block; the cost model needs it), and with ``sweep`` the libraries'
    ``block_kv_compute`` sweep on the aligned mask at the production geometry."""
    theirs_kc = theirs_kv_compute(block_q, block_kv)
    out = [Variant("splash", "dense", UNPADDED_GEOMETRY, block_q, block_kv, theirs_kc, device=device)]
    if sweep:
        out += [Variant(k, "svg-aligned", PRODUCTION.resolution, block_q, block_kv, kc, device=device)
                for k in ("splash", "tokamax") for kc in SWEEP_KV_COMPUTE if kc != theirs_kc and block_kv % kc == 0]
    return out


def push_bound_factor(layout: str, head_dim: int, block_q: int, device: str = "v6e") -> float:
    """The MXU pushes a layout needs per tile over those of the full-fill roofline: the mean fill of
    its two matmuls.  ``q k^T`` contracts ``head_dim`` (one push per 16 rows whatever the contraction
    up to the array's width: ``columns / head_dim`` times the full-fill pushes below it, either
    layout); the PV product's output width is ``head_dim`` query-major (``p v``) but ``block_q``
    key-major (``v^T p``).  At d = 128 on a 256-wide array: 2.0 query-major, 1.5 key-major."""
    from svgtpu.compiler.units import core
    columns = core(device).mxu_columns
    qk = columns / min(head_dim, columns)
    pv = columns / min(head_dim if layout == "query-major" else block_q, columns)
    return (qk + pv) / 2


def roofline(v: Variant) -> dict:
    """Flops of the tiles ``v``'s mask keeps (real rows and keys), their cycles at the MXU's full-fill
    peak, and the MXU bound of ``v``'s layout (its pushes: :func:`push_bound_factor` times the roofline)."""
    g, mask = mask_of(v)
    return mask_roofline(mask, g.L, v.block_q, v.block_kv, v.head_dim, v.device, v.kernel_layout)


def mask_roofline(mask, L: int, block_q: int, block_kv: int, head_dim: int, device: str, layout: str) -> dict:
    """:func:`roofline` of any ``mask`` over ``L`` tokens at a ``block_q x block_kv`` tile in ``layout``."""
    import numpy as np

    from svgtpu.compiler.units import core
    from svgtpu.geometry import Tile
    from svgtpu.masks.tiles import EMPTY, classify
    kinds = classify(mask, Tile(block_q, block_kv)).kinds
    rows = np.minimum(L - np.arange(kinds.shape[0]) * block_q, block_q)
    cols = np.minimum(L - np.arange(kinds.shape[1]) * block_kv, block_kv)
    pairs = float((rows[:, None] * cols[None, :] * (kinds != EMPTY)).sum())
    c = core(device)
    flops = 4 * head_dim * pairs
    fill = push_bound_factor(layout, head_dim, block_q, device)
    return {"flops": flops, "roofline_cycles": flops / c.flops_per_cycle,
            "mxu_bound_cycles": fill * flops / c.flops_per_cycle, "layout": layout,
            "tile_density": float((kinds != EMPTY).mean())}


def ratios(rows: dict) -> dict:
    """The headline ratios of one geometry and tile size (``rows``: estimate by variant name)."""
    c = {name: r["cycles"] for name, r in rows.items() if r.get("compiled", True)}

    def over(a, b, scale=1.0):  # None where a variant did not compile
        return c[a] / (c[b] * scale) if a in c and b in c else None
    out = {}
    for mask in MASKS:
        ours = f"ours-{mask}-fast"
        ref = rows.get(ours, {})
        if mask != "dense":
            out[f"{mask}: sparse overhead vs our dense"] = over(ours, "ours-dense-fast", ref.get("tile_density", 0.0))
            out[f"{mask}: ours (no fast path), sparse overhead vs our dense"] = over(
                f"ours-{mask}-nofast", "ours-dense-fast", ref.get("tile_density", 0.0))
        for lib in ("splash", "tokamax"):
            out[f"{mask}: ours / {lib}"] = over(ours, f"{lib}-{mask}")
        out[f"{mask}: fast path on / off"] = over(ours, f"ours-{mask}-nofast")
        for name, label in ((ours, "ours"), (f"splash-{mask}", "splash"), (f"tokamax-{mask}", "tokamax")):
            r = rows.get(name, {})
            for what in ("roofline", "mxu_bound"):
                out[f"{mask}: {label} / {what.replace('_', ' ')}"] = \
                    c[name] / r[f"{what}_cycles"] if name in c and r.get(f"{what}_cycles") else None
        for name in sorted(n for n in rows if n.startswith(f"{ours}-")):  # our other layouts
            layout = name[len(ours) + 1:]
            out[f"{mask}: ours {layout} / ours"] = over(name, ours)
            for what in ("roofline", "mxu_bound"):
                r = rows[name]
                out[f"{mask}: ours {layout} / {what.replace('_', ' ')}"] = \
                    c[name] / r[f"{what}_cycles"] if name in c and r.get(f"{what}_cycles") else None
        out[f"{mask}: step-overhead share"] = ref.get("overhead_share")
    return out


# -- tile bodies ------------------------------------------------------------------------------

#: Which compiled variant shows which body: (kernel, body, variant name, body index); ours in its
#: default layout (:func:`bodies` adds its other layouts).
BODIES = (("ours", "full", "ours-dense-fast", 0), ("ours", "padding_partial", "ours-dense-fast", 1),
          ("ours", "mask_partial", "ours-svg-fast", 1), ("ours", "masked", "ours-dense-nofast", 0),
          ("splash", "full", "splash-dense@unpadded", 0), ("splash", "padding_partial", "splash-dense", 0),
          ("splash", "mask_partial", "splash-svg", 0),
          ("tokamax", "full", "tokamax-dense", 0), ("tokamax", "padding_partial", "tokamax-dense", 1),
          ("tokamax", "mask_partial", "tokamax-svg", 1))


def bodies(block_q: int) -> tuple:
    """:data:`BODIES` and the full and partial bodies of our other layouts at ``block_q`` (fast path on):
    ``(kernel, body, variant name, body index, layout)``."""
    from svgtpu.kernels.config import default_layout
    ours = default_layout(block_q)
    out = tuple((k, b, n, i, ours if k == "ours" else "query-major") for k, b, n, i in BODIES)
    for lay in other_layouts(block_q):
        out += (("ours", "full", f"ours-dense-fast-{lay}", 0, lay),
                ("ours", "padding_partial", f"ours-dense-fast-{lay}", 1, lay),
                ("ours", "mask_partial", f"ours-svg-fast-{lay}", 1, lay))
    return out


def unit_table(compiled: dict, device: str, block_q: int, block_kv: int, head_dim: int = 128) -> list[dict]:
    """One row per tile body of :func:`bodies` (``compiled``: cached compile by variant name): static
    bundles, the roofline cycles of one tile, the fewest cycles each unit needs, the binding unit, the
    MXU's busy share (``mxu_busy``: the layout's push bound over the bundles) and its share of the
    full-fill peak (``peak_share``: the roofline over the bundles), the MXU pushes and the HBM bytes a
    step of that kind fetches."""
    from svgtpu.compiler.units import UNITS, UnitCounts, core, cycles_of
    flops = 4 * block_q * block_kv * head_dim
    out = []
    for kernel, body, name, index, layout in bodies(block_q):
        result = compiled.get(name)
        row = {"device": device, "kernel": kernel, "layout": layout, "body": body, "variant": name}
        if result is None or "refused" in result:
            out.append({**row, "bundles": None, "refused": (result or {}).get(
                "refused", "not compiled (only at the production tile)")})
            continue
        schedule, units = result["schedules"][0], result["body_units"][0]
        if index >= len(units):
            out.append({**row, "bundles": None, "refused": "the kernel has no such body"})
            continue
        counts = UnitCounts(**{k: tuple(tuple(x) if isinstance(x, list) else x for x in val)
                               if isinstance(val, list) else val for k, val in units[index].items()})
        u = cycles_of(counts, flops, device, bundles=schedule["bodies"][index])
        # a step of a row fetches its k and v blocks (q once per row; the masks here are computed in the
        # kernel or repeat one padded block, which is not fetched again)
        fetched = block_bytes(Variant(kernel, "dense", "", block_q, block_kv, block_q, device=device))["kv"]
        out.append({**row, "bundles": u.bundles, "roofline": u.roofline, **{k: getattr(u, k) for k in UNITS},
                    "binding": u.binding(), "mxu_busy": u.mxu_share, "peak_share": u.peak_share,
                    "pushes": sum(counts.pushes), "eup_ops": counts.count("eup"),
                    "xlu_ops": counts.count("xlu") + counts.count("xlu_pop"), "stores": counts.count("vector_store"),
                    "hbm_bytes_per_step": fetched,
                    "hbm_cycles_per_step": fetched / _bytes_per_cycle(device), "flops_per_cycle": core(device).flops_per_cycle})
    return out


def _bytes_per_cycle(device: str) -> float:
    from svgtpu.compiler.estimate import clock_hz, core_bandwidth
    return core_bandwidth(device) / clock_hz(device)


def tile_table(compiled: dict, device: str, block_q: int, block_kv: int, resolution: str, head_dim: int = 128,
               dtype: str = "bfloat16") -> list[dict]:
    """The compiled tile costs the cost model reads, one entry per kernel (``figures/compiled_tiles.json``,
    schema in ``tests/test_tile_table.py``): static cycles of the full, padding-partial and mask-partial
    bodies, of ours with the fast path off (``masked``), of an empty step (``None`` where empty tiles take no step), of the per-step code and of a
    row's init + finish; the roofline cycles of one tile and the HBM bytes of a step.  Ours is its
    default layout at the tile (``layout``; the other layout's bodies are in :func:`unit_table` only)."""
    from svgtpu.compiler.units import core
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.config import default_layout
    ours_layout = default_layout(block_q)
    bodies = {(r["kernel"], r["body"]): r for r in unit_table(compiled, device, block_q, block_kv, head_dim)
              if r["kernel"] != "ours" or r["layout"] == ours_layout}
    out = []
    for kernel in KERNELS:
        source = compiled.get(f"{kernel}-dense" + ("-fast" if kernel == "ours" else ""), {})
        entry = {"device": device, "kernel": kernel, "resolution": resolution, "L": get_geometry(resolution).L,
                 "block_q": block_q, "block_kv": block_kv, "head_dim": head_dim, "dtype": dtype,
                 "layout": ours_layout if kernel == "ours" else "query-major"}
        refused = []
        for body in ("full", "padding_partial", "mask_partial"):
            r = bodies[(kernel, body)]
            entry[body] = r["bundles"]
            if r["bundles"] is None:
                refused.append(f"{body}: {r['refused']}")
        # the body of every tile with the fast path off (only ours can turn it off)
        entry["masked"] = bodies[(kernel, "masked")]["bundles"] if (kernel, "masked") in bodies else None
        if "schedules" in source:
            s = source["schedules"][0]
            entry.update(empty_step=s["overhead"] if kernel == "splash" else None, step_overhead=s["overhead"],
                         init_finish=s["init"] + s["finish"])
        else:
            entry.update(empty_step=None, step_overhead=None, init_finish=None)
            refused.append(f"dense: {source.get('refused', 'not compiled')}")
        entry["empty_tiles"] = "visited (overhead only)" if kernel == "splash" else "skipped (no grid step)"
        entry["roofline_tile"] = 4 * block_q * block_kv * head_dim / core(device).flops_per_cycle
        entry["hbm_bytes_per_step"] = bodies[(kernel, "full")].get("hbm_bytes_per_step") or \
            block_bytes(Variant(kernel, "dense", "", block_q, block_kv, block_q, device=device))["kv"]
        entry["provenance"] = f"compiled-{device}"
        if refused:
            entry["refused"] = "; ".join(refused)
        out.append(entry)
    return out


# -- our fixed-maximum bodies ------------------------------------------------------------------

#: The devices whose fixed-maximum bodies the table holds at the production tile.
FIXED_DEVICES = ("v6e", "v7x")


def fixed_programs() -> list:
    """The fixed-maximum programs the table holds (:mod:`svgtpu.compiler.fixed_m`): the production tile on the dense
    mask (full, padding-partial) and on SVG's band mask (mask-partial), on :data:`FIXED_DEVICES`; the tile of MaxDiffusion's
    fixed-M dense control (:data:`~svgtpu.recipes.MAXDIFFUSION_FIXED_M_TILE`) on the dense mask, v6e."""
    from svgtpu.compiler.fixed_m import FixedMaxVariant
    from svgtpu.recipes import MAXDIFFUSION_FIXED_M_TILE, PRODUCTION_TILE
    from svgtpu.setting import PRODUCTION
    prod = (PRODUCTION_TILE.block_q, PRODUCTION_TILE.block_kv, PRODUCTION_TILE.block_kv_compute)
    # MaxDiffusion's dense control gives no block_kv_compute: its kernel's inner step (block_kv_compute_in) is 256
    control = (MAXDIFFUSION_FIXED_M_TILE.block_q, MAXDIFFUSION_FIXED_M_TILE.block_kv, PRODUCTION_TILE.block_kv_compute)
    out = [FixedMaxVariant("ours", mask, PRODUCTION.resolution, *prod, device=device)
           for device in FIXED_DEVICES for mask in ("dense", "svg")]
    return out + [FixedMaxVariant("ours", "dense", PRODUCTION.resolution, *control, device="v6e")]


def _fixed_unit_row(result: dict, body: str, v) -> dict:
    """Bundles, MXU pushes, the fewest cycles of each unit and the binding one of a body of ``result``."""
    from svgtpu.compiler.fixed_m import BODY_INDEX
    from svgtpu.compiler.units import UNITS, UnitCounts, cycles_of
    index = BODY_INDEX[body]
    counts = UnitCounts(**{k: tuple(tuple(x) if isinstance(x, list) else x for x in val) if isinstance(val, list)
                           else val for k, val in result["body_units"][index].items()})
    u = cycles_of(counts, 4 * v.block_q * v.block_kv * v.head_dim, v.device,
                  bundles=result["schedule"]["bodies"][index])
    return {"bundles": u.bundles, "pushes": sum(counts.pushes), "binding": u.binding(),
            **{k: getattr(u, k) for k in UNITS}}


def fixed_rows(progress: bool = False) -> list[dict]:
    """One row per device and tile of :func:`fixed_programs` (records, else compiled): the fixed-maximum bodies (full,
    padding-partial; mask-partial where the SVG program was compiled) beside the running-maximum ones of the same
    program, its per-step code and row init + finish, the pass's cycles per head, each body's units and pushes."""
    from svgtpu.compiler.fixed_m import cached_fixed
    from svgtpu.compiler.units import core
    from svgtpu.geometry import get_geometry
    todo = fixed_programs()
    if progress:
        from tqdm.auto import tqdm
        todo = tqdm(todo, desc="fixed-max programs", unit="program")
    rows = {}
    for v in todo:
        r = cached_fixed(v)
        key = (v.device, v.block_q, v.block_kv)
        row = rows.setdefault(key, {
            "device": v.device, "kernel": "ours", "layout": v.kernel_layout, "resolution": v.geometry,
            "L": get_geometry(v.geometry).L, "block_q": v.block_q, "block_kv": v.block_kv,
            "block_kv_compute": v.block_kv_compute, "head_dim": v.head_dim, "dtype": v.dtype,
            "full": None, "padding_partial": None, "mask_partial": None, "running_full": None,
            "running_padding_partial": None, "running_mask_partial": None, "step_overhead": None,
            "init_finish": None, "pass_cycles": None, "units": {},
            "roofline_tile": 4 * v.block_q * v.block_kv * v.head_dim / core(v.device).flops_per_cycle,
            "provenance": f"compiled-{v.device}"})
        if "refused" in r:
            row.setdefault("refused", []).append(f"{v.mask}: {r['refused']}")
            continue
        s = r["schedule"]
        partial = "padding_partial" if v.mask == "dense" else "mask_partial"
        row.update({partial: s["bodies"][3], f"running_{partial}": s["bodies"][1]})
        row["units"][partial] = _fixed_unit_row(r, "fixed_partial", v)
        if v.mask == "dense":
            row.update(full=s["bodies"][2], running_full=s["bodies"][0], step_overhead=s["overhead"],
                       init_finish=s["init"] + s["finish"], pass_cycles=r["pass_cycles"])
            row["units"]["full"] = _fixed_unit_row(r, "fixed_full", v)
            row["units"]["running_full"] = _fixed_unit_row(r, "full", v)
    return list(rows.values())


# -- the comparison ----------------------------------------------------------------------------

def compile_all(todo: list[Variant], progress: bool, device: str) -> list[dict]:
    """:func:`~svgtpu.compiler.variants.cached_compile` of each of ``todo``, :data:`COMPILE_WORKERS` at once
    (a tqdm bar with ``progress``), in order."""
    # each compile is a child process of its own: COMPILE_WORKERS run at once; variants that share a
    # program (svgtpu.compiler.variants) wait for its one compile through the cache
    from svgtpu.compiler.variants import program_key
    seen, first, rest = set(), [], []
    for v in todo:
        key = program_key(v)
        (rest if key in seen else first).append(v)
        seen.add(key)
    with concurrent.futures.ThreadPoolExecutor(max_workers=COMPILE_WORKERS) as pool:
        results = pool.map(cached_compile, first)
        if progress:
            from tqdm.auto import tqdm
            results = tqdm(results, total=len(first), desc=f"compiling for {device}", unit="program")
        done = dict(zip(first, results))
    done.update({v: cached_compile(v) for v in rest})
    return [done[v] for v in todo]


def bench_compiled(geometry: str, tiles, *, device: str = "v6e", sweep: bool = False,
                   progress: bool = False) -> dict:
    """Every variant of :func:`variants` at each tile size and the :func:`extra_variants` (Splash's
    unmasked body; with ``sweep`` the libraries' ``block_kv_compute`` sweep), compiled for ``device``
    (cached), estimated, with :func:`ratios`, the :func:`unit_table` and the :func:`tile_table`."""
    from svgtpu.compiler.compile import topology_device
    from svgtpu.compiler.dumps import versions
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.config import KernelConfig
    get_geometry(geometry)
    if device not in DEVICES:
        raise BadInput(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    tiles = [tuple(t) for t in tiles]
    for bq, bkv in tiles:
        KernelConfig(bq, bkv)  # one clear line on bad tiles
    topology_device(device)  # one clear line without libtpu
    todo = [v for bq, bkv in tiles for v in variants(geometry, bq, bkv, device)]
    extra = [v for bq, bkv in tiles if (bq, bkv) == TILES[0] for v in extra_variants(bq, bkv, device, sweep)]
    results = compile_all(todo + extra, progress, device)
    rows, compiled = [], {}
    for v, result in zip(todo + extra, results):
        key = (v.block_q, v.block_kv)
        name = v.name + ("@unpadded" if v.geometry == UNPADDED_GEOMETRY else
                         f"@kc{v.block_kv_compute}" if v in extra else "")
        compiled.setdefault(key, {})[name] = result
        base = {"variant": name, "kernel": v.kernel, "mask": v.mask, "fast_path": v.fast_path, "device": device,
                "geometry": v.geometry, "block_q": v.block_q, "block_kv": v.block_kv,
                "block_kv_compute": v.block_kv_compute}
        if "refused" in result:  # e.g. a plan beyond SMEM at small tiles: the compiler's own words
            rows.append({**base, "compiled": False, "reason": result["refused"]})
            continue
        row = {**estimate(result, v), **base, "compiled": True, **roofline(v)}
        rows.append(row)
    per_tile = []
    for bq, bkv in tiles:
        mine = {r["variant"]: r for r in rows if (r["block_q"], r["block_kv"]) == (bq, bkv) and r["geometry"] == geometry}
        per_tile.append({"block_q": bq, "block_kv": bkv, "ratios": ratios(mine),
                         "units": unit_table(compiled[(bq, bkv)], device, bq, bkv),
                         "tile_table": tile_table(compiled[(bq, bkv)], device, bq, bkv, geometry)})
    sweep_rows = [{k: r.get(k) for k in ("variant", "kernel", "block_kv_compute", "cycles", "compiled")}
                  for r in rows if r["geometry"] == geometry and r["mask"] == "svg-aligned" and r["kernel"] != "ours"
                  and (r["block_q"], r["block_kv"]) == TILES[0]] if sweep else []
    return {"provenance": f"compiled-{device}", "device": device, "geometry": geometry, "versions": versions(),
            "rule": "per grid step max(compute cycles / clock, HBM bytes / bandwidth), summed; ratios use "
                    "the clock-free compute cycles; static bundles are not latency (no stall on memory is in them)",
            "rows": rows, "tiles": per_tile, "sweep": sweep_rows}


#: The tile table's file in the figures folder, and the command that writes it (notebook 04).
TILE_TABLE_FILE = "compiled_tiles.json"
TILE_TABLE_COMMAND = "svgtpu reproduce --only 04 --profile cpu"


def tile_table_file(results: list[dict], probes: list[dict]) -> dict:
    """The content of :data:`TILE_TABLE_FILE` from :func:`bench_compiled` results (one per device)
    and :func:`svgtpu.compiler.probe.probe` readings: the versions, the command, the probes and every
    tile entry of the production tile."""
    from svgtpu.compiler.dumps import versions
    v = versions()
    tiles = [e for r in results for t in r["tiles"] if (t["block_q"], t["block_kv"]) == TILES[0] for e in t["tile_table"]]
    return {"jax": v["jax"], "libtpu": v["libtpu"], "tokamax": v["tokamax"], "command": TILE_TABLE_COMMAND,
            "note": "static bundles of each tile body as the compiler schedules it: cycles before any stall on "
                    "memory, not latency; keep hbm_bytes_per_step beside them",
            "probe": probes, "tiles": tiles, "fixed_max": fixed_rows()}


def bench_compiled_command(geometry: str, tiles: list, device: str, *, sweep: bool,
                           progress: bool) -> tuple[dict, str]:
    """``svgtpu bench compiled``: ``(result, table)`` of :func:`bench_compiled`."""
    from svgtpu.facts.tables import format_table
    try:
        result = bench_compiled(geometry, tiles, device=device, sweep=sweep, progress=progress)
    except RuntimeError as e:  # no libtpu
        raise BadInput(str(e)) from None
    rows = [{"tiles": f"{r['block_q']}x{r['block_kv']}", "variant": r["variant"], "kv_compute": r["block_kv_compute"],
             "steps": r["steps"], "cycles": r["cycles"], "over_roofline": round(r["cycles"] / r["roofline_cycles"], 3),
             "over_push_bound": round(r["cycles"] / r["mxu_bound_cycles"], 3),
             "overhead_share": round(r["overhead_share"], 4), "hbm_MB": round(r["hbm_bytes"] / 1e6, 1),
             "us": round(r["seconds"] * 1e6, 1)}
            if r["compiled"] else {"tiles": f"{r['block_q']}x{r['block_kv']}", "variant": r["variant"],
                                   "kv_compute": r["block_kv_compute"], "steps": "not compiled: " + r["reason"][:120]}
            for r in result["rows"]]
    v = result["versions"]
    head = (f"{result['geometry']}, one head, bf16, d=128 [{result['provenance']}; jax {v['jax']}, libtpu {v['libtpu']}, "
            f"tokamax {v['tokamax']}]; cycles = static bundles of the whole kernel (not latency: no memory stall is "
            f"in them); time: {result['rule']}")
    labels = {"mxu_busy": "push_bound_share", "peak_share": "roofline_share"}  # the two denominators
    units = [{"tiles": f"{t['block_q']}x{t['block_kv']}",
              **{labels.get(k, k): (round(x, 3) if isinstance(x, float) else x)
                 for k, x in u.items() if k not in ("device", "flops_per_cycle", "hbm_cycles_per_step")}}
             for t in result["tiles"] for u in t["units"]]
    ratio_rows = [{"tiles": f"{t['block_q']}x{t['block_kv']}", "ratio": k, "value": None if x is None else round(x, 3)}
                  for t in result["tiles"] for k, x in t["ratios"].items()]
    result["fixed_max"] = [r for r in fixed_rows(progress=progress) if r["device"] == device]
    fixed = [{"tiles": f"{r['block_q']}x{r['block_kv']}", "body": body, "fixed_max": r[body],
              "running_max": r[f"running_{body}"], "pushes": r["units"].get(body, {}).get("pushes"),
              "binding": r["units"].get(body, {}).get("binding"),
              "roofline_share": round(r["roofline_tile"] / r[body], 3) if r[body] else None}
             for r in result["fixed_max"] for body in ("full", "padding_partial", "mask_partial") if r[body]]
    return result, "\n\n".join([head, format_table(rows), "tile bodies (static bundles, fewest cycles per unit; "
                                "push_bound_share = the layout's MXU push cycles / bundles, roofline_share = "
                                "the tile's flops at the full-fill peak / bundles):",
                                format_table(units), format_table(ratio_rows),
                                "fixed-maximum bodies (KernelConfig.fixed_max, docs/fixed_max.md) beside the "
                                "running-maximum bodies of the same program (static bundles):", format_table(fixed)])


__all__ = ["TILES", "DEVICES", "theirs_kv_compute", "other_layouts", "bodies", "push_bound_factor", "COMPILE_WORKERS", "MAXDIFFUSION_KV_COMPUTE", "SWEEP_KV_COMPUTE", "UNPADDED_GEOMETRY",
           "BODIES", "fixed_programs", "fixed_rows", "TILE_TABLE_FILE", "TILE_TABLE_COMMAND", "tile_table_file", "variants", "extra_variants", "roofline", "mask_roofline", "compile_all", "ratios", "unit_table", "tile_table", "bench_compiled",
           "bench_compiled_command"]
