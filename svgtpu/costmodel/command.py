"""``svgtpu costmodel``: the command's logic (the CLI parses, builds the setup, calls this and prints).

Modes: the default models one setup (result, interval, tornado, scenario table); ``validate`` compares
with published timings; ``sparse_evidence`` lists where the central sparse efficiency comes from;
``sweep`` runs resolutions (C2/C5) or chip counts (multi-host); ``policy`` models a MaxDiffusion SVG policy
(a name or a MaxDiffusion YAML) on v6e-8.  Each returns ``(result, table)``.  The model models: the
write-up's reported numbers are set beside ours by the paper and the notebooks, not here.
"""

from __future__ import annotations

import dataclasses
import textwrap

from svgtpu import costmodel as cm
from svgtpu.costmodel.compiled import load_compiled, resolve
from svgtpu.costmodel.fits import ACCOUNTING_BLOCK, tpu_fit_accounting
from svgtpu.costmodel.plausible import BLOCK
from svgtpu.costmodel.policy import band_multiplier
from svgtpu.costmodel.realized import readings
from svgtpu.costmodel.validate import DENSE_CONTROL
from svgtpu.setting import PRODUCTION
from svgtpu.facts.tables import FIT_WIDTH, format_table
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


#: ``--validate``'s short role of a point in its table (the ``role`` and ``calibration_related`` of ``--json``).
ROLE_KEYS = {"calibration": "cal", "validation": "val", "validation-unconfirmed": "val?"}


def fill(text: str) -> str:
    """A note line wrapped to :data:`FIT_WIDTH`, its continuation indented (ids and paths kept whole)."""
    return textwrap.fill(text, FIT_WIDTH, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)


def percent(error: float) -> str:
    """A relative error as ``+2.3%`` (a rounding residue of a calibration point, ``+0.0%``, not ``-0.0%``)."""
    return f"{error if abs(error) >= 5e-4 else 0.0:+.1%}"


def validate_command(compiled=cm.AUTO) -> tuple[dict, str]:
    """``--validate``: each published point, modeled against published, and the calibration's notes.  The table
    keeps to :data:`FIT_WIDTH` (each point's setting is its id; device, kernel, model, pixels, steps: ``--json``)."""
    result = cm.validate(compiled)
    result["tpu_fit_accounting"] = account = tpu_fit_accounting(compiled)
    table = resolve(compiled)
    result["attention_realized"] = realized = [r for r in readings(table).values() if r] if table is not None else []
    rows = [{"id": r["id"], "role": ROLE_KEYS[r["role"]] + ("*" if r["calibration_related"] else ""),
             "measures": r["measures"], "pub s": r["published_s"], "model s": r["predicted_s"],
             "error": percent(r["error"])} for r in result["points"]]
    legend = ("role: cal calibration point, val validation, val* validation sharing a calibration point's setting "
              "or an instrument's run, val? validation with settings partly assumed; pub s: published seconds, model s: modeled; each "
              "point's device, chips, kernel, model, pixels and steps: --json")

    def line(name: str, s: dict) -> str:
        if not s["points"]:
            return f"{name}: none"
        return (f"{name}: {s['points']} points, median |error| {s['median_abs_error']:.1%}, worst "
                f"{s['worst_abs_error']:.1%} ({s['worst']})")
    clocks = [f"{d} clock {c['clock_ghz']:.3g} GHz, {c['mxus_per_core']} MXUs/core ({c['clock_source']})"
              for d, c in result["tpu_clocks"].items()]
    note = "\n".join(map(fill, [legend, line("independent validation", result["independent"]),
                      line("sharing a calibration point's setting or an instrument's run", result["calibration_related"]),
                      line("settings partly assumed", result["validation_unconfirmed"])]
                     + [f"{f}: calibrated on "
                        f"{x['calibrated_on'] or 'nothing (' + (x['efficiency_source'] or 'prior efficiencies') + ')'}"
                        + (f" (compute efficiency {x['fitted_compute_efficiency']:.3f})" if x["calibrated_on"] else "")
                        + (f": the fitted number is the non-attention ops' realized over static time "
                           f"{account['fitted_realized_over_static']:.3f} where a compiled block prices them; the "
                           f"compute efficiency is it times the {BLOCK[1]} block's matmul MXU share"
                           if f == "tpu" and account else "")
                        for f, x in result["families"].items()]
                     + ["gpu rows' eager PyTorch passes, counted from each run's code (bytes per token and hidden "
                        f"element per layer, wan2.1-14b; in place of the fused count, "
                        f"{result['eager_passes']['fused_bytes_per_element']:.0f}, at each GPU's HBM bandwidth): "
                        + ", ".join(f"{name} {x['bytes_per_element']:.0f} ({len(x['points'])} rows)"
                                    for name, x in result["eager_passes"]["paths"].items()) + " (--json: eager_passes)"]
                     + ([f"tpu fit absorbs: {account['published_s']:g} s published, "
                         f"{sum(account['priced_s'].values()):.1f} s priced from instruments, "
                         f"{account['left_for_other_ops_s']:.1f} s left to the non-attention ops, "
                         f"{account['left_for_layers_s']:.1f} s of them in the layers, whose compiled "
                         f"{ACCOUNTING_BLOCK[1]} block schedules {sum(account['compiled_other_ops_static_s'].values()):.1f} s "
                         f"(its attention kernel and collectives priced above): realized over static "
                         f"{account['realized_over_static_needed']:.3f}, "
                         f"{'inside' if account['inside_floor'] else 'under'} its floor {account['floor']:g}; "
                         f"with the host term at the ends of its range, " + ", ".join(
                             f"{h:g} s/step {r:.3f}" for h, r in account["realized_over_static_at_host_s_per_step"].items())
                         + " (--json: tpu_fit_accounting)",
                         f"tpu roofline form (every non-attention op at the roofline, the model before 2026-12-06): "
                         f"fitted matmul efficiency {account['roofline']['fitted_matmul_efficiency']:.3f}, at the "
                         f"block's static seconds {account['roofline']['matmul_efficiency_at_static']:.3f} (its reading "
                         f"of realized over static "
                         f"{account['roofline']['fitted_matmul_efficiency'] / account['roofline']['matmul_efficiency_at_static']:.3f}: "
                         f"its elementwise ops stay at their HBM time); the block's own matmul fusions "
                         f"{account['compiled_matmul_mxu_share']:.3f} of the MXU peak",
                         f"tpu collectives as compiled ({ACCOUNTING_BLOCK[1]} block): " + ", ".join(
                             f"{k['ops']} {kind}s, {k['asynchronous']} asynchronous"
                             for kind, k in account["collective_schedule"].items())
                         + (" (no compute overlaps them: the weight gathers are priced serially)"
                            if not any(k["asynchronous"] for k in account["collective_schedule"].values()) else
                            " (some overlap compute; the weight gathers are still priced serially)")] if account else [])
                     + ([f"tpu attention realized over static, each kernel family from a published kernel time "
                         f"({realized[0]['device']} ring hop, {realized[0]['source'].split(' (')[0]}): " + ", ".join(
                             f"{r['family']} {r['realized_over_static']:.3f} ({r['static_s'] * 1e3:.2f} ms static / "
                             f"{r['published_s'] * 1e3:.2f} ms published)" for r in realized)
                         + f"; plausible {realized[0]['bounds'][0]:g}..{realized[0]['bounds'][1]:g} "
                         f"(--json: attention_realized)"] if realized else [])
                     + [f"{f}: sparse stretch {x['sparse_stretch']:g}, not fitted (its plausible range "
                        f"{x['stretch_bounds'][0]:g}..{x['stretch_bounds'][1]:g} an interval knob)"
                        for f, x in result["families"].items() if x["stretch_bounds"]]
                     + [f"missed by more than {cm.MISS:.0%}: " + (", ".join(
                         f"{m['id']} {m['error']:+.1%}" for m in result["misses"]) or "none")]
                     + [f"{d} attention, each kernel's own efficiency (compiled schedule, not fitted): " + ", ".join(
                         f"{k['kernel']} {k['efficiency']:.3f}" for k in ks) + f" ({ks[0]['source']})"
                        for d, ks in result["tpu_attention_efficiency"].items()]
                     + clocks
                     + [f"compiled tile table: {result['compiled_table'] or 'none (priors)'}",
                        f"({result['provenance']})"]))
    svg = [{"policy": r["policy"].removeprefix("maxdiffusion-"), "role": ROLE_KEYS[r["role"]],
            "pub x": r["published_speedup"], "model x": r["predicted_speedup"], "error": percent(r["error"]),
            "pub s": r["published_svg_s"], "model s": r["predicted_svg_s"],
            "online x": r["online_body"]["predicted_speedup"], "online err": percent(r["online_body"]["error"])}
           for r in result["maxdiffusion_svg"]]
    svg_note = ("\n\n" + fill("MaxDiffusion's measured SVG runs on v6e-8 (x: speedup over the same-node dense "
                                "control; model: its fixed-M dense calls at our compiled fixed-maximum body, the "
                                "calibration's reading; online: at our compiled online-softmax body, the efficiency "
                                "refitted):")
                + "\n" + format_table(svg)) if svg else ""
    return result, format_table(rows) + "\n" + note + svg_note


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
    result["kernels"] = kernels_line(setup)
    return result, format_table(rows) + "\n" + fill(f"({kernels_line(setup)}; {result['provenance']})")


def kernels_line(setup: cm.Setup) -> str:
    """Which kernels a setup's numbers use: the dense reference's and the SVG layers', each with its pricing."""
    dense = setup.dense_kernel or setup.kernel
    return (f"kernels: dense {dense} ({setup.attention_pricing(dense)}), SVG {setup.kernel} "
            f"({setup.attention_pricing()})")


def claims_table(sides: dict) -> tuple[list[dict], str]:
    """The claim's value and interval of each :data:`~svgtpu.costmodel.claim_values.QUANTITIES` with the check's
    beside it (:func:`~svgtpu.costmodel.claim_values.claim_values`), as JSON rows and a table with its legend."""
    from svgtpu.costmodel.claim_values import QUANTITIES, SIDES, side_words
    rows, shown = [], []
    for q, what, claim, unit in QUANTITIES:
        row = {"quantity": q, "what": what, "claim": claim, "unit": unit}
        cells = {"quantity": f"{claim} {what}" if claim == "C2" or q == "speedup" else what}
        for side, values in sides.items():
            v = values["values"][q]
            row[side] = {"value": v["value"], "interval": v["interval"]}
            scale = 100 if unit == "fraction" else 1
            cells[side] = f"{scale * v['value']:.4g}"
            cells[f"{side} interval"] = " .. ".join(f"{scale * b:.4g}" for b in v["interval"])
        rows.append(row)
        shown.append(cells)
    legend = [f"{SIDES[side]} ({side_words(values)})" for side, values in sides.items()]
    legend.append("shares in percent, minutes per video; the speedup's interval is the joint one "
                  "(svgtpu.costmodel.joint_interval), the others the tornado's (below)")
    return rows, format_table(shown) + "\n" + "\n".join(map(fill, legend))


def model_command(setup: cm.Setup) -> tuple[dict, str]:
    """One setup: the claim's row first (one kernel for dense and SVG layers) with the user's-kernel check beside
    it (:mod:`svgtpu.costmodel.claim_values`), then the claim's split, chain, tornado and scenario table."""
    from svgtpu.costmodel.claim_values import QUANTITIES, claim_values
    sides = claim_values(setup)
    claim = sides["claim"]
    setup, result, band = claim["setup"], claim["result"], claim["band"]
    result["kernels"] = kernels_line(setup)
    result["sensitivity"] = band
    claim_rows, claim_text = claims_table(sides)
    result["claim_values"] = claim_rows
    result["check"] = ({k: sides["check"]["result"][k] for k in ("dense_kernel", "kernel", "speedup", "attention_share",
                                                                 "dense_seconds", "svg_seconds", "saved_seconds")}
                       | {"kernels": kernels_line(sides["check"]["setup"])}) if "check" in sides else None
    published = cm.published_svg_efficiency(setup.compiled)["range"]
    result["scenarios"] = cm.scenario_table(setup, published, central=(result, band))
    shown = {q for q, *_ in QUANTITIES}   # each claim's number once: in the claims table above
    rows = [{"quantity": k, "modeled": result[k], "interval_min": band[k]["min"], "interval_max": band[k]["max"]}
            for k in cm.SENSITIVITY_QUANTITIES if k not in shown]
    rows += [{"quantity": f"split: {k}", "modeled": result["contributions"][k],
              "interval_min": band[f"split_{k}"]["min"], "interval_max": band[f"split_{k}"]["max"]}
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
            f"{kernels_line(setup)}")
    if dev.clock_hz:
        head += f"; clock {dev.clock_hz / 1e9:.3g} GHz from {dev.clock_source}"
    head = "\n".join(textwrap.fill(line, FIT_WIDTH, subsequent_indent="  ") for line in head.splitlines())
    unreachable = ("\n" + fill(f"(ends no efficiency reaches: {', '.join(band['unreachable'])}; cut to the last "
                               f"possible value: {', '.join(f'{k} -> {v:.3g}' for k, v in band['cut'].items()) or 'none'})")
                   if band["unreachable"] else "")
    table = "\n\n".join([head, claim_text, "the claim's side, more quantities with the tornado's interval:\n"
                         + format_table(rows), format_table(chain),
                         "speedup tornado (calibration refitted at each end):\n" + format_table(tornado) + unreachable,
                         "scenarios (recipe and kernel choices):\n" + format_table(scenarios, fit=True)])
    return result, table


def sweep_command(sweep: str, resolution: str | None, setup: cm.Setup) -> tuple[dict, str]:
    """``--sweep resolution`` (the C2/C5 curve) or ``--sweep chips`` (multi-host) around ``setup``."""
    if sweep == "resolution":
        rows = cm.sweep_resolution(setup)
        result = {"model": setup.model.name, "device": setup.device.name, "chips": setup.chips, "steps": setup.steps,
                  "cfg": setup.cfg, "kept": setup.kept, "multiplier": setup.multiplier, "sweep": rows,
                  "kernel": setup.kernel, "dense_kernel": setup.dense_kernel or setup.kernel,
                  "kernels": kernels_line(setup), "provenance": setup.provenance}
        table = [{"resolution": r["resolution"], "L": r["L"], "share": r["attention_share"],
                  "share e2e": r["attention_share_end_to_end"], "dense": r["dense_minutes"], "svg": r["svg_minutes"],
                  "x": r["speedup"], "saved": r["saved_minutes"]} for r in rows]
        legend = ("share: self-attention's share of a dense forward pass (e2e: of the dense video); dense, svg, saved: minutes; "
                  f"x: SVG's speedup ({kernels_line(setup)}; {setup.provenance})")
        return result, format_table(table) + "\n" + fill(legend)
    from svgtpu.costmodel.multihost import multihost_sweep
    fields = {k: getattr(setup, k) for k in ("steps", "cfg", "block_q", "block_kv", "kept", "multiplier",
                                             "temporal_fraction", "efficiency", "weights", "sparse_efficiency",
                                             "parts", "kernel", "dense_kernel", "compiled")}
    result = multihost_sweep(setup.model.name, resolution or PRODUCTION.resolution, setup.device.name, **fields)
    rows = [{"chips": r["chips"], "slices": r["slices"], "split": r["split"], "pass": r["chips_per_pass"],
             "heads": r["heads_per_chip"], "slots": f"{r['head_slot_use']:.0%}", "dense": r["dense_minutes"],
             "svg": r["svg_minutes"], "x": r["speedup"], "x no comm": r["speedup_without_communication"],
             "comm": f"{r['communication_share_svg']:.1%}", "pick": "yes" if r["picked"] else ""}
            for r in result["rows"]]
    legend = fill("pass: chips per transformer pass; heads: per chip; slots: share of head slots used; dense, svg: minutes "
                  "of the video; x: SVG's speedup (x no comm: without communication); comm: communication's share "
                  "of the SVG video; pick: the configuration picked for the chip count")
    why = "\n".join(fill(f"{r['chips']} chips: {r['why']}") for r in result["picked"])
    result["kernels"] = kernels_line(setup)
    return result, (format_table(rows) + f"\n{legend}\n\npicked:\n{why}\n"
                    + fill(f"({kernels_line(setup)}; {result['provenance']})"))


def policy_command(policy_name: str, compiled) -> tuple[dict, str]:
    """``--policy NAME`` or ``--policy FILE.yml``: MaxDiffusion's SVG run of that policy on v6e-8 (its attention
    configuration from the file, else the docs' example), dense and SVG denoising and their ratio, priced term
    by term with the calibrated sparse stretch (:mod:`svgtpu.costmodel.sparse_layers`)."""
    from pathlib import Path

    from svgtpu.costmodel import sparse_layers
    from svgtpu.costmodel.policy import POLICY_NAMES, flops_saved, get_policy, read_yaml
    from svgtpu.geometry import VideoGeometry

    compiled = resolve(compiled)
    if policy_name in POLICY_NAMES:
        (policy, video), config = get_policy(policy_name), {}
    elif Path(policy_name).suffix in (".yml", ".yaml") or Path(policy_name).exists():
        policy, video, config = read_yaml(policy_name)
    else:
        get_policy(policy_name)   # one line naming the policies and the file form
    # the dense calls priced as the calibration prices them (validate.DENSE_CONTROL)
    layout = dataclasses.replace(sparse_layers.attention_layout(config), dense_kernel=DENSE_CONTROL)
    geometry = VideoGeometry.from_pixels(video["width"], video["height"], video["num_frames"])
    base = cm.calibrated_setup("wan2.2-a14b", geometry, "v6e", compiled=compiled, steps=video["num_inference_steps"],
                               cfg=bool(video["do_classifier_free_guidance"]), chips=layout.chips)
    setup = sparse_layers.run_setup(base, layout)
    run = sparse_layers.speedup(setup, layout, policy)
    tiles = {str(d): sparse_layers.sparse_tiles(setup, layout, band_multiplier(geometry, d, policy.band_rule))
             for d in sorted(set(policy.densities))}
    result = {"speedup": run["speedup"], "dense_seconds": run["dense_seconds"], "svg_seconds": run["svg_seconds"],
              "policy": policy.as_dict(), "setting": dataclasses.asdict(layout), "video": video,
              "calls": run["svg"]["calls"], "svg_terms": run["svg"]["terms"], "dense_terms": run["dense"]["terms"],
              "dense_call": run["dense"]["dense_call"], "tiles": tiles, "sparse_stretch": setup.sparse_stretch,
              "flops_saved": flops_saved(policy, setup.model, geometry, setup.steps),
              "efficiency": dataclasses.asdict(setup.efficiency), "provenance": setup.provenance}
    terms = run["svg"]["terms"]
    rows = [{"part": k, "seconds": v} for k, v in terms.items() if k != "sparse"]
    rows += [{"part": f"sparse calls: {k}", "seconds": v} for k, v in terms["sparse"].items()]
    tile_rows = [{"policy density": d, "kept pairs": t["density"],
                  **{k: t[k] for k in ("full", "tail", "rows", "longest_row", "idle", "tile_density")}}
                 for d, t in tiles.items()]
    sparse = run["svg"]["calls"]["sparse"]
    calls = ", ".join(f"{n} at density {d}" for d, n in sparse.items())
    head = (f"policy {policy.name}: densities {policy.densities[0]:g} / {policy.densities[1]:g} (high / low noise), "
            f"steps [{policy.steps[0]}, {policy.steps[1]}), layers [{policy.layers[0]}, {policy.layers[1]}), "
            f"flow shift {policy.split.flow_shift:g} -> sparse calls per pass: {calls}\n"
            f"dense {run['dense_seconds']:.1f} s, SVG {run['svg_seconds']:.1f} s: speedup {run['speedup']:.3f}x "
            f"(sparse stretch {setup.sparse_stretch:.3f}; transformer FLOPs saved {result['flops_saved']:.1%})  "
            f"[{setup.provenance}]")
    head = "\n".join(map(fill, head.splitlines()))
    return result, "\n\n".join([head, "SVG denoising by part:\n" + format_table(rows),
                                 f"tiles of one sparse call ({layout.sparse_block_q}x{layout.sparse_block_kv}):\n"
                                 + format_table(tile_rows)])


__all__ = ["resolve_slice", "compiled_table", "kernels_line", "ROLE_KEYS", "fill", "percent", "validate_command", "sparse_evidence_command",
           "claims_table", "model_command", "sweep_command", "policy_command"]
