"""SMEM and VMEM budgets of the block-sparse kernel on a TPU generation, known before compiling.

Capacities per TensorCore come from JAX's own hardware table (``pltpu.get_tpu_info_for_chip``,
jax 0.10.2; the same table is the "TPU Hardware Reference" page of the Pallas docs): SMEM 1 MiB
and VMEM 128 MiB (v5e, v6e) or 64 MiB (v5p, v7x).

- **SMEM** holds the scalar-prefetched plan.  The TPU compiler refuses a plan that does not fit
  (``RESOURCE_EXHAUSTED`` naming the prefetched SMEM operand, libtpu 0.0.42.1 with jax 0.10.2:
  ``tests/test_compile.py``), so a long plan would not run at all; we check first: a plan chunk may
  use the SMEM capacity less :data:`SMEM_RESERVE` for the compiler's own scalars, and longer plans
  are split into q-row chunks (:meth:`~svgtpu.kernels.plan.TilePlan.chunks`), each of which compiles.
- **VMEM** holds the double-buffered q, k, v, output (and mask) blocks, the softmax scratch and the
  float32 temporaries of the online-softmax updates (:func:`vmem_bytes`).  Mosaic rejects a kernel
  whose scoped VMEM exceeds ``vmem_limit_bytes`` (``CompileTimeScopedVmemOom``) and the default
  limit is a fraction of the capacity, so the kernel asks for :attr:`DeviceMemory.vmem_budget`.
  :func:`vmem_bytes` is a *lower* estimate, used to refuse hopeless tiles early and name one that
  fits: the compiler keeps more alive than one update's temporaries (at 3024 x 2048, float32,
  no fast path, ``block_kv_compute=256`` it asked for 50.3 MiB where this counts 24.7 MiB), so
  the compiler (``svgtpu compile``) has the last word.
"""

from __future__ import annotations

import dataclasses
import functools

from svgtpu.kernels.config import LANES, KernelConfig
from svgtpu.errors import BadInput

#: The TPU generations whose SMEM and VMEM budgets the kernel knows (``costmodel.DEVICES`` is the
#: cost model's wider list of devices with rates).
TPU_GENERATIONS = ("v5e", "v5p", "v6e", "v7x")
#: SMEM kept free for the compiler's own scalars (grid indices, DMA descriptors, semaphores).
SMEM_RESERVE = 64 * 1024
#: Share of VMEM capacity the kernel may ask for; the rest stays with XLA's fusions around it.
VMEM_SHARE = 0.75
#: float32 ``[block_q, block_kv_compute]`` temporaries alive at once in one update (scores, their
#: exponentials and the mask/select result), as counted in the compiled LLO of the update.
SCORE_TEMPORARIES = 3


@dataclasses.dataclass(frozen=True)
class DeviceMemory:
    """One TensorCore's on-chip memories, in bytes."""

    name: str
    smem: int
    vmem: int

    @property
    def smem_budget(self) -> int:
        """Bytes one plan chunk may use."""
        return self.smem - SMEM_RESERVE

    @property
    def vmem_budget(self) -> int:
        """Bytes of VMEM one kernel may ask for."""
        return int(self.vmem * VMEM_SHARE)


@functools.cache
def device_memory(device: str) -> DeviceMemory:
    """SMEM / VMEM of ``device`` (:data:`TPU_GENERATIONS`) from JAX's TPU hardware table."""
    if device not in TPU_GENERATIONS:
        raise BadInput(f"device must be one of {', '.join(TPU_GENERATIONS)}, got {device!r}")
    from jax.experimental.pallas import tpu as pltpu
    chip = {"v5e": pltpu.ChipVersion.TPU_V5E, "v5p": pltpu.ChipVersion.TPU_V5P,
            "v6e": pltpu.ChipVersion.TPU_V6E, "v7x": pltpu.ChipVersion.TPU_7X}[device]
    info = pltpu.get_tpu_info_for_chip(chip, 1)
    return DeviceMemory(device, smem=info.smem_capacity_bytes, vmem=info.vmem_capacity_bytes)


def vmem_bytes(config: KernelConfig, head_dim: int, itemsize: int, mask_blocks: bool, extra: int = 0) -> int:
    """VMEM the kernel needs: double-buffered blocks, softmax scratch and one update's temporaries, plus
    ``extra`` bytes of other mask inputs (:func:`svgtpu.kernels.dynamic.cluster_vmem_bytes`)."""
    bq, bkv, bkc = config.block_q, config.block_kv, config.block_kv_compute
    blocks = 2 * (2 * bq * head_dim + 2 * bkv * head_dim) * itemsize  # q, out; k, v
    if mask_blocks:
        blocks += 2 * bq * bkv  # one byte per mask element
    # m, l, acc; key-major m and l take 8 rows, not 128 lanes: the 960 bytes a query this overcounts cover
    # the bf16 scaled queries [2 d, block_q] of KernelConfig.scale_in_qk (4 d bytes a query)
    scratch = 4 * (2 * bq * LANES + bq * head_dim)
    temporaries = 4 * SCORE_TEMPORARIES * bq * bkc + 4 * bq * head_dim  # scores; PV result
    return blocks + scratch + temporaries + extra


def fitting_block_kv_compute(config: KernelConfig, head_dim: int, itemsize: int, mask_blocks: bool,
                             device: DeviceMemory, extra: int = 0) -> int | None:
    """The widest ``block_kv_compute`` that fits ``device``'s VMEM budget, or ``None``."""
    for width in range(config.block_kv, 0, -LANES):
        if config.block_kv % width == 0:
            trial = dataclasses.replace(config, block_kv_compute=width)
            if vmem_bytes(trial, head_dim, itemsize, mask_blocks, extra) <= device.vmem_budget:
                return width
    return None


def check_vmem(config: KernelConfig, head_dim: int, itemsize: int, mask_blocks: bool,
               device: DeviceMemory, extra: int = 0) -> int:
    """The ``vmem_limit_bytes`` to compile with; one clear line when the tile cannot fit."""
    need = vmem_bytes(config, head_dim, itemsize, mask_blocks, extra)
    if need <= device.vmem_budget:
        return device.vmem_budget
    width = fitting_block_kv_compute(config, head_dim, itemsize, mask_blocks, device, extra)
    hint = (f"block_kv_compute={width} fits" if width else "use a smaller block_q or block_kv")
    raise BadInput(f"tile {config.tile} with block_kv_compute={config.block_kv_compute} needs "
                   f"{need / 2**20:.1f} MiB of VMEM, over the {device.name} budget of "
                   f"{device.vmem_budget / 2**20:.0f} MiB ({VMEM_SHARE:.0%} of {device.vmem / 2**20:.0f} MiB): "
                   f"{hint}")


__all__ = ["TPU_GENERATIONS", "DeviceMemory", "device_memory", "vmem_bytes", "check_vmem", "SMEM_RESERVE"]
