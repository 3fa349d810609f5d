"""Work per attention score element, counted from our kernel rather than assumed: the prior the
model prices a tile with where no compiled tile table covers it (:mod:`svgtpu.costmodel.tile_costs`).

:func:`counted_work` traces :func:`svgtpu.kernels.block_sparse_attention` (no execution), takes
the ``pl.when`` bodies of a full and of a partial tile and counts, per score element of one
``block_q x block_kv_compute`` update:

- **EUP** ops: ``exp`` and other transcendentals (output elements);
- **VPU** ops: every other elementwise, compare/select and convert, and reductions counted by their
  *input* elements (a row max reads the whole score block);
- free: loads/stores (the DMA engine), ``broadcast``/``reshape``/``tile`` (lane broadcasts), static
  slices (``slice``: a choice of vregs: the tree maximum over keys of the key-major layout, the rows of a
  matmul result), scalar bookkeeping and the two ``dot_general`` (timed on the MXU from FLOPs, not
  counted here).

The per-row online-softmax updates (``[block_q, 128]`` lane-replicated m/l/acc) are counted too, so
the count depends on ``block_kv_compute`` (not on ``block_q``).  These are jaxpr-level counts, before
Mosaic's own lowering; the compiled schedule (``figures/compiled_tiles.json``) supersedes them where
it exists.  :func:`counted_work` is the one place the cost model imports JAX, and only when a
head of our kernel is priced without the compiled table.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np


@dataclasses.dataclass(frozen=True)
class KernelWork:
    """Work per score element of a flash-attention tile.

    ``vector_ops``: VPU ops of the online softmax; ``exp_ops``: EUP ops; ``mask_vector_ops``: the
    extra VPU ops of a masked (partial) tile; ``score_bytes``: HBM traffic per score element (0 for
    a fused flash kernel, ~16 for unfused XLA attention: write scores, read/write probabilities,
    read them for PV, f32); ``source``: where the counts come from.
    """

    vector_ops: float = 4.0
    exp_ops: float = 1.0
    mask_vector_ops: float = 6.0
    score_bytes: float = 0.0
    source: str = ("hand count: max, subtract, sum, cast per score (+ 6 to mask a band+sink tile from "
                   "iota: q-k, two compares, k<sink, or, select)")

    def __post_init__(self):
        for field in ("vector_ops", "exp_ops", "mask_vector_ops", "score_bytes"):
            if getattr(self, field) < 0:
                raise ValueError(f"KernelWork.{field} must be >= 0, got {getattr(self, field)!r}")


#: Hand-counted flash attention (used for GPU flash kernels, whose op counts we do not have).
FLASH = KernelWork()
#: Unfused, unmasked XLA attention: the whole score matrix goes through memory (the toy DiT on CPU).
XLA_UNFUSED = KernelWork(mask_vector_ops=0.0, score_bytes=16.0,
                              source="hand count: softmax as FLASH, no mask, scores through memory")

_EUP = {"exp", "exp2", "log", "log1p", "tanh", "logistic", "rsqrt", "sqrt", "erf"}
_FREE = {"get", "swap", "load", "store", "broadcast_in_dim", "reshape", "squeeze", "tile", "transpose", "slice",
         "multiple_of", "program_id", "dot_general", "pjit", "jit"}
_REDUCE = {"reduce_max", "reduce_min", "reduce_sum", "argmax"}


def _size(var) -> int:
    return int(np.prod(getattr(var.aval, "shape", ())))


def _work(jaxpr) -> tuple[float, float]:
    """(VPU element-ops, EUP element-ops) of a jaxpr, recursing into sub-jaxprs (loops once)."""
    from svgtpu.kernels.jaxpr_walk import sub_jaxprs  # jax only when a kernel is traced

    vpu = eup = 0.0
    for eqn in jaxpr.eqns:
        subs = list(sub_jaxprs(eqn))
        if subs:
            for sub in subs:
                v, e = _work(sub)
                vpu, eup = vpu + v, eup + e
            continue
        name = eqn.primitive.name
        out = max((_size(v) for v in eqn.outvars), default=0)
        if name in _FREE or out <= 1 and name not in _REDUCE:
            continue
        if name in _EUP:
            eup += out
        elif name in _REDUCE:
            vpu += max(_size(v) for v in eqn.invars)
        else:
            vpu += out
    return vpu, eup


@functools.lru_cache(maxsize=16)
def counted_work(head_dim: int, dtype: str, block_kv_compute: int, layout: str | None = None) -> KernelWork:
    """Per-score-element work of our Pallas kernel, counted from its jaxpr (see the module doc).

    Traced once at ``512 x block_kv_compute`` tiles with ``block_kv = block_kv_compute`` (one update
    per tile body) in ``layout`` (``None``: the kernel's default at that tile, key-major); the per-element
    counts hold for any ``block_q``.
    """
    import jax

    from svgtpu.geometry import VideoGeometry
    from svgtpu.kernels.jaxpr_walk import pallas_kernel_body, when_bodies
    from svgtpu.kernels.api import block_sparse
    from svgtpu.kernels.config import KernelConfig, default_layout
    from svgtpu.masks.core import svg_mask

    block_q = 512
    g = VideoGeometry(2, 8, 64)       # F = 512, L = 1024: the band+sink mask has full and partial tiles
    mask = svg_mask(g, 1.0)
    x = jax.ShapeDtypeStruct((1, g.L, head_dim), dtype)
    config = KernelConfig(block_q, block_kv_compute, block_kv_compute, fast_path=True, layout=layout)
    fn = lambda q, k, v: block_sparse(q, k, v, mask, config=config, implementation="mosaic", interpret=True)  # noqa: E731
    bodies = when_bodies(pallas_kernel_body(jax.make_jaxpr(fn)(x, x, x).jaxpr))
    if len(bodies) != 4:
        raise RuntimeError(f"unexpected kernel structure: {len(bodies)} pl.when bodies (init, full, partial, finish)")
    elements = float(block_q * block_kv_compute)
    full_vpu, full_eup = _work(bodies[1])
    partial_vpu, _ = _work(bodies[2])
    return KernelWork(vector_ops=full_vpu / elements, exp_ops=full_eup / elements,
                           mask_vector_ops=(partial_vpu - full_vpu) / elements,
                           source=f"counted from the kernel jaxpr (head_dim {head_dim}, {dtype}, "
                                  f"block_kv_compute {block_kv_compute}, {layout or default_layout(block_q)}; "
                                  "svgtpu.costmodel.kernel_work)")


__all__ = ["KernelWork", "FLASH", "XLA_UNFUSED", "counted_work"]
