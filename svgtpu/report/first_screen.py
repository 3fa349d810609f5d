"""The README's first screen: how long its two commands and the quick start's commands take, as measured.

The times are numbers of ours, so they come from a record, ``figures/first_screen.json`` (provenance
``measured-cpu``, with the date, commit, machine and load they were taken under), and ``svgtpu paper`` renders
them into README's ``make-times`` and ``quick-start`` blocks.  ``python -m svgtpu.report.first_screen quick-start``
times the quick start's commands one at a time here; ``time-make figures`` / ``time-make test`` runs and times a make
target (on a fresh clone and idle cores for the README's claim), ``record-make TARGET WALL_S [CPU_S] --note ...``
stores a time measured elsewhere (``/usr/bin/time -v make figures``).
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from svgtpu.facts.paths import REPO_ROOT

RECORD_NAME = "first_screen.json"
#: The quick start: cheap commands a newcomer runs first, each with what it shows (a line of README's first screen
#: with its time: within :data:`FIRST_SCREEN_WIDTH`).
QUICK_START = (
    ("svgtpu info", "the backend, devices and versions this install runs on"),
    ("svgtpu recipes", "SVG's published Wan recipes and tile settings, each with its source"),
    ("svgtpu tiles", "C3: full, partial and empty tiles of the SVG mask at the production setting"),
    ("svgtpu costmodel", "C1, C2: each claim's value and interval, the user's-kernel check beside it"),
    ("svgtpu explore", "one setting's tiles, kernel budget and modeled attention, as the explorer shows"),
)
#: The README's two commands.
MAKE_TARGETS = {"figures": "every figure, figures/results.json and the paper's tables",
                "test": "the test suite: pytest, 2 workers",
                "evidence": "every compile record made again from nothing, then make figures"}


def record_path(figures: str | os.PathLike | None = None) -> Path:
    return Path(figures) / RECORD_NAME if figures is not None else REPO_ROOT / "figures" / RECORD_NAME


def load(figures: str | os.PathLike | None = None) -> dict:
    path = record_path(figures)
    return json.loads(path.read_text()) if path.exists() else {}


def _stamp() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "cores": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "provenance": "measured-cpu"}


def _save(update: dict, figures=None) -> Path:
    from svgtpu.facts.outputs import write_text
    data = load(figures) | update
    return write_text(record_path(figures), json.dumps(data, indent=1, sort_keys=True) + "\n")


def time_quick_start(figures=None) -> dict:
    """Run each :data:`QUICK_START` command once, one at a time, and record its wall time."""
    times = {}
    for command, _ in QUICK_START:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "svgtpu", *command.split()[1:]], cwd=REPO_ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[command] = round(time.perf_counter() - start, 1)
    entry = {**_stamp(), "seconds": times}
    _save({"quick_start": entry}, figures)
    return entry


def record_make(target: str, wall_s: float, cpu_s: float | None = None, note: str = "", figures=None,
                commit: str | None = None, load_average: list | None = None) -> dict:
    """Store the time of ``make TARGET`` with its stamp and ``note`` (how it was run).  Measured elsewhere (no
    ``load_average`` given), the entry holds no load, since this machine's now is not the run's, and ``commit``
    names the checkout that ran (default: this one's)."""
    from svgtpu.errors import BadInput
    if target not in MAKE_TARGETS:
        raise BadInput(f"target must be one of {', '.join(MAKE_TARGETS)}, got {target!r}")
    stamp = _stamp() | {"load_average": load_average} | ({"commit": commit} if commit else {})
    entry = {**stamp, "wall_s": round(float(wall_s), 1), "cpu_s": None if cpu_s is None else round(float(cpu_s), 1),
             "note": note}
    make = load(figures).get("make", {}) | {target: entry}
    _save({"make": make}, figures)
    return entry


def time_make(target: str, note: str = "", figures=None) -> dict:
    """Run ``make TARGET`` in the checkout and record its wall time and its children's CPU time."""
    import resource
    load_average = [round(x, 2) for x in os.getloadavg()]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(["make", target], cwd=REPO_ROOT, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return record_make(target, wall, cpu, note, figures, load_average=load_average)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{seconds:.1f} s"


def _machine(entry: dict) -> str:
    load = f", load {entry['load_average'][0]} at its start" if entry.get("load_average") else ""
    return f"`{entry['provenance']}`, {entry['date'][:10]} at {entry['commit']}, {entry['cores']} cores{load}"


#: The widest line of README's first screen (everything above ``**Does it reproduce?**``).
FIRST_SCREEN_WIDTH = 120
#: Where README's first screen ends.
FIRST_SCREEN_END = "**Does it reproduce?**"


def _wrap(text: str, indent: str = "  ") -> str:
    import textwrap
    return textwrap.fill(text, FIRST_SCREEN_WIDTH, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False)


def make_times_block(record: dict) -> str:
    """README's ``make-times`` block: each make target's measured time (how it was run: in the record), or that it
    has not been measured yet; lines within :data:`FIRST_SCREEN_WIDTH`."""
    lines = []
    for target, what in MAKE_TARGETS.items():
        entry = record.get("make", {}).get(target)
        if entry is None:
            lines.append(_wrap(f"- `make {target}` ({what}): _not measured yet in this checkout_ "
                               f"(`python -m svgtpu.report.first_screen time-make {target}`)"))
            continue
        cpu = f", {_duration(entry['cpu_s'])} CPU" if entry.get("cpu_s") is not None else ""
        lines.append(_wrap(f"- `make {target}` ({what}): **{_duration(entry['wall_s'])}** wall{cpu} "
                           f"({_machine(entry)})"))
    return "\n".join(lines) + "\n\n" + _wrap(f"How each was run: `figures/{RECORD_NAME}`.", "")


def quick_start_block(record: dict) -> str:
    """README's ``quick-start`` block: the venv activated, then each command with what it shows and how long it took
    here, as one bash block a reader can paste; lines within :data:`FIRST_SCREEN_WIDTH`."""
    entry = record.get("quick_start")
    seconds = entry["seconds"] if entry else {}
    activate = "source .venv/bin/activate"
    width = max(len(command) for command in [activate, *(c for c, _ in QUICK_START)])
    lines = ["```bash", f"{activate:<{width}}  # once per shell (or call .venv/bin/svgtpu)"]
    for command, what in QUICK_START:
        took = f" ({_duration(seconds[command])})" if command in seconds else " (not measured yet)"
        lines.append(f"{command:<{width}}  # {what}{took}")   # never wrapped: a shell would run the rest
    how = (f"Times: each command alone, once, in a checkout where it had run before ({_machine(entry)}; "
           "`python -m svgtpu.report.first_screen quick-start`).") if entry else \
        "Times: `python -m svgtpu.report.first_screen quick-start` records them."
    return "\n".join(lines + ["```", "", _wrap(how, "")])


def first_screen(readme: str) -> str:
    """README's first screen: everything above :data:`FIRST_SCREEN_END`."""
    return readme.split(FIRST_SCREEN_END)[0]


def first_screen_commands(readme: str) -> list[str]:
    """The shell commands of README's first screen in order: each line of its ``bash`` blocks, comments dropped."""
    commands, inside = [], False
    for line in first_screen(readme).splitlines():
        if line.strip().startswith("```"):
            inside = line.strip() == "```bash"
            continue
        command = line.split("  #")[0].strip()
        if inside and command and not command.startswith("#"):
            commands.append(command)
    return commands


def main(argv: list[str] | None = None) -> None:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m svgtpu.report.first_screen", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("quick-start", help="time the quick start's commands here, one at a time")
    for name in ("time-make", "record-make"):
        p = sub.add_parser(name, help="run and time a make target" if name == "time-make" else
                           "store a make target's time measured elsewhere")
        p.add_argument("target", choices=list(MAKE_TARGETS))
        if name == "record-make":
            p.add_argument("wall_s", type=float)
            p.add_argument("cpu_s", type=float, nargs="?")
            p.add_argument("--commit", help="the commit of the checkout that ran it (default: this checkout's)")
        p.add_argument("--note", default="", help="how it was run (fresh clone, idle cores, ...)")
    args = parser.parse_args(argv)
    if args.what == "quick-start":
        result = time_quick_start()
    elif args.what == "time-make":
        result = time_make(args.target, args.note)
    else:
        result = record_make(args.target, args.wall_s, args.cpu_s, args.note, commit=args.commit)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()


__all__ = ["RECORD_NAME", "QUICK_START", "MAKE_TARGETS", "record_path", "load", "time_quick_start", "record_make",
           "time_make", "FIRST_SCREEN_WIDTH", "FIRST_SCREEN_END", "first_screen", "first_screen_commands", "make_times_block", "quick_start_block", "main"]
