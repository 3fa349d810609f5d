"""Past one host: Wan on v6e-16/32/64, one slice (ICI) or several slices over the data-center network.

A v6e slice of up to 256 chips is one ICI torus/mesh however many hosts it spans, so v6e-16/32/64
pay only ICI (:mod:`svgtpu.costmodel.parallel`, through :func:`~svgtpu.costmodel.pipeline.model_video`).
Several slices (Multislice) talk over the data-center network (DCN), through the hosts' NICs; two
ways to split a video over two slices:

- ``cfg``: the two classifier-free-guidance passes run on one slice each; per step the slices swap
  their velocity (the latent: 16 channels x T x 2H x 2W float32, spread over the slice's chips);
- ``sequence``: one pass spans both slices; the Ulysses all-to-alls (4 per layer) then send the
  part of every chip's shard that belongs to the other slice over the DCN.

For each chip count :func:`multihost_sweep` models every split (slices x CFG x Ulysses heads/sequence
over the rest) and picks the one with the shortest SVG video; it reports what each pays in
communication, the head-slot use (40 heads over 16 chips leaves slots idle), and how much of the
dense-vs-SVG speedup communication takes away.  Every number is ``modeled-<device>``.
"""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel import parallel
from svgtpu.costmodel.pipeline import PARTS, model_video
from svgtpu.costmodel.specs import DeviceSpec, get_device
from svgtpu.costmodel.validate import calibrated_setup
from svgtpu.geometry import check_positive_int
from svgtpu.setting import PRODUCTION
from svgtpu.errors import BadInput

#: Data-center network per chip, one direction, bytes/s: a host's NICs shared by its chips.
#: v6e: "Per-host NIC configuration 4 x 200 Gbps", 8 chips per host, slices up to 256 chips (Cloud
#: TPU docs, "TPU v6e" specification table, https://cloud.google.com/tpu/docs/v6e; 32 hosts x 800
#: Gbps is the page's 25.6 Tbps DCN per Pod).  v5e: 2 x 100 Gbps per 8-chip host
#: (https://cloud.google.com/tpu/docs/v5e).  v5p: 50 Gbps per chip (https://cloud.google.com/tpu/docs/v5p).
DCN = {"v6e": {"bytes_per_s_per_chip": 4 * 200e9 / 8 / 8, "max_slice": 256},
       "v5e": {"bytes_per_s_per_chip": 2 * 100e9 / 8 / 8, "max_slice": 256},
       "v5p": {"bytes_per_s_per_chip": 50e9 / 8, "max_slice": 6144}}
#: Wan 2.1's latent channels (github.com/Wan-Video/Wan2.1, wan/modules/vae.py: WanVAE builds _video_vae(..., z_dim=16)).
LATENT_CHANNELS = 16
SPLITS = ("cfg", "sequence")


def dcn_bandwidth(device: DeviceSpec) -> float:
    """DCN bytes/s per chip, one direction."""
    if device.name not in DCN:
        raise BadInput(f"device must be one of {', '.join(DCN)} for a DCN figure, got {device.name!r}")
    return DCN[device.name]["bytes_per_s_per_chip"]


def dcn_seconds(setup, slices: int, split: str) -> float:
    """DCN seconds of one video for ``setup`` spread over ``slices`` slices split by ``split``.

    ``cfg``: per step each chip of a pass sends its share of the latent velocity to the other slice.
    ``sequence``: per pass and layer, four all-to-alls whose ``(slices-1)/slices`` cross slices.
    """
    if slices == 1:
        return 0.0
    if split not in SPLITS:
        raise BadInput(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    g, bandwidth = setup.geometry, dcn_bandwidth(setup.device)
    if split == "cfg":
        latent = LATENT_CHANNELS * g.T * 2 * g.H * 2 * g.W * 4   # float32, patch (1, 2, 2) undone
        return setup.steps * latent / setup.chips_per_pass / bandwidth
    shard = g.L / setup.chips_per_pass * setup.model.dim * setup.dtype_bytes
    crossing = shard * (slices - 1) / slices
    return (setup.steps * setup.sequential_passes * setup.model.layers * parallel.ULYSSES_ALL_TO_ALLS * crossing
            / bandwidth)


def configurations(chips: int, device: DeviceSpec) -> list[dict]:
    """The splits of ``chips`` chips modeled: one slice with and without the CFG split, and (for
    an even count) two slices of half the chips, split by CFG or by sequence."""
    check_positive_int("chips", chips)
    out = []
    if chips <= DCN.get(device.name, {"max_slice": chips})["max_slice"]:
        out += [{"slices": 1, "cfg_split": False, "split": None}, {"slices": 1, "cfg_split": True, "split": "cfg"}]
    if chips % 2 == 0 and chips >= 2:
        out += [{"slices": 2, "cfg_split": True, "split": "cfg"}, {"slices": 2, "cfg_split": False, "split": "sequence"}]
    return [c for c in out if not (c["cfg_split"] and chips % 2)]


def model_configuration(model: str, geometry: str, device: str, chips: int, slices: int, cfg_split: bool,
                        split: str | None, **fields) -> dict:
    """One split of one video: dense and SVG minutes with ICI and DCN, and what communication costs."""
    dev = get_device(device)
    setup = calibrated_setup(model, geometry, dev, chips=chips, cfg_split=cfg_split, **fields)
    video = model_video(setup)
    quiet = model_video(dataclasses.replace(setup, parts=setup.parts - {"communication", "weight_gather"}))
    dcn = dcn_seconds(setup, slices, split)
    dense, svg = video["dense_seconds"] + dcn, video["svg_seconds"] + dcn
    ici_svg = svg - dcn - quiet["svg_seconds"]
    no_comm_speedup = quiet["dense_seconds"] / quiet["svg_seconds"]
    used = setup.model.heads / (setup.heads_per_chip * setup.chips_per_pass)
    return {"chips": chips, "slices": slices, "cfg_split": cfg_split, "split": split or "heads",
            "chips_per_pass": setup.chips_per_pass, "mesh": video["mesh"], "heads_per_chip": setup.heads_per_chip,
            "head_slot_use": used, "weights_sharded": video["memory"]["weights_sharded"],
            "dense_minutes": dense / 60, "svg_minutes": svg / 60, "speedup": dense / svg,
            "speedup_without_communication": no_comm_speedup,
            "ici_seconds_svg": ici_svg, "dcn_seconds": dcn, "communication_share_svg": (ici_svg + dcn) / svg,
            "speedup_lost_to_communication": 1 - (dense / svg) / no_comm_speedup,
            "provenance": video["provenance"]}


def multihost_sweep(model: str = PRODUCTION.model, geometry: str = PRODUCTION.resolution, device: str = PRODUCTION.device,
                    chip_counts=(8, 16, 32, 64), **fields) -> dict:
    """Every configuration of every chip count, and the one picked (shortest SVG video) per count
    with the reason in numbers."""
    dev = get_device(device)
    rows, picked = [], []
    for chips in chip_counts:
        options = [model_configuration(model, geometry, device, chips, **c, **fields)
                   for c in configurations(chips, dev)]
        for r in options:
            r["picked"] = False
        best = min(options, key=lambda r: r["svg_minutes"])
        best["picked"] = True
        runner = min((r for r in options if r is not best), key=lambda r: r["svg_minutes"], default=None)
        best["why"] = (f"{best['chips_per_pass']} chips per pass, {best['heads_per_chip']} heads per chip "
                       f"({best['head_slot_use']:.0%} of head slots used), communication "
                       f"{best['communication_share_svg']:.1%} of the SVG video"
                       + (f"; next best: {runner['slices']} slice(s), split {runner['split']}, "
                          f"{runner['svg_minutes'] / best['svg_minutes']:.2f}x longer" if runner else ""))
        rows += options
        picked.append(best)
    return {"model": model, "geometry": geometry, "device": device, "rows": rows, "picked": picked,
            "dcn_bytes_per_s_per_chip": dcn_bandwidth(dev), "parts": sorted(PARTS),
            "provenance": picked[0]["provenance"] if picked else None}


__all__ = ["DCN", "LATENT_CHANNELS", "SPLITS", "dcn_bandwidth", "dcn_seconds", "configurations",
           "model_configuration", "multihost_sweep"]
