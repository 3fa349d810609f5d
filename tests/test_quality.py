"""PSNR / SSIM (dm-pix, float32) against hand-worked values and an independent float64 reference;
the dense-vs-SVG study."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.attention.svg import SVGInfo
from svgtpu.geometry import Tile
from svgtpu.toy.dit import load_checkpoint
from svgtpu.toy.quality import VARIANTS, head_kinds, psnr, quality_study, ssim

CHECKPOINT = os.path.join(os.path.dirname(__file__), "..", "checkpoints", "toy_dit.npz")


def test_psnr_known_values():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, 16, 16, 3))
    assert psnr(x, x + 0.1) == pytest.approx(10 * np.log10(4 / 0.01), rel=1e-5)  # 26.0206 dB
    assert psnr(x, x - 0.1, data_range=1.0) == pytest.approx(20.0, rel=1e-5)
    assert psnr(x, x) == float("inf")
    with pytest.raises(ValueError, match="same shape"):
        psnr(x, x[:2])


def _ssim_by_windows(x, y, data_range, size=11, sigma=1.5):
    """SSIM one window at a time, straight from Wang et al. (2004): an independent reference."""
    g = np.exp(-((np.arange(size) - (size - 1) / 2) ** 2) / (2 * sigma ** 2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    values = []
    for c in range(x.shape[-1]):
        for i in range(x.shape[0] - size + 1):
            for j in range(x.shape[1] - size + 1):
                a, b = x[i:i + size, j:j + size, c], y[i:i + size, j:j + size, c]
                ma, mb = (w * a).sum(), (w * b).sum()
                va, vb = (w * (a - ma) ** 2).sum(), (w * (b - mb) ** 2).sum()
                cov = (w * (a - ma) * (b - mb)).sum()
                values.append((2 * ma * mb + c1) * (2 * cov + c2) / ((ma ** 2 + mb ** 2 + c1) * (va + vb + c2)))
    return np.mean(values)


def test_ssim_matches_a_window_by_window_reference():
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (13, 17, 2))
    y = np.clip(x + 0.3 * rng.standard_normal(x.shape), -1, 1)
    expected = _ssim_by_windows(x, y, 2.0)
    assert 0.1 < expected < 0.95
    assert ssim(x, y) == pytest.approx(expected, rel=1e-5)


def test_ssim_known_values():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (2, 12, 12, 3))
    assert ssim(x, x) == pytest.approx(1.0)
    # constant images: only the luminance term is left, (2ab + C1) / (a^2 + b^2 + C1)
    a, b, c1 = 0.5, -0.25, (0.01 * 2.0) ** 2
    assert ssim(np.full((12, 12, 1), a), np.full((12, 12, 1), b)) == pytest.approx(
        (2 * a * b + c1) / (a * a + b * b + c1), rel=1e-5)
    noise = rng.standard_normal(x.shape)
    assert 1.0 > ssim(x, x + 0.05 * noise) > ssim(x, x + 0.3 * noise) > ssim(x, x + 1.0 * noise)
    with pytest.raises(ValueError, match="window"):
        ssim(x[:, :5], x[:, :5])


def test_head_kinds_counts_fractions_per_layer():
    def info(kinds, mse):
        return SVGInfo(jnp.array(False), jnp.array(kinds, jnp.int32), jnp.array(mse, jnp.float32))
    steps = [[info([-1, -1], [[np.nan, np.nan]] * 2), info([0, 1], [[1.0, 3.0], [2.0, 1.0]])],
             [info([-1, -1], [[np.nan, np.nan]] * 2), info([1, 1], [[4.0, 1.0], [1.0, 1.0]])]]
    layers = head_kinds(steps)["layers"]
    assert layers[0]["warmup"] == 1.0 and np.isnan(layers[0]["spatial"]) and layers[0]["temporal_by_head"] == []
    assert layers[1] == {"layer": 1, "warmup": 0.0, "spatial": 0.25, "temporal": 0.75, "temporal_by_head": [0.5, 1.0],
                         "decisiveness": pytest.approx(np.median([2 / 3, 1 / 2, 3 / 4, 0.0]))}


@pytest.mark.system
@pytest.mark.slow
def test_quality_study_on_the_shipped_checkpoint():
    params, config = load_checkpoint(CHECKPOINT)
    # step 0 of 2 and layer 0 of 4 in dense warm-up (SVG's own fractions give none at this size)
    warmup = {"warmup_step_fraction": 0.5, "warmup_layer_fraction": 0.25}
    variants = {name: {**VARIANTS[name], **warmup} for name in ("svg-aligned", "svg-aligned-no-fast-path")}
    result = quality_study(params, config, seeds=(1,), num_steps=2, variants=variants, progress=False,
                           first_videos=True, tile=Tile(128, 128))
    videos = result.pop("videos")   # the first seed's: what the per-seed numbers were measured on
    assert set(videos) == {"dense", *variants}
    for row in result["per_seed"]:
        assert psnr(videos["dense"], videos[row["variant"]]) == row["psnr"]
    summary = {row["variant"]: row for row in result["summary"]}
    assert set(summary) == set(variants)
    for row in summary.values():
        assert np.isfinite(row["psnr_mean"]) and 5 < row["psnr_mean"] < 100 and -1 <= row["ssim_mean"] < 1
        assert 0 < row["mask_density"] < 1
    assert result["fast_path_max_abs_diff"]["svg-aligned"] < 1e-4
    kinds = result["head_kinds"]["svg-aligned"]
    assert len(kinds) == config.depth and kinds[0]["warmup"] == 1.0  # the first layer is dense warm-up
    for layer in kinds[1:]:
        assert layer["spatial"] + layer["temporal"] == pytest.approx(1.0)
        assert layer["warmup"] == pytest.approx(0.5)  # step 0 of 2 is the dense warm-up step


def test_the_toy_tile_is_square():
    from svgtpu.errors import BadInput
    from svgtpu.toy.quality import square_side
    assert square_side(Tile(128, 128)) == 128
    with pytest.raises(BadInput, match="must be square"):
        square_side(Tile(128, 256))
