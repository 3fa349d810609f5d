"""A readable cost model of video DiT inference: attention share, dense vs SVG time, speedup.

There is no TPU here, so claims C1 (1.69x end to end at 1440p, over 16 minutes saved) and C2 (88.2 %
of the time in self-attention at 1440p) are checked with a model anyone can read, run and argue with,
priced where it can be from what the real TPU compiler scheduled.  Its parts, one module each:

- :mod:`~svgtpu.costmodel.specs`: devices as data, each constant with its public source; a TPU's clock
  from the compiled probe, else a labelled prior; slice names (``v7x-8`` is 4 chips);
- :mod:`~svgtpu.costmodel.compiled`: the reader of ``figures/compiled_tiles.json`` (probe and tile cycles);
- :mod:`~svgtpu.costmodel.workload`: model configs (Wan 2.1 14B / 1.3B, Wan 2.2 5B, the toy DiT);
- :mod:`~svgtpu.costmodel.roofline`: efficiencies and the DiT's non-attention ops as roofline ops;
- :mod:`~svgtpu.costmodel.kernel_work`: VPU/EUP work per score element counted from our kernel (the prior);
- :mod:`~svgtpu.costmodel.tile_costs`: the steps each kernel takes on a mask, a head priced from the
  compiled table or from priors, the unit-level attention ceiling per device;
- :mod:`~svgtpu.costmodel.parallel`: slice mesh, all-to-alls across its bisection, weight sharding;
- :mod:`~svgtpu.costmodel.stages`: text encoder, VAE decode (counted layer by layer; on a GPU a published measurement), host;
- :mod:`~svgtpu.costmodel.pipeline`: :class:`Setup`, the SVG schedule, :func:`model_video`;
- :mod:`~svgtpu.costmodel.policy`: SVG policies as data in MaxDiffusion's names (windows, density per Wan 2.2
  expert, the expert split from the scheduler, the density -> band rules), read from a MaxDiffusion YAML;
- :mod:`~svgtpu.costmodel.sparse_layers`: MaxDiffusion's SVG runs on v6e-8 priced term by term from the
  compiled table, with one fitted number (the sparse stretch);
- :mod:`~svgtpu.costmodel.validate`: published measured times (``published.json``), one dense and one SVG
  calibration point per device family, predicted vs published (independent points apart), the
  calibrated-setup factory (:func:`~svgtpu.costmodel.validate.calibrated_setup`) and the sparse evidence;
- :mod:`~svgtpu.costmodel.plausible`: the bounds each fitted constant must keep, written before the fit;
  :mod:`~svgtpu.costmodel.fits`: every fitted constant with the rows it reads;
- :mod:`~svgtpu.costmodel.against_tpu`: blind vs calibrated against MaxDiffusion's measured runs, the gap;
- :mod:`~svgtpu.costmodel.sensitivity`: the unknown constants' ranges, tornado and interval, refitted;
- :mod:`~svgtpu.costmodel.claim_values`: each claim's central value and interval, the check beside it (one
  function every output reads);
- :mod:`~svgtpu.costmodel.scenarios`: recipe and kernel choices as rows;
- :mod:`~svgtpu.costmodel.command`: ``svgtpu costmodel``.

No JAX: with the compiled table the model imports none; without it, pricing our kernel from priors
counts its work from its jaxpr (:func:`~svgtpu.costmodel.kernel_work.counted_work`), the one exception.
Measuring this CPU's rates and the toy-DiT check live with the benchmarks (:mod:`svgtpu.bench.cpu`).
Every number is labelled ``modeled-<device>``.
"""

from svgtpu.costmodel.specs import (DEVICES, EUP_CYCLES_PER_VREG, FAMILIES, GPU_FAMILIES, GRID_STEP_SECONDS, SLICE_COUNTS,
                                    VALU_SLOTS, VREG_ELEMENTS, DeviceSpec, get_device, parse_slice, tpu_spec, with_probe)
from svgtpu.costmodel.compiled import (AUTO, CompiledTable, CompiledTile, Probe, compiled_path, default_compiled,
                                       load_compiled)
from svgtpu.costmodel.workload import MODEL_NAMES, MODELS, ModelConfig, get_model
from svgtpu.geometry import PRESETS, get_geometry
from svgtpu.costmodel.roofline import (Efficiency, Op, elementwise_op, forward_flops, forward_ops, matmul_op,
                                       op_seconds, self_attention_flops)
from svgtpu.costmodel.kernel_work import FLASH, XLA_UNFUSED, KernelWork, counted_work
from svgtpu.costmodel.tile_costs import (ATTENTION_KERNELS, MASK_KINDS, attention_ceiling, attention_head_seconds,
                                         compiled_head_cycles, compiled_head_seconds, kernel_steps, mask_tiles, MaskFacts,
                                         tile_seconds, tile_units)
from svgtpu.costmodel.parallel import all_gather_seconds, all_to_all_seconds, mesh_shape
from svgtpu.costmodel.stages import text_encoder_flops, vae_decode_bytes, vae_decode_flops, vae_decoder_layers
from svgtpu.costmodel.pipeline import (CHAIN, IMAGE_ENCODERS, PARTS, STAGES, recipe_fields, WEIGHTS, Setup, communication_seconds, dit_seconds,
                                       forward_breakdown, memory, model_video, sparse_layer_efficiency,
                                       stage_seconds, svg_overhead_seconds, sweep_resolution, video_seconds,
                                       weight_gather_seconds)
from svgtpu.costmodel.sensitivity import (KNOBS, QUANTITIES as SENSITIVITY_QUANTITIES, SPLIT as SENSITIVITY_SPLIT, Knob,
                                          at_knob, sensitivity, sparse_knobs, speedup_surface, stretch_as_efficiency,
                                          tornado_rows)
from svgtpu.costmodel.policy import POLICY_NAMES, Policy, get_policy
from svgtpu.costmodel.validate import (PublishedPoint, calibrated_setup, setting_setup, family_efficiency, family_stretch,
                                      fit_efficiency, fit_sparse_stretch, maxdiffusion_rows, predict_seconds,
                                      published_points, published_svg_efficiency, related_calibration,
                                      sparse_efficiency_evidence, validate, MISS)
from svgtpu.costmodel.against_tpu import against_tpu, blind_prediction
from svgtpu.costmodel.against_gpu import against_h200
from svgtpu.costmodel.joint import joint_interval
from svgtpu.costmodel.claim_values import claim_rows, claim_values, production_setup
from svgtpu.costmodel.gpu_rates import GpuRates, hopper_rates
from svgtpu.costmodel.scenarios import scenario_setups, scenario_table

__all__ = ["claim_rows", "claim_values", "production_setup", "joint_interval", "MISS", "against_h200", "GpuRates", "hopper_rates", 
    "DeviceSpec", "DEVICES", "get_device", "tpu_spec", "with_probe", "parse_slice", "SLICE_COUNTS", "FAMILIES",
    "GPU_FAMILIES", "VREG_ELEMENTS", "VALU_SLOTS", "EUP_CYCLES_PER_VREG", "GRID_STEP_SECONDS",
    "AUTO", "CompiledTable", "CompiledTile", "Probe", "compiled_path", "default_compiled", "load_compiled",
    "ModelConfig", "MODELS", "MODEL_NAMES", "get_model", "PRESETS", "get_geometry",
    "Efficiency", "Op", "matmul_op", "elementwise_op", "forward_ops", "forward_flops", "self_attention_flops",
    "op_seconds",
    "KernelWork", "FLASH", "XLA_UNFUSED", "counted_work",
    "MASK_KINDS", "ATTENTION_KERNELS", "tile_units", "tile_seconds", "attention_ceiling", "attention_head_seconds",
    "MaskFacts", "mask_tiles", "kernel_steps", "compiled_head_cycles", "compiled_head_seconds",
    "mesh_shape", "all_to_all_seconds", "all_gather_seconds",
    "text_encoder_flops", "vae_decoder_layers", "vae_decode_flops", "vae_decode_bytes",
    "PARTS", "IMAGE_ENCODERS", "WEIGHTS", "recipe_fields", "Setup", "svg_overhead_seconds", "memory", "communication_seconds",
    "weight_gather_seconds", "forward_breakdown", "STAGES", "stage_seconds", "dit_seconds", "video_seconds", "CHAIN",
    "sparse_layer_efficiency", "model_video", "sweep_resolution",
    "Knob", "KNOBS", "SENSITIVITY_QUANTITIES", "SENSITIVITY_SPLIT", "at_knob", "sensitivity", "sparse_knobs",
    "tornado_rows", "stretch_as_efficiency", "POLICY_NAMES", "Policy", "get_policy", "family_stretch", "fit_sparse_stretch",
    "maxdiffusion_rows", "against_tpu", "blind_prediction",
    "speedup_surface",
    "PublishedPoint", "published_points", "predict_seconds", "family_efficiency", "fit_efficiency", "calibrated_setup", "setting_setup",
    "related_calibration", "published_svg_efficiency", "sparse_efficiency_evidence", "validate",
    "scenario_setups", "scenario_table",
]
