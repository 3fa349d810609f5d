"""The one Wan block (:mod:`svgtpu.model.wan`): against a float64 numpy block written from Wan's published
equations, the shipped toy checkpoint's outputs unchanged, every self-attention it can plug in, and Wan's
published sizes."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from svgtpu.attention import profiling
from svgtpu.attention.svg import SVGConfig
from svgtpu.geometry import Tile, VideoGeometry
from svgtpu.models import MODELS, ModelConfig
from svgtpu.model.wan import SELF_ATTENTIONS, WanBlock, rope_angles, self_attention
from svgtpu.toy.dit import forward, load_checkpoint
from svgtpu.toy.sampler import sample
from svgtpu.attention.backends import attention_backend
from tests.test_dit import CHECKPOINT, RECORDED

SEED = 20250
GEOMETRY = VideoGeometry(2, 3, 5)  # L = 30: no tile multiple
TILE = dict(block_q=128, block_kv=128)  # the toy's tile (svgtpu.setting.SMALL_TILE): an SVG config takes it as given


def small(**options) -> ModelConfig:
    return ModelConfig("small", layers=1, dim=192, heads=3, head_dim=64, ffn=96, text_len=5, patch_in=12,
                       source="test", **options)


# -- a float64 Wan block, from the equations of wan/modules/model.py (WanAttentionBlock) -----------------

def _ln(x, eps=1e-6):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


def _rms(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _softmax_attention(q, k, v):  # [B, L, H, d]
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


def _rope(x, g: VideoGeometry, theta=10000.0):
    """Wan's rope_apply: channel pairs as complex numbers times exp(i position freq), the pairs split
    c - 2 (c // 3), c // 3, c // 3 over (t, h, w) with c = d / 2."""
    d = x.shape[-1]
    c = d // 2
    sizes = (c - 2 * (c // 3), c // 3, c // 3)
    f, h, w = np.meshgrid(np.arange(g.T), np.arange(g.H), np.arange(g.W), indexing="ij")
    angles = []
    for pos, n in zip((f, h, w), sizes):
        freqs = 1.0 / theta ** (np.arange(0, 2 * n, 2) / (2 * n))
        angles.append(pos.reshape(-1, 1) * freqs)
    rot = np.exp(1j * np.concatenate(angles, axis=1))[None, :, None, :]  # [1, L, 1, c]
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * rot
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def reference_block(p, x, t_mod, context, config: ModelConfig, g: VideoGeometry):
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), p)
    x, t_mod, context = (np.asarray(a, np.float64) for a in (x, t_mod, context))
    H, d = config.heads, config.head_dim
    lin = lambda name, y: y @ p[name]["w"] + p[name]["b"]  # noqa: E731
    heads = lambda y: y.reshape(*y.shape[:2], H, d)  # noqa: E731
    e = [m[:, None] for m in np.moveaxis(p["modulation"][None] + t_mod, 1, 0)]
    h = _ln(x) * (1 + e[1]) + e[0]
    q, k, v = lin("q", h), lin("k", h), lin("v", h)
    if config.qk_norm == "model":
        q, k = heads(_rms(q, p["q_norm"])), heads(_rms(k, p["k_norm"]))
    else:
        q, k = _rms(heads(q), p["q_norm"]), _rms(heads(k), p["k_norm"])
    y = _softmax_attention(_rope(q, g), _rope(k, g), heads(v)).reshape(x.shape)
    x = x + lin("o", y) * e[2]
    h = _ln(x)
    if config.cross_norm:
        h = h * p["cross_norm"]["scale"] + p["cross_norm"]["bias"]
    cq = lin("cross_q", h)
    kv = lin("cross_kv", context)
    ck, cv = kv[..., :config.dim], kv[..., config.dim:]
    if config.cross_qk_norm:
        cq, ck = _rms(cq, p["cross_q_norm"]), _rms(ck, p["cross_k_norm"])
    x = x + lin("cross_o", _softmax_attention(heads(cq), heads(ck), heads(cv)).reshape(x.shape))
    h = _ln(x) * (1 + e[4]) + e[3]
    u = lin("mlp_in", h)
    gelu = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
    return x + lin("mlp_out", gelu) * e[5]


def random_inputs(config: ModelConfig, dtype, seed=SEED, geometry=GEOMETRY):
    """A block's parameters with every entry random (modulation and norms too, so each one matters) and
    its inputs."""
    print(f"seed {seed}")
    block = WanBlock(config)
    key = jax.random.PRNGKey(seed)
    p = block.init(jax.random.split(key, block.INIT_KEYS))
    leaves, tree = jax.tree.flatten(p)
    keys = jax.random.split(jax.random.fold_in(key, 1), len(leaves))
    p = jax.tree.unflatten(tree, [(a + 0.3 * jax.random.normal(k, a.shape)).astype(dtype) for a, k in zip(leaves, keys)])
    kx, kt, kc = jax.random.split(jax.random.fold_in(key, 2), 3)
    x = jax.random.normal(kx, (2, geometry.L, config.dim))
    t_mod = 0.5 * jax.random.normal(kt, (2, 6, config.dim))
    context = jax.random.normal(kc, (2, config.text_len, config.dim)).astype(dtype)
    return block, p, x, t_mod, context


@pytest.mark.parametrize("options", [{}, {"qk_norm": "head", "cross_norm": False, "cross_qk_norm": False}],
                         ids=["wan", "toy-options"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_block_matches_a_float64_block_from_wans_equations(options, dtype):
    config = small(**options)
    block, p, x, t_mod, context = random_inputs(config, jnp.dtype(dtype))
    out, info = jax.jit(lambda *a: block(*a))(p, x, t_mod, context, rope_angles(GEOMETRY, config.head_dim))
    ref = reference_block(jax.tree.map(lambda a: a.astype(jnp.float32), p), x, t_mod, context, config, GEOMETRY)
    assert info is None and out.dtype == x.dtype and out.shape == x.shape
    err = np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max()
    print(f"max error / max |ref| = {err:.2e}")
    assert err < (2e-5 if dtype == "float32" else 3e-2)


@pytest.mark.system
@pytest.mark.slow
def test_the_shipped_checkpoint_gives_the_recorded_outputs(monkeypatch):
    """An SVG sample (sparse steps) and velocities recorded from the toy DiT's own block before it became
    WanBlock (tests/data/toy_dit_outputs.npz, recorded with the code of 2c6c346); test_dit checks the dense
    sample.  That code profiled heads on rows drawn without replacement; SVG's draw (with replacement) came
    later, so the recording is compared under the draw it was made with."""
    monkeypatch.setattr(profiling, "sampled_rows", lambda key, L, r: jax.random.choice(key, L, (r,), replace=False))
    params, config = load_checkpoint(CHECKPOINT)
    recorded = np.load(RECORDED)
    svg = sample(params, config, [1], seed=2, num_steps=2, progress=False,   # both steps past the dense warm-up
                 attention=attention_backend("svg", config.geometry, svg_config=SVGConfig(**TILE)))
    x = np.random.default_rng(7).standard_normal((2, config.frames, config.height, config.width,
                                                  config.channels)).astype(np.float32)
    v = forward(params, config, jnp.asarray(x), jnp.asarray([0.9, 0.3], jnp.float32),
                jnp.asarray([2, config.num_labels]))
    for name, value in (("svg_sample", svg), ("forward_velocity", v)):
        diff = np.abs(np.asarray(value) - recorded[name]).max()
        print(f"{name}: max |now - recorded| = {diff:.2e}")
        # 1e-5 until issue 37: the key-major kernel sums keys in another order and exponentiates in base 2
        # (1.01e-5 on the SVG sample); its accuracy against float64 is tests/test_kernels.py's.  5e-5 since the
        # suite compiles XLA's CPU code at optimization level 0 (tests/conftest.py), which sums in another order:
        # 2.18e-5 on the SVG sample.
        assert diff <= 5e-5, name


def test_every_dense_self_attention_gives_the_same_block():
    config = small()
    block, p, x, t_mod, context = random_inputs(config, jnp.float32, seed=SEED + 1)
    angles = rope_angles(GEOMETRY, config.head_dim)
    outs = {}
    for name in SELF_ATTENTIONS:
        attention = self_attention(name, GEOMETRY, tile=Tile(128, 128),
                                   svg_config=SVGConfig(block_q=128, block_kv=128, align="snap"))
        # step 0 is SVG's dense warm-up: our kernel on a dense mask
        outs[name], _ = block(p, x, t_mod, context, angles, attention=attention, step=0, num_steps=50, layer=0,
                              num_layers=40, key=jax.random.PRNGKey(0))
    for name, out in outs.items():
        np.testing.assert_allclose(out, outs["xla"], atol=2e-4, rtol=2e-4, err_msg=name)


def test_svg_runs_sparse_past_its_warm_up():
    g = VideoGeometry(4, 8, 20)  # F = 160, L = 640: a 128-token band and the first frame keep a part
    config = small()
    block, p, x, t_mod, context = random_inputs(config, jnp.float32, seed=SEED + 2, geometry=g)
    angles = rope_angles(g, config.head_dim)
    svg = self_attention("svg", g, svg_config=SVGConfig(multiplier=0.2, **TILE))
    sparse, info = block(p, x, t_mod, context, angles, attention=attention_backend(
        "svg", g, svg_config=SVGConfig(multiplier=0.2, **TILE), return_info=True), step=49, num_steps=50, layer=39,
        num_layers=40, key=jax.random.PRNGKey(0))
    plain, _ = block(p, x, t_mod, context, angles, attention=svg, step=49, num_steps=50, layer=39, num_layers=40,
                     key=jax.random.PRNGKey(0))
    dense, _ = block(p, x, t_mod, context, angles)
    assert not bool(info.dense) and info.kinds.shape == (2, config.heads)  # the block passes the layer's info on
    np.testing.assert_array_equal(sparse, plain)
    assert np.abs(np.asarray(sparse) - np.asarray(dense)).max() > 1e-3  # a narrow band is not dense attention


def test_wan_configs_have_the_published_parameter_counts():
    """Wan 2.1's names state their size: T2V-14B and T2V-1.3B (the blocks are nearly all of it)."""
    for name, billions in (("wan2.1-14b", 14.0), ("wan2.1-1.3b", 1.3)):
        config = MODELS[name]
        block = WanBlock(config)
        shapes = jax.eval_shape(lambda key: block.init(jax.random.split(key, block.INIT_KEYS)), jax.random.PRNGKey(0))
        per_block = sum(math.prod(a.shape) for a in jax.tree.leaves(shapes))
        total = config.layers * per_block / 1e9
        print(f"{name}: {total:.3f} B parameters in its blocks")
        assert abs(total - billions) / billions < 0.08


def test_bad_configs_are_refused_in_one_line():
    with pytest.raises(ValueError, match="qk_norm"):
        small(qk_norm="layer")
    with pytest.raises(ValueError, match="heads \\* head_dim"):
        ModelConfig("x", 1, 100, 3, 64, 8, 1, 1, "test")
    with pytest.raises(ValueError, match="attention must be one of"):
        self_attention("flash")
    with pytest.raises(ValueError, match="needs the model geometry and an SVGConfig"):
        self_attention("svg")
    with pytest.raises(ValueError, match="attention 'splash' needs a tile"):
        self_attention("splash")
    with pytest.raises(ValueError, match="head_dim must be even"):
        WanBlock(ModelConfig("x", 1, 9, 3, 3, 8, 1, 1, "test"))
