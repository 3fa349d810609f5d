"""``svgtpu train``, ``generate``, ``quality``, ``methods``: the toy video DiT."""

from __future__ import annotations

import argparse
import sys

from svgtpu.cli.common import command, refuse_repeated
from svgtpu.errors import BadInput, positive_int, seed_int
from svgtpu.facts.paths import CHECKPOINT, REPO_ROOT, TRAINED_CHECKPOINT
from svgtpu.geometry import Tile
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION, SMALL_TILE, mask_density


# -- svgtpu train / generate / quality / methods (toy DiT) ------------------------------------

def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="toy", help="model size: toy (shipped) or tiny")
    p.add_argument("--steps", type=positive_int, default=600)
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--batch-size", type=positive_int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--init", help="go on training from this checkpoint (fresh optimizer and schedule)")
    default = TRAINED_CHECKPOINT.relative_to(REPO_ROOT)
    p.add_argument("--out", help=f"checkpoint .npz, a new file (default {default.with_name(default.stem)}-<UTC date and "
                   "time>.npz of this checkout, ignored by git); the loss curve goes next to it as <name>.loss.json")
    p.add_argument("--force", action="store_true", help=f"allow --out to overwrite a file that exists (the shipped "
                   f"checkpoint, {CHECKPOINT.relative_to(REPO_ROOT)}, included)")


@command("train", "train the toy video DiT (rectified flow) and save a checkpoint", _train_arguments)
def run_train(args):
    import shlex

    from svgtpu.toy.train import format_training, train_and_save

    command = "python -m svgtpu " + shlex.join(sys.argv[1:]) if sys.argv[0].endswith(("svgtpu", "__main__.py")) else None
    result = train_and_save(args.config, args.out, steps=args.steps, seed=args.seed, batch_size=args.batch_size,
                            lr=args.lr, warmup=args.warmup, init=args.init, command=command,
                            force=args.force)
    return result, format_training(result)


def _sampling_arguments(p: argparse.ArgumentParser, kept_help: str) -> None:
    from svgtpu.toy.sampler import MAX_STEPS
    p.add_argument("--checkpoint", default=CHECKPOINT, help="toy DiT checkpoint (default: the shipped one, "
                   "checkpoints/toy_dit.npz of this checkout, from any working directory)")
    p.add_argument("--steps", type=positive_int, default=20, help=f"Euler denoising steps (at most {MAX_STEPS})")
    p.add_argument("--guidance", type=float, default=3.0, help="classifier-free guidance scale")
    p.add_argument("--shift", type=float, default=1.0, help="timestep shift (1 = uniform)")
    p.add_argument("--kept", "--sparsity", dest="kept", type=float, help=kept_help)


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.attention.backends import ATTENTION_BACKENDS
    from svgtpu.masks.core import ALIGN_MODES
    from svgtpu.toy.data import LABEL_NAMES
    _sampling_arguments(p, f"SVG kept fraction in (0, 1), with --attention svg; default {DEFAULT_KEPT}")
    p.add_argument("--attention", choices=ATTENTION_BACKENDS, default="dense")
    p.add_argument("--align", choices=ALIGN_MODES, help="tile-align the SVG or SVG2 mask (--attention svg, svg2)")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--labels", nargs="+", metavar="LABEL",
                   help=f"labels, one video each, by name or index: {', '.join(LABEL_NAMES)} (the motion of every "
                        "shape; null: unconditional); default: every motion")
    p.add_argument("--out", help="animated GIF, a new file; the contact sheet goes next to it as .png (default "
                   "build/generate/video-<UTC date and time>.gif of this checkout, ignored by git)")
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
    if args.out is None:   # a fresh dated path, never an earlier run's video
        from svgtpu.facts.outputs import dated_path
        from svgtpu.facts.paths import GENERATED_VIDEO
        args.out = str(dated_path(GENERATED_VIDEO))
    check_generate(args.attention, align=args.align, kept=args.kept, devices=args.devices, out=args.out,
                   steps=args.steps)
    if args.processes > 1:   # N local processes, one global mesh; process 0's result
        result = run_processes(args.argv, args.processes, args.devices, args.timeout, distributed=args.distributed,
                               coordinator=args.coordinator)
        return result, format_generate(result)
    join(args.distributed, args.coordinator, args.num_processes, args.process_id)   # one process of several (jax.distributed), before any JAX computation
    result = generate(args.checkpoint, attention=args.attention, align=args.align, kept=args.kept, seed=args.seed,
                      steps=args.steps, guidance=args.guidance, shift=args.shift, labels=labels, out=args.out,
                      devices=args.devices)
    return result, format_generate(result)


def _quality_arguments(p: argparse.ArgumentParser) -> None:
    _sampling_arguments(p, f"SVG kept fraction in (0, 1); default {DEFAULT_KEPT}")
    p.add_argument("--seeds", type=seed_int, nargs="+", default=[0, 1, 2], help="one video per seed (label seed %% 3)")
    p.add_argument("--block", type=positive_int, default=SMALL_TILE.block_q, help="kernel tile size (block_q = block_kv)")
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
    from svgtpu.toy.sampler import check_steps

    if args.kept_fractions and not args.methods:
        raise BadInput("--kept-fractions needs --methods (the SVG study takes one --kept)")
    if args.variants and args.methods:
        raise BadInput("give --variants (the SVG study) or --methods (every sparse method), not both: --methods "
                       "leaves the variants out")
    check_steps(args.steps, "--steps")
    refuse_repeated("--seeds", args.seeds)
    params, config = load_checkpoint(str(args.checkpoint))
    common = dict(seeds=args.seeds, num_steps=args.steps, guidance=args.guidance, shift=args.shift,
                  tile=Tile(args.block, args.block))   # the toy's square tile
    if args.methods:
        from svgtpu.bench.methods import format_sweep, method_sweep
        result = method_sweep(params, config, variants=args.methods,
                              kept_fractions=args.kept_fractions or [mask_density(args.kept, None)[0]], **common)
        return {**result, "checkpoint": str(args.checkpoint)}, format_sweep(result)
    from svgtpu.toy.quality import VARIANTS, format_study, quality_study
    unknown = [v for v in args.variants or () if v not in VARIANTS]
    if unknown:
        raise BadInput(f"--variants must be among {', '.join(VARIANTS)}, got {', '.join(unknown)}")
    variants = {v: VARIANTS[v] for v in args.variants} if args.variants else None
    result = quality_study(params, config, kept=args.kept, variants=variants, **common)
    return {**result, "checkpoint": str(args.checkpoint)}, format_study(result)


def _methods_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.bench.methods import CAPTURE_T, COST_SETTING as COST, TOY_SETTING as TOY
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
    p.add_argument("--seed", type=seed_int, default=0, help="training video and noise seed of the captured q, k")
    p.add_argument("--t", type=float, default=CAPTURE_T, help="flow time of the captured q, k (0 clean, 1 noise)")


@command("methods", "SVG, SVG2, STA and radial masks at a matched kept fraction: partial share, tile density "
                    f"(--costs: and modeled attention time at {PRODUCTION.resolution} on {PRODUCTION.device})", _methods_arguments)
def run_methods(args):
    from svgtpu.bench.methods import COST_SETTING, TOY_SETTING, Tiles, format_methods, methods_report
    from svgtpu.geometry import parse_sizes

    sta_tile = parse_sizes(args.sta_tile, 3, "--sta-tile (TxHxW)") if args.sta_tile is not None else None
    defaults = COST_SETTING if args.costs else TOY_SETTING   # the tile's default, applied here at the edge
    tiles = Tiles(args.block_q or defaults["block_q"], args.block_kv or defaults["block_kv"])
    result = methods_report(args.checkpoint, args.kept, tiles=tiles, costs=args.costs, geometry=args.geometry,
                            sta_tile=sta_tile,
                            q_clusters=args.q_clusters, k_clusters=args.k_clusters,
                            svg2_assumed=args.svg2_assumed, seed=args.seed, t=args.t)
    return result, format_methods(result)
