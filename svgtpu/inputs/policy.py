"""A MaxDiffusion policy file (``svgtpu costmodel --policy FILE.yml``): the keys of a MaxDiffusion config the cost
model reads, each with its type and range.

The file is a MaxDiffusion YAML (``base_wan_27b.yml`` and its overrides): keys this model does not read are passed
over, but every ``svg_*`` key must be one of MaxDiffusion's (:data:`SVG_KEYS`; a misspelled one would otherwise be
dropped) and every key read has its type (YAML ``true``, not ``"true"``; an integer where MaxDiffusion takes one)
and its range: densities in (0, 1], a step window within the run's steps (both ``-1``: every step), positive
sizes, a finite flow shift.  ``use_svg_attention: false`` is a config that runs no SVG: refused here, since the
policy mode models SVG's run (the dense run is ``svgtpu costmodel`` without ``--policy``).  The keys MaxDiffusion
has and this model does not follow are taken only at MaxDiffusion's default (:data:`UNMODELED_KEYS`).  The layer
window and the profiled queries are checked against the model and video by
:func:`svgtpu.costmodel.policy.from_config`, which knows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator

from svgtpu.errors import BadInput
from svgtpu.inputs.schema import Schema, validate

#: MaxDiffusion's ``svg_*`` keys (``SVG_ATTENTION_DEFAULTS`` of ``svg_attention.py``,
#: :data:`svgtpu.costmodel.policy.SVG_ATTENTION`; the two Wan expert densities its configs resolve into
#: ``svg_spatial_density``; the two it refuses unless at their default).
SVG_KEYS = ("use_svg_attention", "svg_spatial_density", "svg_high_noise_density", "svg_low_noise_density",
            "svg_sample_max_row", "svg_profile_query_count", "svg_profile_seed", "svg_dense_layer_fraction",
            "svg_dense_timestep_fraction", "svg_active_start_step", "svg_active_end_step", "svg_active_start_layer",
            "svg_active_end_layer", "svg_num_train_timesteps", "svg_include_first_frame", "svg_global_stride",
            "svg_flash_block_sizes", "svg_implementation", "svg_global_offset")
#: MaxDiffusion keys this model does not follow, accepted only at MaxDiffusion's default (where they change nothing);
#: ``svg_num_train_timesteps`` at the 1000 train timesteps the expert split counts (:class:`~svgtpu.costmodel.policy.ExpertSplit`).
UNMODELED_KEYS = {"svg_dense_layer_fraction": 0.0, "svg_dense_timestep_fraction": 0.0, "svg_global_stride": 0,
                  "svg_global_offset": 0, "svg_implementation": "official_svg", "svg_num_train_timesteps": 1000}
#: The most denoising steps: the scheduler has 1000 train timesteps, so more steps repeat timesteps.
MAX_STEPS = 1000
#: Int32, the index type MaxDiffusion's (JAX's) sampling takes.
INT32 = 2**31 - 1

Density = Annotated[float, Field(gt=0, le=1)]
Positive = Annotated[int, Field(ge=1, le=INT32)]
Window = Annotated[int, Field(ge=-1, le=INT32)]
Parallelism = Annotated[int, Field(ge=-1, le=4096)]
BlockSizes = dict[str, Annotated[int, Field(ge=1, le=2**20)]]


class PolicyConfig(Schema):
    """The keys of a MaxDiffusion config the cost model reads (module doc); ``None`` (a key with no value) is absent."""

    model_config = ConfigDict(extra="forbid")
    use_svg_attention: bool | None = None
    svg_spatial_density: Density | None = None
    svg_high_noise_density: Density | None = None
    svg_low_noise_density: Density | None = None
    svg_sample_max_row: Positive | None = None
    svg_profile_query_count: Positive | None = None
    svg_profile_seed: Annotated[int, Field(ge=0, le=2**32 - 1)] | None = None
    svg_dense_layer_fraction: float | None = None
    svg_dense_timestep_fraction: float | None = None
    svg_active_start_step: Window | None = None
    svg_active_end_step: Window | None = None
    svg_active_start_layer: Window | None = None
    svg_active_end_layer: Window | None = None
    svg_num_train_timesteps: int | None = None
    svg_include_first_frame: bool | None = None
    svg_global_stride: int | None = None
    svg_flash_block_sizes: BlockSizes | None = None
    svg_implementation: str | None = None
    svg_global_offset: int | None = None
    do_classifier_free_guidance: bool | None = None
    flow_shift: Annotated[float, Field(gt=0)] | None = None
    boundary_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    height: Annotated[int, Field(ge=16, le=8192)] | None = None
    width: Annotated[int, Field(ge=16, le=8192)] | None = None
    num_frames: Annotated[int, Field(ge=1, le=4097)] | None = None
    num_inference_steps: Annotated[int, Field(ge=1, le=MAX_STEPS)] | None = None
    flash_block_sizes: BlockSizes | None = None
    ici_data_parallelism: Parallelism | None = None
    ici_context_parallelism: Parallelism | None = None
    ulysses_shards: Parallelism | None = None

    @field_validator(*UNMODELED_KEYS)
    @classmethod
    def _at_default(cls, value, info):
        default = UNMODELED_KEYS[info.field_name]
        if value is not None and value != default:
            raise ValueError(f"must be {default!r} (MaxDiffusion's default; this model does not follow it)")
        return value

    @field_validator("use_svg_attention")
    @classmethod
    def _svg_on(cls, value):
        if value is False:
            raise ValueError("must be true: this config runs no SVG (MaxDiffusion's dense attention), so it has no "
                             "SVG policy to model; the dense run is svgtpu costmodel without --policy")
        return value


def _steps_window(config: PolicyConfig, steps: int) -> str | None:
    """Why the step window of ``config`` does not fit a run of ``steps`` steps, or ``None``."""
    start, end = config.svg_active_start_step, config.svg_active_end_step
    start, end = (-1 if start is None else start), (-1 if end is None else end)
    if start == end == -1:
        return None
    if not 0 <= start < end <= steps:
        return (f"svg_active_start_step / svg_active_end_step = [{start}, {end}): must be a window "
                f"0 <= start < end <= num_inference_steps = {steps} (both -1: every step)")
    return None


def policy_config(config, where: str, default_steps: int) -> dict:
    """The MaxDiffusion config ``config`` checked (module doc; ``default_steps``: the run's steps where the config
    sets none), returned as it is."""
    if not isinstance(config, Mapping):
        raise BadInput(f"{where}: a MaxDiffusion config is a mapping of keys, got {type(config).__name__}")
    keys = [k for k in config if not isinstance(k, str)]
    if keys:
        raise BadInput(f"{where}: key {keys[0]!r}: MaxDiffusion's keys are names (strings)")
    unknown = sorted(k for k in config if k.startswith("svg_") and k not in SVG_KEYS)
    if unknown:
        raise BadInput(f"{where}: unknown SVG key(s) {', '.join(unknown)}; MaxDiffusion's are {', '.join(SVG_KEYS)}")
    read = validate(PolicyConfig, {k: v for k, v in config.items() if k in PolicyConfig.model_fields}, where)
    steps = read.num_inference_steps if read.num_inference_steps is not None else default_steps
    problem = _steps_window(read, steps)
    if problem:
        raise BadInput(f"{where}: {problem}")
    return dict(config)


__all__ = ["SVG_KEYS", "UNMODELED_KEYS", "MAX_STEPS", "PolicyConfig", "policy_config"]
