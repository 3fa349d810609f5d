"""A compiled Wan block (:mod:`svgtpu.compiler.wan_block`) read JAX-free from its committed record, and priced like
the cost model prices a pass: its static cycles at the device's clock plus the ICI time of the collectives the
compiler put in it (their bytes per device, from the compiled HLO), at the links and ICI efficiency the model uses
(:mod:`~svgtpu.costmodel.parallel`).  Static cycles hold no ICI time; the model's pass does: C2's two instruments
compared like with like.  Also which of a block's ops the cost model prices with terms of their own
(:func:`priced_elsewhere`) and the static cycles of the rest (:func:`other_ops_cycles`), which
:mod:`~svgtpu.costmodel.block_pricing` prices a TPU pass's non-attention ops from."""

from __future__ import annotations

import functools
from pathlib import Path

from svgtpu.costmodel import parallel
from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.errors import BadInput
from svgtpu.facts.paths import COMPILED_RECORDS
from svgtpu.inputs.records import committed_value


@functools.lru_cache(maxsize=64)
def _listed(folder: Path, pattern: str, stamp: int) -> tuple[Path, ...]:
    """The files of ``folder`` matching ``pattern`` as of its modification ``stamp`` (a record written or pruned
    changes it): the cost model asks for them at every pass it prices."""
    return tuple(sorted(folder.glob(pattern)))


def _glob(pattern: str) -> tuple[Path, ...]:
    folder = COMPILED_RECORDS / "wan-block"
    return _listed(folder, pattern, folder.stat().st_mtime_ns if folder.is_dir() else 0)


def block_record(model: str, resolution: str, device: str, variant: str) -> dict:
    """The committed compiled record of one Wan block, its value (with ``record``: the file's name)."""
    folder = COMPILED_RECORDS / "wan-block"
    found = _glob(f"{model}-{resolution}-{device}-{variant}-*.json.gz")
    if len(found) != 1:
        raise BadInput(f"need exactly one compiled {model} {resolution} {device} {variant} block record in {folder}, "
                       f"found {len(found)} (`make figures` writes it and prunes stale ones)")
    return committed_value(found[0])


def dense_records(device: str) -> tuple[dict, ...]:
    """Every committed dense Wan-block record of ``device`` (none for a device without one)."""
    return tuple(committed_value(path) for path in _glob(f"*-{device}-dense-*.json.gz"))


#: The compiled block's ops the run prices with terms of its own, left out of the non-attention ops the block
#: prices (:func:`priced_elsewhere`): the attention kernel (the calls at their compiled schedule and realized over
#: static time), the collectives (the all-gathers of the weights and the calls' Ulysses all-to-alls, priced at the
#: slice's ICI: their static cycles are only the issue of transfers those terms already time) and, in a record whose
#: kernel was compiled on its own, the stand-in the block was compiled with in the kernel's place
#: (``q + 0 * (k + v)``, set by ``svgtpu/compiler/wan_block.py``'s compile child: scope ``self_attention/add``), which no
#: run executes.  The rest of the self-attention role, the layout copies around the kernel (the heads' transposes
#: and reshapes for the all-to-alls), no attention term prices: they stay with the non-attention ops.
PRICED_ELSEWHERE = ("attention kernel", "collectives", "own-compile stand-in")
#: The scope of the own-compile stand-in's ops in a compiled block.
STAND_IN_SCOPE = "self_attention/add"


def priced_elsewhere(op: dict, record: dict) -> str | None:
    """Which of :data:`PRICED_ELSEWHERE` prices ``op`` of the compiled block ``record`` (a :func:`block_record`), or
    ``None``: an op of the run's non-attention work."""
    if op["role"] == "collectives":
        return PRICED_ELSEWHERE[1]
    if op["role"] == "self-attention" and op["opcode"] == "custom-call":
        return PRICED_ELSEWHERE[0]
    if (op["role"] == "self-attention" and record["job"]["kernel"] == "own-compile"
            and op["scope"].endswith(STAND_IN_SCOPE)):
        return PRICED_ELSEWHERE[2]
    return None


def other_ops_cycles(record: dict) -> dict[str, int]:
    """Static cycles per role of the compiled block ``record``'s ops that no term of the run prices apart
    (:func:`priced_elsewhere`), its top-level program's own bundles as ``other`` (as the record's roles count them):
    the ops whose static seconds stand beside the fit's non-attention seconds."""
    out: dict[str, int] = {}
    for op in record["ops"]:
        if priced_elsewhere(op, record) is None:
            out[op["role"]] = out.get(op["role"], 0) + op["cycles"]
    out["other"] = out.get("other", 0) + record["top_level"]["cycles"]
    return out


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


__all__ = ["PRICED_ELSEWHERE", "STAND_IN_SCOPE", "priced_elsewhere", "other_ops_cycles", "dense_records", "block_record", "collective_seconds", "attention_share_with_ici"]
