"""The real TPU compiler, run ahead of time on a CPU, and its static schedule read as evidence.

Nothing here runs a kernel: libtpu compiles for a v6e / v7x topology and we read what it built.
Static bundles are not latency; every ratio says its denominator (a layout's push bound or the full-fill
roofline).  Imports run down only (:mod:`svgtpu.facts` draws the floors): this floor may use the cost model,
the model, attention, kernels and masks; ``bench`` (timings), ``report`` and the commands sit above it.

- :mod:`~svgtpu.compiler.compile`: ahead-of-time compilation for a TPU topology, no TPU needed;
- :mod:`~svgtpu.compiler.dumps`: compiling in a child process with libtpu's dumps on;
- :mod:`~svgtpu.compiler.llo`: reading the dumps: LLO instructions and the static bundle schedule;
- :mod:`~svgtpu.compiler.units`: what bounds a schedule: the fewest cycles each unit of a core needs;
- :mod:`~svgtpu.compiler.probe`: the MXU's geometry read from a compiled probe;
- :mod:`~svgtpu.compiler.aot`: Pallas kernels (ours, the lessons') compiled and read in one call;
- :mod:`~svgtpu.compiler.variants`: the kernels compared and their cached compiles;
- :mod:`~svgtpu.compiler.estimate`: a whole kernel's static cycles from its tile bodies and step list;
- :mod:`~svgtpu.compiler.tile_table`: the comparison (``svgtpu bench compiled``), the unit table and the
  tile table file the cost model reads;
- :mod:`~svgtpu.compiler.fusions`: a whole compiled program as static cycles per op and role;
- :mod:`~svgtpu.compiler.wan_block`: one Wan 2.1 block compiled for a v6e-8 / v7x slice and read by role (C1, C2);
- :mod:`~svgtpu.compiler.multihost`: multi-host programs compiled for a pod topology;
- :mod:`~svgtpu.compiler.scaling`: how attention's cost grows with resolution (C5).
"""
