"""A toy Wan-shaped video diffusion transformer in plain JAX + einops.

The shape follows Wan 2.1, scaled down to train on two CPU cores:

    video [B, T, H, W, C] --3D patchify (1, 2, 2)--> tokens [B, L, D]      (frame-major order)
    for each block:
        x += gate1 * SelfAttention(adaLN(x; shift1, scale1))    3D RoPE, q/k RMSNorm, pluggable backend
        x += CrossAttention(LayerNorm(x), label tokens)         a few conditioning tokens per label
        x += gate2 * MLP(adaLN(x; shift2, scale2))               GELU
    head: adaLN, linear to patch pixels --unpatchify--> velocity [B, T, H, W, C]

shift/scale/gate come from the timestep embedding (adaLN modulation, zero-initialized so every
block starts as the identity).  Parameters are a plain pytree of dicts/lists of arrays.

Self-attention goes through a *backend*: a callable
``attention(q, k, v, *, layer, step, num_steps, num_layers, key)`` with q/k/v ``[batch, heads, L,
head_dim]`` in frame-major token order, returning the same shape (see
:func:`svgtpu.attention.backends.attention_backend`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import zipfile
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from einops import rearrange

from svgtpu.toy import data
from svgtpu.attention.base import Attention, dense_attention
from svgtpu.geometry import VideoGeometry, check_positive_int
from svgtpu.errors import BadInput
from svgtpu.report.paths import CHECKPOINT

Params = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class DiTConfig:
    """Size of the toy DiT; the defaults are the shipped checkpoint's model (the one toy: the cost model, the CPU
    benchmarks, the compile targets and the notebooks all build this), and its video format."""

    frames: int = data.FRAMES
    height: int = data.HEIGHT
    width: int = data.WIDTH
    channels: int = data.CHANNELS
    patch: tuple[int, int, int] = (1, 2, 2)
    heads: int = 3
    head_dim: int = 64
    depth: int = 4
    mlp_ratio: int = 4
    num_labels: int = data.NUM_LABELS
    context_tokens: int = 4
    freq_dim: int = 256
    rope_theta: float = 10000.0

    def __post_init__(self):
        object.__setattr__(self, "patch", tuple(int(p) for p in self.patch))
        for name in ("frames", "height", "width", "channels", "heads", "depth", "mlp_ratio",
                     "num_labels", "context_tokens", "freq_dim"):
            check_positive_int(f"DiTConfig.{name}", getattr(self, name))
        if self.head_dim not in (64, 128):
            raise BadInput(f"DiTConfig.head_dim must be 64 or 128 (kernel head sizes), got {self.head_dim}")
        if len(self.patch) != 3 or min(self.patch) <= 0:
            raise BadInput(f"DiTConfig.patch must be three positive integers (t, h, w), got {self.patch}")
        for size, p, name in zip((self.frames, self.height, self.width), self.patch, ("frames", "height", "width")):
            if size % p:
                raise BadInput(f"DiTConfig.{name}={size} must be a multiple of its patch size {p}")

    @property
    def dim(self) -> int:
        """Model width ``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def patch_dim(self) -> int:
        return self.channels * math.prod(self.patch)

    @property
    def geometry(self) -> VideoGeometry:
        """The token grid the model sees (frame-major, ``L = T * H * W``)."""
        pt, ph, pw = self.patch
        return VideoGeometry(self.frames // pt, self.height // ph, self.width // pw, name="toy-dit")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "DiTConfig":
        return cls(**json.loads(text))


# -- patchify ---------------------------------------------------------------------------------

def patchify(video: jax.Array, config: DiTConfig) -> jax.Array:
    """``[B, T, H, W, C]`` pixels -> ``[B, L, patch_dim]`` tokens in frame-major order."""
    pt, ph, pw = config.patch
    return rearrange(video, "b (t pt) (h ph) (w pw) c -> b (t h w) (pt ph pw c)", pt=pt, ph=ph, pw=pw)


def unpatchify(tokens: jax.Array, config: DiTConfig) -> jax.Array:
    """Inverse of :func:`patchify`."""
    g = config.geometry
    pt, ph, pw = config.patch
    return rearrange(tokens, "b (t h w) (pt ph pw c) -> b (t pt) (h ph) (w pw) c",
                     t=g.T, h=g.H, w=g.W, pt=pt, ph=ph, pw=pw)


# -- 3D rotary position embedding --------------------------------------------------------------

def rope_split(head_dim: int) -> tuple[int, int, int]:
    """Channels of one head given to the (t, h, w) axes, as Wan splits them (all even)."""
    hw = 2 * (head_dim // 6)
    return head_dim - 2 * hw, hw, hw


def rope_angles(geometry: VideoGeometry, head_dim: int, theta: float = 10000.0) -> jax.Array:
    """Rotation angles ``[L, head_dim // 2]`` of every frame-major token: per axis, its position
    times ``theta ** (-2i / axis_dim)``, concatenated over (t, h, w)."""
    t, h, w = np.meshgrid(np.arange(geometry.T), np.arange(geometry.H), np.arange(geometry.W), indexing="ij")
    parts = []
    for pos, dim in zip((t, h, w), rope_split(head_dim)):
        inv_freq = theta ** (-np.arange(0, dim, 2) / dim)
        parts.append(pos.reshape(-1, 1) * inv_freq[None, :])
    return jnp.asarray(np.concatenate(parts, axis=1), jnp.float32)


def apply_rope(x: jax.Array, angles: jax.Array) -> jax.Array:
    """Rotate channel pairs ``(2i, 2i+1)`` of ``x [..., L, d]`` by ``angles [L, d/2]``."""
    pairs = rearrange(x, "... (n two) -> ... n two", two=2)
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    a, b = pairs[..., 0], pairs[..., 1]
    return rearrange(jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1), "... n two -> ... (n two)")


# -- parameters --------------------------------------------------------------------------------

def _linear(key, fan_in: int, fan_out: int, zero: bool = False) -> Params:
    w = jnp.zeros((fan_in, fan_out)) if zero else jax.random.normal(key, (fan_in, fan_out)) / math.sqrt(fan_in)
    return {"w": w, "b": jnp.zeros((fan_out,))}


def init_params(config: DiTConfig, key: jax.Array) -> Params:
    """Fresh parameters; modulation and output layers start at zero (blocks begin as identity)."""
    D, hidden = config.dim, config.dim * config.mlp_ratio
    keys = iter(jax.random.split(key, 8 + 9 * config.depth))
    blocks = []
    for _ in range(config.depth):
        blocks.append({
            "modulation": jnp.zeros((6, D)),
            "q": _linear(next(keys), D, D), "k": _linear(next(keys), D, D),
            "v": _linear(next(keys), D, D), "o": _linear(next(keys), D, D),
            "q_norm": jnp.ones((config.head_dim,)), "k_norm": jnp.ones((config.head_dim,)),
            "cross_q": _linear(next(keys), D, D), "cross_kv": _linear(next(keys), D, 2 * D),
            "cross_o": _linear(next(keys), D, D),
            "mlp_in": _linear(next(keys), D, hidden), "mlp_out": _linear(next(keys), hidden, D),
        })
    return {
        "patch_embed": _linear(next(keys), config.patch_dim, D),
        "time_in": _linear(next(keys), config.freq_dim, D),
        "time_out": _linear(next(keys), D, D),
        "time_modulation": _linear(next(keys), D, 6 * D, zero=True),
        "label_embed": 0.02 * jax.random.normal(next(keys), (config.num_labels + 1, config.context_tokens, D)),
        "blocks": blocks,
        "head_modulation": jnp.zeros((2, D)),
        "head": _linear(next(keys), D, config.patch_dim, zero=True),
    }


def count_params(params: Params) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params))


# -- forward -----------------------------------------------------------------------------------

def _dense(p: Params, x: jax.Array) -> jax.Array:
    return x @ p["w"] + p["b"]


def _layer_norm(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)


def _rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-6) -> jax.Array:
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * scale


def timestep_embedding(t: jax.Array, dim: int) -> jax.Array:
    """Sinusoidal embedding ``[B, dim]`` of flow times ``t in [0, 1]`` (scaled by 1000 like Wan)."""
    half = dim // 2
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(half) / half)
    args = 1000.0 * t[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def _block(p: Params, x, t_mod, context, angles, config: DiTConfig, attention: Attention, **call):
    heads = config.heads
    shift1, scale1, gate1, shift2, scale2, gate2 = jnp.unstack(t_mod + p["modulation"], axis=1)[:6]

    h = _layer_norm(x) * (1 + scale1[:, None]) + shift1[:, None]
    split = lambda y: rearrange(y, "b l (h d) -> b h l d", h=heads)  # noqa: E731
    q = apply_rope(_rms_norm(split(_dense(p["q"], h)), p["q_norm"]), angles)
    k = apply_rope(_rms_norm(split(_dense(p["k"], h)), p["k_norm"]), angles)
    v = split(_dense(p["v"], h))
    out = attention(q, k, v, **call)
    out, info = out if isinstance(out, tuple) else (out, None)
    x = x + gate1[:, None] * _dense(p["o"], rearrange(out, "b h l d -> b l (h d)"))

    cq = split(_dense(p["cross_q"], _layer_norm(x)))
    ck, cv = jnp.split(_dense(p["cross_kv"], context), 2, axis=-1)
    x = x + _dense(p["cross_o"], rearrange(dense_attention(cq, split(ck), split(cv)), "b h l d -> b l (h d)"))

    h = _layer_norm(x) * (1 + scale2[:, None]) + shift2[:, None]
    return x + gate2[:, None] * _dense(p["mlp_out"], jax.nn.gelu(_dense(p["mlp_in"], h))), info


def forward(params: Params, config: DiTConfig, video: jax.Array, t: jax.Array, labels: jax.Array, *,
            attention: Attention = dense_attention, step=0, num_steps: int = 1,
            key: jax.Array | None = None, with_info: bool = False):
    """Predicted flow velocity ``[B, T, H, W, C]`` for noisy ``video`` at times ``t [B]``.

    ``labels [B]`` are motion labels (``config.num_labels`` is the null label).  ``step`` /
    ``num_steps`` say where in sampling this call is, and with ``key`` are passed to the attention
    backend together with the layer index.  A backend may return ``(out, info)`` instead of
    ``out``; ``with_info=True`` then also returns the list of per-layer infos.
    """
    expected = (config.frames, config.height, config.width, config.channels)
    if video.ndim != 5 or tuple(video.shape[1:]) != expected:
        raise BadInput(f"video must be [batch, {', '.join(map(str, expected))}], got {tuple(video.shape)}")
    key = jax.random.PRNGKey(0) if key is None else key
    D = config.dim
    x = _dense(params["patch_embed"], patchify(video, config))
    t_emb = _dense(params["time_out"], jax.nn.silu(_dense(params["time_in"], timestep_embedding(t, config.freq_dim))))
    t_mod = _dense(params["time_modulation"], jax.nn.silu(t_emb)).reshape(-1, 6, D)
    context = params["label_embed"][labels]
    angles = rope_angles(config.geometry, config.head_dim, config.rope_theta)
    layer_keys = jax.random.split(key, config.depth)
    infos = []
    for layer, block in enumerate(params["blocks"]):
        x, info = _block(block, x, t_mod, context, angles, config, attention, layer=layer, step=step,
                   num_steps=num_steps, num_layers=config.depth, key=layer_keys[layer])
        infos.append(info)
    shift, scale = jnp.unstack(params["head_modulation"][None] + t_emb[:, None], axis=1)
    x = _layer_norm(x) * (1 + scale[:, None]) + shift[:, None]
    velocity = unpatchify(_dense(params["head"], x), config)
    return (velocity, infos) if with_info else velocity


# -- checkpoints -------------------------------------------------------------------------------

def _flatten(tree, prefix: str = "") -> dict[str, np.ndarray]:
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, list):
        items = ((str(i), v) for i, v in enumerate(tree))
    else:
        return {prefix: np.asarray(tree)}
    out = {}
    for name, value in items:
        out.update(_flatten(value, f"{prefix}/{name}" if prefix else name))
    return out


def _unflatten(flat: dict[str, np.ndarray]):
    root: dict = {}
    for path, value in flat.items():
        node = root
        *parents, leaf = path.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = jnp.asarray(value)

    def listify(node):
        if not isinstance(node, dict):
            return node
        if node and all(k.isdigit() for k in node):
            return [listify(node[str(i)]) for i in range(len(node))]
        return {k: listify(v) for k, v in node.items()}
    return listify(root)


def save_checkpoint(path: str, params: Params, config: DiTConfig) -> None:
    """Write ``params`` (float32) and ``config`` to one ``.npz`` file."""
    flat = {k: v.astype(np.float32) for k, v in _flatten(params).items()}
    np.savez_compressed(path, __config__=np.array(config.to_json()), **flat)


def load_checkpoint(path: str) -> tuple[Params, DiTConfig]:
    """``(params, config)`` from a file written by :func:`save_checkpoint`."""
    if not os.path.isfile(path):
        raise BadInput(f"checkpoint {path} does not exist (the shipped one is {CHECKPOINT}; "
                       "`python -m svgtpu train` writes one)")
    try:
        archive = np.load(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        raise BadInput(f"checkpoint {path} is not a .npz file written by save_checkpoint") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise BadInput(f"checkpoint {path} holds one array, not a .npz file written by save_checkpoint")
    with archive:
        if "__config__" not in archive:
            raise BadInput(f"checkpoint {path} has no __config__ entry: not a toy DiT checkpoint")
        config = DiTConfig.from_json(str(archive["__config__"]))
        params = _unflatten({k: archive[k] for k in archive.files if k != "__config__"})
    return params, config


__all__ = ["DiTConfig", "patchify", "unpatchify", "rope_split", "rope_angles", "apply_rope",
           "init_params", "count_params",
           "timestep_embedding", "forward", "save_checkpoint", "load_checkpoint"]
