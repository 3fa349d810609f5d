"""The Wan-style transformer in JAX, written once.

- :mod:`svgtpu.model.wan`: :class:`~svgtpu.model.wan.WanBlock`, the one block the toy DiT, the GPU
  benchmark and the TPU compile run, and the self-attention functions it can plug in;
- :mod:`svgtpu.model.sharded`: that block as one program over a device mesh.

Its shape, :class:`~svgtpu.models.ModelConfig`, and Wan's published shapes are :mod:`svgtpu.models`, JAX-free
and below the setting (the cost model reads them).  This file imports nothing.
"""
