"""The Mosaic GPU (Hopper) kernel on a CPU: its range walk against our tile classification, the walk in plain JAX
and the kernel in JAX's GPU interpreter against float64, its lowering for CUDA, and its refusals.

What does not run here: the compiled kernel (wgmma, TMA and mbarriers on an H100/H200, ptxas, register
reallocation, approximate exp2); the interpreter runs the kernel's producer and consumer warpgroups as threads, its
TMA copies, every mbarrier (K and V released apart, the consumers' ping-pong), walk, online softmax and stores, but
its two products as plain dots and the in-place rescale as a multiply (its wgmma takes neither a transposed operand
nor one in registers, and it runs no ``pl.run_state``)."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, get_geometry
from svgtpu.kernels.mosaic_gpu import MosaicConfig, interpret_params, masked_score, mosaic_gpu_attention
from svgtpu.kernels.reference import float64_attention, mask_array, relative_error
from svgtpu.kernels.row_ranges import TileBand, range_kinds, range_walk_attention, row_steps, tile_band, walk_band
from svgtpu.masks.core import BandSinkMask, DenseMask, TileMask, align, svg_mask
from svgtpu.masks.tiles import classify


def _random_masks(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        L, block = int(rng.integers(1, 1500)), int(rng.choice([64, 128]))
        sink, window = int(rng.integers(0, L + 50)), int(rng.integers(0, L + 10))
        yield BandSinkMask(L, sink, window), block
    yield DenseMask(1000), 128


def test_ranges_are_the_non_empty_tiles_of_our_classification():
    """Per q-tile row: at most two kv ranges whose tiles are exactly the non-empty ones of ``classify``, full where it
    says full (random band + sink masks, any L, sinks and windows past L, the dense mask)."""
    for mask, block in _random_masks(200):
        band = walk_band(mask, block, block)
        assert np.array_equal(range_kinds(band, block, block), classify(mask, Tile(block, block)).kinds), (mask, block)


@pytest.mark.parametrize("geometry", ["11x16x20", "720p"])
def test_ranges_of_the_svg_masks_and_their_tile_aligned_versions(geometry):
    mask = svg_mask(get_geometry(geometry), kept=0.3)
    aligned = align(mask, Tile(128, 128), "snap")
    assert isinstance(walk_band(aligned, 128, 128), TileBand)
    for m in (mask, aligned):
        assert np.array_equal(range_kinds(walk_band(m, 128, 128), 128, 128), classify(m, Tile(128, 128)).kinds)


def test_the_walk_visits_each_kept_tile_once_in_order():
    for mask, block in _random_masks(30, seed=1):
        band = walk_band(mask, block, block)
        kinds = classify(mask, Tile(block, block)).kinds
        for row in range(kinds.shape[0]):
            steps, tile_of, is_full = row_steps(band, row, block, block)
            tiles = [int(tile_of(t)) for t in range(int(steps))]
            assert tiles == list(np.flatnonzero(kinds[row])), (mask, row)
            assert [bool(is_full(j)) for j in tiles] == [kinds[row, j] == 2 for j in tiles]


def test_tile_band_is_found_or_refused():
    tiles = np.zeros((5, 5), bool)
    for i in range(5):
        tiles[i, max(i - 1, 0):i + 1] = True
    tiles[:, 0] = True
    assert tile_band(TileMask(600, 128, 128, tiles)) == TileBand(600, 1, -1, 0)
    tiles[4, 2] = True   # a hole in the band: no tile band
    assert tile_band(TileMask(600, 128, 128, tiles)) is None
    with pytest.raises(BadInput, match="walks band \\+ sink masks"):
        walk_band(TileMask(600, 128, 128, tiles), 128, 128)


def _inputs(heads, L, d, seed=0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal((heads, L, d)).astype(jnp.bfloat16)) for _ in range(3)]


def _ragged_band():
    """A tile band whose last rows keep no tile (their outputs must be zeros)."""
    tiles = np.zeros((3, 3), bool)
    for i in range(3):
        tiles[i, i + 1:i + 2] = True
    return TileMask(300, 128, 128, tiles)


CASES = [(BandSinkMask(300, 40, 60), True), (BandSinkMask(300, 40, 60), False), (DenseMask(300), True),
         (align(svg_mask(get_geometry("2x8x10"), kept=0.3), Tile(128, 128), "snap"), True), (_ragged_band(), True)]


@pytest.mark.parametrize("mask, fast_path", CASES)
def test_the_range_walk_in_plain_jax_matches_float64(mask, fast_path):
    q, k, v = _inputs(2, mask.L, 64)
    want = float64_attention(q, k, v, mask_array(mask, 2, mask.L))
    got = range_walk_attention(q, k, v, mask, fast_path=fast_path)
    assert relative_error(got, want) < 1e-2
    if isinstance(mask, TileMask) and not mask.tiles[-1].any():
        assert not np.asarray(got[:, 256:], np.float32).any()   # rows with no key: zeros


needs_interpreter = pytest.mark.skipif(interpret_params() is None, reason="this jax has no GPU interpreter "
                                       "(InterpretGPUParams) to run Mosaic GPU kernels on a CPU")


@needs_interpreter
@pytest.mark.parametrize("mask, fast_path, d, stages, consumers", [
    (BandSinkMask(200, 30, 50), True, 64, 2, 2),      # two consumers in ping-pong, L not a tile multiple
    # these two run in make test-system: 10-16 s each in the interpreter on 2 idle cores
    pytest.param(_ragged_band(), True, 128, 1, 2, marks=pytest.mark.system),   # rows without keys: no steps, balanced
    pytest.param(BandSinkMask(300, 40, 60), False, 64, 3, 1, marks=pytest.mark.system)])   # one consumer, no fast path
def test_the_kernel_in_jaxs_gpu_interpreter_matches_float64(mask, fast_path, d, stages, consumers):
    """The producer's TMA copies into the kv slots, the mbarrier waits (the interpreter checks every waiting thread
    saw every phase: K and V released apart, the consumers' turns), the walk, the folded-scale softmax and the
    store, run by JAX's GPU interpreter (its products as plain dots: see the module doc); seed 1."""
    q, k, v = _inputs(1, mask.L, d, seed=1)
    got = mosaic_gpu_attention(q, k, v, mask, fast_path=fast_path, stages=stages, consumers=consumers,
                               interpret=True)
    want = float64_attention(q, k, v, mask_array(mask, 1, mask.L))
    assert got.shape == q.shape and got.dtype == q.dtype
    assert relative_error(got, want) < 1e-2
    if isinstance(mask, TileMask):
        assert not np.asarray(got[:, 256:], np.float32).any()   # the rows without a kept tile: zeros


def test_the_masked_score_is_finite_and_marks_empty_rows():
    """Folding the scale into one multiply-add masks raw scores: the masked score, scaled, is finite for any scale
    (a huge ``sm_scale`` would overflow ``MASK_VALUE * c`` to ``-inf``), and far below any real score."""
    for scale in (1 / math.sqrt(128) * math.log2(math.e), 1.0, 3.0, 1e6):
        raw, floor = masked_score(scale)
        scaled = np.float32(raw) * np.float32(scale)
        assert np.isfinite(scaled) and scaled <= floor < -1e30, scale


@pytest.mark.parametrize("mask, fast_path, d, consumers", [
    (BandSinkMask(300, 40, 100), True, 128, 2), (DenseMask(300), False, 64, 1),
    (align(svg_mask(get_geometry("2x8x10"), kept=0.3), Tile(128, 128), "snap"), True, 128, 2)])   # a tile band
def test_lowers_to_mosaic_gpu_for_cuda(mask, fast_path, d, consumers):
    """Pallas' Mosaic GPU lowering (the producer and consumer warpgroups, register reallocation, wgmma into a
    ``run_state`` accumulator, TMA, barriers, the branch per tile, approximate math) runs here without a GPU; the
    Mosaic GPU compiler's own passes and ptxas run only on one."""
    x = jax.ShapeDtypeStruct((2, mask.L, d), jnp.bfloat16)
    f = jax.jit(functools.partial(mosaic_gpu_attention, mask=mask, fast_path=fast_path, consumers=consumers,
                                  interpret=False))
    assert "stablehlo.custom_call @mosaic_gpu" in jax.export.export(f, platforms=["cuda"])(x, x, x).mlir_module()


@pytest.mark.parametrize("change, message", [
    (dict(mask=np.ones((2, 300, 300), bool)), "one mask for all heads"),
    (dict(dtype=jnp.float32), "bfloat16 or float16"),
    (dict(block_q=96), "block_q must be a positive multiple of 64"),
    (dict(stages=5), "stages must be 1, 2, 3 or 4"),
    (dict(block_q=64, consumers=2), "consumers must be 1 or 2 with consumers x 64 dividing block_q=64"),
    (dict(stages=4), "needs 288 KiB of shared memory; a Hopper block has 227 KiB"),
    (dict(config=MosaicConfig(), stages=2), "pass either config or its fields"),
    (dict(mask=align(BandSinkMask(300, 40, 100), Tile(128, 128), "snap")), "walks band \\+ sink masks")])
def test_refusals_are_one_line(change, message):
    dtype = change.pop("dtype", jnp.bfloat16)
    x = jnp.zeros((2, 300, 128), dtype)
    args = dict(mask=BandSinkMask(300, 40, 60)) | change
    with pytest.raises(BadInput, match=message):
        mosaic_gpu_attention(x, x, x, **args)


@needs_interpreter
def test_the_api_runs_it_by_name_and_keeps_triton_the_default():
    from svgtpu.kernels.api import IMPLEMENTATIONS, block_sparse, default_implementation
    from svgtpu.kernels.config import KernelConfig
    assert "mosaic-gpu" in IMPLEMENTATIONS and default_implementation() != "mosaic-gpu"
    # L = 100: two 64-row q tiles, one 128-wide kv tile, neither a tile multiple (the interpreter's cost grows with the
    # tiles: 12 CPU-s at L = 200, 6 here); the walk over several kv tiles is the interpreter test's above
    mask = BandSinkMask(100, 30, 50)
    q, k, v = _inputs(1, 100, 64, seed=2)
    got = block_sparse(q, k, v, mask, config=KernelConfig(64, 128, fast_path=False), implementation="mosaic-gpu",
                       interpret=True)   # 64-row plan tiles: one warpgroup per program
    assert relative_error(got, float64_attention(q, k, v, mask_array(mask, 1, 100))) < 1e-2
    with pytest.raises(BadInput, match="device names a TPU generation"):
        block_sparse(q, k, v, mask, config=KernelConfig(128, 128), implementation="mosaic-gpu", device="v6e")
