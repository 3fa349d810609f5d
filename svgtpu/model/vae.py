"""Wan 2.1's causal 3D VAE decoder in JAX, chunk by chunk as Wan decodes: what the VAE-decode stage compiles.

The structure is :data:`svgtpu.models.WAN21_VAE` (Wan 2.1 ``wan/modules/vae.py``, cited there); the weights are
random (:func:`init_decoder`: the time a decode takes does not depend on them).  Wan decodes one latent frame at a
time (``WanVAE_.decode``): every causal 3D convolution keeps the last two frames of its input as a cache (zeros
before the first chunk) and sees them before the chunk's own frame; the temporal upsamplers skip their time
convolution on the first chunk (Wan's ``'Rep'`` mark), so latent frame 0 decodes to one frame and every later one
to four.  :func:`decode_chunk` is one such step, the caches in and out; :func:`decode` runs them all.

Layout is channels-last (``[B, frames, H, W, C]``, what XLA:TPU convolutions like); Wan's is channels-first.
Per stage, as ``Decoder3d`` builds it::

    conv1 (z -> 384, 3x3x3)   middle: residual, attention (one head over a frame's pixels), residual
    per stage i: res_blocks + 1 residual blocks (RMS norm, SiLU, causal 3x3x3 conv, twice; 1x1x1 shortcut
                 when the width changes), then (but the last) an upsampler: causal 3x1x1 time conv to twice
                 the channels, split into two frames (temporal stages), 2x nearest in space, 3x3 conv to half
    head: RMS norm, SiLU, causal 3x3x3 conv to RGB

The decoder runs in ``dtype`` (float32: Wan's reference ``WanVAE(dtype=torch.float)``, and MaxDiffusion's
``AutoencoderKLWan.from_config(..., dtype=jnp.float32)`` in ``pipelines/wan/wan_pipeline.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from svgtpu.models import WAN21_VAE, VAEConfig

Params = dict[str, Any]
#: Frames of its input each causal 3x3x3 or 3x1x1 convolution keeps between chunks (Wan's ``CACHE_T``).
CACHE_T = 2
#: Most query pixels the middle block's attention scores at once (a 1440p frame has 57,600: its whole score
#: matrix in float32 would be 13 GB of a v6e chip's 32 GB).
ATTENTION_QUERY_BUDGET = 8192


def _conv_shapes(config: VAEConfig) -> dict[str, tuple[int, int, int, int, int]]:
    """Every convolution of the decoder by name: ``(kt, kh, kw, Cin, Cout)``."""
    dims = config.decoder_dims
    shapes = {"conv2": (1, 1, 1, config.z, config.z), "conv1": (3, 3, 3, config.z, dims[0])}

    def res(name, cin, cout):
        shapes[f"{name}.conv_a"] = (3, 3, 3, cin, cout)
        shapes[f"{name}.conv_b"] = (3, 3, 3, cout, cout)
        if cin != cout:
            shapes[f"{name}.shortcut"] = (1, 1, 1, cin, cout)

    res("middle.0", dims[0], dims[0])
    shapes["middle.attn.qkv"] = (1, 1, 1, dims[0], 3 * dims[0])
    shapes["middle.attn.proj"] = (1, 1, 1, dims[0], dims[0])
    res("middle.1", dims[0], dims[0])
    for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
        cin = cin // 2 if i > 0 else cin            # the previous upsampler halved the width
        for j in range(config.res_blocks + 1):
            res(f"up.{i}.{j}", cin, cout)
            cin = cout
        if i < len(dims) - 2:
            if config.temporal_up[i]:
                shapes[f"up.{i}.time_conv"] = (3, 1, 1, cout, 2 * cout)
            shapes[f"up.{i}.resample"] = (1, 3, 3, cout, cout // 2)
    shapes["head.conv"] = (3, 3, 3, dims[-1], 3)
    return shapes


def _norms(config: VAEConfig) -> dict[str, int]:
    """Every RMS norm's width by name (its ``gamma``)."""
    dims, out = config.decoder_dims, {}
    for name, (_, _, _, cin, cout) in _conv_shapes(config).items():
        if name.endswith(".conv_a"):
            out[name.replace(".conv_a", ".norm_a")] = cin
        elif name.endswith(".conv_b"):
            out[name.replace(".conv_b", ".norm_b")] = cout
    out["middle.attn.norm"] = dims[0]
    out["head.norm"] = dims[-1]
    return out


def init_decoder(key: jax.Array, config: VAEConfig = WAN21_VAE, dtype=jnp.float32) -> Params:
    """Random decoder weights (fan-in scaled normal, zero biases, unit norm gains) in ``dtype``."""
    shapes = _conv_shapes(config)
    keys = jax.random.split(key, len(shapes))
    params = {}
    for k, (name, shape) in zip(keys, shapes.items()):
        fan_in = shape[0] * shape[1] * shape[2] * shape[3]
        params[f"{name}.w"] = (jax.random.normal(k, shape, jnp.float32) / fan_in ** 0.5).astype(dtype)
        params[f"{name}.b"] = jnp.zeros((shape[-1],), dtype)
    for name, width in _norms(config).items():
        params[f"{name}.gamma"] = jnp.ones((width,), dtype)
    return params


class _Caches:
    """The chunk's caches, read in call order (``None``: zeros, the first chunk), and the next chunk's."""

    def __init__(self, caches):
        self.old = iter(caches) if caches is not None else None
        self.new = []

    def step(self, x: jax.Array, skip: bool = False) -> jax.Array:
        """The ``CACHE_T`` frames before ``x`` (this call's cache); records the next chunk's: the last
        ``CACHE_T`` frames of cache and ``x`` together (``skip``: the cache passes on unchanged)."""
        zeros = jnp.zeros((x.shape[0], CACHE_T, *x.shape[2:]), x.dtype)
        old = next(self.old) if self.old is not None else zeros
        self.new.append(old if skip else jnp.concatenate([old, x], axis=1)[:, -CACHE_T:])
        return old


def _conv(params: Params, name: str, x: jax.Array, cache: jax.Array | None = None) -> jax.Array:
    """Convolution ``name`` on ``[B, t, H, W, C]``: causal in time (``cache``: the frames before ``x``, as
    many as the kernel's time taps less one), zero-padded to the same size in space."""
    w, b = params[f"{name}.w"], params[f"{name}.b"]
    kt, kh, kw = w.shape[:3]
    if kt > 1:
        x = jnp.concatenate([cache[:, CACHE_T - (kt - 1):], x], axis=1)
    y = jax.lax.conv_general_dilated(x, w, (1, 1, 1), [(0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)],
                                     dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
    return y + b


def _rms_norm(params: Params, name: str, x: jax.Array) -> jax.Array:
    """Wan's ``RMS_norm``: ``x / max(|x|, eps) x sqrt(C) x gamma`` over the channels (``F.normalize``)."""
    norm = jnp.sqrt(jnp.sum(jnp.square(x), axis=-1, keepdims=True))
    return x / jnp.maximum(norm, 1e-12) * x.shape[-1] ** 0.5 * params[f"{name}.gamma"]


def _residual(params: Params, name: str, x: jax.Array, caches: _Caches) -> jax.Array:
    h = _conv(params, f"{name}.shortcut", x) if f"{name}.shortcut.w" in params else x
    for part in ("a", "b"):
        x = jax.nn.silu(_rms_norm(params, f"{name}.norm_{part}", x))
        x = _conv(params, f"{name}.conv_{part}", x, caches.step(x))
    return x + h


def _query_rows(H: int, W: int, budget: int = ATTENTION_QUERY_BUDGET) -> int:
    """Rows of a frame per query block: the most that divide ``H`` and keep a block within ``budget`` pixels."""
    return max(r for r in range(1, H + 1) if H % r == 0 and (r * W <= budget or r == 1))


def _attention(params: Params, name: str, x: jax.Array) -> jax.Array:
    """One head of self-attention over each frame's pixels (the middle block's ``AttentionBlock``), queries in
    blocks of whole rows (:func:`_query_rows`) so a 1440p frame's scores are never held at once."""
    B, t, H, W, C = x.shape
    h = _conv(params, f"{name}.qkv", _rms_norm(params, f"{name}.norm", x))
    q, k, v = (a.reshape(B * t, H * W, 1, C) for a in jnp.split(h, 3, axis=-1))
    rows = _query_rows(H, W)
    blocks = q.reshape(B * t, H // rows, rows * W, 1, C).swapaxes(0, 1)
    o = jax.lax.map(lambda qb: jax.nn.dot_product_attention(qb, k, v), blocks)
    return _conv(params, f"{name}.proj", o.swapaxes(0, 1).reshape(B, t, H, W, C)) + x


def _upsample(params: Params, name: str, x: jax.Array, caches: _Caches, first: bool) -> jax.Array:
    if f"{name}.time_conv.w" in params:                 # temporal: one frame becomes two (not on the first chunk)
        cache = caches.step(x, skip=first)
        if not first:
            B, t, H, W, C = x.shape
            y = _conv(params, f"{name}.time_conv", x, cache).reshape(B, t, H, W, 2, C)
            x = jnp.moveaxis(y, 4, 2).reshape(B, 2 * t, H, W, C)
    x = jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)     # nearest, 2x in space
    return _conv(params, f"{name}.resample", x)


def decode_chunk(params: Params, z: jax.Array, caches=None, *, first: bool,
                 config: VAEConfig = WAN21_VAE) -> tuple[jax.Array, list[jax.Array]]:
    """One latent frame ``z [B, 1, h, w, z]`` to pixels ``[B, 1 or 4, 8h, 8w, 3]`` (``first``: the video's first
    frame), with the caches of the previous chunk (``None`` for the first); ``(frames, the next chunk's caches)``."""
    dims, c = config.decoder_dims, _Caches(caches)
    x = _conv(params, "conv2", z)
    x = _conv(params, "conv1", x, c.step(x))
    x = _residual(params, "middle.0", x, c)
    x = _attention(params, "middle.attn", x)
    x = _residual(params, "middle.1", x, c)
    for i in range(len(dims) - 1):
        for j in range(config.res_blocks + 1):
            x = _residual(params, f"up.{i}.{j}", x, c)
        if i < len(dims) - 2:
            x = _upsample(params, f"up.{i}", x, c, first)
    x = jax.nn.silu(_rms_norm(params, "head.norm", x))
    return _conv(params, "head.conv", x, c.step(x)), c.new


def decode(params: Params, z: jax.Array, config: VAEConfig = WAN21_VAE) -> jax.Array:
    """A latent video ``[B, T, h, w, z]`` to ``[B, 1 + 4 (T - 1), 8h, 8w, 3]``, chunk by chunk."""
    frames, caches = [], None
    for i in range(z.shape[1]):
        out, caches = decode_chunk(params, z[:, i:i + 1], caches, first=i == 0, config=config)
        frames.append(out)
    return jnp.concatenate(frames, axis=1)


__all__ = ["CACHE_T", "ATTENTION_QUERY_BUDGET", "init_decoder", "decode_chunk", "decode"]
