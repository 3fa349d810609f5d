"""Toy DiT: synthetic data, model pieces, attention backends, training, the shipped checkpoint."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from float64_reference import masked_attention
from svgtpu.toy import data
from svgtpu.attention.svg import SVGConfig
from svgtpu.attention.backends import attention_backend
from svgtpu.attention.base import dense_attention
from svgtpu.toy.dit import (DiTConfig, apply_rope, forward, init_params, load_checkpoint, patchify, rope_angles,
                        rope_split, save_checkpoint, unpatchify)
from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.toy.sampler import sample, save_video, time_grid
from svgtpu.toy.train import CONFIGS, flow_matching_loss, get_config, train

CHECKPOINT = os.path.join(os.path.dirname(__file__), "..", "checkpoints", "toy_dit.npz")
#: The shipped checkpoint's outputs recorded from the code before WanBlock (commit bf68e12).
RECORDED = os.path.join(os.path.dirname(__file__), "data", "toy_dit_outputs.npz")
TILE = dict(block_q=128, block_kv=128)  # the toy's tile (svgtpu.setting.SMALL_TILE): an SVG config takes it as given


def test_data_is_deterministic_per_seed_and_in_range():
    a, la = data.make_batch(3, 4)
    b, lb = data.make_batch(3, 4)
    c, _ = data.make_batch(4, 4)
    assert a.shape == (4, data.FRAMES, data.HEIGHT, data.WIDTH, 3) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(la, lb)
    assert not np.array_equal(a, c)
    assert a.min() >= -1.0 and a.max() <= 1.0 and (a > -1.0).any()
    assert set(la.tolist()) <= set(range(data.NUM_LABELS))


def test_data_motion_follows_the_label():
    for label, moving_axes in ((0, {2}), (1, {1})):  # horizontal moves along width, vertical along height
        video, got = data.make_video(11, label=label)
        assert got == label
        mass = video.max(-1) > 0.5                                     # [T, H, W] pixels of a shape
        rows = [np.nonzero(mass[f].any(1))[0].mean() for f in range(data.FRAMES)]
        cols = [np.nonzero(mass[f].any(0))[0].mean() for f in range(data.FRAMES)]
        moved = {1: np.ptp(rows) > 0.5, 2: np.ptp(cols) > 0.5}
        assert {axis for axis, m in moved.items() if m} == moving_axes


def test_data_background_is_static_and_one_colour_per_token():
    """Temporal heads pay only if the background repeats across frames and neighbours do not predict it."""
    video, _ = data.make_video(5)
    shape = video.max(-1) > 0.5                                        # [T, H, W] pixels of a shape
    clear = ~shape.any(0)                                              # never covered in any frame
    assert clear.mean() > 0.3
    np.testing.assert_array_equal(video[:, clear], np.broadcast_to(video[0, clear], video[:, clear].shape))
    c = data.BACKGROUND_CELL
    cells = video[0].reshape(data.HEIGHT // c, c, data.WIDTH // c, c, 3)
    flat = cells.transpose(0, 2, 1, 3, 4).reshape(-1, c * c, 3)
    clear_cells = clear.reshape(data.HEIGHT // c, c, data.WIDTH // c, c).all((1, 3)).reshape(-1)
    assert (np.ptp(flat[clear_cells], axis=1) == 0).all()             # one colour per cell
    assert len(np.unique(flat[clear_cells, 0, 0])) > 0.9 * clear_cells.sum()  # cells differ from each other


def test_data_rejects_bad_input():
    with pytest.raises(ValueError, match="label"):
        data.make_video(0, label=data.NUM_LABELS)
    with pytest.raises(ValueError, match="batch"):
        data.make_batch(0, 0)


def test_geometry_is_not_a_tile_multiple_and_patchify_round_trips():
    config = DiTConfig()
    g = config.geometry
    assert (g.T, g.H, g.W, g.F, g.L) == (8, 10, 14, 140, 1120) and g.F % 128
    video = jax.random.normal(jax.random.PRNGKey(0), (2, 8, 20, 28, 3))
    tokens = patchify(video, config)
    assert tokens.shape == (2, g.L, config.patch_dim)
    np.testing.assert_array_equal(unpatchify(tokens, config), video)
    # frame-major: token f*F + s holds pixels of frame f only
    np.testing.assert_array_equal(tokens[0, g.F + 3].reshape(2, 2, 3), video[0, 1, 0:2, 6:8])


def test_rope_preserves_norms_and_depends_only_on_relative_position():
    g = VideoGeometry(4, 3, 5)
    d = 64
    assert sum(rope_split(d)) == d and all(part % 2 == 0 for part in rope_split(d))
    angles = rope_angles(g, d)
    assert angles.shape == (g.L, d // 2)
    rng = np.random.default_rng(0)
    q1, k1 = (jnp.asarray(rng.standard_normal(d), jnp.float32) for _ in range(2))
    q = apply_rope(jnp.broadcast_to(q1, (g.L, d)), angles)
    k = apply_rope(jnp.broadcast_to(k1, (g.L, d)), angles)
    np.testing.assert_allclose(jnp.linalg.norm(q, axis=-1), jnp.linalg.norm(q1), rtol=1e-5)
    index = lambda t, h, w: (t * g.H + h) * g.W + w  # noqa: E731
    # the same (dt, dh, dw) offset from two different origins gives the same score
    s1 = q[index(0, 0, 1)] @ k[index(2, 1, 3)]
    s2 = q[index(1, 1, 2)] @ k[index(3, 2, 4)]
    np.testing.assert_allclose(s1, s2, rtol=1e-4, atol=1e-4)
    # and a different offset along each axis changes it
    for other in (index(3, 1, 3), index(2, 2, 3), index(2, 1, 4)):
        assert abs(float(q[index(0, 0, 1)] @ k[other] - s1)) > 1e-3


def test_all_backends_agree_on_a_dense_mask():
    g = VideoGeometry(3, 10, 14)  # L = 420, F = 140: not tile multiples
    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), (2, 2, g.L, 64)) for i in range(3))
    expected = masked_attention(q, k, v)
    call = dict(layer=1, num_steps=10, num_layers=4, key=jax.random.PRNGKey(1))
    outputs = {
        "dense": dense_attention(q, k, v, step=5, **call),
        "splash": attention_backend("splash", g, tile=Tile(128, 128))(q, k, v, step=5, **call),
        "svg warm-up": attention_backend("svg", g, svg_config=SVGConfig(**TILE))(q, k, v, step=0, **call),
        # a band wider than L: the sparse path (profiling + layout transformation) on a dense mask
        "svg full band": attention_backend("svg", g, svg_config=SVGConfig(multiplier=10.0, **TILE))(q, k, v, step=5, **call),
    }
    for name, out in outputs.items():
        assert out.shape == q.shape, name
        np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5, err_msg=name)
    sparse = attention_backend("svg", g, svg_config=SVGConfig(**TILE))(q, k, v, step=5, **call)
    assert np.abs(np.asarray(sparse) - expected).max() > 1e-2  # the real SVG mask does change outputs


def test_forward_passes_layer_and_step_to_the_backend():
    config = CONFIGS["tiny"]
    params = init_params(config, jax.random.PRNGKey(0))
    seen = []

    def recording(q, k, v, *, layer, step, num_steps, num_layers, key):
        seen.append((layer, step, num_steps, num_layers, q.shape))
        return dense_attention(q, k, v), layer

    video = jnp.asarray(data.make_batch(0, 1)[0])
    run = jax.jit(lambda p, x: forward(p, config, x, jnp.array([0.3]), jnp.array([2]), attention=recording,
                                       step=7, num_steps=9, with_info=True))
    out, infos = run(params, video)
    assert out.shape == video.shape and np.isfinite(np.asarray(out)).all()
    assert seen == [(0, 7, 9, 1, (1, 1, 1120, 64))] and [int(i) for i in infos] == [0]


@pytest.mark.system
@pytest.mark.slow
def test_training_reduces_the_loss_on_a_fixed_batch():
    config = CONFIGS["tiny"]
    x0, labels = (jnp.asarray(a) for a in data.make_batch(0, 2))
    key = jax.random.PRNGKey(5)
    params0 = init_params(config, jax.random.split(jax.random.PRNGKey(0))[1])
    params, history = train(config, steps=6, seed=0, batch_size=2, lr=3e-3, warmup=1, fixed_batch=True,
                            progress=False)
    assert len(history["losses"]) == 6 and np.isfinite(history["losses"]).all()
    loss = jax.jit(lambda p: flow_matching_loss(p, config, x0, labels, key))
    before, after = loss(params0), loss(params)
    assert np.isfinite(float(after)) and float(after) < 0.9 * float(before)


def test_checkpoint_round_trip(tmp_path):
    config = CONFIGS["tiny"]
    params = init_params(config, jax.random.PRNGKey(3))
    path = str(tmp_path / "tiny.npz")
    save_checkpoint(path, params, config)
    loaded, loaded_config = load_checkpoint(path)
    assert loaded_config == config
    for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(loaded)):
        np.testing.assert_array_equal(a, b)
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(loaded)


@pytest.mark.system
def test_shipped_checkpoint_samples_videos(tmp_path):
    assert os.path.getsize(CHECKPOINT) <= 20 * 2**20
    params, config = load_checkpoint(CHECKPOINT)
    assert config == CONFIGS["toy"] == DiTConfig()  # one toy: the defaults are the shipped model
    video = sample(params, config, [0, 3], seed=1, num_steps=3, progress=False)
    assert video.shape == (2, config.frames, config.height, config.width, 3)
    # the same samples as the toy's blocks gave before they became WanBlock (tests/test_wan.py), to the rounding of
    # XLA's CPU code at optimization level 0, which the suite compiles at (tests/conftest.py): 1.8e-5 at worst
    np.testing.assert_allclose(video, np.load(RECORDED)["dense_sample"], rtol=0, atol=5e-5)
    assert np.isfinite(video).all() and video.std() > 0.1
    assert np.abs(np.diff(video, axis=1)).mean() > 1e-3  # frames differ
    gif, png = save_video(video, str(tmp_path / "v.gif"))
    assert os.path.getsize(gif) > 0 and os.path.getsize(png) > 0


def test_time_grid_runs_from_noise_to_data():
    ts = time_grid(4)
    np.testing.assert_allclose(ts, [1.0, 0.75, 0.5, 0.25, 0.0])
    shifted = time_grid(4, shift=3.0)
    assert shifted[0] == 1.0 and shifted[-1] == 0.0 and (np.diff(shifted) < 0).all() and (shifted[1:-1] > ts[1:-1]).all()


def test_bad_config_is_rejected_clearly():
    with pytest.raises(ValueError, match="head_dim"):
        DiTConfig(head_dim=32)
    with pytest.raises(ValueError, match="height"):
        DiTConfig(height=21)
    with pytest.raises(ValueError, match="depth"):
        DiTConfig(depth=0)
    with pytest.raises(ValueError, match="attention"):
        attention_backend("flash")
    with pytest.raises(ValueError, match="needs svg_config"):   # no tile of its own: the caller's
        attention_backend("svg", VideoGeometry(3, 10, 14))
    with pytest.raises(ValueError, match="needs svg2_config"):
        attention_backend("svg2")
    with pytest.raises(ValueError, match="'splash' needs tile"):   # no tile default: the caller's
        attention_backend("splash")
    with pytest.raises(ValueError, match="config"):
        get_config("huge")
    with pytest.raises(ValueError, match="num_steps"):
        time_grid(0)
    with pytest.raises(ValueError, match="steps"):
        train(CONFIGS["tiny"], steps=0)
    params = init_params(CONFIGS["tiny"], jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="video"):
        forward(params, CONFIGS["tiny"], jnp.zeros((1, 8, 20, 27, 3)), jnp.zeros(1), jnp.zeros(1, jnp.int32))
    with pytest.raises(ValueError, match="labels"):
        sample(params, CONFIGS["tiny"], [7], num_steps=1, progress=False)


def test_save_training_chains_the_stages_of_continued_training(tmp_path):
    from svgtpu.toy.train import save_training

    config = CONFIGS["tiny"]
    params = init_params(config, jax.random.PRNGKey(0))
    history = {"steps": 40, "seed": 0, "losses": [2.0] * 2 + [1.0] * 36 + [0.5] * 2, "wall_s": 3.0}
    first = save_training(str(tmp_path / "a.npz"), params, config, history, config_name="tiny", command="one")
    assert (first["first_loss"], first["final_loss"]) == (2.0, 0.5)  # means of the first / last 5 %
    more = {**history, "steps": 10, "losses": [0.4] * 10, "wall_s": 1.0}
    second = save_training(str(tmp_path / "b.npz"), params, config, more, config_name="tiny",
                           init=str(tmp_path / "a.npz"), command="two")
    assert (second["total_steps"], second["total_wall_s"], second["reproduce"]) == (50, 4.0, ["one", "two"])
    assert second["provenance"].startswith("measured")
    loaded, loaded_config = load_checkpoint(str(tmp_path / "b.npz"))
    assert loaded_config == config
    with open(tmp_path / "b.loss.json") as f:
        assert [s["losses"] for s in json.load(f)["stages"]] == [history["losses"], more["losses"]]
