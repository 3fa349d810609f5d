"""The setting: its defaults pinned once, and the one rule of a mask's density."""

import pytest

from svgtpu.errors import BadInput
from svgtpu.recipes import DEFAULT_RECIPE, MAXDIFFUSION_V6E_TILE
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION, SMALL_TILE, Setting, mask_density

TILE = {"block_q": SMALL_TILE.block_q, "block_kv": SMALL_TILE.block_kv}


def test_the_production_setting_is_the_claims_main_line():
    """Wan 2.1 14B, 1440p, v6e-8; MaxDiffusion's v6e tile (3024 x 2048, base_wan_14b.yml @7cfb8801) with
    block_q rounded up to a lane multiple, 256 keys per update; SVG's current T2V-14B 720p recipe (kept 0.3)."""
    assert (PRODUCTION.model, PRODUCTION.resolution, PRODUCTION.device, PRODUCTION.chips) == ("wan2.1-14b", "1440p",
                                                                                             "v6e", 8)
    assert (PRODUCTION.block_q, PRODUCTION.block_kv, PRODUCTION.block_kv_compute) == (3072, 2048, 256)
    assert PRODUCTION.block_q % 128 == 0 and PRODUCTION.block_q - MAXDIFFUSION_V6E_TILE.block_q < 128
    assert (PRODUCTION.kept, PRODUCTION.multiplier, DEFAULT_KEPT) == (0.3, None, 0.3)
    assert (PRODUCTION.recipe, PRODUCTION.steps) == ("svg-head-t2v-14b-720p", 50) == (DEFAULT_RECIPE.name,
                                                                                      DEFAULT_RECIPE.steps)
    assert (PRODUCTION.slice, PRODUCTION.tiles, PRODUCTION.label()) == ("v6e-8", "3072x2048",
                                                                        "Wan 2.1 14B 1440p, v6e-8")


def test_the_small_tile_is_splash_default_and_the_layers_take_their_tile_as_given():
    """JAX's Splash BlockSizes.get_default() (128 each, jax-v0.10.2): the toy's tile.  An SVG or SVG2 layer's
    config has no tile of its own (its caller's: the setting's, or an edge's), as Splash's kernel takes its
    BlockSizes from the factory that applied the default."""
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.attention.svg2 import SVG2Config
    assert (SMALL_TILE.block_q, SMALL_TILE.block_kv) == (128, 128)
    for config in (SVGConfig, SVG2Config):
        with pytest.raises(TypeError, match="block_q"):
            config()
        with pytest.raises(TypeError, match="block_kv"):
            config(block_q=128)
        assert (config(**TILE).block_q, config(**TILE).block_kv) == (128, 128)
    # an SVG layer's config holds the density it runs, by the one rule
    assert (SVGConfig(**TILE).kept, SVGConfig(**TILE).multiplier) == (DEFAULT_KEPT, None)
    assert (SVGConfig(multiplier=0.2, **TILE).kept, SVGConfig(kept=0.1, **TILE).multiplier) == (None, None)


@pytest.mark.parametrize("kept, multiplier, want", [(None, None, (0.3, None)), (0.2, None, (0.2, None)),
                                                    (None, 1.5, (None, 1.5))])
def test_a_multiplier_wins_else_the_kept_fraction_else_the_default(kept, multiplier, want):
    assert mask_density(kept, multiplier) == want
    setting = Setting(kept=kept, multiplier=multiplier)
    assert (setting.kept, setting.multiplier) == want


def test_a_kept_fraction_and_a_multiplier_together_are_refused():
    with pytest.raises(BadInput, match="at most one of kept or multiplier"):
        mask_density(0.2, 1.5)
    with pytest.raises(BadInput, match="at most one of kept or multiplier"):
        Setting(kept=0.2, multiplier=1.5)


@pytest.mark.parametrize("multiplier", [0.0, -1.0, float("nan"), float("inf"), True, "2"])
def test_a_multiplier_is_a_positive_number_or_refused(multiplier):
    """0.0 is given (not taken for none) and refused, as is every non-positive or non-number value."""
    with pytest.raises(BadInput, match="multiplier must be a positive number"):
        mask_density(None, multiplier)


def _density_records():
    """Every record that holds a mask density, each built from ``(kept, multiplier)`` and read back."""
    from svgtpu import costmodel as cm
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.geometry import get_geometry
    from svgtpu.masks.core import multiplier_for_kept, svg_mask
    g = get_geometry("720p")

    def setup(kept, multiplier):
        s = cm.Setup.of(cm.get_model("wan2.1-14b"), g, cm.get_device("v6e"), kept=kept, multiplier=multiplier,
                     efficiency=cm.Efficiency())
        return s.kept, s.multiplier

    def mask(kept, multiplier):   # the band it draws, from the multiplier the rule leaves
        k, m = mask_density(kept, multiplier)
        return svg_mask(g, multiplier, kept=kept).window == svg_mask(g, m if m else multiplier_for_kept(g, k)).window
    return {"Setting": lambda k, m: (Setting(kept=k, multiplier=m).kept, Setting(kept=k, multiplier=m).multiplier),
            "SVGConfig": lambda k, m: (SVGConfig(kept=k, multiplier=m, **TILE).kept, SVGConfig(kept=k, multiplier=m, **TILE).multiplier),
            "Setup": setup,
            "svg_mask": mask}


@pytest.mark.parametrize("record", ["Setting", "SVGConfig", "Setup", "svg_mask"])
def test_every_record_of_a_mask_density_follows_the_one_rule(record):
    """The cost model's Setup, SVG's layer config and the masks take a density as the
    setting does: neither given is the default kept fraction, both given or a multiplier not above 0 is refused
    with the one message (they used to differ: "exactly one" in three of them)."""
    make = _density_records()[record]
    for kept, multiplier in ((None, None), (0.2, None), (None, 1.5)):
        got = make(kept, multiplier)
        assert got is True or got == mask_density(kept, multiplier), (record, kept, multiplier, got)
    with pytest.raises(BadInput, match="give at most one of kept or multiplier"):
        make(0.2, 1.5)
    with pytest.raises(BadInput, match="multiplier must be a positive number"):
        make(None, -1.0)


def test_the_cost_model_setup_holds_the_setting_it_was_given():
    """A Setting passed down (cm.setting_setup) is the Setup's own, field for field; the keywords path builds the same
    setup; a setting field given beside the setting is refused; the setting's names follow the resolved objects."""
    import dataclasses

    from svgtpu import costmodel as cm
    setting = Setting(resolution="720p", device="v5e", chips=4, block_q=1024, block_kv=512, multiplier=2.0, steps=30)
    setup = cm.setting_setup(setting, compiled=None)
    assert setup.setting == setting
    assert (setup.chips, setup.steps, setup.block_q, setup.block_kv, setup.kept, setup.multiplier) == \
        (4, 30, 1024, 512, None, 2.0)
    assert setup.geometry == cm.get_geometry("720p") and setup.device.name == "v5e"
    assert setup == cm.calibrated_setup("wan2.1-14b", "720p", "v5e", compiled=None, chips=4, block_q=1024,
                                        block_kv=512, multiplier=2.0, steps=30)
    with pytest.raises(BadInput, match="the setting holds chips"):
        cm.setting_setup(setting, chips=8)
    moved = dataclasses.replace(setup, geometry=cm.get_geometry("1440p"))
    assert moved.setting.resolution == "1440p" and moved.setting.chips == 4
    assert setup.replace(kept=0.3).setting == dataclasses.replace(setting, kept=0.3, multiplier=None)
