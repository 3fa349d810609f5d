"""The Wan-style transformer, written once.

- :mod:`svgtpu.model.config`: :class:`~svgtpu.model.config.ModelConfig` and Wan's published shapes,
  JAX-free (the cost model reads them);
- :mod:`svgtpu.model.wan`: :class:`~svgtpu.model.wan.WanBlock`, the one block the toy DiT, the GPU
  benchmark and the TPU compile run, and the self-attention functions it can plug in.

This file imports nothing, so that importing the config does not load JAX.
"""
