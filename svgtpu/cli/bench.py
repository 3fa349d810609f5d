"""``svgtpu bench kernels | ops | compiled | gpu``: the attention kernel benchmarks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from svgtpu.cli.common import command, flags_given, refuse_repeated, tile_arguments
from svgtpu.errors import BadInput, positive_int, seed_int
from svgtpu.recipes import MAXDIFFUSION_DEFAULT_TILE
from svgtpu.setting import PRODUCTION


# -- svgtpu bench kernels | ops | compiled | gpu ---------------------------------------------

def _bench_kernel_arguments(p: argparse.ArgumentParser) -> None:
    """What ``bench kernels`` and ``bench ops`` share: a small geometry and one kernel setting (by default
    MaxDiffusion's default Wan tile, :data:`svgtpu.recipes.MAXDIFFUSION_DEFAULT_TILE`)."""
    from svgtpu.kernels.common import HEAD_DIMS
    p.add_argument("--geometry", default="8x32x34", help="preset or TxHxW (default 8x32x34: F=1088, L=8704)")
    p.add_argument("--multiplier", type=float, default=1.0, help="SVG band multiplier")
    tile_arguments(p, MAXDIFFUSION_DEFAULT_TILE.block_q, MAXDIFFUSION_DEFAULT_TILE.block_kv)
    p.add_argument("--block-kv-compute", type=positive_int, default=None)
    p.add_argument("--head-dim", type=int, default=128, choices=HEAD_DIMS)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))


def _bench_kernels_arguments(p: argparse.ArgumentParser) -> None:
    _bench_kernel_arguments(p)
    p.add_argument("--heads", type=positive_int, default=2)
    p.add_argument("--rounds", type=positive_int, default=9, help="timing rounds")
    p.add_argument("--repeats", type=positive_int, default=3, help="calls per variant per round, fastest kept")
    p.add_argument("--seed", type=seed_int, default=0)


def _bench_ops_arguments(p: argparse.ArgumentParser) -> None:
    _bench_kernel_arguments(p)
    p.add_argument("--compiled", action="store_true",
                   help="also the LLO instructions and static bundles libtpu emits per tile body for v6e "
                        "(compiled ahead of time; needs libtpu, about a minute per variant)")


def _kernel_setting(args) -> dict:
    """The kernel setting of ``bench kernels`` and ``bench ops``, its tile one :class:`KernelConfig` (one clear line
    on a bad tile) checked against the geometry first (as ``explore`` and ``compile`` check it): a tile larger
    than the padded sequence is refused before any work."""
    from svgtpu.geometry import get_geometry
    from svgtpu.kernels.config import KernelConfig, check_blocks_cover
    check_blocks_cover(args.block_q, args.block_kv, get_geometry(args.geometry, "--geometry").L)
    tile = KernelConfig(args.block_q, args.block_kv, args.block_kv_compute)
    return dict(tile=tile, head_dim=args.head_dim, dtype=args.dtype, multiplier=args.multiplier)


@command("bench kernels", "interleaved interpret-mode timings of the attention variants (ours, Splash, tokamax)",
         _bench_kernels_arguments)
def run_bench_kernels(args):
    from svgtpu.bench.kernel_timing import bench_kernels, format_kernels
    setting = _kernel_setting(args)
    result = bench_kernels(args.geometry, heads=args.heads, rounds=args.rounds, repeats=args.repeats, seed=args.seed,
                           **setting)
    return result, format_kernels(result)


@command("bench ops", "vector ops per tile kind in the kernel's jaxpr, and its tile plans", _bench_ops_arguments)
def run_bench_ops(args):
    from svgtpu.bench.kernel_timing import bench_ops, format_ops
    setting = _kernel_setting(args)
    result = bench_ops(args.geometry, **setting)
    if args.compiled:
        from svgtpu.compiler.llo import compiled_ops
        tile = setting.pop("tile")   # the compiler's entry point takes the tile's sides
        result["compiled"] = compiled_ops(args.geometry, progress=not args.json, block_q=tile.block_q,
                                          block_kv=tile.block_kv, block_kv_compute=args.block_kv_compute, **setting)
    return result, format_ops(result)


def _bench_compiled_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.geometry import format_tile
    p.add_argument("--geometry", default=PRODUCTION.resolution, help="preset or TxHxW")
    # the tiles the compiled tile table compiles (svgtpu.compiler.tile_table.TILES): production, MaxDiffusion default
    tiles = f"{PRODUCTION.tiles},{format_tile(MAXDIFFUSION_DEFAULT_TILE.tile)}"
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
    from svgtpu.geometry import parse_tiles
    return bench_compiled_command(args.geometry or PRODUCTION.resolution, parse_tiles(args.tiles, "--tiles"),
                                  args.device, sweep=args.sweep, progress=not args.json)


def _bench_gpu_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--smoke", action="store_true", help="the same run at tiny shapes, on any backend")
    p.add_argument("--out", help="the new run file (default: figures/gpu-runs/<date>-<commit>.json on a GPU, none "
                                 "with --smoke); an existing file is refused before any work")
    p.add_argument("--budget", type=float, default=None, help="time budget of the run in seconds")
    p.add_argument("--resume", metavar="RUN", help="finish a run cut short: run only the sections RUN (a run file, "
                                                   "its .partial.json, or 'latest': the newest in the default folder) "
                                                   "lacks or did not time in full, into a new run file with RUN's")
    p.add_argument("--sections", default=None,
                   help="comma-separated sections to run: check, attention, block (default all; the float64 check "
                        "always runs first: nothing unchecked is timed)")
    p.add_argument("--resolution", default=None,
                   help="comma-separated resolutions of the attention and block sections (e.g. 720p; default all)")
    p.add_argument("--variants", default=None,
                   help="comma-separated attention variants to check and time, or 'all' (default: cuDNN dense, ours "
                        "and FlexAttention dense, on the SVG mask and on the tile-aligned one; a wrong name lists "
                        "them all)")
    p.add_argument("--preflight", action="store_true",
                   help="no run: lower our Mosaic GPU variants of the run for CUDA at their timed sizes, on any "
                        "machine (a table of what lowered; the GPU compiler's own passes run only on a GPU)")
    p.add_argument("--watchdog", type=float, default=None,
                   help="seconds after the command started at which a run still going is saved as far as it got "
                        "and ended (exit 3; default the budget plus 60 s on a GPU: 260 s, none with --smoke)")


@command("bench gpu", "the prepared GPU run (svgtpu.bench.gpu; `make gpu-bench`)", _bench_gpu_arguments)
def run_bench_gpu(args):
    import datetime
    import time
    started = time.monotonic()   # the watchdog counts from here: the imports below are part of the five minutes

    from svgtpu.bench import gpu as gpu_bench
    from svgtpu.bench import gpu_results
    split = lambda text: None if text is None else [x.strip() for x in text.split(",") if x.strip()]  # noqa: E731
    sections = refuse_repeated("--sections", split(args.sections))
    resolutions = refuse_repeated("--resolution", split(args.resolution))
    variants = refuse_repeated("--variants", split(args.variants))
    sizes = gpu_bench.select(gpu_bench.SMOKE if args.smoke else gpu_bench.FULL, sections, resolutions, variants)
    if args.preflight:
        from svgtpu.facts.tables import format_table
        rows = gpu_bench.preflight(sizes)
        return rows, ("Our Mosaic GPU variants lowered for CUDA at the timed sizes (ptxas runs on a GPU only)\n"
                      + format_table(rows))
    if args.watchdog is not None and not args.watchdog > 0:
        raise BadInput(f"watchdog must be a positive number of seconds, got {args.watchdog!r}")
    out = gpu_results.check_out(args.out) if args.out else None
    if out is None and not args.smoke:   # this call's own run file, named before the work
        today = datetime.datetime.now(datetime.timezone.utc).isoformat()
        out = gpu_results.run_path(today, gpu_results.source_commit()["commit"])
        out.parent.mkdir(parents=True, exist_ok=True)
    command_line = " ".join(["svgtpu bench gpu", *sys.argv[3:]]) if sys.argv[1:3] == ["bench", "gpu"] else None
    save = None if out is None else (lambda result: gpu_bench.write(result | {"command": command_line}, out))
    watchdog = args.watchdog if args.watchdog is not None or args.smoke else \
        (args.budget or gpu_bench.FULL.budget_s) + WATCHDOG_MARGIN_S
    result = gpu_bench.run(smoke=args.smoke, budget_s=args.budget, sections=sections, resolutions=resolutions,
                           variants=variants, watchdog_s=watchdog, save=save, started=started)
    result["command"] = command_line
    if out is not None:
        result["written"] = str(gpu_bench.write(result, out))
    return result, gpu_bench.format_result(result)


#: How long past its budget a GPU run may go before its watchdog saves it and ends it (start-up, a compile and a round
#: can overrun the budget; a hung kernel never returns): the default budget (200 s) plus this ends at 260 s after the
#: command started, within a five-minute slot with the saving and the interpreter's start (``make gpu-bench``'s
#: ``timeout`` at 295 s is behind it).
WATCHDOG_MARGIN_S = 60.0


def _bench_tpu_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.bench.tpu import SECTIONS
    p.add_argument("--smoke", action="store_true", help="the same run at tiny shapes, in interpret mode on CPU")
    p.add_argument("--out", help="the run file (default figures/tpu-runs/<date>-<commit>.json; with --preflight the "
                                 "record, default figures/preflight/<date>-<commit>.json); never overwritten")
    p.add_argument("--sections", nargs="+", default=list(SECTIONS), metavar="SECTION",
                   help=f"sections to run, of {', '.join(SECTIONS)} (default: all)")
    p.add_argument("--budget", type=float, default=None, help="time budget of the run in seconds")
    p.add_argument("--resume", metavar="RUN", help="finish a run cut short: run only the sections RUN (a run file, "
                                                   "its .partial.json, or 'latest': the newest in the default folder) "
                                                   "lacks or did not time in full, into a new run file with RUN's")
    p.add_argument("--preflight", action="store_true",
                   help="run nothing: compile every program of the real run for v6e on this CPU (libtpu) and "
                        "record it (figures/preflight/)")


@command("bench tpu", "the prepared TPU run on a v6e VM (svgtpu.bench.tpu; `make tpu-bench`)", _bench_tpu_arguments)
def run_bench_tpu(args):
    refuse_repeated("--sections", args.sections)
    ignored = [flag for dest, flag in flags_given(args).items() if dest not in ("preflight", "out", "json")]
    if args.preflight and ignored:   # --resume, --smoke, --sections, --budget: it runs nothing
        raise BadInput(f"--preflight compiles every program of the full run and runs nothing: it takes none of "
                       f"{', '.join(ignored)}")
    if args.preflight:   # (result, table, 1 if anything would fail)
        from svgtpu.report.preflight import bench_preflight, format_preflight
        result = bench_preflight(args.out, progress=not args.json)
        return result, format_preflight(result) + f"\nrecord: {result['written']}", 0 if result["passed"] else 1
    from svgtpu.bench import tpu as tpu_bench
    if args.resume and args.out and Path(args.out).resolve() == Path(args.resume).resolve():
        raise BadInput(f"--out {args.out} is the run --resume finishes; the finished run is a new file")
    result = tpu_bench.run(smoke=args.smoke, sections=args.sections, out=args.out, budget_s=args.budget,
                           resume=args.resume)
    return result, tpu_bench.format_result(result), 0 if result["all_ok"] else 1
