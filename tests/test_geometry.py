import numpy as np
import pytest

from svgtpu.geometry import PRESETS, VideoGeometry, get_geometry


@pytest.mark.parametrize("name,grid", [
    ("480p", (21, 30, 52)), ("720p", (21, 45, 80)),
    ("1080p", (21, 68, 120)), ("1440p", (21, 90, 160)),
])
def test_presets_match_design_table(name, grid):
    g = get_geometry(name)
    assert (g.T, g.H, g.W) == grid
    assert g.F == grid[1] * grid[2] and g.L == g.T * g.F


def test_from_pixels_wan_rules():
    g = VideoGeometry.from_pixels(1280, 720, 81)
    assert (g.T, g.H, g.W) == (21, 45, 80)
    assert VideoGeometry.from_pixels(832, 480, 1).T == 1
    with pytest.raises(ValueError, match="frames"):
        VideoGeometry.from_pixels(1280, 720, 80)
    with pytest.raises(ValueError, match="width and height"):
        VideoGeometry.from_pixels(1281, 720, 81)


@pytest.mark.parametrize("bad", ["wan-4k", "21x45", "21x0x3", "axbxc", "", "-1x2x3"])
def test_bad_geometry_names_the_parameter(bad):
    with pytest.raises(ValueError, match="geometry"):
        get_geometry(bad)


def test_parse_grid_and_str():
    g = get_geometry("3x5X7")
    assert (g.T, g.H, g.W) == (3, 5, 7)
    assert str(g) == "3x5x7"
    assert "720p" in str(PRESETS["720p"])


def test_permutations_are_inverse_and_match_definition():
    seed = 20261130
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    g = VideoGeometry(3, 4, 5)
    idx = g.to_spatial_major_index()
    for f in range(g.T):
        for s in range(g.F):
            assert idx[s * g.T + f] == f * g.F + s
    x = rng.standard_normal((2, g.L, 6))
    xs = np.asarray(g.to_spatial_major(x))
    np.testing.assert_array_equal(xs, x[:, idx])
    np.testing.assert_array_equal(np.asarray(g.to_frame_major(xs)), x)
    np.testing.assert_array_equal(xs[:, g.to_frame_major_index()], x)


def test_permutation_is_jittable_and_checks_shape():
    import jax
    import jax.numpy as jnp

    g = VideoGeometry(2, 3, 3)
    x = jnp.arange(g.L * 4, dtype=jnp.float32).reshape(g.L, 4)
    y = jax.jit(lambda a: g.to_frame_major(g.to_spatial_major(a)))(x)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    with pytest.raises(ValueError, match="L=18"):
        g.to_spatial_major(jnp.zeros((17, 4)))


def test_pixel_frames_inverts_from_pixels():
    for frames in (1, 5, 81, 121):
        assert VideoGeometry.from_pixels(1280, 720, frames).pixel_frames == frames
