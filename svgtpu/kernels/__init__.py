"""Our attention kernels: the block-sparse Pallas TPU kernel with a compressed tile traversal and a
mask-free fast path (C4), its GPU port, their plan, and the readable float64 reference.
:class:`KernelConfig` is the one validated tile configuration; :mod:`~svgtpu.kernels.budget` says
what a config needs of a chip's SMEM and VMEM.  :func:`block_table_attention` is the same kernel with
its plan and mask as data (:mod:`~svgtpu.kernels.dynamic`): one compile for every mask of a shape.
The baselines (Splash, tokamax) are :mod:`svgtpu.baselines`; the course's kernels :mod:`svgtpu.course`."""

from svgtpu.kernels.block_sparse import block_sparse_attention
from svgtpu.kernels.budget import TPU_GENERATIONS, device_memory
from svgtpu.kernels.config import KernelConfig
from svgtpu.kernels.dynamic import block_table_attention
from svgtpu.kernels.plan import TilePlan, tile_plan
from svgtpu.kernels.reference import mask_array, reference_attention

__all__ = ["block_sparse_attention", "block_table_attention", "reference_attention", "mask_array",
           "tile_plan", "TilePlan", "KernelConfig", "TPU_GENERATIONS", "device_memory"]
