"""The attention kernels the package names, in one table: what each is and what each can do.

Every list of kernel names elsewhere is a view of :data:`KERNELS` (:func:`kernel_names`): the kernels an SVG
layer can run, those that take a mask decided in data (SVG2), those whose compiled schedule the compiler
reads, those the cost model prices.  (:data:`svgtpu.kernels.api.IMPLEMENTATIONS` is another axis: the
backends of *our* kernel, Mosaic on TPU and Triton on GPU, as tokamax's ``api.py`` names them.)
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One attention kernel: ``fast_path``, a mask-free body for tiles the mask keeps whole; ``svg_layer``,
    an SVG layer can run its mask through it; ``data_mask``, it takes a mask decided in data (SVG2's clusters);
    ``compiled``, the compiler's static schedule of it is read (a row of the compiled tile table);
    ``modeled``, the cost model prices it; ``platforms``, the accelerators it runs on (``tpu``, ``gpu``)."""

    name: str
    what: str
    fast_path: bool
    svg_layer: bool
    data_mask: bool
    compiled: bool
    modeled: bool
    platforms: tuple[str, ...] = ("tpu", "gpu")


#: JAX's Splash ORs its ``should_not_mask`` into the mask, so once any block of a mask is partial every block
#: pays the masking: no fast path (jax-ml/jax ``splash_attention_kernel.py`` at jax-v0.10.2; docs/design.md).
KERNELS: dict[str, Kernel] = {k.name: k for k in (
    Kernel("ours", "our block-sparse Pallas kernel (svgtpu.kernels)", fast_path=True, svg_layer=True,
           data_mask=True, compiled=True, modeled=True),
    Kernel("splash", "JAX's Splash attention (jax.experimental.pallas.ops.tpu.splash_attention)", fast_path=False,
           svg_layer=True, data_mask=False, compiled=True, modeled=True, platforms=("tpu",)),
    Kernel("tokamax", "tokamax's splash attention (tokamax, TPU)", fast_path=True, svg_layer=False, data_mask=False,
           compiled=True, modeled=True, platforms=("tpu",)),
    Kernel("reference", "the readable jnp reference (svgtpu.kernels.reference)", fast_path=False, svg_layer=True,
           data_mask=True, compiled=False, modeled=False),
    Kernel("flash", "FlashAttention-2 on a GPU (what the published GPU runs used)", fast_path=True, svg_layer=False,
           data_mask=False, compiled=False, modeled=True, platforms=("gpu",)),
    Kernel("cudnn", "cuDNN's fused attention on a GPU (jax.nn.dot_product_attention): a GPU user's dense kernel",
           fast_path=True, svg_layer=False, data_mask=False, compiled=False, modeled=True, platforms=("gpu",)),
    Kernel("flex", "PyTorch's FlexAttention over a block mask on a GPU (SVG's sparse layers on Wan 2.1)",
           fast_path=True, svg_layer=False, data_mask=False, compiled=False, modeled=True, platforms=("gpu",)),
)}


def kernel_names(platform: str | None = None, **flags: bool) -> tuple[str, ...]:
    """The kernels whose :class:`Kernel` flags equal ``flags`` (``kernel_names(compiled=True)``), and that run on
    ``platform`` when given (``tpu``, ``gpu``), in table order."""
    fields = {f.name for f in dataclasses.fields(Kernel)}
    unknown = set(flags) - fields
    if unknown:
        raise ValueError(f"unknown kernel flags {sorted(unknown)}: use {sorted(fields - {'name', 'what'})}")
    return tuple(k.name for k in KERNELS.values() if all(getattr(k, f) == v for f, v in flags.items())
                 and (platform is None or platform in k.platforms))


__all__ = ["Kernel", "KERNELS", "kernel_names"]
