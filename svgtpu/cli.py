"""The svgtpu command line: each subcommand prints a table, or one JSON object with --json.

A subcommand is a function ``run(args) -> (result, table)`` registered with :func:`command`; the
result is a JSON-able dict and the table the human rendering of it (a third item, if returned, is
the exit status).  A ``ValueError`` raised anywhere becomes one line on stderr naming the bad
parameter, and exit status 2; so does an ``OSError`` (a file that cannot be read or written).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable

from svgtpu.report.tables import format_table
from svgtpu.production import PRODUCTION
from svgtpu.report.claims import REPORTED, reported_json
from svgtpu.recipes import BLOCK_KV, BLOCK_Q, DEFAULT_RECIPE
from svgtpu.schedule import DEFAULT_PROFILE_ROWS, DEFAULT_KEPT

COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    """Register ``run(args) -> (result_dict, table_str)`` as the subcommand ``name``."""
    def register(run):
        COMMANDS[name] = (help, arguments, run)
        return run
    return register


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


# -- svgtpu info ------------------------------------------------------------------------------

@command("info", "backend, devices and versions", lambda p: None)
def run_info(args):
    import platform

    import jax
    import numpy as np

    import svgtpu

    result = {
        "svgtpu": svgtpu.__version__, "python": platform.python_version(), "jax": jax.__version__,
        "numpy": np.__version__, "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()], "device_count": jax.device_count(),
    }
    table = "\n".join(f"{k:>12}: {v}" for k, v in result.items())
    return result, table


# -- svgtpu tiles -----------------------------------------------------------------------------

def _tiles_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.masks.core import ALIGN_MODES, MASK_KINDS
    p.add_argument("--geometry", default=PRODUCTION.resolution, help="preset (480p ... 2160p) or TxHxW")
    p.add_argument("--mask", default="spatial", help=f"one of {', '.join(MASK_KINDS)}")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--multiplier", type=float, help="SVG band multiplier (W = ceil(m*F/128)*128)")
    group.add_argument("--kept", "--sparsity", dest="kept", type=float, help="SVG target kept fraction in (0, 1), instead of --multiplier")
    group.add_argument("--recipe", help="the kept fraction of a named recipe (svgtpu recipes)")
    p.add_argument("--block-q", type=positive_int, default=PRODUCTION.block_q)
    p.add_argument("--block-kv", type=positive_int, default=PRODUCTION.block_kv)
    p.add_argument("--align", choices=ALIGN_MODES, help="tile-align the mask first")


@command("tiles", "classify the tiles of an SVG mask (C3)", _tiles_arguments)
def run_tiles(args):
    from svgtpu.geometry import get_geometry
    from svgtpu.masks.core import align, alignment_diff, make_mask
    from svgtpu.masks.tiles import classify

    geometry = get_geometry(args.geometry)
    if args.recipe:
        from svgtpu.recipes import get_recipe
        args.kept = get_recipe(args.recipe).kept
        if args.kept is None:
            raise ValueError(f"--recipe {args.recipe} has an unknown kept fraction")
    multiplier = args.multiplier if args.multiplier is not None or args.kept is not None else 1.0
    mask = make_mask(args.mask, geometry, multiplier, kept=args.kept)
    result = {"geometry": args.geometry, "T": geometry.T, "H": geometry.H, "W": geometry.W,
              "F": geometry.F, "L": geometry.L, "mask": args.mask,
              "multiplier": multiplier, "kept": args.kept,
              "window": getattr(getattr(mask, "base", mask), "window", None),
              "block_q": args.block_q, "block_kv": args.block_kv, "align": args.align}
    if args.align:
        aligned = align(mask, args.block_q, args.block_kv, args.align)
        result["alignment"] = alignment_diff(mask, aligned).as_dict()
        mask = aligned
    result["mask_density"] = mask.density()
    result.update(classify(mask, args.block_q, args.block_kv).stats.as_dict())
    result["provenance"] = "computed"
    table = format_table([{k: result[k] for k in (
        "geometry", "mask", "align", "block_q", "block_kv", "full", "partial", "empty",
        "partial_share", "density")}])
    return result, table


# -- svgtpu c3-search -------------------------------------------------------------------------

def _c3_search_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.masks.c3_search import GEOMETRIES, TILES
    p.add_argument("--geometries", nargs="+", default=list(GEOMETRIES), help="presets or TxHxW grids")
    p.add_argument("--tiles", default=",".join(f"{q}x{k}" for q, k in TILES),
                   help="comma-separated BLOCK_QxBLOCK_KV tiles (default: Splash's, MaxDiffusion's, squares)")


# argparse formats help with %: a literal percent sign is written %%
@command("c3-search", f"which settings give the write-up's C3 shares ({100 * REPORTED['C3', 'partial_share_before']:g} %% "
         f"-> {100 * REPORTED['C3', 'partial_share_after']:g} %%)? analytic search",
         _c3_search_arguments)
def run_c3_search(args):
    from svgtpu.geometry import parse_tiles
    from svgtpu.masks.c3_search import search

    found = search(args.geometries, parse_tiles(args.tiles, "--tiles"))
    found.pop("rows")   # every candidate row: the notebook draws them; --json keeps matches and nearest
    result = {**found, "provenance": "computed"}
    columns = ["geometry", "kept", "block_q", "block_kv", "sink", "heads", "temporal_share", "align_mode",
               "granularity", "align_sink", "before", "after"]
    head = (f"target {result['target']['before']:.2%} -> {result['target']['after']:.2%}; "
            f"{result['searched']:,} settings searched, {result['candidates']:,} with an after-share; "
            f"{len(result['matches'])} match both")
    parts = [head]
    if result["matches"]:
        parts += ["matches:", format_table([{c: m[c] for c in columns} for m in result["matches"][:20]])]
    parts += ["nearest:", format_table([{c: m[c] for c in columns} for m in result["nearest"]])]
    band = result["nearest_by_heads"]["band"]
    parts += ["nearest with every head on the band (SVG's own masks):",
              format_table([{c: m[c] for c in columns} for m in band])]
    return result, "\n".join(parts)


# -- svgtpu recipes ---------------------------------------------------------------------------

def _recipes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", help="one recipe (default: all)")


@command("recipes", "SVG's Wan recipes and the tile settings, each with its source", _recipes_arguments)
def run_recipes(args):
    from svgtpu.recipes import RECIPES, TILES, get_recipe

    recipes = [get_recipe(args.name)] if args.name else list(RECIPES.values())
    result = {"default": DEFAULT_RECIPE.name, "recipes": [r.as_dict() for r in recipes],
              "tiles": [t.as_dict() for t in TILES.values()], "provenance": "cited"}
    unknown = "unknown"
    rows = [{"recipe": r["name"] + (" (default)" if r["name"] == DEFAULT_RECIPE.name else ""),
             "kept": r["kept"] if r["kept"] is not None else unknown,
             "first_times_fp": r["first_times_fp"] if r["first_times_fp"] is not None else unknown,
             "dense steps": f"{r['dense_steps']}/{r['steps']} ({r['rule']})" if r["steps"] else unknown,
             "dense layers": f"{r['dense_layers']}/40" if r["dense_layers"] is not None else unknown,
             "rows": r["num_sampled_rows"] if r["num_sampled_rows"] is not None else unknown}
            for r in result["recipes"]]
    sources = [f"{r['name']}: " + ("; ".join(r["sources"]) or r["note"]) for r in result["recipes"]]
    tiles = [f"{t['name']}: {t['block_q']}x{t['block_kv']} (kv compute {t['block_kv_compute']}) {t['source']}"
             for t in result["tiles"]]
    return result, "\n\n".join([format_table(rows), "\n".join(sources), "\n".join(tiles)])


# -- svgtpu explore ---------------------------------------------------------------------------

def _explore_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.explore import ALIGN_CHOICES, HEAD_KINDS
    p.add_argument("--geometry", default=PRODUCTION.resolution, help="preset (480p ... 2160p) or TxHxW")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kept", "--sparsity", dest="kept", type=float,
                       help=f"SVG kept fraction in (0, 1) (default {DEFAULT_KEPT})")
    group.add_argument("--multiplier", type=float, help="SVG band multiplier, instead of --kept")
    p.add_argument("--head", default="spatial", choices=list(HEAD_KINDS.values()))
    p.add_argument("--block-q", type=positive_int, default=PRODUCTION.block_q)
    p.add_argument("--block-kv", type=positive_int, default=PRODUCTION.block_kv)
    p.add_argument("--align", default="none", choices=ALIGN_CHOICES)
    p.add_argument("--device", default=PRODUCTION.device)
    p.add_argument("--chips", type=positive_int, default=PRODUCTION.chips)
    p.add_argument("--video", action="store_true", help="also model the whole video (end-to-end speedup)")
    p.add_argument("--repeats", type=positive_int, default=5, help="cached redraws to take the median of")


@command("explore", "the explorer's stats for one setting and its redraw time (cold and cached)", _explore_arguments)
def run_explore(args):
    from svgtpu import explore

    kept = args.kept if args.kept is not None or args.multiplier is not None else DEFAULT_KEPT
    settings = explore.Settings(geometry=args.geometry, kept=kept, multiplier=args.multiplier, head=args.head,
                                block_q=args.block_q, block_kv=args.block_kv, align=args.align,
                                device=args.device, chips=args.chips)
    bench = explore.benchmark(settings, repeats=args.repeats, video=args.video)
    stats = {k: v for k, v in bench.pop("stats").items() if k != "kinds"}
    result = {**stats, "redraw": bench, "provenance": "computed"}
    lines = [f"{label}: {value}" for _, label, value in explore.rows({**stats, "kinds": None})]
    lines.append(f"redraw: {bench['cold_seconds'] * 1e3:.0f} ms the first time, {bench['cached_seconds'] * 1e3:.1f} ms "
                 f"cached (median of {bench['repeats']}) [measured-cpu, this machine]")
    return result, "\n".join(lines)


# -- svgtpu profile-heads ---------------------------------------------------------------------

def _profile_heads_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.attention.svg import KERNELS
    from svgtpu.masks.core import ALIGN_MODES
    p.add_argument("--geometry", default="4x10x14", help="preset (480p ... 2160p) or TxHxW")
    p.add_argument("--heads", type=positive_int, default=8, help="planted heads per seed (half temporal)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--head-dim", type=positive_int, default=64)
    p.add_argument("--contrast", type=float, default=8.0, help="logit gap of the planted pattern")
    p.add_argument("--rows", type=positive_int, default=DEFAULT_PROFILE_ROWS, help="query rows profiling samples")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--multiplier", type=float, help="SVG band multiplier (W = ceil(m*F/128)*128)")
    group.add_argument("--kept", "--sparsity", dest="kept", type=float, help=f"SVG kept fraction in (0, 1); default {DEFAULT_KEPT}")
    p.add_argument("--align", choices=ALIGN_MODES, help="tile-align the mask first")
    p.add_argument("--block-q", type=positive_int, default=128)
    p.add_argument("--block-kv", type=positive_int, default=128)
    p.add_argument("--time", action="store_true",
                   help="also time profiling against one sparse attention call (interleaved medians)")
    p.add_argument("--rounds", type=positive_int, default=9, help="timing rounds with --time")
    p.add_argument("--kernel", choices=KERNELS, default="ours", help="attention kernel timed with --time")


@command("profile-heads", "check online head profiling on planted spatial/temporal heads",
         _profile_heads_arguments)
def run_profile_heads(args):
    import numpy as np

    from svgtpu.attention.svg import SVGConfig
    from svgtpu.bench.kernels import bench_profiling
    from svgtpu.geometry import get_geometry
    from svgtpu.attention.profiling import HEAD_KINDS, profile_planted

    geometry = get_geometry(args.geometry)
    config = SVGConfig(multiplier=args.multiplier, kept=args.kept, num_sampled_rows=args.rows,
                       block_q=args.block_q, block_kv=args.block_kv, align=args.align, kernel=args.kernel)
    timing = bench_profiling(geometry, config, heads=args.heads, head_dim=args.head_dim,
                             rounds=args.rounds) if args.time else None
    mask = config.mask(geometry)
    confusion = profile_planted(geometry, mask, args.seeds, num_rows=args.rows, heads=args.heads,
                                head_dim=args.head_dim, contrast=args.contrast, progress=True)
    result = {"geometry": args.geometry, "T": geometry.T, "H": geometry.H, "W": geometry.W,
              "F": geometry.F, "L": geometry.L, "multiplier": config.multiplier_for(geometry),
              "mask_density": mask.density(), "align": args.align, "heads": args.heads,
              "seeds": args.seeds, "head_dim": args.head_dim, "contrast": args.contrast,
              "num_sampled_rows": args.rows,
              "confusion": {planted: dict(zip(HEAD_KINDS, map(int, row)))
                            for planted, row in zip(HEAD_KINDS, confusion)},
              "accuracy": float(np.trace(confusion) / confusion.sum()), "provenance": "computed"}
    table = format_table([{"planted": planted, **{f"predicted {k}": n for k, n in row.items()}}
                          for planted, row in result["confusion"].items()])
    table += f"\naccuracy {result['accuracy']:.4f} over {confusion.sum()} heads ({result['provenance']})"
    if timing is not None:
        result["timing"] = timing
        table += "\n\n" + format_table([{k: timing[k] for k in (
            "L", "heads", "profile_s", "kernel_s", "svg_sparse_s", "profile_over_kernel",
            "profile_over_svg_sparse", "flop_ratio", "provenance")}])
    return result, table


# -- svgtpu reproduce / svgtpu paper ---------------------------------------------------------

def _reproduce_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.report.reproduce import NOTEBOOKS, PROFILES
    p.add_argument("--profile", default="cpu", choices=list(PROFILES),
                   help="sizes: quick (tests), cpu (make figures), tpu (real sizes on a TPU VM)")
    p.add_argument("--only", nargs="+", metavar="NOTEBOOK",
                   help=f"run only these notebooks, by number or name ({', '.join(n[:2] for n in NOTEBOOKS)})")
    p.add_argument("--figures-dir", help="where figures and results.json go (default: figures/)")
    p.add_argument("--no-paper", action="store_true",
                   help="do not regenerate the paper's tables afterwards (never done with --figures-dir)")
    p.add_argument("--preflight", action="store_true",
                   help="run nothing: compile for v6e on this CPU (libtpu) what the profile's notebooks and "
                        "multi-host sampling will run, one host and several, and report what would fail")


@command("reproduce", "run the notebooks (papermill): every figure, results.json, the paper's tables",
         _reproduce_arguments)
def run_reproduce(args):
    import time

    from svgtpu.report.paper import generate
    from svgtpu.report.reproduce import reproduce, summary_rows
    from svgtpu.report.results import results_path

    if args.preflight:
        return _preflight(args)
    start = time.perf_counter()
    results = reproduce(args.profile, args.only, figures_dir=args.figures_dir)
    paper = [] if args.no_paper or args.figures_dir else generate(results_path())   # the committed results only
    failed = [r.notebook for r in results if r.status != "ok"]
    result = {"profile": args.profile, "notebooks": [r.as_dict() for r in results], "failed": failed,
              "results": str(results_path(args.figures_dir)), "paper": paper,
              "wall_seconds": time.perf_counter() - start}
    table = format_table(summary_rows(results), ["notebook", "status", "seconds", "figures", "error"])
    table += f"\n\nwall time {result['wall_seconds']:.0f} s; results in {result['results']}"
    if paper:
        table += "; paper tables regenerated in " + ", ".join(p["file"] for p in paper)
    if failed:  # print the summary, then exit non-zero naming the failed notebooks
        print(json.dumps(result, indent=2) if args.json else table)
        print(f"svgtpu reproduce: {len(failed)} notebook(s) failed: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)
    return result, table


def _preflight(args):
    """``reproduce --preflight``: (result, table, 1 if anything would fail)."""
    from svgtpu.bench.compile import libtpu_available
    from svgtpu.report.preflight import preflight
    if not libtpu_available():
        raise ValueError('--preflight needs the TPU compiler: pip install "jax[tpu]==<jax version>" '
                         '(requirements.txt pins it)')
    result = preflight(args.profile, progress=not args.json)
    table = format_table(result["checks"], ["notebook", "what", "topology", "geometry", "compiled", "compile_s",
                                            "reason"])
    table += (f"\n\npreflight of profile {args.profile} ({result['provenance']}): "
              + ("every program compiles" if result["passed"] else f"{result['failed']} would fail"))
    return result, table, 0 if result["passed"] else 1


def _paper_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", help="results file (default: figures/results.json)")
    p.add_argument("files", nargs="*", help="files with svgtpu markers (default: paper/svgtpu.md and README.md)")


@command("paper", "regenerate the paper's tables and figure blocks from the results file", _paper_arguments)
def run_paper(args):
    from svgtpu.report.paper import generate

    report = generate(args.results, args.files or None)
    return {"files": report}, format_table(report)


# -- svgtpu train / generate / quality (toy DiT) -----------------------------------------------

def _process_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a command that can run as one process of several (:mod:`svgtpu.launch`)."""
    from svgtpu.launch import COORDINATOR, NUM_PROCESSES, PROCESS_ID
    p.add_argument("--processes", type=positive_int, default=1,
                   help="start this many processes on localhost (each with --devices / processes fake CPU "
                        "devices, gloo collectives) and print process 0's result (docs/multihost.md)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="with --processes: kill every process after this many seconds (default 900)")
    p.add_argument("--distributed", action="store_true",
                   help="this is one process of a multi-host job: jax.distributed.initialize(), auto-detected "
                        "on a TPU VM slice (run the same command on every host)")
    p.add_argument(COORDINATOR, help="with --num-processes and --process-id: the coordinator HOST:PORT "
                   "(process 0's host), where JAX cannot detect the job itself")
    p.add_argument(NUM_PROCESSES, type=positive_int)
    p.add_argument(PROCESS_ID, type=int)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="toy", help="model size: toy (shipped) or tiny")
    p.add_argument("--steps", type=positive_int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=positive_int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--init", help="go on training from this checkpoint (fresh optimizer and schedule)")
    p.add_argument("--out", default="checkpoints/toy_dit.npz", help="checkpoint .npz; the loss curve goes "
                   "next to it as <name>.loss.json")


@command("train", "train the toy video DiT (rectified flow) and save a checkpoint", _train_arguments)
def run_train(args):
    import shlex

    from svgtpu.toy.dit import load_checkpoint
    from svgtpu.toy.train import get_config, save_training, train

    config, init = get_config(args.config), None
    if args.init:
        init, init_config = load_checkpoint(args.init)
        if init_config != config:
            raise ValueError(f"--init checkpoint {args.init} is not a {args.config!r} model")
    params, history = train(config, steps=args.steps, seed=args.seed, batch_size=args.batch_size,
                            lr=args.lr, warmup=args.warmup, init=init)
    command = "python -m svgtpu " + shlex.join(sys.argv[1:]) if sys.argv[0].endswith(("svgtpu", "__main__.py")) else None
    result = save_training(args.out, params, config, history, config_name=args.config, init=args.init,
                           command=command)
    table = format_table([{k: result[k] for k in ("config", "params", "steps", "batch_size", "first_loss",
                                                   "final_loss", "wall_s", "checkpoint_bytes")}])
    return result, table


def _sampling_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", default="checkpoints/toy_dit.npz")
    p.add_argument("--steps", type=positive_int, default=20, help="Euler denoising steps")
    p.add_argument("--guidance", type=float, default=3.0, help="classifier-free guidance scale")
    p.add_argument("--shift", type=float, default=1.0, help="timestep shift (1 = uniform)")
    p.add_argument("--kept", "--sparsity", dest="kept", type=float, help=f"SVG kept fraction in (0, 1); default {DEFAULT_KEPT}")


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.attention.backends import ATTENTION_BACKENDS
    from svgtpu.masks.core import ALIGN_MODES
    _sampling_arguments(p)
    p.add_argument("--attention", choices=ATTENTION_BACKENDS, default="dense")
    p.add_argument("--align", choices=ALIGN_MODES, help="tile-align the SVG or SVG2 mask (--attention svg, svg2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--labels", type=int, nargs="+", help="motion labels, one video each (default: all)")
    p.add_argument("--out", default="video.gif", help="animated GIF; the contact sheet goes next to it as .png")
    p.add_argument("--devices", type=positive_int, default=1,
                   help="shard sampling over this many devices (CFG pair x heads; on CPU, fake host devices); "
                        "with several processes, the devices of all of them")
    _process_arguments(p)


def _generate_table(result: dict) -> str:
    return format_table([{k: str(result[k]) if isinstance(result[k], list) else result[k] for k in (
        "attention", "align", "seed", "steps", "labels", "sample_seconds", "gif", "contact_sheet")}])


def _launch_generate(args) -> tuple[dict, str]:
    """``generate --processes N``: N local processes, one global mesh; process 0's result."""
    from svgtpu.launch import first_json, launch, relaunch_argv
    if args.devices % args.processes:
        raise ValueError(f"--devices ({args.devices}) must be divisible by --processes ({args.processes})")
    if args.distributed or args.coordinator:
        raise ValueError("--processes starts its own processes: drop --distributed / --coordinator")
    done = launch(relaunch_argv(args.argv), args.processes,
                  args.devices // args.processes, timeout=args.timeout)
    result = first_json(done.stdout[0])
    result["launcher"] = {"processes": args.processes, "wall_seconds": done.seconds, "port": done.port}
    return result, _generate_table(result) + f"\n({args.processes} processes on localhost, {done.seconds:.1f} s)"


@command("generate", "sample videos from the toy DiT: an animated GIF and a contact-sheet PNG", _generate_arguments)
def run_generate(args):
    import time

    from svgtpu.attention.svg import SVGConfig

    from svgtpu.attention.backends import attention_backend
    from svgtpu.toy.data import MOTIONS
    from svgtpu.toy.dit import load_checkpoint
    from svgtpu.report.results import provenance
    from svgtpu.toy.sampler import sample, save_video, video_statistics
    from svgtpu.attention.sharding import mesh_for_model
    from svgtpu.attention.svg2 import SVG2Config
    from svgtpu.launch import join

    if args.align and args.attention not in ("svg", "svg2"):
        raise ValueError(f"--align needs --attention svg or svg2, got --attention {args.attention}")
    if args.attention == "svg2" and args.devices > 1:
        raise ValueError("--devices must be 1 with --attention svg2 (its per-layer warm-start state is not sharded)")
    if args.processes > 1:
        return _launch_generate(args)
    join(args)   # one process of several (jax.distributed), before any JAX computation
    import jax
    params, config = load_checkpoint(args.checkpoint)
    labels = list(range(config.num_labels)) if args.labels is None else args.labels
    svg_config = SVGConfig(kept=args.kept, align=args.align) if args.attention == "svg" else None
    svg2_config = SVG2Config(align=args.align) if args.attention == "svg2" else None
    attention = attention_backend(args.attention, config.geometry, svg_config=svg_config, svg2_config=svg2_config)
    mesh = mesh_for_model(args.devices, config.heads) if args.devices > 1 else None
    start = time.perf_counter()
    video = sample(params, config, labels, seed=args.seed, num_steps=args.steps, guidance=args.guidance,
                   shift=args.shift, attention=attention, mesh=mesh)
    seconds = time.perf_counter() - start
    gif, png = save_video(video, args.out) if jax.process_index() == 0 else (None, None)  # one writer
    result = {"checkpoint": args.checkpoint, "attention": args.attention, "align": args.align,
              "seed": args.seed, "steps": args.steps, "guidance": args.guidance, "shift": args.shift,
              "labels": [MOTIONS[l] if l < len(MOTIONS) else "null" for l in labels],
              "shape": list(video.shape), "gif": gif, "contact_sheet": png, "sample_seconds": seconds,
              "devices": args.devices, "mesh": dict(mesh.shape) if mesh is not None else None,
              "processes": jax.process_count(), "process_index": jax.process_index(),
              "video": video_statistics(video),
              "provenance": provenance("measured", pallas=args.attention != "dense")}
    return result, _generate_table(result)


def _quality_arguments(p: argparse.ArgumentParser) -> None:
    _sampling_arguments(p)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one video per seed (label seed %% 3)")
    p.add_argument("--block", type=positive_int, default=128, help="kernel tile size (block_q = block_kv)")
    p.add_argument("--methods", nargs="+", metavar="METHOD",
                   help="compare these sparse methods instead (svg, svg2, sta, radial, each also -aligned) at "
                        f"the kept fractions --kept-fractions (default: --kept, else {DEFAULT_KEPT})")
    p.add_argument("--kept-fractions", type=float, nargs="+", metavar="KEPT",
                   help="with --methods: kept fractions in (0, 1), each method matched to every one")


@command("quality", "dense vs SVG (unaligned, aligned, fast path on/off) video PSNR/SSIM and head kinds; with "
                    "--methods every sparse method at matched kept fractions",
         _quality_arguments)
def run_quality(args):
    from svgtpu.toy.dit import load_checkpoint
    from svgtpu.toy.quality import quality_study

    if args.kept_fractions and not args.methods:
        raise ValueError("--kept-fractions needs --methods (the SVG study takes one --kept)")
    if args.methods:
        from svgtpu.bench.methods import VARIANTS, check_kept_fractions, method_sweep
        kept = check_kept_fractions(args.kept_fractions or [args.kept or DEFAULT_KEPT])  # before any model work
        unknown = [m for m in args.methods if m not in VARIANTS]
        if unknown:
            raise ValueError(f"--methods must be among {', '.join(VARIANTS)}, got {', '.join(unknown)}")
        params, config = load_checkpoint(args.checkpoint)
        result = method_sweep(params, config, variants=args.methods, kept_fractions=kept, seeds=args.seeds,
                              num_steps=args.steps, guidance=args.guidance, shift=args.shift, block=args.block)
        result["checkpoint"] = args.checkpoint
        table = format_table(result["summary"], ["variant", "kept_target", "kept_fraction", "psnr_mean", "psnr_min",
                                                 "ssim_mean"])
        return result, table + f"\n({result['provenance']})"
    params, config = load_checkpoint(args.checkpoint)
    result = quality_study(params, config, seeds=args.seeds, num_steps=args.steps, guidance=args.guidance,
                           shift=args.shift, kept=args.kept, block=args.block)
    result["checkpoint"] = args.checkpoint
    table = format_table(result["summary"])
    table += "\n\nfast path on vs off, max |difference|: " + ", ".join(
        f"{k} {v:.2g}" for k, v in result["fast_path_max_abs_diff"].items())
    for name in ("svg", "svg-aligned"):
        table += f"\n\nhead kinds per layer, {name}:\n" + format_table(result["head_kinds"][name])
    return result, table + f"\n({result['provenance']})"


# -- svgtpu methods (SVG, SVG2, STA, radial masks on the toy DiT) -----------------------------

def _methods_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", default="checkpoints/toy_dit.npz", help="toy DiT whose q, k SVG2 clusters")
    p.add_argument("--geometry", help=f"preset or TxHxW (default: the checkpoint's; with --costs {PRODUCTION.resolution}); SVG2 "
                                      "rows need the checkpoint's geometry and are left out at any other")
    p.add_argument("--kept", "--sparsity", dest="kept", type=float, default=DEFAULT_KEPT,
                   help="kept fraction of (q, k) pairs every method is matched to")
    p.add_argument("--block-q", type=positive_int, help=f"kernel q tile (default 128; with --costs {PRODUCTION.block_q})")
    p.add_argument("--block-kv", type=positive_int, help=f"kernel kv tile (default 128; with --costs {PRODUCTION.block_kv})")
    p.add_argument("--sta-tile", help="STA tile TxHxW in tokens (default 2x8x8: 128 tokens; with --costs 6x8x8)")
    p.add_argument("--q-clusters", type=positive_int, help="SVG2 query clusters per head (default 16; --costs 100)")
    p.add_argument("--k-clusters", type=positive_int, help="SVG2 key clusters per head (default 32; --costs 500)")
    p.add_argument("--svg2-assumed", action="store_true",
                   help="at a geometry other than the checkpoint's, SVG2 rows from assumed clusters (multinomial "
                        "sizes, random kept pairs) instead of none")
    p.add_argument("--costs", action="store_true",
                   help=f"add each method's modeled attention time, sparse / dense, of {PRODUCTION.model} on {PRODUCTION.device} "
                        f"(default geometry {PRODUCTION.resolution}, {PRODUCTION.tiles} tiles; SVG2 from assumed clusters; no "
                        "checkpoint needed)")
    p.add_argument("--seed", type=int, default=0, help="training video and noise seed of the captured q, k")
    p.add_argument("--t", type=float, default=0.5, help="flow time of the captured q, k (0 clean, 1 noise)")


@command("methods", "SVG, SVG2, STA and radial masks at a matched kept fraction: partial share, tile density "
                    f"(--costs: and modeled attention time at {PRODUCTION.resolution} on {PRODUCTION.device})", _methods_arguments)
def run_methods(args):
    from svgtpu.geometry import get_geometry
    from svgtpu.report.results import provenance
    from svgtpu.bench.methods import COST_SETTING, capture_qk, check_settings, method_costs, method_table
    from svgtpu.attention.svg2 import SVG2Config

    defaults = COST_SETTING if args.costs else {"block_q": 128, "block_kv": 128, "sta_tile": (2, 8, 8),
                                                 "q_clusters": 16, "k_clusters": 32}
    block_q, block_kv = args.block_q or defaults["block_q"], args.block_kv or defaults["block_kv"]
    sta_tile = defaults["sta_tile"]
    if args.sta_tile is not None:
        from svgtpu.geometry import parse_sizes
        sta_tile = parse_sizes(args.sta_tile, 3, "--sta-tile (TxHxW)")
    check_settings(args.kept, sta_tile)
    svg2 = SVG2Config(q_clusters=args.q_clusters or defaults["q_clusters"],
                      k_clusters=args.k_clusters or defaults["k_clusters"], block_q=block_q, block_kv=block_kv)
    if args.costs:
        result = method_costs([args.kept], geometry=args.geometry or COST_SETTING["geometry"], block_q=block_q,
                              block_kv=block_kv, sta_tile=sta_tile, svg2=svg2)
        table = format_table(result["rows"], ["method", "kept_target", "kept_fraction", "partial_share",
                                              "tile_density", "attention_ratio"])
        return result, table + (f"\n({result['model']} at {result['geometry']} on {result['device']}, {block_q}x"
                                f"{block_kv} tiles; tiles {result['provenance']['tiles']}, attention_ratio "
                                f"{result['provenance']['attention_ratio']})\n{result['svg2_assumption']}")
    from svgtpu.toy.dit import load_checkpoint

    params, config = load_checkpoint(args.checkpoint)
    geometry = get_geometry(args.geometry) if args.geometry else config.geometry
    same = (geometry.T, geometry.H, geometry.W) == (config.geometry.T, config.geometry.H, config.geometry.W)
    qk = capture_qk(params, config, seed=args.seed, t=args.t) if same else None
    rows = method_table(geometry, args.kept, qk=qk, block_q=block_q, block_kv=block_kv,
                        sta_tile=sta_tile, svg2=svg2, svg2_assumed=args.svg2_assumed)
    result = {"checkpoint": args.checkpoint, "geometry": str(geometry), "L": geometry.L, "kept_target": args.kept,
              "block_q": block_q, "block_kv": block_kv, "seed": args.seed, "t": args.t, "rows": rows,
              "provenance": provenance("computed")}
    table = format_table(rows, ["method", "kept_fraction", "partial_share", "tile_density"])
    return result, table + f"\n({result['geometry']}, {block_q}x{block_kv} tiles, {result['provenance']})"


# -- svgtpu costmodel --------------------------------------------------------------------------

def _costmodel_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.costmodel import DEVICES, MODEL_NAMES, PARTS, PRESETS, WEIGHTS
    p.add_argument("--model", default=PRODUCTION.model, help=f"one of {', '.join(MODEL_NAMES)}")
    p.add_argument("--resolution", help=f"one of {', '.join(PRESETS)}, a preset or TxHxW "
                   f"(default {PRODUCTION.resolution}; the toy DiT's own grid for --model toy)")
    p.add_argument("--device", default=PRODUCTION.device, help=f"one of {', '.join(DEVICES)}, or cpu (rates measured now)")
    p.add_argument("--chips", type=positive_int, default=PRODUCTION.chips, help="chips sharing the work as head parallelism")
    p.add_argument("--steps", type=positive_int, default=50, help="denoising steps")
    p.add_argument("--cfg", action=argparse.BooleanOptionalAction, default=True,
                   help="classifier-free guidance: 2 transformer passes per step")
    p.add_argument("--cfg-split", action="store_true", help="run the two CFG passes at once on two halves of the slice")
    p.add_argument("--weights", choices=WEIGHTS, default="auto",
                   help="auto: shard (and all-gather) weights only when replicas do not fit in HBM")
    p.add_argument("--exclude", action="append", choices=PARTS, default=[],
                   help="leave a term out of the video's time (repeatable)")
    p.add_argument("--sweep", choices=("resolution", "chips"),
                   help="resolution: the C2/C5 curve over 480p ... 2160p; chips: 8/16/32/64 chips, one slice or two over "
                        "the data-center network, the split picked per count (svgtpu.costmodel.multihost)")
    p.add_argument("--validate", action="store_true",
                   help="predicted vs published measured Wan generation times (calibration point per device family)")
    p.add_argument("--sparse-evidence", action="store_true",
                   help="the sparse-layer efficiency each source implies (SVG's published dense-vs-SVG timings, "
                        "SVG's per-layer extra work; with --compiled-cycles-over-ideal, our compiled kernel)")
    p.add_argument("--compiled-cycles-over-ideal", type=float,
                   help="our sparse kernel's compiled v6e cycles over ideal (the 'svg-aligned: ours / ideal' "
                        "ratio of `svgtpu bench compiled --json`), as evidence for --sparse-evidence")
    p.add_argument("--from-compiled", action="store_true",
                   help=f"with --sparse-evidence: compile our kernel for {PRODUCTION.device} at {PRODUCTION.resolution}, {PRODUCTION.tiles} (needs libtpu; cached in "
                        "build/compiled) and use its cycles over ideal (svgtpu.bench.compiled.sparse_overhead_vs_our_dense)")
    p.add_argument("--sparse-efficiency", type=float, default=1.0,
                   help="share of the modeled sparse-layer time real sparse layers reach (0, 1]; see --sparse-evidence")
    p.add_argument("--block-q", type=positive_int, default=PRODUCTION.block_q)
    p.add_argument("--block-kv", type=positive_int, default=PRODUCTION.block_kv)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kept", "--sparsity", dest="kept", type=float,
                       help=f"SVG kept fraction (default {DEFAULT_KEPT}, recipe {DEFAULT_RECIPE.name})")
    group.add_argument("--multiplier", type=float, help="SVG band multiplier instead of --kept")
    p.add_argument("--temporal-fraction", type=float, default=0.5, help="share of heads run temporal")
    p.add_argument("--matmul-efficiency", type=float, help="default: the device family's (see --validate)")
    p.add_argument("--attention-efficiency", type=float, help="default: the device family's")
    p.add_argument("--memory-efficiency", type=float)
    p.add_argument("--vector-scale", type=float, help="multiplier on the derived VPU/EUP rates")
    p.add_argument("--mxu-width-penalty", action=argparse.BooleanOptionalAction, default=True,
                   help="head_dim below the MXU side idles part of it (v6e: 128 of 256)")


def _costmodel_sparse_evidence(compiled_cycles_over_ideal):
    from svgtpu import costmodel as cm

    result = cm.sparse_efficiency_evidence(compiled_cycles_over_ideal)
    rows = [{k: r[k] for k in ("id", "published_speedup", "implied_from_speedup", "implied_sparse_efficiency",
                                "model_extra_work_efficiency")} for r in result["published_svg"]]
    if "compiled_kernel" in result:
        rows.append({"id": "compiled kernel (v6e, ours / ideal)",
                     "implied_sparse_efficiency": result["compiled_kernel"]["efficiency"]})
    return result, format_table(rows) + f"\n({result['provenance']})"


def _costmodel_validate():
    from svgtpu import costmodel as cm

    result = cm.validate()
    rows = [{k: r[k] for k in ("id", "role", "device", "model", "pixels", "frames", "steps", "cfg", "measures",
                                "published_s", "predicted_s", "error")} for r in result["points"]]
    v, families = result["validation"], result["families"]
    note = (f"validation points: {v['points']}, median |error| {v['median_abs_error']:.1%}, "
            f"worst |error| {v['worst_abs_error']:.1%}\n"
            + "\n".join(f"{f}: calibrated on {x['calibrated_on'] or 'nothing (prior efficiencies)'}"
                        + (f" (compute efficiency {x['fitted_compute_efficiency']:.3f})" if x["calibrated_on"] else "")
                        for f, x in families.items())
            + f"\n({result['provenance']})")
    return result, format_table(rows) + "\n" + note


@command("costmodel", "modeled attention share, dense vs SVG time and speedup (C1, C2, C5); --validate", _costmodel_arguments)
def run_costmodel(args):
    import dataclasses

    from svgtpu import costmodel as cm

    if args.validate:
        return _costmodel_validate()
    if args.sparse_evidence:
        ratio = args.compiled_cycles_over_ideal
        if args.from_compiled:
            if ratio is not None:
                raise ValueError("give --from-compiled or --compiled-cycles-over-ideal, not both")
            from svgtpu.bench.compiled import sparse_overhead_vs_our_dense
            ratio = sparse_overhead_vs_our_dense()
        return _costmodel_sparse_evidence(ratio)
    model = cm.get_model(args.model)
    if args.device == "cpu" and args.model == "toy":
        from svgtpu.bench.cpu import toy_attention_share_measured_vs_modeled
        result = toy_attention_share_measured_vs_modeled()
        table = format_table([{k: result[k] for k in (
            "model", "L", "modeled_attention_share", "measured_attention_share",
            "modeled_forward_seconds", "measured_forward_seconds")}])
        return result, table + "\n(modeled: modeled-cpu with rates measured-cpu; measured: measured-cpu)"
    if args.device == "cpu":
        from svgtpu.bench.cpu import calibrate_cpu
        device = calibrate_cpu()
    else:
        device = cm.get_device(args.device)
    if not args.mxu_width_penalty:
        device = dataclasses.replace(device, matmul_tile=None)
    if args.resolution is None and args.model == "toy":
        from svgtpu.toy.dit import DiTConfig
        geometry = DiTConfig().geometry
    else:
        geometry = cm.get_geometry(args.resolution or PRODUCTION.resolution, "--resolution")
    kept = None if args.multiplier is not None else (DEFAULT_KEPT if args.kept is None else args.kept)
    family = cm.family_efficiency(device.family)["efficiency"]
    overrides = {k: v for k, v in (("matmul", args.matmul_efficiency), ("attention", args.attention_efficiency),
                                   ("memory", args.memory_efficiency), ("vector_scale", args.vector_scale))
                 if v is not None}
    efficiency = cm.Efficiency(**{**dataclasses.asdict(family), **overrides})
    setup = cm.Setup(model, geometry, device, chips=args.chips, steps=args.steps, cfg=args.cfg,
                     block_q=args.block_q, block_kv=args.block_kv, kept=kept,
                     multiplier=args.multiplier, temporal_fraction=args.temporal_fraction,
                     efficiency=efficiency, cfg_split=args.cfg_split, weights=args.weights,
                     sparse_efficiency=args.sparse_efficiency,
                     parts=frozenset(cm.PARTS) - set(args.exclude))
    if args.sweep == "resolution":
        rows = cm.sweep_resolution(setup)
        result = {"model": model.name, "device": device.name, "chips": args.chips, "steps": args.steps,
                  "cfg": args.cfg, "kept": kept, "multiplier": args.multiplier, "sweep": rows,
                  "reported": reported_json(), "provenance": setup.provenance}
        return result, format_table(rows) + f"\n({setup.provenance}; reported C2 at {PRODUCTION.resolution}: {REPORTED['C2', 'attention_share_1440p']:.1%})"
    if args.sweep == "chips":
        from svgtpu.costmodel.multihost import multihost_sweep
        fields = {k: getattr(setup, k) for k in ("steps", "cfg", "block_q", "block_kv", "kept", "multiplier",
                                                 "temporal_fraction", "efficiency", "weights", "sparse_efficiency",
                                                 "parts")}
        result = multihost_sweep(model.name, args.resolution or PRODUCTION.resolution, device.name, **fields)
        columns = ["chips", "slices", "split", "chips_per_pass", "heads_per_chip", "head_slot_use", "dense_minutes",
                   "svg_minutes", "speedup", "speedup_without_communication", "communication_share_svg", "picked"]
        why = "\n".join(f"{r['chips']} chips: {r['why']}" for r in result["picked"])
        return result, format_table(result["rows"], columns) + f"\n\npicked:\n{why}\n({result['provenance']})"
    result = cm.model_video(setup)
    result["sensitivity"] = band = cm.sensitivity(setup)
    reported = {"attention_share": REPORTED["C2", "attention_share_1440p"],
                "attention_share_end_to_end": REPORTED["C2", "attention_share_1440p"],
                "speedup": REPORTED["C1", "speedup"], "saved_minutes": REPORTED["C1", "minutes_saved"]}
    rows = [{"quantity": k, "modeled": result[k], "band_min": band[k]["min"], "band_max": band[k]["max"],
             "reported": reported.get(k, "")} for k in cm.SENSITIVITY_QUANTITIES]
    rows += [{"quantity": f"split: {k}", "modeled": result["contributions"][k], "band_min": band[f"split_{k}"]["min"],
              "band_max": band[f"split_{k}"]["max"], "reported": ""} for k in cm.SENSITIVITY_SPLIT]
    chain = [{"variant": r["variant"], "minutes": r["seconds"] / 60, "speedup_vs_dense": r["speedup_vs_dense"]}
             for r in result["chain"]]
    tornado = [{k: r[k] for k in ("knob", "range", "value_at_low", "value_at_high", "swing")}
               for r in cm.tornado_rows(band, "speedup")]
    head = (f"{model.name} at {geometry} on {device.name} x{args.chips}, {args.steps} steps, "
            f"cfg={args.cfg}, tiles {args.block_q}x{args.block_kv}  [{setup.provenance}]")
    table = "\n\n".join([head, format_table(rows), format_table(chain), "speedup tornado:\n" + format_table(tornado)])
    return result, table


# -- svgtpu bench kernels | ops ---------------------------------------------------------------

def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=("kernels", "ops", "gpu", "compiled"),
                   help="kernels: interleaved timings of the attention variants; ops: vector ops per tile kind; "
                        "gpu: the prepared GPU run (svgtpu.bench.gpu; `make gpu-bench`); compiled: whole-kernel "
                        "static v6e cycles of ours, Splash and tokamax from the real compiler (svgtpu.bench.compiled)")
    p.add_argument("--geometry", default=None,
                   help=f"preset or TxHxW (default 8x32x34: F=1088, L=8704; compiled: {PRODUCTION.resolution})")
    p.add_argument("--tiles", default="3024x2048,512x512",
                   help="compiled: comma-separated BLOCK_QxBLOCK_KV tile sizes (default 3024x2048,512x512)")
    p.add_argument("--device", default="v6e", choices=("v6e", "v7x"),
                   help="compiled: the TPU compiled for (v7x: one core of tpu7x:2x2x1)")
    p.add_argument("--sweep", action="store_true",
                   help="compiled: also sweep the libraries' block_kv_compute on the aligned mask (production tile)")
    p.add_argument("--multiplier", type=float, default=1.0, help="SVG band multiplier")
    p.add_argument("--block-q", type=positive_int, default=512)
    p.add_argument("--block-kv", type=positive_int, default=512)
    p.add_argument("--block-kv-compute", type=positive_int, default=None)
    p.add_argument("--heads", type=positive_int, default=2)
    p.add_argument("--head-dim", type=positive_int, default=128)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--rounds", type=positive_int, default=9, help="timing rounds (kernels)")
    p.add_argument("--repeats", type=positive_int, default=3,
                   help="calls per variant per round, fastest kept (kernels)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compiled", action="store_true",
                   help="ops: also the LLO instructions and static bundles libtpu emits per tile body for v6e "
                        "(compiled ahead of time; needs libtpu, about a minute per variant)")
    p.add_argument("--smoke", action="store_true", help="gpu: the same run at tiny shapes, on any backend")
    p.add_argument("--out", help="gpu: write the results file here (figures/results-gpu.json for a GPU run)")
    p.add_argument("--budget", type=float, default=None, help="gpu: time budget of the run in seconds")


@command("bench", "attention kernel benchmarks for C4: timings (kernels) and vector-op counts (ops)",
         _bench_arguments)
def run_bench(args):
    if args.what == "gpu":
        from svgtpu.bench import gpu as gpu_bench
        result = gpu_bench.run(smoke=args.smoke, budget_s=args.budget)
        if args.out:
            result["written"] = str(gpu_bench.write(result, args.out))
        return result, gpu_bench.format_result(result)
    if args.what == "compiled":
        from svgtpu.bench.compiled import run_command
        return run_command(args)
    args.geometry = args.geometry or "8x32x34"
    from svgtpu.bench import kernels as bench
    from svgtpu.kernels import KernelConfig
    from svgtpu.kernels.common import HEAD_DIMS

    KernelConfig(args.block_q, args.block_kv, args.block_kv_compute)  # one clear line on bad tiles
    if args.head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {args.head_dim}")
    common = dict(block_q=args.block_q, block_kv=args.block_kv, block_kv_compute=args.block_kv_compute,
                  head_dim=args.head_dim, dtype=args.dtype, multiplier=args.multiplier)
    if args.what == "ops":
        result = bench.bench_ops(args.geometry, **common)
        rows = [{k: r[k] for k in ("mask", "mask_source", "fast_path", "tile", "matmul_ops", "vector_ops",
                                   "masking_ops", "mask_block_loads", "vector_elements", "masking_elements")}
                for r in result["rows"]]
        plans = format_table(result["plans"], ["mask", "steps_per_head", "dense_steps_per_head", "full", "partial",
                                               "empty", "masked_steps", "empty_row_steps", "wasted_steps",
                                               "mask_source", "mask_blocks"])
        tables = [format_table(rows) + f"\n({result['provenance']}: {result['counted_in']})",
                  "tile plans (grid steps per head; wasted = no-op padding of per-head plans)", plans]
        if args.compiled:
            from svgtpu.bench.llo import compiled_ops
            result["compiled"] = compiled_ops(args.geometry, progress=not args.json, **common)
            tables.append(format_table(result["compiled"]["rows"]) + f"\n({result['compiled']['provenance']}: "
                                                                      f"{result['compiled']['counted_in']})")
        return result, "\n\n".join(tables)
    result = bench.bench_kernels(args.geometry, heads=args.heads, rounds=args.rounds, repeats=args.repeats,
                                 seed=args.seed, **common)
    rows = [{k: r[k] for k in ("variant", "median_s", "ratio_to_ours_dense", "density", "partial_share",
                               "overhead_vs_ideal", "grid_steps_per_head", "masked_steps_per_head")}
            for r in result["variants"]]
    head = (f"{result['geometry']} L={result['L']} heads={result['heads']} d={result['head_dim']} "
            f"{result['dtype']} tiles {result['block_q']}x{result['block_kv']}, {result['rounds']} rounds "
            f"(fastest of {result['repeats']} calls each) "
            f"[{result['provenance']}]; ratios are medians of per-round ratios")
    headline = "\n".join(f"{k}: {v:.3f}" for k, v in result["headline"].items())
    return result, "\n\n".join([head, format_table(rows), headline])


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.bench.compile import TARGETS
    from svgtpu.bench.multihost import MULTIHOST_TARGETS
    from svgtpu.kernels.budget import TPU_GENERATIONS
    from svgtpu.masks.core import ALIGN_MODES
    p.add_argument("--device", default="v6e", help=f"TPU generation: {', '.join(TPU_GENERATIONS)}")
    p.add_argument("--topology", default=None, help="topology name, e.g. v6e:2x2x1 or 2x2 (default: one host); a "
                   "multi-host one (4x4: 16 chips, 4 hosts) compiles the sharded targets and counts collectives")
    p.add_argument("--geometry", default="720p", help="preset (480p ... 2160p) or TxHxW")
    p.add_argument("--block-q", type=positive_int, default=PRODUCTION.block_q)
    p.add_argument("--block-kv", type=positive_int, default=PRODUCTION.block_kv)
    p.add_argument("--block-kv-compute", type=positive_int, default=None)
    p.add_argument("--no-fast-path", action="store_true", help="mask every tile (the C4 ablation)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kept", "--sparsity", dest="kept", type=float, default=None, help=f"SVG kept fraction (default {DEFAULT_KEPT})")
    group.add_argument("--multiplier", type=float, default=None, help="SVG band multiplier")
    p.add_argument("--align", choices=ALIGN_MODES, default=None, help="tile-align the mask")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    p.add_argument("--heads", type=positive_int, default=None,
                   help="heads per chip (default 5); for the sharded targets the model's heads (default 40)")
    p.add_argument("--head-dim", type=positive_int, default=128)
    p.add_argument("--what", default=None,
                   help=f"comma-separated targets from {', '.join(TARGETS + MULTIHOST_TARGETS)} (default "
                        f"kernel,svg-layer; on a multi-host topology {','.join(MULTIHOST_TARGETS)})")


@command("compile", "ahead-of-time compile kernel / SVG layer / DiT step for a TPU topology, no TPU "
         "needed (exit 1 if the compiler refuses)", _compile_arguments)
def run_compile(args):
    """``(result, table, exit status)``; 1 when anything was refused."""
    from svgtpu.bench.compile import CompileJob, compile_targets
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels import KernelConfig, device_memory
    from svgtpu.kernels.common import HEAD_DIMS
    if args.head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {args.head_dim}")
    get_geometry(args.geometry)
    from svgtpu.bench.multihost import MULTIHOST_TARGETS, topology_devices, topology_name
    topology = topology_name(args.device, args.topology) if args.topology else None
    hosts = len({d.process_index for d in topology_devices(args.device, topology)}) if topology else 1
    what = [t.strip() for t in (args.what or ",".join(
        MULTIHOST_TARGETS if hosts > 1 else ("kernel", "svg-layer"))).split(",") if t.strip()]
    sharded = [t for t in what if t in MULTIHOST_TARGETS]
    if sharded and len(sharded) < len(what):
        raise ValueError(f"--what mixes sharded targets ({', '.join(MULTIHOST_TARGETS)}) with one-chip ones; "
                         "compile them in two runs")
    job = CompileJob(geometry=args.geometry, device=args.device, topology=topology, dtype=args.dtype,
                     heads=args.heads or (40 if sharded else 5), head_dim=args.head_dim, kept=args.kept,
                     multiplier=args.multiplier, align=args.align,
                     config=KernelConfig(args.block_q, args.block_kv, args.block_kv_compute,
                                         fast_path=not args.no_fast_path))
    job.svg_config()  # validates kept / multiplier / align
    if sharded:
        return _compile_multihost(job, topology or f"{args.device}:4x4x1", sharded, progress=not args.json)
    try:
        result = compile_targets(job, tuple(what), progress=not args.json)
    except RuntimeError as e:  # no libtpu
        raise ValueError(str(e)) from None
    columns = ["target", "geometry", "compiled", "compile_s", "plan_steps", "plan_chunks", "smem_bytes",
               "vmem_bytes", "reason"]
    head = (f"{result['topology']} ({result['provenance']}): tiles {job.config.tile}, block_kv_compute "
            f"{job.config.block_kv_compute}, fast path {'on' if job.config.fast_path else 'off'}, {job.dtype}, "
            f"{job.heads} heads x {job.head_dim}; SMEM budget per plan chunk "
            f"{device_memory(job.device).smem_budget} B, VMEM limit {result['vmem_budget']} B "
            f"(vmem_bytes: our lower estimate; the compiler checks the real use)")
    rows = [{c: r.get(c) for c in columns} for r in result["targets"]]
    return result, head + "\n" + format_table(rows), 0 if result["compiled"] else 1


def _compile_multihost(job, topology: str, targets: list[str], progress: bool):
    """``svgtpu compile`` on a multi-host topology: the sharded targets and their collectives."""
    from svgtpu.bench.multihost import MultihostJob, collective_rows, compile_multihost
    result = compile_multihost(MultihostJob(job, topology=topology), tuple(targets), progress=progress)
    head = (f"{result['topology']}: {result['chips']} chips on {result['hosts']} hosts ({result['provenance']}); "
            f"{result['geometry']}, {result['heads']} heads x {result['head_dim']}, {result['dtype']}, tiles "
            f"{result['block_q']}x{result['block_kv']}; collectives of one call, bytes of their results on one chip; "
            "model: svgtpu.costmodel.parallel.ulysses_collectives")
    lines = [head, format_table(collective_rows(result))]
    for t in result["targets"]:
        if t.get("per_step"):
            lines.append(f"{t['target']} ({t['mesh']}): per denoising step ({t['per_step']['layers']} layers) "
                         f"{t['per_step']['compiled_bytes_per_chip'] / 1e9:.3g} GB per chip compiled, "
                         f"{t['per_step']['model_bytes_per_chip'] / 1e9:.3g} GB modeled; matches the model: "
                         f"{t['matches_model']}")
    return result, "\n".join(lines), 0 if result["compiled"] else 1


# -- entry point ------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``svgtpu tiles: error: ...``) and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (--help lists the arguments)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="svgtpu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, arguments, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
        if arguments is not None:
            arguments(p)
    return parser


def _fake_host_devices(argv: list[str]) -> None:
    """Let ``--devices N`` run on a CPU-only machine: ask XLA for N host devices before jax starts.

    The flag only affects the host (CPU) platform, so it changes nothing on a TPU VM.
    """
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--devices", default="1")
    devices = pre.parse_known_args(argv)[0].devices
    devices = int(devices) if devices.isdigit() else 1  # the real parser reports bad values
    flags = os.environ.get("XLA_FLAGS", "")
    if devices > 1 and "jax" not in sys.modules and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()


def main(argv: list[str] | None = None) -> int:
    _fake_host_devices(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)   # for a launcher that reruns the command
    _, _, run = COMMANDS[args.command]
    try:
        result, table, *status = run(args)  # a run may add an exit status (compile: 1 when refused)
    except (ValueError, OSError) as error:  # bad input, or a file that cannot be read or written
        print(f"svgtpu {args.command}: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else table)
    return status[0] if status else 0
