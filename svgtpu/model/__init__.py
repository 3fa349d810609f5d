"""The Wan-style transformer in JAX, written once.

- :mod:`svgtpu.model.wan`: :class:`~svgtpu.model.wan.WanBlock`, the one block the toy DiT, the GPU
  benchmark and the TPU compile run, and the self-attention functions it can plug in;
- :mod:`svgtpu.model.sharded`: that block as one program over a device mesh;
- :mod:`svgtpu.model.dit`: :class:`~svgtpu.model.dit.WanDiT`, the whole Wan transformer around that block (embedders,
  head; T2V, I2V, TI2V);
- :mod:`svgtpu.model.weights`: Wan checkpoints (safetensors, diffusers' or Wan's names) into its parameters.

Its shape, :class:`~svgtpu.models.ModelConfig`, and Wan's published shapes are :mod:`svgtpu.models`, JAX-free
and below the setting (the cost model reads them).  This file imports nothing.
"""
