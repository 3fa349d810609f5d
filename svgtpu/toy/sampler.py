"""Rectified-flow Euler sampler with timestep shift and classifier-free guidance, and video output.

Sampling integrates ``dx/dt = v(x, t)`` from pure noise at ``t = 1`` to a video at ``t = 0`` in
``num_steps`` Euler steps.  The time grid is uniform then *shifted*, ``t' = s t / (1 + (s - 1) t)``
(Wan/SD3; ``s > 1`` spends more steps at high noise).  Guidance mixes the conditional and the
null-label predictions, ``v = v_null + g (v_label - v_null)``, both in one batched forward.

Step ``i`` (0 = noisiest) and ``num_steps`` reach the attention backend, which is how SVG runs
its dense warm-up; ``i`` is passed as data so one compiled program serves every step.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from tqdm.auto import tqdm

from svgtpu.attention import sharding
from svgtpu.attention.base import Attention, dense_attention
from svgtpu.toy.dit import DiTConfig, Params, forward
from svgtpu.geometry import check_positive_int
from svgtpu.errors import BadInput


def time_grid(num_steps: int, shift: float = 1.0) -> np.ndarray:
    """``num_steps + 1`` flow times from 1 down to 0, shifted by ``shift``."""
    check_positive_int("num_steps", num_steps)
    if not (shift > 0 and math.isfinite(shift)):
        raise BadInput(f"shift must be a positive number, got {shift}")
    t = np.linspace(1.0, 0.0, num_steps + 1)
    return shift * t / (1.0 + (shift - 1.0) * t)


@functools.partial(jax.jit, static_argnames=("config", "attention", "num_steps", "with_info"))
def guided_velocity(params: Params, x: jax.Array, t: jax.Array, labels: jax.Array, guidance: jax.Array,
                    step: jax.Array, key: jax.Array, *, config: DiTConfig, attention: Attention,
                    num_steps: int, with_info: bool = False):
    """CFG velocity for ``x [B, ...]`` at scalar time ``t``; also the attention infos if asked."""
    batch = x.shape[0]
    both = jnp.concatenate([labels, jnp.full_like(labels, config.num_labels)])
    out = forward(params, config, jnp.concatenate([x, x]), jnp.full((2 * batch,), t), both,
                  attention=attention, step=step, num_steps=num_steps, key=key, with_info=with_info)
    v, info = out if with_info else (out, None)
    v_label, v_null = v[:batch], v[batch:]
    return v_null + guidance * (v_label - v_null), info


def sample(params: Params, config: DiTConfig, labels, *, seed: int = 0, num_steps: int = 20,
           guidance: float = 3.0, shift: float = 1.0, attention: Attention = dense_attention,
           with_info: bool = False, progress: bool = True, mesh: "Mesh | None" = None):
    """Videos ``[B, T, H, W, C]`` in ``[-1, 1]`` (float32 numpy), one per label.

    The starting noise depends only on ``seed`` and the batch shape, so dense and sparse runs with
    the same seed start from the same noise.  With ``with_info`` also returns the per-step list of
    what the attention backend reported (see :func:`svgtpu.toy.dit.forward`).

    With a ``mesh`` (:func:`svgtpu.attention.sharding.mesh_for_model`) the run is sharded: weights replicated,
    the CFG batch split over the ``data`` axis and self-attention head-parallel over ``heads``
    (:func:`svgtpu.attention.sharding.sharded_backend`); every step stays on the devices.  The mesh
    may span several processes (``jax.distributed``): every process then calls this with the same
    arguments, and every process gets the whole video back.
    """
    labels = jnp.asarray(np.asarray(labels, np.int32).reshape(-1))
    if labels.size == 0 or int(labels.min()) < 0 or int(labels.max()) > config.num_labels:
        raise BadInput(f"labels must be in [0, {config.num_labels}] ({config.num_labels} = null), got {labels}")
    if not math.isfinite(guidance):
        raise BadInput(f"guidance must be a finite number, got {guidance}")
    ts = time_grid(num_steps, shift)
    noise_key, attention_key = jax.random.split(jax.random.PRNGKey(seed))
    x = jax.random.normal(noise_key, (labels.shape[0], config.frames, config.height, config.width,
                                      config.channels))
    put = lambda value: value  # noqa: E731
    if mesh is not None:
        if with_info:
            raise BadInput("with_info is not supported with a mesh (per-head infos are not sharded)")
        attention = sharding.sharded_backend(attention, mesh)
        # every host holds the same inputs; they enter the (possibly multi-process) mesh replicated
        put = lambda value: jax.tree.map(functools.partial(sharding.global_array,  # noqa: E731
                                                           sharding=sharding.replicated(mesh)), value)
        params, x, labels = put(params), put(x), put(labels)
    infos = []
    for step in tqdm(range(num_steps), desc="sample", disable=not progress or jax.process_index() > 0):
        v, info = guided_velocity(params, x, put(np.float32(ts[step])), labels, put(np.float32(guidance)),
                                  put(np.int32(step)), put(np.asarray(jax.random.fold_in(attention_key, step))),
                                  config=config, attention=attention,
                                  num_steps=num_steps, with_info=with_info)
        x = x + float(ts[step + 1] - ts[step]) * v
        infos.append(info)
    video = sharding.to_host(x).astype(np.float32)
    return (video, infos) if with_info else video


# -- writing videos ----------------------------------------------------------------------------

def to_uint8(video: np.ndarray) -> np.ndarray:
    """``[-1, 1]`` floats to ``uint8`` pixels."""
    return np.round((np.clip(np.asarray(video), -1.0, 1.0) + 1.0) * 127.5).astype(np.uint8)


def video_statistics(videos: np.ndarray) -> dict:
    """What a run produced, exactly: the SHA-256 of its ``uint8`` pixels and each video's mean pixel
    value; equal for runs whose GIFs are byte-identical (one process vs several, say)."""
    import hashlib
    pixels = to_uint8(videos)
    return {"pixels_sha256": hashlib.sha256(pixels.tobytes()).hexdigest(), "shape": list(pixels.shape),
            "mean_pixel": [round(float(p.mean()), 6) for p in pixels]}


def contact_sheet(videos: np.ndarray, scale: int = 4, gap: int = 1) -> np.ndarray:
    """One image ``uint8 [rows, cols, 3]``: a row per video, its frames side by side, upscaled."""
    pixels = to_uint8(videos).repeat(scale, axis=2).repeat(scale, axis=3)
    B, T, H, W, C = pixels.shape
    sheet = np.full((B * (H + gap) - gap, T * (W + gap) - gap, C), 255, np.uint8)
    for b in range(B):
        for f in range(T):
            sheet[b * (H + gap):b * (H + gap) + H, f * (W + gap):f * (W + gap) + W] = pixels[b, f]
    return sheet


def sheet_path(gif: str) -> str:
    """The contact sheet written beside the GIF ``gif``: the same name as ``.png``."""
    return str(gif)[:-4] + ".png"


def _gif_path(path: str) -> None:
    """Refuse (:class:`BadInput`) a path that is no ``.gif``, where it or its contact sheet exists already (never
    overwritten) or cannot be written (:func:`~svgtpu.facts.outputs.check_output`)."""
    from svgtpu.facts.outputs import check_output
    if not str(path).endswith(".gif"):
        raise BadInput(f"out must be a .gif path, got {path!r}")
    check_output("out", path, derived=(sheet_path(path),), new=True)


def save_video(videos: np.ndarray, path: str, scale: int = 4, fps: int = 4) -> tuple[str, str]:
    """Write an animated GIF (videos side by side) at ``path`` and a contact-sheet PNG next to it, atomically."""
    from PIL import Image

    from svgtpu.facts.outputs import atomic_path

    _gif_path(path)
    pixels = to_uint8(videos).repeat(scale, axis=2).repeat(scale, axis=3)
    B, T, H, W, C = pixels.shape
    frames = [Image.fromarray(np.concatenate([np.pad(pixels[b, f], ((0, 0), (0, 1 if b < B - 1 else 0), (0, 0)),
                                                     constant_values=255) for b in range(B)], axis=1))
              for f in range(T)]
    with atomic_path(path) as tmp:
        frames[0].save(tmp, save_all=True, append_images=frames[1:], duration=1000 // fps, loop=0)
    sheet = sheet_path(path)
    with atomic_path(sheet) as tmp:
        Image.fromarray(contact_sheet(videos, scale)).save(tmp)
    return path, sheet


# -- svgtpu generate ---------------------------------------------------------------------------

#: The most Euler steps a sampling command takes: each is a whole forward pass (two with guidance) of every
#: video, and the shipped samples take 20; a count past this is a slip of the keyboard, not a request.
MAX_STEPS = 1000


def check_steps(steps: int, parameter: str = "steps") -> int:
    """``steps`` as a sampling step count in [1, :data:`MAX_STEPS`], else :class:`BadInput`."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise BadInput(f"{parameter} must be an integer from 1 to {MAX_STEPS} (Euler steps, each a forward pass of "
                       f"every video; the shipped samples take 20), got {steps!r}")
    return steps


def check_generate(attention: str, *, align: str | None = None, kept: float | None = None, devices: int = 1,
                   out: str | None = None, steps: int = 20) -> None:
    """The option rules of :func:`generate`, checked before any work (and before a launcher starts
    processes): ``align`` and ``kept`` shape SVG's mask (``kept`` SVG's only), SVG2 runs on one device,
    ``steps`` within :data:`MAX_STEPS`, ``out`` a new ``.gif`` whose folder can be made."""
    from svgtpu.attention.backends import ATTENTION_BACKENDS
    from svgtpu.masks.core import check_kept
    check_steps(steps)
    if attention not in ATTENTION_BACKENDS:
        raise BadInput(f"attention must be one of {', '.join(ATTENTION_BACKENDS)}, got {attention!r}")
    if kept is not None:
        check_kept(kept)
        if attention != "svg":
            raise BadInput(f"kept sets SVG's kept fraction: it needs attention svg, got {attention}")
    if align and attention not in ("svg", "svg2"):
        raise BadInput(f"align needs attention svg or svg2, got {attention}")
    if attention == "svg2" and devices > 1:
        raise BadInput("devices must be 1 with attention svg2 (its per-layer warm-start state is not sharded)")
    if out is not None:
        _gif_path(out)


def generate(checkpoint, *, attention: str = "dense", align: str | None = None, kept: float | None = None,
             seed: int = 0, steps: int = 20, guidance: float = 3.0, shift: float = 1.0, labels=None,
             out: str | None = None, devices: int = 1) -> dict:
    """``svgtpu generate``: sample one video per motion label (default: all) from the toy DiT at
    ``checkpoint`` with the ``attention`` backend, sharded over ``devices`` (with ``jax.distributed`` up,
    the devices of every process); process 0 writes the GIF and its contact sheet at ``out`` (default: a fresh
    dated path beside :data:`~svgtpu.facts.paths.GENERATED_VIDEO`, under the checkout's ``build/``)."""
    from svgtpu.attention.backends import attention_backend
    from svgtpu.attention.sharding import mesh_for_model
    from svgtpu.attention.svg import SVGConfig
    from svgtpu.attention.svg2 import SVG2Config
    from svgtpu.errors import user_file
    from svgtpu.facts.outputs import dated_path
    from svgtpu.facts.paths import GENERATED_VIDEO
    from svgtpu.facts.results import provenance
    from svgtpu.kernels.common import resolve_interpret
    from svgtpu.setting import SMALL_TILE
    from svgtpu.toy.data import LABEL_NAMES
    from svgtpu.toy.dit import load_checkpoint
    import time

    out = str(dated_path(GENERATED_VIDEO) if out is None else out)
    check_generate(attention, align=align, kept=kept, devices=devices, out=out, steps=steps)
    params, config = load_checkpoint(str(checkpoint))
    labels = list(range(config.num_labels)) if labels is None else list(labels)
    tile = {"block_q": SMALL_TILE.block_q, "block_kv": SMALL_TILE.block_kv}   # the toy DiT's tile
    backend = attention_backend(attention, config.geometry, tile=SMALL_TILE.tile,
                                svg_config=SVGConfig(kept=kept, align=align, **tile) if attention == "svg" else None,
                                svg2_config=SVG2Config(align=align, **tile) if attention == "svg2" else None)
    mesh = mesh_for_model(devices, config.heads) if devices > 1 else None
    start = time.perf_counter()
    video = sample(params, config, labels, seed=seed, num_steps=steps, guidance=guidance, shift=shift,
                   attention=backend, mesh=mesh)
    seconds = time.perf_counter() - start
    gif = png = None
    if jax.process_index() == 0:   # one writer
        with user_file("out", out):
            gif, png = save_video(video, out)
    return {"checkpoint": str(checkpoint), "attention": attention, "align": align, "seed": seed, "steps": steps,
            "guidance": guidance, "shift": shift, "labels": [LABEL_NAMES[l] for l in labels],
            "shape": list(video.shape), "gif": gif, "contact_sheet": png, "sample_seconds": seconds,
            "devices": devices, "mesh": dict(mesh.shape) if mesh is not None else None,
            "processes": jax.process_count(), "process_index": jax.process_index(), "video": video_statistics(video),
            "provenance": provenance("measured", interpret=attention != "dense" and resolve_interpret(None))}


def format_generate(result: dict) -> str:
    """:func:`generate`'s result (or a launcher's, with ``launcher``) as one table row, its long cells (the files
    written, the labels) keyed to a legend beneath."""
    from svgtpu.facts.tables import format_table
    table = format_table([{k: str(result[k]) if isinstance(result[k], list) else result[k] for k in (
        "attention", "align", "seed", "steps", "labels", "sample_seconds", "gif", "contact_sheet")}], fit=True)
    launcher = result.get("launcher")
    return table + (f"\n({launcher['processes']} processes on localhost, {launcher['wall_seconds']:.1f} s)"
                    if launcher else "")


__all__ = ["MAX_STEPS", "check_steps", "time_grid", "guided_velocity", "sample", "to_uint8", "video_statistics", "contact_sheet", "sheet_path", "save_video",
           "check_generate", "format_generate", "generate"]
