"""Our block-sparse SVG attention for Hopper GPUs in Pallas' Mosaic GPU backend: TMA copies, mbarriers, wgmma.

**Not yet run on a GPU** (no H200 session has run it): :func:`mosaic_gpu_attention` is the kernel as written and
lowered here; it is not the default (:func:`svgtpu.kernels.api.default_implementation` keeps Triton) and not called
done until a measured run has checked it against float64 (``svgtpu bench gpu`` checks every variant before it
times it) and timed it.  What runs on a CPU is in ``tests/test_mosaic_gpu.py``.

**What it walks.**  No tile table: each program computes its q-tile row's kept kv tiles from the row index
(:func:`svgtpu.kernels.row_ranges.row_steps`: the sink's tiles, then the band's past them, at most two contiguous
ranges), so it visits only kept tiles.  A full tile takes the mask-free path; a partial one the band + sink test
on iotas (and the padded keys); a row without a kept key writes zeros.  The plan tile (the unit the mask is
classified in, ``block_q x block_kv``, 128 x 128 by default) is shared by the program's warpgroups: each holds a
``64 x block_kv`` score tile and a ``64 x d`` float32 accumulator in registers (a 128-row one would not fit), and
two of them (``warpgroups=2``, the default at 128-row plan tiles) walk one plan row over the same kv stream.

**How a program runs.**  Each warpgroup copies its 64 query rows to shared memory once; the kv tiles of the walk
stream through ``stages`` shared-memory slots by TMA (issued by warpgroup 0, one mbarrier per slot and operand),
and a slot is refilled with step ``t + stages`` once every warpgroup has read it at step ``t`` (a "consumed"
mbarrier with one arrival per warpgroup), so memory runs ahead of compute.  Each step: wgmma ``S = Q K^T`` into a
fresh accumulator, the band test where the tile is partial (a branch per tile, uniform over the warpgroup), the
base-2 online softmax of :mod:`svgtpu.kernels.block_sparse` (masked scores at the finite ``MASK_VALUE``), wgmma
``P V`` into a fresh accumulator added to the rescaled output.  No producer warpgroup and no explicit ping-pong of
the two: the first Hopper body, to measure before it is refined.

**jax versions.**  Written for jax 0.10.2 (the project's pin: lowered and interpreted here) and the GPU machine's
0.11.2: ``plgpu.kernel`` gets its output and scratch types by whichever keywords the installed jax names
(``out_type`` / ``scratch_types``, else ``out_shape`` / ``scratch_shapes``), and every ``plgpu`` name used is in
jax's source of the 0.11 line (read at its 0.11.1 development snapshot: 0.11.2 itself is not installable here);
no ``pl.run_state`` (accumulators come from ``pl.run_scoped``), so JAX's GPU interpreter, which does not run
``run_state``, can run it.
"""

from __future__ import annotations

import functools
import inspect
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from svgtpu.errors import BadInput
from svgtpu.kernels.block_sparse import MASK_VALUE
from svgtpu.kernels.common import check_inputs, check_sm_scale, pad_qkv
from svgtpu.kernels.row_ranges import KeyBand, allowed, row_steps, walk_band

#: Query rows one warpgroup holds: the wgmma accumulator's 64-row unit.
PROGRAM_ROWS = 64
#: Shared-memory slots of the kv stream (K and V tiles of ``block_kv x d`` each): 2 x 2 x 32 KiB at 128 x 128 bf16.
DEFAULT_STAGES = 2
DTYPES = ("bfloat16", "float16")


def _plgpu():
    """JAX's Mosaic GPU Pallas module (imported on use: its import pulls in the CUDA-side lowering)."""
    from jax.experimental.pallas import mosaic_gpu
    return mosaic_gpu


def _kernel(q_gmem, k_gmem, v_gmem, o_gmem, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, consumed, *, band, L,
            block_q, block_kv, stages, warpgroups, scale, fast_path, interpreted):
    plgpu = _plgpu()
    # register layouts are the compiler's business: JAX's GPU interpreter has no rule for them (plain arrays there)
    layout_cast = (lambda x, layout: x) if interpreted else plgpu.layout_cast
    iota = ((lambda dtype, shape, dim, layout: lax.broadcasted_iota(dtype, shape, dim)) if interpreted
            else plgpu.broadcasted_iota)
    i, h, wg = lax.axis_index("q"), lax.axis_index("heads"), lax.axis_index("wg")
    rows, d = PROGRAM_ROWS, q_smem.shape[-1]
    first_row = i * (warpgroups * rows)                    # this program's rows, then this warpgroup's
    own_rows = first_row + wg * rows
    steps, tile_of, is_full = row_steps(band, first_row // block_q, block_q, block_kv)
    my_q = q_smem.at[wg]
    wgmma = plgpu.Layout.WGMMA

    def fetch(t, slot):  # issued by warpgroup 0 for all: the kv tiles are the program's, shared
        kv = pl.ds(tile_of(t) * block_kv, block_kv)
        plgpu.copy_gmem_to_smem(k_gmem.at[h, kv], k_smem.at[slot], k_bar.at[slot])
        plgpu.copy_gmem_to_smem(v_gmem.at[h, kv], v_smem.at[slot], v_bar.at[slot])

    plgpu.copy_gmem_to_smem(q_gmem.at[h, pl.ds(own_rows, rows)], my_q, q_bar.at[wg])
    for s in range(stages):
        pl.when((wg == 0) & (s < steps))(functools.partial(fetch, s, s))
    plgpu.barrier_wait(q_bar.at[wg])

    def masked(s, j):
        q_ids = own_rows + iota(jnp.int32, s.shape, 0, layout=wgmma)
        k_ids = j * block_kv + iota(jnp.int32, s.shape, 1, layout=wgmma)
        keep = k_ids < L
        if isinstance(band, KeyBand):   # a tile band's kept tiles are whole: only padded keys to mask
            keep = keep & allowed(band, q_ids, k_ids, block_q, block_kv)
        return jnp.where(keep, s, MASK_VALUE)

    def step(t, carry):
        acc, m, l = carry
        slot = lax.rem(t, stages)
        j = tile_of(t)
        plgpu.barrier_wait(k_bar.at[slot])

        def qk(acc_ref):
            plgpu.wgmma(acc_ref, my_q, plgpu.transpose_ref(k_smem.at[slot], (1, 0)))
            return acc_ref[...]
        if interpreted:  # the interpreter's wgmma takes no transposed operand: the same product of the same slots
            s = jnp.dot(my_q[...], k_smem[slot].T, preferred_element_type=jnp.float32)
        else:
            s = pl.run_scoped(qk, plgpu.ACC((rows, block_kv), jnp.float32))
        s = s * scale
        if fast_path:
            s = lax.cond(is_full(j), lambda s: s, lambda s: masked(s, j), s)
        else:
            s = masked(s, j)
        m_new = jnp.maximum(m, s.max(axis=1))
        alpha = jnp.exp2(m - m_new)
        p = jnp.exp2(s - lax.broadcast_in_dim(m_new, s.shape, [0]))
        l = l * alpha + p.sum(axis=1)
        plgpu.barrier_wait(v_bar.at[slot])

        def pv(acc_ref):
            plgpu.wgmma(acc_ref, p.astype(my_q.dtype), v_smem.at[slot])
            return acc_ref[...]   # waits for the wgmma: the slot is read once this returns
        if interpreted:  # the interpreter's wgmma takes shared-memory operands only, P is in registers
            o = jnp.dot(p.astype(my_q.dtype), v_smem[slot], preferred_element_type=jnp.float32)
        else:
            o = pl.run_scoped(pv, plgpu.ACC((rows, d), jnp.float32))
        acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0]) + o
        plgpu.barrier_arrive(consumed.at[slot])

        @pl.when((wg == 0) & (t + stages < steps))
        def _refill():   # once every warpgroup has read the slot
            plgpu.barrier_wait(consumed.at[slot])
            fetch(t + stages, slot)
        return acc, m_new, l

    reduced = wgmma.reduce(1)
    init = (layout_cast(jnp.zeros((rows, d), jnp.float32), wgmma),
            layout_cast(jnp.full((rows,), -jnp.inf, jnp.float32), reduced),
            layout_cast(jnp.zeros((rows,), jnp.float32), reduced))
    acc, m, l = lax.fori_loop(0, steps, step, init)

    @pl.when(wg == 0)
    def _drain():   # the last steps' slots were not refilled: their reads end here (a barrier's phases all waited)
        lax.fori_loop(jnp.maximum(steps - stages, 0), steps,
                      lambda t, c: (plgpu.barrier_wait(consumed.at[lax.rem(t, stages)]), c)[1], 0)
    inv = jnp.where(m > MASK_VALUE, 1.0 / jnp.where(l > 0, l, 1.0), 0.0)   # rows with no allowed key -> 0
    my_q[...] = (acc * lax.broadcast_in_dim(inv, acc.shape, [0])).astype(my_q.dtype)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(my_q, o_gmem.at[h, pl.ds(own_rows, rows)])
    plgpu.wait_smem_to_gmem(0)


def _smem(plgpu, shape, dtype):
    """A shared-memory buffer in the layout TMA and wgmma share: 8 x 64-element tiles, 128-byte swizzle."""
    swizzle = 128
    return plgpu.SMEM(shape, dtype, transforms=(plgpu.TilingTransform((8, swizzle // jnp.dtype(dtype).itemsize)),
                                                plgpu.SwizzleTransform(swizzle)))


@functools.partial(jax.jit, static_argnames=("band", "block_q", "block_kv", "stages", "warpgroups", "fast_path",
                                             "sm_scale", "interpret"))
def _mosaic_gpu(q, k, v, *, band, block_q, block_kv, stages, warpgroups, fast_path, sm_scale, interpret):
    plgpu = _plgpu()
    heads, L, d = q.shape
    tile = math.lcm(block_q, block_kv)
    q, k, v = pad_qkv(q, k, v, tile, tile)
    Lp = q.shape[1]
    body = functools.partial(_kernel, band=band, L=L, block_q=block_q, block_kv=block_kv, stages=stages,
                             warpgroups=warpgroups, scale=sm_scale * math.log2(math.e), fast_path=fast_path,
                             interpreted=interpret is not None)
    out = jax.ShapeDtypeStruct((heads, Lp, d), q.dtype)
    named = inspect.signature(plgpu.kernel).parameters   # 0.10.2 names: out_type, scratch_types; older: *_shape(s)
    out_kw, scratch_kw = ("out_type" if "out_type" in named else "out_shape",
                          "scratch_types" if "scratch_types" in named else "scratch_shapes")
    scratch = [_smem(plgpu, (warpgroups, PROGRAM_ROWS, d), q.dtype), _smem(plgpu, (stages, block_kv, d), q.dtype),
               _smem(plgpu, (stages, block_kv, d), q.dtype), plgpu.Barrier(num_barriers=warpgroups),
               plgpu.Barrier(num_barriers=stages), plgpu.Barrier(num_barriers=stages),
               plgpu.Barrier(num_arrivals=warpgroups, num_barriers=stages)]
    options = {"interpret": interpret} if interpret is not None else {}
    call = plgpu.kernel(body, **{out_kw: out, scratch_kw: scratch}, grid=(Lp // (warpgroups * PROGRAM_ROWS), heads),
                        grid_names=("q", "heads"), num_threads=warpgroups, thread_name="wg", **options)
    return call(q, k, v)[:, :L]


def interpret_params():
    """JAX's GPU interpreter settings (runs Mosaic GPU kernels on a CPU, simulating shared memory, TMA, barriers),
    or ``None`` where the installed jax has none."""
    try:
        from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams
    except ImportError:
        return None
    return InterpretGPUParams()


def mosaic_gpu_attention(q, k, v, mask, *, block_q: int = 128, block_kv: int = 128, fast_path: bool = True,
                         stages: int = DEFAULT_STAGES, warpgroups: int | None = None, sm_scale: float | None = None,
                         interpret=None):
    """Masked attention over ``mask``'s kept tiles on a Hopper GPU, ``q, k, v [heads, L, d]`` bf16 (or f16),
    ``d`` 64 or 128, any ``L``; zeros for rows without keys.  ``mask``: a band + sink mask, the dense mask, or a
    tile-aligned one whose kept tiles are a band + sink of tiles (:func:`~svgtpu.kernels.row_ranges.walk_band`),
    classified in ``block_q x block_kv`` plan tiles (multiples of 64); ``stages``: shared-memory slots of the kv
    stream; ``warpgroups``: 64-row warpgroups per program sharing its kv stream (1 or 2, ``warpgroups x 64``
    dividing ``block_q``; default 2 where it divides, else 1).  ``interpret=None``: compiled on a GPU backend,
    JAX's GPU interpreter elsewhere."""
    masks = check_inputs(q, k, v, mask)
    if isinstance(masks, tuple):
        raise BadInput("implementation mosaic-gpu takes one mask for all heads; implementation triton takes "
                       "per-head masks")
    if str(q.dtype) not in DTYPES:
        raise BadInput(f"implementation mosaic-gpu takes q, k, v in {' or '.join(DTYPES)} (wgmma inputs), "
                       f"got {q.dtype}")
    for name, value in (("block_q", block_q), ("block_kv", block_kv)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value % PROGRAM_ROWS:
            raise BadInput(f"{name} must be a positive multiple of {PROGRAM_ROWS} for mosaic-gpu, got {value!r}")
    if isinstance(stages, bool) or not isinstance(stages, int) or not 1 <= stages <= 4:
        raise BadInput(f"stages must be 1, 2, 3 or 4 (shared-memory slots of the kv stream), got {stages!r}")
    if warpgroups is None:
        warpgroups = 2 if block_q % (2 * PROGRAM_ROWS) == 0 else 1
    if warpgroups not in (1, 2) or block_q % (warpgroups * PROGRAM_ROWS):
        raise BadInput(f"warpgroups must be 1 or 2 with warpgroups x {PROGRAM_ROWS} dividing block_q={block_q}, "
                       f"got {warpgroups!r}")
    band = walk_band(masks, block_q, block_kv)
    scale = check_sm_scale(sm_scale, q.shape[-1])
    if interpret is None:
        interpret = None if jax.default_backend() == "gpu" else interpret_params()
    elif interpret is True:
        interpret = interpret_params()
    elif interpret is False:
        interpret = None
    return _mosaic_gpu(q, k, v, band=band, block_q=block_q, block_kv=block_kv, stages=stages, warpgroups=warpgroups,
                       fast_path=bool(fast_path), sm_scale=scale, interpret=interpret)


__all__ = ["mosaic_gpu_attention", "interpret_params", "PROGRAM_ROWS", "DEFAULT_STAGES"]
