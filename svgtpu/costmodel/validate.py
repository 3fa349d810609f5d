"""Keeping the model honest: published, measured Wan generation times (``published.json``, each
with its source and what exactly was measured) against the model's prediction for the same
settings.

At most one number per device family is fitted, from one labelled calibration point: the compute
efficiency (``Efficiency.matmul`` = ``Efficiency.attention``) that makes the model reproduce that
point.  Every other point is a validation point, predicted with that efficiency and never fitted.
A family without a calibration point keeps the prior :class:`Efficiency`.  Nothing is ever fitted
to the write-up's own claims.

Published GPU runs use FlashAttention (not our kernel): their attention is timed with the
hand-counted flash work (:data:`~svgtpu.costmodel.kernel_work.FLASH`) on FlashAttention-2's 128 x 128
tiles, with no Pallas grid-step cost (thread blocks run concurrently) and K/V reads shared by the
thread blocks of one wave (``DeviceSpec.kv_reuse``).  A point may time SVG itself (``variant``
``svg``): the model then runs SVG's schedule with the settings the published run used (kept
fraction, share of dense steps and layers) on the unaligned SVG mask.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
from pathlib import Path

from svgtpu.costmodel.kernel_work import FLASH
from svgtpu.costmodel.pipeline import Setup, dit_seconds, video_seconds
from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DEVICES, FAMILIES, get_device
from svgtpu.costmodel.workload import get_model, get_resolution

PUBLISHED_PATH = Path(__file__).with_name("published.json")
ROLES = ("calibration", "validation", "validation-unconfirmed")
#: FlashAttention-2's forward tile for head_dim 128: 128 x 128 (block_m x block_n).
GPU_TILE = 128
VARIANTS = ("dense", "svg")


@dataclasses.dataclass(frozen=True)
class PublishedPoint:
    """One published, measured generation time and the settings it was measured with."""

    id: str
    role: str
    model: str
    pixels: str
    frames: int
    grid: str
    steps: int
    cfg: bool
    device: str
    chips: int
    attention_kernel: str
    measures: str
    seconds: float
    source: str
    what: str
    settings_note: str = ""
    variant: str = "dense"                  # dense, or svg: SVG's schedule with the settings below
    sparsity: float | None = None           # SVG kept fraction of the run
    warmup_steps: float | None = None       # SVG: share of steps run dense
    warmup_layers: float | None = None      # SVG: share of layers run dense

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.variant == "svg" and None in (self.sparsity, self.warmup_steps, self.warmup_layers):
            raise ValueError(f"point {self.id}: an svg point needs sparsity, warmup_steps and warmup_layers")
        if self.measures not in ("dit", "end_to_end"):
            raise ValueError(f"measures must be dit or end_to_end, got {self.measures!r}")
        if not self.source.startswith("http"):
            raise ValueError(f"point {self.id}: source must be a URL, got {self.source!r}")

    @property
    def family(self) -> str:
        return get_device(self.device).family


@functools.lru_cache(maxsize=1)
def published_points() -> tuple[PublishedPoint, ...]:
    """Every point of ``published.json``."""
    data = json.loads(PUBLISHED_PATH.read_text())
    return tuple(PublishedPoint(**p) for p in data["points"])


def point_setup(point: PublishedPoint, efficiency: Efficiency = Efficiency()) -> Setup:
    """The model's setup for a published run (only the parts it measured)."""
    device = get_device(point.device)
    kernel, block_q, block_kv = (FLASH, GPU_TILE, GPU_TILE) if device.is_gpu else (None, 3024, 2048)
    parts = {"communication", "weight_gather"}
    if point.measures == "end_to_end":
        parts |= {"text_encoder", "vae_decode", "host"}
    svg = {} if point.variant == "dense" else {
        "sparsity": point.sparsity, "warmup_steps": point.warmup_steps, "warmup_layers": point.warmup_layers}
    return Setup(get_model(point.model), get_resolution(point.grid), device, chips=point.chips, steps=point.steps,
                 cfg=point.cfg, block_q=block_q, block_kv=block_kv, efficiency=efficiency, kernel=kernel,
                 parts=frozenset(parts), **svg)


def predict_seconds(point: PublishedPoint, efficiency: Efficiency = Efficiency()) -> float:
    """Modeled seconds of what ``point`` measured."""
    setup = point_setup(point, efficiency)
    return (dit_seconds if point.measures == "dit" else video_seconds)(setup, point.variant, True)


def _with_compute(efficiency: Efficiency, value: float) -> Efficiency:
    return dataclasses.replace(efficiency, matmul=value, attention=value)


@functools.lru_cache(maxsize=8)
def family_efficiency(family: str) -> dict:
    """The efficiency of a device family: fitted to its one calibration point, else the prior.

    Returns ``{"efficiency": Efficiency, "calibrated_on": point id or None, "fitted": value}``.
    The fit solves ``predicted(e) = published`` for ``e = matmul = attention`` by bisection
    (predicted time falls monotonically as ``e`` grows).
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    prior = Efficiency()
    if family == "cpu":   # this CPU's rates are measured (svgtpu.bench.cpu): nothing to calibrate
        return {"efficiency": prior, "calibrated_on": None, "fitted": None}
    calib = [p for p in published_points() if p.role == "calibration" and p.family == family]
    if len(calib) > 1:
        raise ValueError(f"family {family} has {len(calib)} calibration points; at most one is allowed")
    if not calib:
        return {"efficiency": prior, "calibrated_on": None, "fitted": None}
    point = calib[0]
    lo, hi = 0.01, 1.0
    if predict_seconds(point, _with_compute(prior, hi)) > point.seconds:
        raise ValueError(f"calibration point {point.id} is faster than the model at efficiency 1")
    for _ in range(40):
        mid = (lo + hi) / 2
        if predict_seconds(point, _with_compute(prior, mid)) > point.seconds:
            lo = mid
        else:
            hi = mid
    fitted = (lo + hi) / 2
    return {"efficiency": _with_compute(prior, fitted), "calibrated_on": point.id, "fitted": fitted}


def validate() -> dict:
    """Predicted vs published for every point, and the error summary of the validation points."""
    rows = []
    for p in published_points():
        eff = family_efficiency(p.family)["efficiency"]
        predicted = predict_seconds(p, eff)
        rows.append({"id": p.id, "role": p.role, "variant": p.variant, "device": p.device, "chips": p.chips,
                     "model": p.model, "pixels": p.pixels, "frames": p.frames, "steps": p.steps, "cfg": p.cfg,
                     "attention_kernel": p.attention_kernel, "measures": p.measures,
                     "published_s": p.seconds, "predicted_s": predicted, "error": predicted / p.seconds - 1,
                     "source": p.source, "what": p.what, "settings_note": p.settings_note})

    def summary(role: str) -> dict:
        errors = [abs(r["error"]) for r in rows if r["role"] == role]
        if not errors:
            return {"points": 0}
        return {"points": len(errors), "median_abs_error": statistics.median(errors), "worst_abs_error": max(errors)}

    # published SVG speedups: a dense and an SVG run of the same setting, both validation points
    by_setting = {}
    for p, row in zip(published_points(), rows):
        if p.role == "validation":
            by_setting.setdefault((p.device, p.chips, p.model, p.grid, p.steps, p.cfg, p.measures), {})[p.variant] = row
    speedups = [{"dense": pair["dense"]["id"], "svg": pair["svg"]["id"], "device": pair["dense"]["device"],
                 "pixels": pair["dense"]["pixels"],
                 "published": pair["dense"]["published_s"] / pair["svg"]["published_s"],
                 "predicted": pair["dense"]["predicted_s"] / pair["svg"]["predicted_s"]}
                for pair in by_setting.values() if {"dense", "svg"} <= set(pair)]
    for row in speedups:
        row["error"] = row["predicted"] / row["published"] - 1

    families = {}
    for family in (f for f in FAMILIES if f != "cpu"):
        fe = family_efficiency(family)
        families[family] = {"calibrated_on": fe["calibrated_on"], "fitted_compute_efficiency": fe["fitted"],
                            "devices": [d for d, s in DEVICES.items() if s.family == family]}
    return {"points": rows, "validation": summary("validation"), "speedups": speedups,
            "validation_unconfirmed": summary("validation-unconfirmed"), "families": families,
            "not_found": json.loads(PUBLISHED_PATH.read_text())["not_found"],
            "provenance": "modeled vs published (measured by others)"}


__all__ = ["PublishedPoint", "published_points", "point_setup", "predict_seconds", "family_efficiency",
           "validate", "ROLES"]
