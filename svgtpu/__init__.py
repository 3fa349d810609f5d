"""svgtpu: Sparse VideoGen attention on TPU, reproduced, tested and explained.

One module per concept, on floors that import only downward (drawn in :mod:`svgtpu.facts`):

- :mod:`~svgtpu.facts`: the write-up's claims, the results file and provenance labels, paths, tables;
- :mod:`~svgtpu.geometry`: video token grids, Wan presets, frame-/spatial-major layouts;
  :mod:`~svgtpu.setting`, :mod:`~svgtpu.recipes`, :mod:`~svgtpu.warmup`: the setting of a run and the
  production setting, SVG's cited recipes, SVG's dense warm-up (steps and layers);
- :mod:`~svgtpu.masks`: SVG masks, tile alignment, tile classification (C3), STA / radial / block masks;
- :mod:`~svgtpu.kernels`: our block-sparse Pallas kernel (C4), its GPU port and the float64 reference;
  :mod:`~svgtpu.baselines`: JAX's Splash and tokamax on our masks; :mod:`~svgtpu.course`: notebooks 01/01b's answers;
- :mod:`~svgtpu.attention`: online head profiling, ``svg_attention``, SVG2, multi-device sharding;
- :mod:`~svgtpu.model`, :mod:`~svgtpu.toy`: one Wan block; the toy Wan-shaped video DiT, its training,
  sampling and fidelity;
- :mod:`~svgtpu.costmodel`: the TPU cost model (C1, C2, C5), validated against published timings;
- :mod:`~svgtpu.compiler`: the real TPU compiler ahead of time, no TPU needed, and its static schedule;
- :mod:`~svgtpu.bench`: timings (CPU interpret mode, the prepared GPU run, every sparse method);
- :mod:`~svgtpu.report`: figures, the notebook runner, the paper's generated blocks, the preflight;
- :mod:`~svgtpu.explore`: the interactive tile/mask/budget/cost explorer (JupyterLab, ipywidgets);
  :mod:`~svgtpu.cli`: the ``svgtpu`` command; :mod:`~svgtpu.tpu_env`: keeps libtpu quiet without a TPU and
  its CPU backend fit for Pallas' interpreter.
"""

__version__ = "0.1.0"

from svgtpu.tpu_env import prepare_without_tpu

prepare_without_tpu()  # before JAX starts libtpu and its CPU backend; a no-op where a TPU is present
