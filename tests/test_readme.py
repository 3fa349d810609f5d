"""README's first screen and its defaults table, generated from the code and the records (issue 53)."""

import json

from svgtpu.cli import build_parser
from svgtpu.cli.common import defaults_block
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.report import first_screen, paper


def block(text: str, name: str) -> str:
    begin, end = f"<!-- svgtpu:begin {name} -->\n", f"<!-- svgtpu:end {name} -->"
    return text[text.index(begin) + len(begin):text.index(end)].rstrip("\n")


def test_the_readme_defaults_are_the_command_lines():
    """Every default README states for an option is the parser's (README once said 3024 where tiles used 3072)."""
    assert block(paper.README.read_text(), "cli-defaults") == defaults_block(build_parser()), \
        "README's defaults are stale: run `python -m svgtpu paper`"


def test_the_defaults_block_reads_the_parser():
    table = defaults_block(build_parser())
    assert "| `svgtpu tiles` |" in table and "`--checkpoint checkpoints/toy_dit.npz`" in table   # paths from the checkout
    assert "`--seed 0`" in table and "`--cfg`" in table                 # a zero and a true flag are defaults too
    assert "/work" not in table and "None" not in table


def test_the_first_screen_blocks_render_the_record_or_say_not_measured(tmp_path):
    assert "_not measured yet in this checkout_" in first_screen.make_times_block({})
    assert first_screen.quick_start_block({}).count("(not measured yet)") == len(first_screen.QUICK_START)
    entry = first_screen.record_make("figures", 552.4, 1100, "fresh clone, idle", figures=tmp_path)
    assert entry["provenance"] == "measured-cpu" and entry["wall_s"] == 552.4
    record = json.loads((tmp_path / first_screen.RECORD_NAME).read_text())
    text = first_screen.make_times_block(record)
    assert "**9 min 12 s** wall, 18 min 20 s CPU" in text and "fresh clone, idle" not in text   # the note: the record's
    assert f"`figures/{first_screen.RECORD_NAME}`" in text and max(map(len, text.splitlines())) <= 120
    assert "`make test` (the test suite: pytest, 2 workers): _not measured yet" in text
    # measured elsewhere: the commit that ran it, and no load (this machine's now is not the run's)
    entry = first_screen.record_make("test", 200, None, "elsewhere", figures=tmp_path, commit="abc1234")
    assert entry["commit"] == "abc1234" and entry["load_average"] is None
    text = first_screen.make_times_block(json.loads((tmp_path / first_screen.RECORD_NAME).read_text()))
    line = next(l for l in text.splitlines() if l.startswith("- `make test`"))
    assert "at abc1234" in line and "load" not in line


def test_a_wide_table_keeps_to_the_width_with_a_legend():
    from svgtpu.facts.tables import FIT_WIDTH, format_table

    rows = [{"scenario": f"{name}: " + "a long description of the setting " * 3, "speedup": 1.5 + i}
            for i, name in enumerate(("first", "second", "first"))]
    rows[2]["scenario"] = rows[0]["scenario"]   # the same text: one key
    text = format_table(rows, fit=True)
    assert max(map(len, text.splitlines())) <= FIT_WIDTH
    assert text.splitlines()[2].split() == ["[1]", "1.5"] and text.splitlines()[4].split() == ["[1]", "3.5"]
    assert "[2] second: a long description" in text and text.count("[1] first:") == 1
    assert format_table(rows) == format_table(rows, fit=False) and "[1]" not in format_table(rows)
    narrow = [{"scenario": "short", "speedup": 1.0}]
    assert format_table(narrow, fit=True) == format_table(narrow)   # a table within the width is left as it is


def test_recipes_print_no_line_wider_than_a_terminal(capsys):
    from svgtpu.cli import main
    from svgtpu.facts.tables import FIT_WIDTH

    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    too_wide = [line for line in lines if len(line) > FIT_WIDTH and " " in line.strip()]   # an unbroken path may
    assert not too_wide, too_wide
    assert any(line.startswith("  - svg-project/Sparse-VideoGen/") for line in lines)   # one source a line


def test_generate_names_its_files_in_a_legend_within_the_width():
    from svgtpu.facts.tables import FIT_WIDTH
    from svgtpu.toy.sampler import format_generate

    gif = "/a/long/checkout/path/build/generate/video.gif"
    text = format_generate({"attention": "dense", "align": None, "seed": 0, "steps": 20, "sample_seconds": 96.4,
                            "labels": ["horizontal", "vertical", "diagonal"], "gif": gif,
                            "contact_sheet": gif[:-4] + ".png"})
    assert max(map(len, text.splitlines())) <= FIT_WIDTH
    assert f"] {gif}" in text and f"] {gif[:-4]}.png" in text


def test_the_first_screen_says_install_call_quick_start_then_the_long_commands_within_120_columns():
    from svgtpu.report.first_screen import FIRST_SCREEN_WIDTH, first_screen, first_screen_commands
    readme = paper.README.read_text()
    screen = first_screen(readme)
    wide = [line for line in screen.splitlines() if len(line) > FIRST_SCREEN_WIDTH]
    assert not wide, wide
    commands = first_screen_commands(readme)
    assert commands[0] == "make install" and commands[1] == "source .venv/bin/activate", commands
    quick = commands.index("svgtpu info")
    assert commands[-2:] == ["make figures", "make test"] and quick < len(commands) - 2
    assert screen.index("`.venv/bin/svgtpu") < screen.index("svgtpu info")   # how to call it, without activating


def test_each_verdict_word_is_defined_where_readme_first_uses_it():
    import re
    words = re.findall(r"^\| \*\*([a-z ]+)\*\* \|", (REPO_ROOT / "docs" / "verdicts.md").read_text(), re.M)
    assert len(words) >= 7, words
    readme = paper.README.read_text()
    title, screen = readme.split("\n", 1)[0], first_screen.first_screen(readme)   # the title's "reproduced": the package's
    rest = readme[len(screen):]
    for word in words:
        assert word not in screen[len(title):].lower(), f"{word!r} used on the first screen before its definition"
        first = rest.lower().index(word)
        assert rest[first - 2:first + len(word) + 3] == f"**{word}**:", (word, rest[first - 40:first + 40])
