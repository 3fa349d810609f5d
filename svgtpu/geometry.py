"""Video token geometry: how a latent video becomes a token sequence.

A video DiT sees a latent video of ``T`` frames, each a grid of ``H x W`` tokens (after the
VAE and the patch embedding).  Tokens are laid out **frame-major**: token ``i = f * F + s`` with
frame ``f < T`` and spatial position ``s < F = H * W``.  Temporal heads of Sparse VideoGen run in
**spatial-major** order instead, ``i' = s * T + f``, which turns their strided attention pattern
into a dense diagonal band (the "layout transformation").
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple, Sequence

import numpy as np
from einops import rearrange

from svgtpu.errors import BadInput

# Wan 2.1 VAE compresses 8x in space and 4x in time (first frame kept), and its DiT patchifies
# latents with patch (1, 2, 2).  Source: Wan 2.1 technical report / public config
# (vae_stride = (4, 8, 8), patch_size = (1, 2, 2)).
WAN_VAE_STRIDE = (4, 8, 8)
WAN_PATCH = (1, 2, 2)


def check_positive_int(name: str, value) -> int:
    """``value`` as an ``int`` if it is a positive integer (not a bool), else a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise BadInput(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive integers."""
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    """``a`` rounded up to a multiple of ``b``."""
    return ceil_div(a, b) * b


def parse_sizes(text: str, count: int, name: str) -> tuple[int, ...]:
    """``"3024x2048"`` -> ``(3024, 2048)``: ``count`` positive integers joined by ``x`` (or ``×``, as prose
    writes it), else a ``ValueError`` naming ``name`` (every tile and grid string of the command line is read
    here)."""
    parts = str(text).strip().lower().replace("×", "x").split("x")
    if len(parts) != count or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        example = "x".join(("3024", "2048", "8")[:count]) if count <= 3 else "x".join(["8"] * count)
        raise BadInput(f"{name} must be {count} positive integers joined by x (e.g. {example}), got {text!r}")
    return tuple(int(p) for p in parts)


class Tile(NamedTuple):
    """A kernel's tile as one value: ``block_q`` query rows by ``block_kv`` keys (a tuple, so ``q, k = tile`` and
    ``tile == (3024, 2048)`` hold).  Functions below the edges take a tile whole, never its sides as loose numbers;
    :class:`~svgtpu.setting.Setting`, :class:`~svgtpu.recipes.TileRecipe` and the masks give theirs as ``.tile``."""

    block_q: int
    block_kv: int


def check_tile(value, name: str = "tile") -> Tile:
    """``value`` as a :class:`Tile` if it is a pair of positive integers (a ``Tile``, or a tuple or list read from
    JSON), else :class:`BadInput` naming ``name`` (or the side, ``block_q`` / ``block_kv``, that is not positive)."""
    try:
        block_q, block_kv = value
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a Tile(block_q, block_kv), got {value!r}") from None
    return Tile(check_positive_int("block_q", block_q), check_positive_int("block_kv", block_kv))


def parse_tiles(text: str, name: str = "tiles") -> list[Tile]:
    """``"3024x2048,512x512"`` -> ``[Tile(3024, 2048), Tile(512, 512)]`` (BLOCK_QxBLOCK_KV, comma-separated)."""
    return [Tile(*parse_sizes(part, 2, name)) for part in str(text).split(",")]


def format_tile(tile: Tile) -> str:
    """``Tile(3024, 2048)`` -> ``"3024x2048"``: the tile string :func:`parse_tiles` reads back."""
    return f"{tile.block_q}x{tile.block_kv}"


def format_tiles(tiles: Sequence[Tile]) -> str:
    """``[Tile(3024, 2048), Tile(512, 512)]`` -> ``"3024x2048,512x512"`` (:func:`parse_tiles` reads it back)."""
    return ",".join(format_tile(tile) for tile in tiles)


#: The longest token sequence: token indices are int32 in JAX without x64 and in Pallas TPU kernels.
MAX_TOKENS = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class VideoGeometry:
    """Token grid of one video: ``T`` latent frames of ``H x W`` tokens each."""

    T: int
    H: int
    W: int
    name: str = ""

    def __post_init__(self):
        for field in ("T", "H", "W"):
            check_positive_int(f"geometry {field}", getattr(self, field))
        if self.T * self.H * self.W > MAX_TOKENS:
            raise BadInput(f"geometry {self.T}x{self.H}x{self.W} has L = {self.T * self.H * self.W:,} tokens; "
                           f"at most {MAX_TOKENS:,} (2**31 - 1): JAX (without x64) and Pallas TPU kernels "
                           "index tokens with int32")

    @property
    def F(self) -> int:
        """Tokens per frame, ``H * W``."""
        return self.H * self.W

    @property
    def L(self) -> int:
        """Sequence length, ``T * H * W``."""
        return self.T * self.F

    @property
    def pixel_frames(self) -> int:
        """Frames of the pixel video these latent frames decode to (Wan's VAE: the first, then
        ``WAN_VAE_STRIDE[0]`` per latent frame), the inverse of :meth:`from_pixels`."""
        return 1 + (self.T - 1) * WAN_VAE_STRIDE[0]

    def __str__(self) -> str:
        grid = f"{self.T}x{self.H}x{self.W}"
        return f"{self.name} ({grid})" if self.name else grid

    @classmethod
    def from_pixels(cls, width: int, height: int, frames: int, name: str = "") -> "VideoGeometry":
        """Token grid of a Wan 2.1 video of ``width x height`` pixels and ``frames`` frames.

        ``frames`` must be ``1 + 4k`` (the VAE keeps the first frame, then packs 4 per latent),
        and the pixel sizes multiples of 16 (VAE 8x times patch 2x).
        """
        st, sh, sw = WAN_VAE_STRIDE
        _, ph, pw = WAN_PATCH
        if frames <= 0 or (frames - 1) % st:
            raise BadInput(f"frames must be 1 + {st}k (e.g. 81), got {frames}")
        if width <= 0 or height <= 0 or width % (sw * pw) or height % (sh * ph):
            raise BadInput(
                f"width and height must be positive multiples of {sw * pw} pixels, "
                f"got {width}x{height}")
        return cls(1 + (frames - 1) // st, height // (sh * ph), width // (sw * pw), name)

    # -- layout permutations ---------------------------------------------------------------

    def to_spatial_major_index(self) -> np.ndarray:
        """``idx`` such that ``x_spatial_major = x_frame_major[idx]``.

        Position ``s * T + f`` of the result holds frame-major token ``f * F + s``.
        """
        return np.arange(self.L).reshape(self.T, self.F).T.reshape(-1)

    def to_frame_major_index(self) -> np.ndarray:
        """Inverse of :meth:`to_spatial_major_index`: ``x_frame_major = x_spatial_major[idx]``."""
        return np.argsort(self.to_spatial_major_index())

    def to_spatial_major(self, x):
        """Permute ``[..., L, d]`` from frame-major to spatial-major order (jit-friendly)."""
        self._check_seq(x)
        return rearrange(x, "... (t s) d -> ... (s t) d", t=self.T, s=self.F)

    def to_frame_major(self, x):
        """Permute ``[..., L, d]`` from spatial-major back to frame-major order (jit-friendly)."""
        self._check_seq(x)
        return rearrange(x, "... (s t) d -> ... (t s) d", t=self.T, s=self.F)

    def _check_seq(self, x) -> None:
        if x.ndim < 2 or x.shape[-2] != self.L:
            raise BadInput(
                f"expected an array [..., L={self.L}, d] for geometry {self}, got shape {tuple(x.shape)}")


def _wan(width: int, height: int, name: str) -> VideoGeometry:
    return VideoGeometry.from_pixels(width, height, 81, name)


#: The Wan 2.1 presets (docs/design.md, "The claims"), 81 frames (21 latent frames).
PRESETS: dict[str, VideoGeometry] = {
    "480p": _wan(832, 480, "480p"),
    "720p": _wan(1280, 720, "720p"),
    "1080p": _wan(1920, 1088, "1080p"),
    "1440p": _wan(2560, 1440, "1440p"),
    # 4K, a what-if past what Wan was trained on: 3840x2160 / VAE 8 / patch 2 = 240 x 135 tokens
    "2160p": _wan(3840, 2160, "2160p"),
}

_GRID = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def get_geometry(spec: "str | VideoGeometry", name: str = "geometry") -> VideoGeometry:
    """A preset name (``720p``) or a ``TxHxW`` token grid (``21x45x80``); ``name`` is the parameter a bad
    ``spec`` is reported under (``--resolution``)."""
    if isinstance(spec, VideoGeometry):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    match = _GRID.match(spec) if isinstance(spec, str) else None
    if not match:
        raise BadInput(
            f"{name} must be one of {', '.join(PRESETS)} or a token grid 'TxHxW' of positive "
            f"integers (e.g. 21x45x80), got {spec!r}")
    T, H, W = (int(g) for g in match.groups())
    return VideoGeometry(T, H, W)


__all__ = ["Tile", "VideoGeometry", "MAX_TOKENS", "PRESETS", "get_geometry", "check_positive_int", "check_tile",
           "ceil_div", "round_up", "parse_sizes", "parse_tiles", "format_tile", "format_tiles"]
