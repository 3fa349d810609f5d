"""svgtpu: Sparse VideoGen attention on TPU, reproduced, tested and explained.

One module per concept:

- :mod:`~svgtpu.geometry`: video token grids, Wan presets, frame-/spatial-major layouts;
- :mod:`~svgtpu.masks`, :mod:`~svgtpu.tiles`: SVG masks, tile alignment, tile classification (C3);
- :mod:`~svgtpu.kernels`: reference, Splash baseline and our block-sparse Pallas kernel (C4);
- :mod:`~svgtpu.profiling`, :mod:`~svgtpu.attention`: online head profiling and ``svg_attention``;
  :mod:`~svgtpu.schedule`: SVG's dense warm-up (steps and layers), shared with the cost model;
- :mod:`~svgtpu.mask_families`, :mod:`~svgtpu.svg2`, :mod:`~svgtpu.sparse_methods`: STA, radial and
  variable-block masks, SVG2's k-means permutation through our kernel, every method side by side;
- :mod:`~svgtpu.data`, :mod:`~svgtpu.dit`, :mod:`~svgtpu.train`, :mod:`~svgtpu.sampler`,
  :mod:`~svgtpu.quality`: the toy Wan-shaped video DiT, its training, sampling and fidelity;
- :mod:`~svgtpu.costmodel`: the TPU cost model (C1, C2, C5), validated against published timings;
  :mod:`~svgtpu.sharding`: multi-device;
- :mod:`~svgtpu.timing`, :mod:`~svgtpu.bench`, :mod:`~svgtpu.bench_cpu`: how we measure, the benchmarks, and
  this CPU's rates with the toy-DiT check of the cost model; :mod:`~svgtpu.gpu_bench`: the prepared
  GPU run; :mod:`~svgtpu.jaxpr_walk`: finding the kernel body in a traced program;
- :mod:`~svgtpu.claims`: the write-up's claims and reported numbers, defined once;
- :mod:`~svgtpu.results`, :mod:`~svgtpu.reproduce`, :mod:`~svgtpu.plots`, :mod:`~svgtpu.paper`:
  the results file, the notebook runner, figure style and the paper's generated tables;
- :mod:`~svgtpu.compile`: ahead-of-time compilation for a TPU topology, no TPU needed;
  :mod:`~svgtpu.tpu_env`: keeps libtpu quiet on machines without a TPU;
- :mod:`~svgtpu.explore`: the interactive tile/mask/budget/cost explorer (JupyterLab, ipywidgets);
- :mod:`~svgtpu.cli`: the ``svgtpu`` command.
"""

__version__ = "0.1.0"

from svgtpu.tpu_env import quiet_libtpu_without_tpu

quiet_libtpu_without_tpu()  # before JAX starts libtpu; a no-op where a TPU is present
