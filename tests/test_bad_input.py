"""The kinds of bad input that slipped through before (issue 53), each refused as the house rule says: one line
naming the parameter and what it takes, exit status 2, before any work; each kind over two entry points at least
(a command and the Python API, or two commands)."""

import argparse

import numpy as np
import pytest

import svgtpu.costmodel as cm
from svgtpu.cli import COMMANDS, build_parser, main
from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, get_geometry
from svgtpu.masks.core import align, alignment_diff, svg_mask


def refused(capsys, argv, words: str) -> None:
    """``svgtpu ARGV`` exits 2 with one line on stderr holding ``words``, and prints nothing on stdout."""
    try:
        status = main(argv)
    except SystemExit as exit_:   # argparse's own refusals
        status = exit_.code
    out, err = capsys.readouterr()
    assert status == 2 and len(err.strip().splitlines()) == 1 and words in err and out == "", (argv, status, err)


@pytest.fixture
def files(tmp_path):
    """Broken and wrong-shaped input files, and a target with a marker for ``svgtpu paper``."""
    made = {"broken.json": '{"claims": ', "list.json": "[1, 2]", "claims-list.json": '{"claims": []}',
            "broken.yml": "a: [1, 2\n", "list.yml": "- 1\n", "misspelled.yml": "svg_high_noise_densty: 0.5\n",
            "string-bool.yml": 'svg_include_first_frame: "false"\n', "string-number.yml": "flow_shift: abc\n",
            "unmodeled.yml": "svg_dense_layer_fraction: 0.2\n", "string-int.yml": 'svg_active_start_step: "3"\n'
            "svg_active_end_step: 30\n",
            "target.md": "<!-- svgtpu:begin environment -->\n<!-- svgtpu:end environment -->\n"}
    for name, text in made.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("name,words", [("broken.json", "not JSON"), ("list.json", "got a JSON list"),
                                        ("claims-list.json", "claims must be a JSON object")])
def test_a_results_file_that_is_no_results_object_is_refused(capsys, files, name, words):
    from svgtpu.facts.results import load_results
    from svgtpu.report.predictions import claims_now

    refused(capsys, ["paper", "--results", str(files / name), str(files / "target.md")], words)
    for read in (load_results, claims_now):
        with pytest.raises(BadInput, match=words):
            read(files / name)
    assert "svgtpu:begin environment -->\n<!--" in (files / "target.md").read_text()   # nothing written


@pytest.mark.parametrize("name,words", [
    ("broken.yml", "not YAML"), ("list.yml", "a mapping of keys, got list"),
    ("misspelled.yml", "unknown SVG key(s) svg_high_noise_densty; MaxDiffusion's are use_svg_attention"),
    ("string-bool.yml", "svg_include_first_frame = 'false': must be true or false (a boolean, unquoted)"),
    ("string-number.yml", "flow_shift = 'abc': must be a number"),
    ("string-int.yml", "svg_active_start_step = '3': must be an integer"),
    ("unmodeled.yml", "svg_dense_layer_fraction = 0.2: must be 0.0"),
])
def test_a_policy_file_with_a_bad_key_or_value_is_refused(capsys, files, name, words):
    from svgtpu.costmodel.policy import read_yaml

    refused(capsys, ["costmodel", "--policy", str(files / name)], words)
    with pytest.raises(BadInput, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_yaml(files / name)


def test_policy_keys_and_types_hold_through_the_api():
    from svgtpu.costmodel.policy import MODERATE_KEYS, from_config

    for bad, words in (({"svg_low_noise_dens": 0.2}, "unknown SVG key"), ({"use_svg_attention": "yes"}, "true or false"),
                       ({"svg_high_noise_density": "0.5"}, "a number"), ({"num_frames": 81.0}, "an integer"),
                       ({"svg_active_start_layer": True, "svg_active_end_layer": 40}, "an integer")):
        with pytest.raises(BadInput, match=words):
            from_config({**MODERATE_KEYS, **bad})
    assert from_config({**MODERATE_KEYS, "flow_shift": 5})[0].split.flow_shift == 5   # an integer is a number


@pytest.mark.parametrize("argv,words", [
    (["costmodel", "--kernel", "flash", "--device", "v6e"], "kernel flash does not run on v6e: one of ours, splash"),
    (["costmodel", "--kernel", "cudnn"], "kernel cudnn does not run on v6e"),
    (["costmodel", "--kernel", "splash", "--device", "h200"], "kernel splash does not run on h200: one of ours, flash"),
    (["costmodel", "--dense-kernel", "tokamax", "--device", "h100"], "dense_kernel tokamax does not run on h100"),
])
def test_a_kernel_the_device_does_not_run_is_refused(capsys, argv, words):
    refused(capsys, argv, words)


def test_a_kernel_the_device_does_not_run_is_refused_by_the_api():
    import svgtpu.costmodel as cm

    for device, kernel in (("v6e", "flash"), ("h200", "tokamax")):
        with pytest.raises(BadInput, match=f"kernel {kernel} does not run on {device}"):
            cm.calibrated_setup("wan2.1-14b", "720p", device, kernel=kernel)
    assert cm.calibrated_setup("wan2.1-14b", "720p", "h200", kernel="flash").kernel == "flash"


@pytest.mark.parametrize("argv,words", [
    (["tiles", "--mask", "dense", "--kept", "0.5"], "kept shapes SVG's band: mask dense"),
    (["tiles", "--mask", "dense", "--recipe", "write-up"], "recipe shapes SVG's band"),
    (["quality", "--variants", "svg", "--methods", "svg"], "give --variants (the SVG study) or --methods"),
    (["costmodel", "--model", "toy", "--device", "cpu", "--kept", "0.2"], "it takes none of --kept"),
    (["costmodel", "--model", "toy", "--device", "cpu", "--resolution", "720p"], "none of --resolution"),
])
def test_a_flag_another_flag_makes_meaningless_is_refused(capsys, argv, words):
    refused(capsys, argv, words)


def test_a_dense_mask_takes_no_density_in_the_api():
    from svgtpu.masks.tiles import tile_report

    with pytest.raises(BadInput, match="mask dense"):
        tile_report("4x10x14", "dense", kept=0.3, tile=Tile(128, 128))
    with pytest.raises(BadInput, match="mask dense"):
        tile_report("4x10x14", "dense", multiplier=1.0, tile=Tile(128, 128))
    assert tile_report("4x10x14", "dense", tile=Tile(128, 128))["kept"] is None


def test_every_string_argument_of_every_command_refuses_the_empty_string(capsys):
    """The kind, not the example: a string option given as "" (or blanks) never stands for its default."""
    parser, checked = build_parser(), 0
    for name in COMMANDS:
        leaf = parser
        for word in name.split():
            leaf = next(a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        for action in leaf._actions:   # the string ones: no type of argparse's (None) or the CLI's check on it
            if action.nargs == 0 or action.default == "" or \
                    getattr(action.type, "__name__", None) not in (None, "_non_empty"):
                continue
            flag = action.option_strings[0] if action.option_strings else None
            with pytest.raises(SystemExit) as exit_:
                build_parser().parse_args([*name.split(), *([flag] if flag else []), " "])
            err = capsys.readouterr().err
            assert exit_.value.code == 2 and "must not be empty" in err, (name, flag, err)
            checked += 1
    assert checked > 30


@pytest.mark.parametrize("argv,words", [
    (["reproduce", "--only", ""], "argument --only: must not be empty"),    # was: all ten notebooks
    (["costmodel", "--resolution", ""], "argument --resolution: must not be empty"),   # was: the production one
    (["recipes", "--name", ""], "argument --name: must not be empty"),     # was: every recipe
    (["align-pairs", "--kept"], "argument --kept: expected at least one argument"),   # was: an empty table
    (["align-pairs", "--densities"], "argument --densities: expected at least one argument"),
])
def test_empty_names_and_lists_are_refused(capsys, argv, words):
    refused(capsys, argv, words)


def test_empty_names_are_refused_by_the_api_and_numbers_and_names_match_exactly():
    from svgtpu.recipes import recipes_report
    from svgtpu.report.reproduce import select

    for only in ([""], [], ["0"], ["quality_"]):
        with pytest.raises(BadInput, match="--only must name notebooks"):
            select(only)
    with pytest.raises(BadInput, match="recipe must be one of"):
        recipes_report("")
    assert select(["01"]) == ["01_pallas_in_five_kernels"]        # 01 is not 01b
    assert select(["03", "quality", "01b_block_sparse_by_hand"]) == ["01b_block_sparse_by_hand", "03_mask_alignment",
                                                                      "07_quality"]


@pytest.mark.parametrize("argv", [
    ["tiles", "--geometry", "2x8x8", "--kept", "0.2", "--block-q", "128", "--block-kv", "128"],
    ["explore", "--geometry", "2x8x8", "--kept", "0.2", "--block-q", "128", "--block-kv", "128"],
    ["costmodel", "--resolution", "2x8x8", "--kept", "0.2", "--block-q", "128", "--block-kv", "128"],
])
def test_a_grid_too_small_for_the_density_is_refused_not_reported_dense(capsys, argv):
    refused(capsys, argv, "kept 0.2 cannot be reached on a grid of L = 128 tokens")


def test_a_grid_too_small_for_the_density_is_refused_by_the_api():
    from svgtpu.masks.core import multiplier_for_kept, svg_mask

    for g in ("2x8x8", "1x8x16"):
        with pytest.raises(BadInput, match="cannot be reached"):
            svg_mask(g, kept=0.2)
    assert svg_mask("2x8x16", kept=0.9).density() < 1   # two band steps: a sparse mask exists
    assert multiplier_for_kept(get_geometry("720p"), 0.3) > 0


@pytest.mark.parametrize("call,words", [
    (lambda m: align("spatial", Tile(128, 128)), "mask must be a Mask"),
    (lambda m: align(np.ones((8, 8), bool), Tile(8, 8)), "mask must be a Mask"),
    (lambda m: align(m, Tile(128, 128), 3), "align mode must be one of"),
    (lambda m: alignment_diff(m, "snap"), "aligned must be a TileMask"),
    (lambda m: alignment_diff(None, m), "original must be a Mask"),
    (lambda m: cm.calibrated_setup("wan2.1-14b", "720p", 6), "device must be one of"),
    (lambda m: cm.calibrated_setup("wan2.1-14b", [21, 45, 80], "v6e"), "geometry must be one of"),
    (lambda m: cm.calibrated_setup("wan2.1-14b", "720p", "v6e", kept="0.3"), "kept must be in the open interval"),
    (lambda m: cm.calibrated_setup("wan2.1-14b", "720p", "v6e", kept=None, multiplier="1"), "multiplier must be"),
])
def test_api_entry_points_refuse_the_wrong_type(call, words):
    with pytest.raises(BadInput, match=words):
        call(svg_mask("4x10x14", 1.0))
