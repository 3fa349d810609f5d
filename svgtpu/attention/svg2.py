"""SVG2 (Sparse VideoGen 2, Yang et al. 2025) semantic-aware permutation, run through our kernel.

Per call (one layer, one denoising step), per head:

1. **k-means** on the queries (``q_clusters`` centroids) and on the keys (``k_clusters``): a fixed
   number of Lloyd iterations, ``first_iters`` from k-means++ seeds on the first call and
   ``warm_iters`` from the previous call's centroids after that (:class:`SVG2State`), as SVG2 does
   since centroids change little between denoising steps.
2. **Permutation**: tokens are sorted by cluster (stable), so each cluster is a contiguous run;
   queries and keys have their own permutations, values follow the keys.
3. **Centroid scores**: ``P[a, b] = softmax_b(c_q[a] . c_k[b] * sm_scale + log |K_b|)``, the
   attention mass query cluster ``a`` would give key cluster ``b`` if every token sat on its
   centroid.
4. **Top-p**: each query cluster keeps its key clusters in descending score until their mass
   reaches ``top_p``, and at least ``ceil(min_kept_fraction * k_clusters)`` of them.
5. The kept cluster pairs are a :class:`~svgtpu.masks.families.BlockMask` in the permuted order:
   dense blocks with cluster-sized (not tile-sized) edges.  Where an edge falls inside a kernel
   tile, the tile is *partial*; ``align="snap"`` rounds the mask to whole tiles
   (:func:`svgtpu.masks.core.align`), trading a few pairs for mask-free tiles.  The output is permuted back.

Everything is traced: :func:`svg2_attention` is one jitted function, and it runs inside the toy
DiT's jitted sampler.  **The plan is data.**  Our kernel's static entry plans a hashable mask at
trace time, so a mask decided per call would compile a kernel per call.  SVG2 uses the kernel's
data entry instead (:func:`svgtpu.kernels.dynamic.block_table_attention`): the tile kinds come from
the cluster edges and table in ``jnp`` (allowed pairs per tile ``= Oq @ table @ Ok^T``; alignment by
the same rule as :func:`svgtpu.masks.core.align`), the packed traversal is built in ``jnp`` and padded to
a static length (the worst case, or ``SVG2Config.max_steps``), full tiles take the mask-free fast
path and partial tiles build their mask in the kernel from the permuted cluster labels and the
table.  One compile per shape, whatever the clusters.  :func:`svg2_backend` keeps each layer's
centroids for the warm start in ``jax`` mutable arrays (:func:`jax.new_ref`) next to the compiled
step, so no host round trip is left.  The host-side mask objects (:func:`block_masks`,
:func:`original_order_mask`) remain for tile statistics and as independent checks.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.attention.base import with_warmup
from svgtpu.geometry import Tile, check_positive_int
from svgtpu.facts.kernels import kernel_names
from svgtpu.kernels.config import KernelConfig
from svgtpu.kernels.dynamic import block_table_attention
from svgtpu.kernels.dynamic_plan import block_labels, block_table_kinds, check_traced_align, traced_plan
from svgtpu.kernels.common import resolve_interpret
from svgtpu.masks.families import BlockMask
from svgtpu.masks.core import Mask, align
from svgtpu.masks.tiles import EMPTY, FULL, PARTIAL
from svgtpu.warmup import DEFAULT_WARMUP_LAYER_FRACTION, DEFAULT_WARMUP_STEP_FRACTION, warmup_count
from svgtpu.errors import BadInput

#: The kernels that take a mask decided in data (:data:`svgtpu.facts.kernels.KERNELS`).
KERNELS = kernel_names(data_mask=True)

#: SVG2's query and key cluster counts for Wan, used wherever a setting stands for SVG2 at production scale.
WAN_CLUSTERS = {"q_clusters": 100, "k_clusters": 500}


@dataclasses.dataclass(frozen=True)
class SVG2Config:
    """Everything SVG2 needs besides the data; hashable (a static jit argument).

    ``q_clusters`` / ``k_clusters``: k-means centroids for queries / keys (each at most ``L``);
    ``top_p`` in (0, 1]: attention mass each query cluster keeps; ``min_kept_fraction`` in [0, 1]:
    least share of key clusters kept per query cluster (at least one); ``first_iters`` /
    ``warm_iters``: Lloyd iterations on the first call / warm-started calls; ``align``: ``None``
    (cluster-exact mask) or a :func:`svgtpu.masks.core.align` mode (whole tiles, decided in data);
    ``block_q``, ``block_kv`` (required, by keyword: the caller's tile, as :class:`~svgtpu.attention.svg.SVGConfig`
    takes it): kernel tiles (Mosaic's block rule, :class:`~svgtpu.kernels.config.KernelConfig`); ``max_steps``: plan steps per head (``None``: the
    worst case, every tile; a head needing more gets NaN output, :mod:`svgtpu.kernels.dynamic`);
    ``fast_path``: mask-free full tiles (``False``: the ablation, every tile masked);
    ``kernel``: ``ours`` (our Pallas kernel) or ``reference`` (jnp, small ``L`` only).
    """

    q_clusters: int = 16
    k_clusters: int = 32
    top_p: float = 0.9
    min_kept_fraction: float = 0.1
    first_iters: int = 20
    warm_iters: int = 2
    align: str | None = None
    block_q: int = dataclasses.field(kw_only=True)    # required: the tile is the caller's
    block_kv: int = dataclasses.field(kw_only=True)
    max_steps: int | None = None
    fast_path: bool = True
    kernel: str = "ours"

    def __post_init__(self):
        for name in ("q_clusters", "k_clusters", "first_iters", "warm_iters"):
            check_positive_int(name, getattr(self, name))
        self.kernel_config  # noqa: B018 - validates block_q, block_kv (Mosaic's block rule) and fast_path
        if self.max_steps is not None:
            check_positive_int("max_steps", self.max_steps)
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise BadInput(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not (isinstance(self.min_kept_fraction, (int, float)) and 0 <= self.min_kept_fraction <= 1):
            raise BadInput(f"min_kept_fraction must be in [0, 1], got {self.min_kept_fraction!r}")
        check_traced_align(self.align)
        if self.kernel not in KERNELS:
            raise BadInput(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}")

    @property
    def min_kept(self) -> int:
        """Least number of key clusters every query cluster keeps."""
        return max(1, math.ceil(self.min_kept_fraction * self.k_clusters))

    @property
    def kernel_config(self) -> KernelConfig:
        """The kernel's tiles."""
        return KernelConfig(block_q=self.block_q, block_kv=self.block_kv, fast_path=self.fast_path)


class SVG2State(NamedTuple):
    """Centroids carried from one call to the next (warm start): ``[heads, clusters, d]`` float32."""

    q_centroids: jax.Array
    k_centroids: jax.Array


class Selection(NamedTuple):
    """What one SVG2 call decided, per head (all jnp arrays)."""

    q_perm: jax.Array     # int32 [H, L]: permuted position p holds original query token q_perm[p]
    k_perm: jax.Array     # int32 [H, L]: the same for keys and values
    q_labels: jax.Array   # int32 [H, L]: cluster of each original query token
    k_labels: jax.Array   # int32 [H, L]
    q_edges: jax.Array    # int32 [H, Cq + 1]: cluster a occupies permuted rows [q_edges[a], q_edges[a+1])
    k_edges: jax.Array    # int32 [H, Ck + 1]
    table: jax.Array      # bool [H, Cq, Ck]: kept cluster pairs
    scores: jax.Array     # float32 [H, Cq, Ck]: centroid attention mass
    state: SVG2State


# -- the jit-able steps ----------------------------------------------------------------------

def _nearest(x, centroids):
    """Index of the nearest centroid for each row of ``x [N, d]`` (squared Euclidean distance)."""
    d2 = (jnp.sum(centroids * centroids, -1)[None, :] - 2.0 * x @ centroids.T)
    return jnp.argmin(d2, axis=-1).astype(jnp.int32)


def _kmeans_one(x, centroids, iters):
    C = centroids.shape[0]

    def lloyd(_, c):
        labels = _nearest(x, c)
        sums = jax.ops.segment_sum(x, labels, num_segments=C)
        counts = jax.ops.segment_sum(jnp.ones(x.shape[0], x.dtype), labels, num_segments=C)
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], c)  # empty: keep

    centroids = jax.lax.fori_loop(0, iters, lloyd, centroids)
    return centroids, _nearest(x, centroids)


@jax.jit
def kmeans(x, centroids, iters):
    """Lloyd's k-means per head: ``x [H, N, d]``, ``centroids [H, C, d]`` -> (centroids, labels ``[H, N]``).

    Fixed ``iters`` iterations (may be traced: no recompile per count; no convergence test); an
    empty cluster keeps its previous centroid; labels are the assignment to the returned centroids.  Runs in float32.
    """
    return jax.vmap(_kmeans_one, in_axes=(0, 0, None))(x.astype(jnp.float32), centroids.astype(jnp.float32), iters)


def _kmeans_pp_one(x, clusters: int, key):
    n = x.shape[0]
    first = jax.random.randint(key, (), 0, n)
    centroids = jnp.zeros((clusters, x.shape[1]), x.dtype).at[0].set(x[first])
    nearest = jnp.sum((x - x[first]) ** 2, -1)
    gumbel = jax.random.gumbel(jax.random.fold_in(key, 1), (clusters, n))

    def pick(i, carry):
        centroids, nearest = carry
        # D^2 sampling by the Gumbel-max trick; chosen points have weight 0, so they are never
        # picked again while any other point remains
        weights = jnp.where(nearest.sum() > 0, nearest, jnp.ones_like(nearest))
        j = jnp.argmax(jnp.log(weights) + gumbel[i])
        return centroids.at[i].set(x[j]), jnp.minimum(nearest, jnp.sum((x - x[j]) ** 2, -1))

    return jax.lax.fori_loop(1, clusters, pick, (centroids, nearest))[0]


@functools.partial(jax.jit, static_argnames=("clusters",))
def initial_centroids(x, clusters: int, key):
    """``[H, clusters, d]`` float32: k-means++ seeding per head (each next centroid drawn with
    probability proportional to its squared distance from the nearest one chosen so far)."""
    if clusters > x.shape[1]:
        raise BadInput(f"number of clusters must be at most the sequence length {x.shape[1]}, got {clusters}")
    keys = jax.random.split(key, x.shape[0])
    return jax.vmap(_kmeans_pp_one, in_axes=(0, None, 0))(x.astype(jnp.float32), clusters, keys)


def cluster_order(labels, clusters: int):
    """``(perm [H, N], edges [H, C + 1])``: tokens sorted by cluster (stable) and the cluster runs."""
    perm = jnp.argsort(labels, axis=-1, stable=True).astype(jnp.int32)
    counts = jax.vmap(lambda l: jnp.bincount(l, length=clusters))(labels)
    edges = jnp.concatenate([jnp.zeros((labels.shape[0], 1), counts.dtype), jnp.cumsum(counts, -1)], -1)
    return perm, edges.astype(jnp.int32)


def permute(x, perm):
    """``x [H, N, ...]`` in permuted order: ``out[h, p] = x[h, perm[h, p]]``."""
    return jnp.take_along_axis(x, perm.reshape(perm.shape + (1,) * (x.ndim - 2)), axis=1)


def unpermute(y, perm):
    """Inverse of :func:`permute`: ``out[h, perm[h, p]] = y[h, p]`` (exact, a pure gather)."""
    return permute(y, jnp.argsort(perm, axis=-1))


def centroid_scores(q_centroids, k_centroids, k_counts, sm_scale: float):
    """``[H, Cq, Ck]``: softmax over key clusters of ``c_q . c_k * sm_scale + log |K|`` (empty clusters: 0)."""
    logits = jnp.einsum("had,hbd->hab", q_centroids, k_centroids) * sm_scale
    logits = jnp.where(k_counts[:, None, :] > 0, logits + jnp.log(jnp.maximum(k_counts, 1))[:, None, :], -jnp.inf)
    return jax.nn.softmax(logits, axis=-1)


def top_p_table(scores, top_p: float, min_kept: int):
    """bool ``[H, Cq, Ck]``: per query cluster, the fewest top-scored key clusters whose mass reaches
    ``top_p``, and at least the ``min_kept`` best; clusters with zero score (empty) are never kept."""
    order = jnp.argsort(-scores, axis=-1)
    ranked = jnp.take_along_axis(scores, order, axis=-1)
    before = jnp.cumsum(ranked, axis=-1) - ranked  # mass of the better-ranked clusters
    keep_ranked = (before < top_p) | (jnp.arange(scores.shape[-1]) < min_kept)
    keep = jnp.take_along_axis(keep_ranked, jnp.argsort(order, axis=-1), axis=-1)
    return keep & (scores > 0)


def select(q, k, config: SVG2Config, state: SVG2State | None = None, *, key=None) -> Selection:
    """Steps 1–4 for ``q, k [H, L, d]``: clusters, permutations, cluster table (jitted).

    Without ``state`` the centroids start from k-means++ seeds (``key``, default ``PRNGKey(0)``) and
    run ``config.first_iters`` iterations; with it they start from ``state`` and run ``warm_iters``.
    """
    start, iters = _start(q, k, config, state, key)
    return _selection(q.astype(jnp.float32), k.astype(jnp.float32), start, iters, config.top_p,
                      **_static(config))


def _static(config: SVG2Config) -> dict:
    return dict(clusters=(config.q_clusters, config.k_clusters), min_kept=config.min_kept)


def _start(q, k, config: SVG2Config, state: SVG2State | None, key) -> tuple[SVG2State, int]:
    """Validated inputs; the starting centroids (seeded, or ``state``) and the Lloyd iterations to run."""
    if q.ndim != 3 or q.shape != k.shape:
        raise BadInput(f"q and k must be [heads, L, d] arrays of the same shape, got {q.shape} and {k.shape}")
    if max(config.q_clusters, config.k_clusters) > q.shape[1]:
        raise BadInput(f"q_clusters and k_clusters must be at most L={q.shape[1]}, "
                       f"got {config.q_clusters} and {config.k_clusters}")
    if state is None:
        return seed_state(q, k, config, jax.random.PRNGKey(0) if key is None else key), config.first_iters
    expected = ((q.shape[0], config.q_clusters, q.shape[2]), (k.shape[0], config.k_clusters, k.shape[2]))
    if (tuple(state.q_centroids.shape), tuple(state.k_centroids.shape)) != expected:
        raise BadInput(f"state centroids must have shapes {expected[0]} and {expected[1]}, got "
                       f"{tuple(state.q_centroids.shape)} and {tuple(state.k_centroids.shape)}")
    return state, config.warm_iters


def seed_state(q, k, config: SVG2Config, key) -> SVG2State:
    """k-means++ seeds for the query and the key centroids (float32), from one PRNG key."""
    kq, kk = jax.random.split(key)
    return SVG2State(initial_centroids(q.astype(jnp.float32), config.q_clusters, kq),
                     initial_centroids(k.astype(jnp.float32), config.k_clusters, kk))


@functools.partial(jax.jit, static_argnames=("clusters", "min_kept"))
def _selection(q, k, start: SVG2State, iters, top_p, *, clusters: tuple[int, int], min_kept: int) -> Selection:
    """Lloyd iterations from ``start`` (``iters`` may be traced), permutations, scores and the table."""
    cq, q_labels = kmeans(q, start.q_centroids, iters)
    ck, k_labels = kmeans(k, start.k_centroids, iters)
    q_perm, q_edges = cluster_order(q_labels, clusters[0])
    k_perm, k_edges = cluster_order(k_labels, clusters[1])
    scores = centroid_scores(cq, ck, jnp.diff(k_edges, axis=-1), 1.0 / math.sqrt(q.shape[-1]))
    table = top_p_table(scores, top_p, min_kept)
    return Selection(q_perm, k_perm, q_labels, k_labels, q_edges, k_edges, table, scores, SVG2State(cq, ck))


# -- masks, attention, reports ---------------------------------------------------------------

def block_masks(selection: Selection, config: SVG2Config | None = None) -> tuple[Mask, ...]:
    """One mask per head in the permuted order: the cluster :class:`BlockMask`, snapped to the
    kernel's tiles with :func:`svgtpu.masks.core.align` when ``config.align`` is set."""
    L = int(selection.q_perm.shape[1])
    qe, ke, table = (np.asarray(a) for a in (selection.q_edges, selection.k_edges, selection.table))
    masks = tuple(BlockMask(L, qe[h], ke[h], table[h]) for h in range(table.shape[0]))
    if config is not None and config.align is not None:
        masks = tuple(align(m, Tile(config.block_q, config.block_kv), config.align) for m in masks)
    return masks


def original_order_mask(selection: Selection) -> np.ndarray:
    """bool ``[H, L, L]`` numpy: the unsnapped SVG2 mask in the model's token order, straight from the
    cluster labels (``table[q_label[i], k_label[j]]``), independent of the permutation machinery."""
    table, ql, kl = (np.asarray(a) for a in (selection.table, selection.q_labels, selection.k_labels))
    return np.stack([table[h][ql[h][:, None], kl[h][None, :]] for h in range(table.shape[0])])


class SVG2Info(NamedTuple):
    """What the kernel ran in one SVG2 call, per head (jnp arrays; jit-friendly)."""

    kinds: jax.Array          # int32 [H, nq, nkv]: tile kinds of the (snapped) mask, permuted order
    kept_fraction: jax.Array  # float32 [H]: allowed pairs / L^2
    partial_share: jax.Array  # float32 [H]: partial / (partial + full) tiles
    needed_steps: jax.Array   # int32 [H]: real plan steps (the padded grid has max_steps or nq * nkv)
    overflow: jax.Array       # bool [H]: the plan needed more than max_steps steps (that head's output is NaN)


def svg2_attention(q, k, v, config: SVG2Config, state: SVG2State | None = None, *, key=None,
                   interpret=None) -> tuple[jax.Array, Selection, SVG2Info]:
    """SVG2 attention on ``q, k, v [H, L, d]``; returns ``(out [H, L, d], selection, info)``.

    ``selection.state`` warm-starts the next call; :class:`SVG2Info` says what the kernel ran.  One
    jitted function, callable inside ``jax.jit`` (the mask is data: see the module doc); it compiles
    once per shape and config, whatever the clusters.
    """
    start, iters = _start(q, k, config, state, key)
    return _svg2(q, k, v, start, iters, config=config, interpret=resolve_interpret(interpret))


@functools.partial(jax.jit, static_argnames=("config", "interpret"))
def _svg2(q, k, v, start: SVG2State, iters, *, config: SVG2Config, interpret):
    from svgtpu.kernels.reference import allowed_attention

    sel = _selection(q.astype(jnp.float32), k.astype(jnp.float32), start, iters, config.top_p, **_static(config))
    qp, kp, vp = permute(q, sel.q_perm), permute(k, sel.k_perm), permute(v, sel.k_perm)
    tiles = dict(L=q.shape[1], block_q=config.block_q, block_kv=config.block_kv)
    if config.kernel == "reference":
        kinds, kept = block_table_kinds(sel.q_edges, sel.k_edges, sel.table, align=config.align, **tiles)
        out = allowed_attention(qp, kp, vp, _permuted_mask(sel, kinds, config))
        needed, overflow = traced_plan(kinds, steps=1, **tiles)[1], jnp.zeros(q.shape[0], bool)
    else:
        out, plan = block_table_attention(qp, kp, vp, sel.q_edges, sel.k_edges, sel.table, align=config.align,
                                          config=config.kernel_config, max_steps=config.max_steps,
                                          interpret=interpret)
        kinds, kept, needed, overflow = plan
    partial, full = (jnp.sum(kinds == kind, axis=(1, 2)) for kind in (PARTIAL, FULL))
    share = jnp.where(partial + full > 0, partial / jnp.maximum(partial + full, 1), 0.0).astype(jnp.float32)
    return unpermute(out, sel.q_perm), sel, SVG2Info(kinds, kept, share, needed, overflow)


def _permuted_mask(sel: Selection, kinds, config: SVG2Config):
    """bool ``[H, L, L]`` in jnp: the mask the kernel runs, in the permuted order (reference path)."""
    L = sel.q_perm.shape[1]
    if config.align is not None:
        kept = kinds != EMPTY
        rows, keys = jnp.arange(L) // config.block_q, jnp.arange(L) // config.block_kv
        return kept[:, rows][:, :, keys]
    ql, kl = block_labels(sel.q_edges, L), block_labels(sel.k_edges, L)
    return jax.vmap(lambda t, a, b: t[a[:, None], b[None, :]])(sel.table, ql, kl)


class SVG2Backend:
    """The toy-DiT self-attention backend of :func:`svg2_backend` (a callable; see there)."""

    def __init__(self, config: SVG2Config, step_fraction: float, layer_fraction: float, seed: int):
        self.config, self.step_fraction, self.layer_fraction, self.seed = config, step_fraction, layer_fraction, seed
        self._state: dict[tuple, tuple] = {}   # (layer, heads, L, d) -> (q centroids, k centroids, ready) refs
        self._stats: dict[tuple, object] = {}  # (layer, num_steps) -> float32 [num_steps, 4] ref

    def _refs(self, table: dict, key: tuple, *shapes: jax.ShapeDtypeStruct):
        """Mutable arrays under ``key``, zeros of ``shapes`` made on first use; made concrete, not traced,
        so they outlive the trace that first asks for them."""
        if key not in table:
            with jax.ensure_compile_time_eval():
                table[key] = tuple(jax.new_ref(jnp.zeros(x.shape, x.dtype)) for x in shapes)
        return table[key]

    def __call__(self, q, k, v, *, layer, step, num_steps, num_layers, key=None):
        from svgtpu.kernels.api import block_sparse
        from svgtpu.masks.core import DenseMask

        config, (B, H, L, d) = self.config, q.shape
        merged = [x.reshape(B * H, L, d) for x in (q, k, v)]
        (stats,) = self._refs(self._stats, (layer, num_steps), jax.ShapeDtypeStruct((num_steps, 4), jnp.float32))
        q_ref, k_ref, ready = self._refs(self._state, (layer, B * H, L, d),
                                         jax.ShapeDtypeStruct((B * H, config.q_clusters, d), jnp.float32),
                                         jax.ShapeDtypeStruct((B * H, config.k_clusters, d), jnp.float32),
                                         jax.ShapeDtypeStruct((), jnp.bool_))
        stored = SVG2State(q_ref[...], k_ref[...])
        dense_steps = warmup_count(self.step_fraction, num_steps)
        fresh = ~ready[...] | (step <= dense_steps)  # the first sparse step of a video seeds k-means++

        def warm_up(_):  # our kernel on a dense mask; the centroids stay as they are
            out = block_sparse(*merged, DenseMask(L), config=KernelConfig(config.block_q, config.block_kv))
            return out, stored, jnp.float32(1.0), jnp.float32(0.0), jnp.array(True)

        def sparse(_):
            start = jax.lax.cond(fresh, lambda: seed_state(merged[0], merged[1], config,
                                                           jax.random.PRNGKey(self.seed + layer)), lambda: stored)
            iters = jnp.where(fresh, config.first_iters, config.warm_iters)
            out, sel, info = _svg2(*merged, start, iters, config=config, interpret=resolve_interpret(None))
            return out, sel.state, jnp.mean(info.kept_fraction), jnp.mean(info.partial_share), jnp.array(False)

        out, state, kept, share, is_dense = with_warmup(
            warm_up, sparse, None, step=step, num_steps=num_steps, layer=layer, num_layers=num_layers,
            step_fraction=self.step_fraction, layer_fraction=self.layer_fraction)
        q_ref[...], k_ref[...] = state
        ready[...] = ready[...] | ~is_dense
        record = jnp.where(is_dense, jnp.stack([1.0, 0.0, 0.0, 0.0]), jnp.stack([0.0, 1.0, kept, share]))
        stats[...] = stats[...].at[step].add(record)
        return out.reshape(q.shape)

    @property
    def calls(self) -> list[dict]:
        """What each call did, sorted by step and layer: ``step``, ``layer``, ``kept_fraction`` (1.0 for
        dense warm-up calls) and ``partial_share`` (``None`` for dense calls).  Sparse calls at the same
        step and layer (several sampling runs) show their mean."""
        out = []
        for (layer, num_steps), (ref,) in self._stats.items():
            table = np.asarray(ref[...])
            for step, (dense, sparse, kept, share) in enumerate(table):
                out += [{"step": step, "layer": layer, "kept_fraction": 1.0, "partial_share": None}
                        for _ in range(int(dense))]
                out += [{"step": step, "layer": layer, "kept_fraction": float(kept / sparse),
                         "partial_share": float(share / sparse)} for _ in range(int(sparse))]
        return sorted(out, key=lambda c: (c["step"], c["layer"]))


def svg2_backend(config: SVG2Config, *, warmup_step_fraction: float | None = None,
                 warmup_layer_fraction: float | None = None, seed: int = 0) -> SVG2Backend:
    """A toy-DiT self-attention backend (``attention(q, k, v, *, layer, step, num_steps, num_layers,
    key)``, ``q, k, v [B, H, L, d]``) running SVG2 through our kernel, all inside the jitted step.

    Batch and heads are merged; the first ``warmup_step_fraction`` of steps and
    ``warmup_layer_fraction`` of layers (default: :data:`svgtpu.warmup.DEFAULT_WARMUP_STEP_FRACTION` and
    ``DEFAULT_WARMUP_LAYER_FRACTION``, as for SVG) run our kernel on a dense mask
    (:func:`svgtpu.attention.base.with_warmup`).  Each layer's centroids are kept in ``jax`` mutable arrays between calls:
    the first sparse step of a video seeds k-means++ (key ``seed + layer``), later steps warm-start
    from the previous step's centroids.  ``backend.calls`` lists what each call did (step, layer,
    kept fraction, partial share at the config's tiles), read from device-side counters.
    """
    step_fraction = DEFAULT_WARMUP_STEP_FRACTION if warmup_step_fraction is None else warmup_step_fraction
    layer_fraction = DEFAULT_WARMUP_LAYER_FRACTION if warmup_layer_fraction is None else warmup_layer_fraction
    return SVG2Backend(config, step_fraction, layer_fraction, seed)


__all__ = ["SVG2Config", "SVG2State", "Selection", "kmeans", "initial_centroids", "cluster_order", "permute",
           "unpermute", "centroid_scores", "top_p_table", "select", "seed_state", "block_masks",
           "original_order_mask", "svg2_attention", "svg2_backend", "SVG2Backend", "SVG2Info"]
