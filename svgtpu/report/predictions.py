"""Predictions frozen before the TPU run: what the package expects ``svgtpu bench tpu`` to measure (``svgtpu predict``).

For every quantity the run measures (:func:`svgtpu.bench.tpu.quantities`, on each prepared slice) the cost model
(:mod:`svgtpu.costmodel`, priced from the compiled tile table where it holds the tile, ``modeled-v6e``) gives a
central value and an interval: the root sum of squares of the one-at-a-time swings of its unknown constants
(:data:`svgtpu.costmodel.KNOBS`, each at both ends with the calibration refitted) and of the sparse-layer evidence
(:func:`svgtpu.costmodel.sparse_knobs`), the rule ``docs/verdicts.md`` states for C1, each knob applied to the
setups it applies to.  A quantity that is a ratio of two timed attention programs (:class:`Ratio`: the kernels
section's, C5's exponents) also carries each program's own realized-over-static factor: the knob
``attention_over_matmul`` (a TPU's compiled attention over the plausible range of its realized over static time)
applied to one program at a time, since nothing ties the two programs' stalls; the knobs moving both alike leave
such a ratio where its static schedules put it.  Where a named source already prices the pair's relative factor
(the sparse speedups: ``sparse_stretch``, sparse tiles against dense ones) it is not counted twice.  Each quantity
also says which measured values would **refute the prediction** (the measured interval, its IQR widened by the
noise floor, wholly outside the predicted one) and, where a claim's verdict reads it, which would **flip the
verdict** (the rule's threshold: ``docs/verdicts.md``): C2's interval rule around 0.882 on the 1440p share, C4's
direction rule at 1 on the fast path's speedup, C5's interval rule around 2 on the Splash exponent.  The claims' current verdict values (``figures/results.json``) are recorded beside them.

A predictions file is dated (``figures/predictions/<date>.json``), committed, and never edited after its date:
``tests/test_predictions.py`` compares each committed file's sha256 with the one listed in
:data:`FROZEN`; a new prediction is a new dated file.  ``compare`` puts a run file (``figures/tpu-runs/``)
beside the predictions, quantity by quantity: :mod:`svgtpu.report.prediction_outcomes`.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from pathlib import Path
from typing import Callable

from svgtpu.costmodel.compiled import AUTO
from svgtpu.errors import BadInput
from svgtpu.facts.claims import REPORTED
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.inputs.predictions import read_predictions

PREDICTIONS_DIR = Path("figures", "predictions")
#: The frozen files and their sha256 (the test compares them; a file is never edited once listed).
FROZEN: dict[str, str] = {
    "2026-12-04.json": "c0f355a2fcfe162cd3edcd1f495840220858bbeaa9e58933efd8b69628145040",
    "2026-12-06.json": "4019a8fba50845b8f3c0ac0e6590d35a716977e7d2b639544011d74f121cffda",
    "2026-12-06-2.json": "ae0f24c49a21d4c2221f639c27173a0b9174c9f405f2548dc81cfafb7a51bbe6",
    "2026-12-06-3.json": "73664505ef591acc0d02dfdcd9008c5871afb3136d638b3e3138978fb91dcdbb",
}
#: The thresholds of ``docs/verdicts.md``: C4 direction (ours without / with the fast path above 1), C2 interval
#: around the reported share.
C4_DIRECTION = 1.0


#: Which of the run's quantities each claim's verdict reads, and why C1 and C3 read none.
CLAIMS_MEASURED = {
    "C1": "not measured: bench tpu times one block, not a video (its block speedups are predicted as quantities, "
          "no verdict reads them)",
    "C2": f"block_1440p_attention_share_splash (dense Splash, the write-up's kernel), interval rule around "
          f"{REPORTED['C2', 'attention_share_1440p']:g}; block_1440p_attention_share_ours the second instrument by "
          "the agreement rule (v6e-8 only: a 1440p block does not fit one chip)",
    "C3": "not measured: partial tiles are counted exactly (computed), no timing",
    "C4": f"kernels_1440p_fast_path_speedup_svg (ours without / with the fast path at the production tile, SVG's "
          f"mask), direction rule at {C4_DIRECTION:g}",
    "C5": "block_attention_exponent_splash (self-attention seconds ~ L^k, 720p -> 1440p), interval rule around 2; "
          "block_attention_exponent_ours the second instrument by the agreement rule (v6e-8 only)",
}


def run_setups(model, geometry: str, chips: int, kept: float | None = None, ours_at: str = "best",
            compiled=AUTO) -> dict:
    """The cost model's setups of one run setting: ``ours`` at our best tile (``ours_at="production"``: at the
    production tile), ``splash`` at Splash's, as the run times them; every SVG layer sparse (the run times a
    sparse block), ``chips`` chips (several: the CFG pair side by side, as the run's block runs); priced from the
    compiled tile table ``compiled`` (default: the one the cost model reads, :data:`svgtpu.costmodel.compiled.AUTO`)."""
    from svgtpu.bench.tpu import FULL, best_tiles, production_tiles
    from svgtpu.costmodel import calibrated_setup
    from svgtpu.setting import mask_density
    out = {}
    for kernel in ("ours", "splash"):
        bq, bkv, _ = production_tiles(FULL) if kernel == "ours" and ours_at == "production" else \
            best_tiles(kernel, geometry, FULL)
        out[kernel] = calibrated_setup(model, geometry, "v6e", chips=chips, cfg_split=chips > 1, block_q=bq,
                                       block_kv=bkv, kernel=kernel, kept=mask_density(kept, None)[0], warmup_steps=0.0,
                                       warmup_layers=0.0, compiled=compiled)
    return out


def head_seconds(s, kernel: str, mask: str, fast_path: bool = True) -> float:
    stats, info = s.tiles(mask)
    seconds = s.head_seconds(stats, fast_path=fast_path, kernel=kernel, info=info)
    return seconds * (s.sparse_stretch if mask != "dense" else 1.0)   # the stretch the sparse layers' evidence fits


def _share(s) -> float:
    from svgtpu.costmodel import forward_breakdown
    b = forward_breakdown(s)
    return b["self_attention"] / sum(b.values())


def _block_speedup(dense, sparse) -> float:
    from svgtpu.costmodel import dit_seconds
    return dit_seconds(dense, "dense", True) / dit_seconds(sparse, "svg-aligned", True)


def quantity_functions(sizes=None) -> dict:
    """``{(id, chips): (setups, fn)}``: each quantity the run measures on each slice, as a function of the
    setups (:func:`run_setups`); ids as :func:`svgtpu.bench.tpu.quantities` names them."""
    from svgtpu.bench.tpu import FULL, SLICES
    sizes = sizes or FULL
    out = {}
    for chips in SLICES:
        for g in sizes.kernel_geometries:
            for prefix, at in (("", "production"), ("best_", "best")):
                s = run_setups(sizes.model, g, 1, ours_at=at)
                for mask in ("svg", "svg-aligned"):
                    out[f"kernels_{g}_{prefix}fast_path_speedup_{mask}", chips] = (s, Ratio(
                        lambda s, m=mask: head_seconds(s["ours"], "ours", m, False),
                        lambda s, m=mask: head_seconds(s["ours"], "ours", m, True)))
                    out[f"kernels_{g}_{prefix}sparse_speedup_{mask}", chips] = (s, Ratio(
                        lambda s: head_seconds(s["ours"], "ours", "dense"),
                        lambda s, m=mask: head_seconds(s["ours"], "ours", m), untied=False))   # sparse_stretch's
                for mask in ("dense", "svg", "svg-aligned"):
                    out[f"kernels_{g}_{prefix}ours_over_splash_{mask}", chips] = (s, Ratio(
                        lambda s, m=mask: head_seconds(s["ours"], "ours", m),
                        lambda s, m=mask: head_seconds(s["splash"], "splash", m)))
        blocks = [("block", g, sizes.model, (sizes.kept,)) for g in sizes.block_geometries(chips)]
        blocks.append(("moderate", sizes.moderate_geometry, sizes.moderate_model, sizes.moderate_kept))
        for section, g, model, kepts in blocks:
            s = run_setups(model, g, chips)
            for kernel in ("splash", "ours"):
                out[f"{section}_{g}_attention_share_{kernel}", chips] = (s, lambda s, k=kernel: _share(s[k]))
            for kept in kepts:
                name = "svg-ours" if len(kepts) == 1 else f"svg-ours-kept{kept:g}"
                sk = run_setups(model, g, chips, kept)
                out[f"{section}_{g}_block_speedup_{name}", chips] = (
                    sk, lambda s: _block_speedup(s["splash"], s["ours"]))
        from svgtpu.geometry import get_geometry
        by_length = sorted(sizes.block_geometries(chips), key=lambda g: get_geometry(g).L)
        if len(by_length) < 2:   # one block resolution on this slice: no exponent to measure
            continue
        low, high = (run_setups(sizes.model, g, chips) for g in (by_length[0], by_length[-1]))
        both = {f"{k}@low": v for k, v in low.items()} | {f"{k}@high": v for k, v in high.items()}
        per_length = math.log(high["ours"].geometry.L / low["ours"].geometry.L)
        for kernel in ("splash", "ours"):
            out[f"block_attention_exponent_{kernel}", chips] = (both, Ratio(
                lambda s, k=kernel: _attention_seconds(s[f"{k}@high"]),
                lambda s, k=kernel: _attention_seconds(s[f"{k}@low"]),
                then=lambda r, n=per_length: math.log(r) / n))
    return out


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A quantity the run measures from two timed programs: ``then(num(setups) / den(setups))`` (seconds each;
    ``then`` the identity, or C5's exponent: the log over the log of the resolutions' length ratio).  ``untied``:
    :func:`predict_one` moves each program's realized-over-static factor alone (module doc); ``False`` where a
    named source already prices the pair's relative factor."""

    num: Callable
    den: Callable
    then: Callable[[float], float] = lambda r: r
    untied: bool = True

    def __call__(self, setups: dict) -> float:
        return self.then(self.num(setups) / self.den(setups))

    def one_side(self, side: str, setups: dict, moved: dict) -> float:
        """The quantity with only the ``side`` program (``num`` or ``den``) priced from ``moved``."""
        num, den = (moved, setups) if side == "num" else (setups, moved)
        return self.then(self.num(num) / self.den(den))


#: The realized-over-static factor each program of a :class:`Ratio` carries alone: the TPU reading of this knob.
REALIZED_KNOB = "attention_over_matmul"
#: How :func:`predict_one` names a :class:`Ratio`'s one-program swings.
SIDES = {"num": "the numerator's program alone", "den": "the denominator's program alone"}


#: A predicted quantity the slice's run never measures: its block does not fit the slice's chips
#: (:attr:`svgtpu.bench.tpu.Sizes.block_geometries_by_chips`).
NOT_ON_SLICE = "not on this slice"


def never_measured(qid: str, chips: int) -> bool:
    """Whether the full run on ``chips`` chips never measures ``qid``: no program of its section group (or, for
    C5's exponent, fewer than two block resolutions) is in the slice's run."""
    from svgtpu.bench.tpu import FULL, programs
    groups = {(p.section, p.geometry) for p in programs(FULL, chips)}
    if qid.startswith("block_attention_exponent_"):
        return sum(section == "block" for section, _ in groups) < 2
    return not any(qid.startswith(f"{section}_{g}_") for section, g in groups)


def _attention_seconds(s) -> float:
    """The modeled dense self-attention seconds of one forward pass (C5's exponent is their log-log slope)."""
    from svgtpu.costmodel import forward_breakdown
    return forward_breakdown(s)["self_attention"]


def predict_one(setups: dict, fn) -> dict:
    """``fn``'s central value and its interval over the unknown constants (module doc), with the swings.  As
    :func:`svgtpu.costmodel.sensitivity` does, an end the calibration rules out (no efficiency meets the
    calibration point there) is cut to the last possible value, found by bisection, and listed in ``cut``."""
    from svgtpu.costmodel import KNOBS, at_knob, sparse_knobs
    from svgtpu.costmodel.sensitivity import reachable_end
    from svgtpu.costmodel.validate import Unreachable
    central = fn(setups)
    first = next(iter(setups.values()))
    moved_by = lambda knob, value: {k: at_knob(s, knob, value) if knob.applies(s) else s  # noqa: E731
                                    for k, s in setups.items()}
    swings, cut = {}, {}

    def swing(name: str, knob, at) -> None:
        ends = []
        for value in knob.range(first):
            try:
                ends.append(at(knob, value))
            except Unreachable:
                reached = reachable_end(knob, value, knob.get(first), at)
                if reached is not None:
                    cut[f"{name} = {value}"] = reached[0]
                    ends.append(reached[1])
        if ends:
            swings[name] = ends

    knobs = KNOBS + sparse_knobs(first)
    for knob in knobs:
        if any(knob.applies(s) for s in setups.values()):
            swing(knob.path, knob, lambda knob, value: fn(moved_by(knob, value)))
    if isinstance(fn, Ratio) and fn.untied:
        realized = next(k for k in knobs if k.path == REALIZED_KNOB)
        for side, words in SIDES.items():
            swing(f"{REALIZED_KNOB}: {words}", realized,
                  lambda knob, value, side=side: fn.one_side(side, setups, moved_by(knob, value)))
    lows = [min(0.0, min(ends) - central) for ends in swings.values()]
    highs = [max(0.0, max(ends) - central) for ends in swings.values()]
    moved = width_sources(swings, central)
    return {"value": central, "interval": [central - math.sqrt(sum(x * x for x in lows)),
                                           central + math.sqrt(sum(x * x for x in highs))],
            "swings": swings, "cut": cut, "width_from": moved,
            "width_note": ("its interval's width: the swings of " + ", ".join(moved)) if moved else
                          "zero width: no named source moves it"}


def width_sources(swings: dict, central: float) -> list[str]:
    """The named sources (knob paths) whose swings move a prediction off its central value, beyond rounding."""
    return [path for path, ends in swings.items() if any(not math.isclose(e, central, rel_tol=1e-12) for e in ends)]


def flips(qid: str) -> dict | None:
    """The measured values that would flip a claim's verdict (``docs/verdicts.md``), where a verdict row reads
    ``qid`` as its first instrument: the row of :data:`svgtpu.report.verdicts.VERDICT_ROWS` whose evidence holds the
    results key :data:`svgtpu.facts.tpu_runs.CLAIM_QUANTITIES` gives ``qid`` (C2: the 1440p Splash share; C4: the
    fast path at the production tile at 1440p on SVG's mask; C5: the Splash exponent); else ``None``."""
    from svgtpu.facts.tpu_runs import CLAIM_QUANTITIES
    from svgtpu.report.verdicts import VERDICT_ROWS
    keys = {f"{c}.{n}" for (c, n), q in CLAIM_QUANTITIES.items() if q == qid}
    row = next((r for r in VERDICT_ROWS if not r.check and keys & set(r.evidence)), None)
    if row is None:
        return None
    if row.rule == "direction":
        return {"claim": row.claim, "rule": "direction", "threshold": C4_DIRECTION,
                "flips_if": f"measured median at or below {C4_DIRECTION:g}: contradicted (the change does not lower "
                            "latency); above it: direction only"}
    t = row.reported
    return {"claim": row.claim, "rule": "interval", "threshold": t,
            "flips_if": f"measured interval (IQR widened by the noise floor) wholly below {t:g}: contradicted "
                        f"(lower); wholly above: contradicted (higher); holding it: reproduced if at most 20 % of its "
                        "value wide, else consistent"}


def expects(p: dict, flip: dict) -> str:
    """Which way the package expects a claim's measurement to fall against its flip threshold: the side of the
    predicted central value, and whether the predicted interval stays on it."""
    t = flip["threshold"]
    side = "above" if p["value"] > t else "below"
    lo, hi = p["interval"]
    whole = (lo > t) if side == "above" else (hi < t)
    return f"{side} {t:g}" + ("" if whole else f" (its interval reaches across {t:g})")


def check_freezable(data: dict) -> dict:
    """``data`` (:func:`predict`) if it may be frozen (docs/verdicts.md, "Frozen predictions"): no prediction a verdict
    reads has its central value on its flip threshold (it could not say which way the verdict falls); else
    :class:`BadInput` naming each."""
    on = [f"{slice_} {qid} = {p['value']:.6g}" for slice_, qs in data.get("quantities", {}).items() for qid, p in qs.items()
          if p.get("verdict_flip") and math.isclose(p["value"], p["verdict_flip"]["threshold"], rel_tol=1e-6)]
    if on:
        raise BadInput(f"refusing to freeze: central value on its verdict's flip threshold ({'; '.join(on)}); a "
                       "prediction must say which way the verdict falls")
    return data


def claims_now(results_path: str | Path | None = None) -> dict:
    """The claims' verdict values as the results file holds them now (value, interval, provenance): C1's and C2's
    the claim rows of :mod:`svgtpu.costmodel.claim_values` (the one definition every output reads), C4's and C5's
    their verdict rows' evidence."""
    from svgtpu.costmodel.claim_values import ROWS
    from svgtpu.facts.results import load_results
    from svgtpu.setting import PRODUCTION
    path = Path(results_path) if results_path else REPO_ROOT / "figures" / "results.json"
    claims = load_results(path)["claims"]
    keys = {}
    for key, _side, _quantity, kernel, role, _label in ROWS:   # each claim's first row: its central value
        claim, name = key.format(resolution=PRODUCTION.resolution).split(".", 1)
        if role == "claim" and kernel is None:
            keys.setdefault(claim, name)
    keys |= {"C4": "compiled_fast_path_speedup_svg", "C5": "compiled_cycles_exponent"}
    out = {}
    for claim, key in keys.items():
        e = claims.get(claim, {}).get(key)
        if e is not None:
            out[claim] = {"key": f"{claim}.{key}", "value": e["value"], "interval": e.get("band"),
                          "provenance": e["provenance"], "reported": REPORTED.get((claim, key))}
    return out


def predict(note: str = "", sizes=None) -> dict:
    """Every prediction (module doc) as one JSON-able dict."""
    from svgtpu.bench.tpu import SLICES, commit
    from svgtpu.compiler.dumps import versions
    from tqdm.auto import tqdm
    functions = quantity_functions(sizes)
    slices = {f"v6e-{c}": {} for c in SLICES}
    for (qid, chips), (setups, fn) in tqdm(functions.items(), desc="predict", unit="quantity"):
        p = predict_one(setups, fn)
        p |= {"provenance": next(iter(setups.values())).provenance,
              "pricing": {k: s.attention_pricing() for k, s in setups.items()},
              "tiles": {k: f"{s.block_q}x{s.block_kv}" for k, s in setups.items()},
              "refuted_if": f"the measured interval (its IQR widened by the noise floor) wholly outside "
                            f"[{p['interval'][0]:.4g}, {p['interval'][1]:.4g}]"}
        flip = flips(qid)
        if flip:
            p["verdict_flip"] = flip | {"expects": expects(p, flip)}
        slices[f"v6e-{chips}"][qid] = p
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "commit": commit(),
            "versions": versions(), "command": "svgtpu predict", "note": note,
            "interval_rule": "root sum of squares of the one-at-a-time swings of svgtpu.costmodel.KNOBS (each at both "
                             "ends, the calibration refitted) and svgtpu.costmodel.sparse_knobs (docs/verdicts.md, "
                             "C1's rule), and for a ratio of two timed attention programs each program's own "
                             f"realized-over-static factor ({REALIZED_KNOB} on one program at a time) where no named "
                             "source prices the pair's relative one (docs/verdicts.md, Frozen predictions)",
            "claims_now": claims_now(), "claims_measured": CLAIMS_MEASURED, "quantities": slices}


def write(data: dict, path: str | Path) -> Path:
    """Write a predictions file, atomically, refusing one that exists (a frozen file is never rewritten) and one
    :func:`check_freezable` refuses."""
    from svgtpu.facts.outputs import write_text
    path = Path(path)
    check_freezable(data)
    if path.exists():
        raise BadInput(f"--out {path} exists: a predictions file is never rewritten (a new one is a new dated file)")
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, json.dumps(data, indent=1, default=float) + "\n")


def dated_files(directory: str | Path | None = None) -> list[Path]:
    """The predictions files of ``directory`` (default ``figures/predictions/``), oldest first: by date, then by the
    number a second file of one day carries (``<date>-2.json`` after ``<date>.json``)."""
    folder = Path(directory) if directory is not None else REPO_ROOT / PREDICTIONS_DIR

    def order(f: Path):   # YYYY-MM-DD[-N]
        n = f.stem[10:].lstrip("-")
        return f.stem[:10], int(n) if n.isdigit() else 1, f.name
    return sorted(folder.glob("*.json"), key=order) if folder.exists() else []


def latest(directory: str | Path | None = None) -> dict | None:
    """The newest predictions file (:func:`dated_files`), or ``None``."""
    files = dated_files(directory)
    return read_predictions("predictions", files[-1]) | {"file": files[-1].name} if files else None


def frozen(path: str | Path | None = None) -> dict:
    """The predictions ``svgtpu predict --against`` reads: ``path``, default the newest dated file in
    ``figures/predictions/``, only if its name is pinned in :data:`FROZEN` and its sha256 is the pinned one
    (:class:`BadInput` otherwise: an edited or unpinned file is never evidence), read through its schema."""
    import hashlib
    if path is None:
        files = dated_files()
        if not files:
            raise BadInput(f"--predictions: no frozen predictions in {PREDICTIONS_DIR} to compare with")
        path = files[-1]
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"--predictions {path}: no such file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if path.name not in FROZEN:
        raise BadInput(f"--predictions {path}: not a frozen predictions file (pinned: {', '.join(sorted(FROZEN))}; a "
                       "new one is pinned in svgtpu.report.predictions.FROZEN when it is frozen)")
    if digest != FROZEN[path.name]:
        raise BadInput(f"--predictions {path}: its sha256 {digest[:12]}... is not the pinned {FROZEN[path.name][:12]}...: "
                       "edited after it was frozen, so not evidence")
    data = read_predictions("--predictions", path)   # its shape (svgtpu.inputs.predictions)
    return data | {"file": path.name}


def format_predictions(data: dict) -> str:
    from svgtpu.facts.tables import format_table
    rows = [{"slice": s, "quantity": q, "predicted": p["value"], "low": p["interval"][0], "high": p["interval"][1],
             "flips": p.get("verdict_flip", {}).get("claim", "")} for s, qs in data["quantities"].items()
            for q, p in qs.items()]
    return (f"predictions of {data['date']} at {data['commit']} ({data['note'] or 'no note'})\n"
            + format_table(rows))


__all__ = ["PREDICTIONS_DIR", "FROZEN", "C4_DIRECTION", "CLAIMS_MEASURED", "run_setups", "head_seconds",
           "quantity_functions", "Ratio", "REALIZED_KNOB", "SIDES", "NOT_ON_SLICE", "never_measured", "predict_one", "width_sources", "flips", "expects",
           "check_freezable", "claims_now", "predict", "write", "dated_files", "latest", "frozen", "format_predictions"]
