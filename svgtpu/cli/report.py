"""``svgtpu reproduce``, ``svgtpu paper`` and ``svgtpu verdict-history``: the notebooks, the figures and the paper's
tables."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from svgtpu.cli.common import command, defaults_block, refuse_repeated
from svgtpu.facts.outputs import check_output
from svgtpu.errors import BadInput
from svgtpu.facts.tables import format_table


# -- svgtpu reproduce / svgtpu paper ---------------------------------------------------------

def _reproduce_arguments(p: argparse.ArgumentParser) -> None:
    from svgtpu.report.reproduce import JOBS, NOTEBOOKS, PROFILES
    p.add_argument("--profile", default="cpu", choices=list(PROFILES),
                   help="sizes: quick (tests), cpu (make figures), tpu (real sizes on a TPU VM)")
    p.add_argument("--only", nargs="+", metavar="NOTEBOOK",
                   help=f"run only these notebooks, by number or name ({', '.join(n.split('_')[0] for n in NOTEBOOKS)})")
    p.add_argument("--figures-dir", help="where figures and results.json go (default: figures/)")
    p.add_argument("--jobs", type=int, help="notebooks run at once (default: "
                   + ", ".join(f"{n} for the {profile} profile" for profile, n in JOBS.items()) + ", else 1)")
    p.add_argument("--no-paper", action="store_true",
                   help="do not regenerate the paper's tables afterwards (never done with --figures-dir)")
    p.add_argument("--preflight", action="store_true",
                   help="run nothing: compile for v6e on this CPU (libtpu) what the profile's notebooks and "
                        "multi-host sampling will run, one host and several, and report what would fail")


@command("reproduce", "run the notebooks (papermill): every figure, results.json, the paper's tables",
         _reproduce_arguments)
def run_reproduce(args):
    if args.preflight:   # (result, table, 1 if anything would fail)
        from svgtpu.report.preflight import format_preflight, preflight
        result = preflight(args.profile, progress=not args.json)
        return result, format_preflight(result), 0 if result["passed"] else 1
    from svgtpu.report.reproduce import format_reproduce, reproduce_all
    refuse_repeated("--only", args.only)
    result = reproduce_all(args.profile, args.only, figures_dir=args.figures_dir, paper=not args.no_paper,
                           jobs=args.jobs, blocks={"cli-defaults": defaults_block(args.parser)})
    if result["failed"]:  # print the summary, then exit non-zero naming the failed notebooks
        print(json.dumps(result, indent=2) if args.json else format_reproduce(result))
        print(f"svgtpu reproduce: {len(result['failed'])} notebook(s) failed: {', '.join(result['failed'])}",
              file=sys.stderr)
        raise SystemExit(1)
    return result, format_reproduce(result)


def _paper_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", help="results file (default: figures/results.json)")
    p.add_argument("files", nargs="*", help="files with svgtpu markers (default: paper/svgtpu.md and README.md)")


@command("paper", "regenerate the paper's tables and figure blocks from the results file", _paper_arguments)
def run_paper(args):
    from svgtpu.report.paper import generate

    report = generate(args.results, args.files or None, blocks={"cli-defaults": defaults_block(args.parser)})
    return {"files": report}, format_table(report)


@command("verdict-history", "record each claim's published verdict per round and why it moved (git history) in "
         "figures/verdict_history.json", lambda p: None)
def run_verdict_history(args):
    from svgtpu.report.history import HISTORY, moves_table
    from svgtpu.report.verdicts import record_verdict_history

    history = record_verdict_history()
    return history | {"file": str(HISTORY)}, moves_table(history) + f"\n\nwritten to {HISTORY}; `svgtpu paper` renders it"


def _predict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="write the predictions here (figures/predictions/<date>.json to freeze them, a "
                                 "day's second <date>-2.json; an existing file is refused)")
    p.add_argument("--note", default="", help="a note stored in the file (what the predictions were made from)")
    p.add_argument("--against", metavar="RUN", nargs="+",
                   help="predict nothing: put bench tpu run files (measured-tpu; partial runs of a slice combine) "
                        "beside the frozen predictions, quantity by quantity, and give one verdict per claim")
    p.add_argument("--predictions", metavar="FILE",
                   help="with --against: the frozen predictions file (default the newest in figures/predictions/); "
                        "its sha256 must be the one pinned in svgtpu.report.predictions.FROZEN")


@command("predict", "what the package predicts svgtpu bench tpu will measure, each with its interval and the values "
         "that flip a verdict (svgtpu.report.predictions)", _predict_arguments)
def run_predict(args):
    from svgtpu.report import predictions
    if args.predictions and not args.against:
        raise BadInput("--predictions names the file --against reads; give --against RUN too")
    if args.against:
        if args.out:
            raise BadInput("--against predicts nothing, so --out has nothing to write; drop one")
        from svgtpu.facts.tpu_runs import check_evidence, load_run
        runs = [check_evidence(load_run(name, "--against"), f"--against {name}") for name in args.against]
        from svgtpu.report import prediction_outcomes as outcomes
        frozen = predictions.frozen(args.predictions)   # the run files first: a bad one is refused before any work
        rows = outcomes.compare(frozen, runs)
        verdicts = outcomes.claim_verdicts(runs)
        import textwrap

        from svgtpu.facts.tables import FIT_WIDTH
        columns = {"slice": "slice"} if len({r["slice"] for r in rows}) > 1 else {}
        columns |= {"quantity": "quantity", "predicted": "model", "measured": "measured", "rounds": "rounds",
                    "outcome": "outcome"}
        table = format_table([{shown: r[k] for k, shown in columns.items()} for r in rows])
        wrap = lambda text: textwrap.fill(text, FIT_WIDTH, subsequent_indent="  ")  # noqa: E731
        lines = [wrap(f"- {v['claim']}: {v['verdict']} ({v['why']})") for v in verdicts]
        return ({"predictions": frozen["file"], "runs": [r["file"] for r in runs], "rows": rows,
                 "verdicts": verdicts},
                "\n".join([table, wrap(outcomes.OUTCOMES), "", "one verdict per claim (docs/verdicts.md, a "
                            "measured TPU run):", *lines]))
    if args.out and Path(args.out).exists():   # refused before any work
        raise BadInput(f"--out {args.out} exists: a predictions file is never rewritten")
    if args.out:
        check_output("--out", args.out)
    result = predictions.predict(note=args.note)
    if args.out:
        result["written"] = str(predictions.write(result, args.out))
    return result, predictions.format_predictions(result)
