"""The stages of a generation outside the DiT passes: text encoding, VAE decoding, host time.

- **Text encoder**: Wan's umT5-XXL encoder, ``UMT5_XXL_ENCODER_PARAMS`` weights (the Wan 2.1
  repository ships it as ``models_t5_umt5-xxl-enc-bf16.pth``, 11.4 GB of bf16 = 5.7e9 weights), run
  once per prompt over ``text_len`` tokens (prompt + negative prompt with CFG): ``2 P`` FLOPs per
  token.
- **VAE decode**: Wan 2.1's causal 3D VAE decoder counted layer by layer (:func:`vae_decoder_layers`:
  FLOPs and activation bytes, timed as a roofline)
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


#: Bytes per VAE activation value: Wan's VAE decodes in float32 (diffusers' Wan examples load
#: ``AutoencoderKLWan`` with ``torch_dtype=torch.float32``).
VAE_BYTES = 4


def vae_decoder_layers(geometry: VideoGeometry) -> list[tuple[int, int, int, float]]:
    """The decoder's convolutions for the ``T x H x W`` token grid (latent = 2H x 2W), as
    ``(taps, Cin, Cout, output voxels)``, stage widths (from the deepest) 384, 384, 384, 192, 96."""
    T, h, w = geometry.T, 2 * geometry.H, 2 * geometry.W            # latent frames and pixels / 8
    dims = [VAE_BASE * m for m in (VAE_MULT[-1], *VAE_MULT[::-1])]   # 384, 384, 384, 192, 96
    voxels = float(T * h * w)
    layers = [(27, VAE_Z, dims[0], voxels)]                          # conv_in

    def res_block(cin, cout):                                        # two 3x3x3 causal convs (+ 1x1x1 shortcut)
        return [(27, cin, cout, voxels), (27, cout, cout, voxels)] + ([(1, cin, cout, voxels)] if cin != cout else [])

    layers += 2 * res_block(dims[0], dims[0])                        # middle: res, (attention), res
    frames = T
    for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
        cin = cin // 2 if i > 0 else cin                              # the upsampler halved the width
        for _ in range(VAE_RES_BLOCKS + 1):
            layers += res_block(cin, cout)
            cin = cout
        if i < len(VAE_MULT) - 1:                                     # upsample: time (3x1x1) then 2x space
            if VAE_TEMPORAL_UP[i]:
                layers.append((3, cout, 2 * cout, voxels))
                frames = 2 * frames - 1                               # causal: the first frame stays single
            h, w = 2 * h, 2 * w
            voxels = float(frames * h * w)
            layers.append((9, cout, cout // 2, voxels))
    return layers + [(27, dims[-1], 3, voxels)]                      # conv_out to RGB


def vae_decode_flops(geometry: VideoGeometry) -> float:
    """FLOPs of decoding to pixels: ``2 x taps x Cin x Cout`` per output voxel of every conv, plus
    the middle block's spatial self-attention (``4 N^2 C`` per latent frame); norms and
    activations are counted in :func:`vae_decode_bytes`, not here."""
    convs = sum(2.0 * taps * cin * cout * voxels for taps, cin, cout, voxels in vae_decoder_layers(geometry))
    top = VAE_BASE * VAE_MULT[-1]
    return convs + 4.0 * (4 * geometry.H * geometry.W) ** 2 * top * geometry.T


def vae_decode_bytes(geometry: VideoGeometry) -> float:
    """Activation traffic of decoding: each conv reads its input and writes its output, and the
    norm + SiLU before it reads and writes its input once more (``3 Cin + Cout`` values per voxel)."""
    return sum(VAE_BYTES * (3 * cin + cout) * voxels for _, cin, cout, voxels in vae_decoder_layers(geometry))


__all__ = ["UMT5_XXL_ENCODER_PARAMS", "text_encoder_flops", "vae_decoder_layers", "vae_decode_flops",
           "vae_decode_bytes"]
