"""Inputs checked by schemas (svgtpu/inputs/): every file, flag and variable refused in one line before any work.

Each refusal is checked as a user meets it, through ``svgtpu``'s ``main(argv)`` in this process: exit status 2,
one line on stderr naming the field (or flag), the value and what is allowed, no traceback, nothing on stdout,
nothing written.  The property tests feed each schema random and malformed documents (hypothesis, examples
bounded so the file stays within its time share) and check that random valid ones pass.
"""

import json
import os
from pathlib import Path

import pytest

from svgtpu.cli import main
from svgtpu.errors import BadInput
from svgtpu.facts.paths import REPO_ROOT

GPU_RUN = REPO_ROOT / "figures" / "gpu-runs" / "2026-12-04-314194b.json"
SYNTHETIC_RUN = Path(__file__).parent / "data" / "tpu_run_synthetic.json"


def refused(capsys, argv, *words: str, folder: Path | None = None) -> str:
    """``svgtpu ARGV`` exits 2 with one line on stderr holding each of ``words``, no traceback, nothing on stdout,
    and (``folder``) nothing new written there; the line."""
    before = set(folder.rglob("*")) if folder is not None else set()
    try:
        status = main(argv)
    except SystemExit as exit_:   # argparse's own refusals
        status = exit_.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and out == "", (argv, status, out, err)
    assert "Traceback" not in err and all(w in err for w in words), (argv, err, words)
    if folder is not None:
        assert set(folder.rglob("*")) == before, f"{argv} wrote {set(folder.rglob('*')) - before}"
    return lines[0]


# -- svgtpu predict --against: the run file ---------------------------------------------------

RUN_CASES = {
    "empty": ("", "is empty"),
    "blank": ("  \n", "is empty"),
    "truncated": ('{"chips": 8, "provenance": "x", "quantities": {', "truncated"),
    "yaml": ("chips: 8\nprovenance: x\n", "not JSON"),
    "foo": ('{"foo": 1}', "is missing"),
    "list": ("[1, 2]", "got a JSON list"),
    "no quantities": ('{"chips": 8, "provenance": "measured-tpu"}', "quantities is missing"),
    "string value": ('{"chips": 8, "provenance": "measured-tpu", "quantities": {"q": {"value": "fast", '
                     '"interval": [1, 2]}}}', "quantities.q.value = 'fast'"),
    "duplicate": ('{"chips": 8, "chips": 1, "provenance": "measured-tpu", "quantities": {}}', "'chips' is given twice"),
    "nan": ('{"chips": 8, "provenance": "measured-tpu", "quantities": {"q": {"value": NaN, "interval": [1, 2]}}}',
            "NaN is not a JSON number"),
    "binary": ("\0\1\2binary", "binary file"),
    "boolean chips": ('{"chips": true, "provenance": "measured-tpu", "quantities": {}}', "chips = True"),
    "reversed iqr": ('{"chips": 8, "provenance": "measured-tpu", "quantities": {"q": {"value": 1, '
                     '"interval": [2, 1]}}}', "low <= high"),
    "gpu provenance": ('{"chips": 1, "provenance": "measured-gpu-h200", "quantities": {}}', "is a GPU run"),
}


@pytest.mark.parametrize("case", RUN_CASES)
def test_predict_against_refuses_a_bad_run_file_in_one_line(case, capsys, tmp_path):
    text, words = RUN_CASES[case]
    path = tmp_path / "run.json"
    path.write_text(text)
    refused(capsys, ["predict", "--against", str(path)], "--against", words, folder=tmp_path)


def test_predict_against_refuses_the_packages_own_gpu_run(capsys):
    line = refused(capsys, ["predict", "--against", str(GPU_RUN)], "is a GPU run (measured-gpu-h200)")
    assert "bench tpu" in line


@pytest.mark.parametrize("path, words", [("/no/such/run.json", "no such file"), ("/dev/null", "not a regular file"),
                                         ("tests", "is a folder")])
def test_predict_against_refuses_what_is_no_file(path, words, capsys):
    refused(capsys, ["predict", "--against", path], "--against", words)


def test_predict_against_reads_a_valid_run(capsys, tmp_path):
    # a valid file of another provenance is read, then refused as evidence (issue 64: only measured-tpu judges)
    refused(capsys, ["predict", "--against", str(SYNTHETIC_RUN)], "--against", "provenance must be measured-tpu")
    measured = tmp_path / "run.json"   # the same SYNTHETIC numbers labelled as a TPU run, in a temporary folder
    measured.write_text(json.dumps(json.loads(SYNTHETIC_RUN.read_text()) | {"provenance": "measured-tpu"}))
    assert main(["predict", "--against", str(measured), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["provenance"] for r in rows} == {"measured-tpu"}


# -- svgtpu costmodel --policy FILE: the policy file ------------------------------------------

POLICY_CASES = {
    "SVG switched off": ("use_svg_attention: false\n", "use_svg_attention = False: must be true"),
    "duplicate key": ("svg_high_noise_density: 0.5\nsvg_high_noise_density: 0.2\n", "given twice"),
    "empty": ("", "is empty"),
    "infinite shift": ("flow_shift: .inf\n", "flow_shift = inf: must be a finite number"),
    "binary": ("\0\x01\x02", "binary file"),
    "27-digit count": ("svg_profile_query_count: 100000000000000000000000000\n",
                       "svg_profile_query_count = 100000000000000000000000000: must be less than or equal to"),
    "window past the run": ("svg_active_start_step: 50\nsvg_active_end_step: 60\n",
                            "[50, 60): must be a window 0 <= start < end <= num_inference_steps = 40"),
    "window past its steps": ("num_inference_steps: 20\nsvg_active_start_step: 11\nsvg_active_end_step: 40\n",
                              "<= num_inference_steps = 20"),
    "layer window past the model": ("svg_active_start_layer: 1\nsvg_active_end_layer: 41\n", "<= 40, the run's layers"),
    "more queries than tokens": ("svg_profile_query_count: 80000\n", "at most the video's 75600 tokens"),
    "string boolean": ('svg_include_first_frame: "false"\n', "must be true or false"),
    "float frames": ("num_frames: 81.0\n", "num_frames = 81.0: must be an integer"),
    "boolean steps": ("num_inference_steps: true\n", "num_inference_steps = True: must be an integer"),
    "nan density": ("svg_low_noise_density: .nan\n", "must be a finite number"),
    "density above one": ("svg_low_noise_density: 1.5\n", "svg_low_noise_density = 1.5: must be less than or equal to 1"),
    "misspelled key": ("svg_high_noise_densty: 0.5\n", "unknown SVG key(s) svg_high_noise_densty"),
    "not a mapping": ("- 1\n", "a mapping of keys, got list"),
    "truncated": ("svg_flash_block_sizes: {block_q: 128,\n", "not YAML"),
}


@pytest.mark.parametrize("case", POLICY_CASES)
def test_a_bad_policy_file_is_refused_in_one_line(case, capsys, tmp_path):
    text, words = POLICY_CASES[case]
    path = tmp_path / "policy.yml"
    path.write_bytes(text.encode("latin-1"))
    refused(capsys, ["costmodel", "--policy", str(path)], "--policy", words, folder=tmp_path)


def test_dev_null_is_no_policy_file(capsys):
    refused(capsys, ["costmodel", "--policy", "/dev/null"], "not a regular file")


@pytest.mark.parametrize("flags", [["--device", "h200"], ["--kept", "0.2"], ["--chips", "8"], ["--resolution", "720p"]])
def test_a_flag_the_policy_mode_would_ignore_is_refused(flags, capsys):
    refused(capsys, ["costmodel", "--policy", "maxdiffusion-moderate", *flags], "it takes none of", flags[0])


def test_a_valid_policy_file_with_other_maxdiffusion_keys_is_modeled(capsys, tmp_path, monkeypatch):
    from svgtpu.costmodel.policy import MODERATE_KEYS
    monkeypatch.setenv("SVGTPU_COMPILED_TILES", str(Path(__file__).parent / "data" / "compiled_tiles_fixture.json"))
    path = tmp_path / "moderate.yml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in MODERATE_KEYS.items()) + "run_name: mine\n")
    assert main(["costmodel", "--policy", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["speedup"] > 1


# -- environment variables, checked as their flags ---------------------------------------------

@pytest.fixture
def odd_files(tmp_path):
    (tmp_path / "binary.json").write_bytes(b"\x00\x9f\x92\x96 binary")
    (tmp_path / "a-file").write_text("x")
    return tmp_path


@pytest.mark.parametrize("value, words", [("{dir}/missing.json", "no such file"), ("{dir}", "is a folder"),
                                          ("{dir}/binary.json", "binary file")])
def test_compiled_tiles_variable_and_flag_refuse_alike(value, words, odd_files, capsys, monkeypatch):
    value = value.format(dir=odd_files)
    refused(capsys, ["costmodel", "--compiled-tiles", value], f"--compiled-tiles {value}", words)
    monkeypatch.setenv("SVGTPU_COMPILED_TILES", value)
    refused(capsys, ["costmodel"], f"$SVGTPU_COMPILED_TILES {value}", words)
    from svgtpu.costmodel.compiled import default_compiled
    with pytest.raises(BadInput, match=words):   # the API reads it the same way
        default_compiled()


@pytest.mark.parametrize("name, value, words", [
    ("SVGTPU_FIGURES_DIR", "/etc/passwd", "is a file"),
    ("SVGTPU_FIGURES_DIR", "{dir}/missing", "no such folder"),
    ("SVGTPU_ROOT", "{dir}/missing", "no such folder"),
    ("SVGTPU_ROOT", "{dir}", "is no svgtpu checkout"),
])
def test_a_variable_naming_no_folder_is_refused_before_any_work(name, value, words, odd_files, capsys, monkeypatch):
    monkeypatch.setenv(name, value.format(dir=odd_files))
    refused(capsys, ["costmodel"], f"${name}", words)


def test_compiled_tiles_none_is_priors_for_flag_and_variable(capsys, monkeypatch):
    monkeypatch.setenv("SVGTPU_COMPILED_TILES", "none")
    assert main(["costmodel", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["costmodel", "--compiled-tiles", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == first


# -- outputs: never overwritten, checked before the work ---------------------------------------

def refuse_work(*args, **kwargs):
    raise AssertionError("the work started before the output was checked")


def test_train_never_overwrites_a_named_checkpoint_or_its_record(capsys, tmp_path, monkeypatch):
    import svgtpu.toy.train
    monkeypatch.setattr(svgtpu.toy.train, "train", refuse_work)
    (tmp_path / "m.npz").write_bytes(b"old")
    refused(capsys, ["train", "--out", str(tmp_path / "m.npz")], "m.npz exists", folder=tmp_path)
    (tmp_path / "n.loss.json").write_text("{}")
    refused(capsys, ["train", "--out", str(tmp_path / "n.npz")], "n.loss.json exists", folder=tmp_path)
    assert (tmp_path / "m.npz").read_bytes() == b"old"


def test_generate_never_overwrites_a_named_video_or_its_sheet(capsys, tmp_path, monkeypatch):
    import svgtpu.toy.sampler
    monkeypatch.setattr(svgtpu.toy.sampler, "sample", refuse_work)
    (tmp_path / "v.gif").write_bytes(b"old")
    refused(capsys, ["generate", "--out", str(tmp_path / "v.gif"), "--steps", "1"], "v.gif exists", folder=tmp_path)
    (tmp_path / "w.png").write_bytes(b"old")
    refused(capsys, ["generate", "--out", str(tmp_path / "w.gif"), "--steps", "1"], "w.png exists", folder=tmp_path)


@pytest.mark.parametrize("argv", [["train", "--config", "tiny", "--steps", "1", "--out", "{dir}/ro/m.npz"],
                                  ["generate", "--steps", "1", "--out", "{dir}/ro/v.gif"]])
def test_an_unwritable_folder_is_refused_before_the_work(argv, capsys, tmp_path, monkeypatch):
    import svgtpu.toy.sampler
    import svgtpu.toy.train
    monkeypatch.setattr(svgtpu.toy.train, "train", refuse_work)
    monkeypatch.setattr(svgtpu.toy.sampler, "sample", refuse_work)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o500)
    try:
        if os.access(tmp_path / "ro", os.W_OK):
            pytest.skip("running as a user every folder lets write (root)")
        refused(capsys, [a.format(dir=tmp_path) for a in argv], "cannot be written", folder=tmp_path)
    finally:
        (tmp_path / "ro").chmod(0o700)


@pytest.mark.parametrize("argv", [["train", "--config", "tiny", "--steps", "1", "--out", "{dir}/a-file/m.npz"],
                                  ["generate", "--steps", "1", "--out", "{dir}/a-file/v.gif"]])
def test_a_folder_that_is_a_file_is_refused_before_the_work(argv, capsys, odd_files, monkeypatch):
    import svgtpu.toy.sampler
    import svgtpu.toy.train
    monkeypatch.setattr(svgtpu.toy.train, "train", refuse_work)
    monkeypatch.setattr(svgtpu.toy.sampler, "sample", refuse_work)
    refused(capsys, [a.format(dir=odd_files) for a in argv], "is a file, not a folder", folder=odd_files)


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch):
    from svgtpu.cli import COMMANDS, INTERRUPTED

    def interrupted(args):
        raise KeyboardInterrupt
    help_text, arguments, _ = COMMANDS["recipes"]
    monkeypatch.setitem(COMMANDS, "recipes", (help_text, arguments, interrupted))
    assert main(["recipes"]) == INTERRUPTED == 130
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == ["svgtpu: interrupted (Ctrl-C); no file was left half-written"]


# -- contradictory flags, and work bounded before it starts ------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["bench", "tpu", "--preflight", "--smoke"], "--preflight compiles every program of the full run and runs "
                                                 "nothing: it takes none of --smoke"),
    (["bench", "tpu", "--sections", "kernels", "kernels"], "--sections: kernels is given twice"),
    (["bench", "gpu", "--smoke", "--sections", "check,check"], "--sections: check is given twice"),
    (["costmodel", "--model", "toy", "--device", "cpu", "--chips", "8"], "it takes none of --chips"),
    (["costmodel", "--exclude", "host", "--exclude", "host"], "--exclude: host is given twice"),
    (["reproduce", "--only", "03", "03"], "--only: 03 is given twice"),
    (["profile-heads", "--seeds", "-1"], "--seeds: must be a seed, an integer from 0 to 4294967295"),
    (["profile-heads", "--seeds", "0", "0"], "--seeds: 0 is given twice"),
    (["profile-heads", "--geometry", "1440p"], "--geometry 1440p has 302,400 tokens"),
    (["generate", "--steps", "100000000"], "steps must be an integer from 1 to 1000"),
    (["quality", "--steps", "5000"], "--steps must be an integer from 1 to 1000"),
    (["bench", "kernels", "--geometry", "1x1x1"], "block_q must be at most 8"),
    (["generate", "--checkpoint", "tests"], "checkpoint tests is a folder"),
    (["generate", "--seed", "-1"], "must be a seed"),
])
def test_a_contradiction_or_unbounded_size_is_refused_before_work(argv, words, capsys):
    refused(capsys, argv, words)


def test_explore_says_when_the_kept_fraction_asked_is_out_of_reach(capsys):
    assert main(["explore", "--kept", "1e-12", "--geometry", "720p", "--repeats", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "kept 1e-12 asked, but the mask keeps" in out and "the first-frame sink alone keeps" in out


# -- no entry point hides a bug as bad input ----------------------------------------------------

def test_no_entry_point_catches_a_bare_exception():
    """A bug keeps its traceback (exit 1); only BadInput is one line (exit 2): no ``except Exception``, ``except
    BaseException`` or bare ``except:`` in the command line's modules."""
    import ast

    import svgtpu.cli
    folder = Path(svgtpu.cli.__file__).parent
    found = []
    for path in [*sorted(folder.glob("*.py")), folder.parent / "__main__.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler):
                names = [n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)] if node.type else ["(bare)"]
                if {"Exception", "BaseException", "(bare)"} & set(names):
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, found
