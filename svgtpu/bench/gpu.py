"""The prepared GPU benchmark (``svgtpu bench gpu``, ``make gpu-bench``): one run on one H100 or H200, in five minutes.

A GPU is the one real accelerator this project reaches, a few minutes at a time, so everything it
needs is one command that cannot rot (``--smoke`` runs the same code at tiny shapes on CPU, in
Pallas' and JAX's GPU interpreters, and tests run it).  The default run ends within five minutes by
construction (:data:`FULL`: its budget, the run's watchdog, ``make gpu-bench``'s ``timeout``);
``--variants`` names what to check and time (``all``: every variant, a longer slot).  Sections under
one time budget: the check runs until the run's deadline (a variant it leaves unchecked is timed in no
section), then the timing sections share the time left by their weights; a variant that runs out of
memory, is not supported by the installed jax, or does not fit the remaining time is recorded as
skipped with the reason instead of stopping the run:

1. **check**: every variant on the device against a float64 reference on the host (dense, SVG, aligned, per-head
   masks, fast path on and off), each under its own watchdog in a process of its own
   (:mod:`svgtpu.bench.gpu_check`: a hang names the variant and the step, the other checks go on), so no timing
   below comes from a wrong kernel;
2. **attention** at Wan 2.1 shapes (bf16, ``d = 128``, 720p and 1440p): cuDNN flash attention (the denominator of
   every headline speedup), our kernels (Triton; Mosaic GPU, warp-specialised) dense, on the SVG mask (the default
   recipe's kept fraction) and on the mask aligned to its tiles, FlexAttention on the same masks and tiles, and with
   ``--variants all`` XLA dense, JAX's own Pallas flash kernels, fast path off, launch sweeps.  Interleaved rounds
   (:mod:`svgtpu.bench.timing`), medians of paired ratios, achieved TFLOP/s over the score pairs each variant
   computes, overhead vs ideal ``(t / t_dense) / density``; then a float64 spot check of a few rows of each timed
   output at the timed size (:func:`spot_checks`);
3. **block**: one Wan 2.1 14B block, :class:`svgtpu.model.wan.WanBlock` with random bf16 weights (the
   block the toy DiT and the TPU compile run), at 480p, 720p and 1440p with dense self-attention (cuDNN,
   ours) and SVG (profiling, layout transform, our kernel on the tile-aligned mask): the measured
   self-attention share next to the cost model's prediction for the same block (:mod:`svgtpu.costmodel`,
   device ``h200``);
4. **end to end**: a Wan 2.1 14B video (40 blocks, 50 steps, CFG: 2 passes) *extrapolated* from the
   measured block, dense and with SVG's dense warm-up schedule; VAE and text encoder are not included.

Every timing section also logs the SM clock and power of each timed call (:mod:`svgtpu.bench.gpu_clocks`, its
``clocks``): a rate from a short call need not hold in a long one.

:func:`run` returns everything as one dict, with every kernel's launch settings (:func:`launch_settings`);
:mod:`svgtpu.bench.gpu_results` writes it as a dated run file, reads it back (run files of any date:
:func:`~svgtpu.bench.gpu_results.speedups`) and prints it; :mod:`svgtpu.bench.gpu_timing` fits the timing into
the budget.  Runs on the GPU machine's own jax from the checkout (``PYTHONPATH=.``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import os
import statistics
import sys
import threading
import time
import traceback
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from svgtpu.attention.svg import SVGConfig
from svgtpu.bench.gpu_results import format_result, gpu_rows, source_commit, triton_launch, write
from svgtpu.bench.gpu_check import end_children, isolated_checks, report
from svgtpu.bench.gpu_clocks import ClockLog
from svgtpu.bench.gpu_timing import NOW, Budget, Watchdog, check_budget, reason, time_variants
from svgtpu.bench.timing import paired_ratio
from svgtpu.costmodel.gpu_rates import GPU_TILE
from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, get_geometry
from svgtpu.kernels import mask_array
from svgtpu.kernels.common import resolve_interpret
from svgtpu.bench.gpu_peers import PEERS, torch_peers
from svgtpu.bench.gpu_peers import take_rows as peer_rows
from svgtpu.bench.gpu_peers import to_numpy as peer_numpy
from svgtpu.kernels.gpu import gpu_block_sparse_attention, row_plan_for
from svgtpu.kernels.mosaic_gpu import MosaicConfig, mosaic_gpu_attention
from svgtpu.kernels.reference import float64_attention, relative_error
from svgtpu.masks.core import BandSinkMask, DenseMask, align, svg_mask
from svgtpu.models import MODELS, ModelConfig
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION
from svgtpu.model.wan import WanBlock, rope_angles, self_attention
from svgtpu.facts.results import provenance
from svgtpu.warmup import layer_calls

#: Wan 2.1 14B, the same config the cost model predicts it with (:func:`modeled_block`).
WAN14B = MODELS["wan2.1-14b"]
#: Wan 2.1 1.3B, the model of FastVideo's published H200 rows (``svgtpu/costmodel/published.json``), timed as a
#: block at 720p, a resolution none of those rows ran: its narrower matmuls (1536 wide) and 12 heads priced by the
#: model fitted on the 14B block, against a measurement (docs/costmodel.md, "What the median still misses").
WAN1_3B = MODELS["wan2.1-1.3b"]


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What one run measures.  ``sections``: ``(kind, geometry, heads, weight)`` in run order, kind
    ``check`` / ``attention`` / ``block`` (``heads``: attention heads of check and attention; a block has
    its model's heads, and names its model there: ``None`` for ``block``, or a name of :data:`MODELS`).  The
    check (weight ``None``) may use all the time left of ``budget_s``: a variant it leaves unchecked would go
    untimed in every section.  Each timing section may use ``weight / (weights of it and the timing sections
    after it)`` of the time left, so time a section leaves unused passes on to the next ones."""

    sections: tuple[tuple[str, str, int | str | None, float | None], ...]
    block: ModelConfig    # its ``layers`` count for the end-to-end extrapolation
    block_q: int          # the plan's tile: GPU_TILE in both runs, the tile the cost model prices GPU kernels at
    block_kv: int
    kept: float = DEFAULT_KEPT
    steps: int = 50
    max_rounds: int = 7
    budget_s: float = 400.0
    variants: tuple[str, ...] | None = None   # attention variants to check and time (None: all)
    #: extra dense runs of our kernel at other Triton settings (gpu_block_q, gpu_block_kv, num_warps,
    #: num_stages): the recorded sweep the next run chooses its launch settings from (:func:`triton_launch`)
    tunings: tuple[tuple[int, int, int, int], ...] = ((128, 64, 8, 2), (128, 128, 8, 2), (128, 128, 8, 3),
                                                      (128, 64, 8, 3), (64, 64, 4, 2))
    #: the Triton launch settings of our kernel's runs (``gpu_block_q``, ``gpu_block_kv``, ``num_warps``,
    #: ``num_stages``; ``None``: the kernel's defaults), set by :func:`run` from the recorded sweep
    launch: dict | None = None
    block_attentions: tuple[str, ...] = ("dense-cudnn", "dense-ours", "svg-aligned-ours")
    #: a block of another model than ``block``: cuDNN dense only (its non-attention ops are what it is timed for,
    #: and cuDNN needs no kernel compile of its own)
    other_block_attentions: tuple[str, ...] = ("dense-cudnn",)
    profile: str = "hopper"
    #: seconds each variant's float64 check may take (compile and run at the check's size) before its own watchdog
    #: records it as hung, naming the step, and the checks go on without it (:mod:`svgtpu.bench.gpu_check`)
    check_s: float = 60.0
    #: the checks in a process of their own (a kernel that hangs holds its process's CUDA stream)
    isolate: bool = True


#: The variants a default run checks and times: cuDNN dense (the denominator of every headline speedup), our kernels
#: dense and on the exact and tile-aligned SVG masks (Triton; Mosaic GPU, fast path on, and off on the exact mask),
#: FlexAttention on the same masks and tiles.  ``--variants all`` adds the rest (XLA, JAX's flash kernels, torch
#: SDPA, fast path off, one consumer warpgroup, three stages, the Triton launch sweep): about twice the time.
DEFAULT_VARIANTS = ("cudnn-dense", "ours-dense", "ours-svg-fast", "ours-aligned-fast", "ours-mgpu-dense",
                    "ours-mgpu-svg-fast", "ours-mgpu-svg-nofast", "ours-mgpu-aligned-fast", "flex-dense", "flex-svg",
                    "flex-aligned")
#: One run on an H100 or H200 that ends within five minutes by construction: 200 s of work (checks, then timing),
#: a watchdog 260 s after the command started (:data:`svgtpu.cli.bench.WATCHDOG_MARGIN_S` past the budget) that
#: saves what the run has and ends it, and ``make gpu-bench``'s ``timeout`` at 295 s behind both.  The weights
#: guess where compile time (every timing section) and run time (the 1440p ones) go.
FULL = Sizes(sections=(("check", "11x16x20", 4, None), ("attention", "720p", 40, 0.4),
                       ("attention", "1440p", 8, 0.6), ("block", "480p", None, 0.10),
                       ("block", "720p", None, 0.12), ("block", "720p", WAN1_3B.name, 0.04),
                       ("block", "1440p", None, 0.36)), block=WAN14B,
             block_q=GPU_TILE, block_kv=GPU_TILE, budget_s=200.0, variants=DEFAULT_VARIANTS)
#: The same code at tiny shapes (interpret mode on CPU): one geometry per section, one check case, the
#: attention variants whose code differs (every baseline, our kernel dense and aligned), the block with
#: each of its attentions.
SMOKE = Sizes(sections=(("check", "2x8x10", 2, None), ("attention", "2x8x10", 2, 1.0), ("block", "2x8x10", None, 1.0)),
              block=ModelConfig("smoke", layers=40, dim=256, heads=2, head_dim=128, ffn=512, text_len=16, patch_in=64,
                                source="the smoke profile: tiny shapes"),
              block_q=GPU_TILE, block_kv=GPU_TILE, max_rounds=2, budget_s=600.0, profile="smoke", check_s=240.0,
              variants=("xla-dense", "cudnn-dense", "jax-triton-flash-dense", "jax-mosaic-flash-dense-f16",
                        "flex-svg", "ours-dense", "ours-aligned-fast", "ours-per-head-fast", "ours-mgpu-svg-fast-wg1"),
              tunings=())


def _device_memory() -> float | None:
    try:
        return float(jax.devices()[0].memory_stats()["bytes_limit"])
    except Exception:  # CPU and some plugins have no memory stats
        return None


# -- 1. every variant checked on the device ----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Variant:
    """One attention variant of the run: ``call()`` runs it on the inputs it was made for (``None``: it cannot
    run here, ``reason`` says why); ``mask`` names the run's mask it computes (``dense``, ``svg``, ``aligned``,
    ``per-head``); ``output`` turns its result into ``[heads, L, d]`` for the float64 check; ``padded_keys``:
    keys it attends to beyond ``L`` (zero vectors: JAX's Mosaic flash has no masking), which the check's
    reference includes; ``dtype``: what it computes in."""

    call: Callable | None
    info: dict
    mask: str = "dense"
    output: Callable = np.asarray
    note: str = ""
    padded_keys: int = 0
    dtype: str = "bfloat16"
    reason: str = ""
    take: Callable = None   # (out, heads, rows) -> float64 [heads, rows, d]: the spot check's rows; default _take_hld

    def rows(self, out, heads, rows) -> np.ndarray:
        """Rows ``rows`` of heads ``heads`` of output ``out``, float64 ``[heads, rows, d]`` on the host (taken on
        the device first: a whole 1440p output would be gigabytes in float64)."""
        return (self.take or _take_hld)(out, np.asarray(heads), np.asarray(rows))


def _take_hld(out, heads, rows) -> np.ndarray:
    """``[heads, L, d]`` outputs (ours, XLA)."""
    return np.asarray(np.asarray(out[heads[:, None], rows[None, :]], np.float32), np.float64)


def _take_blhd(out, heads, rows) -> np.ndarray:
    """``[1, L', heads, d]`` outputs (cuDNN and JAX's flash kernels through :func:`_blhd`)."""
    return np.asarray(np.asarray(out[0][rows[:, None], heads[None, :]], np.float32), np.float64).transpose(1, 0, 2)


#: Tolerance of the float64 check (max relative error) by the dtype a variant computes in.
TOLERANCE = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 2e-2}


def check_variants(geometry: str, heads: int, sizes: Sizes, budget: Budget, interpret: bool,
                   names: set[str] | None = None, progress: Callable[[str, str], object] | None = None,
                   on_row: Callable[[dict], object] | None = None) -> dict:
    """Every variant the run times (``names``; ``None``: all), made by the same code as for timing
    (:func:`attention_variants`) at ``geometry`` (``L`` not a tile multiple), run on the device and compared with a
    float64 reference on the host of the mask it computes.  A check that could not run (no time left, the variant
    not available, an error) is ``ok: None`` with its reason; ``all_ok`` is true only when every check ran and
    passed.  ``progress(variant, step)`` hears each step begin and ``on_row(row)`` each row as it is made (the
    check process reports them: :mod:`svgtpu.bench.gpu_check`)."""
    progress = progress or (lambda name, step: None)
    g = get_geometry(geometry)
    L = g.L
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((heads, L, 128)).astype(jnp.bfloat16) for _ in range(3)]  # rounded on the host
    q, k, v = (jnp.asarray(x) for x in data)
    variants = attention_variants(q, k, v, g, sizes, interpret, per_head=True)
    masks = svg_masks(g, sizes) | {"per-head": per_head_masks(g, heads)}
    references: dict = {}

    def reference(variant: Variant):
        key = (variant.mask, variant.padded_keys)
        if key not in references:
            allowed = mask_array(masks[variant.mask], heads, L)
            kk, vv = data[1], data[2]
            if variant.padded_keys:  # what it computes: zero keys and values beyond L, unmasked
                pad = ((0, 0), (0, variant.padded_keys), (0, 0))
                kk, vv = (np.pad(x.astype(np.float32), pad) for x in (kk, vv))
                allowed = np.pad(allowed, ((0, 0), (0, 0), (0, variant.padded_keys)), constant_values=True)
            references[key] = float64_attention(data[0], kk, vv, allowed)
        return references[key]

    rows = []

    def checked(name: str) -> dict:
        variant = variants[name]
        row = {"variant": name, "mask": variant.mask, "dtype": variant.dtype}
        if variant.call is None:
            return row | {"ok": None, "reason": f"not available: {variant.reason}"}
        if budget.left() <= 0:
            return row | {"ok": None, "reason": "time budget: no time left to check it"}
        NOW["step"] = f"check {name}"
        progress(name, "compile and run")
        try:
            out = variant.output(variant.call())
        except Exception as error:  # noqa: BLE001 - unsupported here, OOM: recorded, not timed
            return row | {"ok": None, "reason": reason(error)}
        progress(name, "compare with float64")
        err = relative_error(out, reference(variant))
        return row | {"max_rel_error": err, "ok": bool(err <= TOLERANCE[variant.dtype])}

    order = sorted((n for n in variants if names is None or n in names), key=check_priority)
    for name in tqdm(order, desc=f"check {g}", leave=False):
        rows.append(checked(name))
        if on_row is not None:
            on_row(rows[-1])
    return {"geometry": str(g), "L": L, "heads": heads, "rows": rows,
            "all_ok": bool(rows) and all(r["ok"] is True for r in rows)}


#: The order the check takes variants in, by name prefix, so a tight budget runs out on the least needed ones:
#: the dense baseline and our kernels, then the peers, then the extra launch settings.
CHECK_ORDER = ("cudnn-dense", "ours-dense", "ours-svg", "ours-aligned", "ours-mgpu", "flex-", "torch-", "jax-",
               "xla-", "ours-per-head", "ours-dense-")


def check_priority(name: str) -> tuple[int, str]:
    """``name``'s place in :data:`CHECK_ORDER` (the longest matching prefix wins)."""
    matches = [(len(p), i) for i, p in enumerate(CHECK_ORDER) if name.startswith(p)]
    return (max(matches)[1] if matches else len(CHECK_ORDER), name)


def check_verdict(check: dict | None, name: str) -> str | None:
    """``None`` when ``name``'s float64 check ran and passed, else why it must not be timed, in words."""
    row = next((r for r in (check or {}).get("rows", ()) if r["variant"] == name), None)
    if row is None:
        return "not timed: no float64 check of it ran in this run"
    if row["ok"] is True:
        return None
    if row["ok"] is False:
        return f"not timed: its float64 check failed (max rel. error {row['max_rel_error']:.2e})"
    return f"not timed: its float64 check did not run ({row['reason']})"


def isolated_check(geometry: str, heads: int, sizes: Sizes, budget: Budget, interpret: bool,
                   names: set[str] | None = None, child: list[str] | None = None) -> dict:
    """:func:`check_variants` in a process of its own, each variant within ``sizes.check_s`` seconds (its own
    watchdog: a hang is recorded naming the variant and the step, and the other checks go on in a new process:
    :mod:`svgtpu.bench.gpu_check`); the same rows and ``all_ok``.  ``child``: the check process's command."""
    g = get_geometry(geometry)
    order = sorted(names if names is not None else variant_names(sizes), key=check_priority)
    job = {"smoke": sizes.profile == "smoke", "geometry": geometry, "heads": heads, "interpret": interpret,
           "launch": sizes.launch, "budget_s": max(budget.left(), 0.0)}
    NOW["step"] = f"check {g} in its own process"
    rows = isolated_checks(job, order, sizes.check_s, time.monotonic() + max(budget.left(), 0.0), child or CHILD)
    return {"geometry": str(g), "L": g.L, "heads": heads, "rows": rows, "isolated": True,
            "all_ok": bool(rows) and all(r["ok"] is True for r in rows)}


#: The check process's command (the job follows it as one JSON argument).
CHILD = [sys.executable, "-c", "import sys; from svgtpu.bench.gpu import check_child; sys.exit(check_child())"]


def check_child(argv: list[str] | None = None) -> int:
    """The check process: checks ``job["names"]`` (:func:`check_variants`), reporting each step and row as it goes
    (:func:`svgtpu.bench.gpu_check.report`); it ends when its parent does."""
    job = json.loads((argv or sys.argv[1:])[0])
    parent = os.getppid()

    def orphaned():   # the parent ended (its watchdog, a kill): so does this process
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=orphaned, daemon=True).start()
    sizes = dataclasses.replace(SMOKE if job["smoke"] else FULL, launch=job["launch"], variants=None)
    check_variants(job["geometry"], job["heads"], sizes, Budget(job["budget_s"]), job["interpret"], set(job["names"]),
                   progress=lambda name, step: report({"variant": name, "step": step}),
                   on_row=lambda row: report({"row": row}))
    return 0


# -- 2. attention at Wan shapes -----------------------------------------------------------------

def _xla_dense(q, k, v):
    """Plain XLA attention, one head at a time (``lax.map``) so only one ``[L, L]`` score matrix lives."""
    def head(x):
        qh, kh, vh = x
        s = jnp.einsum("qd,kd->qk", qh, kh, preferred_element_type=jnp.float32) / math.sqrt(qh.shape[-1])
        return (jax.nn.softmax(s, axis=-1).astype(vh.dtype) @ vh).astype(qh.dtype)
    return jax.lax.map(head, (q, k, v))


@functools.partial(jax.jit, static_argnums=(0,))
def random_qkv(shape: tuple[int, int, int], key) -> tuple:
    """bf16 ``q, k, v`` of ``shape`` (``[heads, L, d]``), standard normal, made on the device."""
    return tuple(jax.random.normal(k_, shape, jnp.float32).astype(jnp.bfloat16) for k_ in jax.random.split(key, 3))


@functools.partial(jax.jit, static_argnums=(1,))
def _blhd(x, multiple: int = 1):
    """``[heads, L, d]`` -> ``[1, L', heads, d]`` with ``L`` padded up to ``multiple`` (the layout of
    ``jax.nn.dot_product_attention`` and JAX's flash kernels)."""
    L = x.shape[1]
    return jnp.pad(x, ((0, 0), (0, -L % multiple), (0, 0))).transpose(1, 0, 2)[None]


def _hld(L: int):
    """``[1, L', heads, d]`` (a flash kernel's layout, maybe padded) -> numpy ``[heads, L, d]``."""
    return lambda out: np.asarray(out[0, :L].astype(jnp.float32)).transpose(1, 0, 2)


@functools.lru_cache(maxsize=8)
def svg_masks(g, sizes: Sizes) -> dict:
    """The dense, SVG (the run's kept fraction) and tile-aligned SVG (the run's tile) masks of geometry ``g``,
    made once per run (at 1440p their tile counts take seconds; attention and block sections share them and their
    plans)."""
    svg = svg_mask(g, kept=sizes.kept)
    return {"dense": DenseMask(g.L), "svg": svg, "aligned": align(svg, Tile(sizes.block_q, sizes.block_kv), "snap")}


#: Largest per-head mask a variant takes: a bool ``[heads, L, L]`` array (the kernels take no per-head mask objects).
PER_HEAD_BYTES = 2 ** 28


def per_head_masks(g, heads: int) -> np.ndarray:
    """Per-head masks of ``g``: band + sink of a different window per head, the sink on every other head."""
    return np.stack([BandSinkMask(g.L, g.F * (h % 2), 128 * (h + 1)).to_array() for h in range(heads)])


#: JAX's Mosaic GPU flash attention at the tuning fastest in the probe of 2026-12-04
#: (``/work/shared/gpu-runs/2026-12-04/jax-mosaic-gpu-probe.json``: 64 x 128, 2 concurrent steps, float16).
JAX_MOSAIC_TUNING = dict(block_q=64, block_kv=128, max_concurrent_steps=2)


def peer_variants(q, k, v, g, sizes: Sizes, interpret: bool, masks: dict) -> dict[str, Variant]:
    """The baselines and peers: XLA dense, cuDNN, JAX's Pallas flash kernels (Triton; Mosaic GPU in float16),
    and PyTorch's FlexAttention and SDPA cuDNN (:mod:`svgtpu.bench.gpu_peers`)."""
    heads, L, d = q.shape
    dense_info = {"density": 1.0, "partial_share": 0.0, "computed_pairs": heads * L * L}
    variants: dict[str, Variant] = {}

    memory = _device_memory()
    score_bytes = 10.0 * L * L   # f32 scores + exp + bf16 probabilities of one head
    if memory is None or score_bytes < 0.6 * memory:
        xla = jax.jit(_xla_dense)
        variants["xla-dense"] = Variant(lambda: xla(q, k, v), dense_info)
    else:
        variants["xla-dense"] = Variant(None, dense_info, reason=f"one head's [L, L] scores need "
                                        f"{score_bytes / 1e9:.0f} GB of {memory / 1e9:.0f} GB")
    qb, kb, vb = (_blhd(x, 1) for x in (q, k, v))
    if jax.default_backend() == "gpu":
        cudnn = jax.jit(functools.partial(jax.nn.dot_product_attention, implementation="cudnn"))
        variants["cudnn-dense"] = Variant(lambda: cudnn(qb, kb, vb), dense_info, output=_hld(L), take=_take_blhd)
    else:   # in words, before JAX's bare `assert cuda_versions is not None` says it
        variants["cudnn-dense"] = Variant(None, dense_info, reason=f"cuDNN runs on an NVIDIA GPU only; this backend "
                                          f"is {jax.default_backend()}")

    try:  # JAX's Pallas Triton flash attention; L padded to its 128-row blocks, padding as a 2nd segment
        from jax.experimental.pallas.ops.gpu import attention as jax_triton
        Lp = L + (-L % 128)
        qp, kp, vp = (_blhd(x, 128) for x in (q, k, v))
        segments = jnp.asarray((np.arange(Lp) >= L).astype(np.int32))[None]
        flash = jax.jit(functools.partial(jax_triton.mha, sm_scale=1 / math.sqrt(d), interpret=interpret))
        variants["jax-triton-flash-dense"] = Variant(lambda: flash(qp, kp, vp, segments),
                                                     dense_info | {"computed_pairs": heads * Lp * Lp}, output=_hld(L),
                                                     take=_take_blhd)
    except Exception as error:
        variants["jax-triton-flash-dense"] = Variant(None, dense_info, reason=reason(error))
    info = dense_info | {"note": "float16 (its shared-memory buffers are float16); padded keys unmasked"}
    try:  # JAX's Mosaic GPU (Hopper) flash attention: float16 only, no masking (padded keys count)
        from jax.experimental.pallas.ops.gpu import attention_mgpu
        Lp = L + (-L % 256)
        qp, kp, vp = (_blhd(x, 256).astype(jnp.float16) for x in (q, k, v))
        mosaic = jax.jit(functools.partial(attention_mgpu.attention,
                                           config=attention_mgpu.TuningConfig(**JAX_MOSAIC_TUNING)))
        variants["jax-mosaic-flash-dense-f16"] = Variant(
            lambda: mosaic(qp, kp, vp), info | {"computed_pairs": heads * Lp * Lp}, output=_hld(L),
            padded_keys=Lp - L, dtype="float16", take=_take_blhd)
    except Exception as error:
        variants["jax-mosaic-flash-dense-f16"] = Variant(None, info, dtype="float16", reason=reason(error))

    for name, (call, why) in torch_peers(q, k, v, masks, Tile(sizes.block_q, sizes.block_kv)).items():
        mask = PEERS[name]
        variants[name] = Variant(call, dense_info if mask == "dense" else tile_info(masks[mask], heads, L, sizes),
                                 mask=mask, output=peer_numpy, take=peer_rows, reason=why or "")
    return variants


def tile_info(mask, heads: int, L: int, sizes: Sizes, fast_path: bool = True) -> dict:
    """Density, partial share and score pairs computed of a block-sparse run of ``mask`` at the run's tiles."""
    rows = row_plan_for(mask, L, sizes.block_q, sizes.block_kv, fast_path)  # cached: the kernel's own
    stats = rows.plan.as_dict()
    return {"density": stats["density"], "partial_share": stats["partial_share"],
            "computed_pairs": heads * rows.tiles_computed * sizes.block_q * sizes.block_kv}


def attention_variants(q, k, v, g, sizes: Sizes, interpret: bool, per_head: bool = False) -> dict[str, Variant]:
    """Every variant on bf16 ``q, k, v [heads, L, d]`` of geometry ``g``: the peers (:func:`peer_variants`), then
    ours (Triton) dense, on the SVG mask and on the aligned one, fast path off and on, the Mosaic GPU body
    (``ours-mgpu-*``: :mod:`svgtpu.kernels.mosaic_gpu`), per-head masks (``per_head``: where their ``[heads, L, L]``
    array fits), and the extra Triton launch settings of ``sizes.tunings``."""
    heads, L, d = q.shape
    masks = svg_masks(g, sizes)
    tiles = dict(block_q=sizes.block_q, block_kv=sizes.block_kv)
    launch = sizes.launch or {}
    variants = peer_variants(q, k, v, g, sizes, interpret, masks)
    for label, fast_path in OURS_TRITON:
        f = jax.jit(functools.partial(gpu_block_sparse_attention, mask=masks[label], fast_path=fast_path,
                                      interpret=interpret, **tiles, **launch))
        variants[triton_name(label, fast_path)] = Variant(
            functools.partial(f, q, k, v), tile_info(masks[label], heads, L, sizes, fast_path), mask=label)
    for label, fast_path, consumers, stages in OURS_MGPU:
        config = mosaic_config(sizes, fast_path, consumers, stages)
        f = jax.jit(functools.partial(mosaic_gpu_attention, mask=masks[label], config=config, interpret=interpret))
        variants[mgpu_name(label, fast_path, consumers, stages)] = Variant(
            functools.partial(f, q, k, v), tile_info(masks[label], heads, L, sizes, fast_path), mask=label,
            note=f"Mosaic GPU (Hopper), warp-specialised: a TMA producer and {consumers} consumer warpgroup(s), "
                 f"{stages} kv stages")
    if per_head:
        info = {"density": float("nan"), "partial_share": float("nan"), "computed_pairs": heads * L * L}
        if heads * L * L <= PER_HEAD_BYTES:
            f = jax.jit(functools.partial(gpu_block_sparse_attention, mask=per_head_masks(g, heads),
                                          interpret=interpret, **tiles, **launch))
            variants[PER_HEAD] = Variant(functools.partial(f, q, k, v), info, mask="per-head")
        else:
            variants[PER_HEAD] = Variant(None, info, mask="per-head", reason=(
                f"per-head masks are a bool [heads, L, L] array: {heads * L * L / 1e9:.1f} GB here"))
    for bq, bkv, warps, stages in sizes.tunings:
        f = jax.jit(functools.partial(gpu_block_sparse_attention, mask=masks["dense"], gpu_block_q=bq,
                                      gpu_block_kv=bkv, num_warps=warps, num_stages=stages, interpret=interpret,
                                      **tiles))
        variants[tuning_name((bq, bkv, warps, stages))] = Variant(functools.partial(f, q, k, v),
                                                                variants["ours-dense"].info)
    return variants


#: Our Triton kernel's attention variants: (mask, fast path).
OURS_TRITON = (("dense", True), ("svg", False), ("svg", True), ("aligned", False), ("aligned", True))
#: Our Mosaic GPU kernel's: (mask, fast path, consumer warpgroups, kv stages).
OURS_MGPU = (("dense", True, 2, 2), ("svg", False, 2, 2), ("svg", True, 2, 2), ("aligned", True, 2, 2),
             ("svg", True, 1, 2), ("svg", True, 2, 3))
#: The peers' names (:func:`peer_variants`), in the order it makes them.
PEER_NAMES = ("xla-dense", "cudnn-dense", "jax-triton-flash-dense", "jax-mosaic-flash-dense-f16", *PEERS)
#: The per-head variant, made for the check only (its masks are a bool [heads, L, L] array).
PER_HEAD = "ours-per-head-fast"


def triton_name(label: str, fast_path: bool) -> str:
    return f"ours-{label}" + ("" if label == "dense" else ("-fast" if fast_path else "-nofast"))


def mgpu_name(label: str, fast_path: bool, consumers: int, stages: int) -> str:
    return (f"ours-mgpu-{label}" + ("" if label == "dense" else ("-fast" if fast_path else "-nofast"))
            + ("" if consumers == 2 else f"-wg{consumers}") + ("" if stages == 2 else f"-s{stages}"))


def tuning_name(tuning: tuple[int, int, int, int]) -> str:
    """The variant name of one of :attr:`Sizes.tunings`: ``ours-dense-128x64-w8-s2``."""
    bq, bkv, warps, stages = tuning
    return f"ours-dense-{bq}x{bkv}-w{warps}-s{stages}"


def mosaic_config(sizes: Sizes, fast_path: bool, consumers: int, stages: int) -> MosaicConfig:
    """Our Mosaic GPU kernel's launch settings in a run: the run's plan tile, the variant's pipeline."""
    return MosaicConfig(block_q=sizes.block_q, block_kv=sizes.block_kv, stages=stages, consumers=consumers,
                        fast_path=fast_path)


def variant_names(sizes: Sizes) -> tuple[str, ...]:
    """Every attention variant a run of ``sizes`` can make, in :func:`attention_variants`' order (the names
    ``--variants`` takes)."""
    return (*PEER_NAMES, *(triton_name(*v) for v in OURS_TRITON), *(mgpu_name(*v) for v in OURS_MGPU), PER_HEAD,
            *(tuning_name(t) for t in sizes.tunings))


def launch_settings(sizes: Sizes, triton_choice: dict) -> dict:
    """Every kernel's launch settings in this run, for its file: our Triton kernel's (and where they came from), our
    Mosaic GPU kernel's per variant, JAX's Mosaic GPU flash kernel's (:data:`JAX_MOSAIC_TUNING`), and the peers'."""
    names = set(sizes.variants) if sizes.variants is not None else None
    return {"triton_ours": triton_choice | {"used": sizes.launch is not None},
            "mosaic_gpu_ours": {mgpu_name(*v): dataclasses.asdict(mosaic_config(sizes, *v[1:])) for v in OURS_MGPU
                                if names is None or mgpu_name(*v) in names},
            "jax_mosaic_flash": JAX_MOSAIC_TUNING | {"dtype": "float16"},
            "jax_triton_flash": {"sm_scale": "1/sqrt(d)", "block sizes": "jax's defaults"},
            "flex": f"torch.compile(flex_attention), default kernel options, BLOCK_SIZE {sizes.block_q}",
            "tunings_swept": [tuning_name(t) for t in sizes.tunings]}


def bench_attention(geometry: str, heads: int, sizes: Sizes, budget: Budget, interpret: bool,
                    check: dict | None) -> dict:
    """Time every variant whose float64 check in ``check`` ran and passed; the others are skipped with why."""
    g = get_geometry(geometry)
    d = 128
    q, k, v = random_qkv((heads, g.L, d), jax.random.PRNGKey(0))
    variants = attention_variants(q, k, v, g, sizes, interpret)
    skipped = {}
    for name, variant in variants.items():
        if sizes.variants is not None and name not in sizes.variants:
            skipped[name] = "not among this run's variants (--variants)"
        elif variant.call is None:
            skipped[name] = variant.reason
        elif (verdict := check_verdict(check, name)) is not None:
            skipped[name] = verdict
    # compiled in the check's order: a section short of time leaves the peers and extra launches out, not ours
    calls = {n: variants[n].call for n in sorted(variants, key=check_priority) if n not in skipped}
    with ClockLog() as clocks:
        times, not_timed = time_variants(calls, budget, sizes.max_rounds, f"attention {g.name or g}", clocks)
    skipped |= not_timed
    spots = spot_checks({n: variants[n] for n in times}, q, k, v,
                        svg_masks(g, sizes), budget)
    base = "ours-dense" if "ours-dense" in times else None
    rows = []
    for name, variant in variants.items():
        info = variant.info
        row = {"variant": name, "status": "ok" if name in times else "skipped", "reason": skipped.get(name, ""),
               "density": info["density"], "partial_share": info["partial_share"],
               "note": variant.note or info.get("note", ""),
               "dtype": variant.dtype}
        if name in times:
            median = statistics.median(times[name])
            row |= {"median_s": median, "rounds": len(times[name]),
                    "tflops": 4 * d * info["computed_pairs"] / median / 1e12} | spots[name]
            if base:
                ratio = paired_ratio(times, name, base)
                row |= {"ratio_to_ours_dense": ratio, "overhead_vs_ideal": ratio / info["density"]}
            if "cudnn-dense" in times:
                row["speedup_over_cudnn"] = paired_ratio(times, "cudnn-dense", name)
        rows.append(row)

    def speedup(of, over):   # time of ``over`` / time of ``of``, paired by round: above 1, ``of`` is faster
        return paired_ratio(times, over, of) if of in times and over in times else None

    return {"geometry": g.name or str(g), "grid": f"{g.T}x{g.H}x{g.W}", "L": g.L, "heads": heads, "head_dim": d,
            "dtype": "bfloat16", "tile": f"{sizes.block_q}x{sizes.block_kv}",
            "launch": sizes.launch, "kept": sizes.kept, "rows": rows, "spot_rows": SPOT_ROWS,
            "headline": {key: speedup(name, "cudnn-dense") for key, name in HEADLINE.items()},
            "versus": {key: speedup(of, over) for key, (of, over) in VERSUS.items()}, "clocks": clocks.summary()}


#: The headline of an attention section: each variant's speedup over cuDNN dense (cuDNN's time over the variant's,
#: the median of the per-round ratios; above 1, faster than cuDNN), ``<key>_speedup_over_cudnn``.
HEADLINE = {f"{key}_speedup_over_cudnn": name for key, name in (
    ("ours_dense", "ours-dense"), ("svg_fast", "ours-svg-fast"), ("aligned_fast", "ours-aligned-fast"),
    ("mgpu_dense", "ours-mgpu-dense"), ("mgpu_svg_fast", "ours-mgpu-svg-fast"),
    ("mgpu_aligned_fast", "ours-mgpu-aligned-fast"), ("flex_dense", "flex-dense"), ("flex_svg", "flex-svg"),
    ("flex_aligned", "flex-aligned"), ("jax_triton_flash", "jax-triton-flash-dense"),
    ("jax_mosaic_flash_f16", "jax-mosaic-flash-dense-f16"), ("torch_sdpa_cudnn", "torch-sdpa-cudnn-dense"))}
#: The section's other speedups, ``key: (variant, over variant)``, the same way round (above 1: the first is
#: faster): ours against FlexAttention on the same mask and tiles, the fast path, the sparse kernels over ours dense.
VERSUS = {
    "mgpu_svg_fast_speedup_over_flex_svg": ("ours-mgpu-svg-fast", "flex-svg"),
    "mgpu_aligned_fast_speedup_over_flex_aligned": ("ours-mgpu-aligned-fast", "flex-aligned"),
    "mgpu_dense_speedup_over_flex_dense": ("ours-mgpu-dense", "flex-dense"),
    "svg_fast_speedup_over_flex_svg": ("ours-svg-fast", "flex-svg"),
    "aligned_fast_speedup_over_flex_aligned": ("ours-aligned-fast", "flex-aligned"),
    "ours_dense_speedup_over_jax_triton_flash": ("ours-dense", "jax-triton-flash-dense"),
    "svg_fast_speedup_over_ours_dense": ("ours-svg-fast", "ours-dense"),
    "aligned_fast_speedup_over_ours_dense": ("ours-aligned-fast", "ours-dense"),
    "fast_path_speedup_svg": ("ours-svg-fast", "ours-svg-nofast"),
    "fast_path_speedup_aligned": ("ours-aligned-fast", "ours-aligned-nofast"),
    "mgpu_fast_path_speedup_svg": ("ours-mgpu-svg-fast", "ours-mgpu-svg-nofast"),
}

#: The spot check's query rows at the timed sizes, as fractions of ``L``, and its heads (the first and the last).
SPOT_ROWS = (0.0, 0.25, 0.5, 0.75, 1.0)


def spot_checks(variants: dict[str, Variant], q, k, v, masks: dict, budget: Budget | None = None) -> dict[str, dict]:
    """Each timed variant's output at the timed size, a few rows (:data:`SPOT_ROWS` of the first and last head),
    against float64 on the host: ``{"spot_max_rel_error", "spot_ok"}`` (``spot_ok`` ``None`` with
    ``spot_reason`` where it could not run, or the section's time ran out).  The full float64 check is at a small
    size; this one sees the timed shapes (the 1440p walk, the long kv loops) at the cost of one call each."""
    heads, L, _ = q.shape
    pick_heads = np.unique([0, heads - 1])
    rows = np.unique([min(int(f * L), L - 1) for f in SPOT_ROWS])
    host = [np.asarray(x[pick_heads], np.float32) for x in (q, k, v)]
    out = {}
    for name, variant in tqdm(variants.items(), desc="spot check", leave=False):
        NOW["step"] = f"spot check {name}"
        if budget is not None and budget.left() <= 0:
            out[name] = {"spot_ok": None, "spot_reason": "time budget: no time left to check it"}
            continue
        try:
            got = variant.rows(variant.call(), pick_heads, rows)
        except Exception as error:  # noqa: BLE001 - it ran when timed: recorded, never fatal to the section
            out[name] = {"spot_ok": None, "spot_reason": reason(error)}
            continue
        if variant.mask not in masks:   # no row-wise reference for it (per-head masks are not timed)
            out[name] = {"spot_ok": None, "spot_reason": f"no row reference for the {variant.mask} mask"}
            continue
        allowed = np.asarray(masks[variant.mask].allowed(rows[:, None], np.arange(L)[None, :]), bool)
        kk, vv = host[1], host[2]
        if variant.padded_keys:   # zero keys and values beyond L, unmasked, as it computes
            pad = ((0, 0), (0, variant.padded_keys), (0, 0))
            kk, vv = np.pad(kk, pad), np.pad(vv, pad)
            allowed = np.pad(allowed, ((0, 0), (0, variant.padded_keys)), constant_values=True)
        err = relative_error(got, float64_attention(host[0][:, rows], kk, vv, allowed[None]))
        out[name] = {"spot_max_rel_error": err, "spot_ok": bool(err <= TOLERANCE[variant.dtype])}
    return out


def preflight(sizes: Sizes) -> list[dict]:
    """Our Mosaic GPU variants of ``sizes`` lowered for CUDA at each attention section's timed size, on any machine
    (``jax.export``: Pallas' Mosaic GPU lowering, wgmma, TMA, barriers; the Mosaic GPU compiler's passes and ptxas
    run only on a GPU): one row per variant and size, ``lowered`` or the reason it did not."""
    rows = []
    for kind, geometry, heads, _ in sizes.sections:
        if kind != "attention":
            continue
        g = get_geometry(geometry)
        masks = svg_masks(g, sizes)
        x = jax.ShapeDtypeStruct((heads, g.L, 128), jnp.bfloat16)
        for label, fast_path, consumers, stages in OURS_MGPU:
            name = mgpu_name(label, fast_path, consumers, stages)
            if sizes.variants is not None and name not in sizes.variants:
                continue
            start = time.perf_counter()
            f = jax.jit(functools.partial(mosaic_gpu_attention, mask=masks[label], interpret=False,
                                          config=mosaic_config(sizes, fast_path, consumers, stages)))
            try:
                module = jax.export.export(f, platforms=["cuda"])(x, x, x).mlir_module()
                why = "" if "stablehlo.custom_call @mosaic_gpu" in module else "no mosaic_gpu call in the module"
            except Exception as error:  # noqa: BLE001 - recorded: this is what the preflight is for
                why = reason(error)
            rows.append({"geometry": g.name or str(g), "L": g.L, "heads": heads, "variant": name,
                         "lowered": not why, "seconds": time.perf_counter() - start, "reason": why})
    return rows


# -- 3. one Wan 2.1 14B block ------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def init_block(block: WanBlock, seed: int = 0) -> dict:
    """Random bf16 weights of ``block`` (:meth:`WanBlock.init`), made on the device (host RNG would take
    seconds for 14B-block sizes) once per run."""
    init = jax.jit(lambda key: block.init(jax.random.split(key, block.INIT_KEYS), jnp.bfloat16))
    return init(jax.random.PRNGKey(seed))


@functools.partial(jax.jit, static_argnums=(0, 1))
def block_inputs(model: ModelConfig, L: int, seed: int = 1) -> tuple:
    """Random block input ``x [1, L, dim]`` (float32: Wan's residual stream), time modulation ``t_mod
    [1, 6, dim]`` (float32), text ``context [1, text_len, dim]`` (bf16) and self-attention inputs ``q, k, v
    [1, heads, L, head_dim]`` (bf16, to time attention alone), made on the device."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 6)
    normal = lambda k_, *s: jax.random.normal(k_, s, jnp.float32)  # noqa: E731
    qkv = [normal(k_, 1, model.heads, L, model.head_dim).astype(jnp.bfloat16) for k_ in keys[3:]]
    return (normal(keys[0], 1, L, model.dim), 0.1 * normal(keys[1], 1, 6, model.dim),
            normal(keys[2], 1, model.text_len, model.dim).astype(jnp.bfloat16), *qkv)


def _cudnn(q, k, v, **_):
    """cuDNN's fused attention on the block's ``[B, heads, L, d]`` (its layout is ``[B, L, heads, d]``)."""
    t = lambda y: jnp.swapaxes(y, 1, 2)  # noqa: E731
    return t(jax.nn.dot_product_attention(t(q), t(k), t(v), implementation="cudnn"))


#: Where SVG's schedule is sparse: the last step and layer (the block section times a sparse block).
SPARSE_CALL = PRODUCTION.sparse_call()   # past SVG's dense warm-up: the sparse path runs


def block_attentions(g, sizes: Sizes) -> dict[str, Callable]:
    """The block's self-attention variants: cuDNN and our kernel dense, and SVG through our kernel on the
    mask snapped to its tiles (profiling and layout transform included), on the GPU backend."""
    svg = SVGConfig(kept=sizes.kept, align="snap", block_q=sizes.block_q, block_kv=sizes.block_kv)
    tile = Tile(sizes.block_q, sizes.block_kv)
    return {"dense-cudnn": _cudnn, "dense-ours": self_attention("ours-dense", tile=tile, implementation="triton"),
            "svg-aligned-ours": self_attention("svg", g, svg_config=svg, implementation="triton")}


#: The attention variant whose float64 check stands for each block attention (the same kernel and mask).
BLOCK_CHECKS = {"dense-cudnn": "cudnn-dense", "dense-ours": "ours-dense", "svg-aligned-ours": "ours-aligned-fast"}


def section_model(sizes: Sizes, name: str | None) -> ModelConfig:
    """A block section's model: ``sizes.block``, or the one its section names (:data:`MODELS`)."""
    return sizes.block if name is None or name == sizes.block.name else MODELS[name]


def bench_block(geometry: str, sizes: Sizes, budget: Budget, check: dict | None, model: str | None = None) -> dict:
    """One block (``sizes.block``, or ``model``) and its self-attention alone, per attention variant whose kernel
    passed its float64 check (:data:`BLOCK_CHECKS`), timed in the same rounds."""
    g = get_geometry(geometry)
    config = section_model(sizes, model)
    block = WanBlock(config)
    p = init_block(block)
    x, t_mod, context, *qkv = block_inputs(config, g.L)
    angles = rope_angles(g, config.head_dim)
    key = jax.random.PRNGKey(0)
    names = sizes.block_attentions if config is sizes.block else sizes.other_block_attentions
    attentions = {n: a for n, a in block_attentions(g, sizes).items() if n in names}
    skipped = {n: why for n in attentions if (why := check_verdict(check, BLOCK_CHECKS[n])) is not None}
    calls = {}
    for name, attend in attentions.items():
        if name in skipped:
            continue
        blk = jax.jit(lambda p, x, t, c, a, key, attend=attend: block(p, x, t, c, a, attention=attend, key=key,
                                                                      **SPARSE_CALL)[0])
        att = jax.jit(lambda q, k, v, key, attend=attend: attend(q, k, v, key=key, **SPARSE_CALL))
        calls[f"block:{name}"] = functools.partial(blk, p, x, t_mod, context, angles, key)
        calls[f"attention:{name}"] = functools.partial(att, *qkv, key)
    with ClockLog() as clocks:
        times, not_timed = time_variants(calls, budget, sizes.max_rounds, f"block {g.name or g}", clocks)
    rows = []
    for name in attentions:
        b, a = f"block:{name}", f"attention:{name}"
        row = {"attention": name, "status": "ok" if b in times and a in times else "skipped",
               "reason": skipped.get(name) or not_timed.get(b) or not_timed.get(a) or ""}
        if row["status"] == "ok":
            row |= {"block_s": statistics.median(times[b]), "attention_s": statistics.median(times[a]),
                    "attention_share": paired_ratio(times, a, b)}
        rows.append(row)
    return {"geometry": g.name or str(g), "grid": f"{g.T}x{g.H}x{g.W}", "L": g.L, "model": config.name,
            "rows": rows, "modeled": compare_with_model(rows, modeled_block(g, sizes, config)),
            "clocks": clocks.summary()}


def modeled_block(geometry, sizes: Sizes, model: ModelConfig | None = None) -> dict:
    """What :mod:`svgtpu.costmodel` predicts for this block (``sizes.block``, or ``model``) on an H200 (one chip),
    or the cost model's refusal (:class:`~svgtpu.errors.BadInput`: a shape it has no rates for); anything else is a
    bug and raises."""
    from svgtpu import costmodel
    try:
        setup = costmodel.calibrated_setup(model or sizes.block, geometry, "h200", chips=1, steps=sizes.steps,
                                           block_q=sizes.block_q, block_kv=sizes.block_kv, kept=sizes.kept)
    except BadInput as error:  # a setting the cost model refuses (its reason recorded); its bugs raise
        return {"unavailable": reason(error)}
    breakdown = costmodel.forward_breakdown(setup)
    total = sum(breakdown.values())
    return {"attention_share_dense": breakdown["self_attention"] / total,
            "block_s_dense": total / setup.model.layers,
            "dit_speedup_svg_aligned": (costmodel.dit_seconds(setup, "dense", True)
                                        / costmodel.dit_seconds(setup, "svg-aligned", True)),
            "dense_steps": setup.dense_steps, "dense_layers": setup.dense_layers,
            "provenance": setup.provenance}


def compare_with_model(rows: list[dict], modeled: dict) -> dict:
    """``modeled`` plus the model's error on the dense self-attention share (C2): its share over the one
    measured with the first dense attention that ran (cuDNN before ours)."""
    dense = next((r for r in rows if r["attention"].startswith("dense") and r["status"] == "ok"), None)
    if dense is None or "attention_share_dense" not in modeled:
        return modeled
    return modeled | {"measured_with": dense["attention"],
                      "share_modeled_over_measured": modeled["attention_share_dense"] / dense["attention_share"]}


# -- 4. end to end, extrapolated ----------------------------------------------------------------

def extrapolate(section: dict, sizes: Sizes) -> dict | None:
    """Seconds of one video from one block section's time (``section``: its result): ``layers x steps x 2``
    passes (CFG), dense and with SVG's schedule (the cost model's dense warm-up steps and layers).  ``None``
    without the timings."""
    rows = {r["attention"]: r for r in section["rows"] if r["status"] == "ok"}
    dense = rows.get("dense-cudnn") or rows.get("dense-ours")
    sparse = rows.get("svg-aligned-ours")
    if dense is None:
        return None
    layers, steps, passes = section_model(sizes, section.get("model")).layers, sizes.steps, 2
    out = {"geometry": section["geometry"], "model": section.get("model", sizes.block.name),
           "dense_kernel": "cudnn" if "dense-cudnn" in rows else "ours",
           "dense_s": passes * steps * layers * dense["block_s"], "label": "extrapolated-from-measured-block"}
    schedule = section["modeled"]
    if sparse is not None and "dense_steps" in schedule:
        dense_calls, sparse_calls = layer_calls(steps, layers, schedule["dense_steps"], schedule["dense_layers"])
        out["svg_s"] = passes * (dense_calls * dense["block_s"] + sparse_calls * sparse["block_s"])
        out["speedup"] = out["dense_s"] / out["svg_s"]
    return out


def attention_exponents(blocks: list[dict], model: str | None = None) -> dict[str, float]:
    """C5 on the device: per attention kind, the least-squares slope of log(self-attention seconds)
    against log(L) over the block resolutions it ran at (at least two; ``model``'s blocks only, where given);
    2 is quadratic."""
    out = {}
    blocks = [b for b in blocks if model is None or b.get("model", model) == model]
    kinds = {r["attention"] for b in blocks for r in b["rows"]}
    for kind in sorted(kinds):
        points = [(b["L"], r["attention_s"]) for b in blocks for r in b["rows"]
                  if r["attention"] == kind and r["status"] == "ok"]
        if len(points) >= 2:
            out[kind] = float(np.polyfit(np.log([p[0] for p in points]), np.log([p[1] for p in points]), 1)[0])
    return out


# -- the run -------------------------------------------------------------------------------------

#: The sections ``--sections`` may name (the check always runs before the others: nothing unchecked is timed).
SECTIONS = ("check", "attention", "block")


def select(sizes: Sizes, sections=None, resolutions=None, variants=None) -> Sizes:
    """``sizes`` with only the named ``sections`` (of :data:`SECTIONS`) and attention / block ``resolutions``
    (geometry names of its sections), the check kept first whenever anything else runs, and the attention
    ``variants`` named (of :func:`variant_names`; ``["all"]``: every one), one clear line for a name it does not
    have."""
    if variants is not None:
        known = variant_names(sizes)
        unknown = [x for x in variants if x not in known and x != "all"]
        if unknown or not variants or ("all" in variants and len(variants) > 1):
            raise BadInput(f"variants must be 'all' or a comma-separated list of {', '.join(known)}; got "
                           f"{','.join(variants)!r}")
        sizes = dataclasses.replace(sizes, variants=None if variants == ["all"] else tuple(variants))
    named = {geometry for kind, geometry, _, _ in sizes.sections if kind != "check"}
    for value, allowed, what in ((sections, SECTIONS, "sections"), (resolutions, sorted(named), "resolution")):
        unknown = [x for x in (value or ()) if x not in allowed]
        if unknown or (value is not None and not value):
            raise BadInput(f"{what} must be a comma-separated list of {', '.join(allowed)}, got {','.join(value)!r}")
    kept = tuple(s for s in sizes.sections if s[0] == "check" or (
        (sections is None or s[0] in sections) and (resolutions is None or s[1] in resolutions)))
    if not any(s[0] != "check" for s in kept) and sections is not None and set(sections) != {"check"}:
        raise BadInput(f"no {'/'.join(x for x in sections if x != 'check')} section at resolution "
                       f"{','.join(resolutions or ())}: this profile has "
                       + ", ".join(f"{k} {g}" for k, g, _, _ in sizes.sections if k != "check"))
    return dataclasses.replace(sizes, sections=kept)


def checked_names(sizes: Sizes) -> set[str] | None:
    """The variants the check must cover: all the attention sections time (``None``: every one), else those the
    block sections' attentions stand on."""
    kinds = {kind for kind, *_ in sizes.sections}
    if "attention" in kinds:
        return set(sizes.variants) if sizes.variants is not None else None
    return {BLOCK_CHECKS[n] for n in sizes.block_attentions} if "block" in kinds else None


def run(smoke: bool = False, budget_s: float | None = None, sections=None, resolutions=None, variants=None,
        recorded: list[dict] | None = None, watchdog_s: float | None = None,
        save: Callable[[dict], object] | None = None, started: float | None = None,
        sizes: Sizes | None = None) -> dict:
    """The benchmark (``smoke``: tiny shapes, any backend; ``sections`` / ``resolutions`` / ``variants``: a part of
    it, see :func:`select`; ``recorded``: the runs to choose our Triton launch settings from, default the committed
    ones: :func:`svgtpu.bench.gpu_results.triton_launch`; ``watchdog_s``, ``save``: a run still going that many
    seconds after ``started`` (``time.monotonic()``, default now) is saved as far as it got, ``save(result)`` with
    the step it hung at under ``unfinished``, and the process ends: :class:`~svgtpu.bench.gpu_timing.Watchdog`;
    ``sizes``: a profile of one's own instead of :data:`FULL` / :data:`SMOKE`); returns the result dict."""
    started = time.monotonic() if started is None else started
    sizes = select(sizes or (SMOKE if smoke else FULL), sections, resolutions, variants)
    if budget_s is not None:
        sizes = dataclasses.replace(sizes, budget_s=check_budget(
            budget_s, f"the default, {FULL.budget_s:.0f}, ends within 5 minutes"))
    if not smoke and jax.default_backend() != "gpu":
        raise BadInput(f"bench gpu needs a GPU backend (jax.default_backend() is {jax.default_backend()!r}); "
                       f"use --smoke to run the same code at tiny shapes here")
    launch = triton_launch(recorded)
    if not smoke:
        sizes = dataclasses.replace(sizes, launch=launch["settings"])
    interpret = jax.default_backend() != "gpu"
    budget = Budget(sizes.budget_s)
    result = {"provenance": provenance("measured", interpret=resolve_interpret(None)), "device": jax.devices()[0].device_kind,
              "backend": jax.default_backend(), "jax": jax.__version__, "smoke": smoke, "profile": sizes.profile,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              **source_commit(), "sections": [section_label(s) for s in sizes.sections],
              "budget_s": sizes.budget_s, "block_q": sizes.block_q, "block_kv": sizes.block_kv,
              "kept": sizes.kept, "variants": list(sizes.variants) if sizes.variants is not None else "all",
              "check_s": sizes.check_s, "launch": launch_settings(sizes, launch),
              "attention": [], "block": [], "end_to_end": [], "errors": []}

    def save_so_far(why: str) -> None:
        save(result | {"unfinished": why, "elapsed_s": budget.elapsed(),
                       "attention_exponent": attention_exponents(result["block"], sizes.block.name)})

    watchdog = None if watchdog_s is None or save is None else \
        Watchdog(watchdog_s, save_so_far, end_children, started)
    with watchdog or contextlib.nullcontext():
        sections_in_turn(result, sizes, budget, interpret)
    result["attention_exponent"] = attention_exponents(result["block"], sizes.block.name)
    result["elapsed_s"] = budget.elapsed()
    return result


def section_label(section: tuple) -> str:
    """``"block 720p"``, ``"block 720p wan2.1-1.3b"``: a section in words, its model where it names one."""
    kind, geometry, heads, _ = section
    return f"{kind} {geometry}" + (f" {heads}" if kind == "block" and heads else "")


def sections_in_turn(result: dict, sizes: Sizes, budget: Budget, interpret: bool) -> None:
    """Run ``sizes``' sections in order into ``result`` (a broken section records its error; the others go on)."""
    def guarded(section: str, fn, *args):
        try:
            return fn(*args)
        except Exception as error:  # one broken section must not lose the others' numbers
            result["errors"].append({"section": section, "reason": reason(error),
                                     "traceback": traceback.format_exc(limit=4)})
            return None

    weights = [w for kind, *_, w in sizes.sections if kind != "check"]
    timed = 0   # timing sections begun
    for kind, geometry, heads, _ in tqdm(sizes.sections, desc="bench gpu"):
        if kind == "check":   # the checks are the run's work: only its deadline stops them
            budget.section(1.0)
            result["check"] = guarded("check", isolated_check if sizes.isolate else check_variants, geometry,
                                      heads, sizes, budget, interpret, checked_names(sizes))
            continue
        budget.section(weights[timed] / sum(weights[timed:]))   # its share of what the sections before it left
        timed += 1
        if kind == "attention":
            found = guarded(f"attention {geometry}", bench_attention, geometry, heads, sizes, budget, interpret,
                            result.get("check"))
            if found:
                result["attention"].append(found)
        else:
            found = guarded(section_label((kind, geometry, heads, None)), bench_block, geometry, sizes, budget,
                            result.get("check"), heads)
            if found:
                result["block"].append(found)
                e2e = extrapolate(found, sizes)
                if e2e:
                    result["end_to_end"].append(e2e)


__all__ = ["run", "write", "gpu_rows", "format_result", "FULL", "SMOKE", "Sizes", "WAN14B", "init_block",
           "block_inputs", "block_attentions", "Variant", "check_variants", "check_verdict", "attention_variants",
           "select", "SECTIONS", "BLOCK_CHECKS", "bench_attention", "bench_block", "modeled_block",
           "compare_with_model", "extrapolate", "section_model", "section_label", "WAN1_3B", "attention_exponents",
           "svg_masks", "row_plan_for", "isolated_check",
           "spot_checks", "SPOT_ROWS", "HEADLINE", "VERSUS", "DEFAULT_VARIANTS", "variant_names", "launch_settings",
           "mosaic_config", "preflight", "check_child", "CHILD", "OURS_TRITON", "OURS_MGPU", "PEER_NAMES", "PER_HEAD", "triton_name", "mgpu_name",
           "tuning_name", "JAX_MOSAIC_TUNING"]
