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
``svg``): the model then runs SVG's schedule with the recipe the published run used (its ``recipe``,
:mod:`svgtpu.recipes`: kept fraction, dense steps and layers, sampled rows) on the unaligned SVG mask.

A point also states how its run was parallelized (``cfg_split``: MaxDiffusion's data-parallel axis of
2 runs the two CFG passes side by side), whether its VAE was sharded (MaxDiffusion) or ran on one rank
in float32 (Wan's reference code), and its image conditioning (image-to-video).

Sparse layers' own efficiency (:func:`sparse_efficiency_evidence`): what SVG's published dense-vs-SVG
timings imply (the ``Setup.sparse_efficiency`` that makes the calibrated model reproduce each published
SVG time), what SVG's per-layer extra work costs in the model, and, when given, our kernel's compiled
v6e schedule (cycles over ideal, from the compiled-kernel benchmark).

:func:`calibrated_setup` is the one way the rest of the package builds a setup with a device family's
calibrated efficiency (the pipeline below this module never looks one up itself).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
from pathlib import Path

from svgtpu.costmodel.kernel_work import FLASH
from svgtpu.costmodel.pipeline import Setup, dit_seconds, recipe_fields, sparse_layer_efficiency, video_seconds
from svgtpu.costmodel.roofline import Efficiency
from svgtpu.costmodel.specs import DEVICES, FAMILIES, DeviceSpec, clock_variants, get_device
from svgtpu.costmodel.workload import ModelConfig, get_model
from svgtpu.geometry import get_geometry
from svgtpu.recipes import BLOCK_KV, BLOCK_Q
from svgtpu.geometry import VideoGeometry
from svgtpu.recipes import get_recipe
from svgtpu.errors import BadInput

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
    variant: str = "dense"                  # dense, or svg: SVG's schedule of the recipe below
    recipe: str | None = None               # an svg run's SVG recipe (svgtpu.recipes, cited there)
    cfg_split: bool = False                 # the two CFG passes side by side on two halves (MaxDiffusion dp=2)
    vae_sharded: bool = False               # VAE over all chips (MaxDiffusion) vs one rank in fp32 (Wan, SVG)
    image_encoder: str | None = None        # image-to-video conditioning (pipeline.IMAGE_ENCODERS)

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.variant == "svg":
            if self.recipe is None:
                raise ValueError(f"point {self.id}: an svg point needs its recipe (svgtpu.recipes)")
            get_recipe(self.recipe)
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
    work, block_q, block_kv = (FLASH, GPU_TILE, GPU_TILE) if device.is_gpu else (None, BLOCK_Q, BLOCK_KV)
    parts = {"communication", "weight_gather"}
    if point.measures == "end_to_end":
        parts |= {"text_encoder", "vae_decode", "image_encoder", "host"}
    svg = {} if point.variant == "dense" else recipe_fields(get_recipe(point.recipe))
    # a TPU slice named by TensorCores (v7x-8: 4 chips of 2 cores) is given in chips here
    return Setup(get_model(point.model), get_geometry(point.grid), device, chips=point.chips, steps=point.steps,
                 cfg=point.cfg, block_q=block_q, block_kv=block_kv, efficiency=efficiency, work=work,
                 parts=frozenset(parts), cfg_split=point.cfg_split, vae_sharded=point.vae_sharded,
                 image_encoder=point.image_encoder, **svg)


def predict_seconds(point: PublishedPoint, efficiency: Efficiency = Efficiency(), sparse_efficiency: float = 1.0,
                    device: DeviceSpec | None = None) -> float:
    """Modeled seconds of what ``point`` measured (``device``: a variant of its device, e.g. another clock)."""
    setup = dataclasses.replace(point_setup(point, efficiency), sparse_efficiency=sparse_efficiency,
                                **({"device": device} if device is not None else {}))
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
        raise BadInput(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
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


def calibrated_setup(model: "str | ModelConfig", geometry: "str | VideoGeometry", device: "str | DeviceSpec",
                     **fields) -> Setup:
    """A :class:`Setup` with the device family's calibrated efficiency (:func:`family_efficiency`)
    unless ``efficiency`` is among ``fields``; every other field as given."""
    device = get_device(device)
    fields.setdefault("efficiency", family_efficiency(device.family)["efficiency"])
    return Setup(get_model(model), get_geometry(geometry), device, **fields)


def _solve(f, target: float, lo: float, hi: float) -> float | None:
    """``x`` in ``[lo, hi]`` with ``f(x) = target`` for ``f`` falling in ``x`` (bisection); ``None``
    when the target lies outside ``[f(hi), f(lo)]``."""
    if not f(hi) <= target <= f(lo):
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


def _setting(p: PublishedPoint) -> tuple:
    """What a dense and an SVG run of one published setting share."""
    return p.source, p.device, p.chips, p.model, p.grid, p.steps, p.cfg, p.measures


def sparse_efficiency_evidence(compiled_cycles_over_ideal: float | None = None) -> dict:
    """What each source implies for ``Setup.sparse_efficiency`` (sparse layers' share of their modeled time).

    - ``published_svg``: per published SVG run (``variant`` ``svg``), the sparse efficiency at which the
      calibrated model reproduces its time (``implied_sparse_efficiency``) and, less confounded by the
      dense model's own error, its speedup over the published dense run of the same setting
      (``implied_from_speedup``: modeled dense time x published SVG/dense ratio); ``None``: not
      reachable in (0, 1];
    - ``svg_extra_work``: the model's own sparse-layer efficiency on those runs' setups (ideal = dense
      layer x density, over kernel tiles + profiling + layout transform): SVG's per-layer extra work;
    - ``compiled_kernel``: ``1 / compiled_cycles_over_ideal`` when given (our kernel's compiled v6e
      schedule over its ideal issue count, from the compiled-kernel benchmark), else absent.
    """
    published = []
    for p in published_points():
        if p.variant != "svg" or p.role == "calibration":
            continue
        eff = family_efficiency(p.family)["efficiency"]
        implied = _solve(lambda e: predict_seconds(p, eff, e), p.seconds, 0.05, 1.0)
        setup = point_setup(p, eff)
        dense = next(d for d in published_points() if d.variant == "dense" and _setting(d) == _setting(p))
        target = predict_seconds(dense, eff) * p.seconds / dense.seconds
        from_speedup = _solve(lambda e: predict_seconds(p, eff, e), target, 0.05, 1.0)
        published.append({"id": p.id, "device": p.device, "pixels": p.pixels, "published_s": p.seconds,
                          "published_speedup": dense.seconds / p.seconds,
                          "predicted_at_1_s": predict_seconds(p, eff, 1.0), "implied_sparse_efficiency": implied,
                          "implied_from_speedup": from_speedup,
                          "model_extra_work_efficiency": sparse_layer_efficiency(setup, "svg"),
                          "source": p.source})
    found = [r["implied_from_speedup"] for r in published if r["implied_from_speedup"] is not None]
    out = {"published_svg": published,
           "published_svg_range": (min(found), max(found)) if found else None,
           "svg_extra_work": [{"id": r["id"], "efficiency": r["model_extra_work_efficiency"]} for r in published],
           "provenance": "modeled vs published (measured by others)"}
    if compiled_cycles_over_ideal is not None:
        if not compiled_cycles_over_ideal >= 1:
            raise BadInput(f"compiled_cycles_over_ideal must be >= 1, got {compiled_cycles_over_ideal!r}")
        out["compiled_kernel"] = {"cycles_over_ideal": compiled_cycles_over_ideal,
                                  "efficiency": 1 / compiled_cycles_over_ideal, "provenance": "compiled-v6e"}
    return out


def validate() -> dict:
    """Predicted vs published for every point, and the error summary of the validation points."""
    rows = []
    for p in published_points():
        eff = family_efficiency(p.family)["efficiency"]
        predicted = predict_seconds(p, eff)
        # the clock is a band (specs.CLOCK_BANDS): the error at each of its alternatives, calibration held
        clock_band = {f"{m} MXU/core": predict_seconds(p, eff, device=d) / p.seconds - 1
                      for m, d in clock_variants(get_device(p.device)).items()}
        rows.append({"id": p.id, "role": p.role, "variant": p.variant, "device": p.device, "chips": p.chips,
                     "model": p.model, "pixels": p.pixels, "frames": p.frames, "steps": p.steps, "cfg": p.cfg,
                     "attention_kernel": p.attention_kernel, "measures": p.measures, "cfg_split": p.cfg_split,
                     "vae_sharded": p.vae_sharded, "image_encoder": p.image_encoder,
                     "published_s": p.seconds, "predicted_s": predicted, "error": predicted / p.seconds - 1,
                     "error_clock_band": clock_band,
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
            by_setting.setdefault(_setting(p), {})[p.variant] = row
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
           "calibrated_setup", "sparse_efficiency_evidence", "validate", "ROLES"]
