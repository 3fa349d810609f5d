"""A toy Wan-shaped video diffusion transformer in plain JAX + einops.

The shape follows Wan 2.1, scaled down to train on two CPU cores; its blocks are Wan's own block,
:class:`svgtpu.model.wan.WanBlock`, with the toy's options (:attr:`DiTConfig.block`: q/k RMSNorm per
head, a plain LayerNorm before cross-attention):

    video [B, T, H, W, C] --3D patchify (1, 2, 2)--> tokens [B, L, D]      (frame-major order)
    for each block (WanBlock):
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
from svgtpu.models import ModelConfig
from svgtpu.model.dit import sinusoid
from svgtpu.model.wan import WanBlock, apply_rope, layer_norm, linear, rope_angles, rope_split
from svgtpu.errors import BadInput
from svgtpu.facts.paths import CHECKPOINT

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
    def block(self) -> ModelConfig:
        """The blocks' shape and options, as the model config :class:`~svgtpu.model.wan.WanBlock` runs."""
        return ModelConfig.from_dit(self)

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


# -- parameters --------------------------------------------------------------------------------

def _linear(key, fan_in: int, fan_out: int, zero: bool = False) -> Params:
    w = jnp.zeros((fan_in, fan_out)) if zero else jax.random.normal(key, (fan_in, fan_out)) / math.sqrt(fan_in)
    return {"w": w, "b": jnp.zeros((fan_out,))}


def init_params(config: DiTConfig, key: jax.Array) -> Params:
    """Fresh parameters; modulation and output layers start at zero (blocks begin as identity)."""
    D, block = config.dim, WanBlock(config.block)
    keys = iter(jax.random.split(key, 8 + block.INIT_KEYS * config.depth))
    blocks = [block.init(keys) for _ in range(config.depth)]
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

def timestep_embedding(t: jax.Array, dim: int) -> jax.Array:
    """Sinusoidal embedding ``[B, dim]`` of flow times ``t in [0, 1]``: Wan's (:func:`svgtpu.model.dit.sinusoid`)
    of the timesteps ``1000 t``."""
    return sinusoid(1000.0 * t, dim)


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
    D, block = config.dim, WanBlock(config.block)
    x = linear(params["patch_embed"], patchify(video, config))
    t_emb = linear(params["time_out"], jax.nn.silu(linear(params["time_in"], timestep_embedding(t, config.freq_dim))))
    t_mod = linear(params["time_modulation"], jax.nn.silu(t_emb)).reshape(-1, 6, D)
    context = params["label_embed"][labels]
    angles = rope_angles(config.geometry, config.head_dim, config.rope_theta)
    layer_keys = jax.random.split(key, config.depth)
    infos = []
    for layer, p in enumerate(params["blocks"]):
        x, info = block(p, x, t_mod, context, angles, attention=attention, layer=layer, step=step,
                        num_steps=num_steps, num_layers=config.depth, key=layer_keys[layer])
        infos.append(info)
    shift, scale = jnp.unstack(params["head_modulation"][None] + t_emb[:, None], axis=1)
    x = layer_norm(x) * (1 + scale[:, None]) + shift[:, None]
    velocity = unpatchify(linear(params["head"], x), config)
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
    """Write ``params`` (float32) and ``config`` to one ``.npz`` file, atomically."""
    from svgtpu.facts.outputs import atomic_path
    flat = {k: v.astype(np.float32) for k, v in _flatten(params).items()}
    with atomic_path(path) as tmp:
        np.savez_compressed(tmp, __config__=np.array(config.to_json()), **flat)


def load_checkpoint(path: str) -> tuple[Params, DiTConfig]:
    """``(params, config)`` from a file written by :func:`save_checkpoint`."""
    if not os.path.exists(path):
        raise BadInput(f"checkpoint {path} does not exist (the shipped one is {CHECKPOINT}; "
                       "`python -m svgtpu train` writes one)")
    from svgtpu.inputs.documents import check_input_file
    check_input_file("checkpoint", path)   # a folder, a device, an unreadable file: said as such
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
