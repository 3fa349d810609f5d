"""What the package writes: nothing shipped overwritten by default, every output path checked before the work,
every write atomic (issue 53)."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from svgtpu.cli import main
from svgtpu.errors import BadInput
from svgtpu.facts.outputs import SHIPPED, atomic_path, check_output, shipped, write_text
from svgtpu.facts.paths import BUILD_DIR, CHECKPOINT, REPO_ROOT, TRAINED_CHECKPOINT


def exit_status(argv) -> int:
    """``svgtpu ARGV``'s exit status, whether the parser (argparse) or the command refused."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def folder_hashes(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def refuse_work(*args, **kwargs):
    raise AssertionError("the work started before the output path was checked")


def fake_train(config, *, steps, seed, batch_size, lr, warmup, init):
    """The training itself (tested in test_dit.py), replaced by untrained parameters: the save path is real."""
    import jax

    from svgtpu.toy.dit import init_params
    return init_params(config, jax.random.PRNGKey(0)), {"steps": steps, "seed": seed, "batch_size": batch_size,
                                                        "lr": lr, "warmup": warmup, "losses": [1.0] * steps,
                                                        "wall_s": 0.0}


def test_train_with_default_arguments_leaves_checkpoints_untouched(monkeypatch, capsys):
    import svgtpu.toy.train

    monkeypatch.setattr(svgtpu.toy.train, "train", fake_train)
    before = folder_hashes(CHECKPOINT.parent)
    assert main(["train", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    assert folder_hashes(CHECKPOINT.parent) == before
    written = Path(out.split("wrote ")[1].split(" and its training record")[0])   # a fresh dated path, never reused
    assert written.parent == TRAINED_CHECKPOINT.parent and written.name.startswith(TRAINED_CHECKPOINT.stem + "-")
    assert written.is_file() and written.is_relative_to(BUILD_DIR)
    record = written.with_suffix(".loss.json")
    assert str(record) in out   # the derived file is named too
    assert json.loads(record.read_text())["checkpoint"] == str(written)
    assert main(["train", "--steps", "1"]) == 0 and str(written) not in capsys.readouterr().out


@pytest.mark.parametrize("target", [str(CHECKPOINT), os.path.relpath(CHECKPOINT),
                                    str(CHECKPOINT.parent / ".." / "checkpoints" / "toy_dit.npz")])
def test_train_refuses_the_shipped_checkpoint_without_force_before_training(monkeypatch, capsys, target):
    """The checkpoint by any spelling of its path, refused before the training starts."""
    import svgtpu.toy.train

    monkeypatch.setattr(svgtpu.toy.train, "train", refuse_work)
    before = folder_hashes(CHECKPOINT.parent)
    assert main(["train", "--out", target]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "shipped" in err and "--force" in err
    assert folder_hashes(CHECKPOINT.parent) == before


def test_force_lets_the_shipped_checkpoint_be_named():
    assert check_output("out", CHECKPOINT, derived=(CHECKPOINT.with_suffix(".loss.json"),), force=True) == CHECKPOINT
    assert all(shipped(s) for s in SHIPPED) and shipped(REPO_ROOT / "figures" / "gpu-runs" / "index.json")
    assert not shipped(REPO_ROOT / "figures" / "results-gpu.json")
    assert not shipped(REPO_ROOT / "figures" / "gpu-runs" / "2099-01-01-new.json")   # a new run beside them


@pytest.mark.parametrize("argv", [
    ["train", "--config", "tiny", "--steps", "1", "--out", "{dir}"],
    ["generate", "--steps", "1", "--out", "{dir}/x.gif"],           # the contact sheet x.png is a folder
    ["bench", "gpu", "--smoke", "--out", "{dir}"],
    ["train", "--config", "tiny", "--steps", "1", "--out", "{missing}/model.npz"],
    ["generate", "--steps", "1", "--out", "{missing}/video.gif"],
    ["bench", "gpu", "--smoke", "--out", "{missing}/results-gpu.json"],
    ["reproduce", "--only", "00", "--figures-dir", "{missing}/figures"],
    ["train", "--config", "tiny", "--steps", "1", "--out", "{file}/model.npz"],
    ["bench", "gpu", "--smoke", "--out", "{file}/results-gpu.json"],
    ["reproduce", "--only", "00", "--figures-dir", "{file}"],
    ["reproduce", "--only", "00", "--figures-dir", ""],             # was: figures/ silently
    ["train", "--config", "tiny", "--steps", "1", "--out", ""],
    ["bench", "gpu", "--smoke", "--out", "{root}/figures/gpu-runs/index.json"],   # a dated run is never rewritten
    ["bench", "gpu", "--smoke", "--out", "results.txt"],
    ["bench", "tpu", "--preflight", "--out", "{dir}"],
    ["bench", "tpu", "--preflight", "--out", "{missing}/preflight.json"],
    ["bench", "tpu", "--preflight", "--out", "{file}/preflight.json"],
])
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(tmp_path, monkeypatch, capsys, argv):
    """A folder where a file is meant, a folder that is missing or is a file, an empty name, a shipped file:
    one line naming the parameter, exit 2, before the training, the sampling, the GPU run, the notebooks or the
    preflight's compiles."""
    import svgtpu.bench.gpu
    import svgtpu.report.preflight
    import svgtpu.report.reproduce
    import svgtpu.toy.sampler
    import svgtpu.toy.train

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.png").mkdir()
    (tmp_path / "f").write_text("a file")
    for module, name in ((svgtpu.toy.train, "train"), (svgtpu.toy.sampler, "sample"), (svgtpu.bench.gpu, "run"),
                         (svgtpu.report.reproduce, "run_notebooks"), (svgtpu.report.preflight, "preflight")):
        monkeypatch.setattr(module, name, refuse_work)
    argv = [a.format(dir=tmp_path / "d", missing=tmp_path / "no" / "such", file=tmp_path / "f", root=REPO_ROOT)
            for a in argv]
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ("out" in err or "figures" in err), err


def test_check_output_makes_the_build_folders_only(tmp_path):
    inside = BUILD_DIR / "test-outputs" / str(os.getpid()) / "x.json"
    try:
        assert check_output("out", inside) == inside and inside.parent.is_dir()
    finally:
        inside.parent.rmdir()
        inside.parent.parent.rmdir()
    with pytest.raises(BadInput, match="does not exist"):
        check_output("out", tmp_path / "a" / "x.json")
    assert not (tmp_path / "a").exists()
    assert check_output("figures", tmp_path / "figs", folder=True).is_dir()   # a folder named: made in its parent


def test_a_write_cut_short_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "record.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["record.json"]
    write_text(path, "new")
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_the_writers_go_through_the_atomic_helper(tmp_path, monkeypatch):
    """A checkpoint, a GIF and its sheet, a results file and a figure are written to a temporary name and renamed:
    a writer that fails leaves no partial file under the real name."""
    import jax
    import matplotlib
    import numpy as np
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from svgtpu.facts.results import NotebookRun, write_results
    from svgtpu.toy.dit import init_params, load_checkpoint, save_checkpoint
    from svgtpu.toy.sampler import save_video
    from svgtpu.toy.train import CONFIGS

    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (renamed.append(Path(b).name), real_replace(a, b)))
    config = CONFIGS["tiny"]
    save_checkpoint(str(tmp_path / "m.npz"), init_params(config, jax.random.PRNGKey(0)), config)
    assert load_checkpoint(str(tmp_path / "m.npz"))[1] == config
    save_video(np.zeros((1, 2, 4, 4, 3), np.float32), str(tmp_path / "v.gif"))
    write_results({"claims": {}}, tmp_path / "results.json")
    fig = plt.figure()
    NotebookRun("nb", "quick", tmp_path).save_figure(fig, "f", caption="c", provenance="computed")
    plt.close(fig)
    assert renamed == ["m.npz", "v.gif", "v.png", "results.json", "f.png", "f.svg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png", "f.svg", "m.npz", "results.json", "v.gif", "v.png"]
