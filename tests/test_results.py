"""The results file (read-modify-write per notebook) and the paper tables generated from it."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from svgtpu import cli  # noqa: E402
from svgtpu.report import blocks, paper, tables
from svgtpu.report import reproduce
from svgtpu.facts import results


def _run(tmp_path, notebook="03_mask_alignment", profile="quick"):
    return results.NotebookRun(notebook, profile, tmp_path)


def test_record_stamps_provenance_profile_versions_and_reported(tmp_path):
    run = _run(tmp_path)
    run.record("C3", "partial_share_before", 0.2349, provenance="computed", unit="fraction")
    run.save()
    entry = results.load_results(tmp_path / "results.json")["claims"]["C3"]["partial_share_before"]
    assert entry["value"] == 0.2349
    assert entry["reported"] == results.REPORTED["C3", "partial_share_before"]
    assert entry["provenance"] == "computed" and entry["profile"] == "quick"
    assert entry["notebook"] == "03_mask_alignment"
    assert {"jax", "svgtpu", "backend"} <= set(entry)


def test_saving_one_notebook_keeps_the_others_and_replaces_its_own(tmp_path):
    first = _run(tmp_path, "05_quadratic_scaling")
    first.record("C2", "attention_share_1440p", 0.9, provenance="modeled-v6e", unit="fraction")
    first.save()
    old = _run(tmp_path)
    old.record("C3", "stale", 1.0, provenance="computed")
    old.save()
    new = _run(tmp_path)
    new.record("C3", "partial_share_after", 0.0025, provenance="computed", unit="fraction")
    new.save()
    data = results.load_results(tmp_path / "results.json")
    assert data["claims"]["C2"]["attention_share_1440p"]["value"] == 0.9
    assert set(data["claims"]["C3"]) == {"partial_share_after"}
    assert set(data["notebooks"]) == {"05_quadratic_scaling", "03_mask_alignment"}


def test_numpy_values_are_stored_as_plain_json(tmp_path):
    import numpy as np
    run = _run(tmp_path)
    run.record("C3", "table", [{"share": np.float64(0.5), "n": np.int64(3)}], provenance="computed")
    run.record("C3", "array", np.arange(3), provenance="computed")
    run.save()
    text = (tmp_path / "results.json").read_text()
    data = json.loads(text)
    assert data["claims"]["C3"]["table"]["value"] == [{"share": 0.5, "n": 3}]
    assert data["claims"]["C3"]["array"]["value"] == [0, 1, 2]


def test_save_figure_writes_files_and_remembers_caption(tmp_path):
    run = _run(tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    paths = run.save_figure(fig, "demo", caption="A line.", provenance="computed", claim="C3")
    plt.close(fig)
    assert [p.name for p in paths] == ["demo.png", "demo.svg"] and all(p.stat().st_size > 0 for p in paths)
    run.save()
    figure = results.load_results(tmp_path / "results.json")["figures"]["demo"]
    assert figure["caption"] == "A line." and figure["files"] == ["demo.png", "demo.svg"]


@pytest.mark.parametrize("kwargs, word", [
    ({"claim": "C9", "provenance": "computed"}, "claim"),
    ({"claim": "C1", "provenance": "guessed"}, "provenance"),
])
def test_bad_claim_or_provenance_is_a_clear_error(tmp_path, kwargs, word):
    with pytest.raises(ValueError, match=word):
        _run(tmp_path).record(name="x", value=1.0, **kwargs)


def test_missing_results_file_is_an_empty_skeleton(tmp_path):
    assert results.load_results(tmp_path / "nothing.json") == results.empty_results()


def test_figures_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SVGTPU_FIGURES_DIR", str(tmp_path))
    assert results.results_path() == tmp_path / "results.json"


@pytest.mark.parametrize("value, unit, text", [
    (0.2349, "fraction", "23.49 %"), (1.6912, "ratio", "1.69x"), (16.04, "min", "16 min"),
    (None, "", "—"), (1234, "", "1,234"), ("n/a", "", "n/a"),
])
def test_format_value(value, unit, text):
    assert tables.format_value(value, unit) == text


PAPER = """# Title
Intro text stays.
<!-- svgtpu:begin claims -->
old claims table
<!-- svgtpu:end claims -->
Between.
<!-- svgtpu:begin C3 -->
<!-- svgtpu:end C3 -->
<!-- svgtpu:begin figure demo -->
<!-- svgtpu:end figure demo -->
The end.
"""


def _results_with_c3(tmp_path):
    run = _run(tmp_path / "figures")
    run.record("C3", "partial_share_before", 0.2349, provenance="computed", unit="fraction")
    run.record("C3", "partial_share_table", [{"preset": "1440p", "partial_share": 0.2349}],
               provenance="computed", unit="fraction", description="per preset")
    fig, _ = plt.subplots()
    run.save_figure(fig, "demo", caption="Demo figure.", provenance="computed", formats=("png",))
    plt.close(fig)
    return run.save()


def test_paper_blocks_are_generated_from_the_results(tmp_path):
    path = _results_with_c3(tmp_path)
    target = tmp_path / "paper" / "svgtpu.md"
    target.parent.mkdir()
    target.write_text(PAPER)
    report = paper.generate(path, [target])
    text = target.read_text()
    assert report == [{"file": str(target), "blocks": 3, "changed": True}]
    assert "old claims table" not in text
    assert "| C3 | partial (masked) tiles, SVG mask, 1440p | — | — | — | 27.55 % | 23.49 % | `computed` | quick |" in text
    assert "| 1440p | 23.49 % |" in text                    # list-valued result as its own table
    assert "![demo](../figures/demo.png)" in text and "Demo figure." in text
    assert text.startswith("# Title\nIntro text stays.\n") and "Between.\n" in text and text.endswith("The end.\n")
    assert paper.generate(path, [target])[0]["changed"] is False  # idempotent


def test_paper_blocks_say_what_is_missing(tmp_path):
    target = tmp_path / "svgtpu.md"
    target.write_text(PAPER)
    paper.generate(tmp_path / "results.json", [target])
    assert "Not generated yet" in target.read_text()


def test_unknown_paper_marker_names_itself(tmp_path):
    target = tmp_path / "svgtpu.md"
    target.write_text("<!-- svgtpu:begin nonsense -->\n<!-- svgtpu:end nonsense -->\n")
    with pytest.raises(ValueError, match="nonsense"):
        paper.generate(tmp_path / "results.json", [target])


def test_paper_command_json(tmp_path, capsys):
    path = _results_with_c3(tmp_path)
    target = tmp_path / "p.md"
    target.write_text(PAPER)
    assert cli.main(["paper", "--json", "--results", str(path), str(target)]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["blocks"] == 3


def _sizes_read(notebook: str) -> set[str]:
    """The keys the notebook's code reads as ``size["key"]`` (``size = settings(notebook, profile)``)."""
    import ast

    cells = json.loads((reproduce.NOTEBOOK_DIR / f"{notebook}.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    code = "\n".join(src for src in sources if not src.lstrip().startswith("%"))
    return {node.slice.value for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "size"
            and isinstance(node.slice, ast.Constant)}


def test_every_size_a_profile_sets_is_read_by_its_notebook_and_bad_names_are_clear_errors():
    # a profile key the notebook never reads would silently stop applying (e.g. after a rename)
    for notebook in reproduce.NOTEBOOKS:
        read = _sizes_read(notebook)
        for profile in reproduce.PROFILES:
            unread = set(reproduce.PROFILES[profile][notebook]) - read
            assert not unread, f"{notebook} under profile {profile} never reads {sorted(unread)}"
    with pytest.raises(ValueError, match="profile"):
        reproduce.settings("03_mask_alignment", "huge")
    with pytest.raises(ValueError, match="--only"):
        reproduce.select(["99"])
    assert reproduce.select(["03", "quality"]) == ["03_mask_alignment", "07_quality"]


def test_reproduce_rejects_a_bad_profile_on_the_command_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["reproduce", "--profile", "huge"])
    assert exit_info.value.code == 2


def test_the_committed_paper_uses_only_known_markers_and_names_every_figure():
    names = [name for path in (paper.PAPER, paper.APPENDIX)   # the note and its appendix of long tables
             for name in blocks.fill(path.read_text(), results.empty_results(), path, path.parent)[1]]
    claim_blocks = {n.split(" ", 1)[0] for n in names if not n.startswith(("figure ", "entries "))}
    assert "claims" in names and {"C1", "C2", "C3", "C4", "C5", "Q"} <= claim_blocks  # "Q except methods_" is Q's
    assert "entries Q methods_" in names  # the every-method tables, left out of Q's block
    figures = {n.split(" ", 1)[1] for n in names if n.startswith("figure ")}
    assert "headline_speedup" in figures and len(figures) >= 10


def test_reproduce_prints_the_summary_and_exits_non_zero_when_a_notebook_fails(monkeypatch, tmp_path, capsys):
    failed = reproduce.NotebookResult("03_mask_alignment", "failed", 1.5, [], "cell 4 (execution count 3): "
                                      "RuntimeError: boom", "build/notebooks/03_mask_alignment.ipynb")
    ok = reproduce.NotebookResult("05_quadratic_scaling", "ok", 2.0, ["c2_attention_share.png"])
    monkeypatch.setattr(reproduce, "reproduce", lambda *a, **k: [ok, failed])
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["reproduce", "--figures-dir", str(tmp_path), "--no-paper"])
    assert exit_info.value.code == 1
    out, err = capsys.readouterr()
    assert "03_mask_alignment" in out and "RuntimeError: boom" in out and "05_quadratic_scaling" in out
    assert "failed: 03_mask_alignment" in err
