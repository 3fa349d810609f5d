"""Every notebook runs through papermill with the ``quick`` profile and writes its figures and results.

Outputs go to a temporary folder (the ``figures_dir`` parameter), so the tests never rewrite the
committed figures.  One test per notebook, so ``pytest -n 2`` spreads them over both cores.
"""

import json

import nbformat
import pytest

from svgtpu import reproduce
from svgtpu.results import PROVENANCES, load_results

#: What each notebook must leave behind: figure names and result entries per claim.
EXPECTED = {
    "01_quadratic_scaling": {
        "figures": ["c5_cost_vs_resolution", "c2_attention_share"],
        "claims": {"C2": ["attention_share_1440p", "attention_share_720p", "toy_attention_share",
                          "attention_share_sweep"],
                   "C5": ["attention_exponent", "other_exponent"]},
    },
    "02_mask_alignment": {
        "figures": ["c3_tile_maps", "c3_layout_transform", "c3_partial_share", "c3_alignment_diff"],
        "claims": {"C3": ["partial_share_before", "partial_share_after", "partial_share_table",
                          "pairs_added", "pairs_dropped", "output_error_aligned"]},
    },
    "03_fast_path_ablation": {
        "figures": ["c4_kernel_variants", "c4_vector_ops"],
        "claims": {"C4": ["fast_path_speedup", "aligned_fast_overhead_vs_ideal", "ours_over_splash_svg",
                          "variants", "vector_ops_removed_full", "op_counts"]},
    },
    "04_end_to_end_speedup": {
        "figures": ["headline_speedup"],
        "claims": {"C1": ["speedup", "minutes_saved", "dense_minutes", "svg_minutes", "contribution_sparsity",
                          "contribution_alignment", "contribution_fast_path", "chain", "toy_speedup"]},
    },
    "05_quality": {
        "figures": ["q_quality_vs_sparsity", "q_head_kinds", "q_contact_sheet"],
        "claims": {"Q": ["psnr_unaligned", "psnr_aligned", "ssim_unaligned", "ssim_aligned", "sparsity_sweep",
                         "head_kinds"]},
    },
}


@pytest.fixture
def isolated_jupyter(monkeypatch):
    """install_kernel() edits $JUPYTER_PATH; restore it after the test."""
    monkeypatch.setenv("JUPYTER_PATH", "")


@pytest.mark.parametrize("notebook", list(EXPECTED))
def test_notebook_runs_quick_and_writes_figures_and_results(notebook, tmp_path, isolated_jupyter):
    figures = tmp_path / "figures"
    [result] = reproduce.reproduce("quick", [notebook], figures_dir=figures, build_dir=tmp_path / "build",
                                   progress=False)
    assert result.status == "ok", result.error
    expected = EXPECTED[notebook]
    for name in expected["figures"]:
        assert (figures / f"{name}.png").stat().st_size > 10_000, name
        assert f"{name}.png" in result.figures
    data = load_results(figures / "results.json")
    for claim, names in expected["claims"].items():
        for name in names:
            entry = data["claims"][claim][name]
            assert entry["provenance"] in PROVENANCES and entry["profile"] == "quick", name
            assert entry["notebook"] == notebook
    assert set(expected["figures"]) <= set(data["figures"])
    assert data["notebooks"][notebook]["profile"] == "quick"


@pytest.mark.parametrize("notebook", reproduce.NOTEBOOKS)
def test_committed_notebooks_are_clean_and_parameterized(notebook):
    nb = nbformat.read(reproduce.NOTEBOOK_DIR / f"{notebook}.ipynb", as_version=4)
    nbformat.validate(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and 'profile = "cpu"' in tagged[0].source and "figures_dir = None" in tagged[0].source
    assert nb.cells[0].cell_type == "markdown"                      # the why comes before the how
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "commit notebooks without outputs"


def test_a_failing_notebook_names_its_cell_and_the_next_still_runs(tmp_path, isolated_jupyter):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    cells = [nbformat.v4.new_code_cell('profile = "quick"\nfigures_dir = None'),
             nbformat.v4.new_code_cell("x = 1"),
             nbformat.v4.new_code_cell("raise RuntimeError('planted failure')")]
    cells[0].metadata["tags"] = ["parameters"]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), notebooks / "bad.ipynb")
    kernel = reproduce.install_kernel(tmp_path / "build")
    result = reproduce.run_notebook("bad", "quick", figures_dir=tmp_path / "figures",
                                    output_dir=tmp_path / "out", kernel_name=kernel, notebook_dir=notebooks)
    assert result.status == "failed"
    assert "RuntimeError: planted failure" in result.error and "cell 3" in result.error
    executed = json.loads((tmp_path / "out" / "bad.ipynb").read_text())
    assert any(o.get("ename") == "RuntimeError" for c in executed["cells"] for o in c.get("outputs", []))
