"""The command line: JSON contract of `svgtpu tiles`, and one clear line for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from svgtpu.cli import COMMANDS, GROUPS, build_parser, main
from svgtpu.errors import BadInput
from svgtpu.geometry import VideoGeometry
from svgtpu.masks.core import svg_mask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from test_masks_tiles import brute_kinds


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("command", [None, *GROUPS, *COMMANDS])
def test_every_help_works(command, capsys):
    """``svgtpu --help``, ``svgtpu COMMAND --help`` and ``svgtpu bench kernels --help``: usage on stdout, exit 0
    (argparse formats help with %, so a bare percent sign in a help string crashes it)."""
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"] if command else ["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "usage: svgtpu" in out and "%%" not in out


def test_tiles_json_counts_equal_brute_force(capsys):
    # L = 351 cut into 100 x 64 tiles: neither divides it, so the last row and column are padded
    out = run_json(capsys, "tiles", "--geometry", "3x9x13", "--multiplier", "1", "--block-q", "100",
                   "--block-kv", "64")
    kinds = brute_kinds(svg_mask(VideoGeometry(3, 9, 13), 1.0).to_array(), 100, 64)
    want = {name: int((kinds == kind).sum()) for name, kind in (("full", FULL), ("partial", PARTIAL),
                                                                ("empty", EMPTY))}
    assert {name: out[name] for name in want} == want and out["provenance"] == "computed"
    assert out["partial_share"] == pytest.approx(want["partial"] / (want["partial"] + want["full"]))


def test_tiles_alignment_at_1440p(capsys):
    out = run_json(capsys, "tiles", "--geometry", "1440p", "--block-q", "3024", "--block-kv", "2048")
    aligned = run_json(capsys, "tiles", "--geometry", "1440p", "--block-q", "3024", "--block-kv", "2048",
                       "--align", "snap")
    assert aligned["partial_share"] < out["partial_share"] and aligned["alignment"]["added"] > 0


def test_tiles_table_and_sparsity_alias(capsys):
    assert main(["tiles", "--geometry", "4x10x14", "--sparsity", "0.4", "--block-q", "128",
                 "--block-kv", "128", "--mask", "temporal-frame-major"]) == 0
    table = capsys.readouterr().out
    assert "partial_share" in table and "temporal-frame-major" in table


@pytest.mark.parametrize("argv,word", [
    (["tiles", "--geometry", "wan-4k"], "geometry"),
    (["tiles", "--geometry", "21x45"], "geometry"),
    (["tiles", "--multiplier", "-2"], "multiplier"),
    (["tiles", "--kept", "1.5"], "kept"),
    (["tiles", "--mask", "causal"], "mask"),
    (["tiles", "--geometry", "100000x1000x1000"], "2**31 - 1"),       # refused at once, not minutes
    (["tiles", "--geometry", "1440p", "--block-q", "16", "--block-kv", "16"], "2**23"),
    (["generate", "--checkpoint", "no/such/checkpoint.npz"], "checkpoint"),
    (["generate", "--guidance", "nan"], "guidance"),
    (["generate", "--attention", "svg", "--kept", "2"], "kept"),
    (["quality", "--checkpoint", "no/such/checkpoint.npz"], "checkpoint"),
    (["quality", "--variants", "svg", "svg-aligned-round"], "--variants"),
    (["align-pairs", "--kept", "1.5"], "kept"),
    (["align-pairs", "--densities", "0"], "density"),
    (["align-pairs", "--tiles", "3024"], "tiles"),
    (["train", "--config", "huge"], "config"),
    (["train", "--init", "no/such/checkpoint.npz"], "checkpoint"),
    (["train", "--config", "tiny", "--lr", "-1"], "lr"),
    (["profile-heads", "--contrast", "-1", "--geometry", "2x4x4"], "contrast"),
    (["profile-heads", "--geometry", "0x9x13"], "geometry"),
    (["bench", "ops", "--geometry", "100000x1000x1000"], "geometry"),
    (["costmodel", "--model", "huge"], "model"),
    (["paper", "--results", "no/such/results.json", "no/such/paper.md"], "paper.md"),
    (["explore", "--device", "quantum"], "device must be one of"),     # was a 22-line table and exit 0
    (["explore", "--device", "v6e", "--chips", "3"], "chips must be one of"),
    (["generate", "--attention", "dense", "--kept", "-0.3"], "kept"),   # was a dense run
    (["generate", "--attention", "dense", "--sparsity", "0.3"], "needs attention svg"),
    (["generate", "--out", "/proc/no/such/dir/video.gif", "--labels", "0", "--steps", "1"], "out"),
    (["train", "--config", "tiny", "--steps", "1", "--out", "/proc/no/such/dir/ckpt.npz"], "out"),
    (["reproduce", "--figures-dir", "/proc/no/such/dir", "--only", "00"], "figures_dir"),
    (["paper", "--results", "/proc/self", "paper.md"], "results /proc/self"),     # a folder, not a file
])
def test_bad_input_exits_2_with_one_line(capsys, argv, word):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and word in err and out == ""


def test_a_tile_the_kernel_refuses_is_counted_and_named(capsys):
    """Counting tiles of any size is analysis (exit 0, the same counts as a brute-force count); one line says
    our kernel, by Mosaic's block-shape rule with its source, would refuse the tile."""
    out = run_json(capsys, "tiles", "--geometry", "3x9x13", "--multiplier", "1", "--block-q", "104",
                   "--block-kv", "1000")
    kinds = brute_kinds(svg_mask(VideoGeometry(3, 9, 13), 1.0).to_array(), 104, 1000)
    assert [out[k] for k in ("full", "partial", "empty")] == [int((kinds == x).sum()) for x in (FULL, PARTIAL, EMPTY)]
    assert "block_kv must be a positive multiple of 128" in out["kernel_refusal"]
    assert main(["tiles", "--block-kv", "1000"]) == 0          # the case: 1440p, the production block_q
    text = capsys.readouterr().out
    [line] = [line for line in text.splitlines() if "kernel would refuse" in line]
    assert "block_kv" in line and "Mosaic's block-shape rule" in line and "docs.jax.dev" in line
    assert run_json(capsys, "tiles")["kernel_refusal"] is None   # the production tile: nothing to say


def test_the_shipped_checkpoint_is_found_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in ("generate", "quality", "methods"):
        default = Path(build_parser().parse_args([command]).checkpoint)
        assert default.is_absolute() and default.is_file() and default.name == "toy_dit.npz"


@pytest.mark.parametrize("error", [ValueError("our bug"), OSError("our bug"), RuntimeError("XLA's runtime error"),
                                   KeyError("our bug")])
def test_an_internal_error_is_never_bad_input(monkeypatch, capsys, error):
    """Only :class:`BadInput` is one line and exit 2; a ValueError, OSError or RuntimeError of ours (or of XLA)
    propagates: Python prints its traceback and exits 1."""
    import svgtpu.masks.tiles

    def broken(*args, **kwargs):
        raise error
    monkeypatch.setattr(svgtpu.masks.tiles, "tile_report", broken)
    with pytest.raises(type(error)):
        main(["tiles", "--geometry", "2x4x4"])
    assert capsys.readouterr().err == ""


def test_an_internal_error_shows_a_traceback_and_exits_1():
    code = ("import sys, svgtpu.masks.tiles as t\n"
            "def broken(*a, **k): raise ValueError('an internal error')\n"
            "t.tile_report = broken\n"
            "from svgtpu.cli import main\nsys.exit(main(['tiles', '--geometry', '2x4x4']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback (most recent call last)" in done.stderr
    assert "ValueError: an internal error" in done.stderr and "error:" not in done.stderr.splitlines()[0]


def test_bad_input_is_a_value_error():
    assert issubclass(BadInput, ValueError)   # every pytest.raises(ValueError) written before it still holds


def test_a_file_that_cannot_be_read_is_one_line(tmp_path, capsys):
    bad = tmp_path / "not_a_checkpoint.npz"
    bad.write_text("hello")
    assert main(["generate", "--checkpoint", str(bad)]) == 2
    assert "is not a .npz file" in capsys.readouterr().err


@pytest.mark.parametrize("argv,word", [
    (["tiles", "--block-q", "0"], "--block-q"),
    (["reproduce", "--profile", "huge"], "--profile"),
    (["tiles", "--no-such-flag"], "--no-such-flag"),
    (["no-such-command"], "no-such-command"),
])
def test_argument_errors_are_one_line_and_exit_2(capsys, argv, word):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and word in err


def test_module_entry_point_and_info():
    out = subprocess.run([sys.executable, "-m", "svgtpu", "info", "--json"], capture_output=True, text=True,
                         check=True).stdout
    info = json.loads(out)
    assert info["backend"] in ("cpu", "tpu", "gpu") and info["device_count"] >= 1
