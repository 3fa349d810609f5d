"""Timings: what ran, on this CPU (interpret mode) or a lent GPU, and how we time it.

Imports run down only (:mod:`svgtpu.facts` draws the floors); the compiler's static schedule, which
times nothing, is :mod:`svgtpu.compiler`.

- :mod:`~svgtpu.bench.timing`: interleaved timing and paired ratios on a noisy machine;
- :mod:`~svgtpu.bench.kernel_timing`: kernel timings in interpret mode and vector-op counts per tile kind (C4);
- :mod:`~svgtpu.bench.cpu`: this CPU's rates and the toy DiT's measured vs modeled attention share;
- :mod:`~svgtpu.bench.gpu`: the prepared one-GPU run (``make gpu-bench``), fitted into its time budget by
  :mod:`~svgtpu.bench.gpu_timing`, its checks each under a watchdog of its own (:mod:`~svgtpu.bench.gpu_check`),
  written, read and printed by :mod:`~svgtpu.bench.gpu_results`;
- :mod:`~svgtpu.bench.methods`: every sparse attention method at one geometry and kept fraction.
"""
