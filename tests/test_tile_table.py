"""The whole-kernel static estimate (svgtpu.compiler.tile_table, .variants, .estimate) on kernels whose
answer is known, and the tile table file the cost model reads.

Compiles run libtpu ahead of time on the CPU (seconds each at these sizes) and are records keyed by
content (svgtpu.compiler.dumps); the tests skip only where libtpu is not installed."""

import json

import pytest

from svgtpu.compiler.compile import libtpu_available
from svgtpu.geometry import Tile

# one worker runs the file in turn (make test: --dist loadgroup): its estimates share compiles through their records
pytestmark = [pytest.mark.skipif(not libtpu_available(), reason="needs libtpu (the TPU compiler)"),
              pytest.mark.xdist_group("tile_table")]

SMALL = dict(block_q=512, block_kv=512, block_kv_compute=512)


def _variant(kernel, mask, geometry, **kw):
    from svgtpu.compiler.variants import Variant
    return Variant(kernel, mask, geometry, **{**SMALL, **kw})


def _estimate(kernel, mask, geometry, **kw):
    from svgtpu.compiler.estimate import estimate
    from svgtpu.compiler.variants import cached_compile
    v = _variant(kernel, mask, geometry, **kw)
    return estimate(cached_compile(v), v)


def test_dense_estimate_scales_with_steps():
    # L = 17 * 512 and 34 * 512: no padding, every tile full; 289 and 1156 grid steps of one body
    small, large = _estimate("ours", "dense", "8x32x34"), _estimate("ours", "dense", "16x32x34")
    assert (small["steps"], large["steps"]) == (17 * 17, 34 * 34)
    assert small["schedules"][0]["bodies"] == large["schedules"][0]["bodies"]
    assert large["cycles"] / small["cycles"] == pytest.approx(4.0, rel=0.02)


def test_all_empty_plan_costs_only_step_overhead():
    e = _estimate("ours", "empty", "8x32x34")
    s = e["schedules"][0]
    assert e["steps"] == 17 and e["empty_steps"] == 17  # one zero-writing step per q row
    assert e["body_cycles"] == 0
    # every step runs the per-step code, its row's init and finish; nothing else but the code once per call
    per_step = s["overhead"] + s["init"] + s["finish"]
    assert e["cycles"] == 17 * per_step + e["fill_iterations"] * s["overhead"] + e["once_cycles"]
    assert e["cycles"] < e["steps"] * min(s["bodies"])  # each step costs less than one tile body


def test_tile_bodies_match_the_llo_reader():
    from svgtpu.compiler.llo import compiled_tile_counts
    rows = compiled_tile_counts({"geometry": "8x32x34", "mask": "svg", "multiplier": 1.0, "head_dim": 128,
                                 "dtype": "bfloat16", "fast_path": True, **SMALL})
    llo = {r["tile"]: r["bundles"] for r in rows}
    e = _estimate("ours", "svg", "8x32x34")
    full, partial = e["schedules"][0]["bodies"]
    # llo counts from one region's fall-through mark to the next, so each of its bodies also holds the
    # next region's compare, branch and delay slots: the same few bundles after either body
    assert llo["full"] - full == llo["partial"] - partial
    assert 0 <= llo["full"] - full <= 8


@pytest.mark.system
def test_dense_and_aligned_masks_share_one_program():
    """Variants that differ only in the plan compile to the same bodies and per-step code: compiled
    separately here, they agree, so the comparison compiles one of them (svgtpu.compiler.variants)."""
    import dataclasses

    from svgtpu.compiler.variants import compile_program, program_key
    for kernel in ("ours", "splash"):
        dense, aligned = _variant(kernel, "dense", "8x20x34"), _variant(kernel, "svg-aligned", "8x20x34")
        assert program_key(dense) == program_key(aligned)
        a, b = compile_program(dense)["calls"][0], compile_program(aligned)["calls"][0]
        for part in ("overhead", "init", "finish", "bodies", "loop"):
            assert a["schedule"][part] == b["schedule"][part], (kernel, part)
        assert a["fill"] == b["fill"] and a["body_units"] == b["body_units"]
        assert program_key(dataclasses.replace(dense, block_kv_compute=256)) != program_key(dense)


def test_library_masks_hand_over_our_masks_block_by_block():
    # the Splash / tokamax view of our masks (whole blocks short-cut, partial ones evaluated) equals
    # our mask, padded rows and keys disallowed
    import numpy as np
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as jax_masks
    from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask as tokamax_masks

    from svgtpu.compiler.variants import library_mask
    from svgtpu.masks.core import BandSinkMask, align
    band = BandSinkMask(300, 40, 50)
    for mask in (band, align(band, Tile(128, 128))):
        for lib in (jax_masks, tokamax_masks):
            view = library_mask(lib, mask, (384, 384))
            for q0 in range(0, 384, 128):
                for k0 in range(0, 384, 128):
                    got = view[q0:q0 + 128, k0:k0 + 128]
                    want = mask.block(q0, q0 + 128, k0, k0 + 128)
                    assert np.array_equal(np.asarray(got, bool), want), (type(mask).__name__, lib.__name__, q0, k0)


def test_roofline_counts_the_kept_tiles_real_pairs():
    from svgtpu.compiler.tile_table import roofline
    # L = 8704 = 17 x 512: dense keeps every pair; 4 x d flop per pair at 524,288 flop a cycle; d = 128
    # fills half the MXU's 256 columns in QK (either layout) and in p v (query-major), so the pushes take
    # twice the roofline query-major and 1.5 times key-major (v^T p is 512 wide: full)
    r = roofline(_variant("ours", "dense", "8x32x34", layout="query-major"))
    assert r["flops"] == 4 * 128 * 8704 ** 2 and r["roofline_cycles"] == r["flops"] / 524288
    assert r["mxu_bound_cycles"] == 2 * r["roofline_cycles"] and r["tile_density"] == 1.0
    key_major = roofline(_variant("ours", "dense", "8x32x34"))  # the default at block_q 512
    assert key_major["layout"] == "key-major" and key_major["mxu_bound_cycles"] == 1.5 * r["roofline_cycles"]
    assert roofline(_variant("splash", "dense", "8x32x34"))["mxu_bound_cycles"] == r["mxu_bound_cycles"]
    padded = roofline(_variant("ours", "dense", "1x10x100"))  # L = 1000: tiles of 512 and 488 rows / keys
    assert padded["flops"] == 4 * 128 * 1000 ** 2


def test_both_layouts_are_compared_where_the_tile_allows_them():
    """No compile: which variants and bodies the comparison holds, and each layout's push bound by hand
    (pushes per 16 rows; QK contracts over d, PV is d wide query-major, block_q wide key-major)."""
    from svgtpu.compiler.tile_table import bodies, push_bound_factor, variants
    names = {v.name: v.kernel_layout for v in variants("8x32x34", 512, 512)}
    assert names["ours-svg-fast"] == "key-major" and names["ours-svg-fast-query-major"] == "query-major"
    assert "ours-svg-nofast-query-major" not in names and names["splash-svg"] == "query-major"
    assert not any(n.endswith("-key-major") for v in [variants("8x32x34", 3024, 2048)] for n in (x.name for x in v))
    assert {(b[1], b[4]) for b in bodies(512) if b[0] == "ours"} >= {("full", "query-major"), ("full", "key-major"),
                                                                   ("mask_partial", "query-major")}
    assert (push_bound_factor("query-major", 128, 3072), push_bound_factor("key-major", 128, 3072)) == (2.0, 1.5)
    assert (push_bound_factor("query-major", 64, 512), push_bound_factor("key-major", 64, 512)) == (4.0, 2.5)
    assert push_bound_factor("key-major", 128, 128) == 2.0  # a 128-wide q block half-fills PV too


# -- the tile table file: its schema, read without the package ------------------------------------

NUMBER = (int, float)
PROBE_KEYS = {"device": str, "mxus_per_core": int, "mxu_columns": int, "flops_per_cycle": int,
              "published_peak_tflops_per_chip": NUMBER, "cores_per_chip": int, "clock_ghz": NUMBER, "sources": list,
              "provenance": str}
TILE_KEYS = {"device": str, "kernel": str, "resolution": str, "L": int, "block_q": int, "block_kv": int,
             "head_dim": int, "dtype": str, "roofline_tile": NUMBER, "hbm_bytes_per_step": int, "provenance": str}
CYCLE_KEYS = ("full", "padding_partial", "mask_partial", "masked", "empty_step", "step_overhead", "init_finish")
FIXED_KEYS = {"device": str, "kernel": str, "L": int, "block_q": int, "block_kv": int, "block_kv_compute": int,
              "full": int, "padding_partial": int, "running_full": int, "step_overhead": int, "init_finish": int,
              "pass_cycles": int, "roofline_tile": NUMBER, "units": dict, "provenance": str}


def check_tile_table(table: dict) -> None:
    """The schema of figures/compiled_tiles.json (the cost model engineer's contract), checked with
    nothing but the JSON."""
    assert {"jax", "libtpu", "command", "probe", "tiles"} <= set(table)
    assert table["command"].startswith("svgtpu ")
    for probe in table["probe"]:
        for key, kind in PROBE_KEYS.items():
            assert isinstance(probe[key], kind), (key, probe.get(key))
        assert probe["device"] in ("v6e", "v7x") and probe["provenance"] == f"compiled-{probe['device']}"
        assert probe["mxu_columns"] == 256 and probe["sources"]
    kinds = set()
    for tile in table["tiles"]:
        for key, kind in TILE_KEYS.items():
            assert isinstance(tile[key], kind), (key, tile.get(key))
        assert tile["kernel"] in ("ours", "splash", "tokamax") and tile["provenance"] == f"compiled-{tile['device']}"
        for key in CYCLE_KEYS:
            assert tile[key] is None or (isinstance(tile[key], int) and tile[key] >= 0), (key, tile[key])
        if any(tile[key] is None for key in ("full", "padding_partial", "mask_partial")):
            assert tile.get("refused") or tile["kernel"] == "splash", tile
        assert (tile["masked"] is None) == (tile["kernel"] != "ours" or bool(tile.get("refused"))), tile
        kinds.add((tile["device"], tile["kernel"]))
    assert {(d, k) for d, _ in kinds for k in ("ours", "splash", "tokamax")} == kinds
    # our fixed-maximum rows (svgtpu.compiler.tile_table.fixed_rows): the fixed bodies beside the running-maximum
    # ones of the same program; the fixed full body drops work, so it is the shorter one
    assert table["fixed_max"]
    for row in table["fixed_max"]:
        for key, kind in FIXED_KEYS.items():
            assert isinstance(row[key], kind), (key, row.get(key))
        assert row["kernel"] == "ours" and row["provenance"] == f"compiled-{row['device']}"
        assert row["full"] < row["running_full"] and row["padding_partial"] < row["running_padding_partial"]
        assert row["units"]["full"]["bundles"] == row["full"] and row["units"]["full"]["pushes"] > 0


@pytest.mark.system
@pytest.mark.slow
def test_tile_table_file_matches_its_schema(tmp_path):
    from svgtpu.compiler.tile_table import bench_compiled, tile_table_file
    from svgtpu.compiler.probe import probe
    result = bench_compiled("8x32x34", [(512, 512)])
    # the small tile stands in for the production one here
    from svgtpu.compiler import tile_table as compiled
    entries = result["tiles"][0]["tile_table"]
    table = {**tile_table_file([], [probe("v6e")]), "tiles": entries}
    path = tmp_path / compiled.TILE_TABLE_FILE
    path.write_text(json.dumps(table))
    check_tile_table(json.loads(path.read_text()))
    ours = next(t for t in entries if t["kernel"] == "ours")
    assert ours["full"] < ours["mask_partial"] and ours["empty_step"] is None


def test_committed_tile_table_matches_its_schema():
    from svgtpu.facts.results import figures_dir
    path = figures_dir() / "compiled_tiles.json"
    if not path.exists():
        pytest.skip("figures/compiled_tiles.json not written yet (notebook 04 writes it)")
    check_tile_table(json.loads(path.read_text()))
