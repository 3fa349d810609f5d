"""A compiled Wan block (:mod:`svgtpu.compiler.wan_block`) read JAX-free from its committed record, and priced like
the cost model prices a pass: its static cycles at the device's clock plus the ICI time of the collectives the
compiler put in it (their bytes per device, from the compiled HLO), at the links and ICI efficiency the model uses
(:mod:`~svgtpu.costmodel.parallel`).  Static cycles hold no ICI time; the model's pass does: C2's two instruments
compared like with like."""

from __future__ import annotations

import gzip
import json

from svgtpu.costmodel import parallel
from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.errors import BadInput
from svgtpu.facts.paths import COMPILED_RECORDS


def block_record(model: str, resolution: str, device: str, variant: str) -> dict:
    """The committed compiled record of one Wan block, its value (with ``record``: the file's name)."""
    folder = COMPILED_RECORDS / "wan-block"
    found = sorted(folder.glob(f"{model}-{resolution}-{device}-{variant}-*.json.gz"))
    if len(found) != 1:
        raise BadInput(f"need exactly one compiled {model} {resolution} {device} {variant} block record in {folder}, "
                       f"found {len(found)} (`make figures` writes it and prunes stale ones)")
    return json.loads(gzip.decompress(found[0].read_bytes()))["value"] | {"record": found[0].name}


def collective_seconds(record: dict, device: DeviceSpec, efficiency: Efficiency) -> dict[str, float]:
    """ICI seconds per device of the block's collectives (``record``: :func:`block_record`'s), per kind:
    all-to-alls among the sequence group (a line of chips along the slice's long side, as MaxDiffusion's context
    axis), each as large as its share of the compiled bytes; all-gathers as one gather of their compiled bytes over
    the same group."""
    group = record["plan"]["mesh"]["seq"] // device.cores
    out = {}
    for kind, c in record["collectives"].items():
        if kind == "all-to-all":
            out[kind] = c["count"] * parallel.all_to_all_seconds(c["bytes"] / c["count"], group, device, efficiency,
                                                                 shape=(1, group))
        elif kind == "all-gather":
            out[kind] = parallel.all_gather_seconds(c["bytes"], group, device, efficiency)
        else:
            raise BadInput(f"no ICI pricing for a {kind} (all-to-all, all-gather)")
    return out


def attention_share_with_ici(record: dict, device: DeviceSpec, efficiency: Efficiency) -> dict:
    """Self-attention's share of one compiled block priced as a pass: its static seconds over the block's static
    seconds with its collectives at the ICI seconds of their transfers (:func:`collective_seconds`) instead of
    their issue cycles (``collectives_static_s``, which the transfers' time holds), with every part."""
    clock = device.clock_hz
    static = record["total_cycles"] / clock
    attention = record["roles"]["self-attention"]["cycles"] / clock
    issued = record["roles"].get("collectives", {"cycles": 0})["cycles"] / clock
    ici = collective_seconds(record, device, efficiency)
    return {"share": attention / (static - issued + sum(ici.values())), "static_share": attention / static,
            "attention_s": attention, "static_s": static, "collectives_static_s": issued, "ici_s": ici}


__all__ = ["block_record", "collective_seconds", "attention_share_with_ici"]
