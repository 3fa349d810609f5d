"""``svgtpu costmodel``: the modeled attention share, dense vs SVG time and speedup."""

from __future__ import annotations

import argparse
import textwrap

from svgtpu.cli.common import command, density_note, flags_given, refuse_repeated
from svgtpu.errors import BadInput, positive_int
from svgtpu.facts.tables import FIT_WIDTH, format_table
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION
from svgtpu.recipes import DEFAULT_RECIPE


# -- svgtpu costmodel --------------------------------------------------------------------------

def _costmodel_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.costmodel import ATTENTION_KERNELS, DEVICES, MODEL_NAMES, PARTS, PRESETS, SLICE_COUNTS, WEIGHTS
    from svgtpu.costmodel.pipeline import DEFAULT_TEMPORAL_FRACTION
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
    p.add_argument("--dense-kernel", choices=ATTENTION_KERNELS, help="the check's dense kernel, shown beside the claim "
                   "(--kernel for dense and SVG layers); default: what a user runs on the device: splash on a TPU, "
                   "cudnn on a GPU with measured rates; a sweep uses it only when given")
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
    p.add_argument("--block-q", type=positive_int,
                   help="default: the production tile's on a TPU, the GPU kernels' 128 on a GPU with measured rates")
    p.add_argument("--block-kv", type=positive_int,
                   help="default: the production tile's on a TPU, 128 on a GPU with measured rates (not --block-q's)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--kept", "--sparsity", dest="kept", type=float,
                       help=f"SVG kept fraction (default {DEFAULT_KEPT}, recipe {DEFAULT_RECIPE.name})")
    group.add_argument("--multiplier", type=float, help="SVG band multiplier instead of --kept")
    p.add_argument("--temporal-fraction", type=float, default=DEFAULT_TEMPORAL_FRACTION,
                   help="share of heads run temporal")
    p.add_argument("--matmul-efficiency", type=float, help="default: the device family's (see --validate)")
    p.add_argument("--attention-efficiency", type=float, help="default: the device family's")
    p.add_argument("--memory-efficiency", type=float)
    p.add_argument("--vector-scale", type=float, help="multiplier on the derived VPU/EUP rates")
    p.add_argument("--mxu-width-penalty", action=argparse.BooleanOptionalAction, default=True,
                   help="head_dim below the MXU side idles part of it (v6e: 128 of 256)")


#: What the toy DiT's CPU measurement (``--model toy --device cpu``) and ``--policy`` read; any other flag given
#: with them would be ignored, so it is refused.
TOY_READS = {"model", "device", "json"}
POLICY_READS = {"policy", "compiled_tiles", "json"}


def _check_costmodel(args) -> None:
    """What the command would otherwise ignore or fail on deep inside, refused before any work: two modes at
    once (each mode runs alone), a ``--compiled-tiles`` that is no compiled tile table
    (:func:`svgtpu.inputs.environment.compiled_tiles`), a flag the toy DiT's CPU measurement (``--model toy
    --device cpu``: the toy's own grid, dense) or ``--policy`` (the policy's own setting) would ignore."""
    modes = [flag for flag, given in (("--validate", args.validate), ("--sparse-evidence", args.sparse_evidence),
                                      (f"--sweep {args.sweep}", args.sweep), (f"--policy {args.policy}", args.policy))
             if given]
    if len(modes) > 1:
        raise BadInput(f"give at most one of --validate, --sparse-evidence, --sweep or --policy (each is a mode of its "
                       f"own), got {' '.join(modes)}")
    refuse_repeated("--exclude", args.exclude)
    given = flags_given(args)
    if args.device == "cpu" and args.model == "toy" and not args.validate:
        ignored = [flag for dest, flag in given.items() if dest not in TOY_READS]
        if ignored:
            raise BadInput(f"--model toy --device cpu measures the toy DiT's dense forward on its own grid: it takes "
                           f"none of {', '.join(ignored)}")
    if args.policy:
        ignored = [flag for dest, flag in given.items() if dest not in POLICY_READS]
        if ignored:
            raise BadInput(f"--policy models MaxDiffusion's run on v6e-8 from the policy's own keys (video, steps, "
                           f"attention setting): it takes none of {', '.join(ignored)}")
    if args.compiled_tiles is not None:
        from svgtpu.inputs.environment import compiled_tiles
        compiled_tiles(args.compiled_tiles, "--compiled-tiles")


def build_setup(args, device=None):
    """The cost model's :class:`~svgtpu.costmodel.Setup` the arguments describe, made once here at the edge
    (``device``: a measured :class:`~svgtpu.costmodel.DeviceSpec`, e.g. this CPU's, instead of ``--device``)."""
    import dataclasses

    from svgtpu import costmodel as cm
    from svgtpu.costmodel.command import compiled_table, resolve_slice
    from svgtpu.costmodel.validate import gpu_tile, setting_setup, user_dense_kernel
    from svgtpu.setting import Setting
    compiled = compiled_table(args.compiled_tiles)
    if device is None:
        name, chips = resolve_slice(args.chips, args.device)
        device = cm.get_device(name, compiled if compiled != cm.AUTO else cm.default_compiled())
    elif str(args.chips).isdigit():
        chips = int(args.chips)
    else:
        raise BadInput(f"--chips must be a chip count with a measured device, got {args.chips!r}")
    if not args.mxu_width_penalty:
        device = dataclasses.replace(device, matmul_tile=None)
    if args.resolution is None and args.model == "toy":
        from svgtpu.toy.dit import DiTConfig   # the toy's own grid (imports JAX)
        geometry = DiTConfig().geometry
    else:
        geometry = cm.get_geometry(args.resolution or PRODUCTION.resolution, "--resolution")
    tile = {k: v for k, v in (("block_q", args.block_q), ("block_kv", args.block_kv)) if v is not None}
    if gpu_tile(device):   # a GPU with measured rates: its kernels' own tile unless given
        tile = {"block_q": gpu_tile(device), "block_kv": gpu_tile(device), **tile}
    # the one Setting of this command, resolved here and passed down (names: the grid and device resolved above)
    setting = Setting(model=args.model, resolution=geometry.name or str(geometry), device=device.name, chips=chips,
                      steps=args.steps, cfg=args.cfg, kept=args.kept, multiplier=args.multiplier, **tile)
    # absolute times: the dense kernel a user runs on this device unless --dense-kernel says otherwise
    dense_kernel = args.dense_kernel or user_dense_kernel(device)
    setup = setting_setup(setting, geometry=geometry, device=device, compiled=compiled,
                          temporal_fraction=args.temporal_fraction, cfg_split=args.cfg_split, weights=args.weights,
                          kernel=args.kernel, dense_kernel=dense_kernel, sparse_efficiency=args.sparse_efficiency,
                          parts=frozenset(cm.PARTS) - set(args.exclude))
    overrides = {k: v for k, v in (("matmul", args.matmul_efficiency), ("attention", args.attention_efficiency),
                                   ("memory", args.memory_efficiency), ("vector_scale", args.vector_scale))
                 if v is not None}
    return dataclasses.replace(setup, efficiency=dataclasses.replace(setup.efficiency, **overrides)) if overrides \
        else setup


def costmodel_command(args, device=None) -> tuple[dict, str]:
    """``svgtpu costmodel``: the mode the arguments ask for (``device``: a measured spec for ``--device cpu``)."""
    from svgtpu.costmodel.command import (compiled_table, model_command, policy_command, sparse_evidence_command,
                                          sweep_command, validate_command)
    if getattr(args, "policy", None):
        return policy_command(args.policy, compiled_table(args.compiled_tiles))
    if args.validate:
        return validate_command(compiled_table(args.compiled_tiles))
    setup = build_setup(args, device)
    if args.sparse_evidence:
        return sparse_evidence_command(setup)
    if args.sweep:
        from svgtpu.costmodel.claim_values import side_setups   # one kernel on both sides unless --dense-kernel
        return sweep_command(args.sweep, args.resolution, setup if args.dense_kernel else side_setups(setup)["claim"])
    return model_command(setup)


@command("costmodel", "modeled attention share, dense vs SVG time and speedup (C1, C2, C5); --validate", _costmodel_arguments)
def run_costmodel(args):
    _check_costmodel(args)
    if args.device == "cpu" and args.model == "toy" and not args.validate:
        from svgtpu.bench.cpu import toy_attention_share_measured_vs_modeled
        result = toy_attention_share_measured_vs_modeled()
        table = format_table([{"model": result["model"], "L": result["L"],
                               "share modeled": result["modeled_attention_share"],
                               "share measured": result["measured_attention_share"],
                               "forward s modeled": result["modeled_forward_seconds"],
                               "forward s measured": result["measured_forward_seconds"]}])
        note = ("(share: self-attention's share of the toy DiT's forward pass; modeled: modeled-cpu with rates "
                "measured-cpu; measured: measured-cpu)")
        return result, table + "\n" + textwrap.fill(note, FIT_WIDTH, subsequent_indent="  ")
    if args.device == "cpu" and not args.validate:
        from svgtpu.bench.cpu import calibrate_cpu
        return costmodel_command(args, device=calibrate_cpu())
    result, table = costmodel_command(args)
    if "geometry" in result and "kept" in result:   # one setup (not --validate, --sweep, --policy)
        from svgtpu.geometry import VideoGeometry
        g = result["geometry"]
        note = density_note(result["kept"], VideoGeometry(g["T"], g["H"], g["W"]))
        table += f"\n{note}" if note else ""
    return result, table
