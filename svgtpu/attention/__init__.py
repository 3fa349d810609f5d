"""Sparse VideoGen attention as drop-in functions over the kernels.

- :mod:`~svgtpu.attention.profiling`: online head profiling (spatial or temporal, from the data);
- :mod:`~svgtpu.attention.svg`: ``svg_attention`` (profiling, layout transform, one kernel plan);
- :mod:`~svgtpu.attention.svg2`: SVG2's k-means permutation through our kernel;
- :mod:`~svgtpu.attention.sharding`: the same layers over a device mesh (head-parallel, Ulysses).
"""
