"""One entry point that picks our block-sparse kernel for the backend, as tokamax's ``api.py`` does.

:func:`~svgtpu.kernels.block_sparse.block_sparse_attention` is the TPU (Mosaic) kernel and
:func:`~svgtpu.kernels.gpu.gpu_block_sparse_attention` its GPU (Triton) port, and
:func:`~svgtpu.kernels.mosaic_gpu.mosaic_gpu_attention` a Hopper (Mosaic GPU) body for band + sink masks, not yet
run on a GPU (so never the default); each does one job.
:func:`block_sparse` chooses between them, so callers that run anywhere (the SVG layer) need not.
"""

from __future__ import annotations

import jax

from svgtpu.errors import BadInput

#: The implementations of our block-sparse kernel: Pallas on Mosaic (TPU), on Triton (GPU) and on Mosaic GPU (Hopper).
IMPLEMENTATIONS = ("mosaic", "triton", "mosaic-gpu")


def default_implementation() -> str:
    """``triton`` on a GPU backend, else ``mosaic`` (compiled on TPU, interpreted elsewhere).  ``mosaic-gpu`` is
    chosen only by name until a measured GPU run has checked and timed it."""
    return "triton" if jax.default_backend() == "gpu" else "mosaic"


def block_sparse(q, k, v, mask, *, config, implementation: str | None = None, interpret=None,
                 sm_scale: float | None = None, device: str | None = None):
    """Our block-sparse attention with ``config`` (a :class:`~svgtpu.kernels.config.KernelConfig`) on
    ``implementation`` (one of :data:`IMPLEMENTATIONS`; ``None``: :func:`default_implementation`).
    ``device`` names the TPU generation whose SMEM / VMEM budgets the Mosaic kernel plans for (compiling
    ahead of time for another chip); the Triton kernel has none."""
    implementation = implementation or default_implementation()
    if implementation == "mosaic":
        from svgtpu.kernels.block_sparse import block_sparse_attention
        return block_sparse_attention(q, k, v, mask, config=config, interpret=interpret, sm_scale=sm_scale,
                                      device=device)
    if implementation in ("triton", "mosaic-gpu") and getattr(config, "fixed_max", False):
        raise BadInput(f"fixed_max is a body of the TPU kernel: it applies to implementation mosaic, got {implementation}")
    if device is not None and implementation in ("triton", "mosaic-gpu"):
        raise BadInput(f"device names a TPU generation: it applies to implementation mosaic, got {implementation} "
                       f"and {device!r}")
    if implementation == "triton":
        from svgtpu.kernels.gpu import gpu_block_sparse_attention
        return gpu_block_sparse_attention(q, k, v, mask, config=config, interpret=interpret, sm_scale=sm_scale)
    if implementation == "mosaic-gpu":
        from svgtpu.kernels.mosaic_gpu import mosaic_gpu_attention
        return mosaic_gpu_attention(q, k, v, mask, block_q=config.block_q, block_kv=config.block_kv,
                                    fast_path=config.fast_path, interpret=interpret, sm_scale=sm_scale)
    raise BadInput(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, got {implementation!r}")


__all__ = ["IMPLEMENTATIONS", "block_sparse", "default_implementation"]
