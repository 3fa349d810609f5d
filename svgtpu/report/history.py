"""The verdict history: each claim's published verdict and central value at each round, and why each moved.

Made from the records, never typed: the verdict table as the README published it at each commit that changed
the README or ``figures/results.json`` (git history of the main line, ``--first-parent``), and the central value
the table showed with it (before the README had a verdict table: the value of the row's evidence in the results
file then).  A *round* is a day (UTC, the commit's date): its state is that of its last commit.
A *move* is a commit whose published verdict of a row differs from the one before; its reason is that commit's
subject, the house's one-line account of what changed and why, cut at its first clause.  A *value move* is a commit
whose results file moves a row's central value by more than :data:`VALUE_MOVE` (relative) from the value of the
row's last value move (its first value, to start): every such move is logged, with its commit and its reason, the
subject's own ``C1 a -> b (why)`` where the subject has one (the house's form for a commit that moves a claim), else
:data:`EXPLAINED`'s account of an older commit whose subject does not say it, else the subject cut as above.
:func:`unlogged_moves` names a row whose value in a results file lies more than :data:`VALUE_MOVE` from the
history's last value (the test that fails until ``svgtpu verdict-history`` logs the move).

``svgtpu verdict-history`` writes :data:`HISTORY` (committed; the rows are
:func:`svgtpu.report.verdicts.record_verdict_history`'s); ``svgtpu paper`` renders it into
``docs/verdict_history.md`` (:func:`history_table`, :func:`moves_table`) and a one-line-per-claim summary
(:func:`history_summary`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.facts.results import RESULTS_NAME

#: The committed record ``svgtpu verdict-history`` writes.
HISTORY = REPO_ROOT / "figures" / "verdict_history.json"
#: The files whose history holds the published verdicts and the values they judged.
SOURCES = ("README.md", f"figures/{RESULTS_NAME}")
#: Earlier names of today's verdict rows (a row renamed keeps its history).
ALIASES = {
    "C3 partial tiles before alignment": "C3 partial tiles before -> after alignment",
    "C3 partial tiles after alignment": "C3 partial tiles before -> after alignment",
    "C5 the same, toy DiT timed on this CPU (secondary)": "C5 the same, toy DiT timed on this CPU",
}
#: A move's reason is its commit's subject up to this many characters, cut at a clause boundary.
REASON_CHARS = 160
#: A central value moving by more than this share of itself (relative) is a value move, logged with its reason.
VALUE_MOVE = 0.02
#: Why a value moved, per (commit, claim), for commits whose subject does not say it (read from the commits they name).
EXPLAINED = {
    ("6217fe0", "C2"): "the figures remade on the cost model of ba8f47e: each TPU attention kernel priced at its own "
                       "compiled schedule and the v6e calibration refitting the matmul efficiency alone, so matmuls "
                       "are priced slower and attention's share of a dense pass fell (7be6098's cut knob ends: the "
                       "interval only)",
    ("6217fe0", "C1"): "the figures remade on the cost model of ba8f47e: each TPU attention kernel priced at its own "
                       "compiled schedule (Splash slower than ours, so attention weighs more in a Splash dense pass and "
                       "sparsity saves more) and the v6e calibration refitting the matmul efficiency alone",
}
#: ``C1 2.01 -> 1.95 (why)`` in a commit subject: the claim, the two values and why (no other claim between the
#: claim and its values: in ``C1 a -> b, C2 c -> d (why)`` only C2's move has its why).
_SUBJECT_MOVE = re.compile(r"\b(?P<claim>C[1-5]|Q)\b(?:(?!\b(?:C[1-5]|Q)\b)[^;(])*?(?P<before>[\d.]+ ?%?x?) ?-> ?(?P<after>[\d.]+ ?%?x?) ?"
                           r"\((?P<why>[^()]*(?:\([^()]*\)[^()]*)*)\)")


_INTERVAL = re.compile(r" \((?:band|interval|IQR)[^)]*\)")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def published_verdicts(readme: str) -> dict[str, dict]:
    """The README's generated verdict table as ``{row: {"verdict", "ours", "shown"}}`` (``ours``: the central
    value and provenance; ``shown``: with its interval; rows under today's names: :data:`ALIASES`); empty when
    the README has none."""
    begin, end = "<!-- svgtpu:begin verdicts -->", "<!-- svgtpu:end verdicts -->"
    if begin not in readme:
        return {}
    lines = [line.strip() for line in readme.split(begin, 1)[1].split(end, 1)[0].strip().splitlines()]
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    ours = next(i for i, c in enumerate(header) if c.startswith("ours"))
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        row = ALIASES.get(cells[0], cells[0])
        shown = cells[ours].replace("`", "")
        central = _INTERVAL.sub("", shown)
        rows[row] = {"verdict": cells[header.index("verdict")], "ours": "" if central == "—" else central,
                     "shown": "" if shown == "—" else shown}
    return rows


def _central(results: dict, keys: tuple[str, ...], format_value) -> str:
    """The first of ``keys`` the results hold, as ``format_value`` writes it (with its provenance), else ``—``."""
    for key in keys:
        claim, name = key.split(".", 1)
        entry = results.get("claims", {}).get(claim, {}).get(name)
        if entry is not None and isinstance(entry.get("value"), (int, float)):
            return f"{format_value(entry['value'], entry.get('unit', ''))} {entry.get('provenance', '')}".strip()
    return "—"


def _number(results: dict, keys: tuple[str, ...]) -> tuple[str, float, str] | None:
    """The first of ``keys`` the results hold with a number: ``(key, value, unit)``, else ``None``."""
    for key in keys:
        claim, name = key.split(".", 1)
        entry = results.get("claims", {}).get(claim, {}).get(name)
        if entry is not None and isinstance(entry.get("value"), (int, float)) and not isinstance(entry["value"], bool):
            return key, float(entry["value"]), entry.get("unit", "")
    return None


def _moved(before: float, after: float) -> bool:
    """``after`` lies more than :data:`VALUE_MOVE` (relative to ``before``) from ``before``."""
    return abs(after - before) > VALUE_MOVE * abs(before) if before else after != before


def _value_reason(repo: Path, commit: str, subject: str, claim: str) -> str:
    """Why ``commit`` moved a value of ``claim``: its subject's own ``claim a -> b (why)``, else :data:`EXPLAINED`,
    else the subject cut at its first clause (:func:`_reason`)."""
    for m in _SUBJECT_MOVE.finditer(subject):
        if m["claim"] == claim:
            return f"{claim} {m['before'].strip()} -> {m['after'].strip()} ({m['why'].strip()})"
    return EXPLAINED.get((commit[:7], claim)) or _reason(repo, commit, subject)


def _reason(repo: Path, commit: str, subject: str) -> str:
    """The commit's subject, cut at its first clause; for a merge, the newest subject of the merged commits that
    changed :data:`SOURCES` (a merge's own subject names the branch, not the change)."""
    parents = _git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if len(parents) > 1:
        merged = _git(repo, "log", "--no-merges", "-n", "1", "--format=%s", f"{parents[0]}..{commit}", "--", *SOURCES)
        subject = f"merged: {merged.strip() or subject}"
    cut = subject.split("; ", 1)[0]
    if cut.count("(") > cut.count(")"):   # a clause boundary inside parentheses: not a clause
        cut = subject
    if len(cut) > REASON_CHARS:
        cut = cut[:REASON_CHARS].rsplit(" ", 1)[0] + " …"
    return cut


def collect(repo: str | os.PathLike, rows: dict[str, list[tuple[str, ...]]], format_value) -> dict:
    """The history from ``repo``'s git log of :data:`SOURCES`: ``{"rows", "rounds", "moves", "sources"}``.

    ``rows``: today's verdict rows, each with the results keys of its central value (the first key of each tuple
    the results hold; two tuples: before -> after), as :func:`svgtpu.report.verdicts.record_verdict_history` passes
    them with its ``format_value``; ``rounds``: per day, its last commit and each row's published verdict and
    central value; ``moves``: each commit that changed a row's published verdict, from -> to, and why."""
    repo = Path(repo)
    if subprocess.run(["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True).returncode != 0:
        raise BadInput(f"the verdict history is read from git: {repo} must be a git checkout (a clone, not an archive)")
    log = _git(repo, "log", "--first-parent", "--reverse", "--format=%H %cI %s", "--", *SOURCES).splitlines()
    rounds: dict[str, dict] = {}
    moves, last, last_shown = [], {}, {}
    value_moves, anchors = [], {}
    for line in log:
        commit, when, subject = (line.split(" ", 2) + [""])[:3]
        files = set(_git(repo, "ls-tree", "--name-only", commit, *SOURCES).split())
        published = published_verdicts(_git(repo, "show", f"{commit}:README.md")) if "README.md" in files else {}
        results = json.loads(_git(repo, "show", f"{commit}:{SOURCES[1]}")) if SOURCES[1] in files else {}
        state = {}
        for row, keys in rows.items():
            shown = published.get(row, {})
            state[row] = {"verdict": shown.get("verdict", "—"),
                          "value": shown.get("ours") or " -> ".join(_central(results, k, format_value) for k in keys)}
            if shown.get("verdict", "—") != last.get(row, "—"):
                moves.append({"date": when[:10], "commit": commit[:7], "row": row, "from": last.get(row, "—"),
                              "to": shown.get("verdict", "—"), "ours_from": last_shown.get(row) or "—",
                              "ours_to": shown.get("shown") or "—", "reason": _reason(repo, commit, subject)})
                last[row] = shown.get("verdict", "—")
            last_shown[row] = shown.get("shown")
            for part, part_keys in enumerate(keys):
                found = _number(results, part_keys)
                if found is None:
                    continue
                key, value, unit = found
                anchor = anchors.get((row, part))
                if anchor is None or (anchor["key"] == key and not _moved(anchor["value"], value)):
                    anchors.setdefault((row, part), {"key": key, "value": value, "commit": commit[:7],
                                                     "shown": format_value(value, unit)})
                    continue
                value_moves.append({"date": when[:10], "commit": commit[:7], "row": row, "key": key,
                                    "from_key": anchor["key"], "from": anchor["value"], "to": value,
                                    "shown": f"{anchor['shown']} -> {format_value(value, unit)}",
                                    "relative": value / anchor["value"] - 1 if anchor["value"] else None,
                                    "reason": _value_reason(repo, commit, subject, row.split(" ", 1)[0])})
                anchors[(row, part)] = {"key": key, "value": value, "commit": commit[:7],
                                        "shown": format_value(value, unit)}
        rounds[when[:10]] = {"date": when[:10], "commit": commit[:7], "rows": state}
    values = {row: [{"part": part, **a} for (r, part), a in sorted(anchors.items()) if r == row] for row in rows}
    return {"rows": list(rows), "rounds": list(rounds.values()), "moves": moves, "value_moves": value_moves,
            "values": values, "keys": {row: [list(k) for k in keys] for row, keys in rows.items()},
            "sources": list(SOURCES)}


#: Provenances every ``make figures`` measures anew on the machine that runs it (the toy's CPU timings).
REMEASURED = frozenset({"measured-cpu", "measured-cpu-interpret"})


def unlogged_moves(history: dict, results: dict) -> list[str]:
    """Each row whose central value in ``results`` lies more than :data:`VALUE_MOVE` from the history's last value of
    it (or whose evidence is now another results key), as one line naming the row, both values and what to run.
    A value timed on the CPU that made the file (:data:`REMEASURED`) is left out: every ``make figures`` measures it
    again on whatever machine runs it, so its moves are that machine's noise (logged when committed, never owed)."""
    out = []
    for row, parts in history.get("values", {}).items():
        keys = history["keys"][row]
        for anchor in parts:
            found = _number(results, tuple(keys[anchor["part"]]))
            if found is None:
                continue
            key, value, _ = found
            claim, name = key.split(".", 1)
            if results["claims"][claim][name].get("provenance") in REMEASURED:
                continue
            if key != anchor["key"] or _moved(anchor["value"], value):
                out.append(f"{row}: {anchor['key']} {anchor['value']:.4g} (logged at {anchor['commit']}) -> {key} "
                           f"{value:.4g}, more than {VALUE_MOVE:.0%} with no entry: commit the result, then run "
                           "svgtpu verdict-history and commit figures/verdict_history.json")
    return out


def write(history: dict, path: str | os.PathLike = HISTORY) -> dict:
    """Write ``history`` (:func:`collect`) to ``path`` as JSON, atomically; returns it."""
    from svgtpu.facts.outputs import write_text
    write_text(path, json.dumps(history, indent=1, ensure_ascii=False) + "\n")
    return history


def load(path: str | os.PathLike = HISTORY) -> dict | None:
    path = Path(path)
    return json.loads(path.read_text()) if path.exists() else None


def _short(verdict: str) -> str:
    return verdict.split(": ", 1)[0]


def history_table(history: dict) -> str:
    """One line per round: each row's published verdict and the central value the results held."""
    head = ["round (last commit)"] + history["rows"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in history["rounds"]:
        cells = [f"{r['date']} ({r['commit']})"] + [f"{_short(r['rows'][row]['verdict'])}; {r['rows'][row]['value']}"
                                                   for row in history["rows"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def moves_table(history: dict) -> str:
    """Every move of a published verdict: when, which commit, from -> to, the value it was judged on before and
    after (with its interval, as published: what moved, in numbers), and the commit's own reason."""
    lines = ["| date | commit | row | from | to | ours before -> after (as published) | why (the commit's subject) |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {m['date']} | {m['commit']} | {m['row']} | {m['from']} | {m['to']} | "
              f"{m.get('ours_from', '—')} -> {m.get('ours_to', '—')} | {m['reason'].replace('|', '/')} |"
              for m in history["moves"]]
    return "\n".join(lines)


def value_moves_table(history: dict) -> str:
    """Every value move: when, which commit, the row and its results key, from -> to (relative), and why."""
    lines = ["| date | commit | row | results key | from -> to | moved | why |", "|---|---|---|---|---|---|---|"]
    for m in history.get("value_moves", []):
        key = m["key"] if m["key"] == m["from_key"] else f"{m['from_key']} -> {m['key']}"
        moved = "—" if m["key"] != m["from_key"] or m["relative"] is None else f"{m['relative']:+.1%}"
        lines.append(f"| {m['date']} | {m['commit']} | {m['row']} | `{key}` | {m['shown']} | "
                     f"{moved} | {m['reason'].replace('|', '/')} |")
    return "\n".join(lines)


def history_summary(history: dict) -> str:
    """Per row, the sequence of its published verdicts by round (consecutive repeats merged)."""
    parts = []
    for row in history["rows"]:
        seq = []
        for r in history["rounds"]:
            verdict = _short(r["rows"][row]["verdict"])
            if verdict != "—" and (not seq or seq[-1][0] != verdict):
                seq.append((verdict, r["date"]))
        if seq:
            parts.append(f"{row}: " + " → ".join(f"{v} ({d[5:]})" for v, d in seq))
    return "; ".join(parts) + "." if parts else "_No published verdict yet._"


__all__ = ["HISTORY", "ALIASES", "VALUE_MOVE", "REMEASURED", "EXPLAINED", "published_verdicts", "collect", "unlogged_moves", "write",
           "load", "history_table", "moves_table", "value_moves_table", "history_summary"]
