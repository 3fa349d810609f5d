"""``svgtpu tune`` and ``svgtpu compile``: ahead-of-time compiles for a TPU, no TPU needed."""

from __future__ import annotations

import argparse
import dataclasses

from svgtpu.cli.common import command, mask_arguments, tile_arguments
from svgtpu.errors import positive_int
from svgtpu.setting import DEFAULT_KEPT


def _compile_default(field: str):
    """A :class:`~svgtpu.compiler.compile.CompileJob` field's default: what a compile is when nothing is said,
    defined there once (the geometry, the device, the head size)."""
    from svgtpu.compiler.compile import CompileJob
    return next(f.default for f in dataclasses.fields(CompileJob) if f.name == field)


# -- svgtpu tune ------------------------------------------------------------------------------

def _tune_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.compiler.tune import ALIGNS, DEVICES, TUNED_FILE
    resolution, device = _compile_default("geometry"), _compile_default("device")
    p.add_argument("--resolution", default=resolution, help=f"preset (480p ... 2160p) or TxHxW (default {resolution})")
    p.add_argument("--device", default=device, help=f"TPU generation: {', '.join(DEVICES)} (default {device})")
    p.add_argument("--kept", type=float, default=DEFAULT_KEPT, help=f"SVG kept fraction in (0, 1) (default {DEFAULT_KEPT})")
    p.add_argument("--align", default="snap", help=f"tile alignment of the SVG band: {', '.join(ALIGNS)} (default snap; "
                                                   "balanced: every tile at about the band's pairs)")
    p.add_argument("--record", action="store_true",
                   help=f"write the winner into figures/{TUNED_FILE} (the tpu profile of svgtpu reproduce reads it)")


@command("tune", "our kernel's candidate tiles compiled for a TPU (no TPU needed), ranked by whole-kernel static "
         "cycles on the aligned SVG mask, HBM bytes per step beside them; the winner", _tune_arguments)
def run_tune(args):
    from svgtpu.compiler.tune import tune_command
    return tune_command(args.resolution, args.device, args.kept, args.align, record_winner=args.record,
                        progress=not args.json)


# -- svgtpu compile ---------------------------------------------------------------------------

def _vae_decode(resolution: str, device: str) -> tuple[dict, str, int]:
    """``svgtpu compile --what vae-decode``: Wan 2.1's VAE decoder at ``resolution`` on one chip (a record:
    :mod:`svgtpu.compiler.vae_decode`), its chunks' static cycles and a video's decode at the chip's clock."""
    from svgtpu.compiler.vae_decode import CHUNKS, DecodeJob, cached_compile_decode
    from svgtpu.costmodel.specs import get_device
    from svgtpu.costmodel.stages import chunk_flops, decode_cycles
    from svgtpu.facts.tables import format_table
    from svgtpu.geometry import get_geometry
    job = DecodeJob(resolution.removeprefix("wan-"), device)
    record = cached_compile_decode(job)
    if "refused" in record:
        return record, f"{job.name}: not compiled: {record['refused']}", 1
    chip = get_device(device)
    T, clock, flops = record["latent"]["T"], chip.clock_hz, chunk_flops(get_geometry(job.resolution))
    rows = [{"chunk": c, "frames_out": 1 if c == "first" else 4, "cycles": record["chunks"][c]["cycles"],
             "ms": 1e3 * record["chunks"][c]["cycles"] / clock, "ops": record["chunks"][c]["ops"],
             "hbm_temp_GB": (record["chunks"][c]["hbm_temp_bytes"] or 0) / 1e9,
             "x_peak": record["chunks"][c]["cycles"] / clock / (flops[c] / chip.matmul_flops)} for c in CHUNKS]
    seconds = decode_cycles(record, T) / clock
    table = (f"Wan 2.1 VAE decoder, {job.resolution} (latent {T} x {record['latent']['h']} x {record['latent']['w']}), "
             f"one {device} chip, float32\n({record['provenance']}: static issue cycles, HBM stalls outside them; "
             "x_peak: over the layer count's FLOPs\nat the chip's peak matmul rate, stages.chunk_flops)\n"
             + format_table(rows, ["chunk", "frames_out", "cycles", "ms", "ops", "hbm_temp_GB", "x_peak"])
             + f"\na video: first + {T - 1} x later = {seconds:.2f} s on one chip at {clock / 1e9:.2f} GHz")
    return {**record, "video_seconds_one_chip": seconds}, table, 0


def _compile_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.compiler.compile import TARGETS
    from svgtpu.compiler.multihost import MULTIHOST_TARGETS
    from svgtpu.kernels.budget import TPU_GENERATIONS
    from svgtpu.kernels.common import HEAD_DIMS
    p.add_argument("--device", default=_compile_default("device"), help=f"TPU generation: {', '.join(TPU_GENERATIONS)}")
    p.add_argument("--topology", default=None, help="topology name, e.g. v6e:2x2x1 or 2x2 (default: one host); a "
                   "multi-host one (4x4: 16 chips, 4 hosts) compiles the sharded targets and counts collectives")
    mask_arguments(p, _compile_default("geometry"))
    tile_arguments(p)
    p.add_argument("--block-kv-compute", type=positive_int, default=None)
    p.add_argument("--no-fast-path", action="store_true", help="mask every tile (the C4 ablation)")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    p.add_argument("--heads", type=positive_int, default=None,
                   help="heads per chip (default 5); for the sharded targets the model's heads (default 40)")
    p.add_argument("--head-dim", type=int, default=_compile_default("head_dim"), choices=HEAD_DIMS)
    p.add_argument("--what", default=None,
                   help=f"comma-separated targets from {', '.join(TARGETS + MULTIHOST_TARGETS)} (default "
                        f"kernel,svg-layer; on a multi-host topology {','.join(MULTIHOST_TARGETS)}); or wan-block: "
                        "one Wan 2.1 14B block on a v6e-8 / v7x slice, dense and SVG, static cycles by role; or "
                        "vae-decode: Wan 2.1's VAE decoder on one v6e chip, its first and later chunks")


@command("compile", "ahead-of-time compile kernel / SVG layer / DiT step for a TPU topology, no TPU "
         "needed (exit 1 if the compiler refuses)", _compile_arguments)
def run_compile(args):
    """``(result, table, exit status)``; 1 when anything was refused."""
    if args.what == "wan-block":
        from svgtpu.compiler.wan_block import wan_block_command
        return wan_block_command(args.geometry, args.device, args.block_q, args.block_kv, args.kept,
                                 progress=not args.json)
    if args.what == "vae-decode":
        return _vae_decode(args.geometry, args.device)
    from svgtpu.compiler.compile import CompileJob
    from svgtpu.compiler.multihost import compile_command
    from svgtpu.kernels import KernelConfig

    job = CompileJob(geometry=args.geometry, device=args.device, dtype=args.dtype, head_dim=args.head_dim,
                     kept=args.kept, multiplier=args.multiplier, align=args.align,
                     config=KernelConfig(args.block_q, args.block_kv, args.block_kv_compute,
                                         fast_path=not args.no_fast_path))
    result, table = compile_command(job, args.what, args.topology, heads=args.heads, progress=not args.json)
    return result, table, 0 if result["compiled"] else 1
