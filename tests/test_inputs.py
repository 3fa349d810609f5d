"""Inputs checked by schemas (svgtpu/inputs/): every file, flag and variable refused in one line before any work.

Each refusal is checked as a user meets it, through ``svgtpu``'s ``main(argv)`` in this process: exit status 2,
one line on stderr naming the field (or flag), the value and what is allowed, no traceback, nothing on stdout,
nothing written.  The property tests feed each schema random and malformed documents (hypothesis, examples
bounded so the file stays within its time share) and check that random valid ones pass.
"""

import json
import os
from pathlib import Path

import pytest

from svgtpu.cli import main
from svgtpu.errors import BadInput
from svgtpu.facts.paths import REPO_ROOT

GPU_RUN = REPO_ROOT / "figures" / "gpu-runs" / "2026-12-04-314194b.json"
SYNTHETIC_RUN = Path(__file__).parent / "data" / "tpu_run_synthetic.json"


def refused(capsys, argv, *words: str, folder: Path | None = None) -> str:
    """``svgtpu ARGV`` exits 2 with one line on stderr holding each of ``words``, no traceback, nothing on stdout,
    and (``folder``) nothing new written there; the line."""
    before = set(folder.rglob("*")) if folder is not None else set()
    try:
        status = main(argv)
    except SystemExit as exit_:   # argparse's own refusals
        status = exit_.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and out == "", (argv, status, out, err)
    assert "Traceback" not in err and all(w in err for w in words), (argv, err, words)
    if folder is not None:
        assert set(folder.rglob("*")) == before, f"{argv} wrote {set(folder.rglob('*')) - before}"
    return lines[0]


# -- svgtpu predict --against: the run file ---------------------------------------------------

RUN_CASES = {
    "empty": ("", "is empty"),
    "blank": ("  \n", "is empty"),
    "truncated": ('{"chips": 8, "provenance": "x", "quantities": {', "truncated"),
    "yaml": ("chips: 8\nprovenance: x\n", "not JSON"),
    "foo": ('{"foo": 1}', "is missing"),
    "list": ("[1, 2]", "got a JSON list"),
    "no quantities": ('{"chips": 8, "provenance": "measured-tpu"}', "quantities is missing"),
    "string value": ('{"chips": 8, "provenance": "measured-tpu", "quantities": {"q": {"value": "fast", '
                     '"interval": [1, 2]}}}', "quantities.q.value = 'fast'"),
    "duplicate": ('{"chips": 8, "chips": 1, "provenance": "measured-tpu", "quantities": {}}', "'chips' is given twice"),
    "nan": ('{"chips": 8, "provenance": "measured-tpu", "quantities": {"q": {"value": NaN, "interval": [1, 2]}}}',
            "NaN is not a JSON number"),
    "binary": ("\0\1\2binary", "binary file"),
    "boolean chips": ('{"chips": true, "provenance": "measured-tpu", "quantities": {}}', "chips = True"),
    "reversed iqr": ('{"chips": 8, "provenance": "measured-tpu", "quantities": {"q": {"value": 1, '
                     '"interval": [2, 1]}}}', "low <= high"),
    "gpu provenance": ('{"chips": 1, "provenance": "measured-gpu-h200", "quantities": {}}', "is a GPU run"),
}


@pytest.mark.parametrize("case", RUN_CASES)
def test_predict_against_refuses_a_bad_run_file_in_one_line(case, capsys, tmp_path):
    text, words = RUN_CASES[case]
    path = tmp_path / "run.json"
    path.write_text(text)
    refused(capsys, ["predict", "--against", str(path)], "--against", words, folder=tmp_path)


def test_predict_against_refuses_the_packages_own_gpu_run(capsys):
    line = refused(capsys, ["predict", "--against", str(GPU_RUN)], "is a GPU run (measured-gpu-h200)")
    assert "bench tpu" in line


@pytest.mark.parametrize("path, words", [("/no/such/run.json", "no such file"), ("/dev/null", "not a regular file"),
                                         ("tests", "is a folder")])
def test_predict_against_refuses_what_is_no_file(path, words, capsys):
    refused(capsys, ["predict", "--against", path], "--against", words)


def test_predict_against_reads_a_valid_run(capsys, tmp_path):
    # a valid file of another provenance is read, then refused as evidence (issue 64: only measured-tpu judges)
    refused(capsys, ["predict", "--against", str(SYNTHETIC_RUN)], "--against", "provenance must be measured-tpu")
    measured = tmp_path / "run.json"   # the same SYNTHETIC numbers labelled as a TPU run, in a temporary folder
    measured.write_text(json.dumps(json.loads(SYNTHETIC_RUN.read_text()) | {"provenance": "measured-tpu"}))
    assert main(["predict", "--against", str(measured), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["provenance"] for r in rows} == {"measured-tpu"}
