"""Matching each method's knob to a kept fraction, the quality sweep and the production cost table, and the
`methods` / `quality` commands' input checks."""

import numpy as np
import pytest

from svgtpu.cli import main
from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.masks.families import RadialMask, STAMask
from svgtpu.bench.methods import Tiles, method_table, radial_for_density, sta_for_density
from svgtpu.attention.svg2 import SVG2Config
from svgtpu.setting import PRODUCTION, Setting

TOY = VideoGeometry(8, 10, 14)
TILE = dict(block_q=128, block_kv=128)  # the toy's tile (svgtpu.setting.SMALL_TILE): an SVG config takes it as given


@pytest.mark.parametrize("target", [0.1, 0.3, 0.6])
def test_radial_for_density_is_the_closest_window_fraction(target):
    mask = radial_for_density(TOY, target)
    assert abs(mask.density() - target) < 0.02
    for fraction in (mask.window_fraction * 0.9, min(1.0, mask.window_fraction * 1.1)):  # neighbours are no closer
        assert abs(RadialMask(TOY, 0, fraction).density() - target) >= abs(mask.density() - target) - 1e-9


def test_sta_for_density_searches_every_window():
    mask = sta_for_density(TOY, 0.3, (2, 5, 7))  # 4 x 2 x 2 tiles
    best = min((abs(STAMask(TOY, (2, 5, 7), (a, b, c)).density() - 0.3), (a, b, c))
               for a in range(1, 5) for b in (1, 2) for c in (1, 2))
    assert mask.window == best[1]


def test_method_table_without_activations_has_aligned_rows():
    rows = method_table(TOY, 0.3, qk=None, tiles=Tiles(128, 128), sta_tile=(2, 8, 8), svg2=SVG2Config(**TILE),
                        progress=False)
    assert [r["method"] for r in rows] == ["svg", "svg-aligned", "sta", "sta-aligned", "radial", "radial-aligned"]
    for row in rows:
        assert 0 < row["kept_fraction"] < 1 and 0 <= row["partial_share"] <= 1


@pytest.mark.parametrize("argv,parameter", [(["methods", "--sta-tile", "2x8"], "--sta-tile"),
                                            (["methods", "--sta-tile", "0x8x8"], "tile"),
                                            (["methods", "--kept", "1.5"], "kept fraction"),
                                            (["quality", "--methods", "svg", "flash"], "methods"),
                                            (["quality", "--methods", "sta", "--kept", "1.5"], "kept fraction"),
                                            (["quality", "--methods", "sta", "--kept-fractions", "0.3", "1.5"],
                                             "kept fraction"),
                                            (["quality", "--methods", "sta", "--kept-fractions", "0"], "kept fraction"),
                                            (["quality", "--methods", "sta", "--kept-fractions", "0.3", "0.3"],
                                             "kept fractions"),
                                            (["quality", "--kept-fractions", "0.3", "0.5"], "--kept-fractions")])
def test_methods_bad_input_exits_2_naming_the_parameter(argv, parameter, capsys):
    assert main(argv) == 2  # checked before any model work
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and parameter in err[0]


@pytest.mark.parametrize("method", ["sta", "radial"])
def test_mask_backend_in_jit_equals_float64_reference_in_model_order(method):
    import jax
    import jax.numpy as jnp
    import numpy as np
    from float64_reference import masked_attention, relative_error

    from svgtpu.masks.families import sta_order
    from svgtpu.attention.backends import mask_backend

    seed = 13
    print("seed", seed, method)
    g = VideoGeometry(3, 6, 9)  # L = 162: two 128-token tiles, the second padded
    if method == "sta":
        mask, order = STAMask(g, (1, 3, 3), (1, 1, 3)), sta_order(g, (1, 3, 3))
        inverse = np.argsort(order)
        allowed = mask.to_array()[inverse][:, inverse]  # model order: token i sits at tiled position inverse[i]
    else:
        mask, order = RadialMask(g, 0, 0.5), None
        allowed = mask.to_array()
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.normal(size=(1, 2, g.L, 64)), jnp.float32) for _ in range(3))
    backend = mask_backend(mask, order=order, tile=Tile(128, 128))
    step = jax.jit(lambda q, k, v, s: backend(q, k, v, layer=1, step=s, num_steps=5, num_layers=2))
    assert relative_error(step(q, k, v, jnp.int32(4)), masked_attention(q, k, v, allowed)) < 2e-5
    assert relative_error(step(q, k, v, jnp.int32(0)), masked_attention(q, k, v)) < 2e-5  # warm-up: dense


@pytest.mark.parametrize("method", ["svg", "sta", "radial"])
def test_snapped_variants_are_matched_after_snapping(method):
    from svgtpu.masks.core import align
    from svgtpu.bench.methods import Tiles, matched

    target, bq, bk = 0.3, 128, 256
    (plain,), _ = matched(method, TOY, target, Tiles(bq, bk, False))
    (snapped,), _ = matched(method, TOY, target, Tiles(bq, bk, True))
    naive = align(plain, Tile(bq, bk), "snap")  # snapping the unsnapped match instead
    assert abs(snapped.density() - target) <= abs(naive.density() - target) + 1e-12
    assert snapped.density() == align(snapped, Tile(bq, bk), "snap").density()  # it is whole tiles


def test_svg2_assumed_masks_are_seeded_and_near_the_kept_fraction():
    from svgtpu.bench.methods import svg2_assumed_masks

    config = SVG2Config(q_clusters=16, k_clusters=32, **TILE)
    masks = svg2_assumed_masks(TOY, 0.3, config, count=3, seed=1)
    assert masks == svg2_assumed_masks(TOY, 0.3, config, count=3, seed=1) and masks[0] != masks[1]
    for m in masks:  # each query cluster keeps key clusters until they hold 0.3 L keys: slightly more
        assert 0.3 <= m.density() < 0.3 + 3 / 32
    rows = method_table(TOY, 0.3, qk=None, tiles=Tiles(128, 128), sta_tile=(2, 8, 8), svg2=config,
                        svg2_assumed=True, progress=False)
    assert [r["method"] for r in rows][2:4] == ["svg2", "svg2-aligned"] and "assumed" in rows[2]["clusters"]


def _brute_tile_stats(allowed, block_q, block_kv):
    """Tile kinds counted from the boolean mask itself, zero-padded to whole tiles: (full, partial, empty,
    q rows with no computed tile)."""
    L = allowed.shape[0]
    padded = np.zeros((-(-L // block_q) * block_q, -(-L // block_kv) * block_kv), bool)
    padded[:L, :L] = allowed
    # a tile is full only if every one of its block_q x block_kv positions is a real, allowed pair
    counts = padded.reshape(padded.shape[0] // block_q, block_q, -1, block_kv).sum(axis=(1, 3))
    full, empty = counts == block_q * block_kv, counts == 0
    partial = ~full & ~empty
    return int(full.sum()), int(partial.sum()), int(empty.sum()), int(empty.all(axis=1).sum())


def test_method_costs_rows_match_brute_force_tile_counts():
    from svgtpu import costmodel as cm
    from svgtpu.geometry import ceil_div
    from svgtpu.masks.tiles import TileStats
    from svgtpu.bench.methods import Tiles, matched, method_costs

    g, bq, bk = VideoGeometry(3, 6, 10), 64, 128  # L = 180: neither tile divides it
    result = method_costs([0.3], Setting(resolution="3x6x10", block_q=bq, block_kv=bk),
                          variants=["radial", "sta-aligned"], sta_tile=(1, 2, 5), progress=False)
    rows = {r["method"]: r for r in result["rows"]}
    assert set(rows) == {"dense", "radial", "sta-aligned"}
    assert result["provenance"] == {"tiles": "computed", "attention_ratio": "modeled-v6e"}
    setup = cm.calibrated_setup("wan2.1-14b", g, "v6e", block_q=bq, block_kv=bk)

    def seconds(allowed):
        full, partial, empty, empty_rows = _brute_tile_stats(allowed, bq, bk)
        return full, partial, cm.attention_head_seconds(
            TileStats(full, partial, empty), setup.device, setup.efficiency, 128, Tile(bq, bk), fast_path=True,
            q_rows=ceil_div(g.L, bq), work=setup.kernel_work, empty_row_steps=empty_rows)

    dense_seconds = seconds(np.ones((g.L, g.L), bool))[2]
    for name in ("radial", "sta-aligned"):
        (mask,), _ = matched(name.removesuffix("-aligned"), g, 0.3, Tiles(bq, bk, name.endswith("-aligned")),
                             sta_tile=(1, 2, 5))
        allowed = mask.to_array()
        full, partial, head = seconds(allowed)
        row = rows[name]
        assert row["kept_fraction"] == pytest.approx(allowed.mean())
        assert row["partial_share"] == pytest.approx(partial / (full + partial))
        assert row["tile_density"] == pytest.approx((full + partial) / (ceil_div(g.L, bq) * ceil_div(g.L, bk)))
        assert row["attention_ratio"] == pytest.approx(head / dense_seconds)
    assert rows["sta-aligned"]["attention_ratio"] < rows["radial"]["attention_ratio"] <= 1  # fewer, full tiles


def test_method_costs_at_1440p_svg_ratio_grows_with_the_kept_fraction():
    from svgtpu.bench.methods import method_costs

    result = method_costs([0.45, 0.2, 0.3], PRODUCTION, variants=["svg", "svg-aligned"], progress=False)
    assert result["geometry"].startswith("1440p") and (result["block_q"], result["block_kv"]) == (3072, 2048)
    for name in ("svg", "svg-aligned"):
        mine = [r for r in result["rows"] if r["method"] == name]
        assert [r["kept_target"] for r in mine] == [0.2, 0.3, 0.45]
        ratios = [r["attention_ratio"] for r in mine]
        assert ratios == sorted(ratios) and 0 < ratios[0] and ratios[-1] < 1
        for r in mine:  # the cost follows the computed tiles, not the kept pairs
            assert r["attention_ratio"] >= 0.9 * r["tile_density"]
    unaligned, aligned = ([r for r in result["rows"] if r["method"] == n][1] for n in ("svg", "svg-aligned"))
    assert aligned["partial_share"] < unaligned["partial_share"]
    assert aligned["attention_ratio"] < unaligned["attention_ratio"]


def test_method_costs_states_the_svg2_cluster_assumption():
    from svgtpu.bench.methods import method_costs

    result = method_costs([0.3], Setting(resolution="8x10x14", block_q=128, block_kv=128),
                          variants=["svg2-aligned"], svg2=SVG2Config(q_clusters=8, k_clusters=16, **TILE), progress=False)
    assert "8 query and 16 key clusters" in result["svg2_assumption"]
    [row] = [r for r in result["rows"] if r["method"] == "svg2-aligned"]
    assert "assumed" in row["clusters"] and 0 < row["attention_ratio"] < 1


def test_pareto_front_by_hand():
    from svgtpu.bench.methods import pareto_front

    points = [{"v": "a", "t": 0.3, "q": 20.0}, {"v": "b", "t": 0.5, "q": 25.0}, {"v": "c", "t": 0.4, "q": 19.0},
              {"v": "d", "t": 0.3, "q": 18.0}, {"v": "e", "t": 0.6, "q": 25.0}]
    assert [p["v"] for p in pareto_front(points, "t", "q")] == ["a", "b"]  # c, d: a beats them; e: b does


@pytest.mark.system
@pytest.mark.slow
def test_method_sweep_on_a_tiny_model_matches_a_sample_by_hand():
    import dataclasses

    import jax

    from svgtpu.toy.dit import init_params
    from svgtpu.toy.quality import psnr, ssim
    from svgtpu.toy.sampler import sample
    from svgtpu.bench.methods import method_sweep, radial_for_density
    from svgtpu.attention.backends import mask_backend
    from svgtpu.toy.train import CONFIGS

    seed = 5
    print("seed", seed)
    config = dataclasses.replace(CONFIGS["tiny"], frames=2, height=12, width=16)  # 2x6x8 tokens: one tile
    params = init_params(config, jax.random.PRNGKey(seed))
    # the DiT's output layer starts at zero (every video would be the same): perturb every weight
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), len(leaves))
    params = jax.tree_util.tree_unflatten(tree, [x + 0.2 * jax.random.normal(k, x.shape, x.dtype)
                                                 for x, k in zip(leaves, keys)])
    result = method_sweep(params, config, variants=["radial"], kept_fractions=[0.5, 0.25], seeds=[1], num_steps=2,
                          tile=Tile(128, 128), progress=False)
    assert result["kept_targets"] == [0.25, 0.5] and len(result["per_seed"]) == 2
    summary = {r["kept_target"]: r for r in result["summary"]}
    for target, row in summary.items():
        assert abs(row["kept_fraction"] - target) < 0.05 and row["variant"] == "radial"
        assert np.isfinite(row["psnr_mean"]) and row["psnr_min"] == row["psnr_mean"]  # one seed
    # one row by hand: the same seed's dense and radial videos, compared independently
    mask = radial_for_density(config.geometry, 0.25)
    common = dict(seed=1, num_steps=2, guidance=3.0, shift=1.0, progress=False)
    labels = [1 % config.num_labels]
    dense = sample(params, config, labels, **common)
    sparse = sample(params, config, labels, attention=mask_backend(mask, tile=Tile(128, 128)), **common)
    assert summary[0.25]["psnr_mean"] == pytest.approx(psnr(dense, sparse), rel=1e-5)
    assert summary[0.25]["ssim_mean"] == pytest.approx(ssim(dense, sparse), rel=1e-5)
    assert summary[0.25]["kept_fraction"] == pytest.approx(mask.density())


def test_methods_costs_command_prints_json_with_the_ratio(capsys):
    import json

    argv = ["methods", "--costs", "--kept", "0.3", "--geometry", "8x10x14", "--block-q", "128", "--block-kv", "128",
            "--sta-tile", "2x5x7", "--q-clusters", "8", "--k-clusters", "16", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["geometry"] == "8x10x14" and result["sta_tile"] == "2x5x7"
    rows = {r["method"]: r for r in result["rows"]}
    assert len(rows) == 9 and rows["dense"]["attention_ratio"] == 1.0
    assert all(r["attention_ratio"] > 0 for r in rows.values()) and "8 query and 16 key" in result["svg2_assumption"]
