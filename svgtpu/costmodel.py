"""A readable cost model of video DiT inference: attention share, dense vs SVG time, speedup.

There is no TPU here, so claims C1 (1.69x end to end at 1440p, over 16 minutes saved), C2 (88.2 %
of the time in self-attention at 1440p) and C5 (attention grows quadratically and drives latency)
are checked with a model anyone can read, run and argue with:

- **Device specs as data** (:class:`DeviceSpec`): peak matmul FLOP/s, HBM bandwidth, and the rates
  of the vector unit (elementwise f32 ops) and of the transcendental unit (``exp``), each constant
  with its public source.  For TPUs the vector rates are *derived*: clock = peak FLOP/s / (2 x MXU
  cells), VPU = 8 x 128 lanes x VALU slots x clock, EUP = one 8 x 128 vreg every 2 cycles.
- **One DiT forward pass as ops** (:func:`forward_ops`): QKV/O projections, cross-attention, MLP,
  norms/modulation/RoPE/residuals, each with FLOPs, bytes and vector work; every op is a roofline
  ``max(compute, memory)`` divided by a stated efficiency.
- **Self-attention as tiles** (:func:`attention_head_seconds`): the mask is classified into
  empty/partial/full ``block_q x block_kv`` tiles (:mod:`svgtpu.tiles`).  Empty tiles cost nothing;
  a computed tile costs ``max(MXU time for QK^T and PV, VPU time for max/sub/sum/cast,
  EUP time for exp, HBM time for K and V)``; partial tiles add the element-wise masking work to
  the VPU.  The *fast path* skips masking on full tiles; without it (what Splash Attention does)
  every computed tile pays the masking work as soon as the mask has any partial tile.
- **Multi-chip** as Ulysses sequence parallelism (:mod:`svgtpu.sharding`): every op but
  self-attention runs on ``1 / chips`` of the tokens; around self-attention four all-to-alls (Q, K,
  V in, O out) re-shard the sequence into heads, so each chip runs ``ceil(heads / chips)`` heads
  over the whole sequence.  The all-to-alls cost ICI time (:func:`communication_seconds`), counted
  without overlap with compute (an upper bound on its share).
- **The SVG schedule** (:func:`model_video`): dense warm-up (first 20 % of steps, first 3 % of
  layers, rounded up), per-head profiling of ``r = 64`` query rows, the layout transformation's
  HBM traffic for temporal heads, and classifier-free guidance (2 passes per step).

The efficiencies (:class:`Efficiency`) are set once from public figures (see their comments) and
**never fitted to the claims**; :func:`sensitivity` sweeps them over a band.  The one structural
assumption that moves the results most: with ``head_dim = 128`` on v6e's 256 x 256 MXUs, QK^T
(contraction 128) and PV (output width 128) use half of the array (``DeviceSpec.matmul_tile``; set
it to ``None`` to drop the penalty), which makes dense attention MXU-bound on v6e.  Every number this
module reports is labelled ``modeled-<device>``.  VAE decoding and the text encoder are outside
the model (they run once per video and are not part of the DiT passes).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Iterable

import numpy as np

from svgtpu.geometry import PRESETS, VideoGeometry, ceil_div, check_positive_int, get_geometry
from svgtpu.masks import DenseMask, align, svg_mask
from svgtpu.tiles import TileStats, classify

#: What the write-up reports (design.md section 1); the model is compared with these, never fit to them.
REPORTED = {"C1_speedup": 1.69, "C1_saved_minutes": 16.0, "C2_attention_share": 0.882}


# -- devices ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """Per-chip rates of one accelerator (or of this CPU, measured)."""

    name: str
    matmul_flops: float        # peak dense matmul FLOP/s per chip (bf16 on accelerators)
    hbm_bandwidth: float       # main-memory bytes/s per chip
    hbm_bytes: float           # main-memory capacity per chip
    vector_ops: float          # elementwise f32 ops/s per chip (TPU VPU, GPU CUDA cores)
    exp_ops: float             # transcendental (exp) element-ops/s per chip (TPU EUP, GPU SFU)
    matmul_tile: int | None    # systolic array side; a contraction or output width below it
                               # leaves part of the array idle (None: no such penalty)
    source: str                # public sources of the constants above
    ici_bandwidth: float | None = None  # bidirectional chip-to-chip bytes/s per chip (None: unknown)
    derivation: str = ""       # how derived constants were computed

    def __post_init__(self):
        for field in ("matmul_flops", "hbm_bandwidth", "hbm_bytes", "vector_ops", "exp_ops"):
            value = getattr(self, field)
            if not value > 0:
                raise ValueError(f"DeviceSpec.{field} must be positive, got {value!r}")
        if not self.source:
            raise ValueError("DeviceSpec.source must cite where the constants come from")

    def matmul_utilization(self, width: int) -> float:
        """Fraction of the MXU used along one side when a matmul's contraction (or output) width
        is ``width``: a ``256 x 256`` array fed a 128-wide contraction idles half its cells."""
        return 1.0 if self.matmul_tile is None else min(1.0, width / self.matmul_tile)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# VPU geometry shared by all TPU generations here: one vreg is 8 sublanes x 128 lanes of 32 bit
# (Cloud TPU v6e system architecture page: "a 128x8 vector processing unit (VPU) with 128 lanes x
# 8 sublanes").
VREG_ELEMENTS = 8 * 128
# Two vector ALUs per lane and sublane: Hot Chips 32 (2020), Norrie & Patil, "Google's Training
# Chips Revealed: TPUv2 and TPUv3": 128 lanes x 8 sublanes x 2 ALUs = 2048 vector ALUs, fed by a
# 322-bit VLIW bundle with 2 vector-ALU slots.  Later generations are assumed to keep two (no
# public figure; Efficiency.vector_scale = 0.5 in the sensitivity band covers one).
VALU_SLOTS = 2
# The EUP (exp, rsqrt, tanh, reciprocal) accepts one vreg every 2 cycles: cycle table of the
# public Pallas TPU tutorial (ayaka14732.github.io/pallas-tpu-tutorial, chapter 1, "EUP: vpow2 ...
# interval 2").
EUP_CYCLES_PER_VREG = 2


def tpu_spec(name: str, *, matmul_flops: float, hbm_bandwidth: float, hbm_bytes: float,
             cores: int, mxus_per_core: int, mxu_dim: int, ici_bandwidth: float, source: str) -> DeviceSpec:
    """A TPU spec whose vector rates are derived from its peak matmul rate and MXU geometry.

    ``clock = matmul_flops / (cores * mxus_per_core * mxu_dim^2 * 2 FLOP per MAC)``;
    VPU rate ``= cores * VALU_SLOTS * 1024 * clock``; EUP rate ``= cores * 1024 * clock / 2``.
    """
    clock = matmul_flops / (cores * mxus_per_core * mxu_dim ** 2 * 2)
    derivation = (f"clock = {matmul_flops:.4g} FLOP/s / ({cores} core x {mxus_per_core} MXU x "
                  f"{mxu_dim}^2 x 2) = {clock / 1e9:.3g} GHz; VPU = {cores} x {VALU_SLOTS} VALU x "
                  f"8x128 lanes x clock; EUP = {cores} x 8x128 / {EUP_CYCLES_PER_VREG} cycles x clock")
    return DeviceSpec(name, matmul_flops, hbm_bandwidth, hbm_bytes,
                      vector_ops=cores * VALU_SLOTS * VREG_ELEMENTS * clock,
                      exp_ops=cores * VREG_ELEMENTS * clock / EUP_CYCLES_PER_VREG,
                      matmul_tile=mxu_dim, source=source, derivation=derivation,
                      ici_bandwidth=ici_bandwidth)


DEVICES: dict[str, DeviceSpec] = {
    # Cloud TPU docs, "TPU v6e" system architecture: 918 TFLOP/s bf16, 1638 GB/s HBM, 32 GB HBM,
    # one TensorCore per chip with two 256x256 MXUs and a 128x8 VPU; "Bidirectional inter-chip
    # interconnect (ICI) bandwidth (per chip): 800 GBps", 4 ICI ports, 2D torus.  (If the chip had four MXUs at
    # half the derived clock, the VPU/EUP rates would halve: Efficiency.vector_scale = 0.5 in the
    # sensitivity band covers that.)
    "v6e": tpu_spec("v6e", matmul_flops=918e12, hbm_bandwidth=1638e9, hbm_bytes=32e9, cores=1,
                    mxus_per_core=2, mxu_dim=256, ici_bandwidth=800e9,
                    source="Cloud TPU docs 'TPU v6e' (system architecture + key specifications table)"),
    # Cloud TPU docs, "TPU v5e": 197 TFLOP/s bf16, 16 GB HBM2 at 819 GB/s, one TensorCore with four
    # MXUs (128x128: JAX 'TPU Hardware Reference' / Pallas TPU docs).  Derived clock 1.5 GHz.
    # ICI: "Bidirectional inter-chip interconnect (ICI) bandwidth (per chip): 400 GBps".
    "v5e": tpu_spec("v5e", matmul_flops=197e12, hbm_bandwidth=819e9, hbm_bytes=16e9, cores=1,
                    mxus_per_core=4, mxu_dim=128, ici_bandwidth=400e9,
                    source="Cloud TPU docs 'TPU v5e' (system architecture + key chip specifications)"),
    # Cloud TPU docs, "TPU v5p": 459 TFLOP/s bf16, 95 GB HBM2e at 2765 GB/s, four MXUs per
    # TensorCore; two TensorCores per chip (JAX 'TPU Hardware Reference': dual-core v4/v5p).
    # ICI: "Bidirectional inter-chip interconnect (ICI) bandwidth per chip (GBps): 1200".
    "v5p": tpu_spec("v5p", matmul_flops=459e12, hbm_bandwidth=2765e9, hbm_bytes=95e9, cores=2,
                    mxus_per_core=4, mxu_dim=128, ici_bandwidth=1200e9,
                    source="Cloud TPU docs 'TPU v5p' (key specifications); JAX docs 'TPU Hardware Reference'"),
    # NVIDIA H100 SXM datasheet: 989 TFLOP/s dense bf16 tensor core, 80 GB HBM3 at 3.35 TB/s,
    # 67 TFLOP/s FP32 non-tensor (= 33.5e12 FMA lanes/s); exp on the SFUs: FlashAttention-3 paper
    # (Shah et al. 2024): "989 TFLOPS of FP16 matmul but only 3.9 TFLOPS of special functions".
    # NVLink 4: 900 GB/s bidirectional per GPU (same datasheet; H200 likewise).
    "h100": DeviceSpec("h100", matmul_flops=989e12, hbm_bandwidth=3.35e12, hbm_bytes=80e9,
                       vector_ops=33.5e12, exp_ops=3.9e12, matmul_tile=None, ici_bandwidth=900e9,
                       source="NVIDIA H100 SXM datasheet; FlashAttention-3 paper (Shah et al. 2024) for SFU rate"),
    # NVIDIA H200 SXM datasheet: same GH100 compute as H100 (989 TFLOP/s dense bf16), 141 GB HBM3e
    # at 4.8 TB/s.
    "h200": DeviceSpec("h200", matmul_flops=989e12, hbm_bandwidth=4.8e12, hbm_bytes=141e9,
                       vector_ops=33.5e12, exp_ops=3.9e12, matmul_tile=None, ici_bandwidth=900e9,
                       source="NVIDIA H200 SXM datasheet; compute rates as H100 (same GH100 die)"),
}


def get_device(name: "str | DeviceSpec") -> DeviceSpec:
    """A spec by name (``v6e``, ``v5e``, ``v5p``, ``h100``, ``h200``); ``cpu`` is measured, see
    :func:`calibrate_cpu`."""
    if isinstance(name, DeviceSpec):
        return name
    if name not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)} (or cpu, measured), got {name!r}")
    return DEVICES[name]


# -- models -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The transformer shape a cost depends on (one Wan-style DiT block repeated ``layers`` times)."""

    name: str
    layers: int
    dim: int
    heads: int
    head_dim: int
    ffn: int
    text_len: int       # cross-attention context tokens
    patch_in: int       # values per token entering the patch embedding (and leaving the head)
    source: str

    def __post_init__(self):
        for field in ("layers", "dim", "heads", "head_dim", "ffn", "text_len", "patch_in"):
            check_positive_int(f"ModelConfig.{field}", getattr(self, field))
        if self.heads * self.head_dim != self.dim:
            raise ValueError(f"ModelConfig: heads * head_dim = {self.heads * self.head_dim} != dim {self.dim}")

    @classmethod
    def from_dit(cls, config) -> "ModelConfig":
        """The toy DiT (:class:`svgtpu.dit.DiTConfig`) as a cost-model config."""
        return cls("toy", config.depth, config.dim, config.heads, config.head_dim,
                   config.dim * config.mlp_ratio, config.context_tokens, config.patch_dim,
                   source="svgtpu.dit.DiTConfig")


# Wan 2.1 public config (Wan-AI/Wan2.1-T2V-14B and -1.3B config.json; Wan 2.1 technical report):
# in_dim 16 latent channels x patch (1, 2, 2) = 64 values per token, text_len 512 (umT5 tokens).
MODELS: dict[str, ModelConfig] = {
    "wan2.1-14b": ModelConfig("wan2.1-14b", layers=40, dim=5120, heads=40, head_dim=128, ffn=13824,
                              text_len=512, patch_in=64, source="Wan2.1-T2V-14B config.json"),
    "wan2.1-1.3b": ModelConfig("wan2.1-1.3b", layers=30, dim=1536, heads=12, head_dim=128, ffn=8960,
                               text_len=512, patch_in=64, source="Wan2.1-T2V-1.3B config.json"),
}
MODEL_NAMES = (*MODELS, "toy")


def get_model(name: "str | ModelConfig") -> ModelConfig:
    """A model config by name: ``wan2.1-14b``, ``wan2.1-1.3b`` or ``toy`` (the default toy DiT)."""
    if isinstance(name, ModelConfig):
        return name
    if name == "toy":
        from svgtpu.dit import DiTConfig
        return ModelConfig.from_dit(DiTConfig())
    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODEL_NAMES)}, got {name!r}")
    return MODELS[name]


#: Resolutions of the sweep: the Wan presets plus a 4K-ish 3840x2160 geometry (81 frames).
RESOLUTIONS: dict[str, VideoGeometry] = {
    **{name.removeprefix("wan-"): g for name, g in PRESETS.items()},
    "2160p": VideoGeometry.from_pixels(3840, 2160, 81, "wan-2160p"),
}


def get_resolution(spec: "str | VideoGeometry") -> VideoGeometry:
    """``480p`` ... ``2160p``, a preset name (``wan-720p``) or a token grid ``TxHxW``."""
    if isinstance(spec, VideoGeometry):
        return spec
    if spec in RESOLUTIONS:
        return RESOLUTIONS[spec]
    try:
        return get_geometry(spec)
    except ValueError:
        raise ValueError(f"resolution must be one of {', '.join(RESOLUTIONS)}, a preset "
                         f"({', '.join(PRESETS)}) or a token grid TxHxW, got {spec!r}") from None


# -- efficiencies and kernel work ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Efficiency:
    """Fractions of the roofline bound each kind of op reaches.  Set once, never fitted to C1/C2.

    - ``matmul`` 0.6: large bf16 matmuls whose dimensions are all multiples of 256 (true for Wan)
      waste no MXU cells; a single large GEMM reaches ~0.79 of peak (H100: 780 of 989 TFLOP/s in
      the public "H100 peak matmul FLOPS" torch.mm benchmark gist by Horace He), whole models
      less; 0.6 sits inside the commonly reported 0.35-0.8 model-FLOPs-utilization band.
    - ``attention`` 0.6: a tuned flash-attention forward reaches 50-73 % of its bound unit
      (FlashAttention-2 paper, Dao 2023, A100); we take the middle.
    - ``memory`` 0.8: an assumption, not a measured figure: streaming (STREAM-like) kernels
      typically reach 80-90 % of peak HBM bandwidth; band 0.6-0.9.  Memory-bound ops are a few
      percent of the time here, so this barely moves the results.
    - ``vector_scale`` 1.0: multiplies the derived VPU/EUP rates (0.5 if the MXU count or VALU
      slot count behind the derivation is off by 2x).
    - ``ici`` 0.5: an assumption: the fraction of a chip's one-way ICI bandwidth an all-to-all
      reaches on a small 2D torus (multi-hop routes share links); band 0.3-0.8.  Communication is
      under 2 % of the time in every setup modeled here, so this barely moves the results.
    """

    matmul: float = 0.6
    attention: float = 0.6
    memory: float = 0.8
    vector_scale: float = 1.0
    ici: float = 0.5

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not 0 < value <= 1:
                raise ValueError(f"Efficiency.{field.name} must be in (0, 1], got {value!r}")


#: The band :func:`sensitivity` sweeps (every corner of it).
SENSITIVITY_BAND = {"matmul": (0.35, 0.8), "attention": (0.5, 0.73), "memory": (0.6, 0.9),
                    "vector_scale": (0.5, 1.0), "ici": (0.3, 0.8)}


@dataclasses.dataclass(frozen=True)
class AttentionKernel:
    """Work per score element of a flash-attention tile (counted for our Pallas kernel).

    Online softmax in f32: running max (1 vmax), subtract the max (1), add to the row sum (1), cast
    the probabilities to bf16 for PV (1); the 1/sqrt(d) scale is folded into Q; per-row rescaling is
    amortized over ``block_kv`` and ignored.  ``exp`` runs on the EUP.  Masking a band + sink tile
    from iota: ``q - k`` (1), two compares for ``|q - k| <= W`` (2), ``k < sink`` (1), or (1),
    select the masked score (1) = 6 (iota itself is hoisted).  ``score_bytes`` is the HBM traffic
    per score element: 0 for a fused flash kernel, ~16 for unfused XLA attention (write scores,
    read/write probabilities, read them for PV, f32).
    """

    softmax_vector_ops: float = 4.0
    exp_ops: float = 1.0
    mask_vector_ops: float = 6.0
    score_bytes: float = 0.0


FLASH = AttentionKernel()
XLA_UNFUSED = AttentionKernel(score_bytes=16.0)


# -- ops of one forward pass --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Op:
    """One op of a forward pass, counted for the whole model (all chips together).

    ``kind`` is ``matmul``, ``elementwise`` or ``cross_attention``; ``count``
    is how many times it runs per forward (``layers`` for per-block ops).
    """

    name: str
    kind: str
    flops: float = 0.0
    bytes: float = 0.0
    vector_ops: float = 0.0
    exp_ops: float = 0.0
    count: int = 1
    widths: tuple[int, ...] = ()   # matmul widths (contraction, output) that may underfill the MXU

    def total(self, field: str) -> float:
        return getattr(self, field) * self.count


def matmul_op(name: str, m: int, k: int, n: int, dtype_bytes: int, count: int = 1) -> Op:
    """``[m, k] @ [k, n]``: ``2mkn`` FLOPs, inputs, weights and output read/written once."""
    return Op(name, "matmul", flops=2.0 * m * k * n, bytes=float(dtype_bytes) * (m * k + k * n + m * n),
              count=count, widths=(k, n))


def elementwise_op(name: str, elements: float, reads: float, writes: float, vector_ops: float,
                   exp_ops: float, dtype_bytes: int, count: int = 1) -> Op:
    """A memory-streaming op over ``elements`` values: ``reads + writes`` passes over HBM."""
    return Op(name, "elementwise", bytes=float(dtype_bytes) * elements * (reads + writes),
              vector_ops=vector_ops * elements, exp_ops=exp_ops * elements, count=count)


def self_attention_flops(L: int, heads: int, head_dim: int) -> float:
    """Dense self-attention matmul FLOPs: ``QK^T`` and ``PV``, ``2 * 2 * L^2 * d`` per head."""
    return 4.0 * L * L * head_dim * heads


def forward_ops(model: ModelConfig, L: int, dtype_bytes: int = 2) -> list[Op]:
    """Every op of one forward pass over ``L`` tokens (batch 1), except self-attention.

    Per block (Wan 2.1): adaLN-modulated LayerNorm, Q/K/V projections, q/k RMSNorm, 3D RoPE,
    self-attention, O projection, gated residual; LayerNorm, cross-attention (Q from video tokens,
    K/V from ``text_len`` context tokens, q RMSNorm), residual; modulated LayerNorm, GELU MLP, gated
    residual.  Once per pass: patch embedding and output head.  Vector-op counts per element are
    rough (LayerNorm ~8, RMSNorm ~5, RoPE ~6, GELU-tanh ~8 + 1 transcendental); these ops are
    memory-bound on every device here, so the counts barely matter.
    """
    D, F, H, d, Lt, n = model.dim, model.ffn, model.heads, model.head_dim, model.text_len, model.layers
    b = dtype_bytes
    return [
        matmul_op("patch_embed", L, model.patch_in, D, b),
        matmul_op("qkv_proj", L, D, 3 * D, b, n),
        matmul_op("o_proj", L, D, D, b, n),
        matmul_op("cross_q_proj", L, D, D, b, n),
        matmul_op("cross_kv_proj", Lt, D, 2 * D, b, n),
        Op("cross_attention", "cross_attention", flops=4.0 * L * Lt * D,
           bytes=float(b) * (2 * L * D + 2 * Lt * D),
           vector_ops=FLASH.softmax_vector_ops * L * Lt * H, exp_ops=FLASH.exp_ops * L * Lt * H, count=n,
           widths=(d,)),
        matmul_op("cross_o_proj", L, D, D, b, n),
        matmul_op("ffn_in", L, D, F, b, n),
        matmul_op("ffn_out", L, F, D, b, n),
        elementwise_op("norm_modulate", L * D, 1, 1, 8, 1 / D, b, 2 * n),    # norm1, norm2 (+shift/scale)
        elementwise_op("norm_cross", L * D, 1, 1, 8, 1 / D, b, n),           # norm3 before cross-attn
        elementwise_op("qk_rmsnorm", L * D, 1, 1, 5, 1 / d, b, 3 * n),       # q, k, cross q
        elementwise_op("rope", L * D, 1, 1, 6, 0, b, 2 * n),                 # q, k
        elementwise_op("residual", L * D, 2, 1, 2, 0, b, 3 * n),             # gated adds
        elementwise_op("gelu", L * F, 1, 1, 8, 1, b, n),
        matmul_op("head", L, D, model.patch_in, b),
    ]


def forward_flops(model: ModelConfig, L: int) -> dict[str, float]:
    """FLOPs of one forward pass by op (self-attention dense), for checking by hand."""
    out = {op.name: op.total("flops") for op in forward_ops(model, L) if op.flops}
    out["self_attention"] = self_attention_flops(L, model.heads, model.head_dim) * model.layers
    return out


def op_seconds(op: Op, device: DeviceSpec, eff: Efficiency, chips: int = 1) -> float:
    """Roofline time of ``op`` (all ``count`` runs) on one of ``chips`` chips sharing it evenly."""
    mm_util = math.prod(device.matmul_utilization(w) for w in op.widths)
    compute = op.total("flops") / (device.matmul_flops * eff.matmul * mm_util)
    vector = op.total("vector_ops") / (device.vector_ops * eff.vector_scale)
    exp = op.total("exp_ops") / (device.exp_ops * eff.vector_scale)
    memory = op.total("bytes") / (device.hbm_bandwidth * eff.memory)
    return max(compute, vector, exp, memory) / chips


# -- self-attention as tiles --------------------------------------------------------------------

def tile_seconds(device: DeviceSpec, eff: Efficiency, kernel: AttentionKernel, head_dim: int,
                 block_q: int, block_kv: int, masked: bool, dtype_bytes: int = 2) -> float:
    """Time of one computed ``block_q x block_kv`` tile of one head.

    ``max(MXU, VPU, EUP, HBM) / efficiency``: QK^T contracts over ``d`` and PV produces ``d``
    columns, so with ``d`` below the MXU side both use only ``d / mxu_dim`` of the array.
    """
    elements = float(block_q) * block_kv
    mxu = 4.0 * elements * head_dim / (device.matmul_flops * device.matmul_utilization(head_dim))
    vpu_ops = kernel.softmax_vector_ops + (kernel.mask_vector_ops if masked else 0.0)
    vpu = elements * vpu_ops / (device.vector_ops * eff.vector_scale)
    eup = elements * kernel.exp_ops / (device.exp_ops * eff.vector_scale)
    hbm = (2.0 * block_kv * head_dim * dtype_bytes + kernel.score_bytes * elements) / (device.hbm_bandwidth * eff.memory)
    return max(mxu, vpu, eup, hbm) / eff.attention


def attention_head_seconds(stats: TileStats, device: DeviceSpec, eff: Efficiency, head_dim: int,
                           block_q: int, block_kv: int, *, fast_path: bool,
                           q_rows: int, kernel: AttentionKernel = FLASH, dtype_bytes: int = 2) -> float:
    """Self-attention time of one head over a mask with tile counts ``stats``.

    Empty tiles cost nothing.  With ``fast_path`` only partial tiles pay the masking work; without
    it every computed tile does whenever the mask has a partial tile (Splash Attention's behaviour).
    Each of the ``q_rows`` q-tile rows reads its Q block and writes its O block once.
    """
    mask_all = not fast_path and stats.partial > 0
    masked = stats.partial + (stats.full if mask_all else 0)
    plain = tile_seconds(device, eff, kernel, head_dim, block_q, block_kv, False, dtype_bytes)
    extra = tile_seconds(device, eff, kernel, head_dim, block_q, block_kv, True, dtype_bytes) - plain
    t = (stats.partial + stats.full) * plain + masked * extra   # extra >= 0: masking only adds work
    return t + q_rows * 2.0 * block_q * head_dim * dtype_bytes / (device.hbm_bandwidth * eff.memory)


@functools.lru_cache(maxsize=64)
def mask_tiles(geometry: VideoGeometry, kind: str, block_q: int, block_kv: int,
               multiplier: float | None = None, sparsity: float | None = None) -> tuple[TileStats, dict]:
    """Tile counts of the ``dense``, ``svg`` or ``svg-aligned`` (snap) mask, and mask facts."""
    if kind not in ("dense", "svg", "svg-aligned"):
        raise ValueError(f"mask kind must be dense, svg or svg-aligned, got {kind!r}")
    if kind == "dense":
        mask = DenseMask(geometry.L)
        info = {"density": 1.0}
    else:
        base = svg_mask(geometry, multiplier, sparsity=sparsity)
        info = {"window": base.window, "multiplier": base.window / geometry.F}
        mask = align(base, block_q, block_kv, "snap") if kind == "svg-aligned" else base
        info["density"] = mask.density()
    return classify(mask, block_q, block_kv).stats, info


# -- one video: dense vs SVG --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything one modeled video depends on.  Defaults: design.md's assumed C1 setup."""

    model: ModelConfig
    geometry: VideoGeometry
    device: DeviceSpec
    chips: int = 8
    steps: int = 50
    cfg: bool = True
    block_q: int = 3024               # MaxDiffusion's Wan block sizes (design.md section 3)
    block_kv: int = 2048
    sparsity: float | None = 0.3      # SVG's Wan setting (kept fraction); or give multiplier
    multiplier: float | None = None
    warmup_steps: float = 0.2         # SVG Wan defaults: first 20 % of steps dense ...
    warmup_layers: float = 0.03       # ... and first 3 % of layers
    profile_rows: int = 64            # SVG online profiling samples r query rows per head
    temporal_fraction: float = 0.5    # share of heads profiled temporal (layout transform cost)
    efficiency: Efficiency = Efficiency()
    kernel: AttentionKernel = FLASH
    dtype_bytes: int = 2

    def __post_init__(self):
        for field in ("chips", "steps", "profile_rows", "dtype_bytes", "block_q", "block_kv"):
            check_positive_int(field, getattr(self, field))
        if (self.sparsity is None) == (self.multiplier is None):
            raise ValueError("give exactly one of sparsity or multiplier")
        for field in ("warmup_steps", "warmup_layers", "temporal_fraction"):
            value = getattr(self, field)
            if not 0 <= value <= 1:
                raise ValueError(f"{field} must be in [0, 1], got {value!r}")

    @property
    def passes(self) -> int:
        """Transformer passes per denoising step: 2 with classifier-free guidance."""
        return 2 if self.cfg else 1

    @property
    def dense_steps(self) -> int:
        return math.ceil(round(self.warmup_steps * self.steps, 9))

    @property
    def dense_layers(self) -> int:
        return math.ceil(round(self.warmup_layers * self.model.layers, 9))

    @property
    def heads_per_chip(self) -> int:
        return math.ceil(self.model.heads / self.chips)

    @property
    def provenance(self) -> str:
        return f"modeled-{self.device.name}"

    def tiles(self, kind: str) -> tuple[TileStats, dict]:
        return mask_tiles(self.geometry, kind, self.block_q, self.block_kv, self.multiplier, self.sparsity)


def _per_chip_layer_attention(setup: Setup, kind: str, fast_path: bool) -> float:
    """Self-attention seconds of one layer on one chip (``heads_per_chip`` heads)."""
    stats, _ = setup.tiles(kind)
    per_head = attention_head_seconds(stats, setup.device, setup.efficiency, setup.model.head_dim,
                                      setup.block_q, setup.block_kv, fast_path=fast_path,
                                      q_rows=ceil_div(setup.geometry.L, setup.block_q),
                                      kernel=setup.kernel, dtype_bytes=setup.dtype_bytes)
    return setup.heads_per_chip * per_head


def svg_overhead_seconds(setup: Setup) -> dict[str, float]:
    """Per sparse layer, per chip: online profiling and the layout transformation.

    Profiling (per head): ``r`` sampled rows against all ``L`` keys: QK^T once, PV for the exact
    output and the two candidate masks (3x), three masked softmaxes; reads K and V once.  Layout
    transformation (per temporal head): permute Q, K, V to spatial-major and O back, each a read and
    a write of ``L x d`` values over HBM.
    """
    dev, eff, d, L, r = setup.device, setup.efficiency, setup.model.head_dim, setup.geometry.L, setup.profile_rows
    k = setup.kernel
    elements = float(r) * L
    mxu = (2 + 3 * 2) * elements * d / (dev.matmul_flops * dev.matmul_utilization(d))
    vpu = elements * 3 * (k.softmax_vector_ops + k.mask_vector_ops) / (dev.vector_ops * eff.vector_scale)
    eup = elements * 3 * k.exp_ops / (dev.exp_ops * eff.vector_scale)
    hbm = 2.0 * L * d * setup.dtype_bytes / (dev.hbm_bandwidth * eff.memory)
    profile = setup.heads_per_chip * max(mxu, vpu, eup, hbm) / eff.attention
    layout_bytes = 4 * 2 * L * d * setup.dtype_bytes
    layout = setup.heads_per_chip * setup.temporal_fraction * layout_bytes / (dev.hbm_bandwidth * eff.memory)
    return {"profiling": profile, "layout": layout}


def communication_seconds(setup: Setup) -> float:
    """ICI seconds of one forward pass on one chip: the Ulysses all-to-alls around self-attention.

    Per layer, Q, K and V go from sequence-sharded to head-sharded and O comes back: four
    all-to-alls, in each of which a chip keeps ``1 / chips`` of its ``L / chips x width`` shard and
    sends the rest, at half its bidirectional ICI bandwidth (one direction) times ``Efficiency.ici``.
    Zero on one chip.
    """
    n = setup.chips
    if n == 1:
        return 0.0
    if setup.device.ici_bandwidth is None:
        raise ValueError(f"device {setup.device.name} has no ici_bandwidth; model it on chips=1")
    sent = setup.geometry.L / n * setup.model.dim * setup.dtype_bytes * (n - 1) / n
    one_way = setup.device.ici_bandwidth / 2 * setup.efficiency.ici
    return setup.model.layers * 4 * sent / one_way


def forward_breakdown(setup: Setup) -> dict[str, float]:
    """Seconds of one dense forward pass on one chip, by op (self-attention with the fast path),
    including the all-to-all ``communication`` of multi-chip runs."""
    ops = forward_ops(setup.model, setup.geometry.L, setup.dtype_bytes)
    out = {op.name: op_seconds(op, setup.device, setup.efficiency, setup.chips) for op in ops}
    out["communication"] = communication_seconds(setup)
    out["self_attention"] = setup.model.layers * _per_chip_layer_attention(setup, "dense", True)
    return out


def video_seconds(setup: Setup, kind: str, fast_path: bool) -> float:
    """Seconds of one video: ``steps x passes`` forward passes, SVG schedule when ``kind != dense``.

    ``kind = dense``: every layer runs the dense mask, with or without ``fast_path`` (without it,
    the padded kv tiles make every tile pay the masking work, as in Splash).  Otherwise the SVG
    schedule: dense warm-up steps and layers run the best dense kernel (fast path: only the padded
    kv tiles are masked); sparse layers run mask ``kind`` with or without ``fast_path`` and pay
    profiling and layout transforms.
    """
    breakdown = forward_breakdown(setup)
    other = sum(v for k, v in breakdown.items() if k != "self_attention")
    dense_layer = _per_chip_layer_attention(setup, "dense", True)
    n_layers, passes = setup.model.layers, setup.steps * setup.passes
    if kind == "dense":
        return passes * (other + n_layers * _per_chip_layer_attention(setup, "dense", fast_path))
    overhead = sum(svg_overhead_seconds(setup).values())
    sparse_layer = _per_chip_layer_attention(setup, kind, fast_path) + overhead
    dense_steps, dense_layers = setup.dense_steps, setup.dense_layers
    sparse_steps = setup.steps - dense_steps
    per_sparse_step = dense_layers * dense_layer + (n_layers - dense_layers) * sparse_layer
    return setup.passes * (setup.steps * other + dense_steps * n_layers * dense_layer
                           + sparse_steps * per_sparse_step)


#: The chain of variants the speedup is broken down over, in order: (name, sparse-layer mask, fast path).
#: Each step changes one thing in the sparse layers; the dense reference and SVG's dense warm-up
#: layers use the best dense kernel throughout.
CHAIN = (
    ("dense", "dense", True),
    ("svg, unaligned, no fast path", "svg", False),
    ("svg, aligned, no fast path", "svg-aligned", False),
    ("svg, aligned + fast path", "svg-aligned", True),
)


def model_video(setup: Setup) -> dict:
    """The C1/C2 numbers for one setup: attention share, dense and SVG time, speedup, breakdown."""
    breakdown = forward_breakdown(setup)
    forward = sum(breakdown.values())
    chain = [{"variant": name, "seconds": video_seconds(setup, kind, fast)} for name, kind, fast in CHAIN]
    unaligned_fast = video_seconds(setup, "svg", True)
    # Splash-style dense baseline: the padded keys make the last kv tiles partial, so without a
    # fast path every tile pays the masking work
    dense_no_fast_path = video_seconds(setup, "dense", False)
    dense, svg = chain[0]["seconds"], chain[-1]["seconds"]
    for row in chain:
        row["speedup_vs_dense"] = dense / row["seconds"]
    contributions = {
        "sparsity": chain[0]["seconds"] / chain[1]["seconds"],
        "alignment": chain[1]["seconds"] / chain[2]["seconds"],
        "fast_path": chain[2]["seconds"] / chain[3]["seconds"],
        # the other order: fast path first, then alignment
        "fast_path_before_alignment": chain[1]["seconds"] / unaligned_fast,
        "alignment_after_fast_path": unaligned_fast / chain[3]["seconds"],
    }
    tiles = {}
    for kind in ("dense", "svg", "svg-aligned"):
        stats, info = setup.tiles(kind)
        tiles[kind] = {**stats.as_dict(), **info}
    g = setup.geometry
    return {
        "model": setup.model.name, "geometry": {"name": g.name, "T": g.T, "H": g.H, "W": g.W, "L": g.L},
        "device": setup.device.name, "device_spec": setup.device.as_dict(), "chips": setup.chips, "heads_per_chip": setup.heads_per_chip,
        "steps": setup.steps, "cfg": setup.cfg, "block_q": setup.block_q, "block_kv": setup.block_kv,
        "sparsity": setup.sparsity, "multiplier": setup.multiplier,
        "dense_steps": setup.dense_steps, "dense_layers": setup.dense_layers,
        "efficiency": dataclasses.asdict(setup.efficiency),
        "attention_share": breakdown["self_attention"] / forward,
        "communication_share": breakdown["communication"] / forward,
        "forward_seconds": forward,
        "forward_share_by_op": {k: v / forward for k, v in breakdown.items()},
        "dense_seconds": dense, "svg_seconds": svg, "speedup": dense / svg, "saved_seconds": dense - svg,
        "dense_minutes": dense / 60, "svg_minutes": svg / 60, "saved_minutes": (dense - svg) / 60,
        "chain": chain, "unaligned_fast_path_seconds": unaligned_fast,
        "dense_no_fast_path_seconds": dense_no_fast_path, "contributions": contributions,
        "svg_overhead_per_sparse_layer": svg_overhead_seconds(setup), "tiles": tiles,
        "reported": REPORTED, "provenance": setup.provenance,
    }


def sweep_resolution(setup: Setup, resolutions: Iterable[str] = tuple(RESOLUTIONS)) -> list[dict]:
    """C2/C5: attention share, dense/SVG minutes and speedup per resolution."""
    rows = []
    for name in resolutions:
        result = model_video(dataclasses.replace(setup, geometry=get_resolution(name)))
        rows.append({"resolution": name, "L": result["geometry"]["L"],
                     "attention_share": result["attention_share"], "dense_minutes": result["dense_minutes"],
                     "svg_minutes": result["svg_minutes"], "speedup": result["speedup"],
                     "saved_minutes": result["saved_minutes"], "provenance": result["provenance"]})
    return rows


def sensitivity(setup: Setup, band: dict[str, tuple[float, float]] = SENSITIVITY_BAND) -> dict:
    """Min and max of the headline numbers over every corner of the efficiency ``band``."""
    keys = ("attention_share", "communication_share", "dense_minutes", "svg_minutes", "speedup", "saved_minutes")
    names = list(band)
    values = {k: [] for k in keys}
    for corner in np.ndindex(*(2,) * len(names)):
        eff = Efficiency(**{n: band[n][i] for n, i in zip(names, corner)})
        result = model_video(dataclasses.replace(setup, efficiency=eff))
        for k in keys:
            values[k].append(result[k])
    return {"band": {n: list(v) for n, v in band.items()},
            **{k: {"min": min(v), "max": max(v)} for k, v in values.items()}}


# -- keeping the model honest: the toy DiT on this CPU ------------------------------------------

def _median_seconds(fn, repeats: int = 5) -> float:
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def calibrate_cpu(seed: int = 0) -> DeviceSpec:
    """A :class:`DeviceSpec` of this CPU, measured now with jitted JAX (f32).

    Matmul rate: a 1024^3 matmul.  Memory rate: ``y = x + 1`` over 128 MB (read + write).  Vector
    rate: 16 chained multiply-adds on a cache-resident 64k array.  Exp rate: ``exp`` on that array.
    """
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(seed)
    a = jax.random.normal(key, (1024, 1024), jnp.float32)
    mm = jax.jit(lambda x: x @ x)
    t_mm = _median_seconds(lambda: mm(a).block_until_ready())
    big = jax.random.normal(key, (32 * 1024 * 1024,), jnp.float32)
    add = jax.jit(lambda x: x + 1.0)
    t_mem = _median_seconds(lambda: add(big).block_until_ready())
    small = jax.random.normal(key, (64 * 1024,), jnp.float32)

    def fma_chain(x):
        for _ in range(16):
            x = x * 0.999 + 0.001
        return x

    vec, ex = jax.jit(fma_chain), jax.jit(jnp.exp)
    t_vec = _median_seconds(lambda: vec(small).block_until_ready(), 9)
    t_exp = _median_seconds(lambda: ex(small).block_until_ready(), 9)
    return DeviceSpec("cpu", matmul_flops=2 * 1024 ** 3 / t_mm, hbm_bandwidth=2 * big.nbytes / t_mem,
                      hbm_bytes=24e9, vector_ops=32 * small.size / t_vec, exp_ops=small.size / t_exp,
                      matmul_tile=None, source="measured on this CPU by svgtpu.costmodel.calibrate_cpu")


def toy_attention_share_measured_vs_modeled(device: DeviceSpec | None = None, *, config=None, batch: int = 2,
                                            rounds: int = 9, seed: int = 0) -> dict:
    """The toy DiT's self-attention share of a forward pass: modeled with CPU-measured rates vs
    measured by timing.  ``config``: a :class:`svgtpu.dit.DiTConfig` (default: the shipped toy's
    shape; vary ``frames`` to sweep the sequence length).

    Modeled: :func:`forward_breakdown` on the toy config with ``device`` (default
    :func:`calibrate_cpu`), f32 values, unfused XLA attention (one tile per head: the whole score
    matrix passes through memory), efficiencies 1 (the rates were measured on the same kinds of op).
    Measured: jitted forward pass (dense attention) vs ``depth`` calls of the jitted dense attention
    on the same q/k/v shapes, interleaved over ``rounds`` rounds (:mod:`svgtpu.timing`); median of
    the per-round shares.
    """
    import jax
    import jax.numpy as jnp

    from svgtpu import dit
    from svgtpu.timing import interleaved_times, paired_ratio

    config = config or dit.DiTConfig()
    device = device or calibrate_cpu(seed)
    model, g = ModelConfig.from_dit(config), config.geometry
    setup = Setup(model, g, device, chips=1, steps=1, cfg=False, block_q=g.L, block_kv=g.L,
                  multiplier=1.0, sparsity=None, efficiency=Efficiency(1.0, 1.0, 1.0, 1.0, 1.0),
                  kernel=XLA_UNFUSED, dtype_bytes=4)
    breakdown = {k: v * batch for k, v in forward_breakdown(setup).items()}
    modeled = breakdown["self_attention"] / sum(breakdown.values())

    key = jax.random.PRNGKey(seed)
    params = dit.init_params(config, key)
    video = jax.random.normal(key, (batch, config.frames, config.height, config.width, config.channels))
    t = jnp.linspace(0.2, 0.8, batch)
    labels = jnp.zeros((batch,), jnp.int32)
    fwd = jax.jit(lambda p, x: dit.forward(p, config, x, t, labels))
    qkv = jax.random.normal(key, (3, batch, config.heads, g.L, config.head_dim))
    attn = jax.jit(lambda q, k, v: dit.dense_attention(q, k, v))
    times = interleaved_times({"forward": lambda: fwd(params, video),
                               "attention": lambda: [attn(*qkv) for _ in range(config.depth)]},
                              rounds=rounds, desc="toy DiT timing", progress=False)
    return {"model": "toy", "L": g.L, "batch": batch, "device": device.as_dict(),
            "modeled_attention_share": modeled, "modeled_forward_seconds": sum(breakdown.values()),
            "measured_attention_share": paired_ratio(times, "attention", "forward"),
            "measured_forward_seconds": float(np.median(times["forward"])),
            "measured_attention_seconds": float(np.median(times["attention"])),
            "provenance": {"modeled": "modeled-cpu (rates measured-cpu)", "measured": "measured-cpu"}}


__all__ = ["DeviceSpec", "DEVICES", "get_device", "tpu_spec", "ModelConfig", "MODELS", "MODEL_NAMES",
           "get_model", "RESOLUTIONS", "get_resolution", "Efficiency", "SENSITIVITY_BAND",
           "AttentionKernel", "FLASH", "XLA_UNFUSED", "Op", "matmul_op", "elementwise_op", "forward_ops",
           "forward_flops", "self_attention_flops", "op_seconds", "tile_seconds", "attention_head_seconds",
           "mask_tiles", "Setup", "svg_overhead_seconds", "communication_seconds", "forward_breakdown", "video_seconds", "CHAIN",
           "model_video", "sweep_resolution", "sensitivity", "calibrate_cpu",
           "toy_attention_share_measured_vs_modeled", "REPORTED"]
