"""Every notebook runs through papermill with the ``quick`` profile and writes its figures and results.

Outputs go to a temporary folder (the ``figures_dir`` parameter), so the tests never rewrite the
committed figures.  One test per notebook, so ``pytest -n 2`` spreads them over both cores; the runs are
``system`` tests (``make test-system``), the static checks of the committed notebooks run in ``make test``.  The
executed copies must show their figures inline, and every figure of the teaching notebooks is
followed by a takeaway sentence generated from the results.
"""

import ast
import json
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from svgtpu.report import plots
from svgtpu.report import reproduce
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.facts.results import NotebookRun, check_provenance, figures_dir, load_results

#: What each notebook must leave behind: figure names and result entries per claim.
EXPECTED = {
    "00_primer": {"figures": ["primer_roofline"], "claims": {}},
    "01_pallas_in_five_kernels": {"figures": ["five_kernels_timeline"], "claims": {}},
    "01b_block_sparse_by_hand": {"figures": ["by_hand_unit_sweep"], "claims": {}},
    "02_kernel_walkthrough": {"figures": ["walkthrough_traversal", "walkthrough_branch_ops"], "claims": {}},
    "05_quadratic_scaling": {
        "figures": ["c5_cost_vs_resolution", "c2_attention_share", "c2_toy_attention_share", "c2_compiled_roles",
                    "c5_compiled_scaling"],
        "claims": {"C2": ["attention_share_1440p", "attention_share_1440p_user_dense", "attention_share_720p",
                          "toy_attention_share",
                          "attention_share_sweep", "compiled_role_shares", "compiled_matmul_mxu_share"],
                   "C5": ["attention_exponent", "other_exponent", "flops_exponent", "compiled_cycles_exponent",
                          "toy_attention_exponent", "toy_attention_exponent_interval"]},
    },
    "03_mask_alignment": {
        "figures": ["c3_tile_maps", "c3_layout_transform", "c3_partial_share", "c3_alignment_diff", "c3_search"],
        "claims": {"C3": ["partial_share_before", "partial_share_after", "partial_share_table",
                          "pairs_added", "pairs_dropped", "output_error_aligned", "search_matches",
                          "search_nearest_before", "search_nearest_after", "pair_accounting",
                          "pair_error_snap_max", "pair_error_balanced_max", "search_maxdiffusion",
                          "search_maxdiffusion_matches", "search_maxdiffusion_nearest_before"]},
    },
    "04_fast_path_ablation": {
        "figures": ["c4_kernel_variants", "c4_vector_ops"],
        "claims": {"C4": ["fast_path_speedup", "aligned_fast_overhead_vs_ideal", "ours_over_splash_svg",
                          "variants", "vector_ops_removed_full", "op_counts", "llo_cmp_select_full_fast",
                          "bundles_partial_over_full", "llo_counts"]},
    },
    "06_end_to_end_speedup": {
        "figures": ["headline_speedup", "c1_toy_speedup", "costmodel_validation", "c1_speedup_surface",
                    "c1_multihost"],
        "claims": {"C1": ["speedup", "minutes_saved", "dense_minutes", "svg_minutes", "contribution_sparse_attention",
                          "contribution_alignment", "contribution_fast_path", "chain", "toy_speedup",
                          "validation_tpu_compute_efficiency", "validation_tpu_realized_over_static",
                          "sparse_efficiency_published",
                          "sparse_efficiency_published_range", "speedup_surface", "speedup_tornado",
                          "scenarios", "central_sparse_efficiency", "validation_independent_worst_abs_error",
                          "validation_related_worst_abs_error", "attention_pricing", "multihost_1440p",
                          "multihost_2160p"]},
    },
    "08_on_a_gpu": {
        "figures": ["gpu_h200_model_vs_run"],
        "claims": {"C1": ["h200_model_vs_run", "h200_model_fitted", "h200_model_median_abs_error"],
                   "C2": ["h200_blocks", "h200_attention_share_dense-cudnn_1440p"],
                   "C4": ["h200_attention", "h200_tpu_ideas"], "C5": ["h200_attention_exponent_dense-cudnn"]},
    },
    "07_quality": {
        "figures": ["q_quality_vs_kept", "q_head_kinds", "q_contact_sheet", "q_toy_loss", "q_head_kind_map",
                    "q_methods"],
        "claims": {"Q": ["psnr_unaligned", "psnr_aligned", "ssim_unaligned", "ssim_aligned", "kept_sweep",
                         "psnr_aligned_balanced", "psnr_gap_aligned_equal_pairs",
                         "head_kinds", "head_kind_map", "methods_quality", "methods_tiles_1440p",
                         "methods_attention_ratio_1440p", "methods_pareto"]},
    },
}


@pytest.fixture
def isolated_jupyter(monkeypatch):
    """install_kernel() edits $JUPYTER_PATH; restore it after the test."""
    monkeypatch.setenv("JUPYTER_PATH", "")


@pytest.mark.system
@pytest.mark.slow
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
            assert check_provenance(entry["provenance"]) and entry["profile"] == "quick", name  # modeled-h100 too
            assert entry["notebook"] == notebook
    assert set(expected["figures"]) <= set(data["figures"])
    assert data["notebooks"][notebook]["profile"] == "quick"
    executed = nbformat.read(result.output, as_version=4)
    images = [o for c in executed.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= len(expected["figures"]), "figures must show inline in the executed notebook"
    if notebook in TEACHING:
        for name in expected["figures"]:
            sentence = data["figures"][name].get("takeaway", "")
            assert sentence and "{" not in sentence, f"{name}: no generated takeaway"
    if notebook in INDEPENDENT:
        INDEPENDENT[notebook](data["claims"])


# -- recorded values against an independent recomputation (cheap ones) ---------------------------

def band_sink_tiles(L: int, sink: int, window: int, bq: int, bkv: int) -> tuple[int, int]:
    """``(full, partial)`` tiles of ``allowed(q, k) = k < sink or |q - k| <= window`` by interval reasoning per
    tile (the farthest and nearest corners), not by counting pairs: padded keys (past ``L``) are never allowed."""
    full = partial = 0
    for q0 in range(0, L, bq):
        q1 = min(q0 + bq, L) - 1                              # last real query row (padded rows are discarded)
        for k0 in range(0, L, bkv):
            k1 = min(k0 + bkv, L) - 1                         # last real key
            if k0 >= sink and max(k0 - q1, q0 - k1) > window:
                continue                                      # empty: no sink key, nearest pair beyond the band
            band0 = max(k0, sink)                             # keys the sink does not cover: the band must
            covered = band0 > k1 or max(abs(q0 - k1), abs(q1 - band0)) <= window
            full, partial = (full + 1, partial) if covered and k0 + bkv <= L else (full, partial + 1)
    return full, partial


def test_band_sink_tiles_by_hand():
    # L = 10, 4 x 4 tiles, window 1, no sink: rows 0-3 x keys 0-3 partial, keys 4-7 partial (q 3, k 4), 8-11 empty
    assert band_sink_tiles(10, 0, 1, 4, 4) == (0, 7)            # 3 diagonal + 4 off-diagonal neighbours
    assert band_sink_tiles(8, 0, 7, 4, 4) == (4, 0)             # a band as wide as L: dense
    assert band_sink_tiles(8, 4, 0, 4, 4) == (2, 1)             # sink = the first key tile; diagonal 4-7 partial
    assert band_sink_tiles(10, 0, 9, 4, 4) == (6, 3)            # dense, but the last key tile holds 2 padded keys


def frame_major(array, g):
    """A spatial-major mask array seen in frame-major token order: token ``f F + s`` sits at ``s T + f``."""
    f, s = np.divmod(np.arange(g.L), g.F)
    order = s * g.T + f
    return array[np.ix_(order, order)]


def _check_03(claims):
    from svgtpu.geometry import get_geometry
    from svgtpu.masks.core import svg_mask
    from svgtpu.setting import DEFAULT_KEPT
    from test_masks_tiles import brute_kinds
    c3 = claims["C3"]
    # the layout table: tile kinds of the band and of the same mask in frame-major order, tile by tile from the array
    layout = c3["layout_table"]
    g = get_geometry(layout["geometry"].split(" ")[-1].strip("()"))
    band = svg_mask(g, kept=DEFAULT_KEPT).to_array()
    for row, array in zip(layout["value"], (frame_major(band, g), band)):
        kinds = brute_kinds(array, layout["block"], layout["block"])
        assert [row[k] for k in ("empty", "partial", "full")] == np.bincount(kinds.ravel(), minlength=3).tolist(), row
    # the headline share before alignment, and the search's nearest all-band setting, by interval reasoning
    before = c3["partial_share_before"]
    g = get_geometry(re.search(r", (\d+p), ", before["description"]).group(1))
    full, partial = band_sink_tiles(g.L, g.F, svg_mask(g, kept=DEFAULT_KEPT).window, before["block_q"], before["block_kv"])
    assert before["value"] == pytest.approx(partial / (partial + full), abs=1e-12)
    best = c3["search"]["value"]["nearest_by_heads"]["band"][0]
    g = get_geometry(best["geometry"])
    full, partial = band_sink_tiles(g.L, g.F if best["sink"] else 0, best["window"], best["block_q"], best["block_kv"])
    assert best["before"] == pytest.approx(partial / (partial + full), abs=1e-12)


#: Per notebook: checks of its recorded values against a recomputation that shares no code with it.
INDEPENDENT = {"03_mask_alignment": _check_03}


#: Notebooks whose every figure is followed by a generated takeaway and that carry exercises.
TEACHING = ("00_primer", "01_pallas_in_five_kernels", "01b_block_sparse_by_hand", "05_quadratic_scaling", "03_mask_alignment",
            "04_fast_path_ablation", "07_quality",
            "02_kernel_walkthrough")
#: What a takeaway template may spell in digits: claim ids, notebook numbers, resolutions, tile sizes and the
#: 0-1 scale of decisiveness and TPU generations.
SETTING = re.compile(r"\bC\d\b|notebook \d+|\bv\d+[a-z]*\b|\d+p\b|\d+×\d+|\b[01]:")


def _takeaway_templates(nb) -> list[str]:
    """The literal template strings of every ``plots.takeaway(...)`` call in the notebook's code."""
    templates = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "takeaway":
                for arg in node.args[2:3]:
                    parts = [n.value for n in ast.walk(arg) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                    templates.append("".join(parts))
    return templates


@pytest.mark.parametrize("notebook", TEACHING)
def test_teaching_notebooks_have_exercises_hidden_answers_and_generated_takeaways(notebook):
    nb = nbformat.read(reproduce.NOTEBOOK_DIR / f"{notebook}.ipynb", as_version=4)
    assert any("exercise" in c.metadata.get("tags", []) for c in nb.cells)
    answers = [c for c in nb.cells if "answer" in c.metadata.get("tags", [])]
    assert answers and all(c.metadata["jupyter"]["source_hidden"] for c in answers)
    [parameters] = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert "update_figures = False" in parameters.source           # hand runs write to the scratch folder
    templates = _takeaway_templates(nb)
    assert templates
    for template in templates:
        literal = "".join(text for text, *_ in string.Formatter().parse(template))
        assert not re.search(r"\d", SETTING.sub("", literal)), f"a number typed into a takeaway: {template!r}"


def test_takeaway_fills_numbers_from_recorded_results_and_refuses_unknown_fields(tmp_path, capsys):
    run = NotebookRun("test", "quick", tmp_path)
    run.record("C3", "partial_share_after", 0.0123, provenance="computed")
    run.figures["fig"] = {}
    plots.takeaway(run, "fig", "after {C3.partial_share_after:.1%} at {grid}", grid="6x8x12")
    assert run.figures["fig"]["takeaway"] == "after 1.2% at 6x8x12"
    assert "after 1.2% at 6x8x12" in capsys.readouterr().out
    with pytest.raises(ValueError, match="C9.x"):
        plots.takeaway(run, None, "{C9.x}")
    plots.takeaway({"claims": {"Q": {"psnr": {"value": 25.04}}}}, None, "{Q.psnr:.1f} dB")
    assert "25.0 dB" in capsys.readouterr().out


def test_hand_runs_write_to_scratch_and_parameters_yield_to_profiles(tmp_path):
    assert reproduce.output_dir(None) == reproduce.SCRATCH_DIR
    assert reproduce.output_dir(None, update_figures=True) == figures_dir()
    assert reproduce.output_dir(tmp_path, update_figures=False) == tmp_path  # what svgtpu reproduce passes
    quick = reproduce.PROFILES["quick"]["04_fast_path_ablation"]["geometry"]
    assert reproduce.settings("04_fast_path_ablation", "quick", geometry="2x2x2")["geometry"] == quick
    assert reproduce.settings("04_fast_path_ablation", "cpu", geometry="2x2x2")["geometry"] == "2x2x2"


def test_mask_image_draws_the_tile_edges_inside_the_mask():
    import matplotlib.pyplot as plt
    from svgtpu.geometry import Tile
    fig, ax = plt.subplots()
    plots.mask_image(ax, np.ones((16, 16), bool), tile=Tile(4, 8))   # rows at 4, 8, 12; keys at 8
    rows = sorted(line.get_ydata()[0] for line in ax.lines if line.get_ydata()[0] == line.get_ydata()[1])
    keys = sorted(line.get_xdata()[0] for line in ax.lines if line.get_xdata()[0] == line.get_xdata()[1])
    assert (rows, keys) == ([3.5, 7.5, 11.5], [7.5])
    plt.close(fig)


def test_plots_leave_the_backend_to_jupyter():
    """Importing svgtpu.report.plots must not force a backend: the inline backend shows figures in notebooks."""
    code = "import matplotlib, svgtpu.report.plots; print(matplotlib.get_backend())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"MPLBACKEND": reproduce.INLINE_BACKEND, "PATH": ""})
    assert out.stdout.strip().endswith("backend_inline")


@pytest.mark.parametrize("notebook", reproduce.NOTEBOOKS)
def test_committed_notebooks_are_clean_and_parameterized(notebook):
    path = reproduce.NOTEBOOK_DIR / f"{notebook}.ipynb"
    # nbformat 4.5 cells carry ids; nbformat.read fills in a missing one with a warning in every run
    assert all("id" in cell for cell in json.loads(path.read_text())["cells"]), "a cell without an id"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and 'profile = "cpu"' in tagged[0].source and "figures_dir = None" in tagged[0].source
    assert nb.cells[0].cell_type == "markdown"                      # the why comes before the how
    assert nb.cells[0].source.startswith("# ")                      # one title, the one the browser test reads
    assert nb.metadata.kernelspec.name == "svgtpu"                  # the kernel make install registers
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "commit notebooks without outputs"


@pytest.mark.system
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


@pytest.mark.system
def test_notebooks_side_by_side_report_their_own_figures_and_keep_every_result(tmp_path, isolated_jupyter):
    """Two notebooks in two worker processes, each saving its results twice (the read-modify-write under the
    lock): each result names its own figure files only, and the results file keeps every entry of both."""
    import functools
    notebooks, figures = tmp_path / "notebooks", tmp_path / "figures"
    notebooks.mkdir()
    for name in ("left", "right"):
        cells = [nbformat.v4.new_code_cell('profile = "quick"\nfigures_dir = None'), nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfrom svgtpu.facts.results import NotebookRun\n"
            f"run = NotebookRun({name!r}, profile, figures_dir)\n"
            "for i in range(2):\n"
            f"    run.record('C1', f'{name}_{{i}}', i, provenance='computed')\n"
            f"    run.save_figure(plt.figure(), f'{name}_{{i}}', caption='', provenance='computed', formats=('png',))\n"
            "    run.save()")]
        cells[0].metadata["tags"] = ["parameters"]
        nbformat.write(nbformat.v4.new_notebook(cells=cells), notebooks / f"{name}.ipynb")
    kernel = reproduce.install_kernel(tmp_path / "build")
    run = functools.partial(reproduce.run_notebook, profile="quick", figures_dir=figures, output_dir=tmp_path / "out",
                            kernel_name=kernel, notebook_dir=notebooks)
    results = {r.notebook: r for r in reproduce.run_notebooks(["left", "right"], 2, run)}
    for name, result in results.items():
        assert result.status == "ok", result.error
        assert result.figures == [f"{name}_0.png", f"{name}_1.png"]
    data = load_results(figures / "results.json")
    assert set(data["claims"]["C1"]) == {"left_0", "left_1", "right_0", "right_1"}
    assert set(data["figures"]) == {"left_0", "left_1", "right_0", "right_1"} and set(data["notebooks"]) == set(results)


def test_the_schedule_waits_for_what_a_notebook_reads_and_never_times_two_at_once():
    """Two at a time, every notebook once: none starts before those of AFTER (when they run at all), no two of
    TIMED side by side, and the one the others wait for first."""
    names, pending, running, order = list(reproduce.NOTEBOOKS), list(reproduce.NOTEBOOKS), [], []
    while pending or running:
        while len(running) < 2 and (name := reproduce.next_notebook(pending, set(running))):
            assert all(a in order for a in reproduce.AFTER.get(name, ())), name
            assert not (name in reproduce.TIMED and set(running) & set(reproduce.TIMED)), (name, running)
            pending.remove(name)
            running.append(name)
        order.append(running.pop(0))   # the one started first finishes first
    assert sorted(order) == sorted(names)
    assert reproduce.next_notebook(list(names), set()) == "04_fast_path_ablation"
    assert reproduce.next_notebook(["05_quadratic_scaling"], set()) == "05_quadratic_scaling"  # 04 not run: no wait
    assert reproduce.next_notebook(["05_quadratic_scaling"], {"04_fast_path_ablation"}) is None


def test_make_lab_turns_off_jupyterlab_news_and_update_checks():
    """``make lab`` writes the overrides.json where the installed JupyterLab reads its app settings, setting its
    notification plugin's ``fetchNews`` (the "Would you like to get notified about official Jupyter news?"
    pop-up) and ``checkForUpdates`` to values that plugin's schema defines as never."""
    from jupyterlab.labapp import LabApp
    dry = subprocess.run(["make", "-n", "lab"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    overrides = json.loads(re.search(r"echo '(\{.*\})'", dry)[1])
    path = Path(re.search(r"> (\S+overrides\.json)", dry)[1])
    lab = LabApp()
    assert path.relative_to(".venv") == (Path(lab.app_settings_dir) / "overrides.json").relative_to(sys.prefix)
    name = "@jupyterlab/apputils-extension:notification"
    schema = json.loads((Path(lab.schemas_dir) / name.replace(":", "/")).with_suffix(".json").read_text())
    setting = overrides[name]
    assert setting["fetchNews"] == "false"
    assert {"const": "false", "title": "Never"} in schema["properties"]["fetchNews"]["oneOf"]
    assert setting["checkForUpdates"] is False and schema["properties"]["checkForUpdates"]["type"] == "boolean"


@pytest.mark.parametrize("users_own", [None, "/somewhere/of/theirs"])
def test_notebook_kernels_get_jaxs_compilation_cache_unless_the_user_set_one(tmp_path, monkeypatch, users_own):
    """The environment papermill starts the kernel in (it inherits this process's) names build/jax-cache, or the
    user's own folder; afterwards this process's environment is as it was."""
    import papermill
    from svgtpu.facts.paths import JAX_CACHE_DIR
    if users_own is None:
        monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    else:
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", users_own)
    before = dict(os.environ)
    seen = {}
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **kw: seen.update(os.environ))
    result = reproduce.run_notebook("00_primer", "quick", figures_dir=tmp_path / "figures", output_dir=tmp_path / "out",
                                    kernel_name="unused")
    assert result.status == "ok", result.error
    assert seen["JAX_COMPILATION_CACHE_DIR"] == (users_own or str(JAX_CACHE_DIR))
    assert float(seen["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]) > 0
    assert dict(os.environ) == before


def test_notebook_kernels_write_compile_records_beside_the_figures_and_name_those_they_used(tmp_path, monkeypatch):
    """run_notebook points the kernel's compile records at <figures_dir>/compiled and a log of their names, then
    restores the environment; a run of every notebook removes the records none of them used, a partial run none."""
    import papermill
    from svgtpu.compiler.dumps import RECORD_LOG_VAR, RECORDS_DIR_VAR
    before, seen = dict(os.environ), {}
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **kw: seen.update(os.environ))
    result = reproduce.run_notebook("00_primer", "quick", figures_dir=tmp_path / "figures", output_dir=tmp_path / "out",
                                    kernel_name="unused")
    assert result.status == "ok", result.error
    assert seen[RECORDS_DIR_VAR] == str(tmp_path / "figures" / "compiled")
    assert seen[RECORD_LOG_VAR] == str(reproduce.record_log(tmp_path / "out", "00_primer"))
    assert dict(os.environ) == before

    records = tmp_path / "figures" / "compiled"
    for name in ("v6e/used-1.json.gz", "v6e/stale-2.json.gz", "wan-block/used-3.json.gz"):
        (records / name).parent.mkdir(parents=True, exist_ok=True)
        (records / name).write_text("{}")

    def fake_run(name, **_):  # each notebook names one record it read
        reproduce.record_log(tmp_path / "build" / "notebooks", name).write_text(
            {"00_primer": "v6e/used-1.json.gz\n", "04_fast_path_ablation": "wan-block/used-3.json.gz\n"}.get(name, ""))
        return reproduce.NotebookResult(name, "ok", 0.0, [])

    monkeypatch.setattr(reproduce, "run_notebook", fake_run)
    left = lambda: sorted(p.relative_to(records).as_posix() for p in records.rglob("*.json.gz"))  # noqa: E731
    reproduce.reproduce("quick", ["00", "04"], figures_dir=tmp_path / "figures", build_dir=tmp_path / "build",
                        progress=False, jobs=1)
    assert left() == ["v6e/stale-2.json.gz", "v6e/used-1.json.gz", "wan-block/used-3.json.gz"]
    reproduce.reproduce("quick", None, figures_dir=tmp_path / "figures", build_dir=tmp_path / "build",
                        progress=False, jobs=1)
    assert left() == ["v6e/used-1.json.gz", "wan-block/used-3.json.gz"]
