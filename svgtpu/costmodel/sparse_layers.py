"""Sparse layers priced from a TPU: MaxDiffusion's measured SVG runs on v6e-8, term by term.

A denoising run of :class:`AttentionLayout` (MaxDiffusion's attention configuration for eight devices,
``docs/svg.md``: data 2 x context 4, the two CFG passes side by side) is the DiT's other ops, one dense
call per (step, layer) outside the policy's windows and one sparse call inside them
(:meth:`svgtpu.costmodel.policy.Policy.calls`).  Each call is priced per chip in named terms a reader can
argue with (:data:`TERMS`):

- ``dense kernel``: MaxDiffusion's fixed-M splash (``block_q`` 6400, ``block_kv`` 2048): a fixed row maximum
  instead of the online one, priced as our kernel's compiled fixed-maximum full body at that tile
  (``KernelConfig.fixed_max``, the ``fixed_max`` rows of the compiled tile table: its per-step code, its row init
  and finish, and the pass that computes the maxima, ``docs/fixed_max.md``), at the fixed-M family's realized over
  static time (:mod:`~svgtpu.costmodel.realized`; every other attention call at ``Efficiency.attention``, the
  online-softmax family's);
- ``sparse kernel``: the kept tiles of the band + anchor mask after tile rounding (``snap``) at the SVG tile
  (3328 x 2816, ``block_kv_compute`` 256), each at the compiled full body per score of our online-softmax
  kernel (the closest compiled kernel: same update, same ``block_kv_compute``), tiles touching the sequence's
  padded end at the compiled masked body, every step its compiled overhead, every row its init and finish;
- ``profiling``: the sampled queries against all keys (:func:`svgtpu.costmodel.pipeline.svg_overhead_seconds`);
- ``placement``: temporal-head placement and its inverse after the Ulysses exchange, on every local head
  (MaxDiffusion selects the permuted or the original layout with ``where``): :data:`PLACEMENT_PASSES` HBM
  passes of Q, K, V and O;
- ``tail merge``: the padding-masked second call's output merged by log-sum-exp into the main one,
  :data:`MERGE_PASSES` HBM passes of every query row of every local head (both partials write a whole output and the
  merge reads and writes it all, ``docs/plausibility.md``);
- ``idle grid steps``: the main call's grid is rows x the longest row, so short rows take steps that skip
  their body, each at the compiled cost of a Splash grid step that skips its body;
- ``padding`` (dense calls): MaxDiffusion pads the kernel's query, keys and values to multiples of its tile after the
  all-to-all and slices the padded output back (:func:`padding_seconds`), each copy read and written once;
- ``weight gather`` (every pass, dense or sparse): the all-gather of the layer weights MaxDiffusion shards over the
  context group (:data:`~svgtpu.costmodel.policy.WEIGHT_SHARDING`), priced as the model prices a pass's
  (:func:`~svgtpu.costmodel.pipeline.weight_gather_seconds`), not overlapped with compute;
- ``outside blocks`` (every pass and step): the condition embedder, the guidance and the scheduler's update
  (:func:`outside_blocks`, from MaxDiffusion's code), at the roofline;
- ``collective``: Ulysses4's four all-to-alls over the context group for sparse calls instead of Ulysses2's
  for dense ones, on the slice's physical layout (the context axis of a 2 x 4 v6e-8 along its four-chip side);
  the ring's K/V exchange of dense calls overlaps its compute (the ring's design) and is not counted.

Everything is computed from the compiled tile table at run time (never typed).  What the static schedule
cannot see of the sparse kernel is one number, **the sparse stretch** (``sparse_stretch``): the realized over
the static time of sparse-kernel tiles relative to the dense kernel's, fitted to the moderate run's measured
speedup (:func:`svgtpu.costmodel.validate.fit_sparse_stretch`), checked on conservative and aggressive.
:func:`gap_terms` switches the terms on one at a time, from the static schedule to the calibrated model.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from svgtpu.costmodel import parallel
from svgtpu.costmodel.pipeline import Setup, other_ops_seconds, stage_seconds, svg_overhead_seconds, weight_gather_seconds
from svgtpu.costmodel.roofline import elementwise_op, matmul_op, op_seconds
from svgtpu.costmodel.policy import Policy, band_multiplier
from svgtpu.costmodel.realized import call_cycles, fixed_row, online_row, realized_over_static
from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, ceil_div
from svgtpu.recipes import MAXDIFFUSION_FIXED_M_TILE, MAXDIFFUSION_SVG_TILE

#: HBM passes of each of Q, K, V, O per local head for placement and its inverse: a fused gather + select
#: reads the tensor once and writes it once (MaxDiffusion's ``svg_placement_permute``: transpose, then
#: ``jnp.where`` over every local head).
PLACEMENT_PASSES = 2
#: HBM passes of the merged rows: read the main and the tail outputs, write the merged one.  Every query row of every
#: local head: each partial writes a whole ``[heads, head_dim, orig_q_seq_len]`` output (``_make_partial``,
#: ``src/maxdiffusion/kernels/custom_svg_static_range_attention.py`` at db8c0cd4) and the merge runs over both
#: (``make_svg_balanced_rounding_mha``, ``custom_svg_balanced_rounding_attention.py`` at 3b9f3255).
MERGE_PASSES = 3
#: The kernel the compiled table prices MaxDiffusion's online-softmax SVG kernel with, and the one whose
#: skipped grid step prices an idle step (Splash's grid, which MaxDiffusion's kernel keeps).
SPARSE_PROXY, IDLE_PROXY = "ours", "splash"
TERMS = ("dense kernel", "padding", "sparse kernel", "profiling", "placement", "tail merge", "idle grid steps",
         "collective")


@dataclasses.dataclass(frozen=True)
class AttentionLayout:
    """MaxDiffusion's attention configuration for eight devices (``docs/svg.md``): dense fixed-M tiles,
    SVG tiles, the data x context mesh and the Ulysses shards of dense and sparse calls.  Not a
    :class:`~svgtpu.setting.Setting` (no model, resolution or mask density): :func:`run_setup` writes its chips and
    SVG tile into the setup's setting."""

    dense_block_q: int = MAXDIFFUSION_FIXED_M_TILE.block_q
    dense_block_kv: int = MAXDIFFUSION_FIXED_M_TILE.block_kv
    sparse_block_q: int = MAXDIFFUSION_SVG_TILE.block_q
    sparse_block_kv: int = MAXDIFFUSION_SVG_TILE.block_kv
    sparse_block_kv_compute: int = MAXDIFFUSION_SVG_TILE.block_kv_compute
    data: int = 2
    context: int = 4
    dense_ulysses: int = 2
    sparse_ulysses: int = 4            # SVG exchanges over the whole context axis
    dense_kernel: str = "fixed-m"      # fixed-m, or "ours": price the dense calls as the sparse kernel's body

    def __post_init__(self):
        for field in ("dense_block_q", "dense_block_kv", "sparse_block_q", "sparse_block_kv",
                      "sparse_block_kv_compute", "data", "context", "dense_ulysses", "sparse_ulysses"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise BadInput(f"{field} must be a positive integer, got {value!r}")
        if self.context % self.dense_ulysses or self.context % self.sparse_ulysses:
            raise BadInput(f"ulysses shards must divide the context axis {self.context}, got "
                           f"{self.dense_ulysses} and {self.sparse_ulysses}")
        if self.dense_kernel not in ("fixed-m", "ours"):
            raise BadInput(f"dense_kernel must be fixed-m or ours, got {self.dense_kernel!r}")

    @property
    def chips(self) -> int:
        return self.data * self.context


@dataclasses.dataclass(frozen=True)
class Switches:
    """Which terms are on (:func:`gap_terms` turns them on one at a time) and the sparse stretch."""


    fixed_m: bool = True
    fixed_costs: bool = True           # padding, profiling, placement, tail merge
    idle_steps: bool = True
    collective: bool = True
    sparse_stretch: float | None = None   # None: the setup's (Setup.sparse_stretch)


def _per_score(setup: Setup, kernel: str, body: str) -> float:
    """Cycles per score of ``kernel``'s compiled ``body`` at the setup's production tile row."""
    row = _row(setup, kernel)
    value = {"full": row.full, "masked": row.masked_body(False)}[body]
    return value / (row.block_q * row.block_kv)


def _row(setup: Setup, kernel: str):
    """``kernel``'s compiled row at the production tile for the setup's device (or one clear line)."""
    return online_row(setup.compiled, setup.device.name, kernel, setup.model.head_dim, setup.dtype)


def _a2a(setup: Setup, layout: AttentionLayout, n: int) -> float:
    """Four Ulysses all-to-alls (Q, K, V in, O out) among ``n`` chips of the context group."""
    if n == 1:
        return 0.0
    shard = setup.geometry.L / layout.context * setup.model.dim * setup.dtype_bytes
    # the context axis runs along the slice's long side (data 2 x context 4 on a 2 x 4 v6e-8): a line of chips
    return parallel.ULYSSES_ALL_TO_ALLS * parallel.all_to_all_seconds(shard, n, setup.device, setup.efficiency,
                                                                      shape=(1, n))


def dense_call(setup: Setup, layout: AttentionLayout, switches: Switches = Switches()) -> dict[str, float]:
    """One dense attention call on one chip: its kernel and its collective."""
    L, d = setup.geometry.L, setup.model.head_dim
    bq, bkv = layout.dense_block_q, layout.dense_block_kv
    ring = layout.context // layout.dense_ulysses
    heads = setup.model.heads // layout.dense_ulysses          # each device: these heads over L / ring queries
    family = "fixed-m" if switches.fixed_m and layout.dense_kernel == "fixed-m" else "online"
    cycles = call_cycles(setup.compiled, setup.device.name, family, Tile(bq, bkv), ceil_div(L, ring), L, d, setup.dtype)
    if family == "fixed-m":
        # the pass (per head, compiled over row.L tokens) runs on the chip's L / ring queries and keys
        row = fixed_row(setup.compiled, setup.device.name, Tile(bq, bkv), d, setup.dtype)
        cycles += row.pass_cycles * ceil_div(L, ring) / row.L
    # Efficiency.attention is the online-softmax kernels' realized over static time; a fixed-M call realizes its own
    attention = setup.efficiency.attention * (realized_over_static(family, setup.compiled)
                                              / realized_over_static("online", setup.compiled))
    kernel = heads * cycles / setup.device.clock_hz / attention
    return {"kernel": kernel, "padding": padding_seconds(setup, layout) if switches.fixed_costs else 0.0,
            "collective": _a2a(setup, layout, layout.dense_ulysses) if switches.collective else 0.0}


def padding_seconds(setup: Setup, layout: AttentionLayout) -> float:
    """One dense call's copies around its kernel on one chip: MaxDiffusion's ``_ulysses_ring_custom_attention``
    (``src/maxdiffusion/models/attention_flax.py`` at 7cfb8801) pads the query (after ``query * LOG2E``), the keys
    and the values of the ring shard to multiples of ``block_q`` and ``block_kv`` (``_pad_data_for_flash``, a copy
    only where the shard is not a multiple) and slices the kernel's padded output back before the all-to-all back:
    each copy read and written once (a copy beside a collective, which XLA does not fuse into; the range,
    docs/plausibility.md)."""
    shard = ceil_div(setup.geometry.L, layout.context // layout.dense_ulysses)
    q = ceil_div(shard, layout.dense_block_q) * layout.dense_block_q
    kv = ceil_div(shard, layout.dense_block_kv) * layout.dense_block_kv
    # rows read + written: the query (shard in, q out) and the output (its shard rows out of q, shard back); the
    # keys and the values (shard in, kv out)
    rows = (q + shard + 2 * shard if q != shard else 0) + (2 * (shard + kv) if kv != shard else 0)
    heads = setup.model.heads // layout.dense_ulysses
    return heads * rows * setup.model.head_dim * setup.dtype_bytes / (setup.device.hbm_bandwidth
                                                                      * setup.efficiency.memory)


def sparse_tiles(setup: Setup, layout: AttentionLayout, multiplier: float) -> dict:
    """The SVG call's tiles: kept tiles inside the sequence (main call), tiles touching its padded end (tail
    call) and the main call's grid (rows x longest row)."""
    from svgtpu.masks.core import align, svg_mask
    from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL, classify

    tile = Tile(layout.sparse_block_q, layout.sparse_block_kv)
    mask = align(svg_mask(setup.geometry, multiplier), tile, "snap")
    kinds = classify(mask, tile).kinds
    full = int(np.count_nonzero(kinds == FULL))
    tail = int(np.count_nonzero(kinds == PARTIAL))
    longest = int(np.count_nonzero(kinds == FULL, axis=1).max())
    return {"full": full, "tail": tail, "rows": kinds.shape[0], "longest_row": longest,
            "idle": kinds.shape[0] * longest - full, "density": mask.density(),
            "tile_density": float(np.count_nonzero(kinds != EMPTY)) / kinds.size}


def sparse_call(setup: Setup, layout: AttentionLayout, policy: Policy, density: float,
                switches: Switches = Switches()) -> dict[str, float]:
    """One sparse attention call on one chip, term by term (module doc)."""
    L, d, b = setup.geometry.L, setup.model.head_dim, setup.dtype_bytes
    heads = setup.model.heads // layout.sparse_ulysses
    t = sparse_tiles(setup, layout, band_multiplier(setup.geometry, density, policy.band_rule))
    bq, bkv = layout.sparse_block_q, layout.sparse_block_kv
    row, idle_row = _row(setup, SPARSE_PROXY), _row(setup, IDLE_PROXY)
    clock, eff = setup.device.clock_hz, setup.efficiency
    cycles = (t["full"] * _per_score(setup, SPARSE_PROXY, "full") * bq * bkv
              + t["tail"] * _per_score(setup, SPARSE_PROXY, "masked") * bq * bkv
              + (t["full"] + t["tail"]) * row.step_overhead + 2 * t["rows"] * (row.init_finish or 0.0))
    stretch = setup.sparse_stretch if switches.sparse_stretch is None else switches.sparse_stretch
    out = {"kernel": stretch * heads * cycles / clock / eff.attention}
    hbm = setup.device.hbm_bandwidth * eff.memory
    placed = setup.replace(chips=layout.context, cfg_split=False, profile_rows=policy.profile_queries)
    out["profiling"] = svg_overhead_seconds(placed)["profiling"] if switches.fixed_costs else 0.0
    out["placement"] = heads * 4 * PLACEMENT_PASSES * L * d * b / hbm if switches.fixed_costs else 0.0
    merge = heads * MERGE_PASSES * L * d * b / hbm if t["tail"] else 0.0   # no tail tile: no second partial
    out["tail_merge"] = merge if switches.fixed_costs else 0.0
    idle = t["idle"] * ((idle_row.empty_step or 0.0) + idle_row.step_overhead)
    out["idle_steps"] = heads * idle / clock / eff.attention if switches.idle_steps else 0.0
    out["collective"] = _a2a(setup, layout, layout.sparse_ulysses) if switches.collective else 0.0
    return out


#: Reads and writes of the latents in a step outside the blocks: classifier-free guidance (read the two
#: predictions, write one) and the UniPC update at MaxDiffusion's solver order 2 (read the sample, the converted
#: output and the two stored outputs, write the sample and the stored output;
#: :data:`~svgtpu.costmodel.policy.SCHEDULER`'s ``FlaxUniPCMultistepScheduler``), a count of the arrays the code
#: touches.
STEP_READS, STEP_WRITES = 2 + 4, 1 + 2
#: Vector ops per latent element of those updates (a rough count: a handful of multiply-adds each).
STEP_VECTOR_OPS = 12


def outside_blocks(setup: Setup) -> dict[str, float]:
    """Seconds of the work of one pass and one step outside the blocks (patch embedding and head are priced with the
    other ops), at the roofline on one chip (each chip running it whole: an upper bound), from MaxDiffusion's code
    at 7cfb8801: per pass its condition embedder (``WanTimeTextImageEmbedding`` in ``transformer_wan.py``: the
    timestep's sinusoid through a two-layer MLP to the width and a projection to six times it; the text embedder's
    two layers over the text tokens), per step the guidance and the scheduler's update of the latents
    (:data:`STEP_READS`, :data:`STEP_WRITES`, float32).  Not a term: the Wan 2.2 expert switch (``wan_pipeline_2_2.py``, ``run_inference_2_2``:
    both experts' weights are resident and a step picks one in Python; the published times are warm runs) and the
    cross-attention K/V cache (``use_kv_cache: False`` in ``base_wan_27b.yml``: cross-attention's K/V projections run
    in every pass, as the other ops price them)."""
    m, b = setup.model, setup.dtype_bytes
    embedder = [matmul_op("time_embed_1", 1, m.freq_dim, m.dim, b), matmul_op("time_embed_2", 1, m.dim, m.dim, b),
                matmul_op("time_proj", 1, m.dim, 6 * m.dim, b),
                matmul_op("text_embed_1", m.text_len, m.text_dim, m.dim, b),
                matmul_op("text_embed_2", m.text_len, m.dim, m.dim, b)]
    latents = setup.geometry.L * m.patch_in
    step = elementwise_op("guidance_and_scheduler", latents, STEP_READS, STEP_WRITES, STEP_VECTOR_OPS, 0, 4)
    return {"per_pass": sum(op_seconds(op, setup.device, setup.efficiency) for op in embedder),
            "per_step": op_seconds(step, setup.device, setup.efficiency)}


def run_seconds(setup: Setup, layout: AttentionLayout, policy: Policy | None,
                switches: Switches = Switches()) -> dict:
    """Seconds of one denoising run on the slice (dense when ``policy`` is ``None``): the other ops of every
    pass (:func:`~svgtpu.costmodel.pipeline.other_ops_seconds`: from the compiled block where one prices the run), the all-gather of its sharded weights (:func:`~svgtpu.costmodel.pipeline.weight_gather_seconds`), the work
    outside the blocks (:func:`outside_blocks`), host
    time, and the attention calls (one CFG pass per data-parallel group)."""
    other = sum(other_ops_seconds(setup).values())
    gather = weight_gather_seconds(setup)
    host = stage_seconds(setup)["host"]
    passes = math.ceil(setup.passes / layout.data)             # CFG passes one data group runs in turn
    layers, steps = setup.model.layers, setup.steps
    dense = dense_call(setup, layout, switches)
    dense_total = sum(dense.values())
    if policy is None:
        calls = {"dense": steps * layers, "sparse": {}}
    else:
        calls = policy.calls(steps, layers)
    outside = outside_blocks(setup)
    terms = {"other": passes * steps * other, "weight_gather": passes * steps * gather, "host": host,
             "outside_blocks": steps * (passes * outside["per_pass"] + outside["per_step"]),
             "dense_calls": passes * calls["dense"] * dense_total, "sparse": {}}
    for density, n in calls["sparse"].items():
        for name, seconds in sparse_call(setup, layout, policy, density, switches).items():
            terms["sparse"][name] = terms["sparse"].get(name, 0.0) + passes * n * seconds
    total = terms["other"] + terms["weight_gather"] + terms["host"] + terms["outside_blocks"] + terms["dense_calls"] + \
        sum(terms["sparse"].values())
    return {"seconds": total, "terms": terms, "calls": {"dense": calls["dense"],
                                                        "sparse": {str(k): v for k, v in calls["sparse"].items()}},
            "dense_call": dense}


def run_setup(setup: Setup, layout: AttentionLayout) -> Setup:
    """``setup`` on the run's slice: its chips, CFG passes side by side when the data axis is 2, Ulysses over
    the context group for the other ops' sharding, the host the only stage timed (denoising only), and the
    weights sharded over the context group whatever the memory (MaxDiffusion's ``logical_axis_rules`` shard
    ``embed`` over ``context``: :data:`~svgtpu.costmodel.policy.WEIGHT_SHARDING`), gathered every pass; the
    attention collectives are the calls' own (:func:`dense_call`, :func:`sparse_call`)."""
    return setup.replace(chips=layout.chips, cfg_split=layout.data == 2 and setup.cfg,
                         parts=frozenset({"host", "weight_gather"}), weights="sharded",
                         block_q=layout.sparse_block_q, block_kv=layout.sparse_block_kv)


def speedup(setup: Setup, layout: AttentionLayout, policy: Policy, switches: Switches = Switches()) -> dict:
    """Modeled dense and SVG denoising and their ratio for ``policy``."""
    dense = run_seconds(setup, layout, None, switches)
    svg = run_seconds(setup, layout, policy, switches)
    return {"dense_seconds": dense["seconds"], "svg_seconds": svg["seconds"],
            "speedup": dense["seconds"] / svg["seconds"], "dense": dense, "svg": svg}


#: The order the terms are switched on in, from the static schedule (our compiled kernel for dense and
#: sparse calls, no per-call cost, no idle step, no collective change, stretch 1) to the calibrated model.
GAP_ORDER = (("dense kernel (fixed-M)", "fixed_m"),
             ("fixed per-call costs (padding, profiling, placement, tail merge)", "fixed_costs"),
             ("idle grid steps", "idle_steps"), ("collective change (Ulysses4 vs Ring2/Ulysses2)", "collective"),
             ("sparse stretch", "sparse_stretch"))


def gap_terms(setup: Setup, layout: AttentionLayout, policy: Policy, stretch: float, measured: float) -> dict:
    """Each term's share of the gap between the static schedule's speedup and ``measured``: the terms
    switched on in :data:`GAP_ORDER`, each share its change of ``log(speedup)`` over
    ``log(static / measured)``; the fitted stretch last (it closes the gap on the calibration run)."""
    on = Switches(fixed_m=False, fixed_costs=False, idle_steps=False, collective=False, sparse_stretch=1.0)
    static = speedup(setup, layout, policy, on)["speedup"]
    rows, previous = [], static
    gap = math.log(static / measured)
    for name, field in GAP_ORDER:
        on = dataclasses.replace(on, **{field: stretch if field == "sparse_stretch" else True})
        now = speedup(setup, layout, policy, on)["speedup"]
        rows.append({"term": name, "speedup_after": now,
                     "share_of_gap": math.log(previous / now) / gap if gap else None})
        previous = now
    return {"static_speedup": static, "measured_speedup": measured, "calibrated_speedup": previous, "terms": rows,
            "order": "terms switched on one at a time in this order; share = change of log(speedup) / "
                     "log(static / measured)"}


def attention_layout(config) -> AttentionLayout:
    """The :class:`AttentionLayout` a MaxDiffusion config's attention keys give (``flash_block_sizes``,
    ``svg_flash_block_sizes``, ``ici_data_parallelism``, ``ici_context_parallelism``, ``ulysses_shards``); a key
    it lacks keeps the docs' example for eight devices."""
    fields = {}
    for key, prefix in (("flash_block_sizes", "dense_"), ("svg_flash_block_sizes", "sparse_")):
        blocks = config.get(key) or {}
        if not isinstance(blocks, dict):
            raise BadInput(f"{key} must be a mapping of block sizes, got {blocks!r}")
        for name in ("block_q", "block_kv") + (("block_kv_compute",) if prefix == "sparse_" else ()):
            if name in blocks:
                fields[prefix + name] = blocks[name]
    for key, field in (("ici_data_parallelism", "data"), ("ici_context_parallelism", "context"),
                       ("ulysses_shards", "dense_ulysses")):
        if config.get(key) not in (None, -1):
            fields[field] = config[key]
    if "context" in fields:
        fields["sparse_ulysses"] = fields["context"]   # SVG exchanges over the whole context axis
    return AttentionLayout(**fields)


__all__ = ["GAP_ORDER", "IDLE_PROXY", "MERGE_PASSES", "PLACEMENT_PASSES", "AttentionLayout",
           "SPARSE_PROXY", "STEP_READS", "STEP_WRITES", "STEP_VECTOR_OPS", "Switches", "TERMS", "dense_call", "outside_blocks", "gap_terms", "padding_seconds", "run_seconds", "attention_layout", "run_setup",
           "sparse_call", "sparse_tiles", "speedup"]
