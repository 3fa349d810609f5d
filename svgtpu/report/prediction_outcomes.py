"""A frozen prediction beside a measured TPU run: each quantity's outcome, each claim's verdict, and their tables.

:mod:`svgtpu.report.predictions` makes and freezes the predictions (``svgtpu predict``); this module judges them
against the run files of ``svgtpu bench tpu`` (``figures/tpu-runs/``): :func:`compare` quantity by quantity
(:func:`judge_prediction`: within or refuted, docs/verdicts.md "A prediction against a run"), :func:`claim_verdicts`
one verdict per claim from counted measurements, and the paper's tables (:func:`markdown`, :func:`claim_table`).
"""

from __future__ import annotations

from svgtpu.errors import BadInput
from svgtpu.report.predictions import CLAIMS_MEASURED, NOT_ON_SLICE, expects, flips, never_measured, width_sources


def judge_prediction(p: dict, m: dict) -> str:
    """A prediction ``p`` against a measurement ``m`` (docs/verdicts.md, "A prediction against a run"): within
    when the measured interval (the run's IQR widened by the noise floor) overlaps the predicted one, else refuted
    and on which side; fewer than :data:`svgtpu.facts.tpu_runs.MIN_ROUNDS` rounds: not measured."""
    from svgtpu.facts import tpu_runs
    if not tpu_runs.counts(m):
        n = tpu_runs.rounds(m)
        return f"not measured: {n} rounds" if n is not None else "not measured: no rounds"
    low, high = tpu_runs.measured_interval(m)
    if low > p["interval"][1]:
        return "refuted: higher"
    if high < p["interval"][0]:
        return "refuted: lower"
    return WITHIN


#: A predicted quantity a run of the slice could have measured but did not: its section was not run (a budget cut,
#: ``--sections``), or its programs were not timed.
NOT_IN_RUN = "not in the run"
#: A prediction the measurement holds (:func:`judge_prediction`).
WITHIN = "within"
#: What each outcome of :func:`compare` means, printed under its table.
OUTCOMES = (f"{WITHIN}: the measured interval (IQR widened by the noise floor) overlaps the predicted one; refuted: "
            f"it lies wholly higher or lower; model: the predicted value; not measured: fewer than 5 timing rounds; {NOT_ON_SLICE}: its block "
            f"does not fit the slice's chips; {NOT_IN_RUN}: its section did not run or was not timed "
            "(docs/verdicts.md)")


def compare(predictions: dict, runs) -> list[dict]:
    """One row per predicted quantity of each slice the ``runs`` (one run file's JSON or several, partial runs of
    one slice combined) ran on: one per run that measured it (a quantity measured twice has two rows), judged by
    :func:`judge_prediction`, with the verdict its claim's rule gives where it flips one; else one saying why it
    was not measured (:data:`NOT_ON_SLICE`, :data:`NOT_IN_RUN`); then the run's quantities nothing predicted."""
    from svgtpu.facts import tpu_runs
    runs = [runs] if isinstance(runs, dict) else list(runs)
    rows = []
    for chips in sorted({r["chips"] for r in runs}):
        slice_ = f"v6e-{chips}"
        predicted = predictions["quantities"].get(slice_)
        if predicted is None:
            raise BadInput(f"the predictions hold slices {', '.join(predictions['quantities'])}, the run ran on "
                           f"{slice_}")
        mine = [r for r in runs if r["chips"] == chips]
        for qid, p in predicted.items():
            base = {"slice": slice_, "quantity": qid, "predicted": p["value"], "interval": p["interval"]}
            measured = [(r, r["quantities"][qid]) for r in mine if qid in r["quantities"]]
            if not measured:
                rows.append(base | {"run": None, "measured": None, "measured_iqr": None, "rounds": None,
                                    "provenance": mine[0].get("provenance"),
                                    "outcome": NOT_ON_SLICE if never_measured(qid, chips) else NOT_IN_RUN})
                continue
            for r, m in measured:
                row = base | {"run": r.get("file"), "measured": m["value"], "measured_iqr": m["interval"],
                              "rounds": tpu_runs.rounds(m), "provenance": r.get("provenance"),
                              "outcome": judge_prediction(p, m)}
                flip = p.get("verdict_flip")
                if flip and tpu_runs.counts(m):
                    row["verdict"] = _verdict(flip, m)
                rows.append(row)
        for r in mine:
            for qid, m in r["quantities"].items():
                if qid not in predicted:
                    rows.append({"slice": slice_, "quantity": qid, "predicted": None, "interval": None,
                                 "run": r.get("file"), "measured": m["value"], "measured_iqr": m["interval"],
                                 "rounds": tpu_runs.rounds(m), "provenance": r.get("provenance"),
                                 "outcome": "not predicted"})
    return rows


def _verdict(flip: dict, m: dict, ours: str = "the TPU run") -> str:
    """The claim's verdict the measurement ``m`` gives by ``flip``'s rule: the verdict rows' own
    (:func:`svgtpu.report.verdicts.judge`) on its measured interval (IQR widened by the noise floor)."""
    from svgtpu.facts.tpu_runs import measured_interval
    from svgtpu.report.verdicts import judge
    verdict, _ = judge(flip["rule"], m["value"], flip["threshold"], measured_interval(m), ours=ours)
    return f"{flip['claim']} {verdict}"


#: The claims' order in :func:`claim_verdicts`.
CLAIM_ORDER = ("C1", "C2", "C3", "C4", "C5")


def claim_verdicts(runs) -> list[dict]:
    """One verdict per claim from counted measurements only (docs/verdicts.md, "A measured TPU run"): the verdict
    rows of the README (:data:`svgtpu.report.verdicts.VERDICT_ROWS`, their checks left out) applied to the results
    entries the ``runs`` give (:func:`svgtpu.facts.tpu_runs.claim_entries`), the first row of the claim that has
    its evidence; a claim with none is *not measured*, saying why (:data:`CLAIMS_MEASURED`, or too few rounds)."""
    from svgtpu.facts.tpu_runs import CLAIM_QUANTITIES, MIN_ROUNDS, claim_entries
    from svgtpu.report.verdicts import VERDICT_ROWS, judge_row
    runs = [runs] if isinstance(runs, dict) else list(runs)
    data = {"claims": claim_entries(runs)}
    out = []
    for claim in CLAIM_ORDER:
        found = None
        for row in (r for r in VERDICT_ROWS if r.claim == claim and not r.check):
            judged = judge_row(row, data)
            if judged is not None:
                found = (row, *judged)
                break
        if found is not None:
            row, entry, verdict, why = found
            out.append({"claim": claim, "row": row.what, "verdict": verdict, "measured": entry["value"],
                        "interval": entry["band"], "rounds": entry["rounds"], "run": entry["run"], "why": why})
            continue
        measured = {q for r in runs for q in r["quantities"]}
        reads = [q for (c, _), q in CLAIM_QUANTITIES.items() if c == claim]
        why = (CLAIMS_MEASURED[claim].removeprefix("not measured: ") if not reads else
               f"its quantities ran fewer than {MIN_ROUNDS} rounds" if measured & set(reads) else
               f"the runs lack {', '.join(sorted(set(reads)))}")
        out.append({"claim": claim, "row": None, "verdict": "not measured", "measured": None, "interval": None,
                    "rounds": None, "run": None, "why": why})
    return out


def markdown(predictions: dict | None, runs) -> str:
    """Prediction vs measurement per quantity as a markdown table for the paper, or one line saying what is
    missing (no predictions frozen; no counted TPU run yet: then how many quantities wait for one).  ``runs``: one
    run file's JSON, several, or none (``None`` or empty)."""
    if predictions is None:
        return "No predictions have been frozen yet (`svgtpu predict --out figures/predictions/<date>.json`)."
    head = f"Predictions frozen on {predictions['date']} at {predictions['commit']}"
    runs = [] if runs is None else [runs] if isinstance(runs, dict) else list(runs)
    if not runs:
        n = len(next(iter(predictions["quantities"].values()), {}))
        return (f"{head}: {n} quantities per slice, each with its interval and, where a claim reads it, the "
                "measured value that flips the verdict. No TPU run yet (`make tpu-bench`): nothing to compare.")
    rows = compare(predictions, runs)
    fmt = lambda x: "—" if x is None else f"{x:.4g}"  # noqa: E731
    named = ", ".join(f"{r.get('file', 'the run')} ({r.get('date', '?')} at {r.get('commit', '?')}, v6e-{r['chips']}, "
                      f"`{r.get('provenance', '?')}`)" for r in runs)
    lines = [f"{head}, against {named}:", "",
             "| quantity | predicted | interval | measured | IQR | rounds | outcome | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        interval = "—" if r.get("interval") is None else f"{fmt(r['interval'][0])} – {fmt(r['interval'][1])}"
        iqr = "—" if r["measured_iqr"] is None else f"{fmt(r['measured_iqr'][0])} – {fmt(r['measured_iqr'][1])}"
        lines.append(f"| {r['quantity']} | {fmt(r['predicted'])} | {interval} | {fmt(r['measured'])} | {iqr} | "
                     f"{r['rounds'] if r['rounds'] is not None else '—'} | {r['outcome']} | {r.get('verdict', '')} |")
    return "\n".join(lines)


def claim_table(predictions: dict | None) -> str:
    """Per claim a run decides: the quantity its verdict reads (:func:`flips`, on v6e-8 where the slice has it), the
    predicted value and interval of the frozen file ``predictions``, the flip threshold, which side the package
    expects (:func:`expects`) and the verdict a run measuring the predicted value would give, its rounds agreeing
    (its interval the noise floor alone, :func:`_verdict`: the model's interval is the model's uncertainty, not a
    run's spread); the README's and the paper's ``tpu-claim-predictions`` block."""
    if predictions is None:
        return "No predictions have been frozen yet."
    lines = [f"Per claim, from the predictions frozen on {predictions['date']} (`{predictions.get('file', '')}`):", "",
             "| claim | quantity (slice) | predicted | interval | flip threshold (rule) | expected | verdict if "
             "measured as predicted | interval's width from |", "|---|---|---|---|---|---|---|---|"]
    for claim in CLAIM_ORDER:
        found = None
        for slice_ in sorted(predictions["quantities"], key=lambda n: -int(n.split("-")[1])):
            for qid, p in predictions["quantities"][slice_].items():
                flip = flips(qid)
                if flip and flip["claim"] == claim and found is None:
                    found = (slice_, qid, p, flip)
        if found is None:
            lines.append(f"| {claim} | — | — | — | — | — | — | {CLAIMS_MEASURED[claim]} |")
            continue
        slice_, qid, p, flip = found
        sources = p["width_from"] if "width_from" in p else width_sources(p.get("swings", {}), p["value"])
        width = ", ".join(sources) or "no named source moves it: zero width"
        at_prediction = {"value": p["value"], "interval": [p["value"], p["value"]]}
        lines.append(f"| {claim} | {qid} ({slice_}) | {p['value']:.4g} | {p['interval'][0]:.4g} – "
                     f"{p['interval'][1]:.4g} | {flip['threshold']:g} ({flip['rule']}) | {expects(p, flip)} | "
                     f"{_verdict(flip, at_prediction, 'a run at the prediction').split(' ', 1)[1]} | {width or '—'} |")
    return "\n".join(lines)


__all__ = ["WITHIN", "NOT_IN_RUN", "OUTCOMES", "CLAIM_ORDER", "judge_prediction", "compare", "claim_verdicts",
           "markdown", "claim_table"]
