"""The command line: JSON contract of `svgtpu tiles`, and one clear line for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from svgtpu.cli import COMMANDS, GROUPS, build_parser, main
from svgtpu.errors import BadInput
from svgtpu.geometry import VideoGeometry, parse_tiles
from svgtpu.kernels.config import check_blocks_cover
from svgtpu.masks.c3_search import TILES
from svgtpu.masks.core import svg_mask
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.recipes import MAXDIFFUSION_DEFAULT_TILE
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.toy.data import LABEL_NAMES, NULL_LABEL
from test_masks_tiles import brute_kinds


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def help_text(capsys, *command) -> str:
    """``svgtpu COMMAND --help`` with its whitespace folded (argparse wraps lines)."""
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return " ".join(capsys.readouterr().out.split())


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


def test_a_kept_fraction_reached_only_far_off_gets_a_line(capsys):
    """2x8x16 (L = 256, F = 128): the smallest band (half-width 128) with the first-frame sink keeps far more than
    0.2; tiles, explore and costmodel say what was reached and why (issue 53 left it silent); near a target they
    say nothing."""
    import numpy as np
    i, j = np.indices((256, 256))
    reached = ((j < 128) | (abs(i - j) <= 128)).mean()   # counted here: sink keys, band of half-width 128
    assert main(["tiles", "--geometry", "2x8x16", "--kept", "0.2", "--block-q", "128", "--block-kv", "128"]) == 0
    out = capsys.readouterr().out
    assert f"kept 0.2 asked, but the mask keeps {reached:.3g} of the pairs" in out and "F / L = 0.5" in out
    assert main(["explore", "--geometry", "2x8x16", "--kept", "0.2", "--block-q", "128", "--block-kv", "128",
                 "--repeats", "1"]) == 0
    assert f"keeps {reached:.3g} of the pairs" in capsys.readouterr().out
    assert main(["costmodel", "--resolution", "2x8x16", "--kept", "0.2"]) == 0   # priced on that mask, and said
    assert f"keeps {reached:.3g} of the pairs" in capsys.readouterr().out
    assert main(["tiles", "--geometry", "720p", "--kept", "0.3"]) == 0
    assert "asked" not in capsys.readouterr().out
    assert main(["tiles", "--geometry", "2x8x16", "--multiplier", "1", "--block-q", "128", "--block-kv", "128"]) == 0
    assert "asked" not in capsys.readouterr().out   # a multiplier asks for no kept fraction


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
    (["profile-heads", "--contrast", "-1", "--geometry", "4x10x14"], "contrast"),
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
    # refused before any work (issue 39): each was a traceback, a progress bar or a silent answer
    (["costmodel", "--compiled-tiles", "/nonexistent.json"], "--compiled-tiles /nonexistent.json: no such file"),
    (["costmodel", "--validate", "--sweep", "chips"],
     "give at most one of --validate, --sparse-evidence, --sweep or --policy"),
    (["costmodel", "--validate", "--policy", "maxdiffusion-moderate"], "give at most one of"),
    (["costmodel", "--sparse-evidence", "--sweep", "resolution"], "got --sparse-evidence --sweep resolution"),
    (["c3-search", "--geometries", "abc"], "--geometries must be one of 480p"),   # one line: no progress bar
    (["explore", "--block-q", "1000000"], "block_q must be at most 302,400"),     # 1440p: L = 302,400
    (["tiles", "--block-q", "100000000"], "block_q must be at most 302,400"),
    (["tiles", "--geometry", "2x4x4"], "block_q must be at most 32"),            # the production tile on 32 tokens
    (["compile", "--geometry", "2x8x16", "--block-q", "2048", "--block-kv", "2048"], "block_q must be at most 256"),
    (["compile", "--geometry", "2x8x16", "--block-q", "256", "--block-kv", "2048"], "block_kv must be at most 256"),
    (["generate", "--labels", "sideways"], "labels must be among horizontal, vertical, diagonal, null"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, word):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and word in err and out == ""


def test_a_tile_the_kernel_refuses_is_counted_and_named(capsys):
    """Counting tiles of any size is analysis (exit 0, the same counts as a brute-force count); one line says
    our kernel, by Mosaic's block-shape rule with its source, would refuse the tile."""
    out = run_json(capsys, "tiles", "--geometry", "8x9x13", "--multiplier", "1", "--block-q", "104",
                   "--block-kv", "1000")
    kinds = brute_kinds(svg_mask(VideoGeometry(8, 9, 13), 1.0).to_array(), 104, 1000)
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
        main(["tiles", "--geometry", "2x4x4", "--block-q", "8", "--block-kv", "128"])
    assert capsys.readouterr().err == ""


def test_an_internal_error_shows_a_traceback_and_exits_1():
    code = ("import sys, svgtpu.masks.tiles as t\n"
            "def broken(*a, **k): raise ValueError('an internal error')\n"
            "t.tile_report = broken\n"
            "from svgtpu.cli import main\nsys.exit(main(['tiles', '--geometry', '2x4x4', '--block-q', '8', "
            "'--block-kv', '128']))")
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
    (["profile-heads", "--head-dim", "100"], "--head-dim: invalid choice: 100 (choose from 64, 128)"),
    (["compile", "--head-dim", "96"], "--head-dim: invalid choice: 96 (choose from 64, 128)"),
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


def test_a_block_as_long_as_the_padded_sequence_is_taken():
    """The bound of ``check_blocks_cover`` is the sequence padded to the block rule, not L itself: 351 tokens
    take a 352-row q block and a 384-key kv block (one tile each), one more row or 128 keys more is refused."""
    check_blocks_cover(352, 384, 351)
    for block_q, block_kv, word in ((360, 384, "block_q must be at most 352"),
                                    (352, 512, "block_kv must be at most 384")):
        with pytest.raises(BadInput, match=word):
            check_blocks_cover(block_q, block_kv, 351)


def test_paper_refuses_a_file_without_markers_and_writes_nothing(tmp_path, capsys):
    plain, marked = tmp_path / "plain.md", tmp_path / "marked.md"
    plain.write_text("no markers here\n")
    marked.write_text("<!-- svgtpu:begin environment -->\nstale\n<!-- svgtpu:end environment -->\n")
    assert main(["paper", str(marked), str(plain)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"paper target {plain} has no svgtpu markers" in err
    assert "stale" in marked.read_text()   # the file before it was not written either


def test_the_default_tiles_parse_and_match_production():
    """``bench compiled`` on its own defaults: PRODUCTION's tile string is what ``--tiles`` reads (it was
    written with a Unicode ×); one formatter writes every default tile list."""
    assert parse_tiles(PRODUCTION.tiles) == [(PRODUCTION.block_q, PRODUCTION.block_kv)]
    compiled = build_parser().parse_args(["bench", "compiled"]).tiles
    assert parse_tiles(compiled, "--tiles") == [(PRODUCTION.block_q, PRODUCTION.block_kv),
                                                (MAXDIFFUSION_DEFAULT_TILE.block_q, MAXDIFFUSION_DEFAULT_TILE.block_kv)]
    assert parse_tiles(build_parser().parse_args(["c3-search"]).tiles, "--tiles") == list(TILES)
    assert parse_tiles("3024×2048") == [(3024, 2048)]   # as the paper prints it


def test_the_bench_tiles_default_to_maxdiffusions_default_wan_tile_as_cited():
    """``bench kernels`` / ``ops`` default to MaxDiffusion's default Wan tile, the numbers its cited config line
    reads; ``bench compiled`` to the tiles the compiled tile table compiles (its own default)."""
    from svgtpu.compiler.tile_table import TILES as COMPILED_TILES
    cited = MAXDIFFUSION_DEFAULT_TILE.source.what
    for command in ("kernels", "ops"):
        args = build_parser().parse_args(["bench", command])
        assert f"block_q {args.block_q}, block_kv {args.block_kv}," in cited, (command, cited)
        assert (args.block_q, args.block_kv) == (MAXDIFFUSION_DEFAULT_TILE.block_q, MAXDIFFUSION_DEFAULT_TILE.block_kv)
    compiled = build_parser().parse_args(["bench", "compiled"]).tiles
    assert parse_tiles(compiled, "--tiles") == list(COMPILED_TILES)


def test_explore_takes_a_slice_name_as_costmodel_does(capsys):
    by_name = run_json(capsys, "explore", "--chips", "v7x-8", "--repeats", "1")["settings"]
    assert (by_name["device"], by_name["chips"]) == ("v7x", 4)      # v7x-8 counts TensorCores: 4 chips
    production = run_json(capsys, "explore", "--chips", PRODUCTION.slice, "--repeats", "1")["settings"]
    assert (production["device"], production["chips"]) == (PRODUCTION.device, PRODUCTION.chips)
    assert main(["explore", "--chips", "v7x-8", "--device", "v6e"]) == 2
    assert "names a v7x slice but --device is v6e" in capsys.readouterr().err


def test_explore_gives_one_verdict_on_a_tile_over_vmem(capsys):
    """A tile whose blocks overflow VMEM is refused on the kernel line too, never "takes this tile: yes"."""
    assert main(["explore", "--block-q", "32768", "--block-kv", "32768", "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    [kernel] = [line for line in lines if line.startswith("our kernel takes this tile")]
    [vmem] = [line for line in lines if line.startswith("VMEM of the device")]
    assert "does not fit" in vmem and kernel.startswith("our kernel takes this tile: refused") and "VMEM" in kernel


def test_tiles_and_explore_share_the_kept_default(capsys):
    """One default mask: ``tiles`` and ``explore`` without --kept or --multiplier both draw the default
    recipe's kept fraction and count the same tiles at the production setting."""
    tiles = run_json(capsys, "tiles")
    explored = run_json(capsys, "explore", "--repeats", "1")
    assert tiles["kept"] == explored["settings"]["kept"] == DEFAULT_KEPT and tiles["multiplier"] is None
    assert {k: tiles[k] for k in ("full", "partial", "empty")} == {k: explored[k] for k in ("full", "partial", "empty")}
    assert f"default kept {DEFAULT_KEPT}" in help_text(capsys, "tiles")


def test_generate_takes_labels_by_name_and_writes_under_build(monkeypatch, capsys):
    import svgtpu.toy.sampler

    seen = {}

    def fake_generate(checkpoint, **kwargs):   # the sampling itself is tested in test_dit.py
        seen.update(kwargs)
        return {"attention": "dense", "align": None, "seed": 0, "steps": 1, "labels": kwargs["labels"],
                "sample_seconds": 0.0, "gif": kwargs["out"], "contact_sheet": None}
    monkeypatch.setattr(svgtpu.toy.sampler, "generate", fake_generate)
    assert main(["generate", "--labels", "diagonal", "Null", "0", "--steps", "1"]) == 0
    assert seen["labels"] == [LABEL_NAMES.index("diagonal"), NULL_LABEL, 0]
    out = Path(seen["out"])
    assert out.is_relative_to(REPO_ROOT / "build") and out != Path.cwd() / "video.gif"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(out)], cwd=REPO_ROOT)
    assert ignored.returncode == 0, f"{out} is not ignored by git"
    text = help_text(capsys, "generate")
    assert all(name in text for name in LABEL_NAMES) and "build/generate/video-<UTC" in text
