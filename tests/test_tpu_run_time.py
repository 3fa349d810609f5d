"""The TPU run's expected time (svgtpu.report.tpu_run_time): the budget replayed by hand, and README's block
rendered from a preflight record, or saying loudly that there is none, that it is stale or incomplete."""

import json
import math
from pathlib import Path

import pytest

from svgtpu.bench import tpu
from svgtpu.report import blocks, preflight_record
from svgtpu.report.tpu_run_time import Cost, budget_to_time_all, costs, expected_time, simulate


def _cost(name, section, variant, check_compile=0.0, compile_s=0.0, call=1.0):
    return Cost(f"{section} 1440p {name}", section, "1440p", variant, check_compile, 0.0, 0.0, 0.0, compile_s, call)


STEPS = [_cost("a", "kernels", "a", check_compile=10), _cost("b", "kernels", "b", check_compile=10),
         _cost("dense", "block", "dense-splash", check_compile=5, compile_s=100, call=2),
         _cost("none", "block", "none", compile_s=50, call=1)]


def test_simulate_replays_the_runs_budget_by_hand():
    # no budget: kernels: checks 2 x 10 s compile; 2 calls each; 9 rounds + a warm-up of 2 s per round.
    # block: the check 5 s; the block without attention compiles (50 s) and runs once for its finite check; the
    # dense block compiles (100 s) and 2 calls, the other 2 calls; 10 rounds of 3 s.
    full = simulate(STEPS)
    assert full["parts"]["compile"] == 20 + 5 + 50 + 100
    assert full["parts"]["device"] == 4 + 20 + 1 + 4 + 2 + 30
    assert full["elapsed_s"] == 236 and full["untimed"] == {} and full["rounds"] == {"kernels 1440p": 9,
                                                                                      "block 1440p": 9}
    # 150 s: kernels check to 20, then get 0.3 / 0.8 of the 130 s left (to 68.75): calls to 24, rounds
    # min(9, 44.75 // 2 - 1) = 9 -> 44; block: check to 49, then all of the rest (to 150): finite check 100, the
    # dense block still starts (50 s left) -> 204; the block without attention has no time left to be timed, and
    # one round is the warm calls'
    cut = simulate(STEPS, 150.0)
    assert cut["rounds"] == {"kernels 1440p": 9, "block 1440p": 1}
    assert cut["elapsed_s"] == 204
    assert cut["untimed"] == {"block 1440p none": "time budget: no time left to compile it"}
    # the budget that times all: nothing cut at it, something a second and a half below
    enough = budget_to_time_all(STEPS)
    assert not simulate(STEPS, enough)["untimed"] and simulate(STEPS, enough - 1.5)["untimed"]


def test_checks_longer_than_a_groups_share_leave_its_programs_timed():
    # 200 s: the kernels' two checks take 80 s, more than 0.3 / 0.8 of the budget (75 s); the share is of the time
    # left after them (0.375 x 120 s, to 125): calls to 84, rounds min(9, 41 // 2 - 1) = 9 -> 104; block: check to
    # 109, then the rest (to 200): compile 10 and 2 calls -> 123, rounds min(9, 77 // 2 - 1) = 9 -> 143
    steps = [_cost("a", "kernels", "a", check_compile=40), _cost("b", "kernels", "b", check_compile=40),
             _cost("dense", "block", "dense-splash", check_compile=5, compile_s=10, call=2)]
    cut = simulate(steps, 200.0)
    assert cut["untimed"] == {} and cut["rounds"] == {"kernels 1440p": 9, "block 1440p": 9}
    assert cut["elapsed_s"] == 143
    # 30 s: the first check runs past the run's deadline (to 40): no check starts after it, nothing is timed
    short = simulate(steps, 30.0)
    assert short["untimed"] == {"kernels 1440p a": "time budget: no time left to compile it",
                                "kernels 1440p b": "time budget: no time left to check it",
                                "block 1440p dense": "time budget: no time left to check it"}
    assert short["elapsed_s"] == 40 and short["rounds"] == {}


def _record(tmp_path, compile_s=10.0, drop=0, key=None, host_check=True):
    rows = [{"name": p.name, "chips": p.chips, "topology": tpu.SLICES[p.chips], "geometry": p.geometry,
             "compiled": True, "compile_s": compile_s, "build_s": 0.0, "reason": None}
            for p in tpu.all_programs(tpu.FULL)]
    record = {"kind": "preflight of svgtpu bench tpu", "provenance": "compiled-v6e", "commit": "abc1234",
              "date": "2099-01-01T00:00:00+00:00", "jax": "9.9.9", "libtpu": "8.8.8", "tokamax": "0",
              "host": {"cpus": 2, "loadavg": [1.0, 1.0, 1.0], "platform": "test"},
              "sources": {"key": key or preflight_record.sources_key()["key"]}, "programs": rows[drop:],
              "host_check": {"720p": {"seconds_per_head": 1.0}, "1440p": {"seconds_per_head": 4.0}} if host_check else {},
              "failed": 0, "passed": True, "wall_s": 600.0}
    folder = tmp_path / "preflight"
    folder.mkdir(exist_ok=True)
    (folder / "2099-01-01-abc1234.json").write_text(json.dumps(record))
    return record


def test_expected_time_adds_each_programs_compile_once_and_its_checks():
    rows = [{"name": p.name, "chips": p.chips, "compile_s": 10.0, "build_s": 0.0} for p in tpu.all_programs(tpu.FULL)]
    record = {"programs": rows, "host_check": {"720p": {"seconds_per_head": 1.0}, "1440p": {"seconds_per_head": 4.0}}}
    t = expected_time(record)
    for name, chips in (("v6e-1", 1), ("v6e-8", 8)):
        ran = tpu.programs(tpu.FULL, chips)
        full = t["slices"][name]["full"]
        # every program compiles once (10 s), and each block's check compiles its attention once more (10 s)
        checked_blocks = [p for p in ran if p.section != "kernels" and p.variant != "none"]
        assert full["parts"]["compile"] == pytest.approx(10.0 * (len(ran) + len(checked_blocks)))
        # one head per kernel check, two per block check
        heads = {g: sum(1 for p in ran if p.section == "kernels" and p.geometry == g)
                 + 2 * sum(1 for p in checked_blocks if p.geometry == g) for g in ("720p", "1440p")}
        assert full["parts"]["host_check"] == pytest.approx(heads["720p"] * 1.0 + heads["1440p"] * 4.0)
        assert full["untimed"] == {} and full["parts"]["device"] > 0
        assert math.isclose(full["elapsed_s"], sum(full["parts"].values()))
    # a 1-chip block is slower than the same block on 8 chips (the model's pricing, not a restated formula)
    one, eight = ({c.name: c.call_s for c in costs(record, chips)}["block 720p dense-splash"] for chips in (1, 8))
    assert one > eight
    with pytest.raises(Exception, match="does not hold"):
        costs({**record, "programs": rows[1:]}, 1)


def test_the_readme_block_renders_the_newest_record_or_says_there_is_none(tmp_path):
    none = blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    assert none.startswith("**Preflight: no record.**") and "svgtpu bench tpu --preflight" in none
    record = _record(tmp_path)
    text = blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    n = len(record["programs"])
    assert f"{n} of {n} programs compile for v6e" in text and "abc1234" in text and "jax 9.9.9" in text
    assert "libtpu 8.8.8" in text and "`compiled-v6e`" in text and "still match" in text
    assert "| v6e-1 |" in text and "| v6e-8 |" in text and "`modeled-v6e`" in text
    assert f"{tpu.FULL.budget_s:.0f} s budget" in text
    # the sources changed since the record: said in the block
    _record(tmp_path, key="0" * 20)
    assert "The sources changed since: rerun `svgtpu bench tpu --preflight`" in \
        blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    # a record without the checks' host seconds: that part said to be missing, not a zero
    _record(tmp_path, host_check=False)
    assert "| not in the record |" in blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    # a program the record does not hold: no time computed, said loudly
    _record(tmp_path, drop=1)
    missing = blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    assert "does not hold 1 program(s)" in missing and "| v6e-1 |" not in missing


def test_the_readme_block_is_made_of_its_figures_folder_not_the_models_environment(tmp_path, monkeypatch):
    """The device part is priced from the compiled tile table of the figures folder `svgtpu paper` fills from, so
    README's block is the same under the test suite's `$SVGTPU_COMPILED_TILES` (priors) as under `make figures`
    (the committed table); it was not, and README came out stale in the suite."""
    import shutil
    fixture = Path(__file__).with_name("data") / "compiled_tiles_fixture.json"
    _record(tmp_path)
    shutil.copy(fixture, tmp_path / "compiled_tiles.json")
    text = {}
    for env in (str(fixture), "none"):   # the model's table, and none: priors
        monkeypatch.setenv("SVGTPU_COMPILED_TILES", env)
        text[env] = blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    assert len(set(text.values())) == 1
    # and the table does price it: without one in the folder the device time is the priors'
    (tmp_path / "compiled_tiles.json").unlink()
    assert blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path) != text[str(fixture)]


def test_the_papers_sentence_says_the_preflight_and_the_time_or_that_neither_is_known(tmp_path):
    assert "is not known" in blocks.render("tpu-run-brief", {}, tmp_path / "p.md", tmp_path)
    record = _record(tmp_path)
    text = blocks.render("tpu-run-brief", {}, tmp_path / "p.md", tmp_path)
    assert f"Every one of the {len(record['programs'])} programs" in text and "abc1234" in text
    block = blocks.render("tpu-run-time", {}, tmp_path / "r.md", tmp_path)
    for name in ("v6e-1", "v6e-8"):   # each slice's time is the README table's budgeted run (its 9th column)
        row = next(line for line in block.splitlines() if line.startswith(f"| {name} |"))
        assert f"{row.split(' | ')[7]} on {name}" in text
    _record(tmp_path, drop=1)   # a program the newest record lacks: no time claimed
    assert "is not known" in blocks.render("tpu-run-brief", {}, tmp_path / "p.md", tmp_path)


def test_the_cost_line_prices_each_slices_budgeted_time_at_the_cited_price(tmp_path):
    from svgtpu.report import tpu_run_time
    assert "not known" in blocks.render("tpu-run-cost", {}, tmp_path / "r.md", tmp_path)
    record = _record(tmp_path)
    text = blocks.render("tpu-run-cost", {}, tmp_path / "r.md", tmp_path)
    t = expected_time(record)
    for name, s in t["slices"].items():   # seconds / 3600 x chips x dollars per chip-hour, by hand
        dollars = s["budgeted"]["elapsed_s"] / 3600 * s["chips"] * 2.70
        assert f"{name}: about " in text and f"${dollars:.2f}" in text
    assert tpu_run_time.V6E_DOLLARS_PER_CHIP_HOUR == 2.70 and "per chip-hour" in text and "Not counted" in text
