"""``svgtpu tiles``, ``c3-search``, ``align-pairs``, ``recipes``, ``explore``, ``profile-heads``: masks, tiles and heads."""

from __future__ import annotations

import argparse

from svgtpu.cli.common import command, density_note, mask_arguments, refuse_repeated, tile_arguments
from svgtpu.errors import BadInput, positive_int, seed_int
from svgtpu.facts.claims import REPORTED
from svgtpu.setting import PRODUCTION, SMALL_TILE, Setting
from svgtpu.warmup import DEFAULT_PROFILE_ROWS


# -- svgtpu tiles / c3-search / recipes / explore ---------------------------------------------

def _tiles_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.masks.core import MASK_KINDS
    p.add_argument("--mask", default="spatial", help=f"one of {', '.join(MASK_KINDS)}")
    group = mask_arguments(p, PRODUCTION.resolution)
    group.add_argument("--recipe", help="the kept fraction of a named recipe (svgtpu recipes)")
    tile_arguments(p)


@command("tiles", "classify the tiles of an SVG mask (C3); any tile is counted, and one our kernel would refuse "
                  "is named", _tiles_arguments)
def run_tiles(args):
    from svgtpu.geometry import Tile, get_geometry
    from svgtpu.kernels.config import check_blocks_cover, tile_refusal
    from svgtpu.masks.tiles import format_tile_report, tile_report

    check_blocks_cover(args.block_q, args.block_kv, get_geometry(args.geometry).L)
    result = tile_report(args.geometry, args.mask, multiplier=args.multiplier, kept=args.kept, recipe=args.recipe,
                         tile=Tile(args.block_q, args.block_kv), align_mode=args.align)
    result["kernel_refusal"] = tile_refusal(args.block_q, args.block_kv)   # counted all the same
    note = density_note(result["kept"], get_geometry(args.geometry)) if result["window"] is not None else ""
    return result, format_tile_report(result) + (f"\n{note}" if note else "")


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
    p.add_argument("--kept", nargs="+", type=float, default=list(KEPT), help="SVG kept fractions (our band rule)")
    p.add_argument("--densities", nargs="+", type=float, default=list(MAXDIFFUSION_SVG_DENSITIES),
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
    mask_arguments(p, PRODUCTION.resolution, align=ALIGN_CHOICES, align_default="none")
    p.add_argument("--head", default="spatial", choices=list(HEAD_KINDS.values()))
    tile_arguments(p)
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

    device, chips = resolve_slice(args.chips, args.device)
    setting = Setting(resolution=args.geometry, kept=args.kept, multiplier=args.multiplier, block_q=args.block_q,
                      block_kv=args.block_kv, device=device, chips=chips)   # the one Setting, resolved here
    settings = explore.Settings(setting, head=args.head, align=args.align)
    result = explore.summary(settings, repeats=args.repeats, video=args.video)
    from svgtpu.geometry import get_geometry
    note = density_note(setting.kept, get_geometry(args.geometry))
    return result, explore.format_summary(result) + (f"\n{note}" if note else "")


# -- svgtpu profile-heads ---------------------------------------------------------------------

#: The largest grid ``profile-heads`` plants heads on (tokens): it makes every planted head's q, k and v whole on the
#: host and profiles them row by row, a check of the method on small grids (1440p, 302,400 tokens, sat silent 90 s).
PLANTED_MAX_TOKENS = 2**15

def _profile_heads_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.attention.svg import KERNELS
    from svgtpu.kernels.common import HEAD_DIMS
    mask_arguments(p, "4x10x14")
    p.add_argument("--heads", type=positive_int, default=8, help="planted heads per seed (half temporal)")
    p.add_argument("--seeds", type=seed_int, nargs="+", default=[0, 1, 2], help="planted-head seeds, each once")
    p.add_argument("--head-dim", type=int, default=64, choices=HEAD_DIMS, help="the kernel's head sizes")
    p.add_argument("--contrast", type=float, default=8.0, help="logit gap of the planted pattern")
    p.add_argument("--rows", type=positive_int, default=DEFAULT_PROFILE_ROWS, help="query rows profiling samples")
    tile_arguments(p, SMALL_TILE.block_q, SMALL_TILE.block_kv)   # SVGConfig's, the toy's tile
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

    from svgtpu.geometry import get_geometry
    refuse_repeated("--seeds", args.seeds)
    L = get_geometry(args.geometry, "--geometry").L
    if L > PLANTED_MAX_TOKENS:
        raise BadInput(f"--geometry {args.geometry} has {L:,} tokens: profile-heads plants its heads on a small grid, "
                       f"at most {PLANTED_MAX_TOKENS:,} tokens (default 4x10x14: 560; the planted q, k and v are made "
                       "whole on the host, then profiled row by row); a production grid's mask is svgtpu explore's")
    config = SVGConfig(multiplier=args.multiplier, kept=args.kept, num_sampled_rows=args.rows,
                       block_q=args.block_q, block_kv=args.block_kv, align=args.align, kernel=args.kernel)
    timing = bench_profiling(args.geometry, config, heads=args.heads, head_dim=args.head_dim,
                             rounds=args.rounds) if args.time else None
    result = planted_report(args.geometry, config, args.seeds, heads=args.heads, head_dim=args.head_dim,
                            contrast=args.contrast)
    if timing is None:
        return result, format_planted(result)
    return {**result, "timing": timing}, format_planted(result) + "\n\n" + format_profiling(timing)
