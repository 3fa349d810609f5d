"""Our block-sparse SVG attention for Hopper GPUs in Pallas' Mosaic GPU backend: warp-specialised, TMA, wgmma.

**Not yet run on a GPU** (no H100/H200 session has run it): :func:`mosaic_gpu_attention` is the kernel as written,
interpreted and lowered here; it is not the default (:func:`svgtpu.kernels.api.default_implementation` keeps
Triton) and not called done until a measured run has checked it against float64 (``svgtpu bench gpu`` checks
every variant before it times it) and timed it.  What runs on a CPU is in ``tests/test_mosaic_gpu.py``.

**What it walks.**  No tile table: each program computes its q-tile row's kept kv tiles from the row index
(:func:`svgtpu.kernels.row_ranges.row_steps`: the sink's tiles, then the band's past them, at most two contiguous
ranges), so it visits only kept tiles.  A full tile takes the mask-free path; a partial one the band + sink test
on iotas (and the padded keys); a row without a kept key writes zeros.  One program is one plan row
(``block_q x block_kv`` plan tiles, 128 x 128 by default, the unit the mask is classified in): its ``consumers``
warpgroups hold 64 query rows each (the wgmma accumulator's unit), so both walk the same kv tiles and take the same
number of steps (no flush loop for a consumer that finishes early).

**How a program runs** (FlashAttention-3's design, as JAX's ``attention_mgpu.py`` and the open Hopper Splash pull
request 35114 read it; our own code).  Warpgroup ``consumers`` is the *producer*: it gives up registers
(``set_max_registers``: :data:`PRODUCER_REGISTERS`, the consumers take :data:`CONSUMER_REGISTERS`) and only issues
TMA copies of the walk's K and V tiles into ``stages`` shared-memory slots, refilling a slot's K as soon as every
consumer has released that K (after its ``Q K^T``) and its V once released after ``P V``: separate "free"
mbarriers for K and V.  Each *consumer* copies its 64 query rows once, then per step: wgmma ``S = Q K^T``, releases
K, applies the band test where the tile is partial, the base-2 online softmax with the scale folded into one
multiply-add (``exp2(s * c - m)``, ``c = sm_scale log2 e``, ``m`` kept scaled), rescales its accumulator in place
and has wgmma add ``P V`` into it, waiting for the next step's K while that runs, and releases V.  With two
consumers a "turn" mbarrier makes them ping-pong: one's ``Q K^T`` and ``P V`` issue while the other runs its
softmax, so the tensor cores never wait for the exponentials.  ``approx_math``: the GPU's approximate ``exp2`` and
reciprocal (``ex2.approx``), as the reference kernel compiles.

**Masked scores** are finite, as in the TPU kernel: a masked raw score is :data:`MASK_VALUE` (divided by ``c``
where ``c > 1``), so a row's scaled maximum is never ``-inf`` and ``exp2`` of a masked score under any real maximum
is 0; a row whose maximum never rose above the masked score's (:func:`masked_score`) is written as zeros.
Shared memory is the inputs' dtype (bf16 or f16; the reference hard-codes f16), ``L`` any length (padded to the
tile, padded keys masked).

**What the interpreter runs** (JAX's GPU interpreter, ``InterpretGPUParams``): the three or two warpgroups as
threads, every TMA copy, every mbarrier (the interpreter checks that each waiting thread sees every phase), the
ping-pong, the walk, the softmax, the stores.  What it cannot run, so the interpreted body replaces: ``wgmma``
with a transposed shared-memory operand (``Q K^T``) or a register operand (``P V``), and ``pl.run_state`` (the
in-place accumulator): both products are plain dots of the same shared-memory slots, the rescale a multiply before
the add.  ``set_max_registers`` is a no-op there; ``approx_math`` is ignored (exact ``exp2``).

**jax versions.**  Written for jax 0.10.2 (the project's pin: lowered and interpreted here) and the GPU machine's
0.11.2: ``plgpu.kernel`` gets its output and scratch types by whichever keywords the installed jax names
(``out_type`` / ``scratch_types``, else ``out_shape`` / ``scratch_shapes``); every ``plgpu`` name used is in jax's
source of the 0.11 line (read at its 0.11.1 development snapshot: 0.11.2 itself is not installable here).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from svgtpu.errors import BadInput
from svgtpu.kernels.block_sparse import MASK_VALUE
from svgtpu.kernels.common import check_inputs, check_sm_scale, pad_qkv
from svgtpu.kernels.row_ranges import KeyBand, allowed, row_steps, walk_band

#: Query rows one consumer warpgroup holds: the wgmma accumulator's 64-row unit.
PROGRAM_ROWS = 64
DEFAULT_STAGES = 2
DTYPES = ("bfloat16", "float16")
#: Registers per thread after reallocation: the consumers' (scores, accumulator, softmax) and the producer's (it
#: only issues copies): 2 x 128 x 232 + 128 x 40 = 64,512 of the 65,536 an SM has (JAX's attention_mgpu.py takes
#: the same split).
CONSUMER_REGISTERS, PRODUCER_REGISTERS = 232, 40
#: Shared memory one block may use on Hopper (sm_90): 227 KiB (CUDA C++ Programming Guide, "Technical
#: Specifications per Compute Capability", compute capability 9.0).
SMEM_BYTES = 227 * 1024


@dataclasses.dataclass(frozen=True)
class MosaicConfig:
    """The kernel's launch settings, checked once: ``block_q x block_kv`` plan tiles (multiples of 64; the mask's
    unit), ``stages`` shared-memory slots of the kv stream (1..4), ``consumers`` 64-row consumer warpgroups per
    program (1 or 2, ``consumers x 64`` dividing ``block_q``; ``None``: 2 where it divides, else 1), ``fast_path``
    (full tiles without the mask), ``approx_math`` (approximate ``exp2`` and reciprocal)."""

    block_q: int = 128
    block_kv: int = 128
    stages: int = DEFAULT_STAGES
    consumers: int | None = None
    fast_path: bool = True
    approx_math: bool = True

    def __post_init__(self):
        for name in ("block_q", "block_kv"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value % PROGRAM_ROWS:
                raise BadInput(f"{name} must be a positive multiple of {PROGRAM_ROWS} for mosaic-gpu, got {value!r}")
        if isinstance(self.stages, bool) or not isinstance(self.stages, int) or not 1 <= self.stages <= 4:
            raise BadInput(f"stages must be 1, 2, 3 or 4 (shared-memory slots of the kv stream), got {self.stages!r}")
        if self.consumers is None:
            object.__setattr__(self, "consumers", 2 if self.block_q % (2 * PROGRAM_ROWS) == 0 else 1)
        if self.consumers not in (1, 2) or self.block_q % (self.consumers * PROGRAM_ROWS):
            raise BadInput(f"consumers must be 1 or 2 with consumers x {PROGRAM_ROWS} dividing block_q="
                           f"{self.block_q}, got {self.consumers!r}")
        object.__setattr__(self, "fast_path", bool(self.fast_path))
        object.__setattr__(self, "approx_math", bool(self.approx_math))

    def smem_bytes(self, d: int, itemsize: int) -> int:
        """Shared memory of one program: its consumers' query rows and the K and V slots."""
        return (self.consumers * PROGRAM_ROWS + 2 * self.stages * self.block_kv) * d * itemsize


def masked_score(scale: float) -> tuple[float, float]:
    """``(raw, floor)``: the raw score a masked pair gets, finite, and the scaled maximum at or below which a row has
    seen no allowed key (half the scaled masked score: no real score comes near either)."""
    raw = MASK_VALUE / max(scale, 1.0)
    return raw, 0.5 * float(np.float32(raw) * np.float32(scale))


def _plgpu():
    """JAX's Mosaic GPU Pallas module (imported on use: its import pulls in the CUDA-side lowering)."""
    from jax.experimental.pallas import mosaic_gpu
    return mosaic_gpu


def _kernel(q_gmem, k_gmem, v_gmem, o_gmem, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_free, v_free, *turn,
            band, L, config: MosaicConfig, scale, interpreted):
    plgpu = _plgpu()
    # register layouts are the compiler's business: JAX's GPU interpreter has no rule for them (plain arrays there)
    layout_cast = (lambda x, layout: x) if interpreted else plgpu.layout_cast
    iota = ((lambda dtype, shape, dim, layout: lax.broadcasted_iota(dtype, shape, dim)) if interpreted
            else plgpu.broadcasted_iota)
    i, h, wg = lax.axis_index("q"), lax.axis_index("heads"), lax.axis_index("wg")
    rows, d, stages, block_kv = PROGRAM_ROWS, q_smem.shape[-1], config.stages, config.block_kv
    first_row = i * (config.consumers * rows)
    steps, tile_of, is_full = row_steps(band, first_row // config.block_q, config.block_q, block_kv)
    raw_masked, empty_row = masked_score(scale)
    wgmma = plgpu.Layout.WGMMA

    def kv(t):
        return pl.ds(tile_of(t) * block_kv, block_kv)

    @pl.when(wg == config.consumers)
    def _producer():
        plgpu.set_max_registers(PRODUCER_REGISTERS, action="decrease")
        for s in range(stages):
            @pl.when(s < steps)
            def _first():
                plgpu.copy_gmem_to_smem(k_gmem.at[h, kv(s)], k_smem.at[s], k_bar.at[s])
                plgpu.copy_gmem_to_smem(v_gmem.at[h, kv(s)], v_smem.at[s], v_bar.at[s])

        def refill(t, carry):   # step t's slot gets step t + stages: its K once every consumer released K, V alike
            slot = lax.rem(t, stages)
            plgpu.barrier_wait(k_free.at[slot])
            plgpu.copy_gmem_to_smem(k_gmem.at[h, kv(t + stages)], k_smem.at[slot], k_bar.at[slot])
            plgpu.barrier_wait(v_free.at[slot])
            plgpu.copy_gmem_to_smem(v_gmem.at[h, kv(t + stages)], v_smem.at[slot], v_bar.at[slot])
            return carry

        def drain(t, carry):    # the last steps' releases: every phase of a barrier is waited
            slot = lax.rem(t, stages)
            plgpu.barrier_wait(k_free.at[slot])
            plgpu.barrier_wait(v_free.at[slot])
            return carry
        lax.fori_loop(0, jnp.maximum(steps - stages, 0), refill, 0)
        lax.fori_loop(jnp.maximum(steps - stages, 0), steps, drain, 0)

    @pl.when(wg < config.consumers)
    def _consumer():
        plgpu.set_max_registers(CONSUMER_REGISTERS, action="increase")
        own_rows = first_row + wg * rows
        my_q = q_smem.at[wg]
        plgpu.copy_gmem_to_smem(q_gmem.at[h, pl.ds(own_rows, rows)], my_q, q_bar.at[wg])
        plgpu.barrier_wait(q_bar.at[wg])

        def take_turn():   # ping-pong: the other consumer's matmuls go between this one's
            if turn:
                plgpu.barrier_arrive(turn[0])
                plgpu.barrier_wait(turn[0])

        def masked(s, j):
            q_ids = own_rows + iota(jnp.int32, s.shape, 0, layout=wgmma)
            k_ids = j * block_kv + iota(jnp.int32, s.shape, 1, layout=wgmma)
            keep = k_ids < L
            if isinstance(band, KeyBand):   # a tile band's kept tiles are whole: only padded keys to mask
                keep = keep & allowed(band, q_ids, k_ids, config.block_q, block_kv)
            return jnp.where(keep, s, raw_masked)

        def wait_next_k(t):
            @pl.when(t + 1 < steps)
            def _():
                plgpu.barrier_wait(k_bar.at[lax.rem(t + 1, stages)])

        def step(t, carry):
            acc, m, l = carry
            slot = lax.rem(t, stages)
            j = tile_of(t)
            if interpreted:   # the interpreter's wgmma takes no transposed operand: the same product, a dot
                s = jnp.dot(my_q[...], k_smem[slot].T, preferred_element_type=jnp.float32)
                take_turn()
            else:
                def qk(acc_ref):
                    plgpu.wgmma(acc_ref, my_q, plgpu.transpose_ref(k_smem.at[slot], (1, 0)))
                    take_turn()
                    return acc_ref[...]
                s = pl.run_scoped(qk, plgpu.ACC((rows, block_kv), jnp.float32))
            plgpu.barrier_arrive(k_free.at[slot])     # K is read: the producer may refill it
            if config.fast_path:
                s = lax.cond(is_full(j), lambda s: s, lambda s: masked(s, j), s)
            else:
                s = masked(s, j)
            m_new = jnp.maximum(m, s.max(axis=1) * scale)
            alpha = jnp.exp2(m - m_new)
            p = jnp.exp2(s * scale - lax.broadcast_in_dim(m_new, s.shape, [0]))   # one multiply-add a score
            acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])               # rescaled where wgmma adds
            l = l * alpha + p.sum(axis=1)
            p = p.astype(my_q.dtype)
            if turn:
                plgpu.barrier_arrive(turn[0])          # softmax done
            plgpu.barrier_wait(v_bar.at[slot])
            if turn:
                plgpu.barrier_wait(turn[0])            # the other consumer's matmuls issued: the tensor cores are ours
            if interpreted:   # the interpreter's wgmma takes no register operand and runs no run_state
                acc = acc + jnp.dot(p, v_smem[slot], preferred_element_type=jnp.float32)
                wait_next_k(t)
            else:
                def pv(acc_ref):
                    plgpu.wgmma(acc_ref, p, v_smem.at[slot])
                    wait_next_k(t)                     # under the P V product
                acc = pl.run_state(pv)(plgpu.ACC.init(acc))
            plgpu.barrier_arrive(v_free.at[slot])     # V is read
            return acc, m_new, l

        reduced = wgmma.reduce(1)
        init = (layout_cast(jnp.zeros((rows, d), jnp.float32), wgmma),
                layout_cast(jnp.full((rows,), -jnp.inf, jnp.float32), reduced),
                layout_cast(jnp.zeros((rows,), jnp.float32), reduced))

        @pl.when(steps > 0)
        def _():
            plgpu.barrier_wait(k_bar.at[0])
        if turn:
            pl.when(wg == 1)(take_turn)               # consumer 1 starts half a step behind consumer 0
        acc, m, l = lax.fori_loop(0, steps, step, init)
        if turn:
            pl.when(wg == 0)(take_turn)               # and consumer 0 ends half a step after: the turns balance
        inv = jnp.where(m > empty_row, 1.0 / jnp.where(l > 0, l, 1.0), 0.0)   # rows with no allowed key -> 0
        my_q[...] = (acc * lax.broadcast_in_dim(inv, acc.shape, [0])).astype(my_q.dtype)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(my_q, o_gmem.at[h, pl.ds(own_rows, rows)])
        plgpu.wait_smem_to_gmem(0)


def _smem(plgpu, shape, dtype):
    """A shared-memory buffer in the layout TMA and wgmma share: 8 x 64-element tiles, 128-byte swizzle."""
    swizzle = 128
    return plgpu.SMEM(shape, dtype, transforms=(plgpu.TilingTransform((8, swizzle // jnp.dtype(dtype).itemsize)),
                                                plgpu.SwizzleTransform(swizzle)))


@functools.partial(jax.jit, static_argnames=("band", "config", "sm_scale", "interpret"))
def _mosaic_gpu(q, k, v, *, band, config: MosaicConfig, sm_scale, interpret):
    plgpu = _plgpu()
    heads, L, d = q.shape
    tile = math.lcm(config.block_q, config.block_kv)
    q, k, v = pad_qkv(q, k, v, tile, tile)
    Lp = q.shape[1]
    body = functools.partial(_kernel, band=band, L=L, config=config, scale=sm_scale * math.log2(math.e),
                             interpreted=interpret is not None)
    out = jax.ShapeDtypeStruct((heads, Lp, d), q.dtype)
    named = inspect.signature(plgpu.kernel).parameters   # 0.10.2 names: out_type, scratch_types; older: *_shape(s)
    out_kw, scratch_kw = ("out_type" if "out_type" in named else "out_shape",
                          "scratch_types" if "scratch_types" in named else "scratch_shapes")
    n, stages = config.consumers, config.stages
    scratch = [_smem(plgpu, (n, PROGRAM_ROWS, d), q.dtype), _smem(plgpu, (stages, config.block_kv, d), q.dtype),
               _smem(plgpu, (stages, config.block_kv, d), q.dtype), plgpu.Barrier(num_barriers=n),
               plgpu.Barrier(num_barriers=stages), plgpu.Barrier(num_barriers=stages),
               plgpu.Barrier(num_arrivals=n, num_barriers=stages), plgpu.Barrier(num_arrivals=n, num_barriers=stages)]
    if n == 2:
        scratch.append(plgpu.Barrier(num_arrivals=2))   # the consumers' turn
    options = {"interpret": interpret} if interpret is not None else {
        "compiler_params": plgpu.CompilerParams(approx_math=config.approx_math)}
    call = plgpu.kernel(body, **{out_kw: out, scratch_kw: scratch}, grid=(Lp // (n * PROGRAM_ROWS), heads),
                        grid_names=("q", "heads"), num_threads=n + 1, thread_name="wg", **options)
    return call(q, k, v)[:, :L]


def interpret_params():
    """JAX's GPU interpreter settings (runs Mosaic GPU kernels on a CPU, simulating shared memory, TMA, barriers),
    or ``None`` where the installed jax has none."""
    try:
        from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams
    except ImportError:
        return None
    return InterpretGPUParams()


def mosaic_gpu_attention(q, k, v, mask, *, config: MosaicConfig | None = None, sm_scale: float | None = None,
                         interpret=None, **settings):
    """Masked attention over ``mask``'s kept tiles on a Hopper GPU, ``q, k, v [heads, L, d]`` bf16 (or f16),
    ``d`` 64 or 128, any ``L``; zeros for rows without keys.  ``mask``: a band + sink mask, the dense mask, or a
    tile-aligned one whose kept tiles are a band + sink of tiles (:func:`~svgtpu.kernels.row_ranges.walk_band`) at
    the config's plan tiles.  ``config``: :class:`MosaicConfig` (or its fields as keywords, ``settings``).
    ``interpret=None``: compiled on a GPU backend, JAX's GPU interpreter elsewhere."""
    if config is None:
        config = MosaicConfig(**settings)
    elif settings:
        raise BadInput(f"pass either config or its fields ({', '.join(sorted(settings))}), not both")
    masks = check_inputs(q, k, v, mask)
    if isinstance(masks, tuple):
        raise BadInput("implementation mosaic-gpu takes one mask for all heads; implementation triton takes "
                       "per-head masks")
    if str(q.dtype) not in DTYPES:
        raise BadInput(f"implementation mosaic-gpu takes q, k, v in {' or '.join(DTYPES)} (wgmma inputs), "
                       f"got {q.dtype}")
    d = q.shape[-1]
    if d % 64:
        raise BadInput(f"head dim must be a multiple of 64 for mosaic-gpu (128-byte swizzled bf16 rows), got {d}")
    if config.smem_bytes(d, q.dtype.itemsize) > SMEM_BYTES:
        raise BadInput(f"stages={config.stages} at block_kv={config.block_kv}, d={d} needs "
                       f"{config.smem_bytes(d, q.dtype.itemsize) // 1024} KiB of shared memory; a Hopper block has "
                       f"{SMEM_BYTES // 1024} KiB (CUDA programming guide, compute capability 9.0): fewer stages")
    band = walk_band(masks, config.block_q, config.block_kv)
    scale = check_sm_scale(sm_scale, d)
    if interpret is None:
        interpret = None if jax.default_backend() == "gpu" else interpret_params()
    elif interpret is True:
        interpret = interpret_params()
    elif interpret is False:
        interpret = None
    return _mosaic_gpu(q, k, v, band=band, config=config, sm_scale=scale, interpret=interpret)


__all__ = ["mosaic_gpu_attention", "MosaicConfig", "masked_score", "interpret_params", "PROGRAM_ROWS",
           "DEFAULT_STAGES", "CONSUMER_REGISTERS", "PRODUCER_REGISTERS", "SMEM_BYTES"]
