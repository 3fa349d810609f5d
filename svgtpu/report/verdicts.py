"""Does it reproduce? The verdict engine: one rule function (:func:`judge`), the verdict rows as data
(:data:`VERDICT_ROWS`), and :func:`judge_row` applying the one to the other.

The rules are written once, in :func:`judge`, and explained for readers in ``docs/verdicts.md``.  The blocks
``verdicts``, ``verdicts-brief`` and ``verdict-summary`` (:mod:`svgtpu.report.blocks`) are rendered from here;
:func:`record_verdict_history` records each row's published verdict per round (:mod:`svgtpu.report.history`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from svgtpu.facts.paths import REPO_ROOT
from svgtpu.facts.results import REPORTED
from svgtpu.facts.tpu_runs import MEASURED_TPU, NOISE_FLOOR
from svgtpu.report.tables import NOT_YET, format_value, is_table, markdown_table, result_entry, spread, tiles_text


VERDICTS = ("reproduced", "consistent", "inconclusive", "contradicted", "instruments disagree", "direction only",
            "not testable here")
#: What a row says when the results file does not hold its evidence yet (not a verdict).
NOT_YET_VERDICT = "not yet"
#: What a row says that could not have failed, or whose interval does not hold its run-to-run spread: shown
#: as a check of our arithmetic or timing, never as evidence (not a verdict).
CHECK_VERDICT = "check"
#: An interval discriminates when its width is at most this share of its central value: then a value
#: inside it is *reproduced*, else only *consistent* with it.
NARROW = 0.20
#: An interval that holds the reported value and is more than this share of its central value wide decides nothing:
#: *inconclusive* (docs/verdicts.md, *too wide*, written 2026-12-06): one end then lies more than one NARROW (20 %,
#: the error the cost model's validation calls a miss) from the central value.
TOO_WIDE = 2 * NARROW
#: The width, in exponent units, of the interval around a deterministic power-law exponent (exact counts,
#: compiled cycles: no noise) when its entry carries none: chosen before looking, not fitted.
EXPONENT_TOLERANCE = 0.05
#: The effect of alignment (C3) reproduces when it at least halves the partial-tile share.
EFFECT_FACTOR = 0.5
RULES = ("interval", "lower bound", "direction", "effect")


def _inconclusive(low: float, high: float) -> str:
    """The too-wide verdict, naming the interval's ends (docs/verdicts.md, *too wide*)."""
    return f"inconclusive: the evidence cannot tell {low:.3g} from {high:.3g}"


def judge(rule: str, value, reported=None, interval=None, *, sense: tuple[str, str] = ("higher", "lower"),
          ours: str = "our evidence") -> tuple[str, str]:
    """The verdict of one claim and the reason in numbers (docs/verdicts.md states each rule).

    - ``interval``: ``reported`` inside ``interval`` (of ours, central ``value``): *reproduced* if the
      interval is at most :data:`NARROW` of ``value`` wide, *consistent* up to :data:`TOO_WIDE`, wider
      *inconclusive* (naming the interval's ends); outside: *contradicted*,
      with the direction (``"contradicted: our model puts it faster than reported"``: ``ours`` names the
      evidence, ``sense`` the words for above and below the reported value);
    - ``lower bound``: ``reported`` is a floor the write-up claims ("over 16 minutes"): ``interval`` wholly
      above it *reproduced*, straddling it *consistent* (*inconclusive* when wider than :data:`TOO_WIDE` of
      ``value``), wholly below *contradicted* (with the direction);
    - ``direction``: no number claimed; ``value`` is ours without / with the claimed change at the
      production setting: above 1 *direction only* (the direction holds), else *contradicted*;
    - ``effect``: the claimed numbers belong to an unpublished setting; ``value`` = (before, after) of ours:
      *not testable here* when the effect reproduces (after at most :data:`EFFECT_FACTOR` of before), else
      *contradicted*.
    """
    if rule == "interval":
        low, high = interval
        width = (high - low) / abs(value) if value else float("inf")
        narrow = width <= NARROW
        words = f"ours {value:.3g} in [{low:.3g}, {high:.3g}], {width:.0%} of it wide ({'≤' if narrow else '>'} {NARROW:.0%})"
        if not low <= reported <= high:
            word = sense[0] if low > reported else sense[1]
            return (f"contradicted: {ours} puts it {word} than reported",
                    f"the reported {reported:g} lies outside: {words}")
        if width > TOO_WIDE:
            return (_inconclusive(low, high), f"the reported {reported:g} lies inside: {words}, more than "
                                              f"{TOO_WIDE:.0%}: too wide to decide")
        return ("reproduced" if narrow else "consistent"), f"the reported {reported:g} lies inside: {words}"
    if rule == "lower bound":
        low, high = interval
        words = f"ours {value:.3g} in [{low:.3g}, {high:.3g}]"
        if low > reported:
            return "reproduced", f"over {reported:g} holds across our interval: {words}"
        if high > reported:
            width = (high - low) / abs(value) if value else float("inf")
            if width > TOO_WIDE:
                return (_inconclusive(low, high), f"our interval straddles {reported:g}: {words}, {width:.0%} of it "
                                                  f"wide (> {TOO_WIDE:.0%}): too wide to decide")
            return "consistent", f"our interval straddles {reported:g}: {words}"
        return (f"contradicted: {ours} puts it {sense[1]} than reported",
                f"our whole interval lies below {reported:g}: {words}")
    if rule == "direction":
        holds = value > 1
        return (("direction only" if holds else "contradicted"),
                f"ours without / with it is {value:.3g}: {'above' if holds else 'not above'} 1")
    if rule == "effect":
        before, after = value
        holds = after <= EFFECT_FACTOR * before
        return (("not testable here" if holds else "contradicted"),
                f"the effect {'reproduces' if holds else 'does not reproduce'}: ours {100 * before:.2f} % -> "
                f"{100 * after:.2f} % ({'at most' if holds else 'more than'} {EFFECT_FACTOR:g} of before)")
    raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")


def saved_minutes_floor() -> float:
    """Dense minutes the write-up's numbers imply at least: saving over ``m`` minutes at speedup ``S``
    means ``dense - dense / S > m``, so ``dense > m S / (S - 1)``.  A floor, not an estimate."""
    s, m = REPORTED["C1", "speedup"], REPORTED["C1", "minutes_saved"]
    return m * s / (s - 1)


def dense_floor_sentence(data: dict) -> str:
    """The write-up's C1 floor on its dense run (:func:`saved_minutes_floor`) set against our modeled dense run, in
    generated words: which side ours falls and what follows (the ``dense-floor`` block)."""
    dense, control = result_entry(data, "C1.dense_minutes"), result_entry(data, "C1.tpu_dense_control_error")
    s, m, floor = REPORTED["C1", "speedup"], REPORTED["C1", "minutes_saved"], saved_minutes_floor()
    head = (f"By arithmetic alone the write-up's {s:g}x and \"over {m:g} minutes saved\" imply a dense run of at "
            f"least {floor:.1f} min (`computed`: saving over {m:g} min at {s:g}x needs dense > {m:g} · {s:g} / "
            f"({s:g} − 1)).")
    if dense is None:
        return head + f" Our modeled dense run: {NOT_YET}."
    d = dense["value"]
    if d >= floor:
        return head + (f" Our model's dense run, {d:.1f} min (`{dense['provenance']}`), lies above that floor: the two "
                       "reported numbers are consistent with our dense time.")
    words = (f" Our model's dense run, {d:.1f} min (`{dense['provenance']}`), lies below that floor: at our dense time "
             f"the reported speedup would save {d * (1 - 1 / s):.1f} min, not over {m:g}, so the two reported numbers "
             "together describe a slower dense run than our model's.")
    if control is not None:
        side = "faster" if control["value"] < 0 else "slower"
        words += (f" Our model also predicts MaxDiffusion's measured dense v6e-8 control {side} than measured "
                  f"({100 * control['value']:+.1f} % in time, `{control['provenance']}`).")
    return head + words + (" The floor checks the write-up's two numbers against our dense time; it is not "
                           "evidence about the speedup, which the verdict rows judge.")


def _ours(entry: dict) -> str:
    return format_value(entry["value"], entry.get("unit", "")) + spread(entry)


def _interval(entry: dict) -> tuple[float, float] | None:
    found = entry.get("band") or entry.get("interval") or entry.get("iqr")
    return tuple(found) if found else None


def _scenarios_containing(data: dict, reported: float) -> str:
    """The C1 scenario rows whose interval holds ``reported`` (recipe and kernel choices)."""
    table = result_entry(data, "C1.scenarios")
    if not table or not is_table(table["value"]):
        return ""
    names = [r["scenario"] for r in table["value"] if r.get("speedup_min") is not None
             and r["speedup_min"] <= reported <= r["speedup_max"]]
    return (f" Scenario rows whose interval holds {reported:g}x: " + "; ".join(names) + "." if names
            else f" No scenario row's interval holds {reported:g}x.")


def _sparse_layers(entry: dict) -> str:
    stretch = entry.get("sparse_stretch")
    return ("sparse layers as compiled; interval of the unknown constants with the calibration refitted"
            if stretch in (None, 1) else
            f"sparse layers priced from MaxDiffusion's measured TPU runs (sparse stretch {stretch:.2f}); "
            "joint interval: the unknown constants with the calibration refitted, widened by the H200 model's bias")


#: The named pieces a row's reason may hold besides the rule's own ``{why}``: each made from the results and
#: the judged entry.  ``{key}`` is the judged entry's results key.
NOTES = {
    "mask": lambda data, entry, row: entry.get("mask", "SVG"),
    "tiles": lambda data, entry, row: tiles_text(entry),
    "sparse_layers": lambda data, entry, row: _sparse_layers(entry),
    "scenarios": lambda data, entry, row: _scenarios_containing(data, row.reported),
    "dense_floor": lambda data, entry, row: f"{saved_minutes_floor():.1f}",
    "interval_source": lambda data, entry, row: ("given" if _interval(entry) else
                                                 f"±{EXPONENT_TOLERANCE:g}, a deterministic instrument"),
}


@dataclasses.dataclass(frozen=True)
class VerdictRow:
    """One row of the verdict table, as data: which results it judges, by which rule, and the reason's wording.

    ``evidence``: results keys, the first the results hold is judged (``{key}`` in the reason).  ``interval``:
    ``"own"`` the entry's band, interval or IQR (the row waits for one: *not yet*); ``"tolerance"`` its own, else
    ± :data:`EXPONENT_TOLERANCE` around the value (a deterministic instrument); ``"CLAIM.name"`` the value of that
    entry.  ``before``: the effect rule's *before* entry (the evidence is *after*).  ``reason``: the why, a
    template holding ``{why}`` (the rule's reason in numbers) and any of :data:`NOTES`.  ``second``: a second
    primary instrument's key, named ``second_name`` (*the compiled Wan block*) and described by ``second_what``:
    the agreement rule (:func:`agreement`) applies.  ``check``: the row is a check, never a verdict.
    ``measured_second``: where the judged entry is a TPU run's (``measured-tpu``, :mod:`svgtpu.facts.tpu_runs`), the
    second instrument ``(key, name, what)`` in place of ``second``; the row's other evidence is shown beside it
    (docs/verdicts.md, "A measured TPU run").
    """

    claim: str
    what: str
    reported_text: str
    rule: str
    evidence: tuple[str, ...]
    reason: str
    reported: float | None = None
    interval: str = "own"
    before: str | None = None
    sense: tuple[str, str] = ("higher", "lower")
    ours: str = "our evidence"
    second: str | None = None
    second_name: str = ""
    second_what: str = ""
    check: bool = False
    measured_second: tuple[str, str, str] | None = None


class _Reason(dict):
    """The fields of one row's reason, each note made only when the template names it."""

    def __init__(self, data, entry, row, why, key):
        super().__init__(why=why, key=key)
        self.data, self.entry, self.row = data, entry, row

    def __missing__(self, name):
        return NOTES[name](self.data, self.entry, self.row)


def agreement(interval: tuple[float, float], second: float,
              second_interval: tuple[float, float] | None = None) -> str | None:
    """Where a second primary instrument falls against the first's ``interval`` (docs/verdicts.md, agreement):
    ``None`` when they agree (a point ``second`` inside it, or its ``second_interval`` overlapping it), else
    ``"higher"`` or ``"lower"``."""
    low, high = interval
    s_low, s_high = second_interval or (second, second)
    if s_high < low:
        return "lower"
    if s_low > high:
        return "higher"
    return None


def _agree(row: VerdictRow, data: dict, entry: dict, interval, verdict: str,
           second_key: str, second_name: str, second_what: str, ours: str) -> tuple[str, str]:
    """The verdict after the agreement rule, and the sentence that says where the second instrument falls."""
    second = result_entry(data, second_key)
    if second is None:
        return verdict, f" {second_what[0].upper()}{second_what[1:]}: not yet measured."
    shown = f"{second_what}: {_ours(second)} `{second['provenance']}`"
    side = agreement(interval, second["value"], _interval(second))
    if side is None:
        low, high = interval
        where = (f"inside {ours}'s interval" if low <= second["value"] <= high else
                 f"{'above' if second['value'] > high else 'below'} {ours}'s interval, its own interval overlapping it")
        return verdict, f" {shown[0].upper()}{shown[1:]}, {where}: the instruments agree."
    unit = entry.get("unit", "")
    bounds = " – ".join(format_value(b, unit) for b in interval)
    return (f"instruments disagree: {second_name} puts it {side} than {ours}",
            f" {shown[0].upper()}{shown[1:]}, {'above' if side == 'higher' else 'below'} {ours}'s interval "
            f"({bounds}): the instruments disagree; {ours} alone: {verdict}.")


def _beside(row: VerdictRow, data: dict, key: str, interval) -> str:
    """A measured row's sentence on the evidence it outranks (docs/verdicts.md): the row's next entry the results
    hold, its value and whether the measured interval holds it; empty when there is none."""
    other = next((k for k in row.evidence if k != key and result_entry(data, k) is not None), None)
    if other is None:
        return ""
    e = result_entry(data, other)
    inside = interval is not None and interval[0] <= e["value"] <= interval[1]
    return (f" Beside it, `{other}`: {_ours(e)} `{e['provenance']}`, "
            f"{'inside' if inside else 'outside'} the measured interval (no longer deciding the verdict).")


def judge_row(row: VerdictRow, data: dict) -> tuple[dict, str, str] | None:
    """The judged entry, the verdict and the reason of ``row`` from the results; ``None`` while they lack
    its evidence (:func:`waiting` says what is missing)."""
    key = next((k for k in row.evidence if result_entry(data, k) is not None), None)
    if key is None:
        return None
    entry = result_entry(data, key)
    value = entry["value"]
    if row.before is not None:
        before = result_entry(data, row.before)
        if before is None:
            return None
        value = (before["value"], value)
    interval = None
    if row.interval == "own":
        interval = _interval(entry)
        if interval is None and row.rule in ("interval", "lower bound"):
            return None
    elif row.interval == "tolerance":
        interval = _interval(entry) or (value - EXPONENT_TOLERANCE, value + EXPONENT_TOLERANCE)
    else:
        other = result_entry(data, row.interval)
        if other is None:
            return None
        interval = tuple(other["value"])
    measured = entry.get("provenance") == MEASURED_TPU
    ours = "the TPU run" if measured else row.ours
    verdict, why = judge(row.rule, value, row.reported, interval, sense=row.sense, ours=ours)
    if measured:   # a TPU run's entry (svgtpu.facts.tpu_runs): the same rule, its own words
        reason = (f"measured by `svgtpu bench tpu` on {entry['device']} ({entry['run']}, median of {entry['rounds']} "
                  f"rounds, IQR widened by the {NOISE_FLOOR:.0%} noise floor: docs/verdicts.md), `{key}`: {why}.")
    else:
        reason = row.reason.format_map(_Reason(data, entry, row, why, key))
    second = row.measured_second if measured and row.measured_second else (
        (row.second, row.second_name, row.second_what) if row.second is not None else None)
    if second is not None:
        verdict, sentence = _agree(row, data, entry, interval, verdict, *second, ours)
        reason += sentence
    if measured:
        reason += _beside(row, data, key, interval)
    return entry, (CHECK_VERDICT if row.check else verdict), reason


def waiting(row: VerdictRow, data: dict) -> str:
    """Why ``row`` has no verdict yet: the evidence it lacks, or the value it holds without an interval."""
    held = next((k for k in row.evidence if result_entry(data, k) is not None), None)
    if held is not None and row.interval == "own" and not _interval(result_entry(data, held)):
        entry = result_entry(data, held)
        return (f"{NOT_YET}: `{held}` holds {_ours(entry)} `{entry['provenance']}` without an interval, and this row "
                "is judged only with one.")
    return f"{NOT_YET}: the results file lacks this row's evidence."


_C3_BEFORE, _C3_AFTER = (100 * REPORTED["C3", k] for k in ("partial_share_before", "partial_share_after"))

#: The verdict table: one rule (:func:`judge_row`), these rows as data (docs/verdicts.md states each in words).
VERDICT_ROWS = [
    VerdictRow("C1", "1440p end-to-end speedup", "{:g}x".format(REPORTED["C1", "speedup"]), "interval",
               ("C1.speedup",), "central scenario ({mask}), {sparse_layers}; {why}.{scenarios}",
               reported=REPORTED["C1", "speedup"], sense=("faster", "slower"), ours="our model"),
    VerdictRow("C1", "the same, JAX's Splash for dense and SVG layers (the write-up's kernels)",
               "{:g}x".format(REPORTED["C1", "speedup"]), "interval", ("C1.speedup_splash_both",),
               "the write-up's kernel family on both sides at the production tile ({mask}); joint interval: the unknown "
               "constants (the sparse stretch over its plausible range), each end refitted on the calibration run, "
               "widened by the H200 model's bias; {why}.", reported=REPORTED["C1", "speedup"], sense=("faster", "slower"),
               ours="our model"),
    VerdictRow("C1", "the same, a user's dense kernel: Splash dense, SVG through ours",
               "{:g}x".format(REPORTED["C1", "speedup"]), "interval", ("C1.speedup_user_dense",),
               "check, not evidence: beside the same-kernel rows, never instead (dense through Splash, its padded "
               "1440p tail included, against SVG through ours): what a user switching would see; {why}.",
               reported=REPORTED["C1", "speedup"], sense=("faster", "slower"), ours="our model", check=True),
    VerdictRow("C1", "minutes saved per video", "over {:g} min".format(REPORTED["C1", "minutes_saved"]),
               "lower bound", ("C1.minutes_saved",),
               f"{{why}}; at {REPORTED['C1', 'speedup']:g}x, saving over {REPORTED['C1', 'minutes_saved']:g} min means "
               "the dense run took at least {dense_floor} min.",
               reported=REPORTED["C1", "minutes_saved"], ours="our model"),
    VerdictRow("C2", "self-attention share at 1440p", "{:g} %".format(100 * REPORTED["C2", "attention_share_1440p"]),
               "interval", ("C2.tpu_attention_share_1440p_splash", "C2.attention_share_1440p"),
               "modeled share of the DiT's time (its matmuls at the efficiency the compiled blocks' non-attention "
               "ops realize on the calibration run, docs/costmodel.md); {why}.",
               reported=REPORTED["C2", "attention_share_1440p"], ours="our model",
               second="C2.compiled_attention_share_with_ici_1440p", second_name="the compiled Wan block",
               second_what="the compiled Wan block's share, its collectives at ICI time as the model prices a pass "
                           "(interval: the ICI efficiency over its assumed band)",
               measured_second=("C2.tpu_attention_share_1440p_ours", "the run through ours",
                                "the measured 1440p block's share through ours")),
    VerdictRow("C3", "partial tiles before -> after alignment", f"{_C3_BEFORE:g} % -> {_C3_AFTER:g} %", "effect",
               ("C3.partial_share_after",),
               f"the write-up's band, tiles and counting are unpublished, so its exact {_C3_BEFORE:g} % -> "
               f"{_C3_AFTER:g} % cannot be tested (the settings search: notebook 03); {{why}} ({{mask}}, {{tiles}} tiles).",
               before="C3.partial_share_before"),
    VerdictRow("C4", "mask-free fast path lowers latency", "lower latency (no number)", "direction",
               ("C4.tpu_fast_path_speedup_svg_1440p", "C4.compiled_fast_path_speedup_svg"),
               "the write-up gives a direction, no number; at the production tile, whole-kernel static cycles of ours "
               "on the SVG mask, fast path off / on: {why} (compiled, not run: static cycles are not latency)."),
    VerdictRow("C5", "attention cost quadratic in resolution", "quadratic", "interval",
               ("C5.tpu_attention_exponent_splash", "C5.gpu_attention_exponent_dense-cudnn"),
               "exponent k of dense attention time ∝ L^k measured over the resolutions (`{key}`, interval from its "
               "timing rounds); quadratic is k = 2: {why}.", reported=2.0,
               measured_second=("C5.tpu_attention_exponent_ours", "the run through ours",
                                "the measured exponent through ours")),
    VerdictRow("C5", "the same, compiled cycles or exact FLOPs", "quadratic",
               "interval", ("C5.compiled_cycles_exponent", "C5.flops_exponent"),
               "check, not evidence: one tile body's static cycles times a tile count that grows as L², or FLOPs "
               "counted, cannot depart from k = 2 beyond per-step overhead (`{key}`, interval {interval_source}): "
               "{why}.", reported=2.0, interval="tolerance", check=True),
    VerdictRow("C5", "the same, toy DiT timed on this CPU", "quadratic", "interval",
               ("C5.toy_attention_exponent",),
               "check, not evidence: toy DiT attention timed on this CPU, bootstrap interval over whole rounds of one "
               "run, which does not hold the spread between runs (docs/verdicts.md); {why}.", reported=2.0,
               interval="C5.toy_attention_exponent_interval", check=True),
]


def verdicts(data: dict) -> list[dict]:
    """One row per :data:`VERDICT_ROWS` entry: claim, reported, ours, verdict, the rule, why."""
    rows = []
    for row in VERDICT_ROWS:
        found = judge_row(row, data)
        if found is None:
            held = next((result_entry(data, k) for k in row.evidence if result_entry(data, k) is not None), None)
            ours = f"{_ours(held)} `{held['provenance']}`" if held else "—"
            verdict, why = NOT_YET_VERDICT, waiting(row, data)
        else:
            entry, verdict, why = found
            ours = f"{_ours(entry)} `{entry['provenance']}`"
        rows.append({"claim": f"{row.claim} {row.what}", "reported": row.reported_text, "ours": ours,
                     "verdict": verdict, "rule": row.rule + (", agreement" if row.second else ""),
                "why": why})
    return rows


def with_measured_runs(data: dict, figures: Path) -> dict:
    """``data`` with the entries of the newest committed GPU run of the package (``figures/gpu-runs/``) added
    where ``data`` has none of that name: the measured instruments a verdict row may read (C5's timing)."""
    from svgtpu.bench.gpu_results import latest_run

    run = latest_run(figures / "gpu-runs")
    if run is None:
        return data
    claims = {claim: dict(entries) for claim, entries in data["claims"].items()}
    for claim, entries in run["data"].get("claims", {}).items():
        for name, entry in entries.items():
            claims.setdefault(claim, {}).setdefault(name, entry)
    return {**data, "claims": claims}


def verdict_table(data: dict) -> str:
    return markdown_table(verdicts(data))


def verdict_brief(data: dict) -> str:
    """The verdict table without its rule and reason: the note's summary table, up front."""
    return markdown_table(verdicts(data), ["claim", "reported", "ours", "verdict"])


def verdict_summary(data: dict) -> str:
    """One sentence per verdict: the claims it covers (rules: docs/verdicts.md)."""
    rows = verdicts(data)
    parts = []
    for verdict in (*VERDICTS, NOT_YET_VERDICT, CHECK_VERDICT):   # a contradiction says its direction after the claim
        names = [r["claim"] + (f" ({direction})" if direction else "")
                 for r in rows for category, _, direction in [r["verdict"].partition(": ")] if category == verdict]
        if names:
            parts.append(f"{'checks, not evidence' if verdict == CHECK_VERDICT else verdict}: {'; '.join(names)}")
    return "Does it reproduce? " + ". ".join(p[0].upper() + p[1:] for p in parts) + " (rules: docs/verdicts.md)."


def record_verdict_history(repo: str | os.PathLike = REPO_ROOT,
                           path: str | os.PathLike | None = None) -> dict:
    """Each verdict row's published verdict per round from ``repo``'s git history, written to
    ``figures/verdict_history.json`` (or ``path``): :mod:`svgtpu.report.history` with today's rows, each with the
    results keys of its central value (an effect row's before -> after)."""
    from svgtpu.report import history

    rows = {f"{r.claim} {r.what}": [r.evidence] if r.before is None else [(r.before,), r.evidence]
            for r in VERDICT_ROWS}
    return history.write(history.collect(repo, rows, format_value), path or history.HISTORY)


__all__ = ["dense_floor_sentence", "VERDICTS", "NOT_YET_VERDICT", "CHECK_VERDICT", "NARROW", "TOO_WIDE", "EXPONENT_TOLERANCE", "EFFECT_FACTOR", "RULES",
           "judge", "saved_minutes_floor", "NOTES", "VerdictRow", "agreement", "judge_row", "waiting", "VERDICT_ROWS",
           "verdicts", "with_measured_runs", "verdict_table", "verdict_brief", "verdict_summary",
           "record_verdict_history"]
