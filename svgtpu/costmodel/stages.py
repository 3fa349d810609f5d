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
- **Image conditioning (image-to-video)**: the conditioning video (the image, then zero frames) is
  VAE-encoded at full length (:func:`vae_encoder_layers`, Wan 2.1 ``wan/modules/vae.py``,
  ``Encoder3d``: widths 96, 192, 384, 384, 2 residual blocks per stage, spatial downsampling in the
  first three stages and temporal in the second and third), and Wan 2.1 I2V adds the CLIP ViT-H/14
  image encoder (``CLIP_VISION_PARAMS`` weights over 257 tokens; Wan 2.2 A14B I2V has none).
- **Host**: Python, scheduler and dispatch per denoising step, an assumption
  (``Setup.host_seconds_per_step``).
"""

from __future__ import annotations

from svgtpu.geometry import VideoGeometry

UMT5_XXL_ENCODER_PARAMS = 5.7e9
VAE_BASE, VAE_MULT, VAE_RES_BLOCKS, VAE_Z = 96, (1, 2, 4, 4), 2, 16
VAE_TEMPORAL_UP = (True, True, False)


#: CLIP ViT-H/14 vision tower (open_clip ``ViT-H-14``, 632 M parameters; Wan 2.1 I2V's
#: ``models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth``), 257 tokens for one 224x224 image.
CLIP_VISION_PARAMS, CLIP_TOKENS = 632e6, 257


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


def vae_encoder_layers(geometry: VideoGeometry) -> list[tuple[int, int, int, float]]:
    """The encoder's convolutions from the pixel video down to the ``T x H x W`` token grid's latent,
    as ``(taps, Cin, Cout, output voxels)`` (stride-2 convolutions counted at their output size)."""
    T, h, w = geometry.T, 16 * geometry.H, 16 * geometry.W            # latent frames; pixels
    frames = 4 * (T - 1) + 1                                          # causal VAE: 1 + 4 (T - 1) frames
    dims = [VAE_BASE * m for m in (1, *VAE_MULT)]                     # 96, 96, 192, 384, 384
    voxels = float(frames * h * w)
    layers = [(27, 3, dims[0], voxels)]                               # conv1 to 96 channels

    def res_block(cin, cout):
        return [(27, cin, cout, voxels), (27, cout, cout, voxels)] + ([(1, cin, cout, voxels)] if cin != cout else [])

    for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
        for _ in range(VAE_RES_BLOCKS):
            layers += res_block(cin, cout)
            cin = cout
        if i < len(VAE_MULT) - 1:                                     # downsample: 2x space, then time
            h, w = h // 2, w // 2
            voxels = float(frames * h * w)
            layers.append((9, cout, cout, voxels))
            if VAE_TEMPORAL_UP[::-1][i]:                              # temporal in stages 2 and 3
                frames = (frames - 1) // 2 + 1
                voxels = float(frames * h * w)
                layers.append((3, cout, cout, voxels))
    layers += 2 * res_block(dims[-1], dims[-1])                       # middle: res, (attention), res
    return layers + [(27, dims[-1], 2 * VAE_Z, voxels)]               # head: mean and log-variance


def _conv_flops(layers) -> float:
    return sum(2.0 * taps * cin * cout * voxels for taps, cin, cout, voxels in layers)


def _conv_bytes(layers) -> float:
    return sum(VAE_BYTES * (3 * cin + cout) * voxels for _, cin, cout, voxels in layers)


def vae_encode_flops(geometry: VideoGeometry) -> float:
    """FLOPs of encoding a full-length video (image-to-video conditioning): its convolutions."""
    return _conv_flops(vae_encoder_layers(geometry))


def vae_encode_bytes(geometry: VideoGeometry) -> float:
    """Activation traffic of encoding, counted as :func:`vae_decode_bytes` counts decoding."""
    return _conv_bytes(vae_encoder_layers(geometry))


def clip_image_flops() -> float:
    """CLIP ViT-H/14 on one image: ``2 P`` FLOPs per token."""
    return 2.0 * CLIP_VISION_PARAMS * CLIP_TOKENS


def vae_decode_flops(geometry: VideoGeometry) -> float:
    """FLOPs of decoding to pixels: ``2 x taps x Cin x Cout`` per output voxel of every conv, plus
    the middle block's spatial self-attention (``4 N^2 C`` per latent frame); norms and
    activations are counted in :func:`vae_decode_bytes`, not here."""
    convs = _conv_flops(vae_decoder_layers(geometry))
    top = VAE_BASE * VAE_MULT[-1]
    return convs + 4.0 * (4 * geometry.H * geometry.W) ** 2 * top * geometry.T


def vae_decode_bytes(geometry: VideoGeometry) -> float:
    """Activation traffic of decoding: each conv reads its input and writes its output, and the
    norm + SiLU before it reads and writes its input once more (``3 Cin + Cout`` values per voxel)."""
    return _conv_bytes(vae_decoder_layers(geometry))


__all__ = ["UMT5_XXL_ENCODER_PARAMS", "CLIP_VISION_PARAMS", "CLIP_TOKENS", "text_encoder_flops",
           "vae_decoder_layers", "vae_decode_flops", "vae_decode_bytes", "vae_encoder_layers", "vae_encode_flops",
           "vae_encode_bytes", "clip_image_flops"]
