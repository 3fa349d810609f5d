"""The svgtpu command line: each subcommand prints a table, or one JSON object with --json.

A subcommand is a function ``run(args) -> (result, table)`` registered with :func:`command` (a name
with a space, ``bench kernels``, is a subcommand of ``bench``): it parses, calls the module that does
the work and prints.  The result is a JSON-able dict and the table the human rendering of it (a
third item, if returned, is the exit status).  Bad input (:class:`svgtpu.errors.BadInput`, raised by
validation where the input enters) is one line on stderr and exit status 2; anything else is a bug
and keeps its traceback (exit status 1).  ``--kept`` is the fraction of (q, k) pairs a sparse mask
keeps; ``--sparsity`` is accepted for it, SVG's name (which means the same kept fraction).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from svgtpu.errors import BadInput, positive_int
from svgtpu.production import PRODUCTION
from svgtpu.recipes import DEFAULT_RECIPE
from svgtpu.facts.claims import REPORTED
from svgtpu.facts.paths import CHECKPOINT
from svgtpu.facts.tables import format_table
from svgtpu.warmup import DEFAULT_KEPT, DEFAULT_PROFILE_ROWS

COMMANDS: dict[str, tuple[str, Callable, Callable]] = {}
#: Commands made of subcommands (``bench kernels``, ``bench ops``, ...), with their help.
GROUPS = {"bench": "attention kernel benchmarks (C4): timings, op counts, the compiler's cycles, the GPU run"}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None]):
    """Register ``run(args) -> (result_dict, table_str)`` as the subcommand ``name``."""
    def register(run):
        COMMANDS[name] = (help, arguments, run)
        return run
    return register


def _tile_arguments(p: argparse.ArgumentParser, block_q: int = PRODUCTION.block_q,
                    block_kv: int = PRODUCTION.block_kv) -> None:
    p.add_argument("--block-q", type=positive_int, default=block_q, help=f"q rows per tile (default {block_q})")
    p.add_argument("--block-kv", type=positive_int, default=block_kv, help=f"keys per tile (default {block_kv})")


def _mask_arguments(p: argparse.ArgumentParser, geometry: str, default: str = f"kept {DEFAULT_KEPT}", *,
                    align: tuple[str, ...] | None = None, align_default: str | None = None) -> argparse._MutuallyExclusiveGroup:
    """``--geometry``, SVG's ``--kept`` or ``--multiplier`` (the group, for more choices) and ``--align``."""
    from svgtpu.masks.core import ALIGN_MODES
    p.add_argument("--geometry", default=geometry, help=f"preset (480p ... 2160p) or TxHxW (default {geometry})")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kept", "--sparsity", dest="kept", type=float, help=f"SVG kept fraction in (0, 1) (default {default})")
    group.add_argument("--multiplier", type=float, help="SVG band multiplier (W = ceil(m*F/128)*128), instead of --kept")
    p.add_argument("--align", choices=align or ALIGN_MODES, default=align_default, help="tile-align the mask")
    return group


# -- svgtpu info ------------------------------------------------------------------------------

@command("info", "backend, devices and versions", lambda p: None)
def run_info(args):
    import jax
    import numpy as np

    from svgtpu.facts.results import environment
    result = {**environment(), "numpy": np.__version__, "devices": [str(d) for d in jax.devices()],
              "device_count": jax.device_count()}
    return result, "\n".join(f"{k:>12}: {v}" for k, v in result.items())


# -- svgtpu tiles / c3-search / recipes / explore ---------------------------------------------

def _tiles_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.masks.core import MASK_KINDS
    p.add_argument("--mask", default="spatial", help=f"one of {', '.join(MASK_KINDS)}")
    group = _mask_arguments(p, PRODUCTION.resolution)
    group.add_argument("--recipe", help="the kept fraction of a named recipe (svgtpu recipes)")
    _tile_arguments(p)


@command("tiles", "classify the tiles of an SVG mask (C3); any tile is counted, and one our kernel would refuse "
                  "is named", _tiles_arguments)
def run_tiles(args):
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.config import check_blocks_cover, tile_refusal
    from svgtpu.masks.tiles import format_tile_report, tile_report

    check_blocks_cover(args.block_q, args.block_kv, get_geometry(args.geometry).L)
    result = tile_report(args.geometry, args.mask, multiplier=args.multiplier, kept=args.kept, recipe=args.recipe,
                         block_q=args.block_q, block_kv=args.block_kv, align_mode=args.align)
    result["kernel_refusal"] = tile_refusal(args.block_q, args.block_kv)   # counted all the same
    return result, format_tile_report(result)


def _c3_search_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.geometry import format_tiles
    from svgtpu.masks.c3_search import GEOMETRIES, MAXDIFFUSION_TILES, TILES
    p.add_argument("--geometries", nargs="+", default=list(GEOMETRIES), help="presets or TxHxW grids")
    p.add_argument("--tiles", default=format_tiles(TILES),
                   help="comma-separated BLOCK_QxBLOCK_KV tiles (default: Splash's, MaxDiffusion's, squares)")
    p.add_argument("--maxdiffusion-tiles", default=format_tiles(MAXDIFFUSION_TILES),
                   help="tiles of the search counted MaxDiffusion's way (default: its Wan configs' and SVG docs' tiles)")


# argparse formats help with %: a literal percent sign is written %%
@command("c3-search", f"which settings give the write-up's C3 shares ({100 * REPORTED['C3', 'partial_share_before']:g} %% "
         f"-> {100 * REPORTED['C3', 'partial_share_after']:g} %%)? analytic search",
         _c3_search_arguments)
def run_c3_search(args):
    from svgtpu.geometry import get_geometry, parse_tiles
    from svgtpu.masks.c3_search import format_maxdiffusion_search, format_search, maxdiffusion_search, search

    for geometry in args.geometries:   # refused before the search's progress bar starts
        get_geometry(geometry, "--geometries")
    found = search(args.geometries, parse_tiles(args.tiles, "--tiles"))
    found.pop("rows")   # every candidate row: the notebook draws them; --json keeps matches and nearest
    theirs = maxdiffusion_search(args.geometries, parse_tiles(args.maxdiffusion_tiles, "--maxdiffusion-tiles"))
    theirs.pop("rows")
    result = {**found, "maxdiffusion": theirs, "provenance": "computed"}
    return result, format_search(result) + "\n\n" + format_maxdiffusion_search(theirs)


def _align_pairs_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.masks.core import ALIGN_MODES
    from svgtpu.geometry import format_tiles
    from svgtpu.masks.pairs import GEOMETRIES, KEPT, TILES
    from svgtpu.recipes import MAXDIFFUSION_SVG_DENSITIES
    p.add_argument("--geometries", nargs="+", default=list(GEOMETRIES), help="presets or TxHxW grids")
    p.add_argument("--tiles", default=format_tiles(TILES),
                   help="comma-separated BLOCK_QxBLOCK_KV tiles (default: the production tile and MaxDiffusion's SVG tile)")
    p.add_argument("--kept", nargs="*", type=float, default=list(KEPT), help="SVG kept fractions (our band rule)")
    p.add_argument("--densities", nargs="*", type=float, default=list(MAXDIFFUSION_SVG_DENSITIES),
                   help="MaxDiffusion retained densities (its band rule w = L (1 - sqrt(1 - density)), up to 128)")
    p.add_argument("--modes", nargs="+", choices=ALIGN_MODES, default=list(ALIGN_MODES), help="alignment modes")


@command("align-pairs", "pairs each tile alignment executes vs the SVG mask's (snap drifts; balanced keeps the count)",
         _align_pairs_arguments)
def run_align_pairs(args):
    from svgtpu.geometry import parse_tiles
    from svgtpu.masks.core import check_kept
    from svgtpu.masks.pairs import format_pair_accounting, pair_accounting

    kept = [check_kept(k, "--kept") for k in args.kept]
    result = pair_accounting(args.geometries, parse_tiles(args.tiles, "--tiles"), kept=kept, densities=args.densities,
                             modes=args.modes)
    return result, format_pair_accounting(result)


@command("recipes", "SVG's Wan recipes and the tile settings, each with its source",
         lambda p: p.add_argument("--name", help="one recipe (default: all)"))
def run_recipes(args):
    from svgtpu.recipes import format_recipes, recipes_report
    result = recipes_report(args.name)
    return result, format_recipes(result)


def _explore_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.explore import ALIGN_CHOICES, HEAD_KINDS
    _mask_arguments(p, PRODUCTION.resolution, align=ALIGN_CHOICES, align_default="none")
    p.add_argument("--head", default="spatial", choices=list(HEAD_KINDS.values()))
    _tile_arguments(p)
    p.add_argument("--device", help=f"a device of the cost model (svgtpu costmodel --help); default "
                                    f"{PRODUCTION.device}, or the device a slice name in --chips gives")
    p.add_argument("--chips", default=str(PRODUCTION.chips),
                   help=f"chips sharing the work, or a Cloud TPU slice name such as {PRODUCTION.slice} (as svgtpu "
                        f"costmodel --chips); default {PRODUCTION.chips}")
    p.add_argument("--video", action="store_true", help="also model the whole video (end-to-end speedup)")
    p.add_argument("--repeats", type=positive_int, default=5, help="cached redraws to take the median of")


@command("explore", "the explorer's stats for one setting and its redraw time (cold and cached)", _explore_arguments)
def run_explore(args):
    from svgtpu import explore
    from svgtpu.costmodel.command import resolve_slice

    kept = args.kept if args.kept is not None or args.multiplier is not None else DEFAULT_KEPT
    device, chips = resolve_slice(args.chips, args.device)
    settings = explore.Settings(geometry=args.geometry, kept=kept, multiplier=args.multiplier, head=args.head,
                                block_q=args.block_q, block_kv=args.block_kv, align=args.align,
                                device=device, chips=chips)
    result = explore.summary(settings, repeats=args.repeats, video=args.video)
    return result, explore.format_summary(result)


# -- svgtpu profile-heads ---------------------------------------------------------------------

def _profile_heads_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.attention.svg import KERNELS
    from svgtpu.kernels.common import HEAD_DIMS
    _mask_arguments(p, "4x10x14")
    p.add_argument("--heads", type=positive_int, default=8, help="planted heads per seed (half temporal)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--head-dim", type=int, default=64, choices=HEAD_DIMS, help="the kernel's head sizes")
    p.add_argument("--contrast", type=float, default=8.0, help="logit gap of the planted pattern")
    p.add_argument("--rows", type=positive_int, default=DEFAULT_PROFILE_ROWS, help="query rows profiling samples")
    _tile_arguments(p, 128, 128)
    p.add_argument("--time", action="store_true",
                   help="also time profiling against one sparse attention call (interleaved medians)")
    p.add_argument("--rounds", type=positive_int, default=9, help="timing rounds with --time")
    p.add_argument("--kernel", choices=KERNELS, default="ours", help="attention kernel timed with --time")


@command("profile-heads", "check online head profiling on planted spatial/temporal heads",
         _profile_heads_arguments)
def run_profile_heads(args):
    from svgtpu.attention.profiling import format_planted, planted_report
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.bench.kernel_timing import bench_profiling, format_profiling

    config = SVGConfig(multiplier=args.multiplier, kept=args.kept, num_sampled_rows=args.rows,
                       block_q=args.block_q, block_kv=args.block_kv, align=args.align, kernel=args.kernel)
    timing = bench_profiling(args.geometry, config, heads=args.heads, head_dim=args.head_dim,
                             rounds=args.rounds) if args.time else None
    result = planted_report(args.geometry, config, args.seeds, heads=args.heads, head_dim=args.head_dim,
                            contrast=args.contrast)
    if timing is None:
        return result, format_planted(result)
    return {**result, "timing": timing}, format_planted(result) + "\n\n" + format_profiling(timing)


# -- svgtpu reproduce / svgtpu paper ---------------------------------------------------------

def _reproduce_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.report.reproduce import JOBS, NOTEBOOKS, PROFILES
    p.add_argument("--profile", default="cpu", choices=list(PROFILES),
                   help="sizes: quick (tests), cpu (make figures), tpu (real sizes on a TPU VM)")
    p.add_argument("--only", nargs="+", metavar="NOTEBOOK",
                   help=f"run only these notebooks, by number or name ({', '.join(n.split('_')[0] for n in NOTEBOOKS)})")
    p.add_argument("--figures-dir", help="where figures and results.json go (default: figures/)")
    p.add_argument("--jobs", type=int, help="notebooks run at once (default: "
                   + ", ".join(f"{n} for the {profile} profile" for profile, n in JOBS.items()) + ", else 1)")
    p.add_argument("--no-paper", action="store_true",
                   help="do not regenerate the paper's tables afterwards (never done with --figures-dir)")
    p.add_argument("--preflight", action="store_true",
                   help="run nothing: compile for v6e on this CPU (libtpu) what the profile's notebooks and "
                        "multi-host sampling will run, one host and several, and report what would fail")


@command("reproduce", "run the notebooks (papermill): every figure, results.json, the paper's tables",
         _reproduce_arguments)
def run_reproduce(args):
    if args.preflight:   # (result, table, 1 if anything would fail)
        from svgtpu.report.preflight import format_preflight, preflight
        result = preflight(args.profile, progress=not args.json)
        return result, format_preflight(result), 0 if result["passed"] else 1
    from svgtpu.report.reproduce import format_reproduce, reproduce_all
    result = reproduce_all(args.profile, args.only, figures_dir=args.figures_dir, paper=not args.no_paper,
                           jobs=args.jobs)
    if result["failed"]:  # print the summary, then exit non-zero naming the failed notebooks
        print(json.dumps(result, indent=2) if args.json else format_reproduce(result))
        print(f"svgtpu reproduce: {len(result['failed'])} notebook(s) failed: {', '.join(result['failed'])}",
              file=sys.stderr)
        raise SystemExit(1)
    return result, format_reproduce(result)


def _paper_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", help="results file (default: figures/results.json)")
    p.add_argument("files", nargs="*", help="files with svgtpu markers (default: paper/svgtpu.md and README.md)")


@command("paper", "regenerate the paper's tables and figure blocks from the results file", _paper_arguments)
def run_paper(args):
    from svgtpu.report.paper import generate

    report = generate(args.results, args.files or None)
    return {"files": report}, format_table(report)


# -- svgtpu train / generate / quality / methods (toy DiT) ------------------------------------

def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="toy", help="model size: toy (shipped) or tiny")
    p.add_argument("--steps", type=positive_int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=positive_int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--init", help="go on training from this checkpoint (fresh optimizer and schedule)")
    p.add_argument("--out", default=str(CHECKPOINT), help="checkpoint .npz (default: the shipped checkpoint of this "
                   "checkout, whatever the working directory); the loss curve goes next to it as <name>.loss.json")


@command("train", "train the toy video DiT (rectified flow) and save a checkpoint", _train_arguments)
def run_train(args):
    import shlex

    from svgtpu.toy.train import format_training, train_and_save

    command = "python -m svgtpu " + shlex.join(sys.argv[1:]) if sys.argv[0].endswith(("svgtpu", "__main__.py")) else None
    result = train_and_save(args.config, args.out, steps=args.steps, seed=args.seed, batch_size=args.batch_size,
                            lr=args.lr, warmup=args.warmup, init=args.init, command=command)
    return result, format_training(result)


def _sampling_arguments(p: argparse.ArgumentParser, kept_help: str) -> None:
    p.add_argument("--checkpoint", default=CHECKPOINT, help="toy DiT checkpoint (default: the shipped one, "
                   "checkpoints/toy_dit.npz of this checkout, from any working directory)")
    p.add_argument("--steps", type=positive_int, default=20, help="Euler denoising steps")
    p.add_argument("--guidance", type=float, default=3.0, help="classifier-free guidance scale")
    p.add_argument("--shift", type=float, default=1.0, help="timestep shift (1 = uniform)")
    p.add_argument("--kept", "--sparsity", dest="kept", type=float, help=kept_help)


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.attention.backends import ATTENTION_BACKENDS
    from svgtpu.masks.core import ALIGN_MODES
    from svgtpu.facts.paths import GENERATED_VIDEO
    from svgtpu.toy.data import LABEL_NAMES
    _sampling_arguments(p, f"SVG kept fraction in (0, 1), with --attention svg; default {DEFAULT_KEPT}")
    p.add_argument("--attention", choices=ATTENTION_BACKENDS, default="dense")
    p.add_argument("--align", choices=ALIGN_MODES, help="tile-align the SVG or SVG2 mask (--attention svg, svg2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--labels", nargs="+", metavar="LABEL",
                   help=f"labels, one video each, by name or index: {', '.join(LABEL_NAMES)} (the motion of every "
                        "shape; null: unconditional); default: every motion")
    p.add_argument("--out", default=str(GENERATED_VIDEO), help="animated GIF; the contact sheet goes next to it as "
                   ".png (default build/generate/video.gif of this checkout, ignored by git)")
    p.add_argument("--devices", type=positive_int, default=1,
                   help="shard sampling over this many devices (CFG pair x heads; on CPU, fake host devices); "
                        "with several processes, the devices of all of them")
    from svgtpu.launch import add_arguments
    add_arguments(p)   # --processes N, or one process of several


@command("generate", "sample videos from the toy DiT: an animated GIF and a contact-sheet PNG", _generate_arguments)
def run_generate(args):
    from svgtpu.launch import join, run_processes
    from svgtpu.toy.data import label_index
    from svgtpu.toy.sampler import check_generate, format_generate, generate

    labels = None if args.labels is None else [label_index(label) for label in args.labels]
    check_generate(args.attention, align=args.align, kept=args.kept, devices=args.devices, out=args.out)
    if args.processes > 1:   # N local processes, one global mesh; process 0's result
        result = run_processes(args)
        return result, format_generate(result)
    join(args)   # one process of several (jax.distributed), before any JAX computation
    result = generate(args.checkpoint, attention=args.attention, align=args.align, kept=args.kept, seed=args.seed,
                      steps=args.steps, guidance=args.guidance, shift=args.shift, labels=labels, out=args.out,
                      devices=args.devices)
    return result, format_generate(result)


def _quality_arguments(p: argparse.ArgumentParser) -> None:
    _sampling_arguments(p, f"SVG kept fraction in (0, 1); default {DEFAULT_KEPT}")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one video per seed (label seed %% 3)")
    p.add_argument("--block", type=positive_int, default=128, help="kernel tile size (block_q = block_kv)")
    p.add_argument("--variants", nargs="+", metavar="VARIANT",
                   help="the SVG variants to sample (default: all of svgtpu.toy.quality.VARIANTS; e.g. svg svg-aligned "
                        "svg-aligned-balanced: aligned vs unaligned at equal kept pairs)")
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

    if args.kept_fractions and not args.methods:
        raise BadInput("--kept-fractions needs --methods (the SVG study takes one --kept)")
    params, config = load_checkpoint(str(args.checkpoint))
    common = dict(seeds=args.seeds, num_steps=args.steps, guidance=args.guidance, shift=args.shift, block=args.block)
    if args.methods:
        from svgtpu.bench.methods import format_sweep, method_sweep
        result = method_sweep(params, config, variants=args.methods,
                              kept_fractions=args.kept_fractions or [args.kept or DEFAULT_KEPT], **common)
        return {**result, "checkpoint": str(args.checkpoint)}, format_sweep(result)
    from svgtpu.toy.quality import VARIANTS, format_study, quality_study
    unknown = [v for v in args.variants or () if v not in VARIANTS]
    if unknown:
        raise BadInput(f"--variants must be among {', '.join(VARIANTS)}, got {', '.join(unknown)}")
    variants = {v: VARIANTS[v] for v in args.variants} if args.variants else None
    result = quality_study(params, config, kept=args.kept, variants=variants, **common)
    return {**result, "checkpoint": str(args.checkpoint)}, format_study(result)


def _methods_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.bench.methods import COST_SETTING as COST, TOY_SETTING as TOY
    p.add_argument("--checkpoint", default=CHECKPOINT, help="toy DiT whose q, k SVG2 clusters (default: the shipped one)")
    p.add_argument("--geometry", help=f"preset or TxHxW (default: the checkpoint's; with --costs {COST['geometry']}); "
                                      "SVG2 rows need the checkpoint's geometry and are left out at any other")
    p.add_argument("--kept", "--sparsity", dest="kept", type=float, default=DEFAULT_KEPT,
                   help="kept fraction of (q, k) pairs every method is matched to")
    for flag, key, what in (("--block-q", "block_q", "kernel q tile"), ("--block-kv", "block_kv", "kernel kv tile"),
                            ("--q-clusters", "q_clusters", "SVG2 query clusters per head"),
                            ("--k-clusters", "k_clusters", "SVG2 key clusters per head")):
        p.add_argument(flag, type=positive_int, help=f"{what} (default {TOY[key]}; with --costs {COST[key]})")
    p.add_argument("--sta-tile", help="STA tile TxHxW in tokens (default {}; with --costs {})".format(
        *("x".join(map(str, setting["sta_tile"])) for setting in (TOY, COST))))
    p.add_argument("--svg2-assumed", action="store_true",
                   help="at a geometry other than the checkpoint's, SVG2 rows from assumed clusters (multinomial "
                        "sizes, random kept pairs) instead of none")
    p.add_argument("--costs", action="store_true",
                   help=f"add each method's modeled attention time, sparse / dense, of {COST['model']} on "
                        f"{COST['device']} (SVG2 from assumed clusters; no checkpoint needed)")
    p.add_argument("--seed", type=int, default=0, help="training video and noise seed of the captured q, k")
    p.add_argument("--t", type=float, default=0.5, help="flow time of the captured q, k (0 clean, 1 noise)")


@command("methods", "SVG, SVG2, STA and radial masks at a matched kept fraction: partial share, tile density "
                    f"(--costs: and modeled attention time at {PRODUCTION.resolution} on {PRODUCTION.device})", _methods_arguments)
def run_methods(args):
    from svgtpu.bench.methods import format_methods, methods_report
    from svgtpu.geometry import parse_sizes

    sta_tile = parse_sizes(args.sta_tile, 3, "--sta-tile (TxHxW)") if args.sta_tile is not None else None
    result = methods_report(args.checkpoint, args.kept, costs=args.costs, geometry=args.geometry,
                            block_q=args.block_q, block_kv=args.block_kv, sta_tile=sta_tile,
                            q_clusters=args.q_clusters, k_clusters=args.k_clusters,
                            svg2_assumed=args.svg2_assumed, seed=args.seed, t=args.t)
    return result, format_methods(result)


# -- svgtpu costmodel --------------------------------------------------------------------------

def _costmodel_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.costmodel import ATTENTION_KERNELS, DEVICES, MODEL_NAMES, PARTS, PRESETS, SLICE_COUNTS, WEIGHTS
    p.add_argument("--model", default=PRODUCTION.model, help=f"one of {', '.join(MODEL_NAMES)}")
    p.add_argument("--resolution", help=f"one of {', '.join(PRESETS)}, a preset or TxHxW "
                   f"(default {PRODUCTION.resolution}; the toy DiT's own grid for --model toy)")
    p.add_argument("--device", help=f"one of {', '.join(DEVICES)}, or cpu (rates measured now); default "
                   f"{PRODUCTION.device}, or the device a slice name in --chips gives")
    p.add_argument("--chips", default=str(PRODUCTION.chips),
                   help="chips sharing the work (a chip, not a TensorCore: v5p and v7x have two TensorCores per chip), "
                        "or a Cloud TPU slice name such as v6e-8 or v7x-8 (" + ", ".join(
                            f"{d}-N counts {c}" for d, c in SLICE_COUNTS.items()) + f"; v7x-8 is 4 chips); default "
                        f"{PRODUCTION.chips}")
    p.add_argument("--steps", type=positive_int, default=PRODUCTION.steps, help=f"denoising steps (default {PRODUCTION.steps})")
    p.add_argument("--cfg", action=argparse.BooleanOptionalAction, default=True,
                   help="classifier-free guidance: 2 transformer passes per step")
    p.add_argument("--cfg-split", action="store_true", help="run the two CFG passes at once on two halves of the slice")
    p.add_argument("--weights", choices=WEIGHTS, default="auto",
                   help="auto: shard (and all-gather) weights only when replicas do not fit in HBM")
    p.add_argument("--exclude", action="append", choices=PARTS, default=[],
                   help="leave a term out of the video's time (repeatable)")
    p.add_argument("--kernel", choices=ATTENTION_KERNELS, default="ours",
                   help="attention kernel of dense and SVG layers (flash: a GPU's FlashAttention)")
    p.add_argument("--dense-kernel", choices=ATTENTION_KERNELS, help="the dense reference's kernel (default: --kernel)")
    p.add_argument("--compiled-tiles", help="the compiled tile table pricing TPU attention (default "
                   "figures/compiled_tiles.json when it exists; none: priors)")
    p.add_argument("--sweep", choices=("resolution", "chips"),
                   help="resolution: the C2/C5 curve over 480p ... 2160p; chips: 8/16/32/64 chips, one slice or two over "
                        "the data-center network, the split picked per count (svgtpu.costmodel.multihost)")
    p.add_argument("--validate", action="store_true",
                   help="predicted vs published measured Wan generation times: independent points apart from those "
                        "sharing a calibration point's setting")
    p.add_argument("--policy", metavar="NAME|FILE.yml",
                   help="a MaxDiffusion SVG policy on v6e-8: maxdiffusion-conservative, maxdiffusion-moderate, "
                        "maxdiffusion-aggressive, or a MaxDiffusion YAML whose svg_* keys give it (keys it lacks: "
                        "base_wan_27b.yml's Wan 2.2 T2V, 720x1280, 81 frames, 40 steps)")
    p.add_argument("--sparse-evidence", action="store_true",
                   help="where the central sparse-layer efficiency comes from (the compiled schedule, SVG's extra work) "
                        "and what SVG's published GPU runs imply (a scenario)")
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


def _check_costmodel(args) -> None:
    """What the command would otherwise ignore or fail on deep inside, refused before any work: two modes at
    once (each mode runs alone), a ``--compiled-tiles`` file that is not there."""
    modes = [flag for flag, given in (("--validate", args.validate), ("--sparse-evidence", args.sparse_evidence),
                                      (f"--sweep {args.sweep}", args.sweep), (f"--policy {args.policy}", args.policy))
             if given]
    if len(modes) > 1:
        raise BadInput(f"give at most one of --validate, --sparse-evidence, --sweep or --policy (each is a mode of its "
                       f"own), got {' '.join(modes)}")
    path = args.compiled_tiles
    if path not in (None, "none") and not Path(path).is_file():
        raise BadInput(f"--compiled-tiles must be a compiled tile table file (notebook 04 writes "
                       f"figures/compiled_tiles.json) or none (priors), got {path}: no such file")


@command("costmodel", "modeled attention share, dense vs SVG time and speedup (C1, C2, C5); --validate", _costmodel_arguments)
def run_costmodel(args):
    from svgtpu.costmodel.command import costmodel_command

    _check_costmodel(args)
    if args.device == "cpu" and args.model == "toy" and not args.validate:
        from svgtpu.bench.cpu import toy_attention_share_measured_vs_modeled
        result = toy_attention_share_measured_vs_modeled()
        table = format_table([{k: result[k] for k in (
            "model", "L", "modeled_attention_share", "measured_attention_share",
            "modeled_forward_seconds", "measured_forward_seconds")}])
        return result, table + "\n(modeled: modeled-cpu with rates measured-cpu; measured: measured-cpu)"
    if args.device == "cpu" and not args.validate:
        from svgtpu.bench.cpu import calibrate_cpu
        return costmodel_command(args, device=calibrate_cpu())
    return costmodel_command(args)


# -- svgtpu bench kernels | ops | compiled | gpu ---------------------------------------------

def _bench_kernel_arguments(p: argparse.ArgumentParser) -> None:
    """What ``bench kernels`` and ``bench ops`` share: a small geometry and one kernel setting."""
    from svgtpu.kernels.common import HEAD_DIMS
    p.add_argument("--geometry", default="8x32x34", help="preset or TxHxW (default 8x32x34: F=1088, L=8704)")
    p.add_argument("--multiplier", type=float, default=1.0, help="SVG band multiplier")
    _tile_arguments(p, 512, 512)
    p.add_argument("--block-kv-compute", type=positive_int, default=None)
    p.add_argument("--head-dim", type=int, default=128, choices=HEAD_DIMS)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))


def _bench_kernels_arguments(p: argparse.ArgumentParser) -> None:
    _bench_kernel_arguments(p)
    p.add_argument("--heads", type=positive_int, default=2)
    p.add_argument("--rounds", type=positive_int, default=9, help="timing rounds")
    p.add_argument("--repeats", type=positive_int, default=3, help="calls per variant per round, fastest kept")
    p.add_argument("--seed", type=int, default=0)


def _bench_ops_arguments(p: argparse.ArgumentParser) -> None:
    _bench_kernel_arguments(p)
    p.add_argument("--compiled", action="store_true",
                   help="also the LLO instructions and static bundles libtpu emits per tile body for v6e "
                        "(compiled ahead of time; needs libtpu, about a minute per variant)")


def _kernel_setting(args) -> dict:
    return dict(block_q=args.block_q, block_kv=args.block_kv, block_kv_compute=args.block_kv_compute,
                head_dim=args.head_dim, dtype=args.dtype, multiplier=args.multiplier)


@command("bench kernels", "interleaved interpret-mode timings of the attention variants (ours, Splash, tokamax)",
         _bench_kernels_arguments)
def run_bench_kernels(args):
    from svgtpu.bench.kernel_timing import bench_kernels, format_kernels
    result = bench_kernels(args.geometry, heads=args.heads, rounds=args.rounds, repeats=args.repeats, seed=args.seed,
                           **_kernel_setting(args))
    return result, format_kernels(result)


@command("bench ops", "vector ops per tile kind in the kernel's jaxpr, and its tile plans", _bench_ops_arguments)
def run_bench_ops(args):
    from svgtpu.bench.kernel_timing import bench_ops, format_ops
    result = bench_ops(args.geometry, **_kernel_setting(args))
    if args.compiled:
        from svgtpu.compiler.llo import compiled_ops
        result["compiled"] = compiled_ops(args.geometry, progress=not args.json, **_kernel_setting(args))
    return result, format_ops(result)


def _bench_compiled_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.geometry import format_tile
    p.add_argument("--geometry", default=PRODUCTION.resolution, help="preset or TxHxW")
    tiles = f"{PRODUCTION.tiles},{format_tile(512, 512)}"
    p.add_argument("--tiles", default=tiles, help=f"comma-separated BLOCK_QxBLOCK_KV tile sizes (default {tiles})")
    p.add_argument("--device", default="v6e", choices=("v6e", "v7x"),
                   help="the TPU compiled for (v7x: one core of tpu7x:2x2x1)")
    p.add_argument("--sweep", action="store_true",
                   help="also sweep the libraries' block_kv_compute on the aligned mask (production tile)")


@command("bench compiled", "whole-kernel static cycles of ours, Splash and tokamax from the real compiler (v6e, v7x), "
         "each tile body unit by unit, every ratio next to the roofline",
         _bench_compiled_arguments)
def run_bench_compiled(args):
    from svgtpu.compiler.tile_table import bench_compiled_command
    return bench_compiled_command(args)


def _bench_gpu_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--smoke", action="store_true", help="the same run at tiny shapes, on any backend")
    p.add_argument("--out", help="write the results file here (figures/results-gpu.json for a GPU run)")
    p.add_argument("--budget", type=float, default=None, help="time budget of the run in seconds")


@command("bench gpu", "the prepared GPU run (svgtpu.bench.gpu; `make gpu-bench`)", _bench_gpu_arguments)
def run_bench_gpu(args):
    from svgtpu.bench import gpu as gpu_bench
    result = gpu_bench.run(smoke=args.smoke, budget_s=args.budget)
    if args.out:
        result["written"] = str(gpu_bench.write(result, args.out))
    return result, gpu_bench.format_result(result)


# -- svgtpu tune ------------------------------------------------------------------------------

def _tune_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.compiler.tune import ALIGNS, DEVICES, TUNED_FILE
    p.add_argument("--resolution", default="720p", help="preset (480p ... 2160p) or TxHxW (default 720p)")
    p.add_argument("--device", default="v6e", help=f"TPU generation: {', '.join(DEVICES)} (default v6e)")
    p.add_argument("--kept", type=float, default=DEFAULT_KEPT, help=f"SVG kept fraction in (0, 1) (default {DEFAULT_KEPT})")
    p.add_argument("--align", default="snap", help=f"tile alignment of the SVG band: {', '.join(ALIGNS)} (default snap; "
                                                   "balanced: every tile at about the band's pairs)")
    p.add_argument("--record", action="store_true",
                   help=f"write the winner into figures/{TUNED_FILE} (the tpu profile of svgtpu reproduce reads it)")


@command("tune", "our kernel's candidate tiles compiled for a TPU (no TPU needed), ranked by whole-kernel static "
         "cycles on the aligned SVG mask, HBM bytes per step beside them; the winner", _tune_arguments)
def run_tune(args):
    from svgtpu.compiler.tune import tune_command
    return tune_command(args)


# -- svgtpu compile ---------------------------------------------------------------------------

def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.compiler.compile import TARGETS
    from svgtpu.compiler.multihost import MULTIHOST_TARGETS
    from svgtpu.kernels.budget import TPU_GENERATIONS
    from svgtpu.kernels.common import HEAD_DIMS
    p.add_argument("--device", default="v6e", help=f"TPU generation: {', '.join(TPU_GENERATIONS)}")
    p.add_argument("--topology", default=None, help="topology name, e.g. v6e:2x2x1 or 2x2 (default: one host); a "
                   "multi-host one (4x4: 16 chips, 4 hosts) compiles the sharded targets and counts collectives")
    _mask_arguments(p, "720p")
    _tile_arguments(p)
    p.add_argument("--block-kv-compute", type=positive_int, default=None)
    p.add_argument("--no-fast-path", action="store_true", help="mask every tile (the C4 ablation)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    p.add_argument("--heads", type=positive_int, default=None,
                   help="heads per chip (default 5); for the sharded targets the model's heads (default 40)")
    p.add_argument("--head-dim", type=int, default=128, choices=HEAD_DIMS)
    p.add_argument("--what", default=None,
                   help=f"comma-separated targets from {', '.join(TARGETS + MULTIHOST_TARGETS)} (default "
                        f"kernel,svg-layer; on a multi-host topology {','.join(MULTIHOST_TARGETS)}); or wan-block: "
                        "one Wan 2.1 14B block on a v6e-8 / v7x slice, dense and SVG, static cycles by role")


@command("compile", "ahead-of-time compile kernel / SVG layer / DiT step for a TPU topology, no TPU "
         "needed (exit 1 if the compiler refuses)", _compile_arguments)
def run_compile(args):
    """``(result, table, exit status)``; 1 when anything was refused."""
    if args.what == "wan-block":
        from svgtpu.compiler.wan_block import wan_block_command
        return wan_block_command(args)
    from svgtpu.compiler.compile import CompileJob
    from svgtpu.compiler.multihost import compile_command
    from svgtpu.kernels import KernelConfig

    job = CompileJob(geometry=args.geometry, device=args.device, dtype=args.dtype, head_dim=args.head_dim,
                     kept=args.kept, multiplier=args.multiplier, align=args.align,
                     config=KernelConfig(args.block_q, args.block_kv, args.block_kv_compute,
                                         fast_path=not args.no_fast_path))
    result, table = compile_command(job, args.what, args.topology, heads=args.heads, progress=not args.json)
    return result, table, 0 if result["compiled"] else 1


# -- entry point ------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``svgtpu tiles: error: ...``) and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (--help lists the arguments)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="svgtpu", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups = {}
    for name, (help_text, arguments, _) in COMMANDS.items():
        group, _, leaf = name.rpartition(" ")
        if group and group not in groups:
            groups[group] = sub.add_parser(group, help=GROUPS[group], description=GROUPS[group]).add_subparsers(
                dest="subcommand", required=True, metavar="WHAT")
        # help is %-formatted (a percent sign is written %%), a description is printed as it is
        p = (groups[group] if group else sub).add_parser(leaf, help=help_text, description=help_text.replace("%%", "%"))
        p.set_defaults(command=name)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
        if arguments is not None:
            arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    from svgtpu.launch import fake_host_devices
    fake_host_devices(sys.argv[1:] if argv is None else argv)   # --devices N on a CPU
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)   # for a launcher that reruns the command
    _, _, run = COMMANDS[args.command]
    try:
        result, table, *status = run(args)  # a run may add an exit status (compile: 1 when refused)
    except BadInput as error:  # bad input: one line; anything else is a bug, with its traceback
        print(f"svgtpu {args.command}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else table)
    return status[0] if status else 0
