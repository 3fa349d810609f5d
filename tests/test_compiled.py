"""The whole-kernel static v6e estimate (svgtpu.bench.compiled) on kernels whose answer is known.

Compiles run libtpu ahead of time on the CPU (about ten seconds each at these sizes) and are cached
in build/compiled-v6e/ by content; the tests skip only where libtpu is not installed."""

import pytest

from svgtpu.bench.compile import libtpu_available

pytestmark = pytest.mark.skipif(not libtpu_available(), reason="needs libtpu (the TPU compiler)")

SMALL = dict(block_q=512, block_kv=512, block_kv_compute=512)


def _estimate(kernel, mask, geometry, **kw):
    from svgtpu.bench.compiled import Variant, cached_compile, estimate
    v = Variant(kernel, mask, geometry, **{**SMALL, **kw})
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
    from svgtpu.bench.llo import compiled_tile_counts
    rows = compiled_tile_counts({"geometry": "8x32x34", "mask": "svg", "multiplier": 1.0, "head_dim": 128,
                                 "dtype": "bfloat16", "fast_path": True, **SMALL})
    llo = {r["tile"]: r["bundles"] for r in rows}
    e = _estimate("ours", "svg", "8x32x34")
    full, partial = e["schedules"][0]["bodies"]
    # llo counts from one region's fall-through mark to the next, so each of its bodies also holds the
    # next region's compare, branch and delay slots: the same few bundles after either body
    assert llo["full"] - full == llo["partial"] - partial
    assert 0 <= llo["full"] - full <= 8


def test_rejects_bad_tiles():
    from svgtpu.geometry import parse_tiles
    assert parse_tiles("3024x2048, 512x512") == [(3024, 2048), (512, 512)]
    with pytest.raises(ValueError, match="tiles must be"):
        parse_tiles("3024")


def test_library_masks_hand_over_our_masks_block_by_block():
    # the Splash / tokamax view of our masks (whole blocks short-cut, partial ones evaluated) equals
    # our mask, padded rows and keys disallowed
    import numpy as np
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as jax_masks
    from tokamax._src.ops.experimental.tpu.splash_attention import splash_attention_mask as tokamax_masks

    from svgtpu.bench.compiled import _library_mask
    from svgtpu.masks.core import BandSinkMask, align
    band = BandSinkMask(300, 40, 50)
    for mask in (band, align(band, 128, 128)):
        for lib in (jax_masks, tokamax_masks):
            view = _library_mask(lib, mask, (384, 384))
            for q0 in range(0, 384, 128):
                for k0 in range(0, 384, 128):
                    got = view[q0:q0 + 128, k0:k0 + 128]
                    want = mask.block(q0, q0 + 128, k0, k0 + 128)
                    assert np.array_equal(np.asarray(got, bool), want), (type(mask).__name__, lib.__name__, q0, k0)
