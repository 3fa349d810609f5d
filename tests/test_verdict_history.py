"""The verdict history is read from the records: a README's published verdict table and the results file at each
commit of a throwaway git repository, rounds by day, moves with their commit's own reason."""

import json
import os
import subprocess

import pytest

from svgtpu.errors import BadInput
from svgtpu.report import blocks, history, paper, verdicts

ROW = "C1 1440p end-to-end speedup"


def _readme(verdict: str, ours: str) -> str:
    return ("# x\n\n<!-- svgtpu:begin verdicts -->\n| claim | reported | ours | verdict | rule | why |\n"
            "|---|---|---|---|---|---|\n"
            f"| {ROW} | 1.69x | {ours} | {verdict} | interval | because |\n"
            "| C5 the same, toy DiT timed on this CPU (secondary) | quadratic | 1.74 `measured-cpu` | reproduced | "
            "interval | why |\n<!-- svgtpu:end verdicts -->\n")


def _commit(repo, when: str, subject: str, readme: str | None, speedup: float):
    if readme is not None:
        (repo / "README.md").write_text(readme)
    (repo / "figures").mkdir(exist_ok=True)
    (repo / "figures" / "results.json").write_text(json.dumps({"claims": {"C1": {"speedup": {
        "value": speedup, "unit": "ratio", "provenance": "modeled-v6e"}}}}))
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", subject], check=True, env=env)


def test_rounds_are_days_and_moves_carry_their_commits_reason(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _commit(tmp_path, "2026-01-01T08:00:00+00:00", "figures: first run", None, 2.10)
    _commit(tmp_path, "2026-01-02T08:00:00+00:00", "paper: the verdict table; with more words", _readme(
        "contradicted: our model puts it faster than reported", "2.00x (interval 1.90x – 2.05x) `modeled-v6e`"), 2.0)
    _commit(tmp_path, "2026-01-02T20:00:00+00:00", "costmodel: a wider interval (more evidence); and so on",
            _readme("consistent", "1.97x (interval 1.56x – 2.00x) `modeled-v6e`"), 1.97)
    _commit(tmp_path, "2026-01-03T08:00:00+00:00", "figures: rerun", _readme(
        "consistent", "1.96x (interval 1.56x – 2.00x) `modeled-v6e`"), 1.96)
    record = verdicts.record_verdict_history(tmp_path, tmp_path / "history.json")
    assert json.loads((tmp_path / "history.json").read_text()) == record
    rounds = {r["date"]: r["rows"] for r in record["rounds"]}
    assert list(rounds) == ["2026-01-01", "2026-01-02", "2026-01-03"]
    # before any verdict table: the value from the results file; after: the published central value
    assert rounds["2026-01-01"][ROW] == {"verdict": "—", "value": "2.10x modeled-v6e"}
    assert rounds["2026-01-02"][ROW] == {"verdict": "consistent", "value": "1.97x modeled-v6e"}   # the day's last
    moves = [(m["date"], m["from"], m["to"], m["reason"]) for m in record["moves"] if m["row"] == ROW]
    assert moves == [("2026-01-02", "—", "contradicted: our model puts it faster than reported",
                      "paper: the verdict table"),
                     ("2026-01-02", "contradicted: our model puts it faster than reported", "consistent",
                      "costmodel: a wider interval (more evidence)")]
    first = next(m for m in record["moves"] if m["row"] == ROW and m["to"] == "consistent")
    assert (first["ours_from"], first["ours_to"]) == ("2.00x (interval 1.90x – 2.05x) modeled-v6e",
                                                      "1.97x (interval 1.56x – 2.00x) modeled-v6e")
    # an old row name keeps its history under today's
    assert rounds["2026-01-03"]["C5 the same, toy DiT timed on this CPU"]["verdict"] == "reproduced"
    assert history.history_summary(record).startswith(f"{ROW}: consistent (01-02);")


def test_the_history_renders_from_its_record_or_says_not_yet(tmp_path):
    assert "not yet" in blocks.render("verdict-history", {}, tmp_path / "d.md", tmp_path).lower()
    record = {"rows": [ROW], "rounds": [{"date": "2026-01-02", "commit": "abc1234", "rows": {
        ROW: {"verdict": "contradicted: our model puts it faster", "value": "2.00x modeled-v6e"}}}],
        "moves": [{"date": "2026-01-02", "commit": "abc1234", "row": ROW, "from": "—", "to": "contradicted",
                   "reason": "paper: the table"}]}
    (tmp_path / history.HISTORY.name).write_text(json.dumps(record))
    table = blocks.render("verdict-history", {}, tmp_path / "d.md", tmp_path)
    assert "| 2026-01-02 (abc1234) | contradicted; 2.00x modeled-v6e |" in table
    assert "| 2026-01-02 | abc1234 | C1 1440p end-to-end speedup | — | contradicted | — -> — | paper: the table |" in \
        blocks.render("verdict-moves", {}, tmp_path / "d.md", tmp_path)


def test_outside_a_git_checkout_the_history_says_so(tmp_path):
    with pytest.raises(BadInput, match="git checkout"):
        verdicts.record_verdict_history(tmp_path, tmp_path / "history.json")


def test_every_central_move_over_two_percent_is_logged_with_its_reason(tmp_path):
    """Value moves: 2.00 -> 2.03 (+1.5 %) is no move; -> 2.05 (+2.5 % from the last logged 2.00) is one, and the
    subject's own 'C1 a -> b (why)' is its reason; -> 1.90 (-7.3 %) is another, its reason the subject cut."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _commit(tmp_path, "2026-01-01T08:00:00+00:00", "figures: first run", None, 2.00)
    _commit(tmp_path, "2026-01-01T09:00:00+00:00", "figures: rerun", None, 2.03)
    _commit(tmp_path, "2026-01-02T08:00:00+00:00", "costmodel: stages compiled; C1 2.00 -> 2.05 (the VAE decoder "
            "priced from its compile (issue 61)); tests", None, 2.05)
    _commit(tmp_path, "2026-01-03T08:00:00+00:00", "figures: a new calibration; more words", None, 1.90)
    record = verdicts.record_verdict_history(tmp_path, tmp_path / "history.json")
    moves = [(m["commit"], m["key"], m["shown"], m["reason"]) for m in record["value_moves"] if m["row"] == ROW]
    commits = subprocess.run(["git", "-C", str(tmp_path), "log", "--reverse", "--format=%h"], check=True,
                             capture_output=True, text=True).stdout.split()
    assert moves == [(commits[2][:7], "C1.speedup", "2.00x -> 2.05x",
                      "C1 2.00 -> 2.05 (the VAE decoder priced from its compile (issue 61))"),
                     (commits[3][:7], "C1.speedup", "2.05x -> 1.90x", "figures: a new calibration")]
    table = history.value_moves_table(record)
    assert "| `C1.speedup` | 2.05x -> 1.90x | -7.3% | figures: a new calibration |" in table
    # a results file moved past the last logged value without a new entry: named; within 2 %: not
    moved = {"claims": {"C1": {"speedup": {"value": 1.95, "unit": "ratio"}}}}
    assert history.unlogged_moves(record, moved) and ROW in history.unlogged_moves(record, moved)[0]
    assert history.unlogged_moves(record, {"claims": {"C1": {"speedup": {"value": 1.92, "unit": "ratio"}}}}) == []
    # a value the CPU that ran make figures timed anew is that machine's, never owed an entry (make figures, then
    # make test, as README's first screen runs them)
    timed = {"claims": {"C1": {"speedup": {"value": 1.95, "unit": "ratio", "provenance": "measured-cpu"}}}}
    assert history.unlogged_moves(record, timed) == []


def test_the_committed_history_logs_every_move_of_the_committed_results():
    """Fails when figures/results.json moves a central value more than 2 % from the history's last logged value:
    commit the result, run `svgtpu verdict-history`, commit figures/verdict_history.json."""
    from svgtpu.facts.results import load_results
    record = history.load()
    assert record is not None and "values" in record, "figures/verdict_history.json: run svgtpu verdict-history"
    assert history.unlogged_moves(record, load_results(paper.COMMITTED_RESULTS)) == []
