"""SVG policies as data, in MaxDiffusion's names: where SVG runs, how dense, on which Wan 2.2 expert.

MaxDiffusion's SVG (AI-Hypercomputer/maxdiffusion pull request 480, ``docs/svg.md`` and
``src/maxdiffusion/models/wan/transformers/svg_attention.py``, cited in :data:`SOURCES`) is the one public
implementation of the write-up's technique that ran on TPUs and published its timings.  A run's policy is
its ``svg_*`` keys; :class:`Policy` holds them, validated once:

- step and layer windows, zero-based and half-open (``[11, 40)`` is steps 11 ... 39);
- a density per Wan 2.2 expert (``svg_high_noise_density``, ``svg_low_noise_density``), or one
  (``svg_spatial_density``) for a single-expert model;
- the profiled query count and the row window it is drawn from, the first-frame anchor;
- the density -> band rule (:data:`BAND_RULES`): MaxDiffusion's ``w = N (1 - sqrt(1 - density))``
  rounded up to 128 (the band alone keeps ``density`` of the pairs; the anchor comes on top), or SVG's own
  (the band + anchor mask whose kept pairs are nearest ``density``, :func:`svgtpu.masks.core.multiplier_for_kept`).

Which expert runs a step follows from the scheduler (:class:`ExpertSplit`): a step is the high-noise
expert's while its timestep is at least ``boundary_ratio x 1000``, on MaxDiffusion's flow grid with the
run's flow shift.  ``docs/svg.md`` does not state the shift of its measured runs; it tells the reader to add
the policy to "a Wan2.2 configuration used by generate_wan.py", i.e. ``base_wan_27b.yml`` (:data:`WAN27B_CONFIG`),
which sets 12.0 (Wan's own ``t2v_A14B`` value) since MaxDiffusion's commit bf910204 (2026-07-01) and 5.0
before it (:data:`EARLIER_WAN27B_CONFIG`).  The docs' dense attention, ``ulysses_ring_custom_fixed_m`` at
6400 x 2048, entered MaxDiffusion later (:data:`FIXED_M_RUNNER`, 2026-07-27), so the pull request was written
on a base whose config sets 12.0: the published runs are modeled with 12.0, and 5.0 is an end of the interval
(:mod:`svgtpu.costmodel.sensitivity`).

Only the moderate policy is published in full.  Conservative and aggressive are published by their
estimated transformer FLOPs saved only; :func:`scaled_policy` is the mapping rule, written before any
comparison: moderate's windows and expert split, both densities times one scale, the scale chosen so the
policy's transformer FLOPs saved (:func:`flops_saved`, a count, not a timing, counted as MaxDiffusion's
sources say theirs is) equal the published share.
No JAX here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.inputs.policy import SVG_KEYS, UNMODELED_KEYS
from svgtpu.geometry import VideoGeometry
from svgtpu.recipes import (MAXDIFFUSION_COMMIT, MAXDIFFUSION_REPO, MAXDIFFUSION_SVG_COMMIT, MAXDIFFUSION_SVG_DENSITIES,
                            MAXDIFFUSION_SVG_DOCS, Source)

SVG_DOCS = dataclasses.replace(MAXDIFFUSION_SVG_DOCS, what=(
    "moderate policy keys; attention config for eight devices; measured v6e-8 table with 'Estimated "
    "total transformer FLOPs saved'; 'The anchor and tile rounding affect the actual number of retained "
    "interactions'"))
SVG_ATTENTION = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/models/wan/transformers/svg_attention.py",
                       "db8c0cd45942cbbca9a23865a7ac1e356c62b12e",
                       "svg_execution_band_width: w = N (1 - sqrt(1 - s)) rounded up to 128; is_svg_active: "
                       "start <= index < end; SVG_ATTENTION_DEFAULTS")
WAN27B_CONFIG = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/configs/base_wan_27b.yml", MAXDIFFUSION_COMMIT,
                       "height 720, width 1280, num_frames 81, num_inference_steps 40, flow_shift 12.0 (set in "
                       "bf91020498f7, 2026-07-01: 'Official Wan2.2 T2V A14B sampling shift ... ~step 26 of 40 at "
                       "boundary_ratio 0.875'), boundary_ratio 0.875, do_classifier_free_guidance True")
#: Where MaxDiffusion's Wan 2.2 keeps its weights: ``embed`` sharded over ``context`` (and ``fsdp``, 1 here), so each
#: context group of a data x context mesh all-gathers a layer's weights in every pass (priced by
#: :func:`svgtpu.costmodel.pipeline.weight_gather_seconds`; the compiled Wan block holds the same gathers).
WEIGHT_SHARDING = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/configs/base_wan_27b.yml", MAXDIFFUSION_COMMIT,
                         "logical_axis_rules: ['embed', ['context', 'fsdp']]; weights_dtype bfloat16; scan_layers True")
EARLIER_WAN27B_CONFIG = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/configs/base_wan_27b.yml",
                               "01c93b4200964c3ae46d531f4a56827615a955e7", "flow_shift 5.0 (before bf91020498f7)")
FIXED_M_RUNNER = Source(MAXDIFFUSION_REPO, "end_to_end/tpu/run_wan_fast_inference.sh",
                        "8dd630549ce1cb55e167a66102dcc3aef4cc1926",
                        "2026-07-27, the commit that adds ulysses_ring_custom_fixed_m: base_wan_27b.yml with attention "
                        "ulysses_ring_custom_fixed_m, block_q 6400, block_kv 2048, data 2 x context 4, ulysses_shards 2, "
                        "no flow_shift override")
WAN_FLOPS = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/trainers/base_wan_trainer.py", MAXDIFFUSION_COMMIT,
                   "calculate_tflops: total_transformer_flops = layers x (self QKV 3 x 2LD^2, self attention "
                   "2 x 2L^2 D, cross KV 3 x 2 x 512 D^2, cross Q 2LD^2, cross attention 2 x 2 x 512 LD, output "
                   "projections 2 x 2LD^2, FFN 2 x 2 L D ffn)")
BALANCED_ROUNDING = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/kernels/custom_svg_balanced_rounding_attention.py",
                           "3b9f325508b2ae60546fabf30eeb00dea3393b7f",
                           "boundary tiles rounded up or down so the rounded pairs match the band + anchor's exact "
                           "boundary pairs (global_balanced, the default)")
SCHEDULER = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/schedulers/scheduling_unipc_multistep_flax.py",
                   MAXDIFFUSION_COMMIT, "use_flow_sigmas: sigmas = linspace(1, 1/1000, N+1)[:-1], shifted "
                   "shift*s/(1+(shift-1)*s), timesteps = int32(sigma*1000)")
EXPERT_SWITCH = Source(MAXDIFFUSION_REPO, "src/maxdiffusion/pipelines/wan/wan_pipeline_2_2.py", MAXDIFFUSION_COMMIT,
                       "boundary = boundary_ratio x num_train_timesteps; high-noise expert while timestep >= boundary")
WAN22_T2V_A14B = Source("Wan-Video/Wan2.2", "wan/configs/wan_t2v_A14B.py", "d6feb225df10c4fca72dd1c60de4be924df9cf3a",
                        "sample_shift 12.0, sample_steps 40, boundary 0.875 (read in the fork HighDoping/Wan2.2)")
SOURCES = (SVG_DOCS, SVG_ATTENTION, WAN27B_CONFIG, WEIGHT_SHARDING, EARLIER_WAN27B_CONFIG, FIXED_M_RUNNER,
           WAN_FLOPS, BALANCED_ROUNDING, SCHEDULER, EXPERT_SWITCH, WAN22_T2V_A14B)

#: base_wan_27b.yml's Wan 2.2 T2V video and sampler: what a MaxDiffusion YAML that omits a key runs.
BASE_WAN_27B = {"height": 720, "width": 1280, "num_frames": 81, "num_inference_steps": 40, "flow_shift": 12.0,
                "boundary_ratio": 0.875, "do_classifier_free_guidance": True}
#: base_wan_27b.yml's flow shift before 2026-07-01 (:data:`EARLIER_WAN27B_CONFIG`): the other end of the expert split.
EARLIER_FLOW_SHIFT = 5.0
BAND_RULES = ("maxdiffusion", "svg")
#: Wan 2.2 A14B's transformer layers (one 14B expert per step).
WAN22_LAYERS = 40


@dataclasses.dataclass(frozen=True)
class ExpertSplit:
    """Which Wan 2.2 expert runs each step: high-noise while ``timestep >= boundary_ratio x 1000`` on
    MaxDiffusion's flow grid (:data:`SCHEDULER`, :data:`EXPERT_SWITCH`) with ``flow_shift``."""

    flow_shift: float = BASE_WAN_27B["flow_shift"]
    boundary_ratio: float = BASE_WAN_27B["boundary_ratio"]
    train_timesteps: int = 1000

    def __post_init__(self):
        if not (isinstance(self.flow_shift, (int, float)) and self.flow_shift > 0):
            raise BadInput(f"flow_shift must be a positive number, got {self.flow_shift!r}")
        if not (isinstance(self.boundary_ratio, (int, float)) and 0 <= self.boundary_ratio <= 1):
            raise BadInput(f"boundary_ratio must be in [0, 1], got {self.boundary_ratio!r}")

    def timesteps(self, steps: int) -> tuple[int, ...]:
        """``int(1000 sigma_i)`` for ``sigma_i`` = shifted ``linspace(1, 1/1000, steps + 1)[i]``, ``i < steps``."""
        n, top, bottom = steps, 1.0, 1.0 / self.train_timesteps
        out = []
        for i in range(n):
            s = top + (bottom - top) * i / n
            sigma = self.flow_shift * s / (1 + (self.flow_shift - 1) * s)
            sigma = min(sigma, 1.0 - 1e-6)   # the scheduler nudges a first sigma of 1 just below it
            out.append(int(sigma * self.train_timesteps))
        return tuple(out)

    def high_noise(self, steps: int) -> tuple[bool, ...]:
        """Per step: does the high-noise expert run it."""
        boundary = self.boundary_ratio * self.train_timesteps
        return tuple(t >= boundary for t in self.timesteps(steps))


def _window(name: str, window) -> tuple[int, int]:
    try:
        start, end = window
    except (TypeError, ValueError):
        raise BadInput(f"{name} must be a [start, end) pair of integers, got {window!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        raise BadInput(f"{name} must be a [start, end) pair of integers, got {window!r}")
    if not 0 <= start < end:
        raise BadInput(f"{name} must be a non-empty half-open window [start, end) with 0 <= start < end, "
                       f"got [{start}, {end})")
    return start, end


def _density(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise BadInput(f"{name} must be a density in (0, 1], got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Policy:
    """One SVG policy (module doc), validated once.  ``densities``: ``(high-noise, low-noise)``."""

    name: str
    steps: tuple[int, int]                 # active denoising steps [start, end), zero-based
    layers: tuple[int, int]                # active transformer layers [start, end)
    densities: tuple[float, float]         # per Wan 2.2 expert: high noise, low noise
    profile_queries: int = 64
    sample_max_row: int = 10000
    anchor: bool = True                    # svg_include_first_frame: the first H x W keys of the layout
    band_rule: str = "maxdiffusion"
    split: ExpertSplit = ExpertSplit()
    source: str = ""

    def __post_init__(self):
        object.__setattr__(self, "steps", _window("svg step window", self.steps))
        object.__setattr__(self, "layers", _window("svg layer window", self.layers))
        if len(self.densities) != 2:
            raise BadInput(f"densities must be (high-noise, low-noise), got {self.densities!r}")
        object.__setattr__(self, "densities", (_density("svg_high_noise_density", self.densities[0]),
                                               _density("svg_low_noise_density", self.densities[1])))
        for field in ("profile_queries", "sample_max_row"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise BadInput(f"{field} must be a positive integer, got {value!r}")
        if self.band_rule not in BAND_RULES:
            raise BadInput(f"band_rule must be one of {', '.join(BAND_RULES)}, got {self.band_rule!r}")

    def calls(self, steps: int, layers: int) -> dict:
        """Attention calls of one pass: ``dense`` and, per density, how many sparse calls run it."""
        high = self.split.high_noise(steps)
        sparse: dict[float, int] = {}
        layer_count = max(0, min(self.layers[1], layers) - self.layers[0])
        for step in range(self.steps[0], min(self.steps[1], steps)):
            density = self.densities[0] if high[step] else self.densities[1]
            sparse[density] = sparse.get(density, 0) + layer_count
        return {"dense": steps * layers - sum(sparse.values()), "sparse": sparse,
                "high_noise_steps": sum(high)}

    def scaled(self, scale: float, name: str) -> "Policy":
        """This policy with both densities times ``scale`` (at most 1)."""
        return dataclasses.replace(self, name=name, densities=tuple(min(1.0, d * scale) for d in self.densities))

    def as_dict(self) -> dict:
        return {"name": self.name, "steps": list(self.steps), "layers": list(self.layers),
                "high_noise_density": self.densities[0], "low_noise_density": self.densities[1],
                "profile_queries": self.profile_queries, "sample_max_row": self.sample_max_row,
                "anchor": self.anchor, "band_rule": self.band_rule, "flow_shift": self.split.flow_shift,
                "boundary_ratio": self.split.boundary_ratio, "source": self.source}


def band_half_width(geometry: VideoGeometry, density: float, rule: str = "maxdiffusion") -> int:
    """The band half-width ``w`` (tokens) of ``density`` under ``rule`` (:data:`BAND_RULES`)."""
    from svgtpu.masks.core import BAND_QUANTUM, band_window, multiplier_for_kept

    density = _density("density", density)
    N = geometry.L
    if rule == "maxdiffusion":
        if density >= 1:
            return N - 1
        width = N * (1.0 - math.sqrt(1.0 - density))
        return min(int(math.ceil(width / BAND_QUANTUM)) * BAND_QUANTUM, N - 1)
    if rule == "svg":
        return N - 1 if density >= 1 else band_window(geometry, multiplier_for_kept(geometry, density))
    raise BadInput(f"band_rule must be one of {', '.join(BAND_RULES)}, got {rule!r}")


def band_multiplier(geometry: VideoGeometry, density: float, rule: str = "maxdiffusion") -> float:
    """``w / F``: the band as the package's SVG mask takes it (:func:`svgtpu.masks.core.svg_mask`)."""
    return band_half_width(geometry, density, rule) / geometry.F


@functools.lru_cache(maxsize=256)
def kept_pairs(geometry: VideoGeometry, density: float, rule: str = "maxdiffusion", anchor: bool = True) -> float:
    """The share of ``(q, k)`` pairs the band (and anchor: the first ``H x W`` keys) keeps, exactly."""
    from svgtpu.masks.core import BandSinkMask

    return BandSinkMask(geometry.L, geometry.F if anchor else 0, band_half_width(geometry, density, rule)).density()


def flops_saved(policy: Policy, model, geometry: VideoGeometry, steps: int) -> float:
    """The share of a denoising run's transformer FLOPs the policy saves, counted as MaxDiffusion's
    "Estimated total transformer FLOPs saved" (:data:`SVG_DOCS`) is, as far as its sources say; it publishes
    no estimator, so each part is read from what it does publish:

    - the denominator: every transformer FLOP of every step and layer (self- and cross-attention, their
      projections, the FFN; both CFG passes, which cancel), :func:`svgtpu.costmodel.roofline.forward_flops`,
      which counts the terms of MaxDiffusion's own Wan count (:data:`WAN_FLOPS`);
    - the saving: each sparse call's self-attention FLOPs times ``1 - kept pairs`` of the band and the anchor
      (the docs: "the anchor and tile rounding affect the actual number of retained interactions"); tile
      rounding is left out because MaxDiffusion's rounding keeps the pair budget (:data:`BALANCED_ROUNDING`);
    - which expert, so which density, runs each sparse step: the policy's split (:class:`ExpertSplit`, flow
      shift 12.0 for the published runs, module doc).

    A count, not a timing."""
    from svgtpu.costmodel.roofline import forward_flops

    flops = forward_flops(model, geometry.L)
    per_call = flops["self_attention"] / model.layers
    saved = sum(n * per_call * (1 - kept_pairs(geometry, d, policy.band_rule, policy.anchor))
                for d, n in policy.calls(steps, model.layers)["sparse"].items())
    return saved / (steps * sum(flops.values()))


def scaled_policy(base: Policy, target_saved: float, name: str, model, geometry: VideoGeometry, steps: int) -> Policy:
    """The mapping rule for a policy published only by its FLOPs saved: ``base``'s windows, expert split and
    rule, both densities times the one scale at which :func:`flops_saved` equals ``target_saved`` (bisection;
    saved falls as the scale grows)."""
    if not 0 < target_saved < 1:
        raise BadInput(f"target FLOPs saved must be in (0, 1), got {target_saved!r}")
    lo, hi = 1e-3, 1.0 / min(base.densities)
    f = lambda s: flops_saved(base.scaled(s, name), model, geometry, steps)  # noqa: E731
    if not f(hi) <= target_saved <= f(lo):
        raise BadInput(f"no density scale makes {base.name}'s windows save {target_saved:.1%} of the FLOPs")
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target_saved else (lo, mid)
    return dataclasses.replace(base.scaled((lo + hi) / 2, name),
                               source=f"mapping rule: {base.name}'s windows and expert split, densities x "
                                      f"{(lo + hi) / 2:.4f} so the transformer FLOPs saved are {target_saved:.1%} "
                                      f"({SVG_DOCS.cite()})")


#: The moderate policy, published in full (:data:`SVG_DOCS`): its ``svg_*`` overrides (its two expert densities
#: are :data:`svgtpu.recipes.MAXDIFFUSION_SVG_DENSITIES`, low noise then high noise, cited there).
MODERATE_KEYS = {"use_svg_attention": True, "svg_high_noise_density": MAXDIFFUSION_SVG_DENSITIES[1],
                 "svg_low_noise_density": MAXDIFFUSION_SVG_DENSITIES[0],
                 "svg_active_start_step": 11, "svg_active_end_step": 40, "svg_active_start_layer": 1,
                 "svg_active_end_layer": 40, "svg_profile_query_count": 64, "svg_sample_max_row": 10000,
                 "svg_profile_seed": 0, "svg_include_first_frame": True}
#: Estimated total transformer FLOPs saved of the policies published by that number only (:data:`SVG_DOCS`).
PUBLISHED_FLOPS_SAVED = {"maxdiffusion-conservative": 0.272, "maxdiffusion-moderate": 0.322,
                         "maxdiffusion-aggressive": 0.373}


def from_config(config: Mapping, name: str = "config") -> tuple[Policy, dict]:
    """``(policy, video)`` from a MaxDiffusion config's keys, checked by its schema
    (:mod:`svgtpu.inputs.policy`): the ``svg_*`` keys (MaxDiffusion's defaults, ``SVG_ATTENTION_DEFAULTS`` of
    :data:`SVG_ATTENTION`, where absent: a window of -1 means every step or layer, one ``svg_spatial_density`` of
    0.25 for both experts) and the video and sampler keys (default: :data:`BASE_WAN_27B`).  The layer window must
    lie within Wan 2.2's :data:`WAN22_LAYERS` layers and the profiled queries within the video's tokens.
    ``video``: height, width, num_frames, num_inference_steps, cfg."""
    from svgtpu.inputs.policy import policy_config
    policy_config(config, name, BASE_WAN_27B["num_inference_steps"])
    get = lambda key, default: config[key] if config.get(key) is not None else default  # noqa: E731
    video = {k: get(k, v) for k, v in BASE_WAN_27B.items()}
    steps, layers = video["num_inference_steps"], WAN22_LAYERS

    def window(kind: str, n: int) -> tuple[int, int]:
        start, end = get(f"svg_active_start_{kind}", -1), get(f"svg_active_end_{kind}", -1)
        if start == -1 and end == -1:
            return 0, n
        if not 0 <= start < end <= n:   # the step window is the schema's check; the layers are the model's
            raise BadInput(f"{name}: svg_active_start_{kind} / svg_active_end_{kind} = [{start}, {end}): must be a "
                           f"window 0 <= start < end <= {n}, the run's {kind}s (both -1: every {kind})")
        return start, end
    geometry = VideoGeometry.from_pixels(video["width"], video["height"], video["num_frames"])
    queries = get("svg_profile_query_count", 64)
    if queries > geometry.L:
        raise BadInput(f"{name}: svg_profile_query_count = {queries}: must be at most the video's {geometry.L} tokens "
                       f"({video['width']}x{video['height']}, {video['num_frames']} frames): the queries profiled are "
                       "drawn from them")
    spatial = get("svg_spatial_density", 0.25)
    densities = (get("svg_high_noise_density", spatial), get("svg_low_noise_density", spatial))
    policy = Policy(name, window("step", steps), window("layer", layers), densities,
                    profile_queries=queries, sample_max_row=get("svg_sample_max_row", 10000),
                    anchor=bool(get("svg_include_first_frame", True)),
                    split=ExpertSplit(float(video["flow_shift"]), float(video["boundary_ratio"])),
                    source=name)
    return policy, video


def read_yaml(path: str | Path) -> tuple[Policy, dict, dict]:
    """:func:`from_config` of a MaxDiffusion YAML file (``--policy FILE.yml``), and the file's keys; the file read
    by :func:`svgtpu.inputs.documents.read_document` (no empty, binary, truncated or duplicate-keyed file)."""
    from svgtpu.inputs.documents import read_document

    config = read_document("--policy", path, "yaml", "a MaxDiffusion config (YAML)")
    return (*from_config(config, f"--policy {path}"), config)


#: The named policies (``svgtpu costmodel --policy NAME``): moderate as published, the other two by the
#: mapping rule (:func:`scaled_policy`).
POLICY_NAMES = ("maxdiffusion-conservative", "maxdiffusion-moderate", "maxdiffusion-aggressive")


def get_policy(name: str) -> tuple[Policy, dict]:
    """``(policy, video)`` of a named policy (:data:`POLICY_NAMES`), on base_wan_27b.yml's video."""
    if name not in POLICY_NAMES:
        raise BadInput(f"--policy must be one of {', '.join(POLICY_NAMES)} or a MaxDiffusion YAML file, got {name!r}")
    policy, video = _named_policy(name)
    return policy, dict(video)


@functools.lru_cache(maxsize=8)
def _named_policy(name: str) -> tuple[Policy, tuple]:
    from svgtpu.costmodel.workload import get_model

    moderate, video = from_config(MODERATE_KEYS, "maxdiffusion-moderate")
    moderate = dataclasses.replace(moderate, source=f"published in full: {SVG_DOCS.cite()}")
    if name == "maxdiffusion-moderate":
        return moderate, tuple(video.items())
    geometry = VideoGeometry.from_pixels(video["width"], video["height"], video["num_frames"])
    return scaled_policy(moderate, PUBLISHED_FLOPS_SAVED[name], name, get_model("wan2.2-a14b"), geometry,
                         video["num_inference_steps"]), tuple(video.items())


__all__ = ["BAND_RULES", "BASE_WAN_27B", "ExpertSplit", "MODERATE_KEYS", "MAXDIFFUSION_SVG_COMMIT", "POLICY_NAMES",
           "get_policy", "SVG_KEYS", "UNMODELED_KEYS",
           "PUBLISHED_FLOPS_SAVED", "Policy", "SOURCES", "SVG_DOCS", "WEIGHT_SHARDING", "EARLIER_FLOW_SHIFT",
           "band_half_width",
           "band_multiplier", "flops_saved", "from_config", "kept_pairs", "read_yaml", "scaled_policy"]
