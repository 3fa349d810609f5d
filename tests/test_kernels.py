"""Attention kernels against a float64 numpy reference (interpret mode on CPU), plans, and input checks."""

import math
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.baselines.splash import splash_attention
from svgtpu.kernels import KernelConfig, block_sparse_attention, mask_array, reference_attention, tile_plan
from svgtpu.kernels.plan import FIRST, LAST
from svgtpu.masks.core import ArrayMask, BandSinkMask, DenseMask, PermutedMask, align, svg_mask
from svgtpu.masks.tiles import EMPTY, classify

TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


def numpy_attention(q, k, v, allowed, sm_scale=None):
    """float64 masked attention; rows with no allowed key -> 0."""
    q, k, v = (np.asarray(jnp.asarray(x, jnp.float32), np.float64) for x in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    s = np.where(allowed, (q @ k.transpose(0, 2, 1)) * scale, -np.inf)  # BLAS, not einsum: fast at L ~ 2k
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    denom = p.sum(-1, keepdims=True)
    return (p @ v) / np.where(denom == 0, 1, denom)


def relative_error(out, ref) -> float:
    """max |out - ref| / max |ref|."""
    return float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())


def random_qkv(seed, heads, L, d, dtype):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((heads, L, d)), dtype) for _ in range(3))


def tile_pattern_mask(L, block, seed) -> np.ndarray:
    """Random tiles on/off, holes punched into some kept tiles, and one q row block with no key."""
    rng = np.random.default_rng(seed)
    n = -(-L // block)
    tiles = rng.random((n, n)) < 0.5
    allowed = np.kron(tiles, np.ones((block, block), bool))[:L, :L]
    holed = np.kron(rng.random((n, n)) < 0.4, np.ones((block, block), bool))[:L, :L]
    allowed &= ~holed | (rng.random((L, L)) < 0.7)
    allowed[block:block + 40] = False  # rows with no allowed key at all
    return allowed


def per_head_masks(L, seed) -> np.ndarray:
    """Three different masks: a band, a random tile pattern, and one that is nearly all empty."""
    band = BandSinkMask(L, 0, 200).to_array()
    sparse = np.zeros((L, L), bool)
    sparse[L // 2:, :50] = True
    return np.stack([band, tile_pattern_mask(L, 128, seed), sparse])


GEOM_SPATIAL = VideoGeometry(4, 9, 10)    # F = 90, L = 360
GEOM_TEMPORAL = VideoGeometry(5, 8, 12)   # F = 96, L = 480

# (id, mask builder L -> mask, heads, L, d, dtype, block_q, block_kv, block_kv_compute); the tile-aligned SVG mask at
# 128 x 256 tiles with 128-key chunks and the dense mask's padded chunks are LAYOUT_CASES' (both layouts, same sizes)
CASES = [
    ("dense", lambda L: DenseMask(L), 1, 300, 64, "float32", 128, 256, None),
    ("svg-spatial", lambda L: svg_mask(GEOM_SPATIAL, 1.0), 2, 360, 128, "bfloat16", 128, 128, None),
    ("svg-spatial-f32", lambda L: svg_mask(GEOM_SPATIAL, 1.0), 3, 360, 64, "float32", 256, 128, None),
    ("aligned-other-blocks", lambda L: align(svg_mask(GEOM_SPATIAL, 1.0), Tile(256, 256)), 1, 360, 64, "bfloat16",
     128, 128, None),
    ("temporal-frame-major", lambda L: PermutedMask(svg_mask(GEOM_TEMPORAL, 1.0), GEOM_TEMPORAL), 2, 480, 64,
     "float32", 128, 128, None),
    ("tile-pattern", lambda L: tile_pattern_mask(L, 128, 7), 4, 590, 128, "float32", 128, 128, None),
    ("per-head", lambda L: per_head_masks(L, 3), 3, 400, 64, "float32", 128, 128, None),
    ("band-long", lambda L: BandSinkMask(L, 100, 300), 1, 700, 128, "bfloat16", 256, 256, 128),
    # band narrower than the q tile (the sink is or'ed in), keys padded
    ("band-narrow-sink", lambda L: BandSinkMask(L, 40, 50), 2, 330, 64, "float32", 256, 128, 128),
]


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "nofast"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_block_sparse_matches_float64_reference(case, fast_path):
    name, build, heads, L, d, dtype, bq, bkv, bkc = case
    mask = build(L)
    q, k, v = random_qkv(zlib.crc32(name.encode()), heads, L, d, dtype)
    out = block_sparse_attention(q, k, v, mask, block_q=bq, block_kv=bkv, block_kv_compute=bkc,
                                 fast_path=fast_path)
    assert out.shape == q.shape and out.dtype == q.dtype
    ref = numpy_attention(q, k, v, mask_array(mask, heads, L))
    assert relative_error(out, ref) <= TOLERANCE[dtype]


# -- the key-major layout: scores [block_kv_compute, block_q], statistics [8, block_q] -------------

# (id, mask builder L -> mask, heads, L, d, dtype, block_q, block_kv, block_kv_compute); block_q a
# multiple of 128 (both layouts take it); 384 runs a 256-query strip and a 128-query one (block_sparse.STRIP)
LAYOUT_CASES = [
    # the last kv tile holds 164 real keys: its first chunk is unmasked, the second masked (padding plan)
    ("layouts-dense-padded-chunks", lambda L: DenseMask(L), 2, 420, 128, "bfloat16", 128, 256, 128),
    ("layouts-svg-f32", lambda L: svg_mask(GEOM_SPATIAL, 1.0), 3, 360, 64, "float32", 384, 128, None),
    ("layouts-band-sink-bf16", lambda L: BandSinkMask(L, 40, 50), 2, 530, 128, "bfloat16", 384, 256, 128),
    ("layouts-aligned", lambda L: align(svg_mask(GEOM_SPATIAL, 1.0), Tile(128, 256)), 2, 360, 128, "float32", 128, 256, 128),
    ("layouts-per-head-blocks", lambda L: per_head_masks(L, 5), 3, 400, 64, "float32", 256, 128, None),
    ("layouts-many-chunks", lambda L: BandSinkMask(L, 300, 20), 1, 1100, 64, "bfloat16", 256, 1024, 128),
    # one band edge per tile: key-major adds band_table patterns (sink and L cut sub-blocks off their edges)
    ("layouts-band-table", lambda L: BandSinkMask(L, 300, 400), 2, 1100, 64, "float32", 256, 512, 256),
]


@pytest.mark.parametrize("layout", ["query-major", "key-major"])
@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "nofast"])
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_both_layouts_match_float64_reference(case, fast_path, layout):
    """Both layouts against float64 (natural exp) on the same seeded inputs: iota, padding and block
    masks, non-tile-multiple lengths, several heads, both dtypes, 8 unrolled chunks of 128 keys."""
    name, build, heads, L, d, dtype, bq, bkv, bkc = case
    seed = zlib.crc32(name.encode())
    print("seed", seed)
    mask = build(L)
    q, k, v = random_qkv(seed, heads, L, d, dtype)
    ref = numpy_attention(q, k, v, mask_array(mask, heads, L))
    out = block_sparse_attention(q, k, v, mask, config=KernelConfig(bq, bkv, bkc, fast_path, layout))
    assert out.shape == q.shape and out.dtype == q.dtype
    assert relative_error(out, ref) <= TOLERANCE[dtype]


def test_key_major_tile_update_is_the_transposed_update():
    """One tile by hand: two chunks through ``tile_update_key_major`` give float64 attention, and its
    state is the query-major state transposed (m, l one row per query instead of 128 lanes)."""
    from svgtpu.kernels.block_sparse import MASK_VALUE, tile_update, tile_update_key_major
    seed = 41
    print("seed", seed)
    rng = np.random.default_rng(seed)
    bq, bkv, d = 256, 128, 64
    q, k, v = (jnp.asarray(rng.standard_normal((n, d)), jnp.float32) for n in (bq, 2 * bkv, 2 * bkv))
    allowed = rng.random((bq, 2 * bkv)) < 0.6
    allowed[:3] = False  # queries with no key: m stays at the masked score
    scale = 1 / np.sqrt(d)
    km = (jnp.full((8, bq), -jnp.inf), jnp.zeros((8, bq)), jnp.zeros((d, bq)))
    qm = (jnp.full((bq, 128), -jnp.inf), jnp.zeros((bq, 128)), jnp.zeros((bq, d)))
    for c in range(2):
        keys = slice(c * bkv, (c + 1) * bkv)
        km = tile_update_key_major(q, k[keys], v[keys], *km, jnp.asarray(allowed[:, keys].T), scale)
        qm = tile_update(q, k[keys], v[keys], *qm, jnp.asarray(allowed[:, keys]), scale)
    m, l, acc = (np.asarray(x, np.float64) for x in km)
    assert (m == m[:1]).all() and (l == l[:1]).all()  # eight equal rows
    np.testing.assert_allclose(m[0], np.asarray(qm[0])[:, 0], rtol=1e-6)
    np.testing.assert_allclose(acc.T, np.asarray(qm[2]), rtol=1e-5, atol=1e-5)
    rows = m[0] > MASK_VALUE
    assert not rows[:3].any() and rows[3:].all()
    out = acc.T[rows] / l[0, rows, None]
    ref = numpy_attention(q[None], k[None], v[None], allowed[None])[0]
    assert np.abs(out - ref[rows]).max() / np.abs(ref).max() <= TOLERANCE["float32"]


# (L, sink, window, rows, cols): band wide enough for one edge per tile (rows + cols <= 2W + 3, at the
# bound and above it), one step too narrow (both edges, sink folded onto the middle row), narrower than
# the rows (sink or'ed per score), no sink; L not a multiple of cols (padded keys)
BAND_TILES = [(700, 90, 127, 128, 128), (700, 90, 300, 256, 128), (700, 90, 126, 128, 128),
              (700, 40, 50, 256, 128), (650, 0, 100, 128, 128)]


@pytest.mark.parametrize("case", BAND_TILES, ids=[f"L{c[0]}-s{c[1]}-w{c[2]}-{c[3]}x{c[4]}" for c in BAND_TILES])
def test_band_tile_is_the_mask_on_every_tile(case):
    """The band + sink test the kernel builds (``BandTile``: one compare per score when a tile can cross
    only one edge of the band) equals ``mask.allowed`` with padded keys disallowed, on every tile of the
    grid, in both orientations; ``one_edge`` is exact: a tile one key wider can cross both edges."""
    from svgtpu.kernels.block_sparse import BandTile, one_edge
    L, sink, window, rows, cols = case
    mask = BandSinkMask(L, sink, window)
    assert one_edge(mask, rows, cols) == (rows + cols <= 2 * window + 3)
    nq, nk = -(-L // rows), -(-L // cols)
    q_all, k_all = np.arange(nq * rows), np.arange(nk * cols)
    expected = (k_all[None, :] < sink) | (np.abs(q_all[:, None] - k_all[None, :]) <= window)
    expected &= k_all[None, :] < L
    crossed = set()
    for qt in range(nq):
        for kt in range(nk):
            q0, k0 = qt * rows, kt * cols
            band = BandTile(mask, jnp.int32(q0), rows, jnp.int32(k0), cols, L, pad=True)
            want = expected[q0:q0 + rows, k0:k0 + cols]
            q_ids, k_ids = q0 + np.arange(rows), k0 + np.arange(cols)
            key_major = band.allowed(band.keys(jnp.asarray(k_ids[:, None])), band.queries(jnp.asarray(q_ids[None, :])))
            query_major = band.allowed(band.keys(jnp.asarray(k_ids[None, :])), band.queries(jnp.asarray(q_ids[:, None])))
            np.testing.assert_array_equal(np.asarray(key_major), want.T)
            np.testing.assert_array_equal(np.asarray(query_major), want)
            d = k_ids[None, :] - q_ids[:, None]
            crossed.add(((d > window).any(), (d < -window).any()))
    # the one-edge bound is tight: tiles at 2W + 4 (one key more) can cross both edges
    assert ((True, True) in crossed) == (rows + cols >= 2 * window + 4)


# (L, sink, window, block_q, block_kv, block_kv_compute): g = 256 and 128 (block_kv_compute 128), sink and
# L on and off the 256 grid, a band just wide enough for one edge per tile and a wide one
BAND_TABLES = [(1300, 300, 400, 256, 512, 256), (1280, 512, 383, 256, 512, 256), (1100, 0, 260, 256, 256, 128),
               (1700, 129, 900, 768, 512, 256), (900, 40, 700, 384, 256, 128)]


@pytest.mark.parametrize("case", BAND_TABLES, ids=[f"L{c[0]}-s{c[1]}-w{c[2]}-{c[3]}x{c[4]}-{c[5]}" for c in BAND_TABLES])
def test_band_table_pattern_is_the_mask_on_every_sub_block(case):
    """Brute force: on every tile of the grid, every sub-block (``block_kv_compute`` keys x a strip of
    queries) gets the pattern whose bias is 0 exactly where ``mask.allowed`` holds and the key is < L."""
    from svgtpu.kernels.band_table import band_table
    from svgtpu.kernels.block_sparse import MASK_VALUE, STRIP, one_edge
    L, sink, window, bq, bkv, bkc = case
    mask = BandSinkMask(L, sink, window)
    assert one_edge(mask, bq, bkv)
    table = band_table(mask, L, bq, bkc, STRIP)
    assert table is not None and table.g == math.gcd(bq, bkc, min(STRIP, bq))
    patterns = np.asarray(table.build(MASK_VALUE))
    assert set(np.unique(patterns)) <= {0.0, np.float32(MASK_VALUE)}
    nq, nk = -(-L // bq), -(-L // bkv)
    q_all, k_all = np.arange(nq * bq), np.arange(nk * bkv)
    allowed = ((k_all[None, :] < sink) | (np.abs(q_all[:, None] - k_all[None, :]) <= window)) & (k_all[None, :] < L)
    width = min(STRIP, bq)
    for q0 in range(0, nq * bq, bq):
        for k0 in range(0, nk * bkv, bkv):
            upper = k0 + bkv - 1 - q0 > window
            for k in range(k0, k0 + bkv, bkc):
                for q in range(q0, q0 + bq, width):
                    i = int(table.index(jnp.bool_(upper), jnp.int32(k), jnp.int32(q)))
                    want = allowed[q:q + width, k:k + bkc].T  # key-major: [keys, queries]
                    np.testing.assert_array_equal(patterns[i][:, :want.shape[1]] == 0, want,
                                                  err_msg=f"tile ({q0}, {k0}) sub-block ({q}, {k}) pattern {i}")


def test_band_table_only_where_it_pays_and_fits():
    """The table is built for a band + sink mask whose tiles cross one edge, within TABLE_BYTES; other
    masks and wider chunks keep the per-score test."""
    from svgtpu.kernels.band_table import TABLE_BYTES, band_table
    from svgtpu.kernels.block_sparse import STRIP
    mask = BandSinkMask(302_400, 14_400, 40_000)  # 1440p-like: sink and L off the 256 grid
    table = band_table(mask, mask.L, 3072, 256, STRIP)
    assert (table.states, table.sinks, table.pads, table.nbytes) == (4, 2, 2, TABLE_BYTES)
    assert band_table(mask, mask.L, 3072, 512, STRIP) is None   # 512-key chunks: 20 MiB
    assert band_table(DenseMask(1000), 1000, 256, 256, STRIP) is None


def test_key_major_needs_lane_multiple_block_q():
    with pytest.raises(ValueError, match=r"block_q must be a positive multiple of 128 \(with layout='key-major'.*"
                                         r"Mosaic's block-shape rule"):
        KernelConfig(3024, 2048, layout="key-major")
    with pytest.raises(ValueError, match="layout must be one of query-major, key-major"):
        KernelConfig(3072, 2048, layout="row-major")
    # the default: key-major wherever block_q allows it
    assert KernelConfig(3024, 2048).layout == "query-major" and KernelConfig(3072, 2048).layout == "key-major"
    assert KernelConfig(136, 128).layout == "query-major" and KernelConfig(128, 128).layout == "key-major"


def test_temporal_heads_via_layout_transform():
    """Temporal heads: permute to spatial-major, run the band mask, permute back == strided mask."""
    g = GEOM_TEMPORAL
    band = svg_mask(g, 1.0)
    q, k, v = random_qkv(11, 2, g.L, 64, "float32")
    out = block_sparse_attention(g.to_spatial_major(q), g.to_spatial_major(k), g.to_spatial_major(v), band,
                                 block_q=128, block_kv=128)
    ref = numpy_attention(q, k, v, PermutedMask(band, g).to_array())
    assert relative_error(g.to_frame_major(out), ref) <= TOLERANCE["float32"]


def test_rows_without_keys_return_zeros_and_sm_scale():
    L = 260
    allowed = np.random.default_rng(0).random((L, L)) < 0.3
    allowed[5:140] = False  # covers all of q tile 0's tail and tile 1's head
    q, k, v = random_qkv(1, 2, L, 128, "float32")
    for fn in (block_sparse_attention, splash_attention):
        out = np.asarray(fn(q, k, v, allowed, block_q=128, block_kv=128, sm_scale=0.3))
        assert np.all(out[:, 5:140] == 0)
        assert np.all(np.abs(out[:, :5]).max(-1) > 0)
        assert relative_error(out, numpy_attention(q, k, v, allowed, 0.3)) <= TOLERANCE["float32"]


@pytest.mark.parametrize("mask_name", ["svg", "per-head"])
def test_equals_splash_and_jnp_reference(mask_name):
    L, heads = 500, 3
    mask = svg_mask(VideoGeometry(5, 10, 10), 1.5) if mask_name == "svg" else per_head_masks(L, 5)
    q, k, v = random_qkv(2, heads, L, 128, "float32")
    ours = block_sparse_attention(q, k, v, mask, block_q=128, block_kv=256)
    theirs = splash_attention(q, k, v, mask, block_q=128, block_kv=256)
    plain = reference_attention(q, k, v, mask)
    ref = numpy_attention(q, k, v, mask_array(mask, heads, L))
    assert relative_error(theirs, ref) <= TOLERANCE["float32"]
    assert relative_error(plain, ref) <= TOLERANCE["float32"]
    assert relative_error(ours, np.asarray(theirs, np.float64)) <= 2 * TOLERANCE["float32"]


def test_plan_walks_exactly_the_nonempty_tiles():
    L = 400
    masks = per_head_masks(L, 1)
    plan = tile_plan(tuple(ArrayMask(m) for m in masks), L, 128, 128)
    assert plan.mask_source == "blocks" and plan.plan_heads == 3
    for h, m in enumerate(masks):
        kinds = classify(ArrayMask(m), Tile(128, 128)).kinds
        steps = plan.real_steps[h]
        q_t, kv_t, kind, flags = (a[h, :steps] for a in (plan.q_tile, plan.kv_tile, plan.kind, plan.flags))
        visited = kind != EMPTY
        assert sorted(zip(q_t[visited], kv_t[visited])) == sorted(zip(*np.nonzero(kinds)))
        assert np.array_equal(kind[visited], kinds[q_t[visited], kv_t[visited]])
        assert np.all(np.diff(q_t) >= 0)  # rows in order: the output block changes with the q row
        assert np.array_equal(np.unique(q_t[(flags & FIRST) != 0]), np.arange(kinds.shape[0]))
        assert np.sum((flags & LAST) != 0) == kinds.shape[0]  # every row written exactly once
        empty_rows = ~kinds.any(axis=1)
        assert np.sum(~visited) == empty_rows.sum()
        padding = plan.kind[h, steps:], plan.flags[h, steps:]
        assert np.all(padding[0] == EMPTY) and np.all(padding[1] == 0)
    assert plan.wasted_steps == 3 * plan.num_steps - sum(plan.real_steps) > 0
    assert tile_plan(tuple(ArrayMask(m) for m in masks), L, 128, 128) is plan  # cached


def test_plan_mask_sources_and_fast_path_ablation():
    L = 360
    svg = svg_mask(GEOM_SPATIAL, 1.0)
    assert tile_plan(svg, L, 128, 128).mask_source == "iota"
    assert tile_plan(DenseMask(L), L, 128, 128).mask_source == "padding"
    assert tile_plan(align(svg, Tile(128, 128)), L, 128, 128).mask_source == "padding"
    on, off = tile_plan(svg, L, 128, 128, True), tile_plan(svg, L, 128, 128, False)
    stats = classify(svg, Tile(128, 128)).stats
    assert on.masked_steps == stats.partial and off.masked_steps == stats.partial + stats.full
    assert on.num_steps == off.num_steps == stats.partial + stats.full + on.empty_row_steps
    blocks_on = tile_plan(ArrayMask(svg.to_array()), L, 128, 128, True)
    assert blocks_on.mask_source == "blocks" and blocks_on.blocks.shape[0] <= stats.partial


def test_jit_compiles_once_per_mask_and_shape():
    L = 260
    q, k, v = random_qkv(4, 2, L, 64, "float32")
    from svgtpu.kernels.block_sparse import _block_sparse
    f = jax.jit(lambda q, k, v: block_sparse_attention(q, k, v, BandSinkMask(L, 30, 60), block_q=128, block_kv=128))
    first = f(q, k, v)
    before = _block_sparse._cache_size()
    second = f(k, v, q)  # new data, a new but equal mask object each trace
    block_sparse_attention(q, k, v, BandSinkMask(L, 30, 60), block_q=128, block_kv=128)
    block_sparse_attention(k, q, v, BandSinkMask(L, 30, 60), block_q=128, block_kv=128)
    assert f._cache_size() == 1
    assert _block_sparse._cache_size() == before + 1  # the eager calls share one compilation
    assert not np.allclose(first, second)


def test_tpu_interpreter_with_pipeline_semantics():
    """Pallas' TPU interpreter (block fetches and write-backs as on TPU, race detection) agrees too,
    with per-head plans that end in no-op padding steps."""
    from jax.experimental.pallas import tpu as pltpu
    L = 300
    masks = per_head_masks(L, 9)
    q, k, v = random_qkv(5, 3, L, 64, "float32")
    out = block_sparse_attention(q, k, v, masks, block_q=128, block_kv=128,
                                 interpret=pltpu.InterpretParams(detect_races=True))
    assert tile_plan(tuple(ArrayMask(m) for m in masks), L, 128, 128).wasted_steps > 0
    assert relative_error(out, numpy_attention(q, k, v, masks)) <= TOLERANCE["float32"]


@pytest.mark.parametrize("layout", ["query-major", "key-major"])
@pytest.mark.parametrize("fast_path", [True, False])
def test_lowers_for_tpu(fast_path, layout):
    """Pallas' Mosaic (TPU) lowering accepts the kernel for iota- and block-masked plans."""
    x = jax.ShapeDtypeStruct((2, 300, 128), jnp.bfloat16)
    config = KernelConfig(128, 256, 128, fast_path, layout)
    for mask in (BandSinkMask(300, 40, 60), np.random.default_rng(0).random((300, 300)) < 0.3):
        f = jax.jit(lambda q, k, v: block_sparse_attention(q, k, v, mask, config=config, interpret=False))
        text = jax.export.export(f, platforms=["tpu"])(x, x, x).mlir_module()
        assert "tpu_custom_call" in text


@pytest.mark.parametrize("change, message", [
    (dict(block_q=100), "block_q must be a positive multiple of 8"),
    (dict(block_kv=0), "block_kv must be a positive multiple of 128"),
    (dict(block_kv=200), "block_kv must be a positive multiple of 128"),
    (dict(block_kv_compute=384), "block_kv_compute must divide block_kv"),
    (dict(d=32), "head_dim must be one of"),
    (dict(dtype="float16"), "dtype must be one of"),
    (dict(k_len=100), "q, k, v must have the same shape"),
    (dict(mask=DenseMask(99)), "mask has L=99"),
    (dict(mask=np.ones((3, 3), bool)), "mask array must have shape"),
    (dict(mask=np.ones((200, 200), np.int32)), "mask array must have dtype bool"),
    (dict(mask="dense"), "mask must be an svgtpu mask object"),
    (dict(sm_scale="x"), "sm_scale must be None"),
    (dict(sm_scale=float("nan")), "sm_scale must be None"),
    (dict(sm_scale=-1.0), "sm_scale must be None"),
])
def test_bad_input_raises_clear_value_error(change, message):
    p = dict(block_q=128, block_kv=256, block_kv_compute=None, d=64, dtype="float32", k_len=200,
             mask=DenseMask(200), sm_scale=None) | change
    q = jnp.ones((2, 200, p["d"]), p["dtype"])
    k = jnp.ones((2, p["k_len"], p["d"]), p["dtype"])
    for fn in (block_sparse_attention, splash_attention):
        with pytest.raises(ValueError, match=message):
            fn(q, k, q, p["mask"], block_q=p["block_q"], block_kv=p["block_kv"],
               block_kv_compute=p["block_kv_compute"], sm_scale=p["sm_scale"])


def test_fast_path_and_config_must_be_what_they_say():
    q = jnp.ones((1, 200, 64), "float32")
    with pytest.raises(ValueError, match="fast_path must be True or False"):
        block_sparse_attention(q, q, q, DenseMask(200), block_q=128, block_kv=128, fast_path="no")
    with pytest.raises(ValueError, match="give either config or block_q"):
        block_sparse_attention(q, q, q, DenseMask(200), block_q=128, block_kv=128, config=KernelConfig(512, 512))
    with pytest.raises(ValueError, match="device must be one of v5e, v5p, v6e"):
        block_sparse_attention(q, q, q, DenseMask(200), config=KernelConfig(512, 512), device="v4")


def test_op_counts_show_no_masking_on_full_tiles_with_fast_path():
    from svgtpu.bench.kernel_timing import bench_ops
    rows = bench_ops("2x8x20", tile=KernelConfig(128, 128), head_dim=64)["rows"]
    by = {(r["mask"], r["fast_path"], r["tile"]): r for r in rows}
    for mask in ("svg", "temporal-frame-major"):
        fast_full, slow_full = by[(mask, True, "full")], by[(mask, False, "full")]
        assert fast_full["masking_ops"] == 0 and fast_full["mask_block_loads"] == 0
        assert slow_full["masking_ops"] > 0 and by[(mask, True, "partial")]["masking_ops"] > 0
        assert fast_full["vector_elements"] < slow_full["vector_elements"]
        assert fast_full["matmul_ops"] == slow_full["matmul_ops"] == 2
    assert by[("temporal-frame-major", True, "partial")]["mask_block_loads"] == 1


@pytest.mark.system
@pytest.mark.slow
def test_bench_kernels_command_reports_every_variant(capsys):
    import json

    from svgtpu.cli import main
    assert main(["bench", "kernels", "--geometry", "2x8x16", "--block-q", "128", "--block-kv", "128",
                 "--heads", "1", "--head-dim", "64", "--rounds", "1", "--repeats", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["provenance"] == "measured-cpu-interpret"
    names = [row["variant"] for row in result["variants"]]
    assert names[0] == "xla-dense" and {"ours-aligned-fast", "splash-svg", "ours-dense"} <= set(names)
    assert all(row["median_s"] > 0 and 0 < row["density"] <= 1 for row in result["variants"])
    assert main(["bench", "ops", "--block-q", "100"]) == 2


# -- tiles that are multiples of 8 but not 128, the production tile, SMEM chunks, VMEM budget -----

# (id, mask builder L -> mask, heads, L, d, dtype, block_q, block_kv, block_kv_compute)
ODD_TILES = [
    ("q24-band-f32", lambda L: BandSinkMask(L, 20, 70), 2, 300, 64, "float32", 24, 128, None),
    ("q136-array-f32", lambda L: np.random.default_rng(3).random((L, L)) < 0.3, 3, 300, 128, "float32", 136, 256,
     None),
    ("q40-per-head-bf16", lambda L: per_head_masks(L, 4), 3, 300, 64, "bfloat16", 40, 128, None),
    ("q3024-kv2048-bf16", lambda L: BandSinkMask(L, 64, 1000), 1, 2100, 64, "bfloat16", 3024, 2048, 1024),
]


@pytest.mark.parametrize("case", ODD_TILES, ids=[c[0] for c in ODD_TILES])
def test_sublane_multiple_tiles_match_float64(case):
    """q blocks are a sublane dimension: any multiple of 8 is legal, MaxDiffusion's 3024 included."""
    name, build, heads, L, d, dtype, bq, bkv, bkc = case
    seed = zlib.crc32(name.encode())
    print("seed", seed)
    mask = build(L)
    q, k, v = random_qkv(seed, heads, L, d, dtype)
    out = block_sparse_attention(q, k, v, mask, block_q=bq, block_kv=bkv, block_kv_compute=bkc)
    assert relative_error(out, numpy_attention(q, k, v, mask_array(mask, heads, L))) <= TOLERANCE[dtype]


def test_plan_chunks_pack_the_traversal_and_split_at_q_rows():
    L = 400
    masks = per_head_masks(L, 2)
    plan = tile_plan(tuple(ArrayMask(m) for m in masks), L, 8, 128)
    whole, = plan.chunks()
    assert whole.words.size == whole.block_index.size == 3 * plan.num_steps  # word + block index
    assert whole.smem_bytes == plan.smem_bytes == 2 * 512 * -(-3 * plan.num_steps // 128)  # 128-word tiles
    budget = 2 * 512  # one SMEM tile per array: at most 42 steps of 3 heads per chunk
    chunks = plan.chunks(budget)
    assert len(chunks) > 1 and all(c.smem_bytes <= budget for c in chunks)
    assert [c.row0 for c in chunks[1:]] == [c.row1 for c in chunks[:-1]] and chunks[-1].row1 == 50
    for h in range(3):  # unpack by hand: the real steps of every chunk, in order, are the plan's
        steps = []
        for c in chunks:
            words = c.words.reshape(3, c.steps)[h].astype(np.int64)
            for w in words:
                q_t, kv_t = (w >> (4 + plan.kv_bits)) + c.row0, (w >> 4) & ((1 << plan.kv_bits) - 1)
                kind, flags = (w >> 2) & 3, w & 3
                if kind != EMPTY or flags:
                    steps.append((q_t, kv_t, kind, flags))
        real = plan.real_steps[h]
        assert steps == list(zip(plan.q_tile[h, :real], plan.kv_tile[h, :real], plan.kind[h, :real],
                                 plan.flags[h, :real]))


def test_kernel_splits_a_plan_over_smem_budget(monkeypatch):
    """With a tiny SMEM budget the kernel runs one pallas_call per q-row chunk: same result."""
    from svgtpu.kernels import budget
    L = 700
    mask = BandSinkMask(L, 30, 300)
    monkeypatch.setattr(budget, "SMEM_RESERVE", budget.device_memory("v6e").smem - 512)  # 128 words
    plan = tile_plan(mask, L, 16, 128)
    assert plan.num_steps > 128 and len(plan.chunks(budget.device_memory("v6e").smem_budget)) >= 2
    q, k, v = random_qkv(8, 1, L, 64, "float32")
    out = block_sparse_attention(q, k, v, mask, block_q=16, block_kv=128, device="v6e")
    assert relative_error(out, numpy_attention(q, k, v, mask.to_array())) <= TOLERANCE["float32"]


def test_vmem_budget_refuses_with_a_tile_that_fits():
    from svgtpu.kernels.budget import check_vmem, device_memory
    v6e, v5p = device_memory("v6e"), device_memory("v5p")
    assert (v6e.smem, v6e.vmem, v5p.vmem) == (2**20, 128 * 2**20, 64 * 2**20)  # JAX's hardware table
    config = KernelConfig(3024, 2048)
    assert config.block_kv_compute == 256  # default keeps the f32 score block at <= 4 MiB
    assert check_vmem(config, 128, 2, False, v6e) == v6e.vmem_budget
    with pytest.raises(ValueError, match=r"needs .* MiB of VMEM, over the v5p budget of 48 MiB .*"
                                         r"block_kv_compute=\d+ fits"):
        check_vmem(KernelConfig(3024, 2048, 2048), 128, 4, True, v5p)


def test_bf16_scores_are_scaled_in_float32():
    """Held out: scaling bf16 q before the kernel rounds it (head_dim 128: 1/sqrt(d) is no power of
    two) and the error grows with the logits.  Large logits must stay within the bf16 bound."""
    seed = 12
    print("seed", seed)
    L, d = 256, 128
    q, k, v = random_qkv(seed, 2, L, d, "float32")
    q, k = (jnp.asarray(x * 10, "bfloat16") for x in (q, k))
    v = jnp.asarray(v, "bfloat16")
    mask = BandSinkMask(L, 16, 100)
    for layout in ("query-major", "key-major"):
        out = block_sparse_attention(q, k, v, mask, config=KernelConfig(128, 128, layout=layout))
        assert relative_error(out, numpy_attention(q, k, v, mask.to_array())) <= TOLERANCE["bfloat16"]


# (id, mask builder L -> mask, heads, L, d, dtype, block_q, block_kv, block_kv_compute, sm_scale, fast_path,
# scale_in_qk), key-major bf16, lengths off the tiles: each switch on and off once (test_both_layouts runs
# the default, on, over its key-major cases; float32 keeps the multiply whatever the switch)
SCALE_IN_QK_CASES = [
    ("scale-in-qk-band-multiply", lambda L: BandSinkMask(L, 150, 200), 2, 530, 128, 256, 256, 128, None, True, False),
    ("scale-in-qk-band-nofast", lambda L: BandSinkMask(L, 150, 200), 2, 530, 128, 256, 256, 128, None, False, True),
    ("scale-in-qk-dense-scale", lambda L: DenseMask(L), 3, 300, 64, 128, 256, 128, 0.3, True, True),
]


@pytest.mark.parametrize("case", SCALE_IN_QK_CASES, ids=[c[0] for c in SCALE_IN_QK_CASES])
def test_scale_in_qk_matches_float64(case):
    """KernelConfig.scale_in_qk on and off against float64 (natural exp) on seeded bf16 inputs."""
    name, build, heads, L, d, bq, bkv, bkc, sm_scale, fast_path, scale_in_qk = case
    seed = zlib.crc32(name.encode())
    print("seed", seed)
    mask = build(L)
    q, k, v = random_qkv(seed, heads, L, d, "bfloat16")
    config = KernelConfig(bq, bkv, bkc, fast_path, "key-major", scale_in_qk=scale_in_qk)
    out = block_sparse_attention(q, k, v, mask, config=config, sm_scale=sm_scale)
    assert out.shape == q.shape and out.dtype == q.dtype
    ref = numpy_attention(q, k, v, mask_array(mask, heads, L), sm_scale)
    assert relative_error(out, ref) <= TOLERANCE["bfloat16"]


def test_scale_in_qk_score_error_bound():
    """The bound docs/compiled_schedule.md states for the scale folded into QK: ``hi + lo`` is ``q * scale``
    within 2^-16 of it, so a base-2 score moves at most 2^-16 of sum |k_i q_i| * scale off the exact one, the
    float32 accumulation of 2 d products adding 2 d * 2^-24 of it.  Large-norm queries and keys and one
    dominant key; q rounded once to bf16 (the fold without ``lo``) breaks the bound."""
    from svgtpu.kernels.block_sparse import LOG2E, folded_scores, scaled_queries
    seed = 60
    print("seed", seed)
    rng = np.random.default_rng(seed)
    bq, bkv, d = 256, 128, 128
    q = jnp.asarray(rng.normal(0, 30, (bq, d)), jnp.bfloat16)
    k = np.asarray(rng.normal(0, 30, (bkv, d)))
    k[7] = 4 * np.asarray(q[3], np.float64)  # one dominant key for query 3
    k = jnp.asarray(k, jnp.bfloat16)
    scale = LOG2E / math.sqrt(d)
    q64, k64 = np.asarray(q, np.float64), np.asarray(k, np.float64)
    x = q64 * scale
    qs = np.asarray(scaled_queries(q, scale), np.float64)
    assert qs.shape == (2 * d, bq)
    assert np.all(np.abs(qs[:d] + qs[d:] - x.T) <= 2.0 ** -16 * np.abs(x.T))
    exact = k64 @ x.T
    bound = (2.0 ** -16 + 2 * d * 2.0 ** -24) * (np.abs(k64) @ np.abs(x).T)
    error = np.abs(np.asarray(folded_scores(scaled_queries(q, scale), k), np.float64) - exact)
    assert error.max() > 0 and np.all(error <= bound)
    rounded = np.asarray(jnp.asarray(x, jnp.bfloat16), np.float64)
    assert np.any(np.abs(k64 @ rounded.T - exact) > bound)


def test_scale_in_qk_is_what_it_says():
    assert KernelConfig(256, 256).scale_in_qk and not KernelConfig(120, 256).scale_in_qk
    assert not KernelConfig(256, 256, scale_in_qk=False).scale_in_qk
    with pytest.raises(ValueError, match="scale_in_qk=True needs layout='key-major'"):
        KernelConfig(256, 256, layout="query-major", scale_in_qk=True)
    with pytest.raises(ValueError, match="scale_in_qk must be True, False or None"):
        KernelConfig(256, 256, scale_in_qk="yes")


def test_splash_wrapper_switches_dtype_and_handles_an_empty_mask():
    """Held out: the cached Splash kernel was built inside jit (tracer leak on a second dtype) and
    an all-false mask died inside Splash."""
    L = 256
    mask = BandSinkMask(L, 0, L)  # causal
    for dtype in ("float32", "bfloat16"):
        q, k, v = random_qkv(6, 2, L, 64, dtype)
        out = splash_attention(q, k, v, mask, block_q=128, block_kv=128)
        assert relative_error(out, numpy_attention(q, k, v, mask.to_array())) <= TOLERANCE[dtype]
    out = splash_attention(q, k, v, np.zeros((L, L), bool), block_q=128, block_kv=128)
    assert out.dtype == q.dtype and not np.any(np.asarray(out, np.float32))
