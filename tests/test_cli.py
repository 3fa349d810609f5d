"""The command line: JSON contract of `svgtpu tiles`, and one clear line for bad input."""

import json
import subprocess
import sys

import pytest

from svgtpu.cli import main


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_tiles_json_contract(capsys):
    out = run_json(capsys, "tiles", "--geometry", "wan-1440p", "--mask", "spatial", "--multiplier", "1",
                   "--block-q", "3024", "--block-kv", "2048")
    for key in ("full", "partial", "empty", "partial_share", "density", "geometry", "block_q", "block_kv"):
        assert key in out
    assert out["full"] + out["partial"] + out["empty"] == 100 * 148
    assert out["partial_share"] == pytest.approx(out["partial"] / (out["partial"] + out["full"]))
    aligned = run_json(capsys, "tiles", "--geometry", "wan-1440p", "--block-q", "3024", "--block-kv", "2048",
                       "--align", "snap")
    assert aligned["partial_share"] <= 0.0222 < out["partial_share"]
    assert aligned["alignment"]["added"] > 0


def test_tiles_table_and_sparsity(capsys):
    assert main(["tiles", "--geometry", "4x10x14", "--sparsity", "0.4", "--block-q", "128",
                 "--block-kv", "128", "--mask", "temporal-frame-major"]) == 0
    table = capsys.readouterr().out
    assert "partial_share" in table and "temporal-frame-major" in table


@pytest.mark.parametrize("argv,word", [
    (["--geometry", "wan-4k"], "geometry"),
    (["--geometry", "21x45"], "geometry"),
    (["--multiplier", "-2"], "multiplier"),
    (["--sparsity", "1.5"], "sparsity"),
    (["--mask", "causal"], "mask"),
])
def test_bad_input_exits_nonzero_with_one_line(capsys, argv, word):
    assert main(["tiles", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err


def test_argparse_rejects_non_positive_blocks(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tiles", "--block-q", "0"])
    assert exc.value.code == 2 and "--block-q" in capsys.readouterr().err


def test_module_entry_point_and_info():
    out = subprocess.run([sys.executable, "-m", "svgtpu", "info", "--json"], capture_output=True, text=True,
                         check=True).stdout
    info = json.loads(out)
    assert info["backend"] in ("cpu", "tpu", "gpu") and info["device_count"] >= 1
