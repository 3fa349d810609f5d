"""The stages of a generation outside the DiT passes: text encoding, VAE decoding, host time.

- **Text encoder**: Wan's umT5-XXL encoder, ``UMT5_XXL_ENCODER_PARAMS`` weights (the Wan 2.1
  repository ships it as ``models_t5_umt5-xxl-enc-bf16.pth``, 11.4 GB of bf16 = 5.7e9 weights), run
  once per prompt over ``text_len`` tokens (prompt + negative prompt with CFG): ``2 P`` FLOPs per
  token.
- **VAE decode**: Wan 2.1's causal 3D VAE decoder (:data:`svgtpu.models.WAN21_VAE`, its published structure:
  ``wan/modules/vae.py``, ``Decoder3d``: base width 96, multipliers (1, 2, 4, 4), 2 residual blocks per stage
  + 1, temporal upsampling in the first two stages, a spatial-only third; ``WanVAE`` compresses 4x in time
  and 8x in space).  On a TPU with a committed compiled record at the video's resolution
  (:func:`decode_record`: :mod:`svgtpu.model.vae` compiled for one chip by :mod:`svgtpu.compiler.vae_decode`)
  its static cycles (:func:`decode_cycles`); elsewhere counted layer by layer (:func:`vae_decoder_layers`:
  FLOPs and activation bytes, timed as a roofline).
- **Image conditioning (image-to-video)**: the conditioning video (the image, then zero frames) is
  VAE-encoded at full length (:func:`vae_encoder_layers`, Wan 2.1 ``wan/modules/vae.py``,
  ``Encoder3d``: widths 96, 192, 384, 384, 2 residual blocks per stage, spatial downsampling in the
  first three stages and temporal in the second and third), and Wan 2.1 I2V adds the CLIP ViT-H/14
  image encoder (``CLIP_VISION_PARAMS`` weights over 257 tokens; Wan 2.2 A14B I2V has none).
- **Host**: Python, scheduler and dispatch per denoising step, an assumption
  (``Setup.host_seconds_per_step``).

On a GPU the four stages above are not counted but measured (:func:`gpu_stage_seconds`): one published Wan 2.1
generation's stage timers on an H100 (:data:`GPU_STAGE_SECONDS`), scaled to the run's frame and GPU
(docs/plausibility.md, "GPU stages outside the DiT").
"""

from __future__ import annotations

import dataclasses

from svgtpu.errors import BadInput
from svgtpu.facts.paths import COMPILED_RECORDS
from svgtpu.inputs.records import committed_value
from svgtpu.geometry import PRESETS, VideoGeometry
from svgtpu.models import WAN21_VAE
from svgtpu.costmodel.specs import get_device

UMT5_XXL_ENCODER_PARAMS = 5.7e9
VAE = WAN21_VAE


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
    ``(taps, Cin, Cout, output voxels)``, stage widths (from the deepest) 384, 384, 384, 192, 96: ``WanVAE_``'s
    1x1x1 ``conv2`` on the latent, then ``Decoder3d`` (the middle attention's 1x1 projections among them; a
    temporal upsampler's time convolution skips the first frame, as Wan's chunked decode does)."""
    T, h, w = geometry.T, 2 * geometry.H, 2 * geometry.W            # latent frames and pixels / 8
    dims = list(VAE.decoder_dims)                                     # 384, 384, 384, 192, 96
    voxels = float(T * h * w)
    layers = [(1, VAE.z, VAE.z, voxels), (27, VAE.z, dims[0], voxels)]   # conv2, conv_in

    def res_block(cin, cout):                                        # two 3x3x3 causal convs (+ 1x1x1 shortcut)
        return [(27, cin, cout, voxels), (27, cout, cout, voxels)] + ([(1, cin, cout, voxels)] if cin != cout else [])

    attention = [(1, dims[0], 3 * dims[0], voxels), (1, dims[0], dims[0], voxels)]   # its q, k, v and out
    layers += res_block(dims[0], dims[0]) + attention + res_block(dims[0], dims[0])   # middle: res, attn, res
    frames = T
    for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
        cin = cin // 2 if i > 0 else cin                              # the upsampler halved the width
        for _ in range(VAE.res_blocks + 1):
            layers += res_block(cin, cout)
            cin = cout
        if i < len(VAE.mult) - 1:                                     # upsample: time (3x1x1) then 2x space
            if VAE.temporal_up[i]:
                layers.append((3, cout, 2 * cout, (frames - 1) * h * w))  # not on the first frame
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
    dims = [VAE.base * m for m in (1, *VAE.mult)]                     # 96, 96, 192, 384, 384
    voxels = float(frames * h * w)
    layers = [(27, 3, dims[0], voxels)]                               # conv1 to 96 channels

    def res_block(cin, cout):
        return [(27, cin, cout, voxels), (27, cout, cout, voxels)] + ([(1, cin, cout, voxels)] if cin != cout else [])

    for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
        for _ in range(VAE.res_blocks):
            layers += res_block(cin, cout)
            cin = cout
        if i < len(VAE.mult) - 1:                                     # downsample: 2x space, then time
            h, w = h // 2, w // 2
            voxels = float(frames * h * w)
            layers.append((9, cout, cout, voxels))
            if VAE.temporal_up[::-1][i]:                              # temporal in stages 2 and 3
                frames = (frames - 1) // 2 + 1
                voxels = float(frames * h * w)
                layers.append((3, cout, cout, voxels))
    layers += 2 * res_block(dims[-1], dims[-1])                       # middle: res, (attention), res
    return layers + [(27, dims[-1], 2 * VAE.z, voxels)]               # head: mean and log-variance


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
    top = VAE.decoder_dims[0]
    return convs + 4.0 * (4 * geometry.H * geometry.W) ** 2 * top * geometry.T


def vae_decode_bytes(geometry: VideoGeometry) -> float:
    """Activation traffic of decoding: each conv reads its input and writes its output, and the
    norm + SiLU before it reads and writes its input once more (``3 Cin + Cout`` values per voxel)."""
    return _conv_bytes(vae_decoder_layers(geometry))


def decode_record(geometry: VideoGeometry, device: str) -> dict | None:
    """The committed compiled record of the VAE decoder at ``geometry``'s resolution for one chip of ``device``
    (:mod:`svgtpu.compiler.vae_decode`), its value with ``record`` (the file's name); ``None`` when none is committed.
    The resolution is the preset whose frame (``H x W`` tokens) ``geometry``'s is, whatever its frame count or name
    (a published run's ``21x45x80`` grid is 720p's): a record holds one latent frame's chunks."""
    name = next((n for n, g in PRESETS.items() if (g.H, g.W) == (geometry.H, geometry.W)), None)
    if name is None:
        return None
    found = sorted((COMPILED_RECORDS / "vae-decode").glob(f"wan2.1-vae-{name}-{device}-*.json.gz"))
    if len(found) > 1:
        raise BadInput(f"need at most one compiled VAE decode record for {name} on {device}, found "
                       f"{len(found)} (`make figures` prunes stale ones)")
    if not found:
        return None
    return committed_value(found[0])


#: The GPU stages' instrument: one Wan 2.1 14B generation's stage timers (they synchronize the device,
#: ``lightx2v/utils/profiler.py``) on one NVIDIA H100 SXM5 at 480x832, 81 frames (the 480p preset's grid), umT5 over
#: 512 tokens for the prompt and the negative prompt: the one-GPU "Baseline" columns of
#: :data:`GPU_STAGE_SOURCE` (the T2V-14B run's VAE decode, the I2V-14B-480P run's VAE encode, CLIP and umT5).
#: LightX2V's VAE is Wan's chunk-by-chunk ``wan/modules/vae.py`` decode in bfloat16 (``GET_DTYPE`` admits BF16 or
#: FP16 only), where Wan's reference decodes in float32: no factor is applied, so a float32 run's VAE is priced at
#: least this fast.  umT5 (bfloat16) and CLIP (float16) ran in the precisions of Wan's reference.
GPU_STAGE_SOURCE = ("ModelTC/LightX2V c3b0d634e296bf027ab8f173ae0d5a95459ad632, "
                    "examples/BeginnerGuide/ZH_CN/DisaggSplitDeploy.md, NVIDIA H100 SXM5 80 GB")
GPU_STAGE_DEVICE, GPU_STAGE_GRID, GPU_STAGE_TOKENS = "h100", "480p", 2 * 512
GPU_STAGE_SECONDS = {"text_encoder": 0.17, "image_encoder": 0.68, "vae_encode": 1.90, "vae_decode": 2.25}


def gpu_stage_seconds(stage: str, geometry: VideoGeometry, tokens: int, hbm_bandwidth: float) -> float:
    """Seconds of ``stage`` (a key of :data:`GPU_STAGE_SECONDS`) on one GPU of ``hbm_bandwidth`` bytes/s: the measured
    seconds times the count's ratio to the measured run (the VAE's activation traffic, every convolution's voxels
    scaling with the frame; umT5's ``tokens``; CLIP's one image) and the measured H100's bandwidth over this GPU's
    (the measured decode runs at an eighth of its compute roofline: memory traffic, not the peak, limits it)."""
    if stage not in GPU_STAGE_SECONDS:
        raise BadInput(f"stage must be one of {', '.join(GPU_STAGE_SECONDS)}, got {stage!r}")
    measured = PRESETS[GPU_STAGE_GRID]
    if stage == "vae_decode":
        work = vae_decode_bytes(geometry) / vae_decode_bytes(measured)
    elif stage == "vae_encode":
        work = vae_encode_bytes(geometry) / vae_encode_bytes(measured)
    else:   # umT5 over its tokens; CLIP on the run's one image
        work = tokens / GPU_STAGE_TOKENS if stage == "text_encoder" else 1.0
    return GPU_STAGE_SECONDS[stage] * work * get_device(GPU_STAGE_DEVICE).hbm_bandwidth / hbm_bandwidth


#: Where a compiled decode chunk's static time may plausibly sit, over its layer-by-layer FLOPs at the chip's peak
#: matmul rate (:func:`chunk_flops`): never under 1 (the MXU busy every cycle), at most 8 (float32 convolutions
#: beside RMS norms, SiLU, biases and cache copies over every activation on the vector unit).  Written before the
#: record was committed, after an earlier first-chunk reading of 3.7 (docs/costmodel.md, stages).
DECODE_OVER_ROOFLINE = (1.0, 8.0)


def chunk_flops(geometry: VideoGeometry) -> dict[str, float]:
    """The layer-by-layer FLOPs (:func:`vae_decode_flops`) of a decode's first chunk (a one-latent-frame video) and
    of each later chunk (one latent frame more), at ``geometry``'s frame size."""
    first = vae_decode_flops(dataclasses.replace(geometry, T=1))
    return {"first": first, "later": vae_decode_flops(dataclasses.replace(geometry, T=2)) - first}


def decode_cycles(record: dict, latent_frames: int) -> int:
    """Static cycles of decoding ``latent_frames`` latent frames on one chip, as Wan's ``WanVAE_.decode`` loops:
    the record's first chunk (one frame out), then its later chunk (four frames out) for every other frame."""
    chunks = record["chunks"]
    return chunks["first"]["cycles"] + (latent_frames - 1) * chunks["later"]["cycles"]


__all__ = ["UMT5_XXL_ENCODER_PARAMS", "VAE", "GPU_STAGE_SOURCE", "GPU_STAGE_DEVICE", "GPU_STAGE_GRID", "GPU_STAGE_TOKENS",
           "GPU_STAGE_SECONDS", "gpu_stage_seconds", "decode_record", "decode_cycles", "DECODE_OVER_ROOFLINE", "chunk_flops", "CLIP_VISION_PARAMS", "CLIP_TOKENS", "text_encoder_flops",
           "vae_decoder_layers", "vae_decode_flops", "vae_decode_bytes", "vae_encoder_layers", "vae_encode_flops",
           "vae_encode_bytes", "clip_image_flops"]
