"""Compiling for a multi-host v6e slice (16 chips, 4 hosts) on this CPU, and counting its collectives.

The Ulysses SVG layer compiles with exactly the all-to-alls the cost model assumes (count and bytes,
worked by hand here); the HLO parser is checked on hand-written HLO lines.
"""

import json

import pytest

from svgtpu.compiler.compile import libtpu_available
from svgtpu.compiler.multihost import hlo_collectives, topology_name
from svgtpu.cli import main


def test_topology_names():
    assert topology_name("v6e", "4x4") == "v6e:4x4x1"
    assert topology_name("v6e", "v6e:4x8x1") == "v6e:4x8x1"
    for bad in ("v5e:4x4", "four", "4"):
        with pytest.raises(ValueError, match="topology must"):
            topology_name("v6e", bad)


def test_hlo_collectives_by_hand():
    hlo = """
  %a2a = bf16[1,8,48,128]{3,2,1,0} all-to-all(%copy.1), channel_id=1, replica_groups={{0,1}}, dimensions={1}
  %ag-start = (f32[4,16]{1,0}, f32[8,16]{1,0}) all-gather-start(%p), channel_id=2, dimensions={0}
  %ag-done = f32[8,16]{1,0} all-gather-done(%ag-start)
  %ar = f32[10]{0} all-reduce(%x), to_apply=%add
  %rs = (bf16[2,3]{1,0}, bf16[2,3]{1,0}) reduce-scatter(%y, %z), dimensions={0}
  %fusion.3 = f32[10]{0} fusion(%ar), kind=kLoop, calls=%all-to-all-like-name
"""
    found = hlo_collectives(hlo)
    assert found["all-to-all"] == {"count": 1, "bytes": 8 * 48 * 128 * 2}
    assert found["all-gather"] == {"count": 1, "bytes": 8 * 16 * 4}     # the result half of the start
    assert found["all-reduce"] == {"count": 1, "bytes": 40}
    assert found["reduce-scatter"] == {"count": 1, "bytes": 2 * 2 * 3 * 2}
    assert found["collective-permute"] == {"count": 0, "bytes": 0}


@pytest.mark.skipif(not libtpu_available(), reason="libtpu not installed: no TPU compiler")
def test_sharded_svg_layer_on_v6e_4x4_has_the_models_all_to_alls(capsys):
    status = main(["compile", "--topology", "4x4", "--geometry", "3x8x16", "--block-q", "128", "--block-kv", "128",
                   "--heads", "8", "--what", "sharded-svg-layer", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0 and result["chips"] == 16 and result["hosts"] == 4
    (layer,) = result["targets"]
    assert layer["mesh"] == {"data": 2, "heads": 1, "seq": 8}
    # Ulysses over 8 chips: Q, K, V to heads and O back, each a chip's [1, 8 heads, 384 / 8, 128] bf16
    per = 8 * (3 * 8 * 16 // 8) * 128 * 2
    assert layer["collectives"]["all-to-all"] == {"count": 4, "bytes": 4 * per}
    assert all(layer["collectives"][op]["count"] == 0 for op in ("all-gather", "reduce-scatter", "all-reduce"))
    assert layer["model"] == {"all-to-all": {"count": 4, "bytes": per}} and layer["matches_model"]
    assert layer["per_step"]["compiled_bytes_per_chip"] == 40 * 4 * per


@pytest.mark.skipif(not libtpu_available(), reason="libtpu not installed: no TPU compiler")
def test_heads_the_mesh_cannot_split_are_reported(capsys):
    status = main(["compile", "--topology", "4x4", "--geometry", "3x8x16", "--block-q", "128", "--block-kv", "128",
                   "--heads", "12", "--what",
                   "sharded-svg-layer", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert status == 1 and "heads = 12 must be divisible by the 8 chips" in result["targets"][0]["reason"]
