"""PyTorch peers of the GPU run, in the same process as our kernels (:mod:`svgtpu.bench.gpu`).

FlexAttention (``torch.compile(flex_attention)``, default kernel options) on a block mask made from our own tile
classification (:func:`flex_block_lists`: per q tile, its partial kv tiles, which get the ``mask_mod``, and its
full ones, listed without it: the same split as our fast path), and torch's SDPA with the cuDNN backend as a
second dense baseline.  The inputs are our JAX arrays, shared through DLPack (no copy); each call synchronizes
torch's stream, so the wall-clock timing of :func:`svgtpu.bench.timing.interleaved_times` covers it.

Without torch or without a CUDA device (this CPU), :func:`torch_peers` returns every peer with a reason in words
instead of a call; :func:`flex_block_lists` is numpy and runs anywhere.
"""

from __future__ import annotations

import numpy as np

from svgtpu.geometry import Tile
from svgtpu.masks.core import BandSinkMask, DenseMask, Mask, TileMask
from svgtpu.masks.tiles import FULL, PARTIAL, classify

#: The peers :func:`torch_peers` offers, with the mask each one computes (a key of the run's masks).
PEERS = {"torch-sdpa-cudnn-dense": "dense", "flex-dense": "dense", "flex-svg": "svg", "flex-aligned": "aligned"}


def flex_block_lists(mask: Mask, tile: Tile) -> tuple[np.ndarray, ...]:
    """FlexAttention's ``BlockMask.from_kv_blocks`` arrays from our classification of ``mask`` at ``tile``:
    ``(kv_num_blocks [nq], kv_indices [nq, nk], full_kv_num_blocks [nq], full_kv_indices [nq, nk])``, int32, the
    partial tiles of each q tile row (``mask_mod`` applied) and its full ones (none), in ascending kv order, the
    unused index slots zero."""
    kinds = classify(mask, tile).kinds
    out = []
    for kind in (PARTIAL, FULL):
        hit = kinds == kind
        count = hit.sum(axis=1).astype(np.int32)
        order = np.argsort(~hit, axis=1, kind="stable").astype(np.int32)  # this kind's kv tiles first, ascending
        order[np.arange(hit.shape[1])[None, :] >= count[:, None]] = 0
        out += [count, order]
    return tuple(out)


def _mask_mod(mask: Mask, device):
    """``mask_mod(b, h, q_idx, kv_idx)`` of ``mask`` for FlexAttention (partial tiles only), or ``None``."""
    import torch
    if isinstance(mask, DenseMask):
        return None
    if isinstance(mask, BandSinkMask):
        sink, window = mask.sink, mask.window
        return lambda b, h, q, k: (k < sink) | ((q - k).abs() <= window)
    if isinstance(mask, TileMask):
        tiles = torch.as_tensor(np.asarray(mask.tiles), device=device)
        rows, cols = mask.block_q, mask.block_kv
        return lambda b, h, q, k: tiles[q // rows, k // cols]
    raise TypeError(f"no FlexAttention mask_mod for {type(mask).__name__}")


def torch_peers(q, k, v, masks: dict[str, Mask], tile: Tile) -> dict[str, tuple]:
    """``name -> (call, None)`` per peer of :data:`PEERS`, or ``(None, reason)`` where it cannot run here.

    ``q, k, v``: our bf16 ``[heads, L, d]`` JAX arrays on the GPU; ``masks``: the run's masks by name; ``tile``:
    FlexAttention's block, ``BLOCK_SIZE = (block_q, block_kv)``.  A call
    returns torch's ``[1, heads, L, d]`` output after synchronizing."""
    try:
        import torch
    except ImportError as error:
        return {name: (None, f"torch is not importable here ({error})") for name in PEERS}
    if not torch.cuda.is_available():
        return {name: (None, "torch sees no CUDA device here") for name in PEERS}
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    tq, tk, tv = (torch.from_dlpack(x)[None] for x in (q, k, v))  # [1, heads, L, d], the same memory
    device = tq.device

    def synced(out):
        torch.cuda.synchronize()
        return out

    def sdpa():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return synced(F.scaled_dot_product_attention(tq, tk, tv))

    peers: dict[str, tuple] = {"torch-sdpa-cudnn-dense": (sdpa, None)}
    try:
        from torch.nn.attention.flex_attention import BlockMask, flex_attention
    except ImportError as error:
        return peers | {n: (None, f"FlexAttention is not in this torch ({error})") for n in PEERS if n.startswith("flex")}
    flex = torch.compile(flex_attention)
    L = q.shape[1]
    for name in ("flex-dense", "flex-svg", "flex-aligned"):
        mask = masks[PEERS[name]]
        lists = [torch.as_tensor(a, device=device)[None, None] for a in flex_block_lists(mask, tile)]
        block_mask = BlockMask.from_kv_blocks(*lists, BLOCK_SIZE=tuple(tile), mask_mod=_mask_mod(mask, device),
                                              seq_lengths=(L, L))
        peers[name] = (lambda bm=block_mask: synced(flex(tq, tk, tv, block_mask=bm)), None)
    return peers


def to_numpy(out) -> np.ndarray:
    """A peer's ``[1, heads, L, d]`` torch output as float64 numpy ``[heads, L, d]``."""
    return out[0].float().cpu().numpy().astype(np.float64)


def take_rows(out, heads, rows) -> np.ndarray:
    """Rows ``rows`` of heads ``heads`` of a peer's ``[1, heads, L, d]`` torch output, float64 ``[heads, rows, d]``
    (indexed on the device: the spot check at the timed sizes reads a few rows)."""
    import torch
    index = lambda a: torch.as_tensor(a, device=out.device)  # noqa: E731
    return out[0][index(heads)][:, index(rows)].float().cpu().numpy().astype(np.float64)


__all__ = ["PEERS", "flex_block_lists", "torch_peers", "to_numpy", "take_rows"]
