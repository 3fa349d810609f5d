"""Which assumption moves the answer: every uncertain constant with its stated range, a tornado
(one constant at a time to each end of its range) and the band they give together.

The band combines the one-at-a-time swings as a root sum of squares, separately upward and
downward: it treats the constants as independent and their effects as additive, which is what a
tornado chart shows.  Ranges come from each constant's source or, where there is none, are marked
as assumptions.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from svgtpu.costmodel.pipeline import Setup, model_video, recipe_fields, video_seconds
from svgtpu.costmodel.specs import CLOCK_BANDS
from svgtpu.recipes import RECIPES

#: SVG's cited Wan recipes with numbers (svgtpu.recipes): the schedule knobs span them.
_CITED = [r for r in RECIPES.values() if r.known]


@dataclasses.dataclass(frozen=True)
class Knob:
    """One uncertain constant: where it lives in a :class:`Setup` (``field`` or ``field.sub``),
    the two ends of its range, and why that range."""

    path: str
    low: Any
    high: Any
    why: str

    def get(self, setup: Setup):
        head, _, tail = self.path.partition(".")
        value = getattr(setup, head)
        return getattr(value, tail) if tail else value

    def apply(self, setup: Setup, value) -> Setup:
        head, _, tail = self.path.partition(".")
        if tail:
            value = dataclasses.replace(getattr(setup, head), **{tail: value})
        return dataclasses.replace(setup, **{head: value})


KNOBS = (
    Knob("efficiency.matmul", 0.35, 0.8, "model-FLOPs utilization of large bf16 matmuls (roofline.Efficiency)"),
    Knob("efficiency.attention", 0.4, 0.8, "flash-attention forward at 50-73 % of its bound unit (FA2 paper), widened"),
    Knob("efficiency.memory", 0.6, 0.9, "streaming kernels at 60-90 % of HBM bandwidth (assumption)"),
    Knob("efficiency.vector_scale", min(CLOCK_BANDS["v6e"].values()) / CLOCK_BANDS["v6e"][2], 1.0,
         "v6e clock band: derived from 918 TFLOP/s over 2 MXUs per core (JAX TpuInfo, modeled) or 4 (other "
         "public sources); VPU and EUP rates scale with it"),
    Knob("efficiency.ici", 0.4, 0.9, "achieved share of ICI link bandwidth (assumption)"),
    Knob("device.matmul_tile", None, "device", "MXU width penalty for head_dim 128 on 256-wide MXUs off / on"),
    Knob("device.grid_step_seconds", 0.1e-6, 1e-6, "fixed Pallas grid-step cost (assumption, no public figure)"),
    Knob("host_seconds_per_step", 0.005, 0.1, "host loop, scheduler and dispatch per step (assumption)"),
    Knob("warmup_steps", min(r.dense_step_share for r in _CITED), max(r.dense_step_share for r in _CITED),
         "share of dense steps over SVG's cited Wan recipes (svgtpu.recipes, each with its script and commit)"),
    Knob("kept", min(r.kept for r in _CITED), max(r.kept for r in _CITED),
         "kept fraction over SVG's cited Wan recipes (svgtpu.recipes)"),
    Knob("temporal_fraction", 0.0, 1.0, "share of heads profiled temporal (pay the layout transform)"),
    Knob("sparse_efficiency", "published-svg", 1.0, "sparse layers' share of their modeled time: lowest value SVG's "
         "published dense-vs-SVG GPU speedups imply (validate.sparse_efficiency_evidence) up to the tile model"),
)


@functools.lru_cache(maxsize=1)
def _published_svg_low() -> float:
    from svgtpu.costmodel.validate import sparse_efficiency_evidence
    return sparse_efficiency_evidence()["published_svg_range"][0]

#: Headline quantities the band and tornado are computed for.
QUANTITIES = ("attention_share", "attention_share_end_to_end", "communication_share", "dense_minutes",
              "svg_minutes", "speedup", "saved_minutes")
SPLIT = ("sparse_attention", "alignment", "fast_path")


def _quantities(result: dict) -> dict[str, float]:
    return {**{k: result[k] for k in QUANTITIES}, **{f"split_{k}": result["contributions"][k] for k in SPLIT}}


def _applicable(knob: Knob, setup: Setup) -> bool:
    if knob.path == "device.matmul_tile":
        return setup.device.matmul_tile is not None
    if knob.path == "kept":
        return setup.kept is not None
    if knob.path == "device.grid_step_seconds":
        return setup.device.grid_step_seconds > 0
    return True


def _ends(knob: Knob, setup: Setup) -> tuple:
    return tuple(knob.get(setup) if v == "device" else _published_svg_low() if v == "published-svg" else v
                 for v in (knob.low, knob.high))


def sensitivity(setup: Setup, knobs: tuple[Knob, ...] = KNOBS) -> dict:
    """The tornado (per knob: each quantity at both ends) and the combined band per quantity."""
    central = _quantities(model_video(setup))
    tornado = []
    for knob in knobs:
        if not _applicable(knob, setup):
            continue
        low, high = _ends(knob, setup)
        at = {end: _quantities(model_video(knob.apply(setup, value))) for end, value in (("low", low), ("high", high))}
        tornado.append({"knob": knob.path, "low": low, "high": high, "central": knob.get(setup), "why": knob.why,
                        **{f"{q}_low": at["low"][q] for q in central}, **{f"{q}_high": at["high"][q] for q in central}})
    band = {}
    for q, c in central.items():
        up = math.sqrt(sum(max(0.0, row[f"{q}_low"] - c, row[f"{q}_high"] - c) ** 2 for row in tornado))
        down = math.sqrt(sum(max(0.0, c - row[f"{q}_low"], c - row[f"{q}_high"]) ** 2 for row in tornado))
        band[q] = {"central": c, "min": c - down, "max": c + up}
    return {"knobs": [row["knob"] for row in tornado], "tornado": tornado, **band,
            "method": "one knob at a time to each end of its range; band = root sum of squares of the swings"}


def _short(value) -> str:
    """A knob's end as a reader wants it: floats to three significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def tornado_rows(result: dict, quantity: str = "speedup") -> list[dict]:
    """The tornado for one quantity, largest swing first: ``knob, low, high, swing``."""
    rows = [{"knob": r["knob"], "value_at_low": r[f"{quantity}_low"], "value_at_high": r[f"{quantity}_high"],
             "swing": abs(r[f"{quantity}_high"] - r[f"{quantity}_low"]), "range": f"{_short(r['low'])} .. {_short(r['high'])}"}
            for r in result["tornado"]]
    return sorted(rows, key=lambda r: -r["swing"])


def what_if(setup: Setup) -> list[dict]:
    """The headline numbers under single, named changes of the setup: how far each one moves the
    model toward (or away from) the write-up's numbers.  The first row is the setup itself."""
    from svgtpu.costmodel.validate import family_efficiency

    eff = setup.efficiency
    changes = [
        ("as modeled", setup),
        *((f"SVG recipe {r.name} (kept {r.kept:g}, {r.dense_steps} of {r.steps} steps dense)",
           dataclasses.replace(setup, **recipe_fields(r))) for r in _CITED),
        ("dense warm-up layers rounded up, not down", dataclasses.replace(
            setup, warmup_layers=math.ceil(setup.warmup_layers * setup.model.layers) / setup.model.layers)),
        ("H100/H200-calibrated compute efficiency on this device", dataclasses.replace(
            setup, efficiency=dataclasses.replace(eff, matmul=family_efficiency("hopper")["efficiency"].matmul,
                                                  attention=family_efficiency("hopper")["efficiency"].attention))),
        ("VPU and EUP at half the derived clock (v6e: 4 MXUs per core, not 2)", dataclasses.replace(
            setup, efficiency=dataclasses.replace(eff, vector_scale=eff.vector_scale / 2))),
        ("sparse layers at the lowest efficiency SVG's published GPU speedups imply",
         dataclasses.replace(setup, sparse_efficiency=_published_svg_low())),
        ("no MXU width penalty", dataclasses.replace(setup, device=dataclasses.replace(setup.device, matmul_tile=None))),
        ("communication and weight gathers left out",
         dataclasses.replace(setup, parts=setup.parts - {"communication", "weight_gather"})),
        ("CFG passes split across the two halves of the slice", dataclasses.replace(setup, cfg_split=True))
        if setup.cfg and setup.chips % 2 == 0 else None,
    ]
    rows = []
    for change in filter(None, changes):
        name, s = change
        r = model_video(s)
        rows.append({"change": name, "speedup": r["speedup"], "saved_minutes": r["saved_minutes"],
                     "dense_minutes": r["dense_minutes"], "svg_minutes": r["svg_minutes"],
                     "attention_share": r["attention_share"],
                     "attention_share_end_to_end": r["attention_share_end_to_end"]})
    base = model_video(setup)
    for name, key in (("sparse layers without the fast path (Splash-style)", "svg, aligned, no fast path"),):
        seconds = next(c["seconds"] for c in base["chain"] if c["variant"] == key)
        rows.append({"change": name, "speedup": base["dense_seconds"] / seconds,
                     "saved_minutes": (base["dense_seconds"] - seconds) / 60, "dense_minutes": base["dense_minutes"],
                     "svg_minutes": seconds / 60, "attention_share": base["attention_share"],
                     "attention_share_end_to_end": base["attention_share_end_to_end"]})
    return rows


def speedup_surface(setup: Setup, sparse_efficiencies, dense_step_shares) -> list[dict]:
    """The end-to-end speedup (aligned SVG mask, fast path) over a grid of ``Setup.sparse_efficiency``
    x ``Setup.warmup_steps`` (the dense-step share), everything else as in ``setup``: the two levers
    the published evidence leaves most open (the dense run does not depend on either)."""
    dense = video_seconds(setup, "dense", True)
    return [{"sparse_efficiency": e, "dense_step_share": w,
             "speedup": dense / video_seconds(dataclasses.replace(setup, sparse_efficiency=e, warmup_steps=w),
                                              "svg-aligned", True)}
            for w in dense_step_shares for e in sparse_efficiencies]


__all__ = ["Knob", "KNOBS", "QUANTITIES", "SPLIT", "sensitivity", "tornado_rows", "what_if", "speedup_surface"]
