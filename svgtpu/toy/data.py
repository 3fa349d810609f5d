"""Synthetic training video for the toy DiT: coloured shapes moving and bouncing over a static mosaic.

Each video is ``FRAMES x HEIGHT x WIDTH`` RGB pixels in ``[-1, 1]`` (channels last), fully
determined by one integer seed.  Its conditioning **label** is the motion kind shared by all of
its shapes (``MOTIONS``); label ``NULL_LABEL`` is the "unconditional" label used for
classifier-free guidance.

Why these sizes: the toy DiT patchifies with patch ``(1, 2, 2)``, so ``20 x 28`` pixels are a
``10 x 14`` token grid, ``F = 140`` tokens per frame -- deliberately *not* a multiple of 128, so
SVG's band/sink boundaries fall inside kernel tiles just like at Wan resolutions.  ``8`` frames
give ``L = 1120`` tokens.  There is no VAE: the model works directly on pixels.

Why a static mosaic behind the shapes: SVG exists because video attention heads come in two kinds,
*spatial* (look within the query's frame) and *temporal* (look at the same place in other frames).
A model only grows temporal heads if looking across frames pays.  Here every video has its own
background of dim random colours, one colour per ``BACKGROUND_CELL x BACKGROUND_CELL`` pixel cell,
the same in every frame.  A cell is exactly one token (the patch is ``(1, 2, 2)``), so a background
token's neighbours say nothing about it; the same token in the other frames says everything -- the
best denoiser of the background is an average over frames, i.e. a temporal head.  The shapes
still need spatial heads (their outline is a neighbourhood pattern within one frame).
"""

from __future__ import annotations

import numpy as np

from svgtpu.geometry import check_positive_int
from svgtpu.errors import BadInput

FRAMES, HEIGHT, WIDTH, CHANNELS = 8, 20, 28, 3

#: The conditioning labels: every shape of a video moves this way (bouncing off the walls).
MOTIONS = ("horizontal", "vertical", "diagonal")
NUM_LABELS = len(MOTIONS)
NULL_LABEL = NUM_LABELS  # the "no label" class for classifier-free guidance
#: Every label's name by index: the motions, then ``null`` (unconditional), as ``svgtpu generate --labels`` takes them.
LABEL_NAMES = (*MOTIONS, "null")

#: Saturated colours of the shapes, RGB in [0, 1]; every one has a channel of at least 0.9.
COLORS = np.array([
    [1.0, 0.15, 0.15], [0.15, 1.0, 0.15], [0.2, 0.4, 1.0],
    [1.0, 0.9, 0.1], [0.1, 0.9, 0.9], [1.0, 0.2, 0.9],
], dtype=np.float32)

#: Side in pixels of one background cell (one token with the toy DiT's (1, 2, 2) patch), and the
#: range of its brightness in [0, 1]: dim, so the saturated shapes stand out against it.
BACKGROUND_CELL = 2
BACKGROUND_RANGE = (0.05, 0.4)


def _bounce(start: float, velocity: float, low: float, high: float, frames: int) -> np.ndarray:
    """Positions of a point moving at ``velocity`` that reflects off ``low`` and ``high``."""
    span = high - low
    raw = start - low + velocity * np.arange(frames)
    folded = np.mod(raw, 2 * span)
    return low + np.where(folded > span, 2 * span - folded, folded)


def make_video(seed: int, label: int | None = None) -> tuple[np.ndarray, int]:
    """One video ``[FRAMES, HEIGHT, WIDTH, 3]`` float32 in ``[-1, 1]`` and its motion label.

    Two shapes (a square or a disc each, radius 2.5-4.5 px, distinct colours) move at 1-2 px per
    frame in the label's direction and bounce off the borders, in front of a static background:
    one random tint for the video, one random brightness per ``BACKGROUND_CELL``-pixel cell.
    ``label=None`` draws the label from the seed too.
    """
    rng = np.random.default_rng(seed)
    drawn = int(rng.integers(NUM_LABELS))
    label = drawn if label is None else int(label)
    if not 0 <= label < NUM_LABELS:
        raise BadInput(f"label must be in [0, {NUM_LABELS}) ({', '.join(MOTIONS)}), got {label}")
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32) + 0.5
    tint = rng.uniform(0.5, 1.0, CHANNELS).astype(np.float32)
    cells = rng.uniform(*BACKGROUND_RANGE, (HEIGHT // BACKGROUND_CELL, WIDTH // BACKGROUND_CELL)).astype(np.float32)
    background = np.kron(cells, np.ones((BACKGROUND_CELL, BACKGROUND_CELL), np.float32))[..., None] * tint
    video = np.broadcast_to(background, (FRAMES, HEIGHT, WIDTH, CHANNELS)).copy()
    colors = rng.choice(len(COLORS), size=2, replace=False)
    for color in colors:
        radius = rng.uniform(2.5, 4.5)
        disc = rng.random() < 0.5
        speed = rng.uniform(1.0, 2.0) * rng.choice([-1.0, 1.0])
        vx = speed if MOTIONS[label] in ("horizontal", "diagonal") else 0.0
        vy = (speed * rng.choice([-1.0, 1.0])) if MOTIONS[label] in ("vertical", "diagonal") else 0.0
        cx = _bounce(rng.uniform(radius, WIDTH - radius), vx, radius, WIDTH - radius, FRAMES)
        cy = _bounce(rng.uniform(radius, HEIGHT - radius), vy, radius, HEIGHT - radius, FRAMES)
        for f in range(FRAMES):
            dx, dy = xx - cx[f], yy - cy[f]
            inside = (dx * dx + dy * dy <= radius * radius) if disc else (
                (np.abs(dx) <= radius * 0.85) & (np.abs(dy) <= radius * 0.85))
            video[f][inside] = COLORS[color]
    return video * 2.0 - 1.0, label


def make_batch(seed: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` videos ``[batch, FRAMES, HEIGHT, WIDTH, 3]`` and labels ``[batch]`` (int32).

    Video ``i`` uses seed ``(seed, i)`` so batches with different seeds never share a video.
    """
    check_positive_int("batch", batch)
    seeds = np.random.SeedSequence([seed]).spawn(batch)
    pairs = [make_video(int(s.generate_state(1)[0])) for s in seeds]
    return np.stack([v for v, _ in pairs]), np.array([l for _, l in pairs], np.int32)


def label_index(label: str | int) -> int:
    """A label given by name (``diagonal``) or index (``2``), as its index (:data:`LABEL_NAMES`)."""
    text = str(label).strip().lower()
    if text in LABEL_NAMES:
        return LABEL_NAMES.index(text)
    if text.isdigit() and int(text) < len(LABEL_NAMES):
        return int(text)
    raise BadInput(f"labels must be among {', '.join(LABEL_NAMES)} (or their index 0-{len(LABEL_NAMES) - 1}), "
                   f"got {label!r}")


__all__ = ["FRAMES", "HEIGHT", "WIDTH", "CHANNELS", "MOTIONS", "NUM_LABELS", "NULL_LABEL", "LABEL_NAMES",
           "label_index",
           "COLORS", "BACKGROUND_CELL", "BACKGROUND_RANGE", "make_video", "make_batch"]
