"""Keeping the model honest: published, measured Wan generation times (``published.json``, each
with its source and what exactly was measured) against the model's prediction for the same
settings.

At most one number per device family is fitted, from one labelled calibration point: the compute
efficiency (``Efficiency.matmul``; where attention is priced from priors, ``Efficiency.attention`` at the same
ratio to it as before the fit) that makes the model reproduce that point.  A TPU priced from the compiled tile
table prices each attention kernel at its own compiled schedule (:func:`kernel_efficiencies`), separate from the
matmul efficiency and never fitted.  Every other point is a validation point, predicted
with that efficiency and never fitted.  A family without a calibration point keeps the prior
:class:`Efficiency`, but a GPU family with published measurements of its own (Ampere:
:func:`~svgtpu.costmodel.gpu_rates.measured_efficiency`) takes them, unfitted.  Nothing is ever fitted to the
write-up's own claims.

**Independent or not.**  A validation point that shares its calibration point's setting (device family,
model shape, token grid and chip count: the same run with another attention kernel, fewer steps, or a
sibling GPU of the same die) tests little more than the fit itself; it is flagged
(``calibration_related``, with the calibration point's id) and summarized apart from the independent
points (:func:`validate`).

Published GPU runs name the kernel each ran, cited by ``kernel_source`` (the repository's attention backend at a
commit): ``flash`` (FlashAttention-2) for dense layers, and for an SVG run ``sparse_kernel`` (``flex``: SVG's
sparse layers on Wan 2.1 run PyTorch's FlexAttention) where its sparse layers ran another.  A GPU with measured
rates (Hopper, :mod:`~svgtpu.costmodel.gpu_rates`) prices each at that kernel's measured rate on its 128 x 128
tiles; elsewhere (Ampere) the hand-counted flash work (:data:`~svgtpu.costmodel.kernel_work.FLASH`) on the same
tiles, with no grid-step cost (thread blocks run concurrently) and K/V reads shared by the thread blocks of one
wave (``DeviceSpec.kv_reuse``).  Each row says which kernel and rate priced it (``attention_pricing``).  Published TPU runs name their kernel (``kernel``: JAX's Splash or
tokamax's) and the tile size their source gives; the compiled tile table prices them when it has that
kernel and tile.  A point may time SVG itself (``variant`` ``svg``): the model then runs SVG's schedule
with the recipe the published run used (its ``recipe``, :mod:`svgtpu.recipes`) on the unaligned mask.

A point also states how its run was parallelized (``cfg_split``: MaxDiffusion's data-parallel axis of 2
runs the two CFG passes side by side), whether its VAE was sharded (MaxDiffusion) or ran on one rank in
float32 (Wan's reference code: the serial part that does not shrink with chips), whether its DiT
weights were sharded (``weights``: Wan's multi-GPU commands pass ``--dit_fsdp``), and its image
conditioning (image-to-video).

:func:`calibrated_setup` is the one way the rest of the package builds a setup with a device family's
calibrated efficiency and the compiled evidence (the pipeline below this module never looks one up).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import statistics
from pathlib import Path

from svgtpu.costmodel.compiled import AUTO, CompiledTable, resolve
from svgtpu.costmodel.eager import CODE_PATHS
from svgtpu.costmodel.gpu_rates import CALIBRATION_RESOLUTION, GPU_TILE, hopper_rates, measured_efficiency
from svgtpu.costmodel.kernel_work import FLASH
from svgtpu.costmodel.block_pricing import realized
from svgtpu.costmodel.pipeline import (SETTING_FIELDS, Setup, dit_seconds, forward_breakdown, recipe_fields, sparse_layer_efficiency, svg_overhead_seconds,
                                       video_seconds)
from svgtpu.costmodel.policy import PUBLISHED_FLOPS_SAVED as POLICY_FLOPS_SAVED, flops_saved, get_policy
from svgtpu.costmodel.roofline import Efficiency, forward_ops
from svgtpu.costmodel.plausible import STRETCH
from svgtpu.costmodel.realized import RUNS, realized_over_static
from svgtpu.costmodel.sparse_layers import SPARSE_PROXY, AttentionLayout, Switches, run_seconds, run_setup, speedup
from svgtpu.costmodel.specs import DEVICES, FAMILIES, get_device
from svgtpu.costmodel.workload import ModelConfig, get_model
from svgtpu.geometry import VideoGeometry, get_geometry, parse_tiles
from svgtpu.recipes import MAXDIFFUSION_FIXED_M_TILE, get_recipe
from svgtpu.setting import PRODUCTION, Setting
from svgtpu.errors import BadInput

PUBLISHED_PATH = Path(__file__).with_name("published.json")
ROLES = ("calibration", "validation", "validation-unconfirmed")
VARIANTS = ("dense", "svg")
#: ``ring-online``: MaxDiffusion's online-softmax ring x Ulysses kernel (``attention=ulysses_ring_custom``), its calls
#: priced as our compiled online-softmax body (:class:`~svgtpu.costmodel.sparse_layers.AttentionLayout`'s ``ours``, the
#: instrument's ``online`` family); ``fixed-m``: its fixed-M variant, priced as our compiled fixed-maximum body.
TPU_KERNELS = ("splash", "tokamax", "fixed-m", "ring-online")
#: The kernels of MaxDiffusion's ring x Ulysses attention, priced call by call (:mod:`~svgtpu.costmodel.sparse_layers`).
RING_KERNELS = ("fixed-m", "ring-online")
#: The kernels the published GPU runs used, as the model prices them (FlashAttention-2; FlexAttention for SVG's
#: sparse layers).
GPU_KERNELS = ("flash", "flex")


@dataclasses.dataclass(frozen=True)
class PublishedPoint:
    """One published, measured generation time and the settings it was measured with."""

    id: str
    role: str
    model: str
    pixels: str
    frames: int
    grid: str
    steps: int
    cfg: bool
    device: str
    chips: int
    attention_kernel: str
    measures: str
    seconds: float
    source: str
    what: str
    settings_note: str = ""
    variant: str = "dense"                  # dense, or svg: SVG's schedule of the recipe below
    recipe: str | None = None               # an svg run's SVG recipe (svgtpu.recipes, cited there)
    cfg_split: bool = False                 # the two CFG passes side by side on two halves (MaxDiffusion dp=2)
    vae_sharded: bool = False               # VAE over all chips (MaxDiffusion) vs one rank in fp32 (Wan, SVG)
    image_encoder: str | None = None        # image-to-video conditioning (pipeline.IMAGE_ENCODERS)
    kernel: str | None = None               # the kernel it ran: TPU splash, tokamax or fixed-m; GPU flash
    sparse_kernel: str | None = None        # a GPU svg run's sparse layers, where not ``kernel`` (GPU_KERNELS)
    kernel_source: str = ""                 # where the source says which kernel (TPU runs: source, tile_source)
    tile: str | None = None                 # TPU runs: block_q x block_kv, from tile_source
    tile_source: str = ""
    weights: str = "auto"                   # sharded: the run shards the DiT's weights (FSDP)
    attention_sharding: str = "heads"       # heads (Ulysses) or sequence (sequence-sharded flash)
    segment_ids: bool = False               # padded tokens masked by segment ids: every tile masked
    policy: str | None = None               # a MaxDiffusion SVG run's policy (svgtpu.costmodel.policy)
    dense_control_s: float | None = None    # its same-node dense control (seconds)
    shares_instrument: str | None = None    # an instrument run (realized.RUNS) whose measured time prices much of it
    code_path: str | None = None            # a GPU run's eager PyTorch code (costmodel.eager.CODE_PATHS), cited there

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.variant == "svg":
            if (self.recipe is None) == (self.policy is None):
                raise ValueError(f"point {self.id}: an svg point needs its recipe (svgtpu.recipes) or its "
                                 "MaxDiffusion policy (svgtpu.costmodel.policy), one of them")
            if self.recipe is not None:
                get_recipe(self.recipe)
            elif self.dense_control_s is None:
                raise ValueError(f"point {self.id}: a MaxDiffusion svg point names its same-node dense control")
        if self.policy is not None and self.kernel != "fixed-m":
            raise ValueError(f"point {self.id}: MaxDiffusion's SVG runs (a policy) run fixed-M dense calls")
        if self.shares_instrument is not None and self.shares_instrument not in {r.name for r in RUNS}:
            raise ValueError(f"point {self.id}: shares_instrument must name a run of svgtpu.costmodel.realized.RUNS "
                             f"({', '.join(r.name for r in RUNS)}), got {self.shares_instrument!r}")
        if self.measures not in ("dit", "end_to_end"):
            raise ValueError(f"measures must be dit or end_to_end, got {self.measures!r}")
        if not self.source.startswith("http"):
            raise ValueError(f"point {self.id}: source must be a URL, got {self.source!r}")
        if self.family != "tpu" and (self.kernel not in GPU_KERNELS or not self.kernel_source):
            raise ValueError(f"point {self.id}: a GPU point names its kernel ({', '.join(GPU_KERNELS)}) and cites "
                             "it (kernel_source)")
        if self.sparse_kernel is not None and (self.family == "tpu" or self.variant != "svg"
                                               or self.sparse_kernel not in GPU_KERNELS):
            raise ValueError(f"point {self.id}: sparse_kernel names a GPU svg run's sparse-layer kernel "
                             f"({', '.join(GPU_KERNELS)})")
        if self.family == "tpu" and (self.kernel not in TPU_KERNELS or not self.tile or not self.tile_source):
            raise ValueError(f"point {self.id}: a TPU point names its kernel ({', '.join(TPU_KERNELS)}) and its tile "
                             "with the tile's source")

    @property
    def family(self) -> str:
        return get_device(self.device).family

    @property
    def maxdiffusion_svg(self) -> bool:
        """A run of MaxDiffusion's SVG setting (fixed-M dense calls), priced by
        :mod:`~svgtpu.costmodel.sparse_layers`."""
        return self.kernel == "fixed-m"

    @property
    def maxdiffusion_ring(self) -> bool:
        """A run of MaxDiffusion's ring x Ulysses attention (:data:`RING_KERNELS`), its calls priced by
        :mod:`~svgtpu.costmodel.sparse_layers` at the point's dense tile."""
        return self.kernel in RING_KERNELS

    @property
    def published_speedup(self) -> float | None:
        """A MaxDiffusion SVG run's speedup over its same-node dense control."""
        return self.dense_control_s / self.seconds if self.dense_control_s else None

    @property
    def setting(self) -> tuple:
        """What makes two runs the same setting for the model: the chip's compute (family, peak, cores: H100
        and H200 share one die), the model's shape (not the checkpoint's name), token grid and chips."""
        spec = get_device(self.device)
        shape = dataclasses.replace(get_model(self.model), name="", source="")
        return (spec.family, spec.matmul_flops, spec.cores), shape, self.grid, self.chips


#: A validation point the model misses by more than this is named in the summary (``validate()["misses"]``).
MISS = 0.20


@functools.lru_cache(maxsize=1)
def published_points() -> tuple[PublishedPoint, ...]:
    """Every point of ``published.json``."""
    data = json.loads(PUBLISHED_PATH.read_text())
    return tuple(PublishedPoint(**p) for p in data["points"])


def point_setup(point: PublishedPoint, efficiency: Efficiency = Efficiency(), compiled=AUTO) -> Setup:
    """The model's setup for a published run (only the parts it measured)."""
    compiled = resolve(compiled)
    device = get_device(point.device, compiled)
    dense_kernel = None
    if device.is_gpu:   # the sparse layers' kernel, the dense layers' (warm-up and the dense run) beside it
        kernel, work, (block_q, block_kv) = point.sparse_kernel or point.kernel, FLASH, (GPU_TILE, GPU_TILE)
        dense_kernel = point.kernel
    elif point.maxdiffusion_ring:   # sparse_layers prices its calls; the setup carries the slice and the ops
        layout = AttentionLayout()
        kernel, work, (block_q, block_kv) = SPARSE_PROXY, None, (layout.sparse_block_q, layout.sparse_block_kv)
    else:
        kernel, work, (block_q, block_kv) = point.kernel, None, parse_tiles(point.tile, "tile")[0]
    parts = {"communication", "weight_gather"}
    if point.measures == "end_to_end":
        parts |= {"text_encoder", "vae_decode", "image_encoder", "host"}
    svg = recipe_fields(get_recipe(point.recipe)) if point.recipe else {}
    # a TPU slice named by TensorCores (v7x-8: 4 chips of 2 cores) is given in chips here
    return Setup.of(get_model(point.model), get_geometry(point.grid), device, chips=point.chips, steps=point.steps,
                 cfg=point.cfg, block_q=block_q, block_kv=block_kv, efficiency=efficiency, kernel=kernel,
                 dense_kernel=dense_kernel, work=work,
                 compiled=compiled, gpu_rates=gpu_rates(device.family), parts=frozenset(parts), cfg_split=point.cfg_split, vae_sharded=point.vae_sharded,
                 image_encoder=point.image_encoder, weights=point.weights,
                 attention_sharding=point.attention_sharding, segment_ids=point.segment_ids,
                 code_path=point.code_path, **svg)


def gpu_rates(family: str):
    """The measured per-kernel attention rates of a GPU family (:mod:`~svgtpu.costmodel.gpu_rates`: Hopper, from
    the committed H200 run), or ``None`` (priors)."""
    return hopper_rates() if family == "hopper" else None


def measured_block_setup(family: str, efficiency: Efficiency) -> Setup | None:
    """One Wan 2.1 14B block as the committed GPU run measured it at its calibration resolution (one chip, one
    pass, 128 x 128 tiles, no stage around it), or ``None`` for a family without a measured run."""
    rates = gpu_rates(family)
    if rates is None:
        return None
    return Setup.of(get_model("wan2.1-14b"), get_geometry(CALIBRATION_RESOLUTION), get_device("h200"), chips=1, steps=1,
                 cfg=False, block_q=GPU_TILE, block_kv=GPU_TILE, efficiency=efficiency,
                 kernel="cudnn", gpu_rates=rates, parts=frozenset())


def block_rest_seconds(setup: Setup) -> float:
    """One block's ops other than self-attention (:func:`forward_breakdown` per layer, without the once-per-pass
    patch embedding and head): what a measured block minus its self-attention holds."""
    per_pass = {"self_attention", "patch_embed", "head", "communication", "weight_gather"}
    return sum(v for k, v in forward_breakdown(setup).items() if k not in per_pass) / setup.model.layers


#: How MaxDiffusion's fixed-M dense calls are priced centrally: ``fixed-m``, the kernel the run ran, our compiled
#: fixed-maximum body at MaxDiffusion's dense tile (``KernelConfig.fixed_max``, the ``fixed_max`` rows of the compiled
#: tile table, ``docs/fixed_max.md``).  :data:`SIDE_CONTROL`, our compiled online-softmax body at that tile (a kernel
#: the run did not run), is shown beside it (:func:`maxdiffusion_rows`) and is an end of the interval
#: (:mod:`~svgtpu.costmodel.sensitivity`).
DENSE_CONTROL = "fixed-m"
SIDE_CONTROL = "ours"
DENSE_CONTROLS = (DENSE_CONTROL, SIDE_CONTROL)
#: The sparse stretch every setup runs at: 1, the sparse tiles as compiled.  Not fitted: the one calibration
#: point (MaxDiffusion's moderate run) sets the matmul efficiency; the stretch's plausible range
#: (:data:`~svgtpu.costmodel.plausible.STRETCH`) is an interval knob, the efficiency refitted at each end.
CENTRAL_STRETCH = 1.0


def setup_seconds(point: PublishedPoint, setup: Setup, dense_control: str = DENSE_CONTROL, policy=None) -> float:
    """Modeled seconds of what ``point`` measured, for ``setup`` (its :func:`point_setup`, maybe changed); a
    MaxDiffusion SVG-study run with its dense calls priced as ``dense_control`` (:data:`DENSE_CONTROLS`) and
    ``policy`` (default its own)."""
    if point.maxdiffusion_ring:
        layout = point_layout(point, dense_control)
        policy = policy or (get_policy(point.policy)[0] if point.policy else None)
        # the layout counts devices (data x context): a chip each on a v6e, a TensorCore each on a v7x (v7x-8: 4
        # chips); the run's chips are the point's
        return run_seconds(run_setup(setup, layout).replace(chips=point.chips), layout, policy)["seconds"]
    return (dit_seconds if point.measures == "dit" else video_seconds)(setup, point.variant, True)


def point_layout(point: PublishedPoint, dense_control: str = DENSE_CONTROL) -> AttentionLayout:
    """MaxDiffusion's attention layout for a ring x Ulysses ``point``: the docs' mesh and Ulysses shards, its dense
    calls at the point's tile, priced as ``dense_control`` for a fixed-M run and as our online-softmax body
    (``ours``) for an online-softmax one."""
    block_q, block_kv = parse_tiles(point.tile, "tile")[0]
    return AttentionLayout(dense_block_q=block_q, dense_block_kv=block_kv,
                           dense_kernel=dense_control if point.kernel == "fixed-m" else SIDE_CONTROL)


def predict_seconds(point: PublishedPoint, efficiency: Efficiency = Efficiency(), sparse_efficiency: float = 1.0,
                    compiled=AUTO) -> float:
    """Modeled seconds of what ``point`` measured."""
    setup = dataclasses.replace(point_setup(point, efficiency, compiled), sparse_efficiency=sparse_efficiency)
    return setup_seconds(point, setup)


def with_compute(efficiency: Efficiency, value: float, tied: bool = True) -> Efficiency:
    """``efficiency`` with ``matmul = value`` and, when ``tied``, ``attention`` at its ratio to ``matmul`` kept (at
    most 1); untied (attention priced from the compiled schedule, :func:`attention_untied`) it stays as it is."""
    if not tied:
        return dataclasses.replace(efficiency, matmul=value)
    ratio = efficiency.attention / efficiency.matmul
    return dataclasses.replace(efficiency, matmul=value, attention=min(1.0, value * ratio))


def attention_untied(family: str, compiled) -> bool:
    """Whether ``family``'s attention has its own efficiency, separate from the matmul one: a TPU priced from the
    compiled tile table (each kernel's compiled cycles are its efficiency, :func:`kernel_efficiencies`; what the
    static schedule does not see is ``Efficiency.attention`` = :func:`compiled_attention`, instrumented, never fitted)."""
    return family == "tpu" and resolve(compiled) is not None


def compiled_attention(compiled) -> float:
    """``Efficiency.attention`` of a TPU priced from the compiled tile table: the online-softmax kernels' realized
    over static time from a published kernel time (:func:`svgtpu.costmodel.realized.realized_over_static`, held to
    the range written before it was applied, docs/plausibility.md); its band in the sensitivity:
    :data:`svgtpu.costmodel.sensitivity.KNOBS`, attention_over_matmul."""
    return realized_over_static("online", resolve(compiled))


def solve(f, target: float, lo: float, hi: float, iterations: int = 40) -> float | None:
    """``x`` in ``[lo, hi]`` with ``f(x) = target`` for ``f`` falling in ``x`` (bisection); ``None``
    when the target lies outside ``[f(hi), f(lo)]``."""
    if not f(hi) <= target <= f(lo):
        return None
    for _ in range(iterations):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


class Unreachable(ValueError):
    """No compute efficiency in (0, 1] makes the model meet the calibration point."""


def kernel_efficiencies(device: str, head_dim: int = 128, compiled=AUTO) -> list[dict]:
    """Each TPU attention kernel's own efficiency on ``device`` from the compiled schedule, at the production tile
    (:attr:`~svgtpu.costmodel.compiled.CompiledTile.efficiency`): ours, Splash, tokamax as compiled; MaxDiffusion's
    fixed-M flash as our kernel's compiled fixed-maximum full body at MaxDiffusion's dense tile (the ``fixed_max``
    rows of the table: :data:`~svgtpu.recipes.MAXDIFFUSION_FIXED_M_TILE`).  Separate from the
    matmul efficiency, never fitted; ``[]`` without the compiled table."""
    compiled = resolve(compiled)
    if compiled is None:
        return []
    rows = []
    for kernel in ("ours", "splash", "tokamax"):
        found = compiled.tile(device, kernel, PRODUCTION.tile, head_dim)
        if found and found[0].efficiency:
            rows.append({"kernel": kernel, "efficiency": found[0].efficiency, "source": found[1]})
    fixed = compiled.fixed(device, MAXDIFFUSION_FIXED_M_TILE.tile, head_dim)
    if fixed:
        rows.append({"kernel": "fixed-m", "efficiency": fixed.roofline_tile / fixed.full,
                     "source": f"ours' fixed-maximum full body at {fixed.block_q}x{fixed.block_kv} ({fixed.provenance})"})
    return rows


def calibration_point(family: str, variant: str | None = None) -> PublishedPoint | None:
    """The one calibration point of ``family`` (of ``variant``, dense or svg, when given; ``None`` for a family
    without one).  A family has at most one: the TPU's is MaxDiffusion's moderate SVG run, a DiT-only time
    (docs/plausibility.md)."""
    if family not in FAMILIES:
        raise BadInput(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    calib = [p for p in published_points() if p.role == "calibration" and p.family == family]
    if len(calib) > 1:
        raise ValueError(f"family {family} has {len(calib)} calibration points; at most one is allowed")
    return calib[0] if calib and variant in (None, calib[0].variant) else None


def fit_efficiency(family: str, compiled=AUTO, change=None, prior: Efficiency = Efficiency(),
                   dense_control: str = DENSE_CONTROL, policy=None) -> dict:
    """The efficiency of a device family fitted to its calibration point, with ``change`` (a function of a
    :class:`Setup`, e.g. a sensitivity knob at one end) applied to the point's setup first; the prior where
    there is nothing to fit (a TPU priced without the compiled table: its calibration run's calls are priced
    from the table's rows only).  Solves ``predicted(e) = published`` for the compute efficiency ``e``
    (:func:`with_compute`) by bisection (the predicted time falls as ``e`` grows).  A MaxDiffusion SVG-study
    point prices its dense calls as ``dense_control`` and runs ``policy`` (default its own): the readings the
    interval's ends take (:mod:`~svgtpu.costmodel.sensitivity`).

    A GPU family without a measured run or a calibration point (Ampere) takes its published measurements
    (:func:`~svgtpu.costmodel.gpu_rates.measured_efficiency`, named by ``source``).

    Returns ``{"efficiency", "calibrated_on" (point id or None), "fitted" (e or None)}`` (and ``source`` where
    published measurements set it).
    """
    block = measured_block_setup(family, prior)
    if block is not None:   # a measured GPU run: the non-attention ops of its calibration block (docs/costmodel.md)
        block = change(block) if change else block
        rates = block.gpu_rates

        def rest(e):
            return block_rest_seconds(dataclasses.replace(block, efficiency=with_compute(block.efficiency, e)))
        fitted = solve(rest, rates.rest_seconds, 0.01, 1.0)
        if fitted is None:
            raise Unreachable(f"{rates.run}: no matmul efficiency in (0.01, 1] meets its {rates.rest_geometry} block")
        return {"efficiency": with_compute(block.efficiency, fitted), "fitted": fitted,
                "calibrated_on": f"{rates.run} ({rates.rest_geometry} dense blocks)"}
    point = calibration_point(family)
    compiled = resolve(compiled)
    published = measured_efficiency(family, prior) if point is None else None
    if published is not None:   # a GPU family without a run of its own: published measurements, not fitted
        return {"efficiency": published[0], "calibrated_on": None, "fitted": None, "source": published[1]}
    if family == "cpu" or point is None or (point.maxdiffusion_ring and compiled is None):
        return {"efficiency": prior, "calibrated_on": None, "fitted": None}   # nothing to fit (CPU: measured)
    tied = not attention_untied(family, compiled)
    base = point_setup(point, prior if tied else dataclasses.replace(prior, attention=compiled_attention(compiled)), compiled)
    base = change(base) if change else base

    def seconds(e):
        return setup_seconds(point, dataclasses.replace(base, efficiency=with_compute(base.efficiency, e, tied)),
                             dense_control, policy)
    fitted = solve(seconds, point.seconds, 0.01, 1.0)
    if fitted is None:
        raise Unreachable(f"calibration point {point.id} is not reachable at a compute efficiency in (0.01, 1]")
    return {"efficiency": with_compute(base.efficiency, fitted, tied), "calibrated_on": point.id, "fitted": fitted}


@functools.lru_cache(maxsize=16)
def _family_efficiency(family: str, compiled: CompiledTable | None) -> dict:
    return fit_efficiency(family, compiled)


def family_efficiency(family: str, compiled=AUTO) -> dict:
    """:func:`fit_efficiency` with nothing changed (cached): the family's calibrated efficiency."""
    return _family_efficiency(family, resolve(compiled))


def run_policy(point: PublishedPoint, efficiency: Efficiency, compiled, stretch: float, policy=None,
               layout: AttentionLayout | None = None, switches: Switches | None = None) -> dict:
    """The modeled dense and SVG denoising of a MaxDiffusion SVG ``point``
    (:func:`~svgtpu.costmodel.sparse_layers.speedup`),
    with its policy (or ``policy``), the sparse stretch ``stretch``, and ``layout`` (default the docs', its dense
    calls priced as :data:`DENSE_CONTROL`)."""
    layout = layout or AttentionLayout(dense_kernel=DENSE_CONTROL)
    setup = dataclasses.replace(run_setup(point_setup(point, efficiency, compiled), layout), sparse_stretch=stretch)
    return speedup(setup, layout, policy or get_policy(point.policy)[0], switches or Switches())


def fit_sparse_stretch(family: str, compiled=AUTO, *, efficiency: Efficiency | None = None, policy=None,
                       layout: AttentionLayout | None = None, switches: Switches | None = None,
                       target: float | None = None) -> dict:
    """The sparse stretch (:mod:`~svgtpu.costmodel.sparse_layers`) fitted to ``family``'s SVG calibration point:
    the value at which the modeled speedup over the dense control equals the published one (``target``:
    another speedup to solve for, e.g. a validation row's, to show the spread; never the central fit).
    Returns ``{"stretch", "calibrated_on", "speedup"}``; ``stretch`` 1 where there is nothing to fit."""
    point = calibration_point(family, "svg")
    if point is None:
        return {"stretch": 1.0, "calibrated_on": None, "speedup": None}
    compiled = resolve(compiled)
    efficiency = efficiency or family_efficiency(family, compiled)["efficiency"]
    target = target or point.published_speedup
    f = lambda x: run_policy(point, efficiency, compiled, x, policy, layout, switches)["speedup"]  # noqa: E731
    stretch = solve(f, target, 0.2, 20.0)
    if stretch is None:
        raise Unreachable(f"SVG calibration point {point.id}: no sparse stretch in [0.2, 20] gives speedup "
                          f"{target:.3f}")
    return {"stretch": stretch, "calibrated_on": point.id, "speedup": target}


def family_stretch(family: str, compiled=AUTO) -> dict:
    """The sparse stretch a family's setups run at: :data:`CENTRAL_STRETCH`, never fitted (solving it on the
    moderate run's speedup read its dense control, the published dense validation row).  ``bounds``: its
    plausible range (:data:`~svgtpu.costmodel.plausible.STRETCH`) where the sparse layers are priced term by term
    (a family with an SVG calibration point and the compiled table), else ``None``."""
    priced = resolve(compiled) is not None and calibration_point(family, "svg") is not None
    return {"stretch": CENTRAL_STRETCH, "calibrated_on": None, "speedup": None, "bounds": STRETCH if priced else None}


#: The dense kernel a user runs on a TPU (JAX's Splash, MaxDiffusion's default), the absolute-time default of
#: ``svgtpu costmodel`` there; a GPU with measured rates: cuDNN (:func:`calibrated_setup`).
TPU_USER_DENSE_KERNEL = "splash"


def user_dense_kernel(device) -> str | None:
    """The dense kernel a user would run on ``device`` (a :class:`~svgtpu.costmodel.specs.DeviceSpec`): Splash on a
    TPU, cuDNN on a GPU with measured rates, ``None`` elsewhere (the setup's own kernel)."""
    if device.family == "tpu":
        return TPU_USER_DENSE_KERNEL
    return "cudnn" if gpu_rates(device.family) is not None else None


def calibrated_setup(model: "str | ModelConfig", geometry: "str | VideoGeometry", device, **fields) -> Setup:
    """A :class:`Setup` with the compiled evidence (``compiled``: default the committed table when it
    exists, :func:`svgtpu.costmodel.compiled.default_compiled`), the device's clock from its probe, and the
    device family's calibrated efficiency (:func:`family_efficiency`) unless ``efficiency`` is among
    ``fields``, and its sparse stretch (:func:`family_stretch`) unless ``sparse_stretch`` is; on a GPU with
    measured rates (:func:`gpu_rates`) those rates, the GPU kernels' 128 x 128 tile and cuDNN as the dense kernel
    (what a user runs there) unless given; ``None`` for a tile or the dense kernel is the default; the setting's
    fields (:data:`~svgtpu.costmodel.pipeline.SETTING_FIELDS`) make its :class:`~svgtpu.setting.Setting`, every
    other field as given."""
    return _calibrated(get_model(model), get_geometry(geometry), device, None, fields)


def setting_setup(setting: Setting, *, geometry: VideoGeometry | None = None, device=None, **fields) -> Setup:
    """:func:`calibrated_setup` for one resolved :class:`~svgtpu.setting.Setting`, the value an edge (a command, the
    explorer) resolved and passes down: its model, resolution and device by name (``geometry``, ``device``: a grid or
    a spec that stands for the name, such as the toy's own grid or this CPU's measured rates), its chips, steps,
    guidance, tile and mask density as they are (no device default of the tile: the edge chose it,
    :func:`gpu_tile`); ``fields`` how the run is priced, none of the setting's own."""
    given = sorted(set(fields) & set(SETTING_FIELDS))
    if given:
        raise BadInput(f"the setting holds {', '.join(given)}: give them in it, not beside it")
    return _calibrated(get_model(setting.model), geometry or get_geometry(setting.resolution), device or setting.device,
                       setting, fields)


def gpu_tile(device) -> int | None:
    """The tile side a GPU with measured rates runs (:data:`~svgtpu.costmodel.gpu_rates.GPU_TILE`: its kernels'
    own), or ``None`` elsewhere (the setting's tile)."""
    return GPU_TILE if gpu_rates(device.family) is not None else None


def _calibrated(model: ModelConfig, geometry: VideoGeometry, device, setting: Setting | None, fields: dict) -> Setup:
    compiled = resolve(fields.pop("compiled", AUTO))
    device = get_device(device, compiled)   # a name, or a DeviceSpec as it is
    fields = {k: v for k, v in fields.items() if v is not None or k not in ("block_q", "block_kv", "dense_kernel")}
    fields.setdefault("efficiency", family_efficiency(device.family, compiled)["efficiency"])
    fields.setdefault("sparse_stretch", family_stretch(device.family, compiled)["stretch"])
    rates = gpu_rates(device.family)
    if rates is not None:   # a GPU with measured rates: its kernels' own tile, and a user's dense kernel there
        fields.setdefault("gpu_rates", rates)
        if setting is None:
            fields.setdefault("block_q", gpu_tile(device))
            fields.setdefault("block_kv", gpu_tile(device))
        fields.setdefault("dense_kernel", user_dense_kernel(device))
    if setting is None:
        return Setup.of(model, geometry, device, compiled=compiled, **fields)
    return Setup(model, geometry, device, setting, compiled=compiled, **fields)


def related_calibration(point: PublishedPoint) -> str | None:
    """The id of the calibration point whose setting ``point`` shares (:attr:`PublishedPoint.setting`; for a family
    calibrated on a measured GPU run, that run's block: the chip's compute, Wan 2.1 14B's shape, its grid, one
    chip), or of the instrument run whose measured time prices much of it (``shares_instrument``), or ``None``."""
    if point.shares_instrument is not None:
        return point.shares_instrument
    block = measured_block_setup(point.family, Efficiency())
    if block is not None and point.role != "calibration":
        run = (get_device("h200").family, get_device("h200").matmul_flops, 1), \
            dataclasses.replace(block.model, name="", source=""), (block.geometry.T, block.geometry.H, block.geometry.W), 1
        mine = point.setting[0], point.setting[1], (lambda g: (g.T, g.H, g.W))(get_geometry(point.grid)), point.chips
        return block.gpu_rates.run if mine == run else None
    calib = calibration_point(point.family)
    if point.role == "calibration" or calib is None:
        return None
    return calib.id if point.setting == calib.setting else None


def _dense_twin(p: PublishedPoint) -> PublishedPoint:
    """The published dense run of the SVG run ``p``'s setting and source."""
    return next(d for d in published_points() if d.variant == "dense" and d.source == p.source
                and d.setting == p.setting and d.steps == p.steps and d.measures == p.measures)


def published_svg_efficiency(compiled=AUTO) -> dict:
    """What SVG's published GPU runs imply for ``Setup.sparse_efficiency``: per published SVG run, the value
    at which the calibrated model reproduces its speedup over the published dense run of the same setting
    (``implied_from_speedup``, modeled dense time x the published SVG/dense ratio) and its time
    (``implied_sparse_efficiency``, confounded by the dense model's own error); ``None``: not reachable in
    (0, 1].  The range of the first is the published-SVG scenario (:mod:`svgtpu.costmodel.scenarios`)."""
    rows = []
    for p in published_points():
        if p.variant != "svg" or p.role == "calibration" or not get_device(p.device).is_gpu:
            continue   # a GPU scenario: only SVG's published GPU runs feed it
        eff = family_efficiency(p.family, compiled)["efficiency"]
        dense = _dense_twin(p)
        target = predict_seconds(dense, eff, compiled=compiled) * p.seconds / dense.seconds
        rows.append({"id": p.id, "device": p.device, "pixels": p.pixels, "published_s": p.seconds,
                     "published_speedup": dense.seconds / p.seconds,
                     "predicted_at_1_s": predict_seconds(p, eff, 1.0, compiled),
                     "implied_sparse_efficiency": solve(lambda e: predict_seconds(p, eff, e, compiled), p.seconds,
                                                         0.05, 1.0),
                     "implied_from_speedup": solve(lambda e: predict_seconds(p, eff, e, compiled), target, 0.05, 1.0),
                     "model_extra_work_efficiency": sparse_layer_efficiency(point_setup(p, eff, compiled), "svg"),
                     "source": p.source})
    found = [r["implied_from_speedup"] for r in rows if r["implied_from_speedup"] is not None]
    return {"rows": rows, "range": (min(found), max(found)) if found else None,
            "provenance": "modeled vs published (measured by others)"}


def sparse_efficiency_evidence(setup: Setup, kind: str = "svg-aligned") -> dict:
    """Where ``setup``'s central sparse efficiency comes from, source by source.

    - ``compiled_kernel`` (with a compiled row for the setup's kernel): the sparse kernel's cycles on mask
      ``kind`` over the dense kernel's cycles x the mask's tile density (*sparse overhead vs our dense*),
      and each over the MXU roofline of the tiles it computes, from the compiled table; already in the
      modeled sparse-layer time;
    - ``svg_extra_work``: SVG's profiling and layout transform as a share of the modeled sparse layer;
    - ``central``: the model's sparse-layer efficiency (:func:`~svgtpu.costmodel.pipeline.sparse_layer_efficiency`:
      ideal = dense layer x density, over the modeled sparse layer), the number the central estimate runs at;
    - ``published_svg``: SVG's published GPU runs (:func:`published_svg_efficiency`), a separate scenario.
    """
    out = {"central": sparse_layer_efficiency(setup, kind), "setup_sparse_efficiency": setup.sparse_efficiency,
           "attention_pricing": setup.attention_pricing(), "provenance": setup.provenance}
    sparse, dense = setup.head_cycles(kind), setup.head_cycles("dense")
    if sparse and dense:
        density = setup.tiles(kind)[1].density
        out["compiled_kernel"] = {
            "sparse_over_dense_x_density": sparse["total"] / (dense["total"] * density),
            "sparse_over_roofline": sparse["total"] / sparse["roofline"] if sparse["roofline"] else None,
            "dense_over_roofline": dense["total"] / dense["roofline"] if dense["roofline"] else None,
            "kernel": setup.kernel, "provenance": setup.compiled_tile()[1]}
    stats, info = setup.tiles(kind)
    layer = setup.head_seconds(stats, info=info)
    overhead = sum(svg_overhead_seconds(setup).values()) / max(1, -(-setup.heads_per_chip // setup.device.cores))
    out["svg_extra_work"] = {"share_of_sparse_layer": overhead / (layer + overhead)}
    return out


def pricing(point: PublishedPoint, setup: Setup) -> str:
    """How ``point``'s attention is priced: the setup's own (a GPU kernel's measured rate, the compiled table, or
    priors; a GPU without a measured rate: the hand-counted flash work at the setup's attention efficiency), or for
    MaxDiffusion's SVG runs the compiled production-tile rows per score (:mod:`~svgtpu.costmodel.sparse_layers`)."""
    if setup.device.is_gpu:
        kernels = dict.fromkeys([setup.dense_kernel or setup.kernel]
                                + ([setup.kernel] if point.variant == "svg" else []))
        def prior(kernel: str) -> str:
            eff, why = setup.attention_efficiency(kernel)
            return f"flash work at attention efficiency {eff.attention:.3g}" + (f" ({why})" if why else "")
        return "; ".join(f"{k}: " + (f"{setup.gpu_rate(k) / 1e12:.0f} TFLOP/s, {setup.attention_pricing(k)}"
                                     if setup.gpu_rate(k) else prior(k)) for k in kernels)
    if point.maxdiffusion_ring:
        found = setup.compiled.tile(setup.device.name, SPARSE_PROXY, PRODUCTION.tile,
                                    setup.model.head_dim, setup.dtype)
        return f"compiled tile table ({found[1]}; per score, svgtpu.costmodel.sparse_layers)"
    return setup.attention_pricing()


@functools.lru_cache(maxsize=4)
def _side_control_efficiency(family: str, compiled: CompiledTable | None) -> Efficiency:
    return fit_efficiency(family, compiled, dense_control=SIDE_CONTROL)["efficiency"]


def maxdiffusion_rows(compiled=AUTO) -> list[dict]:
    """MaxDiffusion's measured SVG runs against the model: per run its policy (densities per expert), its
    transformer FLOPs saved as published and as counted here (:func:`~svgtpu.costmodel.policy.flops_saved`), the
    published speedup over its same-node dense control, the modeled one at the central sparse stretch (the dense
    calls as :data:`DENSE_CONTROL`), the same with the dense calls read at our compiled online-softmax body
    (``online_body``: :data:`SIDE_CONTROL`, the efficiency refitted on the moderate run), and the stretch that
    run's speedup alone would need (a diagnostic; never a fit)."""
    compiled = resolve(compiled)
    rows = []
    for p in published_points():
        if not (p.maxdiffusion_svg and p.policy):
            continue
        eff = family_efficiency(p.family, compiled)["efficiency"]
        stretch = family_stretch(p.family, compiled)["stretch"]
        policy = get_policy(p.policy)[0]
        run = run_policy(p, eff, compiled, stretch)
        try:
            own = fit_sparse_stretch(p.family, compiled, policy=policy, target=p.published_speedup)["stretch"]
        except Unreachable:
            own = None
        side_eff = _side_control_efficiency(p.family, compiled)
        side = run_policy(p, side_eff, compiled, stretch, layout=AttentionLayout(dense_kernel=SIDE_CONTROL))
        rows.append({"id": p.id, "policy": p.policy, "role": p.role, "densities": list(policy.densities),
                     "flops_saved_published": POLICY_FLOPS_SAVED[p.policy],
                     "flops_saved_counted": flops_saved(policy, get_model(p.model), get_geometry(p.grid), p.steps),
                     "published_dense_s": p.dense_control_s, "published_svg_s": p.seconds,
                     "published_speedup": p.published_speedup, "predicted_dense_s": run["dense_seconds"],
                     "predicted_svg_s": run["svg_seconds"], "predicted_speedup": run["speedup"],
                     "error": run["speedup"] / p.published_speedup - 1, "stretch": stretch,
                     "dense_control": DENSE_CONTROL,
                     "online_body": {"dense_control": SIDE_CONTROL, "fitted_compute_efficiency": side_eff.matmul,
                                     "predicted_dense_s": side["dense_seconds"], "predicted_svg_s": side["svg_seconds"],
                                     "predicted_speedup": side["speedup"],
                                     "error": side["speedup"] / p.published_speedup - 1},
                     "stretch_this_run_needs": own, "source": p.source})
    return rows


def eager_summary(model: str = "wan2.1-14b") -> dict:
    """Each published code path's eager passes (:mod:`~svgtpu.costmodel.eager`) in bytes per token and hidden
    element per layer for ``model``, with what it is and the rows that run it."""
    m, points, L = get_model(model), published_points(), 1000
    fused = sum(op.total("bytes") for op in forward_ops(m, L) if op.kind == "elementwise") / (L * m.dim * m.layers)
    paths = {name: {"bytes_per_element": path.bytes_per_token(m) / m.dim, "passes": len(path.passes),
                    "what": path.what, "points": [p.id for p in points if p.code_path == name]}
             for name, path in CODE_PATHS.items()}
    return {"fused_bytes_per_element": fused, "paths": paths}


def validate(compiled=AUTO) -> dict:
    """Predicted vs published for every point; summaries of the independent validation points, of those
    that share a calibration point's setting, and of the unconfirmed ones."""
    compiled = resolve(compiled)
    rows, skipped = [], []
    for p in published_points():
        if p.maxdiffusion_ring and compiled is None:
            skipped.append(p.id)   # its calls are priced from the compiled table's rows only
            continue
        eff = family_efficiency(p.family, compiled)["efficiency"]
        setup = point_setup(p, eff, compiled)
        if p.maxdiffusion_ring:
            setup = dataclasses.replace(setup, sparse_stretch=family_stretch(p.family, compiled)["stretch"])
            try:
                predicted = setup_seconds(p, setup)
            except BadInput:   # a table without the rows of its chip (a test's, an older one): cannot price it
                skipped.append(p.id)
                continue
        else:
            predicted = setup_seconds(p, setup)
        related = related_calibration(p)
        rows.append({"id": p.id, "role": p.role, "variant": p.variant, "device": p.device, "chips": p.chips,
                     "model": p.model, "pixels": p.pixels, "frames": p.frames, "steps": p.steps, "cfg": p.cfg,
                     "attention_kernel": p.attention_kernel, "kernel": p.kernel, "sparse_kernel": p.sparse_kernel,
                     "measures": p.measures, "cfg_split": p.cfg_split,
                     "vae_sharded": p.vae_sharded, "image_encoder": p.image_encoder, "weights": p.weights,
                     "calibration_related": related, "independent": p.role == "validation" and related is None,
                     "shares": related and (f"the measured kernel time instrument run {related} reads "
                                            "(svgtpu.costmodel.realized)" if p.shares_instrument
                                            else f"the setting of calibration point {related}"),
                     "attention_pricing": pricing(p, setup), "code_path": p.code_path,
                     "clock_source": setup.device.clock_source or None,
                     "published_s": p.seconds, "predicted_s": predicted, "error": predicted / p.seconds - 1,
                     "source": p.source, "what": p.what, "settings_note": p.settings_note})

    def summary(selected: list[dict]) -> dict:
        errors = [abs(r["error"]) for r in selected]
        if not errors:
            return {"points": 0}
        worst = max(selected, key=lambda r: abs(r["error"]))
        return {"points": len(errors), "median_abs_error": statistics.median(errors), "worst_abs_error": max(errors),
                "worst": worst["id"]}

    validation = [r for r in rows if r["role"] == "validation"]
    # published SVG speedups: a dense and an SVG run of the same setting, both validation points
    speedups = []
    for p, row in zip((p for p in published_points() if p.id not in skipped), rows):
        if p.variant == "svg" and p.role == "validation" and not p.maxdiffusion_svg:
            dense = next(r for r in rows if r["id"] == _dense_twin(p).id)
            speedups.append({"dense": dense["id"], "svg": row["id"], "device": row["device"], "pixels": row["pixels"],
                             "published": dense["published_s"] / row["published_s"],
                             "predicted": dense["predicted_s"] / row["predicted_s"],
                             "calibration_related": row["calibration_related"]})
    for row in speedups:
        row["error"] = row["predicted"] / row["published"] - 1

    families = {}
    for family in (f for f in FAMILIES if f != "cpu"):
        fe = family_efficiency(family, compiled)
        stretch = family_stretch(family, compiled)
        families[family] = {"calibrated_on": fe["calibrated_on"], "fitted_compute_efficiency": fe["fitted"],
                            "efficiency_source": fe.get("source"),
                            # the fitted constant it carries where compiled Wan blocks price the non-attention ops
                            "fitted_realized_over_static": (realized(fe["efficiency"]) if family == "tpu" and fe["fitted"]
                                                            and compiled is not None else None),
                            "svg_calibrated_on": stretch["calibrated_on"], "sparse_stretch": stretch["stretch"],
                            "stretch_bounds": stretch["bounds"],
                            "devices": [d for d, s in DEVICES.items() if s.family == family]}
    clocks = {name: {"clock_ghz": get_device(name, compiled).clock_hz / 1e9,
                     "mxus_per_core": get_device(name, compiled).mxus_per_core,
                     "clock_source": get_device(name, compiled).clock_source}
              for name, spec in DEVICES.items() if spec.family == "tpu"}
    return {"points": rows,
            "independent": summary([r for r in validation if r["independent"]]),
            "calibration_related": summary([r for r in validation if not r["independent"]]),
            "validation": summary(validation),
            "validation_unconfirmed": summary([r for r in rows if r["role"] == "validation-unconfirmed"]),
            "misses": [{"id": r["id"], "error": r["error"], "independent": r["independent"]}
                       for r in validation + [r for r in rows if r["role"] == "validation-unconfirmed"]
                       if abs(r["error"]) > MISS],
            "speedups": speedups, "maxdiffusion_svg": maxdiffusion_rows(compiled) if compiled else [],
            "maxdiffusion_svg_skipped": skipped, "families": families, "tpu_clocks": clocks,
            "compiled_table": compiled.path if compiled else None,
            "tpu_attention_efficiency": {name: kernel_efficiencies(name, compiled=compiled)
                                         for name, spec in DEVICES.items() if spec.family == "tpu"
                                         and kernel_efficiencies(name, compiled=compiled)},
            "eager_passes": eager_summary(),
            "not_found": json.loads(PUBLISHED_PATH.read_text())["not_found"],
            "provenance": "modeled vs published (measured by others)"}


__all__ = ["MISS", "TPU_USER_DENSE_KERNEL", "user_dense_kernel", "compiled_attention", "attention_untied", "kernel_efficiencies", "gpu_rates", "measured_block_setup", "setting_setup", "gpu_tile", "block_rest_seconds", "PublishedPoint", "published_points", "point_setup", "setup_seconds", "predict_seconds", "with_compute", "solve",
           "calibration_point", "fit_efficiency", "family_efficiency", "calibrated_setup", "related_calibration",
           "published_svg_efficiency", "sparse_efficiency_evidence", "validate", "eager_summary", "ROLES", "fit_sparse_stretch",
           "family_stretch", "run_policy", "maxdiffusion_rows", "point_layout", "RING_KERNELS", "DENSE_CONTROL", "SIDE_CONTROL", "DENSE_CONTROLS", "CENTRAL_STRETCH"]
