"""A measured TPU run from its file to the verdicts (docs/verdicts.md, "A measured TPU run"): a SYNTHETIC v6e-8 run
file (no TPU ran; written to a temporary folder only) goes into the results file, the README's and the paper's
verdict tables, ``svgtpu predict --against``'s one verdict per claim, and the verdict history, each step checked."""

import json
import shutil
import subprocess

import pytest

from svgtpu.facts import tpu_runs
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.report import paper, prediction_outcomes
from svgtpu.report.verdicts import record_verdict_history
from svgtpu.report.history import published_verdicts


def _q(value, low, high, rounds=9):
    return {"value": value, "interval": [low, high], "rounds": rounds}


#: The synthetic run's quantities, chosen so each claim's rule gives a different verdict: C2's Splash share 0.80
#: (IQR 0.79-0.81, widened by the 2 % floor: 0.774-0.826, wholly below 0.882: contradicted, lower) with ours agreeing;
#: C4's fast path 1.30 (direction only); C5's exponent 1.95 (widened 1.861-2.039 holds 2, 9 % wide: reproduced).
SYNTHETIC = {
    "block_1440p_attention_share_splash": _q(0.80, 0.79, 0.81),
    "block_1440p_attention_share_ours": _q(0.81, 0.80, 0.82),
    "kernels_1440p_fast_path_speedup_svg": _q(1.30, 1.25, 1.35),
    "block_attention_exponent_splash": _q(1.95, 1.90, 2.00),
    "block_attention_exponent_ours": _q(1.97, 1.93, 2.01),
    "block_720p_attention_share_splash": _q(0.70, 0.60, 0.80, rounds=4),   # cut by the budget: not measured
}


def _run(**changes) -> dict:
    return {"note": "SYNTHETIC: tests/test_tpu_run_chain.py, no TPU ran", "provenance": "measured-tpu",
            "smoke": False, "profile": "v6e", "chips": 8, "device": "TPU v6e", "date": "2099-01-01",
            "commit": "synthetic", "quantities": SYNTHETIC} | changes


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _verdicts(readme: str) -> dict:
    return {row: v["verdict"] for row, v in published_verdicts(readme).items()}


@pytest.mark.slow
def test_a_synthetic_v6e8_run_through_the_whole_chain(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "figures", repo / "figures", ignore=shutil.ignore_patterns("compiled", "*.png"))
    (repo / "paper").mkdir()
    for name in ("README.md", "paper/svgtpu.md"):
        shutil.copy(REPO_ROOT / name, repo / name)
    results = repo / "figures" / "results.json"
    targets = [repo / "README.md", repo / "paper" / "svgtpu.md"]
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "README.md", "figures/results.json")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "before any run")
    before = _verdicts((repo / "README.md").read_text())
    untouched = results.read_bytes()

    # 1. a smoke run and a run of another provenance beside it change nothing
    runs = repo / "figures" / "tpu-runs"
    runs.mkdir()
    (runs / "2099-01-01-synthetic-smoke.json").write_text(json.dumps(_run(smoke=True, profile="smoke",
                                                                          provenance="measured-cpu-interpret")))
    paper.generate(results, targets)
    assert results.read_bytes() == untouched and _verdicts((repo / "README.md").read_text()) == before

    # 2. the measured run: into the results file, each counted quantity as its claim's measured-tpu entry
    (runs / "2099-01-01-synthetic.json").write_text(json.dumps(_run()))
    paper.generate(results, targets)
    claims = json.loads(results.read_text())["claims"]
    share = claims["C2"]["tpu_attention_share_1440p_splash"]
    assert share["provenance"] == "measured-tpu" and share["value"] == 0.80 and share["rounds"] == 9
    assert share["band"] == pytest.approx([0.79 - 0.016, 0.81 + 0.016])   # the IQR widened by 2 % of the value
    assert "tpu_attention_share_720p_splash" not in claims["C2"]            # 4 rounds: not measured
    assert claims["C2"]["attention_share_1440p"]["provenance"] == "modeled-v6e"   # the model stays beside it

    # 3. README's and the paper's verdict tables judge the measurement; the model is shown beside it
    readme = (repo / "README.md").read_text()
    after = _verdicts(readme)
    c2, c4, c5 = (next(r for r in after if r.startswith(c)) for c in ("C2 self", "C4 ", "C5 attention"))
    assert after[c2] == "contradicted: the TPU run puts it lower than reported"
    assert after[c4] == "direction only" and after[c5] == "reproduced"
    row = next(line for line in readme.splitlines() if line.startswith(f"| {c2} |"))
    assert "`measured-tpu`" in row and "Beside it, `C2.attention_share_1440p`" in row
    assert "the instruments agree" in row   # ours through the run agrees with Splash's (the agreement rule)
    assert "`measured-tpu`" in (repo / "paper" / "svgtpu.md").read_text()
    assert "2099-01-01-synthetic.json" in (repo / "paper" / "svgtpu.md").read_text()   # the predictions block

    # 4. predict --against: one verdict per claim, the same as README's
    run = tpu_runs.load_run(runs / "2099-01-01-synthetic.json")
    verdicts = {v["claim"]: v["verdict"] for v in prediction_outcomes.claim_verdicts([run])}
    assert verdicts == {"C1": "not measured", "C2": after[c2], "C3": "not measured", "C4": "direction only",
                        "C5": "reproduced"}

    # 5. the verdict history logs the moves on the commit that adds the run
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "README.md", "figures/results.json")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "v6e-8 run: synthetic, a test")
    history = record_verdict_history(repo, tmp_path / "history.json")
    moved = {m["row"]: m for m in history["moves"] if m["reason"].startswith("v6e-8 run")}
    assert moved[c2]["from"] == before[c2] and moved[c2]["to"] == after[c2]
    assert moved[c5]["to"] == "reproduced" and c4 not in moved   # C4's verdict stays direction only
    assert any(m["row"] == c2 and m["key"] == "C2.tpu_attention_share_1440p_splash"
               for m in history["value_moves"])   # its evidence is now the run's
