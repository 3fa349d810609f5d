"""Recipes from sources: SVG's first_times_fp comment rederived from Wan's schedule, counts by hand."""

import pytest

from svgtpu import recipes, setting, warmup
from svgtpu.recipes import DEFAULT_RECIPE, RECIPES, SVG1_TIMES_FP_COMMENT, FlowSchedule, get_recipe


def test_schedule_endpoints_by_hand():
    # s_0 = 0.999: sigma = 5 * 0.999 / (1 + 4 * 0.999) = 0.99980..., timestep 999; s = 0.999 / 2 at i = N/2
    ts = FlowSchedule(50, 5.0).timesteps()
    assert len(ts) == 50 and ts[0] == 999 and all(a > b for a, b in zip(ts, ts[1:]))
    half = 0.999 / 2
    assert ts[25] == int(1000 * 5 * half / (1 + 4 * half))          # 833
    assert FlowSchedule(4, 1.0).timesteps() == (999, 749, 499, 249)  # no shift: a plain linspace


def test_svg1_comment_is_the_shifted_schedule():
    """SVG1's scripts: "35% -> 0.09, 30% -> 0.075, 25% -> 0.055, 20% -> 0.045, 15% -> 0.03, 10% -> 0.02".

    Under SVG1's rule (dense while timestep > 1000 (1 - fp)), 50 steps with Wan's 720p shift 5
    give those shares to the nearest 5 %; an unshifted schedule does not.
    """
    for share, fp in SVG1_TIMES_FP_COMMENT.items():
        dense = FlowSchedule(50, 5.0).dense_steps_above(fp)
        assert round(dense / 50 / 0.05) * 0.05 == pytest.approx(share), (share, fp, dense)
    unshifted = [FlowSchedule(50, 1.0).dense_steps_above(fp) / 50 for fp in SVG1_TIMES_FP_COMMENT.values()]
    assert max(unshifted) <= 0.1   # without the shift 0.09 would mean 5 steps, not 35 %


def test_dense_steps_brute_force_threshold():
    ts = FlowSchedule(40, 5.0).timesteps()
    assert FlowSchedule(40, 5.0).dense_steps_above(0.09) == sum(t > 910 for t in ts) == 14


def test_recipes_counts():
    t2v = RECIPES["svg1-t2v-14b-720p"]
    assert (t2v.kept, t2v.dense_steps, t2v.dense_layers, t2v.num_sampled_rows) == (0.25, 15, 1, 64)
    assert t2v.dense_step_share == 0.3 and t2v.dense_layer_share == 1 / 40
    for recipe in (r for r in RECIPES.values() if r.known):   # the shares give back the script's counts
        assert warmup.warmup_count(recipe.dense_step_share, recipe.steps) == recipe.dense_steps
        assert warmup.warmup_count(recipe.dense_layer_share, recipe.layers) == recipe.dense_layers
    assert RECIPES["svg1-i2v-14b-720p"].dense_steps == 14            # 35 % of 40
    head = RECIPES["svg-head-t2v-14b-720p"]                           # floor(0.2 * 50), floor(0.03 * 40)
    assert (head.kept, head.dense_steps, head.dense_layers) == (0.3, 10, 1)
    assert RECIPES["svg-head-i2v-14b-480p"].dense_steps == 8          # floor(0.2 * 40)


def test_every_known_recipe_cites_a_commit_and_the_write_up_is_unknown():
    for recipe in RECIPES.values():
        if recipe.known:
            assert recipe.sources and all(len(s.commit) == 40 for s in recipe.sources)
    unknown = RECIPES["write-up"]
    assert not unknown.known and unknown.dense_steps is None and "unknown" in unknown.note
    for tile in recipes.TILES.values():
        assert tile.source.commit and tile.source.path


def test_schedule_defaults_are_the_default_recipe_script_by_hand():
    """The defaults against SVG's own script, read by hand: svg-project/Sparse-VideoGen
    scripts/wan/wan_t2v_720p_svg.sh @5ce7b012 (infer_step=50, first_times_fp=0.2, first_layers_fp=0.03,
    sparsity=0.3, --num_sampled_rows 64) and wan_t2v_inference.py there (floor(first_times_fp * steps),
    floor(first_layers_fp * layers)) on Wan 2.1 14B's 40 layers; MaxDiffusion's base_wan_14b.yml @7cfb8801
    ("# Use on v6e": block_q 3024, block_kv 2048)."""
    assert DEFAULT_RECIPE.name == "svg-head-t2v-14b-720p"
    assert (setting.DEFAULT_KEPT, warmup.DEFAULT_PROFILE_ROWS) == (0.3, 64)
    assert (warmup.DEFAULT_WARMUP_STEP_FRACTION, warmup.DEFAULT_WARMUP_LAYER_FRACTION) == (0.2, 0.03)
    # floor(0.2 * 50) = 10, floor(0.2 * 40) = 8, floor(0.2 * 4) = 0 steps; floor(0.03 * 40) = floor(1.2) = 1,
    # floor(0.03 * 30) = 0, floor(0.03 * 100) = 3 layers
    assert [warmup.warmup_count(warmup.DEFAULT_WARMUP_STEP_FRACTION, n) for n in (50, 40, 4)] == [10, 8, 0]
    assert [warmup.warmup_count(warmup.DEFAULT_WARMUP_LAYER_FRACTION, n) for n in (40, 30, 100)] == [1, 0, 3]
    assert warmup.warmup_count(0.29, 100) == 29         # 0.29 * 100 is 28.999999999999996 in floating point
    # our production tile: MaxDiffusion's with block_q rounded up to a lane multiple (key-major body)
    assert (recipes.MAXDIFFUSION_V6E_TILE.block_q, recipes.MAXDIFFUSION_V6E_TILE.block_kv) == (3024, 2048)
    assert (setting.PRODUCTION.block_q, setting.PRODUCTION.block_kv, setting.PRODUCTION.block_kv_compute) == (3072, 2048, 256)


def test_bad_recipe_name():
    with pytest.raises(ValueError, match="recipe must be one of"):
        get_recipe("svg3")


def test_cli_recipes_json(capsys):
    import json

    from svgtpu.cli import main
    assert main(["recipes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["default"] == DEFAULT_RECIPE.name and {r["name"] for r in out["recipes"]} == set(RECIPES)
    assert {t["block_q"] for t in out["tiles"]} >= {3024, 512, 128}
    assert main(["recipes", "--name", "nope"]) == 2
    assert "recipe must be one of" in capsys.readouterr().err
