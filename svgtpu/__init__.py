"""svgtpu: Sparse VideoGen attention on TPU, reproduced, tested and explained.

One module per concept:

- :mod:`~svgtpu.geometry`: video token grids, Wan presets, frame-/spatial-major layouts;
- :mod:`~svgtpu.masks.core`, :mod:`~svgtpu.masks.tiles`: SVG masks, tile alignment, tile classification (C3);
- :mod:`~svgtpu.kernels`: reference, Splash baseline and our block-sparse Pallas kernel (C4);
- :mod:`~svgtpu.attention.profiling`, :mod:`~svgtpu.attention.svg`: online head profiling and ``svg_attention``;
  :mod:`~svgtpu.schedule`: SVG's dense warm-up (steps and layers), shared with the cost model;
- :mod:`~svgtpu.masks.families`, :mod:`~svgtpu.attention.svg2`, :mod:`~svgtpu.bench.methods`: STA, radial and
  variable-block masks, SVG2's k-means permutation through our kernel, every method side by side;
- :mod:`~svgtpu.toy.data`, :mod:`~svgtpu.toy.dit`, :mod:`~svgtpu.toy.train`, :mod:`~svgtpu.toy.sampler`,
  :mod:`~svgtpu.toy.quality`: the toy Wan-shaped video DiT, its training, sampling and fidelity;
- :mod:`~svgtpu.costmodel`: the TPU cost model (C1, C2, C5), validated against published timings;
  :mod:`~svgtpu.attention.sharding`: multi-device;
- :mod:`~svgtpu.bench.timing`, :mod:`~svgtpu.bench.kernels`, :mod:`~svgtpu.bench.cpu`: how we measure, the benchmarks, and
  this CPU's rates with the toy-DiT check of the cost model; :mod:`~svgtpu.bench.gpu`: the prepared
  GPU run; :mod:`~svgtpu.kernels.jaxpr_walk`: finding the kernel body in a traced program;
- :mod:`~svgtpu.report.claims`: the write-up's claims and reported numbers, defined once;
- :mod:`~svgtpu.report.results`, :mod:`~svgtpu.report.reproduce`, :mod:`~svgtpu.report.plots`, :mod:`~svgtpu.report.paper`:
  the results file, the notebook runner, figure style and the paper's generated tables;
- :mod:`~svgtpu.bench.compile`: ahead-of-time compilation for a TPU topology, no TPU needed;
  :mod:`~svgtpu.tpu_env`: keeps libtpu quiet on machines without a TPU;
- :mod:`~svgtpu.explore`: the interactive tile/mask/budget/cost explorer (JupyterLab, ipywidgets);
- :mod:`~svgtpu.cli`: the ``svgtpu`` command.
"""

__version__ = "0.1.0"

from svgtpu.tpu_env import quiet_libtpu_without_tpu

quiet_libtpu_without_tpu()  # before JAX starts libtpu; a no-op where a TPU is present
