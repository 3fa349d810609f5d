"""C1 under each recipe choice: the scenario table.

What a run *chooses* is not uncertainty: SVG's dense warm-up steps and kept fraction (each cited recipe
of :mod:`svgtpu.recipes`), the attention kernel (ours, tokamax's splash, JAX's Splash; and MaxDiffusion's
dense Splash against SVG with ours), and whose sparse layers (ours as modeled, or as efficient as SVG's
published GPU runs imply).  Each is a row here, with the speedup's joint interval around it
(:func:`svgtpu.costmodel.joint.joint_interval`, the one every C1 speedup row carries: the genuinely unknown
constants with the calibration refitted at each end, and the sparse stretch as one parameter).
The central row is the setup itself: the default recipe, our kernel for dense and sparse layers, the
sparse layers priced from MaxDiffusion's measured TPU runs (the calibrated sparse stretch); beside it the
sparse layers as compiled (stretch 1, the static schedule) and, a GPU scenario, as efficient as SVG's
published GPU runs imply.
"""

from __future__ import annotations

import dataclasses

from svgtpu.costmodel.compiled import KERNELS
from svgtpu.costmodel.pipeline import Setup, model_video, recipe_fields
from svgtpu.costmodel.joint import joint_interval
from svgtpu.recipes import RECIPES

KERNEL_NAMES = {"ours": "ours", "tokamax": "tokamax's splash", "splash": "JAX's Splash"}


def scenario_setups(setup: Setup, published_svg_range: tuple[float, float] | None = None) -> list[tuple[str, str, Setup]]:
    """``(group, name, setup)`` for every scenario row: the central setup first."""
    sparse = (f"sparse layers priced from MaxDiffusion's measured TPU runs (stretch {setup.sparse_stretch:.2f})"
              if setup.sparse_stretch != 1 else "sparse layers as compiled")
    dense = setup.dense_kernel or setup.kernel
    kernels = (f"{KERNEL_NAMES.get(setup.kernel, setup.kernel)} for dense and SVG layers" if dense == setup.kernel else
               f"dense with {KERNEL_NAMES.get(dense, dense)}, SVG with {KERNEL_NAMES.get(setup.kernel, setup.kernel)}")
    rows = [("central", f"as set up: {kernels}, "
                        f"{setup.dense_steps} of {setup.steps} steps and {setup.dense_layers} of {setup.model.layers} "
                        f"layers dense, {sparse}", setup)]
    if setup.sparse_stretch != 1:
        rows.append(("sparse layers", "sparse layers as compiled (static schedule, stretch 1)",
                     dataclasses.replace(setup, sparse_stretch=1.0)))
    for r in RECIPES.values():
        if not r.known:
            continue
        fields = recipe_fields(r)
        if all(getattr(setup, k) == v for k, v in fields.items()):
            continue   # the central row's own recipe
        changed = setup.replace(**fields)
        rows.append(("recipe", f"SVG recipe {r.name} (kept {r.kept:g}, {changed.dense_steps} of {changed.steps} steps "
                               f"and {changed.dense_layers} of {changed.model.layers} layers dense)", changed))
    for kernel in KERNELS:
        if (kernel != setup.kernel or dense != setup.kernel) and kernel in setup.kernels_here:
            rows.append(("kernel", f"{KERNEL_NAMES[kernel]} for dense and SVG layers",
                         dataclasses.replace(setup, kernel=kernel, dense_kernel=None)))
    if setup.kernel != "splash" and dense != "splash" and "splash" in setup.kernels_here:
        rows.append(("kernel", f"dense with JAX's Splash (MaxDiffusion's baseline), SVG with {KERNEL_NAMES[setup.kernel]}",
                     dataclasses.replace(setup, dense_kernel="splash")))
    if published_svg_range:
        for end, value in zip(("lowest", "highest"), published_svg_range):
            # instead of the TPU's evidence (the stretch), not on top of it
            rows.append(("sparse layers", f"sparse layers as efficient as SVG's published GPU runs imply ({end})",
                         dataclasses.replace(setup, sparse_efficiency=value, sparse_stretch=1.0)))
    return rows


def scenario_table(setup: Setup, published_svg_range: tuple[float, float] | None = None, *,
                   intervals: bool = True, central: tuple[dict, dict] | None = None) -> list[dict]:
    """One row per scenario (:func:`scenario_setups`): speedup and its interval, minutes, kept pairs, the
    dense steps, the kernels and how attention was priced.  ``central``: ``(model_video(setup), interval)`` when the
    caller has them, ``interval["speedup"]`` the joint one (the central row is then not computed again)."""
    rows = []
    for group, name, s in scenario_setups(setup, published_svg_range):
        if group == "central" and central is not None:
            result, band = central[0], central[1]["speedup"]
        else:
            result = model_video(s)
            band = joint_interval(s, result) if intervals else {"min": None, "max": None}
        if not intervals:
            band = {"min": None, "max": None}
        rows.append({"group": group, "scenario": name, "speedup": result["speedup"], "speedup_min": band["min"],
                     "speedup_max": band["max"], "saved_minutes": result["saved_minutes"],
                     "dense_minutes": result["dense_minutes"], "svg_minutes": result["svg_minutes"],
                     "kept_pairs": result["tiles"]["svg-aligned"]["density"], "dense_steps": s.dense_steps,
                     "kernel": s.kernel, "dense_kernel": s.dense_kernel or s.kernel,
                     "sparse_efficiency": s.sparse_efficiency, "sparse_stretch": s.sparse_stretch,
                     "attention_pricing": result["attention_pricing"],
                     "provenance": result["provenance"]})
    return rows


__all__ = ["KERNEL_NAMES", "scenario_setups", "scenario_table"]
