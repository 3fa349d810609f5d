"""How we measure, and the measurements: timings, compiled kernels, the GPU run, every method.

- :mod:`~svgtpu.bench.timing`: interleaved timing and paired ratios on a noisy machine;
- :mod:`~svgtpu.bench.kernels`: kernel timings in interpret mode and vector-op counts per tile kind (C4);
- :mod:`~svgtpu.bench.cpu`: this CPU's rates and the toy DiT's measured vs modeled attention share;
- :mod:`~svgtpu.bench.gpu`: the prepared one-GPU run (``make gpu-bench``);
- :mod:`~svgtpu.bench.compile`: ahead-of-time compilation for a TPU topology, no TPU needed;
- :mod:`~svgtpu.bench.llo`: what the real TPU compiler emits for each tile body;
- :mod:`~svgtpu.bench.methods`: every sparse attention method at one geometry and kept fraction.
"""
