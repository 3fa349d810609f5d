"""Numbers typed by hand: the published numbers prose may quote, and :func:`stray_numbers`, which finds the others.

The write-up, its appendix, the README and the notebooks' prose never contain a typed number of ours: those are
generated (:mod:`svgtpu.report.blocks`).  :func:`stray_numbers` finds numbers typed outside the markers; the tests
fail on any that is not the write-up's or a published spec (:func:`their_numbers`).
"""

from __future__ import annotations

import re

from svgtpu.facts.results import REPORTED
from svgtpu.report.blocks import BLOCK, VALUE

#: Published numbers prose may quote as theirs (besides the write-up's own, :data:`REPORTED`, and the pixel sizes and
#: latent heights and widths of the Wan presets of :data:`svgtpu.geometry.PRESETS`), by source.  Nothing of ours belongs here, and no value that is
#: also one of ours (a model's version, "Wan 2.1", is a name: :data:`NAMES`; a measured speedup of theirs that rounds
#: to one of ours is not listed, prose names it without the number; the latent frames, frame size and token count
#: derived from the presets, and our rounded tile, are ours: generated).
PUBLISHED = {
    "Wan 2.1 model configs (Wan-Video/Wan2.1): 14B and 1.3B layers, width, heads, head dim, FFN, "
    "text length; 81 frames, 50 sampling steps": (14, 40, 5120, 128, 13824, 512, 30, 1536, 12, 8960,
                                                 81, 50),
    "TPU v6e (cloud.google.com/tpu/docs/v6e): bf16 TFLOP/s, HBM GB/s and GB, ICI GB/s, v6e-8 chips, MXU "
    "side": (918, 1638, 32, 800, 8, 256),
    "MaxDiffusion's Wan Splash tile sizes, TPU lane width and the usual Splash tiles": (3024, 2048, 1024, 512, 256,
                                                                                      128),
    "Sparse VideoGen (Xi et al., ICML 2025, arXiv 2502.01776): Wan kept fraction, profiled rows, "
    "warm-up steps and layers in %, band quantum": (2025, 2502.01776, 0.3, 64, 20, 3, 128),
    "MaxDiffusion's SVG (AI-Hypercomputer/maxdiffusion pull request 480, docs/svg.md; its fixed-M splash, pull "
    "request 452): policy keys, "
    "tiles, measured v6e-8 times, FLOPs saved; Wan 2.2 configs' flow shifts and expert boundary":
        (480, 452, 0.5, 0.2, 11, 40, 1, 64, 10000, 6400, 2048, 3328, 2816, 256, 153.37, 153.46, 153.50, 127.94,
         136.11, 119.86, 27.2, 32.2, 37.3, 5.0, 12.0, 0.875, 720, 1280, 81),
    "Python minimum version (jax 0.10.2's Requires-Python)": (3.11,),
    "counting words: small integers and 100 %": tuple(range(11)) + (100,),
}

#: Names that hold a number (a model's version; its size, "1.3B", is never read as a number): stripped before numbers are read, so the number is not allowed alone.
NAMES = re.compile(r"\bWan ?2\.[12]\b")
_STRIPPED = [BLOCK, VALUE] + [re.compile(p, re.DOTALL) for p in (   # generated blocks and values, then
    r"```.*?```", r"`[^`\n]*`", r"<!--.*?-->", r"\]\([^)]*\)", r"https?://\S+")] + [NAMES]  # code, comments, links
#: A number as prose writes it: 1,638 / 88.2 / 8e18 / 1.69x; not part of a name (C1, v6e, bf16, 1440p,
#: 3D) and not a version (0.10.2).
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.,]?\d)(?![a-wyzA-Z])"
                     r"|(?<![\w.])\d+(?:\.\d+)?(?:e\d+)?(?!\.?\d)(?![a-wyzA-Z_])")


def their_numbers() -> set[float]:
    """Every number prose may state without a marker: the write-up's, the presets', :data:`PUBLISHED`."""
    from svgtpu.geometry import PRESETS, WAN_PATCH, WAN_VAE_STRIDE

    allowed = {float(v) for values in PUBLISHED.values() for v in values}
    for value in REPORTED.values():
        allowed |= {float(value), round(100 * value, 6)}
    for g in PRESETS.values():
        pixels = [n * s * p for n, s, p in zip((g.H, g.W), WAN_VAE_STRIDE[1:], WAN_PATCH[1:])]
        allowed |= {float(v) for v in (g.H, g.W, *pixels)}   # not T, F, L: latent frames, frame size, tokens
    allowed |= {float(v) for v in WAN_VAE_STRIDE + WAN_PATCH}
    return allowed


def stray_numbers(text: str, allowed: set[float] | None = None) -> list[str]:
    """Numbers stated in ``text`` outside markers, code and links that are not in ``allowed``
    (default :func:`their_numbers`): numbers of ours typed by hand, each with a little context."""
    allowed = their_numbers() if allowed is None else allowed
    for pattern in _STRIPPED:
        text = pattern.sub(" ", text)
    strays = []
    for match in _NUMBER.finditer(text):
        value = float(match.group().replace(",", ""))
        if not any(abs(value - a) <= 1e-9 * max(1.0, abs(a)) for a in allowed):
            context = " ".join(text[max(0, match.start() - 40):match.end() + 20].split())
            strays.append(f"{match.group()!r} in \"...{context}...\"")
    return strays


__all__ = ["PUBLISHED", "NAMES", "their_numbers", "stray_numbers"]
