"""The stages of a generation outside the DiT passes: text encoding, VAE decoding, host time.

- **Text encoder**: Wan's umT5-XXL encoder, ``UMT5_XXL_ENCODER_PARAMS`` weights (the Wan 2.1
  repository ships it as ``models_t5_umt5-xxl-enc-bf16.pth``, 11.4 GB of bf16 = 5.7e9 weights), run
  once per prompt over ``text_len`` tokens (prompt + negative prompt with CFG): ``2 P`` FLOPs per
  token.
- **VAE decode**: Wan 2.1's causal 3D VAE decoder counted layer by layer (:func:`vae_decode_flops`)
  from its published structure (Wan 2.1 repository ``wan/modules/vae.py``, ``Decoder3d``: base width
  96, multipliers (1, 2, 4, 4), 2 residual blocks per stage + 1, temporal upsampling in the first
  two stages, a spatial-only third; ``WanVAE`` compresses 4x in time and 8x in space).
- **Host**: Python, scheduler and dispatch per denoising step, an assumption
  (``Setup.host_seconds_per_step``).
"""

from __future__ import annotations

from svgtpu.geometry import VideoGeometry

UMT5_XXL_ENCODER_PARAMS = 5.7e9
VAE_BASE, VAE_MULT, VAE_RES_BLOCKS, VAE_Z = 96, (1, 2, 4, 4), 2, 16
VAE_TEMPORAL_UP = (True, True, False)


def text_encoder_flops(text_len: int, prompts: int) -> float:
    """umT5-XXL encoder FLOPs for ``prompts`` prompts of ``text_len`` tokens."""
    return 2.0 * UMT5_XXL_ENCODER_PARAMS * text_len * prompts


def _conv(cin: int, cout: int, taps: int, voxels: float) -> float:
    return 2.0 * taps * cin * cout * voxels


def _res_block(cin: int, cout: int, voxels: float) -> float:
    """Two 3x3x3 causal convs (+ a 1x1x1 shortcut when the width changes)."""
    return _conv(cin, cout, 27, voxels) + _conv(cout, cout, 27, voxels) + (_conv(cin, cout, 1, voxels) if cin != cout else 0)


def vae_decode_flops(geometry: VideoGeometry) -> float:
    """FLOPs of decoding the ``T x H x W`` latent grid (patch tokens: latent = 2H x 2W) to pixels.

    Stage widths (from the deepest): 384, 384, 384, 192, 96.  Conv FLOPs ``2 x taps x Cin x Cout``
    per output voxel; the middle block's spatial self-attention ``4 N^2 C`` per frame; norms and
    activations are not counted (memory-bound, a few percent).
    """
    T, h, w = geometry.T, 2 * geometry.H, 2 * geometry.W            # latent frames and pixels / 8
    dims = [VAE_BASE * m for m in (VAE_MULT[-1], *VAE_MULT[::-1])]   # 384, 384, 384, 192, 96
    top = dims[0]
    voxels = float(T * h * w)
    flops = _conv(VAE_Z, top, 27, voxels)                             # conv_in
    flops += 2 * _res_block(top, top, voxels) + 4.0 * (h * w) ** 2 * top * T   # middle: res, attn, res
    frames = T
    for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
        cin = cin // 2 if i > 0 else cin                              # the upsampler halved the width
        for _ in range(VAE_RES_BLOCKS + 1):
            flops += _res_block(cin, cout, voxels)
            cin = cout
        if i < len(VAE_MULT) - 1:                                     # upsample: time (3x1x1) then 2x space
            if VAE_TEMPORAL_UP[i]:
                flops += _conv(cout, 2 * cout, 3, voxels)
                frames = 2 * frames - 1                               # causal: the first frame stays single
            h, w = 2 * h, 2 * w
            voxels = float(frames * h * w)
            flops += _conv(cout, cout // 2, 9, voxels)
    return flops + _conv(dims[-1], 3, 27, voxels)                     # conv_out to RGB


__all__ = ["UMT5_XXL_ENCODER_PARAMS", "text_encoder_flops", "vae_decode_flops"]
