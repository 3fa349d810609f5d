"""Matching each method's knob to a kept fraction, and the `methods` command's input checks."""

import pytest

from svgtpu.cli import main
from svgtpu.geometry import VideoGeometry
from svgtpu.mask_families import RadialMask, STAMask
from svgtpu.sparse_methods import method_table, radial_for_density, sta_for_density
from svgtpu.svg2 import SVG2Config

TOY = VideoGeometry(8, 10, 14)


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
    rows = method_table(TOY, 0.3, qk=None, block_q=128, block_kv=128, sta_tile=(2, 8, 8), svg2=SVG2Config(),
                        progress=False)
    assert [r["method"] for r in rows] == ["svg", "svg-aligned", "sta", "sta-aligned", "radial", "radial-aligned"]
    for row in rows:
        assert 0 < row["kept_fraction"] < 1 and 0 <= row["partial_share"] <= 1


@pytest.mark.parametrize("argv,parameter", [(["methods", "--sta-tile", "2x8"], "--sta-tile"),
                                            (["methods", "--sta-tile", "0x8x8"], "tile"),
                                            (["methods", "--kept", "1.5"], "kept fraction"),
                                            (["quality", "--methods", "svg", "flash"], "methods"),
                                            (["quality", "--methods", "sta", "--sparsity", "1.5"], "kept fraction")])
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

    from svgtpu.mask_families import sta_order
    from svgtpu.sparse_methods import mask_backend

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
    backend = mask_backend(mask, order=order)
    step = jax.jit(lambda q, k, v, s: backend(q, k, v, layer=1, step=s, num_steps=5, num_layers=2))
    assert relative_error(step(q, k, v, jnp.int32(4)), masked_attention(q, k, v, allowed)) < 2e-5
    assert relative_error(step(q, k, v, jnp.int32(0)), masked_attention(q, k, v)) < 2e-5  # warm-up: dense


@pytest.mark.parametrize("method", ["svg", "sta", "radial"])
def test_snapped_variants_are_matched_after_snapping(method):
    from svgtpu.masks import align
    from svgtpu.sparse_methods import Tiles, matched

    target, bq, bk = 0.3, 128, 256
    (plain,), _ = matched(method, TOY, target, Tiles(bq, bk, False))
    (snapped,), _ = matched(method, TOY, target, Tiles(bq, bk, True))
    naive = align(plain, bq, bk, "snap")  # snapping the unsnapped match instead
    assert abs(snapped.density() - target) <= abs(naive.density() - target) + 1e-12
    assert snapped.density() == align(snapped, bq, bk, "snap").density()  # it is whole tiles


def test_svg2_assumed_masks_are_seeded_and_near_the_kept_fraction():
    from svgtpu.sparse_methods import svg2_assumed_masks

    config = SVG2Config(q_clusters=16, k_clusters=32)
    masks = svg2_assumed_masks(TOY, 0.3, config, count=3, seed=1)
    assert masks == svg2_assumed_masks(TOY, 0.3, config, count=3, seed=1) and masks[0] != masks[1]
    for m in masks:  # each query cluster keeps key clusters until they hold 0.3 L keys: slightly more
        assert 0.3 <= m.density() < 0.3 + 3 / 32
    rows = method_table(TOY, 0.3, qk=None, block_q=128, block_kv=128, sta_tile=(2, 8, 8), svg2=config,
                        svg2_assumed=True, progress=False)
    assert [r["method"] for r in rows][2:4] == ["svg2", "svg2-aligned"] and "assumed" in rows[2]["clusters"]
