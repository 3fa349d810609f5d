"""C1's interval from a joint treatment of its unknowns, and C1's rows by kernel family.

The tornado's interval (:func:`~svgtpu.costmodel.sensitivity.sensitivity`) adds every knob's swing as if
independent, the sparse stretch's readings among them; they are readings of *one* parameter.  Here:

- **independent constants** (:data:`~svgtpu.costmodel.sensitivity.KNOBS`: the attention / matmul split, HBM and
  ICI efficiency, host time, the temporal share, ...): one at a time to each end, the calibration refitted, their
  swings combined as a root sum of squares (distinct parameters, as before);
- **the sparse stretch**, one parameter: its readings (the calibration's dense-call kernel, the expert split,
  *both applied together* since they co-occur, and the stretch each validation run would need) give its ends,
  times a **transfer** factor for carrying a stretch fitted on MaxDiffusion's kernel, tile and 720p over to
  another kernel and resolution: the spread, over the H200 run's resolutions, of our kernel's measured over
  modeled SVG attention relative to its dense attention, normalised at 720p (the only device where both a sparse
  and a dense time of one kernel were measured at several resolutions; :mod:`~svgtpu.costmodel.against_gpu`);
  the stretch's two ends are one swing each way, added to the constants' in quadrature;
- **bias evidence**: the H200 model, calibrated at 720p as the TPU model is, missed the measured DiT speedup at
  the setup's resolution by a known error; the interval is widened, where it does not already, to hold the central
  speedup corrected by that error.

Two-sided by construction: each end is the larger swing that way.  Only the end-to-end speedup is treated so;
the other quantities keep the tornado's interval.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from svgtpu.costmodel.against_gpu import against_h200
from svgtpu.costmodel.gpu_rates import CALIBRATION_RESOLUTION
from svgtpu.costmodel.pipeline import Setup, model_video
from svgtpu.costmodel.policy import EARLIER_FLOW_SHIFT, ExpertSplit, get_policy
from svgtpu.costmodel.sensitivity import KNOBS, sensitivity
from svgtpu.costmodel.sparse_layers import RunSetting
from svgtpu.costmodel.validate import family_stretch, fit_sparse_stretch, maxdiffusion_rows


@functools.lru_cache(maxsize=4)
def stretch_readings(family: str, compiled) -> tuple[tuple[str, float], ...]:
    """The sparse stretch under every reading of its evidence, co-occurring alternatives applied together."""
    moderate = get_policy("maxdiffusion-moderate")[0]
    other_split = dataclasses.replace(moderate, split=ExpertSplit(EARLIER_FLOW_SHIFT))
    ours = RunSetting(dense_kernel="ours")
    readings = [("central", family_stretch(family, compiled)["stretch"]),
                ("dense calls' kernel", fit_sparse_stretch(family, compiled, setting=ours)["stretch"]),
                ("expert split", fit_sparse_stretch(family, compiled, policy=other_split)["stretch"]),
                ("dense calls' kernel and expert split together",
                 fit_sparse_stretch(family, compiled, setting=ours, policy=other_split)["stretch"])]
    readings += [(f"what {r['policy']} needs", r["stretch_this_run_needs"]) for r in maxdiffusion_rows(compiled)
                 if r["role"] == "validation" and r["stretch_this_run_needs"] is not None]
    return tuple(readings)


@functools.lru_cache(maxsize=1)
def h200_evidence() -> dict:
    """From the committed H200 run against its model: the transfer factors per resolution (our kernel's
    measured / modeled SVG attention over the same for its dense attention, normalised at 720p) and the model's
    DiT-speedup error per resolution."""
    rows = against_h200()["rows"]

    def ratio(g, what):
        r = next(x for x in rows if x["geometry"] == g and x["what"] == what and x["quantity"] == "attention_s")
        return r["measured"] / r["predicted"]
    geometries = sorted({r["geometry"] for r in rows if r["what"] == "svg-aligned-ours"})
    relative = {g: ratio(g, "svg-aligned-ours") / ratio(g, "dense-ours") for g in geometries}
    transfer = {g: v / relative[CALIBRATION_RESOLUTION] for g, v in relative.items()}
    speedup_error = {r["geometry"]: r["error"] for r in rows if r["quantity"] == "dit_speedup"}
    return {"transfer": transfer, "speedup_error": speedup_error, "run": against_h200()["run"]}


def joint_interval(setup: Setup, central_result: dict | None = None) -> dict:
    """The end-to-end speedup's joint, two-sided interval for ``setup`` (module doc), with its parts."""
    central_result = central_result or model_video(setup)
    c = central_result["speedup"]
    knobs = sensitivity(setup, knobs=KNOBS, central_result=central_result)
    rows = knobs["tornado"]
    up_k = math.sqrt(sum(max(0.0, r["speedup_low"] - c, r["speedup_high"] - c) ** 2 for r in rows))
    down_k = math.sqrt(sum(max(0.0, c - r["speedup_low"], c - r["speedup_high"]) ** 2 for r in rows))
    out = {"central": c, "knobs": {"up": up_k, "down": down_k, "names": knobs["knobs"]}}
    fit = family_stretch(setup.device.family, setup.compiled)
    up_s = down_s = 0.0
    if fit["calibrated_on"] is not None and abs(setup.sparse_stretch - fit["stretch"]) < 1e-12:
        readings = stretch_readings(setup.device.family, setup.compiled)
        evidence = h200_evidence()
        factors = list(evidence["transfer"].values()) + [1.0]
        ends = (min(v for _, v in readings) * min(factors), max(v for _, v in readings) * max(factors))
        at = [model_video(dataclasses.replace(setup, sparse_stretch=s))["speedup"] for s in ends]
        up_s, down_s = max(0.0, *(a - c for a in at)), max(0.0, *(c - a for a in at))
        out["stretch"] = {"readings": dict(readings), "transfer": evidence["transfer"], "ends": list(ends),
                          "speedup_at_ends": at, "up": up_s, "down": down_s, "transfer_from": evidence["run"]}
    low, high = c - math.sqrt(down_k ** 2 + down_s ** 2), c + math.sqrt(up_k ** 2 + up_s ** 2)
    error = h200_evidence()["speedup_error"].get(setup.geometry.name)
    if error is not None:
        corrected = c / (1 + error)
        out["bias"] = {"h200_dit_speedup_error": error, "corrected_central": corrected,
                       "widened": not low <= corrected <= high}
        low, high = min(low, corrected), max(high, corrected)
    out |= {"min": low, "max": high,
            "method": "independent constants one at a time, root sum of squares; the sparse stretch as one parameter "
                      "(its readings' envelope, co-occurring readings together, times the H200 transfer factors) "
                      "added in quadrature; widened to hold the central speedup corrected by the H200 model's "
                      "DiT-speedup error at this resolution"}
    return out


#: C1's rows: the write-up's kernel family on both sides, ours on both, and a user's dense kernel beside them.
C1_ROWS = (("splash_both", "JAX's Splash for dense and SVG layers (the write-up's kernel family)",
            {"kernel": "splash", "dense_kernel": None}),
           ("ours_both", "our kernel for dense and SVG layers", {"kernel": "ours", "dense_kernel": None}),
           ("user_dense", "a user's dense kernel beside them: Splash dense (its padded 1440p tail included), SVG "
                          "through ours", {"kernel": "ours", "dense_kernel": "splash"}))


def c1_rows(setup: Setup) -> list[dict]:
    """C1 per :data:`C1_ROWS`: each row's kernels, central speedup and joint interval (:func:`joint_interval`)."""
    out = []
    for name, what, fields in C1_ROWS:
        s = dataclasses.replace(setup, **fields)
        result = model_video(s)
        interval = joint_interval(s, result)
        out.append({"row": name, "kernels": what, "dense_kernel": s.dense_kernel or s.kernel, "svg_kernel": s.kernel,
                    "speedup": result["speedup"], "speedup_min": interval["min"], "speedup_max": interval["max"],
                    "saved_minutes": result["saved_minutes"], "interval": interval})
    return out


__all__ = ["stretch_readings", "h200_evidence", "joint_interval", "C1_ROWS", "c1_rows"]
