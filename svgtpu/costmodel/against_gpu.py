"""The model against a measured GPU: the committed H200 run (``figures/gpu-runs/``) row by row.

Three numbers are fitted on the run's 720p dense blocks (:mod:`~svgtpu.costmodel.gpu_rates`: cuDNN's and our
Triton kernel's attention rates, the non-attention ops' matmul efficiency), and since 2026-12-06 two on its 720p SVG
rows (our kernel's sparse rate, SVG's own work); every other row, every 480p and 1440p row among them, is validation,
predicted with them and never refitted (docs/costmodel.md, "The H200 model", written before this comparison):
the blocks and their self-attention at every resolution and kernel, the self-attention shares, the attention
variants of the run, and the video it extrapolates (dense DiT seconds with cuDNN, the DiT speedup of SVG through
our kernel).  Beside each, what the model at 314194b predicted blind (``figures/blind/``), where it did.
"""

from __future__ import annotations

import copy
import functools
import json

from svgtpu.costmodel.gpu_rates import CALIBRATION_MODEL, CALIBRATION_RESOLUTION, GPU_TILE, calibration_run
from svgtpu.costmodel.pipeline import dit_seconds, svg_overhead_seconds
from svgtpu.costmodel.validate import block_rest_seconds, calibrated_setup, family_efficiency, gpu_rates
from svgtpu.costmodel.workload import get_model
from svgtpu.facts.paths import REPO_ROOT

#: The model before this run, frozen (tests/test_blind_record.py).
BLIND_RECORD = REPO_ROOT / "figures" / "blind" / "2026-12-04-314194b.json"
#: The block's attention rows as the model's (kernel, mask): dense through cuDNN or ours, SVG (snap-aligned,
#: profiling and layout transform included) through ours.
BLOCK_KINDS = {"dense-cudnn": ("cudnn", "dense"), "dense-ours": ("ours", "dense"),
               "svg-aligned-ours": ("ours", "svg-aligned")}
#: The attention benchmark's variants as the model's (kernel, mask); with and without the fast path alike (the
#: GPU form has no fast-path term).
ATTENTION_KINDS = {"cudnn-dense": ("cudnn", "dense"), "ours-dense": ("ours", "dense"),
                   "ours-svg-fast": ("ours", "svg"), "ours-svg-nofast": ("ours", "svg"),
                   "ours-aligned-fast": ("ours", "svg-aligned"), "ours-aligned-nofast": ("ours", "svg-aligned")}
#: The rows the numbers are fitted on, and those they alone determine (the 720p cuDNN block, its share, its video;
#: since 2026-12-06 our kernel's 720p sparse row and SVG block self-attention, and with them the 720p DiT speedup):
#: ``role`` calibration; everything else, every row at another resolution, is validation.
FITTED = {(CALIBRATION_RESOLUTION, "dense-cudnn", q) for q in ("attention_s", "rest_s", "block_s", "attention_share")} | {
    (CALIBRATION_RESOLUTION, "dense-ours", "attention_s"), (CALIBRATION_RESOLUTION, "video (dense cuDNN)", "dense_dit_s"),
    (CALIBRATION_RESOLUTION, "svg-aligned-ours", "attention_s"),
    (CALIBRATION_RESOLUTION, "video (SVG ours vs dense cuDNN)", "dit_speedup"),
    (CALIBRATION_RESOLUTION, "attention ours-aligned-fast (40 heads)", "seconds")}


def block_setup(geometry: str, kept: float, model: str = CALIBRATION_MODEL):
    """The H200 setup of one block's video: Wan 2.1 14B (or ``model``), one chip, 50 steps with CFG, 128 x 128
    tiles."""
    return calibrated_setup(model, geometry, "h200", chips=1, steps=50, cfg=True, kept=kept)


def modeled_block(setup, kernel: str, mask: str) -> dict:
    """One block's modeled seconds: self-attention of ``kernel`` on ``mask`` (SVG's own work on an SVG layer)
    and the rest."""
    heads = setup.heads_per_chip
    stats, info = setup.tiles(mask)
    attention = heads * setup.head_seconds(stats, kernel=kernel, info=info)
    if mask != "dense":
        attention += sum(svg_overhead_seconds(setup).values())
    rest = block_rest_seconds(setup)
    return {"block_s": rest + attention, "attention_s": attention, "rest_s": rest,
            "attention_share": attention / (rest + attention)}


def _row(geometry, what, quantity, measured, predicted, blind=None):
    role = "calibration" if (geometry, what, quantity) in FITTED else "validation"
    return {"geometry": geometry, "what": what, "quantity": quantity, "role": role, "measured": measured,
            "predicted": predicted, "error": predicted / measured - 1, "blind_314194b": blind,
            "blind_error": None if blind is None else blind / measured - 1}


#: The block's dense self-attention as the attention section's variant of the same kernel (no mask, no SVG work).
SAME_KERNEL = {"dense-cudnn": "cudnn-dense", "dense-ours": "ours-dense"}


def in_block_over_alone(data: dict) -> dict[str, dict[str, float]]:
    """Per resolution and dense kernel, the block's self-attention seconds over the same kernel's seconds alone
    in the attention section, scaled by heads (the block runs all the model's heads in one call, the section
    fewer): 1 where a kernel runs as fast inside the block as alone.  Keyed by resolution, and by model where the
    block is not Wan 2.1 14B's.  Measured against measured, no model in it:
    what a rate taken from a short call alone misses in a long one (docs/costmodel.md, "The H200 model", its last
    paragraph)."""
    out: dict[str, dict[str, float]] = {}
    for block in data["block"]:
        section = next((a for a in data["attention"] if a["geometry"] == block["geometry"]), None)
        if section is None:
            continue
        alone = {r["variant"]: r["median_s"] for r in section["rows"] if r["status"] == "ok"}
        model = block.get("model", CALIBRATION_MODEL)
        key = block["geometry"] if model == CALIBRATION_MODEL else f"{block['geometry']} {model}"
        for r in block["rows"]:
            same = SAME_KERNEL.get(r["attention"])
            if r["status"] == "ok" and same in alone:
                out.setdefault(key, {})[r["attention"]] = \
                    r["attention_s"] / (alone[same] * get_model(model).heads / section["heads"])
    return out


def against_h200() -> dict:
    """Every row of the run the model is calibrated on (:data:`~svgtpu.costmodel.gpu_rates.CALIBRATION_RUN`)
    against the model (module doc); computed once per process, a fresh copy each call."""
    return copy.deepcopy(_against_h200())


@functools.lru_cache(maxsize=1)
def _against_h200() -> dict:
    run = calibration_run()
    data = run["data"]["run"]
    blind = {b["geometry"]: b for b in json.loads(BLIND_RECORD.read_text())["h200_blocks"]}
    rows = []
    for block in data["block"]:
        g, model = block["geometry"], block.get("model", CALIBRATION_MODEL)
        setup = block_setup(g, data["kept"], model)
        # another model's block (the 1.3B's since 2026-12-07): its rows named by model, every one validation
        named = (lambda what: what) if model == CALIBRATION_MODEL else (lambda what: f"{model} {what}")
        blind_here = blind.get(g, {}) if model == CALIBRATION_MODEL else {}
        for r in block["rows"]:
            if r["status"] != "ok":
                continue
            m = modeled_block(setup, *BLOCK_KINDS[r["attention"]])
            b = blind_here if r["attention"] == "dense-ours" else {}   # 314194b priced dense with ours
            what = named(r["attention"])
            rows.append(_row(g, what, "block_s", r["block_s"], m["block_s"], b.get("block_s_dense")))
            rows.append(_row(g, what, "attention_s", r["attention_s"], m["attention_s"],
                             b.get("block_attention_s_dense")))
            rows.append(_row(g, what, "rest_s", r["block_s"] - r["attention_s"], m["rest_s"]))
            rows.append(_row(g, what, "attention_share", r["attention_share"], m["attention_share"],
                             b.get("attention_share_dense")))
        video = next((e for e in data["end_to_end"]
                      if e["geometry"] == g and e.get("model", CALIBRATION_MODEL) == model), None)
        if video is None:
            continue
        dense, svg = dit_seconds(setup, "dense", True), dit_seconds(setup, "svg-aligned", True)
        rows.append(_row(g, named("video (dense cuDNN)"), "dense_dit_s", video["dense_s"], dense))
        if "speedup" in video:
            rows.append(_row(g, named("video (SVG ours vs dense cuDNN)"), "dit_speedup", video["speedup"], dense / svg,
                             blind_here.get("dit_speedup_svg_aligned")))
    for a in data["attention"]:
        g = a["geometry"]
        setup = block_setup(g, data["kept"]).replace(chips=1)
        for r in a["rows"]:
            if r["status"] != "ok" or r["variant"] not in ATTENTION_KINDS:
                continue
            kernel, mask = ATTENTION_KINDS[r["variant"]]
            stats, info = setup.tiles(mask)
            predicted = a["heads"] * setup.head_seconds(stats, kernel=kernel, info=info)
            rows.append(_row(g, f"attention {r['variant']} ({a['heads']} heads)", "seconds", r["median_s"], predicted))
    rates = gpu_rates("hopper")
    fit = family_efficiency("hopper")
    validation = [r for r in rows if r["role"] == "validation"]
    worst = max(validation, key=lambda r: abs(r["error"]))
    return {"run": run["file"], "tile": f"{GPU_TILE}x{GPU_TILE}",
            "fitted": {"rates_tflops": {k: v / 1e12 for k, v, _ in rates.rates},
                       "rate_sources": {k: s for k, _, s in rates.rates},
                       "rest_matmul_efficiency": fit["fitted"], "calibrated_on": fit["calibrated_on"]},
            "rows": rows, "validation_points": len(validation),
            "median_abs_error": sorted(abs(r["error"]) for r in validation)[len(validation) // 2],
            "worst": {k: worst[k] for k in ("geometry", "what", "quantity", "error")},
            "in_block_over_alone": in_block_over_alone(data),
            "provenance": "modeled-h200 vs measured-gpu-h200"}


__all__ = ["BLIND_RECORD", "BLOCK_KINDS", "ATTENTION_KINDS", "FITTED", "SAME_KERNEL", "block_setup", "modeled_block",
           "in_block_over_alone", "against_h200"]
