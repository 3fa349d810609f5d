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
5. The kept cluster pairs are a :class:`~svgtpu.mask_families.BlockMask` in the permuted order:
   dense blocks with cluster-sized (not tile-sized) edges.  Where an edge falls inside a kernel
   tile, the tile is *partial*; ``align="snap"`` rounds the mask to whole tiles
   (:func:`svgtpu.masks.align`), trading a few pairs for mask-free tiles.  The output is permuted back.

Steps 1–4 are one jitted JAX function (:func:`select`).  **Static plan, dynamic mask.** Our kernel
plans a mask at trace time (it is a static, hashable argument), while SVG2's mask depends on the
data of every call.  We therefore plan *per call, outside jit*: :func:`svg2_attention` pulls the
small cluster table and edges to the host, builds one mask per head and calls
:func:`svgtpu.kernels.block_sparse_attention` with it (each new mask compiles once: seconds in
interpret mode, a real cost on TPU that a production version would remove with a bounded plan of
fixed length whose tile indices ride in as data).  So ``svg2_attention`` is not itself jit-able;
everything before the kernel is.  Inside the toy DiT's jitted sampler, :func:`svg2_backend` leaves
the compiled program through :func:`jax.pure_callback` for it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from svgtpu.geometry import check_positive_int
from svgtpu.mask_families import BlockMask
from svgtpu.masks import ALIGN_MODES, Mask, align
from svgtpu.tiles import classify

KERNELS = ("ours", "reference")
#: Up to this many ``(head, q, k)`` pairs the per-head masks go to the kernel as one stacked bool
#: array (one call, one compile per mask set); beyond it each head runs with its own mask object.
MAX_STACKED_MASK_PAIRS = 2 ** 26


@dataclasses.dataclass(frozen=True)
class SVG2Config:
    """Everything SVG2 needs besides the data; hashable (a static jit argument).

    ``q_clusters`` / ``k_clusters``: k-means centroids for queries / keys (each at most ``L``);
    ``top_p`` in (0, 1]: attention mass each query cluster keeps; ``min_kept_fraction`` in [0, 1]:
    least share of key clusters kept per query cluster (at least one); ``first_iters`` /
    ``warm_iters``: Lloyd iterations on the first call / warm-started calls; ``align``: ``None``
    (cluster-exact mask) or a :func:`svgtpu.masks.align` mode; ``block_q``, ``block_kv``: kernel
    tiles; ``kernel``: ``ours`` (our Pallas kernel) or ``reference`` (jnp, small ``L`` only).
    """

    q_clusters: int = 16
    k_clusters: int = 32
    top_p: float = 0.9
    min_kept_fraction: float = 0.1
    first_iters: int = 20
    warm_iters: int = 2
    align: str | None = None
    block_q: int = 128
    block_kv: int = 128
    kernel: str = "ours"

    def __post_init__(self):
        for name in ("q_clusters", "k_clusters", "first_iters", "warm_iters", "block_q", "block_kv"):
            check_positive_int(name, getattr(self, name))
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not (isinstance(self.min_kept_fraction, (int, float)) and 0 <= self.min_kept_fraction <= 1):
            raise ValueError(f"min_kept_fraction must be in [0, 1], got {self.min_kept_fraction!r}")
        if self.align is not None and self.align not in ALIGN_MODES:
            raise ValueError(f"align must be None or one of {', '.join(ALIGN_MODES)}, got {self.align!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}")

    @property
    def min_kept(self) -> int:
        """Least number of key clusters every query cluster keeps."""
        return max(1, math.ceil(self.min_kept_fraction * self.k_clusters))


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
        raise ValueError(f"number of clusters must be at most the sequence length {x.shape[1]}, got {clusters}")
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
    if q.ndim != 3 or q.shape != k.shape:
        raise ValueError(f"q and k must be [heads, L, d] arrays of the same shape, got {q.shape} and {k.shape}")
    if max(config.q_clusters, config.k_clusters) > q.shape[1]:
        raise ValueError(f"q_clusters and k_clusters must be at most L={q.shape[1]}, "
                         f"got {config.q_clusters} and {config.k_clusters}")
    q, k = q.astype(jnp.float32), k.astype(jnp.float32)  # k-means runs in float32: one compile per shape
    static = dict(clusters=(config.q_clusters, config.k_clusters), min_kept=config.min_kept)
    if state is None:
        return _selection(q, k, jax.random.PRNGKey(0) if key is None else key, config.first_iters,
                          config.top_p, seed=True, **static)
    expected = ((q.shape[0], config.q_clusters, q.shape[2]), (k.shape[0], config.k_clusters, k.shape[2]))
    if (tuple(state.q_centroids.shape), tuple(state.k_centroids.shape)) != expected:
        raise ValueError(f"state centroids must have shapes {expected[0]} and {expected[1]}, got "
                         f"{tuple(state.q_centroids.shape)} and {tuple(state.k_centroids.shape)}")
    return _selection(q, k, state, config.warm_iters, config.top_p, seed=False, **static)


@functools.partial(jax.jit, static_argnames=("clusters", "min_kept", "seed"))
def _selection(q, k, start, iters, top_p, *, clusters: tuple[int, int], min_kept: int,
               seed: bool) -> Selection:
    """``start``: a PRNG key (``seed=True``: k-means++ seeding first) or the previous :class:`SVG2State`."""
    if seed:
        kq, kk = jax.random.split(start)
        start = SVG2State(initial_centroids(q, clusters[0], kq), initial_centroids(k, clusters[1], kk))
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
    kernel's tiles with :func:`svgtpu.masks.align` when ``config.align`` is set."""
    L = int(selection.q_perm.shape[1])
    qe, ke, table = (np.asarray(a) for a in (selection.q_edges, selection.k_edges, selection.table))
    masks = tuple(BlockMask(L, qe[h], ke[h], table[h]) for h in range(table.shape[0]))
    if config is not None and config.align is not None:
        masks = tuple(align(m, config.block_q, config.block_kv, config.align) for m in masks)
    return masks


def original_order_mask(selection: Selection) -> np.ndarray:
    """bool ``[H, L, L]`` numpy: the unsnapped SVG2 mask in the model's token order, straight from the
    cluster labels (``table[q_label[i], k_label[j]]``), independent of the permutation machinery."""
    table, ql, kl = (np.asarray(a) for a in (selection.table, selection.q_labels, selection.k_labels))
    return np.stack([table[h][ql[h][:, None], kl[h][None, :]] for h in range(table.shape[0])])


def svg2_attention(q, k, v, config: SVG2Config = SVG2Config(), state: SVG2State | None = None, *, key=None,
                   interpret=None):
    """SVG2 attention on ``q, k, v [H, L, d]``; returns ``(out [H, L, d], selection, masks)``.

    ``selection.state`` warm-starts the next call.  ``masks`` are the per-head masks the kernel ran
    (permuted order).  Planned per call outside jit (see the module doc): the per-head masks go to
    the kernel stacked in one call while ``heads * L * L <= MAX_STACKED_MASK_PAIRS``, else one call
    per head with the mask object.
    """
    from svgtpu.kernels import block_sparse_attention, reference_attention

    selection = select(q, k, config, state, key=key)
    masks = block_masks(selection, config)
    qp, kp, vp = permute(q, selection.q_perm), permute(k, selection.k_perm), permute(v, selection.k_perm)
    if config.kernel == "reference":
        out = jnp.concatenate([reference_attention(qp[h:h + 1], kp[h:h + 1], vp[h:h + 1], m)
                               for h, m in enumerate(masks)])
    elif len(masks) * float(masks[0].L) ** 2 <= MAX_STACKED_MASK_PAIRS:
        # small L: one kernel call, the per-head masks stacked as a [H, L, L] bool array (one compile)
        out = block_sparse_attention(qp, kp, vp, np.stack([m.to_array() for m in masks]),
                                     block_q=config.block_q, block_kv=config.block_kv, interpret=interpret)
    else:  # large L: one call per head with its analytic mask object (never materialized)
        out = jnp.concatenate([block_sparse_attention(qp[h:h + 1], kp[h:h + 1], vp[h:h + 1], m,
                                                      block_q=config.block_q, block_kv=config.block_kv,
                                                      interpret=interpret)
                               for h, m in enumerate(masks)])
    return unpermute(out, selection.q_perm), selection, masks


def svg2_backend(config: SVG2Config = SVG2Config(), *, warmup_step_fraction: float | None = None,
                 warmup_layer_fraction: float | None = None, seed: int = 0):
    """A toy-DiT self-attention backend (``attention(q, k, v, *, layer, step, num_steps, num_layers,
    key)``, ``q, k, v [B, H, L, d]``) running SVG2 through our kernel.

    The sampler jits its step, and SVG2's mask is known only once ``q`` and ``k`` are, so the call
    leaves the compiled program through :func:`jax.pure_callback`: on the host it merges batch and
    heads, runs :func:`svg2_attention` (warm-started from this layer's previous step) or, for the
    first ``warmup_step_fraction`` of steps and ``warmup_layer_fraction`` of layers (default: SVG's,
    :class:`svgtpu.attention.SVGConfig`), our kernel on a dense mask.  Timings of this path include the host round trip and per-call planning: they are
    not kernel timings.  ``backend.calls`` lists what each call did (step, layer, kept fraction,
    partial share at the config's tiles).
    """
    from svgtpu.attention import SVGConfig, warmup_count
    from svgtpu.kernels import block_sparse_attention
    from svgtpu.masks import DenseMask

    svg = SVGConfig()
    step_fraction = svg.warmup_step_fraction if warmup_step_fraction is None else warmup_step_fraction
    layer_fraction = svg.warmup_layer_fraction if warmup_layer_fraction is None else warmup_layer_fraction
    states: dict[int, SVG2State] = {}
    calls: list[dict] = []

    def attention(q, k, v, *, layer, step, num_steps, num_layers, key=None):
        B, H, L, d = q.shape
        dense_layer = layer < warmup_count(layer_fraction, num_layers)

        def host(q, k, v, step):
            step = int(step)
            merged = [jnp.asarray(x).reshape(B * H, L, d) for x in (q, k, v)]
            if dense_layer or step < warmup_count(step_fraction, num_steps):
                out = block_sparse_attention(*merged, DenseMask(L), block_q=config.block_q, block_kv=config.block_kv)
                calls.append({"step": step, "layer": layer, "kept_fraction": 1.0, "partial_share": None})
            else:
                out, selection, masks = svg2_attention(*merged, config, states.get(layer),
                                                       key=jax.random.PRNGKey(seed + layer))
                states[layer] = selection.state
                stats = [classify(m, config.block_q, config.block_kv).stats for m in masks]
                calls.append({"step": step, "layer": layer,
                              "kept_fraction": float(np.mean([m.density() for m in masks])),
                              "partial_share": float(np.mean([s.partial_share for s in stats]))})
            return np.asarray(out, dtype=q.dtype).reshape(B, H, L, d)

        return jax.pure_callback(host, jax.ShapeDtypeStruct(q.shape, q.dtype), q, k, v, jnp.asarray(step))

    attention.calls = calls
    return attention


__all__ = ["SVG2Config", "SVG2State", "Selection", "kmeans", "initial_centroids", "cluster_order", "permute",
           "unpermute", "centroid_scores", "top_p_table", "select", "block_masks", "original_order_mask",
           "svg2_attention", "svg2_backend"]
