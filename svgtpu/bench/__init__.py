"""How we measure, and the measurements: timings, compiled kernels, the GPU run, every method.

- :mod:`~svgtpu.bench.timing`: interleaved timing and paired ratios on a noisy machine;
- :mod:`~svgtpu.bench.kernels`: kernel timings in interpret mode and vector-op counts per tile kind (C4);
- :mod:`~svgtpu.bench.cpu`: this CPU's rates and the toy DiT's measured vs modeled attention share;
- :mod:`~svgtpu.bench.gpu`: the prepared one-GPU run (``make gpu-bench``), fitted into its time budget by
  :mod:`~svgtpu.bench.gpu_timing` and written, read and printed by :mod:`~svgtpu.bench.gpu_results`;
- :mod:`~svgtpu.bench.compile`: ahead-of-time compilation for a TPU topology, no TPU needed;
- :mod:`~svgtpu.bench.dumps`: compiling in a child process with libtpu's dumps on;
- :mod:`~svgtpu.bench.llo`: reading the dumps: LLO instructions and the static bundle schedule;
- :mod:`~svgtpu.bench.units`: what bounds a schedule: the fewest cycles each unit of a core needs;
- :mod:`~svgtpu.bench.fusions`: a whole compiled program as static cycles per op and role;
- :mod:`~svgtpu.bench.wan_block`: one Wan 2.1 block compiled for a v6e-8 / v7x slice and read by role (C1, C2);
- :mod:`~svgtpu.bench.scaling`: how attention's cost grows with resolution: exponents, residuals, intervals (C5);
- :mod:`~svgtpu.bench.methods`: every sparse attention method at one geometry and kept fraction.
"""
