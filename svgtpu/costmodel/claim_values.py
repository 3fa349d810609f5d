"""Each claim's central value and interval, from one function: C1's and C2's rows and the checks beside them.

``svgtpu costmodel``'s default output, notebooks 05 and 06 (which record these rows in ``figures/results.json``),
the headline figure, the verdict table and new predictions files all read :func:`claim_values`, so a claim has one
number and one interval everywhere.  Each setup has two sides (:data:`SIDES`):

- **claim**: one kernel for the dense reference and the SVG layers (the setup's kernel, ours by default): like for
  like, the write-up's own comparison;
- **check**: a user's dense kernel on the device (Splash on a TPU: :func:`~svgtpu.costmodel.validate.user_dense_kernel`,
  or ``--dense-kernel``) against SVG through the setup's kernel: what a user switching kernels would see, shown
  beside the claim and labelled as the check, never instead of it.

The speedup's interval is the joint one (:func:`~svgtpu.costmodel.joint.joint_interval`); every other quantity's
is the tornado's (:func:`~svgtpu.costmodel.sensitivity.sensitivity`: the unknown constants and the sparse-layer
evidence one at a time, the calibration refitted, root sum of squares).
"""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.joint import joint_interval
from svgtpu.costmodel.pipeline import Setup, model_video, recipe_fields
from svgtpu.costmodel.sensitivity import sensitivity
from svgtpu.costmodel.validate import calibrated_setup, user_dense_kernel
from svgtpu.setting import PRODUCTION

#: The two sides of a setup, each with its label (every table and figure that shows a side uses these words).
SIDES = {"claim": "claim: one kernel for dense and SVG layers (like for like)",
         "check": "check: a user's dense kernel against SVG through the same kernel as the claim"}

#: The quantities each side gives: ``model_video``'s key, what it is, the claim it belongs to, its unit.
QUANTITIES = (("speedup", "end-to-end speedup", "C1", "ratio"),
              ("saved_minutes", "minutes saved per video", "C1", "min"),
              ("dense_minutes", "dense minutes per video", "C1", "min"),
              ("svg_minutes", "SVG minutes per video", "C1", "min"),
              ("attention_share", "self-attention share of a dense forward pass", "C2", "fraction"))


def production_setup(recipe=None, compiled=None, **fields) -> Setup:
    """The claims' setup (:data:`svgtpu.setting.PRODUCTION`, the default recipe unless ``recipe``), calibrated;
    ``compiled``: the compiled tile table (default: the committed one when it exists)."""
    from svgtpu.costmodel.compiled import AUTO
    from svgtpu.recipes import DEFAULT_RECIPE
    return calibrated_setup(PRODUCTION.model, PRODUCTION.resolution, PRODUCTION.device, chips=PRODUCTION.chips,
                            compiled=AUTO if compiled is None else compiled,
                            **recipe_fields(recipe or DEFAULT_RECIPE), **fields)


def side_setups(setup: Setup) -> dict[str, Setup]:
    """The claim's setup (its kernel on both sides) and, where a user's dense kernel differs from it, the check's
    (the setup's ``dense_kernel`` when given, else :func:`user_dense_kernel`)."""
    user = setup.dense_kernel or user_dense_kernel(setup.device)
    sides = {"claim": dataclasses.replace(setup, dense_kernel=None)}
    if user not in (None, setup.kernel):
        sides["check"] = dataclasses.replace(setup, dense_kernel=user)
    return sides


def side_values(setup: Setup) -> dict:
    """One side: the model's result, its tornado (``band``: the speedup and the chain's last bar with the joint
    interval), the joint interval and each of :data:`QUANTITIES` as ``{"value", "interval": [low, high], "how"}``."""
    result = model_video(setup)
    band = sensitivity(setup, central_result=result)
    joint = joint_interval(setup, result)
    # the speedup (and the headline's last bar, the same number) carries the joint interval wherever band is read
    for q in ("speedup", f"chain_{result['chain'][-1]['variant']}"):
        band[q] = {"central": joint["central"], "min": joint["min"], "max": joint["max"], "method": joint["method"]}
    values = {q: {"value": result[q], "interval": [band[q]["min"], band[q]["max"]], "how": band["method"]}
              for q, *_ in QUANTITIES}
    values["speedup"] = {"value": joint["central"], "interval": [joint["min"], joint["max"]], "how": joint["method"]}
    return {"setup": setup, "result": result, "band": band, "joint": joint, "values": values,
            "dense_kernel": setup.dense_kernel or setup.kernel, "svg_kernel": setup.kernel}


def claim_values(setup: Setup | None = None) -> dict[str, dict]:
    """Each side of ``setup`` (default :func:`production_setup`) by :func:`side_values`: ``{"claim": ...}`` and
    ``{"check": ...}`` where a user's dense kernel differs from the claim's."""
    return {side: side_values(s) for side, s in side_setups(setup or production_setup()).items()}


#: The rows the verdicts and ``figures/results.json`` hold, keyed by results key: the side, the quantity, the kernel
#: on both sides of the claim (``None``: the setup's), the role and the label every table and figure shows.
ROWS = (("C1.speedup", "claim", "speedup", None, "claim",
         "C1 end-to-end speedup, our kernel for dense and SVG layers (like for like)"),
        ("C1.speedup_splash_both", "claim", "speedup", "splash", "claim",
         "C1 the same, JAX's Splash for dense and SVG layers (the write-up's kernel family)"),
        ("C1.speedup_user_dense", "check", "speedup", None, "check",
         "check: a user's dense kernel (Splash dense, its padded 1440p tail included) against SVG through ours"),
        ("C1.minutes_saved", "claim", "saved_minutes", None, "claim", "C1 minutes saved per video"),
        ("C1.dense_minutes", "claim", "dense_minutes", None, "claim", "C1 dense minutes per video"),
        ("C1.svg_minutes", "claim", "svg_minutes", None, "claim", "C1 SVG minutes per video"),
        ("C2.attention_share_{resolution}", "claim", "attention_share", None, "claim",
         "C2 self-attention share of a dense forward pass, our kernel"),
        ("C2.attention_share_{resolution}_user_dense", "check", "attention_share", None, "check",
         "check: the same share with a user's dense kernel (Splash)"))


def claim_rows(setup: Setup | None = None) -> dict[str, dict]:
    """Every row of :data:`ROWS` for ``setup`` (default :func:`production_setup`), keyed by its results key
    (``{resolution}`` filled): ``{"value", "interval", "role", "label", "dense_kernel", "svg_kernel", "how",
    "side"}`` (``side``: :func:`side_values`' whole side, for what a notebook records beside it)."""
    setup = setup or production_setup()
    sides = claim_values(setup)
    families = {None: sides}
    rows = {}
    for key, side, quantity, kernel, role, label in ROWS:
        if kernel not in families:
            families[kernel] = claim_values(dataclasses.replace(sides["claim"]["setup"], kernel=kernel))
        found = families[kernel].get(side)
        if found is None:
            continue
        v = found["values"][quantity]
        rows[key.format(resolution=setup.geometry.name)] = {
            "value": v["value"], "interval": list(v["interval"]), "role": role, "label": label, "how": v["how"],
            "dense_kernel": found["dense_kernel"], "svg_kernel": found["svg_kernel"], "side": found}
    return rows


def side_words(side: dict) -> str:
    """``dense ours, SVG ours`` for a side (:func:`side_values`)."""
    return f"dense {side['dense_kernel']}, SVG {side['svg_kernel']}"


__all__ = ["SIDES", "QUANTITIES", "ROWS", "production_setup", "side_setups", "side_values", "claim_values",
           "claim_rows", "side_words"]
