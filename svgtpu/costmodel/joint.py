"""C1's interval from a joint treatment of its unknowns (C1's rows by kernel family: :mod:`~svgtpu.costmodel.claim_values`).

- **the constants** (:data:`~svgtpu.costmodel.sensitivity.KNOBS` and, for a TPU setup priced term by term, the
  sparse-layer knobs of :func:`~svgtpu.costmodel.sensitivity.sparse_knobs`: the sparse stretch over its plausible
  range and the calibration run's other readings): one at a time to each end, the calibration refitted where the
  knob moves the calibration run, so every end is a refit that still meets it (an end no efficiency reaches is cut
  where one does); their swings combined as a root sum of squares (distinct parameters);
- **bias evidence**: the H200 model, calibrated at 720p as the TPU model is, missed the measured DiT speedup at
  the setup's resolution by a known error; the interval is widened, where it does not already, to hold the central
  speedup corrected by that error.  The H200 evidence enters here only: the stretch's range is the plausible one
  written before the fit, not widened by a transfer factor read off the same run.

Two-sided by construction: each end is the larger swing that way.  Only the end-to-end speedup is treated so;
the other quantities keep the tornado's interval.
"""

from __future__ import annotations

import functools
import math

from svgtpu.costmodel.against_gpu import against_h200
from svgtpu.costmodel.pipeline import Setup, model_video
from svgtpu.costmodel.sensitivity import sensitivity


@functools.lru_cache(maxsize=1)
def h200_evidence() -> dict:
    """From the committed H200 run against its model: the model's DiT-speedup error per resolution."""
    rows = against_h200()["rows"]
    speedup_error = {r["geometry"]: r["error"] for r in rows if r["quantity"] == "dit_speedup"}
    return {"speedup_error": speedup_error, "run": against_h200()["run"]}


def joint_interval(setup: Setup, central_result: dict | None = None) -> dict:
    """The end-to-end speedup's joint, two-sided interval for ``setup`` (module doc), with its parts."""
    central_result = central_result or model_video(setup)
    c = central_result["speedup"]
    knobs = sensitivity(setup, central_result=central_result)
    rows = knobs["tornado"]
    up = math.sqrt(sum(max(0.0, r["speedup_low"] - c, r["speedup_high"] - c) ** 2 for r in rows))
    down = math.sqrt(sum(max(0.0, c - r["speedup_low"], c - r["speedup_high"]) ** 2 for r in rows))
    out = {"central": c, "knobs": {"up": up, "down": down, "names": knobs["knobs"],
                                   "unreachable": knobs["unreachable"], "cut": knobs["cut"]}}
    low, high = c - down, c + up
    error = h200_evidence()["speedup_error"].get(setup.geometry.name)
    if error is not None:
        corrected = c / (1 + error)
        out["bias"] = {"h200_dit_speedup_error": error, "corrected_central": corrected,
                       "widened": not low <= corrected <= high}
        low, high = min(low, corrected), max(high, corrected)
    out |= {"min": low, "max": high,
            "method": "the unknown constants one at a time to each end (the sparse stretch over its plausible range), "
                      "each end a refit that meets the calibration run, root sum of squares; widened to hold the "
                      "central speedup corrected by the H200 model's DiT-speedup error at this resolution"}
    return out


__all__ = ["h200_evidence", "joint_interval"]
