"""Tables the commands print keep to a terminal's width (facts.tables.FIT_WIDTH, 100 columns); --json keeps every
field (issue 53 left costmodel --validate, --sweep chips and bench ops 150-580 columns wide)."""

import json
from pathlib import Path

import pytest

from svgtpu.cli import main
from svgtpu.facts.tables import FIT_WIDTH

#: MaxDiffusion's policies are priced from a compiled tile table (the suite hides figures/compiled_tiles.json).
FIXTURE = Path(__file__).with_name("data") / "compiled_tiles_fixture.json"


def too_wide(text: str) -> list[str]:
    """Lines over the width, but for one unbroken word (a path) that no wrapping can shorten."""
    return [line for line in text.splitlines() if len(line) > FIT_WIDTH and " " in line.strip()]


#: Each command's first JSON row and the fields its table leaves to --json (absent: the table drops none).
WANTED = {"--validate": (lambda r: r["points"][0], {"device", "chips", "kernel", "model", "pixels", "steps",
                                                   "calibration_related"}),
          "chips": (lambda r: r["rows"][0], {"chips_per_pass", "head_slot_use", "speedup_without_communication",
                                             "picked"}),
          "resolution": (lambda r: r["sweep"][0], {"attention_share_end_to_end", "provenance"}),
          "ops": (lambda r: r["rows"][0], {"mask_source", "mask_block_loads", "vector_elements", "masking_elements"}),
          "align-pairs": (lambda r: r["rows"][0], {"window", "exact_pairs", "aligned_pairs"})}


@pytest.mark.parametrize("argv", [["costmodel", "--validate"], ["costmodel", "--sweep", "chips"],
                                  ["costmodel", "--sweep", "resolution"], ["bench", "ops"],
                                  ["costmodel", "--sparse-evidence"],
                                  ["costmodel", "--policy", "maxdiffusion-moderate", "--compiled-tiles", str(FIXTURE)],
                                  ["align-pairs"],   # its defaults, 720p and 1440p: under 1 s
                                  # the default search takes ~40 s: a small grid prints the same tables
                                  ["c3-search", "--geometries", "3x8x16", "--tiles", "64x96", "--maxdiffusion-tiles",
                                   "128x128"]])
def test_a_command_keeps_to_the_width_and_its_json_to_every_field(argv, capsys):
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert not too_wide(text), too_wide(text)
    wanted = WANTED.get(argv[-1])
    if wanted is None:
        return
    assert main(argv + ["--json"]) == 0
    row_of, fields = wanted
    row = row_of(json.loads(capsys.readouterr().out))
    assert fields <= set(row), fields - set(row)   # the fields the table now leaves to --json are still there


def test_validate_shows_each_point_by_its_role_and_error():
    from svgtpu.costmodel.command import validate_command

    result, text = validate_command()
    table = text[:text.index("\nrole: ")].splitlines()[2:]   # the rows, above the legend
    lines = {line.split()[0]: line.split() for line in table}
    assert len(lines) == len(result["points"])
    for point in result["points"]:
        cells = lines[point["id"]]
        role = cells[1]
        assert role.startswith("cal") == (point["role"] == "calibration")
        assert role.endswith("?") == (point["role"] == "validation-unconfirmed")
        assert role.endswith("*") == bool(point["calibration_related"])
        assert float(cells[-1].rstrip("%")) == pytest.approx(100 * point["error"], abs=0.051)


def test_bench_ops_formats_a_compiled_section_within_the_width():
    from svgtpu.bench.kernel_timing import format_ops
    from svgtpu.compiler.llo import UNITS

    counts = {"llo_ops": 4321, **{f"llo_{u}": 1234 for u in UNITS}, "bundles": 98765}
    rows = [{"mask": mask, "mask_source": source, "fast_path": fast, "tile": tile, "matmul_ops": 4, "vector_ops": 106,
             "masking_ops": 11, "mask_block_loads": 2, "vector_elements": 2722831, "masking_elements": 526338}
            for mask, source in (("svg", "iota"), ("temporal-frame-major", "blocks"))
            for fast in (True, False) for tile in ("full", "partial")]
    plans = [{"mask": "per-head: svg + temporal-frame-major", "steps_per_head": 289, "dense_steps_per_head": 289,
              "full": 78, "partial": 354, "empty": 146, "masked_steps": 354, "empty_row_steps": 0,
              "wasted_steps": 146, "mask_source": "blocks", "mask_blocks": 230}]
    result = {"rows": rows, "plans": plans, "provenance": "computed", "counted_in": "a jaxpr",
              "compiled": {"rows": [{"mask": r["mask"], "fast_path": r["fast_path"], "tile": r["tile"], **counts}
                                    for r in rows], "provenance": "compiled-v6e", "counted_in": "LLO"}}
    text = format_ops(result)
    assert not too_wide(text), too_wide(text)
    assert "289 in a dense plan" in text and "98765" in text and "temporal-frame-major blocks" in text
    plans.append({**plans[0], "mask": "another", "dense_steps_per_head": 300})   # grids differ: a column again
    text = format_ops(result)
    header = next(line.split() for line in text.splitlines() if line.split()[:2] == ["mask", "steps"])
    assert "dense plan" not in text and header[:3] == ["mask", "steps", "dense"]
