"""The model against a real TPU: MaxDiffusion's measured SVG runs on v6e-8 (``docs/svg.md``, PR 480).

- **blind**: what the model predicted before this evidence, as a user would have asked it: the moderate
  policy's schedule as warm-up shares (steps ``[11, 40)``, layers ``[1, 40)``) and its call-weighted kept
  pairs on a calibrated Wan 2.2 A14B 720p v6e-8 setup with the sparse layers as compiled (stretch 1), text
  encoder and VAE excluded, for each kernel; kept as a record.
- **calibrated**: the run model of :mod:`~svgtpu.costmodel.sparse_layers` with the sparse stretch fitted to
  the moderate run (the one calibration) and the conservative and aggressive runs predicted with it
  (validation, never refitted; their densities by the mapping rule of :func:`~svgtpu.costmodel.policy.scaled_policy`).
- **gap**: each term's share of the gap between the static schedule and the moderate run's measured speedup.
"""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.compiled import AUTO, resolve
from svgtpu.costmodel.pipeline import PARTS, model_video
from svgtpu.costmodel.policy import get_policy, kept_pairs
from svgtpu.costmodel.sparse_layers import AttentionLayout, gap_terms, run_setup
from svgtpu.costmodel.validate import (DENSE_CONTROL, calibrated_setup, calibration_point, family_efficiency, family_stretch,
                                       maxdiffusion_rows, point_setup, published_points, setup_seconds)
from svgtpu.geometry import VideoGeometry

BLIND_KERNELS = ("ours", "tokamax", "splash")


def blind_prediction(compiled=AUTO) -> dict:
    """The model as it stood before the TPU evidence (module doc), per kernel."""
    compiled = resolve(compiled)
    policy, video = get_policy("maxdiffusion-moderate")
    geometry = VideoGeometry.from_pixels(video["width"], video["height"], video["num_frames"], "720p")
    calls = policy.calls(video["num_inference_steps"], 40)["sparse"]
    kept = sum(n * kept_pairs(geometry, d, policy.band_rule, policy.anchor) for d, n in calls.items())
    kept /= sum(calls.values())
    steps = video["num_inference_steps"]
    rows = []
    for kernel in BLIND_KERNELS:
        setup = calibrated_setup("wan2.2-a14b", geometry, "v6e", compiled=compiled, steps=steps, kept=kept,
                                 warmup_steps=policy.steps[0] / steps, warmup_layers=policy.layers[0] / 40,
                                 kernel=kernel, sparse_stretch=1.0,
                                 parts=frozenset(PARTS) - {"text_encoder", "vae_decode", "image_encoder"})
        r = model_video(setup)
        rows.append({"kernel": kernel, "speedup": r["speedup"], "dense_s": r["dense_seconds"],
                     "svg_s": r["svg_seconds"]})
    return {"kept": kept, "rows": rows,
            "call": "calibrated_setup('wan2.2-a14b', '720p', 'v6e', steps=40, warmup_steps=11/40, warmup_layers=1/40, "
                    f"kept={kept:.3f}, sparse_stretch=1), text encoder and VAE excluded"}


def against_tpu(compiled=AUTO) -> dict:
    """Blind vs calibrated, the validation rows, the dense control and the gap decomposition (module doc)."""
    compiled = resolve(compiled)
    point = calibration_point("tpu", "svg")
    eff = family_efficiency("tpu", compiled)["efficiency"]
    fit = family_stretch("tpu", compiled)
    layout = AttentionLayout(dense_kernel=DENSE_CONTROL)
    setup = dataclasses.replace(run_setup(point_setup(point, eff, compiled), layout), sparse_stretch=fit["stretch"])
    gap = gap_terms(setup, layout, get_policy(point.policy)[0], fit["stretch"], point.published_speedup)
    gap["calibrated_on"] = "the moderate run's seconds (its speedup is not fitted: the dense control is a validation row)"
    control = next(p for p in published_points() if p.maxdiffusion_svg and p.variant == "dense"
                   and p.setting == point.setting)
    predicted = setup_seconds(control, point_setup(control, eff, compiled))
    return {"blind": blind_prediction(compiled), "stretch": fit, "rows": maxdiffusion_rows(compiled),
            "dense_control": {"id": control.id, "published_s": control.seconds, "predicted_s": predicted,
                              "error": predicted / control.seconds - 1},
            "gap": gap, "provenance": "modeled-v6e vs measured-tpu (published by MaxDiffusion)"}


__all__ = ["BLIND_KERNELS", "against_tpu", "blind_prediction"]
