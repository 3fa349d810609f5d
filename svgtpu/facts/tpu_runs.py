"""Measured TPU runs (``svgtpu bench tpu``, ``figures/tpu-runs/``) as evidence: which run files count, what a measured
quantity's interval is, and the results entries a counted run gives its claims (``docs/verdicts.md``, "A measured TPU
run").

Read here, at the bottom layer beside :mod:`svgtpu.facts.gpu_runs`, because the results file, the verdicts and
``svgtpu predict --against`` all read them.  A run file counts when it is ``measured-tpu``, not a smoke run and not a
``.partial.json``; a quantity counts when its programs ran at least :data:`MIN_ROUNDS` timing rounds; its interval is
the IQR over its rounds widened each side by :data:`NOISE_FLOOR` of its value.
"""

from __future__ import annotations

from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.facts.paths import REPO_ROOT

#: Where ``svgtpu bench tpu`` writes its run files (:func:`svgtpu.bench.tpu.default_out`).
TPU_RUNS_DIR = REPO_ROOT / "figures" / "tpu-runs"
#: The provenance of a run on a TPU (:func:`svgtpu.facts.results.provenance` on a TPU backend).
MEASURED_TPU = "measured-tpu"
#: Fewest timing rounds a counted quantity rests on (:data:`svgtpu.bench.timing.MIN_ROUNDS_FOR_IQR`, the GPU run's
#: rule: with fewer, the quartiles rest on one or two points).  Kept here, below the bench, as a plain number.
MIN_ROUNDS = 5
#: The noise floor: a measured interval's ends moved out by this share of its value (docs/verdicts.md: a choice
#: stated before any run, not a fit).
NOISE_FLOOR = 0.02
#: The prepared slices' chips (:data:`svgtpu.bench.tpu.SLICES`).
SLICE_CHIPS = (1, 8)


def check_run(run, name: str = "run") -> dict:
    """``run`` (a run file's JSON) checked as a run of ``svgtpu bench tpu`` (its schema,
    :func:`svgtpu.inputs.runs.tpu_run`: every quantity a finite value, its IQR low <= high) on a prepared slice,
    else :class:`BadInput` naming what is wrong (one line).  Smoke runs pass here; :func:`check_evidence` refuses
    them."""
    from svgtpu.inputs.runs import tpu_run
    tpu_run(run, name)
    if run["chips"] not in SLICE_CHIPS:
        raise BadInput(f"{name}: chips must be one of {', '.join(map(str, SLICE_CHIPS))} (the prepared v6e slices), "
                       f"got {run['chips']!r}")
    return run


def check_evidence(run, name: str = "run") -> dict:
    """``run`` (read by :func:`load_run`) refused unless it counts as evidence: ``measured-tpu``, not a smoke run,
    not a run cut short."""
    if run.get("smoke") or run.get("profile") == "smoke":
        raise BadInput(f"{name}: a smoke run (tiny shapes, {run.get('provenance', 'on a CPU')}) is not evidence; "
                       "the evidence is make tpu-bench on a v6e VM")
    if run.get("provenance") != MEASURED_TPU:
        raise BadInput(f"{name}: provenance must be {MEASURED_TPU} (a run on a TPU), got {run.get('provenance')!r}")
    if run.get("partial"):
        raise BadInput(f"{name}: a .partial.json (a run cut short before its end); finish it with "
                       "svgtpu bench tpu --resume")
    return run


def load_run(path: str | Path, parameter: str = "run file") -> dict:
    """A run file (given as ``parameter``) read (:func:`svgtpu.inputs.documents.read_document`) and checked
    (:func:`check_run`), with its ``file`` name."""
    from svgtpu.inputs.documents import read_document
    data = read_document(parameter, path, "json", "a bench tpu run file (JSON)")
    return check_run(data, f"{parameter} {path}") | {"file": Path(path).name}


def counted_runs(directory: str | Path | None = None) -> list[dict]:
    """Every run file under ``directory`` (default :data:`TPU_RUNS_DIR`) that counts as evidence, oldest first by
    name (dated); smoke runs, ``.partial.json`` files and runs of another provenance are left out."""
    folder = Path(directory) if directory is not None else TPU_RUNS_DIR
    runs = []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if f.name.endswith(".partial.json") or f.name == "index.json":
            continue
        run = load_run(f)
        try:
            runs.append(check_evidence(run, f.name))
        except BadInput:
            continue
    return runs


def rounds(m: dict) -> int | None:
    """The timing rounds a measured quantity rests on (``None`` in a run file written before they were kept)."""
    return m.get("rounds")


def counts(m: dict) -> bool:
    """Whether a measured quantity judges anything: at least :data:`MIN_ROUNDS` rounds."""
    return (rounds(m) or 0) >= MIN_ROUNDS


def measured_interval(m: dict) -> tuple[float, float]:
    """The quantity's IQR over its rounds, each end moved out by :data:`NOISE_FLOOR` of its value."""
    pad = NOISE_FLOOR * abs(m["value"])
    return m["interval"][0] - pad, m["interval"][1] + pad


def best(measurements: list[tuple[dict, dict]]) -> tuple[dict, dict] | None:
    """Of ``(run, quantity)`` pairs measuring one quantity, the one a verdict reads: counted, the most rounds, the
    newer run file on a tie (docs/verdicts.md, several runs); ``None`` when none counts."""
    counted = [(r, m) for r, m in measurements if counts(m)]
    return max(counted, key=lambda rm: (rounds(rm[1]), rm[0].get("file", ""))) if counted else None


#: The results entries a counted run gives (claim, name) from the quantity it measured (``svgtpu.bench.tpu``'s ids):
#: the verdict rows read them (docs/verdicts.md).
CLAIM_QUANTITIES = {
    ("C2", "tpu_attention_share_1440p_splash"): "block_1440p_attention_share_splash",
    ("C2", "tpu_attention_share_1440p_ours"): "block_1440p_attention_share_ours",
    ("C2", "tpu_attention_share_720p_splash"): "block_720p_attention_share_splash",
    ("C2", "tpu_attention_share_720p_ours"): "block_720p_attention_share_ours",
    ("C4", "tpu_fast_path_speedup_svg_1440p"): "kernels_1440p_fast_path_speedup_svg",
    ("C4", "tpu_fast_path_speedup_svg_720p"): "kernels_720p_fast_path_speedup_svg",
    ("C5", "tpu_attention_exponent_splash"): "block_attention_exponent_splash",
    ("C5", "tpu_attention_exponent_ours"): "block_attention_exponent_ours",
}


#: The unit of each claim's measured entries (as the results file's other entries of the claim).
UNITS = {"C2": "fraction", "C4": "ratio", "C5": ""}


def claim_entries(runs: list[dict]) -> dict[str, dict[str, dict]]:
    """``{claim: {name: entry}}``: each of :data:`CLAIM_QUANTITIES` some counted run measured with enough rounds
    (:func:`best` of them), as a results entry (value, ``band``: the measured interval, ``measured-tpu``, the run
    file, its rounds and IQR, and every other run that measured it)."""
    out: dict[str, dict[str, dict]] = {}
    for (claim, name), qid in CLAIM_QUANTITIES.items():
        measured = [(r, r["quantities"][qid]) for r in runs if qid in r["quantities"]]
        chosen = best(measured)
        if chosen is None:
            continue
        run, m = chosen
        out.setdefault(claim, {})[name] = {
            "value": m["value"], "band": list(measured_interval(m)), "iqr": m["interval"], "rounds": rounds(m),
            "provenance": MEASURED_TPU, "unit": UNITS[claim],
            "description": f"{qid} measured by svgtpu bench tpu on {run.get('device', 'a TPU')} x{run['chips']} "
                           f"({run['file']}): median over {rounds(m)} rounds, IQR widened by the noise floor",
            "run": run["file"], "device": f"{run.get('device', 'TPU')} x{run['chips']}", "quantity": qid,
            "others": [{"run": r["file"], "value": x["value"], "iqr": x["interval"], "rounds": rounds(x)}
                       for r, x in measured if r is not run]}
    return out


def with_tpu_runs(data: dict, directory: str | Path | None = None) -> dict:
    """``data`` (a results file's JSON) with every ``measured-tpu`` entry replaced by those the counted runs under
    ``directory`` give now (:func:`claim_entries`): the same ``data`` when there are none and it held none."""
    entries = claim_entries(counted_runs(directory))
    claims = {c: {n: e for n, e in es.items() if not (isinstance(e, dict) and e.get("provenance") == MEASURED_TPU)}
              for c, es in data.get("claims", {}).items()}
    for claim, found in entries.items():
        claims.setdefault(claim, {}).update(found)
    claims = {c: dict(sorted(es.items())) for c, es in sorted(claims.items()) if es}   # as NotebookRun.save orders
    return {**data, "claims": claims}


__all__ = ["TPU_RUNS_DIR", "MEASURED_TPU", "MIN_ROUNDS", "NOISE_FLOOR", "SLICE_CHIPS", "check_run", "check_evidence",
           "load_run", "counted_runs", "rounds", "counts", "measured_interval", "best", "CLAIM_QUANTITIES", "UNITS",
           "claim_entries", "with_tpu_runs"]
