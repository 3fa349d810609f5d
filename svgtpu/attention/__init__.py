"""Sparse VideoGen attention as drop-in functions over the kernels.

- :mod:`~svgtpu.attention.base`: the backend call signature, plain dense attention, SVG's warm-up (once);
- :mod:`~svgtpu.attention.profiling`: online head profiling (spatial or temporal, from the data);
- :mod:`~svgtpu.attention.svg`: ``svg_attention`` (profiling, layout transform, one kernel plan);
- :mod:`~svgtpu.attention.svg2`: SVG2's k-means permutation through our kernel;
- :mod:`~svgtpu.attention.backends`: the toy DiT's backends by name, above the methods;
- :mod:`~svgtpu.attention.sharding`: the same layers over a device mesh (head-parallel, Ulysses).
"""
