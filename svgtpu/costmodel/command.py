"""``svgtpu costmodel``: the command's logic (the CLI only parses, calls this and prints).

Modes: the default models one setup (result, interval, tornado, scenario table); ``validate`` compares
with published timings; ``sparse_evidence`` lists where the central sparse efficiency comes from;
``sweep`` runs resolutions (C2/C5) or chip counts (multi-host).  Each returns ``(result, table)``.
"""

from __future__ import annotations

import dataclasses

from svgtpu import costmodel as cm
from svgtpu.costmodel.compiled import load_compiled
from svgtpu.production import PRODUCTION
from svgtpu.facts.claims import REPORTED, reported_json
from svgtpu.facts.tables import format_table
from svgtpu.warmup import DEFAULT_KEPT
from svgtpu.errors import BadInput


def resolve_slice(chips: str, device: str | None) -> tuple[str, int]:
    """``--chips`` (a chip count, or a slice name such as ``v7x-8``) and ``--device`` as (device, chips)."""
    text = str(chips).strip()
    if text.isdigit():
        if int(text) <= 0:
            raise BadInput(f"chips must be a positive chip count or a slice name like v7x-8, got {text}")
        return device or PRODUCTION.device, int(text)
    name, n = cm.parse_slice(text)
    if device not in (None, name):
        raise BadInput(f"--chips {text} names a {name} slice but --device is {device}")
    return name, n


def compiled_table(path: str | None):
    """``--compiled-tiles``: ``None`` (the default table when it exists), ``none`` (priors), or a path."""
    if path is None:
        return cm.AUTO
    return None if path == "none" else load_compiled(path)


def validate_command(compiled=cm.AUTO) -> tuple[dict, str]:
    result = cm.validate(compiled)
    rows = [{"id": r["id"], "role": r["role"], "related to calibration": "yes" if r["calibration_related"] else "",
             **{k: r[k] for k in ("device", "chips", "model", "pixels", "steps", "measures", "published_s",
                                  "predicted_s", "error")}} for r in result["points"]]

    def line(name: str, s: dict) -> str:
        if not s["points"]:
            return f"{name}: none"
        return (f"{name}: {s['points']} points, median |error| {s['median_abs_error']:.1%}, worst "
                f"{s['worst_abs_error']:.1%} ({s['worst']})")
    clocks = "; ".join(f"{d} {c['clock_ghz']:.3g} GHz, {c['mxus_per_core']} MXUs/core ({c['clock_source']})"
                       for d, c in result["tpu_clocks"].items())
    note = "\n".join([line("independent validation", result["independent"]),
                      line("sharing a calibration point's setting", result["calibration_related"]),
                      line("settings partly assumed", result["validation_unconfirmed"])]
                     + [f"{f}: calibrated on {x['calibrated_on'] or 'nothing (prior efficiencies)'}"
                        + (f" (compute efficiency {x['fitted_compute_efficiency']:.3f})" if x["calibrated_on"] else "")
                        for f, x in result["families"].items()]
                     + [f"TPU clocks: {clocks}", f"compiled tile table: {result['compiled_table'] or 'none (priors)'}",
                        f"({result['provenance']})"])
    return result, format_table(rows) + "\n" + note


def sparse_evidence_command(setup: cm.Setup) -> tuple[dict, str]:
    result = cm.sparse_efficiency_evidence(setup)
    published = cm.published_svg_efficiency(setup.compiled)
    result["published_svg"] = published
    rows = [{"source": "central (modeled sparse layer: kernel + SVG's extra work)", "value": result["central"]}]
    if "compiled_kernel" in result:
        k = result["compiled_kernel"]
        rows += [{"source": f"compiled: {k['kernel']} sparse / (dense x density), sparse overhead vs our dense",
                  "value": k["sparse_over_dense_x_density"]},
                 {"source": "compiled: sparse kernel over its MXU roofline", "value": k["sparse_over_roofline"]},
                 {"source": "compiled: dense kernel over its MXU roofline", "value": k["dense_over_roofline"]}]
    rows.append({"source": "SVG's profiling and layout transform, share of the sparse layer",
                 "value": result["svg_extra_work"]["share_of_sparse_layer"]})
    rows += [{"source": f"published SVG run {r['id']} (a scenario, not the central value)",
              "value": r["implied_from_speedup"]} for r in published["rows"]]
    return result, format_table(rows) + f"\n(attention: {result['attention_pricing']}; {result['provenance']})"


def build_setup(args, device=None) -> cm.Setup:
    """The setup the arguments describe (``device``: a measured :class:`~svgtpu.costmodel.DeviceSpec`, e.g.
    this CPU's, instead of ``--device``)."""
    compiled = compiled_table(args.compiled_tiles)
    if device is None:
        name, chips = resolve_slice(args.chips, args.device)
        device = cm.get_device(name, compiled if compiled != cm.AUTO else cm.default_compiled())
    elif str(args.chips).isdigit():
        chips = int(args.chips)
    else:
        raise BadInput(f"--chips must be a chip count with a measured device, got {args.chips!r}")
    if not args.mxu_width_penalty:
        device = dataclasses.replace(device, matmul_tile=None)
    if args.resolution is None and args.model == "toy":
        from svgtpu.toy.dit import DiTConfig   # the toy's own grid (imports JAX)
        geometry = DiTConfig().geometry
    else:
        geometry = cm.get_geometry(args.resolution or PRODUCTION.resolution, "--resolution")
    kept = None if args.multiplier is not None else (DEFAULT_KEPT if args.kept is None else args.kept)
    setup = cm.calibrated_setup(args.model, geometry, device, compiled=compiled, chips=chips, steps=args.steps,
                                cfg=args.cfg, block_q=args.block_q, block_kv=args.block_kv, kept=kept,
                                multiplier=args.multiplier, temporal_fraction=args.temporal_fraction,
                                cfg_split=args.cfg_split, weights=args.weights, kernel=args.kernel,
                                dense_kernel=args.dense_kernel, sparse_efficiency=args.sparse_efficiency,
                                parts=frozenset(cm.PARTS) - set(args.exclude))
    overrides = {k: v for k, v in (("matmul", args.matmul_efficiency), ("attention", args.attention_efficiency),
                                   ("memory", args.memory_efficiency), ("vector_scale", args.vector_scale))
                 if v is not None}
    return dataclasses.replace(setup, efficiency=dataclasses.replace(setup.efficiency, **overrides)) if overrides \
        else setup


def model_command(setup: cm.Setup) -> tuple[dict, str]:
    """One setup: the result, its interval and tornado, and the scenario table."""
    result = cm.model_video(setup)
    result["sensitivity"] = band = cm.sensitivity(setup)
    published = cm.published_svg_efficiency(setup.compiled)["range"]
    result["scenarios"] = cm.scenario_table(setup, published)
    reported = {"attention_share": REPORTED["C2", "attention_share_1440p"],
                "attention_share_end_to_end": REPORTED["C2", "attention_share_1440p"],
                "speedup": REPORTED["C1", "speedup"], "saved_minutes": REPORTED["C1", "minutes_saved"]}
    rows = [{"quantity": k, "modeled": result[k], "interval_min": band[k]["min"], "interval_max": band[k]["max"],
             "reported": reported.get(k, "")} for k in cm.SENSITIVITY_QUANTITIES]
    rows += [{"quantity": f"split: {k}", "modeled": result["contributions"][k],
              "interval_min": band[f"split_{k}"]["min"], "interval_max": band[f"split_{k}"]["max"], "reported": ""}
             for k in cm.SENSITIVITY_SPLIT]
    chain = [{"variant": r["variant"], "minutes": r["seconds"] / 60, "speedup_vs_dense": r["speedup_vs_dense"]}
             for r in result["chain"]]
    tornado = [{k: r[k] for k in ("knob", "range", "value_at_low", "value_at_high", "swing")}
               for r in cm.tornado_rows(band, "speedup")]
    scenarios = [{k: r[k] for k in ("scenario", "speedup", "speedup_min", "speedup_max", "saved_minutes")}
                 for r in result["scenarios"]]
    g, dev = setup.geometry, setup.device
    head = (f"{setup.model.name} at {g.name or g} on {dev.name} x{setup.chips} chips ({dev.cores} TensorCore(s) per "
            f"chip), {setup.steps} steps, cfg={setup.cfg}, tiles {setup.block_q}x{setup.block_kv}  [{setup.provenance}]\n"
            f"attention: {result['attention_pricing']}")
    if dev.clock_hz:
        head += f"; clock {dev.clock_hz / 1e9:.3g} GHz from {dev.clock_source}"
    unreachable = f"\n(ends no efficiency reaches, left out: {', '.join(band['unreachable'])})" if band["unreachable"] else ""
    table = "\n\n".join([head, format_table(rows), format_table(chain),
                         "speedup tornado (calibration refitted at each end):\n" + format_table(tornado) + unreachable,
                         "scenarios (recipe and kernel choices):\n" + format_table(scenarios)])
    return result, table


def sweep_command(args, setup: cm.Setup) -> tuple[dict, str]:
    if args.sweep == "resolution":
        rows = cm.sweep_resolution(setup)
        result = {"model": setup.model.name, "device": setup.device.name, "chips": setup.chips, "steps": setup.steps,
                  "cfg": setup.cfg, "kept": setup.kept, "multiplier": setup.multiplier, "sweep": rows,
                  "reported": reported_json(), "provenance": setup.provenance}
        return result, format_table(rows) + (f"\n({setup.provenance}; reported C2 at {PRODUCTION.resolution}: "
                                             f"{REPORTED['C2', 'attention_share_1440p']:.1%})")
    from svgtpu.costmodel.multihost import multihost_sweep
    fields = {k: getattr(setup, k) for k in ("steps", "cfg", "block_q", "block_kv", "kept", "multiplier",
                                             "temporal_fraction", "efficiency", "weights", "sparse_efficiency",
                                             "parts", "kernel", "dense_kernel", "compiled")}
    result = multihost_sweep(setup.model.name, args.resolution or PRODUCTION.resolution, setup.device.name, **fields)
    columns = ["chips", "slices", "split", "chips_per_pass", "heads_per_chip", "head_slot_use", "dense_minutes",
               "svg_minutes", "speedup", "speedup_without_communication", "communication_share_svg", "picked"]
    why = "\n".join(f"{r['chips']} chips: {r['why']}" for r in result["picked"])
    return result, format_table(result["rows"], columns) + f"\n\npicked:\n{why}\n({result['provenance']})"


def costmodel_command(args, device=None) -> tuple[dict, str]:
    """``svgtpu costmodel``: the mode the arguments ask for (``device``: a measured spec for ``--device cpu``)."""
    if args.validate:
        return validate_command(compiled_table(args.compiled_tiles))
    setup = build_setup(args, device)
    if args.sparse_evidence:
        return sparse_evidence_command(setup)
    if args.sweep:
        return sweep_command(args, setup)
    return model_command(setup)


__all__ = ["resolve_slice", "compiled_table", "build_setup", "validate_command", "sparse_evidence_command",
           "model_command", "sweep_command", "costmodel_command"]
