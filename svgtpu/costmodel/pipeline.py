"""One video, end to end: the SVG schedule over the DiT passes, the multi-chip terms and the stages
around the DiT, and the C1/C2 numbers (:func:`model_video`).

Terms, each switchable through ``Setup.parts`` (:data:`PARTS`):

- ``communication``: Ulysses all-to-alls around self-attention (Q, K, V in, O out) across the
  slice's mesh (:mod:`svgtpu.costmodel.parallel`), counted without overlap with compute;
- ``weight_gather``: when replicated bf16 weights do not fit next to the activations
  (``Setup.weights = "auto"``), weights are sharded over the chips of a pass and all-gathered once
  per pass;
- ``text_encoder``, ``vae_decode``, ``image_encoder`` (image-to-video conditioning), ``host``:
  :mod:`svgtpu.costmodel.stages`.  The VAE runs sharded over the slice (MaxDiffusion) or, as in Wan's
  reference code, on one rank in float32 (``Setup.vae_sharded``).

Self-attention is priced per head from the compiled tile table when it covers the setup's kernel, tile
and device (``Setup.compiled``; :mod:`svgtpu.costmodel.tile_costs`), else from priors; the result says
which (``attention_pricing``).  ``Setup.kernel`` is the attention kernel (ours, JAX's Splash, tokamax; a
GPU's FlashAttention), ``Setup.dense_kernel`` the one the dense reference runs (default: the same).

Sparse layers carry two more factors.  ``Setup.sparse_stretch`` multiplies the sparse kernel's time: what
the compiled static schedule does not see of sparse tiles relative to dense ones, the one number fitted to
MaxDiffusion's measured moderate SVG run on v6e-8 (:mod:`svgtpu.costmodel.sparse_layers`;
:func:`svgtpu.costmodel.validate.calibrated_setup` sets it for TPUs; 1 = as compiled).
``Setup.sparse_efficiency`` divides the whole sparse layer: the scenario "as efficient as SVG's published
GPU runs imply" (:mod:`svgtpu.costmodel.scenarios`), 1 otherwise.

The efficiency is explicit: a :class:`Setup` never looks up a calibration itself (that would make
this module import the validation above it); :func:`svgtpu.costmodel.validate.calibrated_setup`
builds a setup with its device family's calibrated efficiency.

With ``cfg_split`` the two CFG passes of a step run at the same time on two halves of the slice.
The SVG schedule is a recipe's (:mod:`svgtpu.recipes`; default: SVG's own Wan 2.1 T2V-14B script):
``floor(share x steps)`` dense steps and ``floor(share x layers)`` dense layers with the shares the
recipe's script implies; sparse layers pay online profiling and, for temporal heads, the layout
transform.  :func:`recipe_fields` turns a recipe into the :class:`Setup` fields it sets.
Every number is labelled ``modeled-<device>``.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from svgtpu.costmodel import eager, gpu_rates, parallel, stages
from svgtpu.costmodel.block_pricing import PRICINGS, other_seconds
from svgtpu.costmodel.compiled import HAS_FAST_PATH, CompiledTable
from svgtpu.costmodel.gpu_rates import GpuRates
from svgtpu.costmodel.kernel_work import FLASH, KernelWork, counted_work
from svgtpu.costmodel.policy import band_multiplier
from svgtpu.costmodel.roofline import Efficiency, forward_ops
from svgtpu.costmodel.specs import DeviceSpec
from svgtpu.costmodel.tile_costs import (ATTENTION_KERNELS, attention_head_seconds, compiled_head_cycles,
                                         compiled_head_seconds, kernel_steps, mask_tiles, MaskFacts)
from svgtpu.costmodel.workload import ModelConfig
from svgtpu.geometry import PRESETS, VideoGeometry, ceil_div, check_positive_int, get_geometry
from svgtpu.facts.kernels import kernel_names
from svgtpu.facts.results import provenance
from svgtpu.setting import Setting
from svgtpu.warmup import (DEFAULT_PROFILE_ROWS, DEFAULT_WARMUP_LAYER_FRACTION, DEFAULT_WARMUP_STEP_FRACTION,
                           layer_calls, warmup_count)
from svgtpu.masks.core import check_kept
from svgtpu.masks.tiles import TileStats
from svgtpu.errors import BadInput

#: Switchable terms of a video's time beyond the DiT's ops and self-attention.
PARTS = ("communication", "weight_gather", "text_encoder", "vae_decode", "image_encoder", "host")
#: Image conditioning of image-to-video runs: none (text-to-video), the VAE encoder over the
#: conditioning video (Wan 2.2 A14B I2V), or that and the CLIP image encoder (Wan 2.1 I2V).
IMAGE_ENCODERS = (None, "vae", "vae+clip")
WEIGHTS = ("auto", "replicated", "sharded")
#: How a slice splits self-attention: ``heads`` (Ulysses: all-to-alls trade sequence shards for head
#: shards, each chip attends its heads over the whole sequence) or ``sequence`` (MaxDiffusion's
#: ``attention="flash"``: each device keeps its slice of the queries, all heads, against all keys and
#: values, which are all-gathered every layer; its query slice is padded to a multiple of ``block_q``).
ATTENTION_SHARDINGS = ("heads", "sequence")
#: The share of heads online profiling marks temporal (they pay the layout transform) when none is given: an
#: assumption, half (the data decides at run time; :mod:`svgtpu.costmodel.sensitivity` sweeps it from 0 to 1).
DEFAULT_TEMPORAL_FRACTION = 0.5
#: What a :class:`Setup` takes from its :class:`~svgtpu.setting.Setting`: chips, steps, guidance, tile and mask density.
SETTING_FIELDS = ("chips", "steps", "cfg", "block_q", "block_kv", "kept", "multiplier")


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything one modeled video depends on: a :class:`~svgtpu.setting.Setting` (chips, steps, guidance, tile,
    mask density: :data:`SETTING_FIELDS`, read through the properties of the same names) with its model, geometry
    and device resolved (a custom model, a ``TxHxW`` grid or a probed device spec may stand for its names: the
    setting's names are made those of the objects), and how the run is priced.  ``efficiency`` is required (use
    :func:`svgtpu.costmodel.validate.calibrated_setup` for the device family's calibrated one)."""

    model: ModelConfig
    geometry: VideoGeometry
    device: DeviceSpec
    setting: Setting
    # SVG's schedule beyond the setting's mask density: the default recipe's (svgtpu.recipes.DEFAULT_RECIPE) unless given
    warmup_steps: float = DEFAULT_WARMUP_STEP_FRACTION   # share of steps run dense ...
    warmup_layers: float = DEFAULT_WARMUP_LAYER_FRACTION  # ... and of layers
    profile_rows: int = DEFAULT_PROFILE_ROWS   # query rows online profiling samples per head
    temporal_fraction: float = DEFAULT_TEMPORAL_FRACTION   # share of heads profiled temporal (layout transform)
    efficiency: Efficiency | None = None   # required; see validate.calibrated_setup
    sparse_efficiency: float = 1.0    # GPU scenario only: share of the modeled sparse layer SVG's GPU runs reach
    sparse_stretch: float = 1.0       # realized / static time of sparse-kernel tiles relative to dense ones (TPU:
                                      # fitted to MaxDiffusion's moderate run, svgtpu.costmodel.sparse_layers)
    vae_sharded: bool = True          # VAE over the slice (MaxDiffusion) or one rank in fp32 (Wan's reference)
    image_encoder: str | None = None  # image-to-video conditioning (IMAGE_ENCODERS)
    kernel: str = "ours"              # attention kernel: ours, splash, tokamax (TPU) or flash (GPU)
    dense_kernel: str | None = None   # the dense reference's kernel (None: kernel)
    compiled: CompiledTable | None = None   # the compiled tile table pricing TPU attention (None: priors)
    gpu_rates: GpuRates | None = None  # measured per-kernel rates pricing GPU attention (gpu_rates; None: priors)
    work: KernelWork | None = None   # prior work per score (None: our kernel's, kernel_work.counted_work)
    dtype_bytes: int = 2
    cfg_split: bool = False           # run the two CFG passes at once on two halves of the slice
    attention_sharding: str = "heads"  # ATTENTION_SHARDINGS: Ulysses head parallelism, or sequence-sharded flash
    segment_ids: bool = False         # padded tokens masked by segment ids (MaxDiffusion): every tile masked
    weights: str = "auto"             # auto: shard weights only when replicas do not fit in HBM
    parts: frozenset = frozenset(PARTS)
    host_seconds_per_step: float = 0.02   # assumption: Python loop + scheduler + dispatch per step
    code_path: str | None = None      # a published GPU run's eager PyTorch code (eager.CODE_PATHS; None: fused, ours)
    other_pricing: str = "block"      # block_pricing.PRICINGS: the non-attention ops from a compiled block where one
                                      # matches (else the roofline), or the roofline alone

    def __post_init__(self):
        if not isinstance(self.setting, Setting):
            raise BadInput(f"setting must be a svgtpu.setting.Setting, got {type(self.setting).__name__}")
        named = {"model": self.model.name, "resolution": self.geometry.name or str(self.geometry),
                 "device": self.device.name}
        if any(getattr(self.setting, k) != v for k, v in named.items()):   # the objects' names, one truth
            object.__setattr__(self, "setting", dataclasses.replace(self.setting, **named))
        for field in ("chips", "steps", "profile_rows", "dtype_bytes", "block_q", "block_kv"):
            check_positive_int(field, getattr(self, field))
        if self.kept is not None:
            check_kept(self.kept)
        for field in ("warmup_steps", "warmup_layers", "temporal_fraction"):
            value = getattr(self, field)
            if not 0 <= value <= 1:
                raise BadInput(f"{field} must be in [0, 1], got {value!r}")
        if self.weights not in WEIGHTS:
            raise BadInput(f"weights must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        unknown = set(self.parts) - set(PARTS)
        if unknown:
            raise BadInput(f"parts must be drawn from {', '.join(PARTS)}, got {sorted(unknown)}")
        object.__setattr__(self, "parts", frozenset(self.parts))
        if self.cfg_split and (not self.cfg or self.chips % 2):
            raise BadInput(f"cfg_split needs cfg and an even chip count, got cfg={self.cfg}, chips={self.chips}")
        if not self.host_seconds_per_step >= 0:
            raise BadInput(f"host_seconds_per_step must be >= 0, got {self.host_seconds_per_step!r}")
        parallel.mesh_shape(self.device, self.chips_per_pass)   # a slice shape exists
        if not isinstance(self.efficiency, Efficiency):
            raise BadInput("efficiency is required: pass an Efficiency, or build the setup with "
                           "svgtpu.costmodel.validate.calibrated_setup (the device family's calibrated one)")
        if not 0 < self.sparse_efficiency <= 1:
            raise BadInput(f"sparse_efficiency must be in (0, 1], got {self.sparse_efficiency!r}")
        if not (isinstance(self.sparse_stretch, (int, float)) and 0 < self.sparse_stretch < 100):
            raise BadInput(f"sparse_stretch must be a positive number, got {self.sparse_stretch!r}")
        for field in ("kernel", "dense_kernel"):
            value = getattr(self, field)
            if value is not None and value not in ATTENTION_KERNELS:
                raise BadInput(f"{field} must be one of {', '.join(ATTENTION_KERNELS)}, got {value!r}")
            if value is not None and value not in self.kernels_here:
                raise BadInput(f"{field} {value} does not run on {self.device.name}: one of "
                               f"{', '.join(self.kernels_here)} (svgtpu.facts.kernels)")
        if self.attention_sharding not in ATTENTION_SHARDINGS:
            raise BadInput(f"attention_sharding must be one of {', '.join(ATTENTION_SHARDINGS)}, "
                           f"got {self.attention_sharding!r}")
        if self.code_path is not None:
            eager.code_path(self.code_path)
        if self.other_pricing not in PRICINGS:
            raise BadInput(f"other_pricing must be one of {', '.join(PRICINGS)}, got {self.other_pricing!r}")
        if self.image_encoder not in IMAGE_ENCODERS:
            raise BadInput(f"image_encoder must be one of {', '.join(map(str, IMAGE_ENCODERS))}, "
                           f"got {self.image_encoder!r}")

    @classmethod
    def of(cls, model: ModelConfig, geometry: VideoGeometry, device: DeviceSpec, **fields) -> "Setup":
        """A setup from keyword ``fields``: those of :data:`SETTING_FIELDS` make its :class:`Setting` (the rest of
        the setting its own defaults, :mod:`svgtpu.setting`), the others are the setup's."""
        choices = {k: fields.pop(k) for k in SETTING_FIELDS if k in fields}
        return cls(model, geometry, device, Setting(**choices), **fields)

    def replace(self, **changes) -> "Setup":
        """:func:`dataclasses.replace`, the fields of :data:`SETTING_FIELDS` changed in the setting (a kept fraction
        or a multiplier given replaces the mask density: the other becomes ``None``)."""
        choices = {k: changes.pop(k) for k in SETTING_FIELDS if k in changes}
        if choices.keys() & {"kept", "multiplier"}:
            choices = {"kept": None, "multiplier": None, **choices}
        setting = dataclasses.replace(self.setting, **choices) if choices else self.setting
        return dataclasses.replace(self, setting=setting, **changes)

    chips = property(lambda self: self.setting.chips, doc="Chips of the slice (the setting's).")
    steps = property(lambda self: self.setting.steps, doc="Denoising steps (the setting's).")
    cfg = property(lambda self: self.setting.cfg, doc="Classifier-free guidance (the setting's).")
    block_q = property(lambda self: self.setting.block_q, doc="The kernel tile's query rows (the setting's).")
    block_kv = property(lambda self: self.setting.block_kv, doc="The kernel tile's key columns (the setting's).")
    kept = property(lambda self: self.setting.kept, doc="SVG's kept fraction, or None (the setting's).")
    multiplier = property(lambda self: self.setting.multiplier, doc="SVG's band multiplier, or None (the setting's).")

    @property
    def kernels_here(self) -> tuple[str, ...]:
        """The priced kernels that run on this device (a GPU's or a TPU's; every one on this CPU, measured)."""
        platform = "gpu" if self.device.is_gpu else "tpu" if self.device.family == "tpu" else None
        return kernel_names(platform, modeled=True)

    @property
    def passes(self) -> int:
        """Transformer passes per denoising step: 2 with classifier-free guidance."""
        return 2 if self.cfg else 1

    @property
    def chips_per_pass(self) -> int:
        return self.chips // 2 if self.cfg_split else self.chips

    @property
    def sequential_passes(self) -> int:
        """Passes per step one after the other (1 when CFG's two passes run side by side)."""
        return 1 if self.cfg_split else self.passes

    @property
    def dense_steps(self) -> int:
        """``floor(warmup_steps x steps)``: the recipe's dense warm-up steps."""
        return warmup_count(self.warmup_steps, self.steps)

    @property
    def dense_layers(self) -> int:
        """``floor(warmup_layers x layers)``: the recipe's dense layers."""
        return warmup_count(self.warmup_layers, self.model.layers)

    @property
    def heads_per_chip(self) -> int:
        return ceil_div(self.model.heads, self.chips_per_pass)

    @property
    def kernel_work(self) -> KernelWork:
        """Work per score for the prior pricing: ``work``, else our kernel's counted from its jaxpr (JAX)."""
        if self.work is not None:
            return self.work
        from svgtpu.kernels.config import KernelConfig, default_block_kv_compute
        KernelConfig(block_q=self.block_q, block_kv=self.block_kv)   # the kernel's tile rules, one clear line
        return counted_work(self.model.head_dim, "bfloat16" if self.dtype_bytes == 2 else "float32",
                            default_block_kv_compute(self.block_q, self.block_kv))

    @property
    def dtype(self) -> str:
        return "bfloat16" if self.dtype_bytes == 2 else "float32"

    def compiled_tile(self, kernel: str | None = None):
        """``(row, provenance)`` of the compiled table for ``kernel`` (default: ``Setup.kernel``) at this
        setup's device and tile, or ``None`` (priors)."""
        if self.compiled is None or self.device.is_gpu:
            return None
        return self.compiled.tile(self.device.name, kernel or self.kernel, self.setting.tile,
                                  self.model.head_dim, self.dtype)

    def gpu_rate(self, kernel: str | None = None) -> float | None:
        """The measured rate of ``kernel`` (default ``Setup.kernel``) on this GPU, or ``None`` (priors)."""
        if not self.device.is_gpu or self.gpu_rates is None:
            return None
        return self.gpu_rates.rate(kernel or self.kernel)

    def attention_pricing(self, kernel: str | None = None) -> str:
        """How attention of ``kernel`` is priced here: the compiled table (its provenance), a GPU kernel's
        measured rate (its source), or priors."""
        if self.gpu_rate(kernel):
            kernel = kernel or self.kernel
            dense, sparse = self.gpu_rates.source(kernel), self.gpu_rates.source(kernel, sparse=True)
            return f"measured rate ({dense}" + (f"; on a sparse mask: {sparse})" if sparse != dense else ")")
        found = self.compiled_tile(kernel)
        return f"compiled tile table ({found[1]})" if found else "priors (tile_costs.tile_units)"

    def attention_efficiency(self, kernel: str | None = None) -> tuple[Efficiency, str]:
        """The efficiency ``kernel`` (default ``Setup.kernel``) is priced at from priors, and why where it is not
        the setup's own (:func:`~svgtpu.costmodel.gpu_rates.kernel_efficiency`: FlexAttention on an A100)."""
        return gpu_rates.kernel_efficiency(self.device.family, kernel or self.kernel, self.efficiency)

    @property
    def provenance(self) -> str:
        return provenance("modeled", device=self.device.name)

    def tiles(self, kind: str) -> tuple[TileStats, MaskFacts]:
        return mask_tiles(self.geometry, kind, self.setting.tile, self.multiplier, self.kept)

    def head_seconds(self, stats: TileStats, empty_row_steps: int = 0, *, fast_path: bool = True,
                     kernel: str | None = None, info: MaskFacts | None = None) -> float:
        """Attention seconds of one head of ``kernel`` (default ``Setup.kernel``) on one TensorCore, over a
        mask with tile counts ``stats``: its facts ``info`` (:func:`~svgtpu.costmodel.tile_costs.mask_tiles`),
        or, for a mask known only by its counts, ``empty_row_steps`` (q rows without a tile) with the mask
        taken to cut inside its partial tiles."""
        kernel = kernel or self.kernel
        fast_path = fast_path and not self.segment_ids   # segment ids mask every tile, full ones too
        if info is None:
            info = MaskFacts(density=None, q_rows=ceil_div(self.geometry.L, self.block_q), empty_rows=empty_row_steps,
                             max_row_tiles=None, mask_cuts_tiles=True)
        fast_path = fast_path and HAS_FAST_PATH.get(kernel, True)
        if self.gpu_rate(kernel):   # a GPU kernel: its computed tiles at its measured rate (on a mask with skipped
            return self.gpu_rates.head_seconds(kernel, stats.full + stats.partial, self.model.head_dim,
                                               self.setting.tile, sparse=stats.empty > 0)   # tiles, its sparse one)
        found = self.compiled_tile(kernel)
        if found:
            return compiled_head_seconds(found[0], stats, info, self.device, self.efficiency, self.model.head_dim,
                                         fast_path=fast_path, dtype_bytes=self.dtype_bytes)
        return attention_head_seconds(stats, self.device, self.attention_efficiency(kernel)[0], self.model.head_dim,
                                      self.setting.tile,
                                      fast_path=fast_path, q_rows=info.q_rows,
                                      work=self.kernel_work, dtype_bytes=self.dtype_bytes,
                                      empty_row_steps=kernel_steps(kernel, stats, info)["empty"])

    def head_cycles(self, kind: str, *, fast_path: bool = True, kernel: str | None = None) -> dict | None:
        """The compiled cycles of one head on mask ``kind`` (:func:`~svgtpu.costmodel.tile_costs.compiled_head_cycles`),
        or ``None`` without a compiled row."""
        kernel = kernel or self.kernel
        found = self.compiled_tile(kernel)
        if not found:
            return None
        stats, info = self.tiles(kind)
        return compiled_head_cycles(found[0], stats, info,
                                    fast_path=fast_path and HAS_FAST_PATH[kernel] and not self.segment_ids)


#: How a recipe's code turns its ``kept`` (the script's ``sparsity``) into the band, where it is not the package's
#: reading (the whole band + sink mask keeps that share, :func:`svgtpu.masks.core.multiplier_for_kept`): SVG1's scripts
#: call ``sparsity_to_width`` (svg-project/Sparse-VideoGen 95acd8a and 5efea72, ``svg/models/wan/utils.py``; Wan's
#: ``context_length`` is 0): the band alone keeps ``kept`` of the ``L^2`` pairs, ``W = L (1 - sqrt(1 - kept))``, its
#: ``mask_mod`` rounds ``W`` up to 128 tokens and adds the first frame as a sink: the rule MaxDiffusion ports
#: (:func:`svgtpu.costmodel.policy.band_multiplier`, rule ``maxdiffusion``).
RECIPE_BAND_RULES = {"svg1-t2v-14b-720p": "maxdiffusion", "svg1-t2v-14b-480p": "maxdiffusion",
                     "svg1-i2v-14b-720p": "maxdiffusion"}


def recipe_fields(recipe) -> dict:
    """The :class:`Setup` fields a :class:`svgtpu.recipes.Recipe` sets: the mask density (its kept fraction, or the
    band multiplier its code derives from it, :data:`RECIPE_BAND_RULES`), dense-step and dense-layer shares, sampled
    rows (``ValueError`` for a recipe whose numbers are unknown)."""
    if not recipe.known:
        raise BadInput(f"recipe {recipe.name} has no numbers (unknown): pick one of svgtpu.recipes.RECIPES")
    rule = RECIPE_BAND_RULES.get(recipe.name)
    band = None if rule is None else band_multiplier(get_geometry(recipe.geometry), recipe.kept, rule)
    return {"kept": recipe.kept if band is None else None, "multiplier": band, "warmup_steps": recipe.dense_step_share,
            "warmup_layers": recipe.dense_layer_share, "profile_rows": recipe.num_sampled_rows}


def sequence_shard_tiles(setup: Setup) -> tuple[TileStats, MaskFacts]:
    """Dense tiles of one device's query slice under sequence sharding: ``ceil(L / devices)`` queries (a
    device is a TensorCore) padded to ``block_q`` rows, against all ``L`` keys; the last kv tile is
    partial when ``block_kv`` does not divide ``L`` (padded queries make no tile partial)."""
    devices = setup.chips_per_pass * setup.device.cores
    q_rows = ceil_div(ceil_div(setup.geometry.L, devices), setup.block_q)
    kv_tiles, padded = ceil_div(setup.geometry.L, setup.block_kv), int(setup.geometry.L % setup.block_kv != 0)
    stats = TileStats(full=q_rows * (kv_tiles - padded), partial=q_rows * padded, empty=0)
    return stats, MaskFacts(density=1.0, q_rows=q_rows, empty_rows=0, max_row_tiles=kv_tiles, mask_cuts_tiles=False,
                            grid_steps=q_rows * kv_tiles)


def _per_chip_layer_attention(setup: Setup, kind: str, fast_path: bool, kernel: str | None = None) -> float:
    """Self-attention seconds of one layer on one chip: its heads split over the chip's cores, or (sequence
    sharding, dense only) every head over each core's query slice."""
    if setup.attention_sharding == "sequence":
        if kind != "dense":
            raise BadInput("SVG layers are modeled head-parallel (attention_sharding='heads'): its masks and "
                           "profiling are per head over the whole sequence")
        stats, info = sequence_shard_tiles(setup)
        return setup.model.heads * setup.head_seconds(stats, fast_path=fast_path, kernel=kernel, info=info)
    stats, info = setup.tiles(kind)
    per_head = setup.head_seconds(stats, fast_path=fast_path, kernel=kernel, info=info)
    return ceil_div(setup.heads_per_chip, setup.device.cores) * per_head


def _dense_layer(setup: Setup, fast_path: bool = True) -> float:
    """The dense reference's self-attention layer: ``Setup.dense_kernel`` (default the setup's kernel)."""
    return _per_chip_layer_attention(setup, "dense", fast_path, setup.dense_kernel or setup.kernel)


def svg_overhead_seconds(setup: Setup) -> dict[str, float]:
    """Per sparse layer, per chip: online profiling and the layout transformation.

    Profiling (per head): ``r`` sampled rows against all ``L`` keys: QK^T once, PV for the exact
    output and the two candidate masks (3x), three masked softmaxes; reads K and V once.  Layout
    transformation (per temporal head): permute Q, K, V to spatial-major and O back, each a read and
    a write of ``L x d`` values over HBM.  Profiling runs as plain attention ops on the sampled rows, not
    in the sparse kernel: its softmax work is the hand count :data:`~svgtpu.costmodel.kernel_work.FLASH`.  On a GPU
    whose run measured this work around the setup's kernel (our kernel's SVG path at the calibration resolution,
    :meth:`~svgtpu.costmodel.gpu_rates.GpuRates.svg_work_seconds`) it is that measurement per head and token, one term.
    A published run whose code is counted (``Setup.code_path`` with SVG's passes, :func:`eager.svg_work_bytes`) pays
    that code's bytes at the HBM bandwidth and the memory efficiency, its chip's share of the heads (eager,
    memory-bound: the sampled matmuls do ``profile_rows`` FLOPs a byte, under a GPU's ridge).
    """
    counted = None if setup.code_path is None else eager.svg_work_bytes(
        eager.code_path(setup.code_path), setup.model, setup.geometry.L, setup.profile_rows)
    if counted is not None:
        share = setup.heads_per_chip / setup.model.heads
        return {k: share * b / (setup.device.hbm_bandwidth * setup.efficiency.memory) for k, b in counted.items()}
    measured = None if setup.gpu_rates is None else setup.gpu_rates.svg_work_seconds(
        setup.kernel, setup.heads_per_chip, setup.geometry.L)
    if measured is not None:
        return {"svg_own_work": measured}
    dev, eff, d, L, r = setup.device, setup.efficiency, setup.model.head_dim, setup.geometry.L, setup.profile_rows
    k = FLASH
    elements = float(r) * L
    mxu = (2 + 3 * 2) * elements * d / (dev.matmul_flops * dev.matmul_utilization(d))
    vpu = elements * 3 * (k.vector_ops + k.mask_vector_ops) / (dev.vector_ops * eff.vector_scale)
    eup = elements * 3 * k.exp_ops / (dev.exp_ops * eff.vector_scale)
    hbm = 2.0 * L * d * setup.dtype_bytes / (dev.hbm_bandwidth * eff.memory)
    profile = setup.heads_per_chip * max(mxu, vpu, eup, hbm) / eff.attention
    layout_bytes = 4 * 2 * L * d * setup.dtype_bytes
    layout = setup.heads_per_chip * setup.temporal_fraction * layout_bytes / (dev.hbm_bandwidth * eff.memory)
    return {"profiling": profile, "layout": layout}


def memory(setup: Setup) -> dict:
    """Bytes per chip, HBM available, and whether weights are sharded (``Setup.weights``)."""
    m = parallel.memory_per_chip(setup.model, setup.geometry.L, setup.chips_per_pass, setup.heads_per_chip,
                                 setup.dtype_bytes)
    available = setup.device.hbm_bytes * parallel.HBM_USABLE
    fits = m["weights"] + m["activations"] <= available
    sharded = setup.weights == "sharded" or (setup.weights == "auto" and not fits and setup.chips_per_pass > 1)
    return {**m, "hbm_usable": available, "replicas_fit": fits, "weights_sharded": sharded}


def communication_seconds(setup: Setup) -> float:
    """ICI seconds of one forward pass on one chip: four Ulysses all-to-alls per layer, each chip
    re-sharding its ``L / chips x dim`` slice between sequence and heads; or, with sequence sharding, an
    all-gather of every layer's K and V (``2 x L x dim`` values)."""
    if "communication" not in setup.parts:
        return 0.0
    n = setup.chips_per_pass
    if setup.attention_sharding == "sequence":
        kv = 2.0 * setup.geometry.L * setup.model.dim * setup.dtype_bytes
        return setup.model.layers * parallel.all_gather_seconds(kv, n, setup.device, setup.efficiency)
    shard = setup.geometry.L / n * setup.model.dim * setup.dtype_bytes
    return setup.model.layers * parallel.ULYSSES_ALL_TO_ALLS * parallel.all_to_all_seconds(
        shard, n, setup.device, setup.efficiency)


def weight_gather_seconds(setup: Setup) -> float:
    """ICI seconds per forward pass to all-gather sharded weights (0 when replicas fit)."""
    if "weight_gather" not in setup.parts or not memory(setup)["weights_sharded"]:
        return 0.0
    return parallel.all_gather_seconds(float(setup.model.params) * setup.dtype_bytes, setup.chips_per_pass,
                                       setup.device, setup.efficiency)


def other_ops_seconds(setup: Setup) -> dict[str, float]:
    """Seconds of one pass's ops other than self-attention on one chip, by op: the roofline's (a published GPU run's
    with its code's eager passes in place of the fused elementwise ops, ``Setup.code_path``), the per-layer ones from
    a compiled Wan block where one prices the setup (:mod:`~svgtpu.costmodel.block_pricing`, ``Setup.other_pricing``)."""
    ops = forward_ops(setup.model, setup.geometry.L, setup.dtype_bytes)
    if setup.code_path:   # the published code's eager passes in place of the fused elementwise ops
        ops = eager.eager_ops(ops, setup.model, setup.geometry.L, eager.code_path(setup.code_path),
                              setup.chips_per_pass, image=bool(setup.image_encoder))
    pricing = "roofline" if setup.code_path else setup.other_pricing
    return other_seconds(setup.model, setup.geometry, setup.device, setup.efficiency, setup.chips_per_pass, ops,
                         setup.dtype_bytes, pricing)


def forward_breakdown(setup: Setup) -> dict[str, float]:
    """Seconds of one dense forward pass on one chip, by op (self-attention with the fast path),
    including the ``communication`` and ``weight_gather`` of multi-chip runs."""
    out = other_ops_seconds(setup)
    out["communication"] = communication_seconds(setup)
    out["weight_gather"] = weight_gather_seconds(setup)
    out["self_attention"] = setup.model.layers * _dense_layer(setup)
    return out


def _vae_seconds(setup: Setup, flops: float, bytes_: float) -> float:
    """A VAE pass on an accelerator without a measured one, counted layer by layer as a roofline: sharded over the
    slice (MaxDiffusion), or on one rank (Wan's reference: ``WanVAE`` in float32, decoding on rank 0)."""
    dev, eff = setup.device, setup.efficiency
    seconds = max(flops / (dev.matmul_flops * eff.matmul), bytes_ / (dev.hbm_bandwidth * eff.memory))
    return seconds / setup.chips if setup.vae_sharded else seconds


def _gpu_stage(setup: Setup, stage: str) -> float:
    """A stage on a GPU from the measured one (:func:`stages.gpu_stage_seconds`), a VAE pass over the slice when
    sharded (as a TPU's record is)."""
    seconds = stages.gpu_stage_seconds(stage, setup.geometry, setup.model.text_len * setup.passes,
                                       setup.device.hbm_bandwidth)
    return seconds / setup.chips if setup.vae_sharded and stage.startswith("vae") else seconds


def _decode_record(setup: Setup) -> dict | None:
    """The compiled VAE decode record pricing this setup's decode (a TPU's, at its resolution), or ``None``."""
    if setup.device.family != "tpu" or not setup.device.clock_hz:
        return None
    return stages.decode_record(setup.geometry, setup.device.name)


def _vae_decode_seconds(setup: Setup) -> float:
    """The decode: a compiled record's static cycles at the chip's clock where one is committed (over the slice
    when sharded: MaxDiffusion splits every convolution's output channels over its devices), else the roofline."""
    record = _decode_record(setup)
    if record is None:
        g = setup.geometry
        return _vae_seconds(setup, stages.vae_decode_flops(g), stages.vae_decode_bytes(g))
    seconds = stages.decode_cycles(record, setup.geometry.T) / setup.device.clock_hz
    return seconds / setup.chips if setup.vae_sharded else seconds


#: The stages outside the DiT passes, in the order a generation runs them (:func:`stage_seconds`' keys).
STAGES = ("text_encoder", "image_encoder", "vae_encode", "vae_decode", "host")


def _counted_stage(setup: Setup, stage: str) -> float:
    """A stage off a GPU, counted: umT5's and CLIP's FLOPs at the matmul rate, the VAE's passes (the decode from a
    compiled record where one is committed)."""
    dev, eff, g = setup.device, setup.efficiency, setup.geometry
    if stage == "text_encoder":
        return stages.text_encoder_flops(setup.model.text_len, setup.passes) / (dev.matmul_flops * eff.matmul)
    if stage == "image_encoder":
        return stages.clip_image_flops() / (dev.matmul_flops * eff.matmul)
    if stage == "vae_encode":
        return _vae_seconds(setup, stages.vae_encode_flops(g), stages.vae_encode_bytes(g))
    return _vae_decode_seconds(setup)


def _present_stages(setup: Setup) -> list[str]:
    """The stages of :data:`STAGES` but the host that this setup's run has: those in its parts, image conditioning
    only for an image-to-video run (the CLIP encoder only where it has one)."""
    conditioning = setup.image_encoder or ""
    present = {"text_encoder": "text_encoder" in setup.parts, "vae_decode": "vae_decode" in setup.parts,
               "vae_encode": "image_encoder" in setup.parts and bool(conditioning),
               "image_encoder": "image_encoder" in setup.parts and "clip" in conditioning}
    return [s for s in STAGES if present.get(s)]


def stage_seconds(setup: Setup) -> dict[str, float]:
    """Seconds of the stages outside the DiT passes (:data:`STAGES`; 0 for parts switched off, and for image
    conditioning a text-to-video run has not): on a GPU from a published measurement, elsewhere counted."""
    price = _gpu_stage if setup.device.is_gpu else _counted_stage
    out = dict.fromkeys(STAGES, 0.0)
    out.update({stage: price(setup, stage) for stage in _present_stages(setup)})
    if "host" in setup.parts:
        out["host"] = setup.steps * setup.host_seconds_per_step
    return out


def _gpu_instrument(setup: Setup, stage: str, what: str, scale: str) -> str:
    """The words for a GPU stage priced from the measured one (:func:`_gpu_stage`)."""
    return (f"{what}: {stages.GPU_STAGE_SECONDS[stage]:g} s measured on one H100 at 480x832, 81 frames "
            f"({stages.GPU_STAGE_SOURCE}), times {scale} and the H100's HBM bandwidth over the {setup.device.name}'s "
            "(stages.gpu_stage_seconds)")


def stage_instruments(setup: Setup) -> dict[str, str]:
    """What prices each stage of :func:`stage_seconds`, in words (the keys are the same)."""
    conditioning = setup.image_encoder or ""
    if setup.device.is_gpu:
        where = (f"; over the {setup.chips} GPUs" if setup.vae_sharded else "; on one rank") + (
            "; measured in bfloat16, no factor for a float32 run's VAE (Wan's reference), priced at least that fast")
        traffic = "the run's VAE activation traffic over the measured run's"
        words = {"text_encoder": _gpu_instrument(setup, "text_encoder", "umT5-XXL in bfloat16",
                                                 f"the run's tokens over {stages.GPU_STAGE_TOKENS}"),
                 "image_encoder": _gpu_instrument(setup, "image_encoder", "CLIP ViT-H/14 in float16 on the image",
                                                  "the one image over the measured one"),
                 "vae_encode": _gpu_instrument(setup, "vae_encode", "the VAE encoder over the conditioning video",
                                               traffic) + where,
                 "vae_decode": _gpu_instrument(setup, "vae_decode", "the causal 3D VAE decoder", traffic) + where}
    else:
        where = f"sharded over the {setup.chips} chips" if setup.vae_sharded else "on one rank in float32"
        vae = (f"{{}} counted conv by conv from Wan 2.1's wan/modules/vae.py ({{}}), FLOPs and activation bytes as a "
               f"roofline, {where}")
        record = _decode_record(setup)
        decode = (vae.format("the causal 3D VAE decoder", "Decoder3d") if record is None else
                  f"the causal 3D VAE decoder (svgtpu.model.vae, Wan 2.1's Decoder3d) compiled for one "
                  f"{setup.device.name} chip, static cycles of its first and later chunks (record "
                  f"vae-decode/{record['record']}, {record['provenance']}) at the chip's clock, {where}"
                  + (" (the all-gathers between its sharded convolutions not priced)" if setup.vae_sharded else ""))
        host_t5 = ("; MaxDiffusion runs it in float32 PyTorch on the host CPU, for which no cited host rate was found "
                   "(docs/costmodel.md, stages)" if setup.device.family == "tpu" else "")
        words = {"text_encoder": "umT5-XXL encoder FLOPs (2 x 5.7e9 weights per token, text_len tokens per prompt) "
                                 "at the matmul rate (stages.text_encoder_flops)" + host_t5,
                 "image_encoder": "CLIP ViT-H/14 FLOPs on the image at the matmul rate (stages.clip_image_flops)",
                 "vae_encode": vae.format("the VAE encoder over the conditioning video", "Encoder3d"),
                 "vae_decode": decode}
    if "clip" not in conditioning:
        words["image_encoder"] = "none: no CLIP image encoder in this run"
    if not conditioning:
        words["vae_encode"] = "none: text-to-video encodes no video"
    return {**words, "host": f"host seconds per step x steps (an assumption, {setup.host_seconds_per_step:g} s; "
                             "its range docs/plausibility.md)"}


def dit_seconds(setup: Setup, kind: str, fast_path: bool) -> float:
    """Seconds of the DiT passes of one video, SVG schedule when ``kind != dense``.

    ``kind = dense``: every layer runs the dense mask, with or without ``fast_path`` (without it,
    the padded kv tiles make every tile pay the masking work, as in Splash).  Otherwise the SVG
    schedule: dense warm-up steps and layers run the best dense kernel (fast path: only the padded
    kv tiles are masked); sparse layers run mask ``kind`` with or without ``fast_path`` and pay
    profiling and layout transforms; the kernel's time is stretched by ``Setup.sparse_stretch`` (the TPU's
    evidence) and the whole sparse layer divided by ``Setup.sparse_efficiency`` (the GPU scenario).
    """
    breakdown = forward_breakdown(setup)
    other = sum(v for k, v in breakdown.items() if k != "self_attention")
    dense_layer = _dense_layer(setup)
    n_layers, passes = setup.model.layers, setup.steps * setup.sequential_passes
    if kind == "dense":
        return passes * (other + n_layers * _dense_layer(setup, fast_path))
    overhead = sum(svg_overhead_seconds(setup).values())
    kernel = setup.sparse_stretch * _per_chip_layer_attention(setup, kind, fast_path)
    sparse_layer = (kernel + overhead) / setup.sparse_efficiency
    dense_calls, sparse_calls = layer_calls(setup.steps, n_layers, setup.dense_steps, setup.dense_layers)
    return setup.sequential_passes * (setup.steps * other + dense_calls * dense_layer + sparse_calls * sparse_layer)


def video_seconds(setup: Setup, kind: str, fast_path: bool) -> float:
    """Seconds of one video end to end: the DiT passes plus the stages switched on in ``parts``."""
    return dit_seconds(setup, kind, fast_path) + sum(stage_seconds(setup).values())


#: The chain of variants the speedup is broken down over, in order: (name, sparse-layer mask, fast path).
#: Each step changes one thing in the sparse layers; the dense reference and SVG's dense warm-up
#: layers use the best dense kernel throughout.
CHAIN = (
    ("dense", "dense", True),
    ("svg, unaligned, no fast path", "svg", False),
    ("svg, aligned, no fast path", "svg-aligned", False),
    ("svg, aligned + fast path", "svg-aligned", True),
)


def sparse_layer_efficiency(setup: Setup, kind: str = "svg-aligned") -> float:
    """Ideal sparse-layer time (the dense reference's layer x mask density) over the modeled one (the
    kernel's tiles, steps and masking, SVG's profiling and layout transform, ``Setup.sparse_efficiency``):
    how close the sparse layers come to scaling with density."""
    stats, info = setup.tiles(kind)
    ideal = _dense_layer(setup) * info.density
    actual = (setup.sparse_stretch * _per_chip_layer_attention(setup, kind, True)
              + sum(svg_overhead_seconds(setup).values()))
    return ideal / actual * setup.sparse_efficiency


def model_video(setup: Setup) -> dict:
    """The C1/C2 numbers for one setup: attention shares (DiT-only and end to end), dense and SVG
    time (end to end), speedup, the speedup split, the stages and the multi-chip terms."""
    breakdown = forward_breakdown(setup)
    forward = sum(breakdown.values())
    stage = stage_seconds(setup)
    stage_total = sum(stage.values())
    chain = [{"variant": name, "seconds": video_seconds(setup, kind, fast)} for name, kind, fast in CHAIN]
    unaligned_fast = video_seconds(setup, "svg", True)
    dense_no_fast_path = video_seconds(setup, "dense", False)
    dense, svg = chain[0]["seconds"], chain[-1]["seconds"]
    for row in chain:
        row["speedup_vs_dense"] = dense / row["seconds"]
    contributions = {
        "sparse_attention": chain[0]["seconds"] / chain[1]["seconds"],
        "alignment": chain[1]["seconds"] / chain[2]["seconds"],
        "fast_path": chain[2]["seconds"] / chain[3]["seconds"],
        # the other order: fast path first, then alignment
        "fast_path_before_alignment": chain[1]["seconds"] / unaligned_fast,
        "alignment_after_fast_path": unaligned_fast / chain[3]["seconds"],
    }
    tiles = {}
    for kind in ("dense", "svg", "svg-aligned"):
        stats, info = setup.tiles(kind)
        tiles[kind] = {**stats.as_dict(), **info.as_dict()}
    dense_dit, svg_dit = dense - stage_total, svg - stage_total
    attention_video = setup.steps * setup.sequential_passes * breakdown["self_attention"]
    g = setup.geometry
    return {
        "model": setup.model.name, "geometry": {"name": g.name, "T": g.T, "H": g.H, "W": g.W, "L": g.L},
        "device": setup.device.name, "device_spec": setup.device.as_dict(), "chips": setup.chips,
        "chips_per_pass": setup.chips_per_pass, "cfg_split": setup.cfg_split,
        "mesh": parallel.mesh_shape(setup.device, setup.chips_per_pass), "heads_per_chip": setup.heads_per_chip,
        "steps": setup.steps, "cfg": setup.cfg, "block_q": setup.block_q, "block_kv": setup.block_kv,
        "kept": setup.kept, "multiplier": setup.multiplier, "sparse_efficiency": setup.sparse_efficiency,
        "warmup_steps": setup.warmup_steps, "warmup_layers": setup.warmup_layers,
        "dense_steps": setup.dense_steps, "dense_layers": setup.dense_layers,
        "efficiency": dataclasses.asdict(setup.efficiency), "kernel": setup.kernel,
        "dense_kernel": setup.dense_kernel or setup.kernel, "attention_pricing": setup.attention_pricing(),
        "parts": sorted(setup.parts), "memory": memory(setup),
        "attention_share": breakdown["self_attention"] / forward,
        "attention_share_end_to_end": attention_video / dense,
        "communication_share": (breakdown["communication"] + breakdown["weight_gather"]) / forward,
        "forward_seconds": forward,
        "forward_share_by_op": {k: v / forward for k, v in breakdown.items()},
        "stage_seconds": stage, "stage_instruments": stage_instruments(setup),
        "dense_seconds": dense, "svg_seconds": svg, "speedup": dense / svg, "saved_seconds": dense - svg,
        "dense_minutes": dense / 60, "svg_minutes": svg / 60, "saved_minutes": (dense - svg) / 60,
        "dense_dit_seconds": dense_dit, "svg_dit_seconds": svg_dit, "speedup_dit": dense_dit / svg_dit,
        "sparse_layer_efficiency": sparse_layer_efficiency(setup),
        "chain": chain, "unaligned_fast_path_seconds": unaligned_fast,
        "dense_no_fast_path_seconds": dense_no_fast_path, "contributions": contributions,
        "svg_overhead_per_sparse_layer": svg_overhead_seconds(setup), "tiles": tiles,
        "sparse_stretch": setup.sparse_stretch, "provenance": setup.provenance,
    }


def sweep_resolution(setup: Setup, resolutions: Iterable[str] = tuple(PRESETS)) -> list[dict]:
    """C2/C5: attention shares, dense/SVG minutes and speedup per resolution."""
    rows = []
    for name in resolutions:
        result = model_video(dataclasses.replace(setup, geometry=get_geometry(name)))
        rows.append({"resolution": name, "L": result["geometry"]["L"],
                     "attention_share": result["attention_share"],
                     "attention_share_end_to_end": result["attention_share_end_to_end"],
                     "dense_minutes": result["dense_minutes"], "svg_minutes": result["svg_minutes"],
                     "speedup": result["speedup"], "saved_minutes": result["saved_minutes"],
                     "provenance": result["provenance"]})
    return rows


__all__ = ["PARTS", "WEIGHTS", "SETTING_FIELDS", "ATTENTION_SHARDINGS", "DEFAULT_TEMPORAL_FRACTION", "sequence_shard_tiles", "IMAGE_ENCODERS", "RECIPE_BAND_RULES", "recipe_fields", "Setup", "svg_overhead_seconds", "memory", "communication_seconds", "other_ops_seconds",
           "weight_gather_seconds", "forward_breakdown", "STAGES", "stage_seconds", "stage_instruments", "dit_seconds", "video_seconds", "CHAIN",
           "sparse_layer_efficiency", "model_video", "sweep_resolution"]
