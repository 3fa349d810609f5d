"""Products: from the results file to the page: figures, the notebooks run, the paper, the preflight.

The top floor below the commands: it may import every layer; nothing but ``cli`` and ``explore`` imports
it (:mod:`svgtpu.facts` draws the floors).  The facts it cites (claims, results, paths) are
:mod:`svgtpu.facts`.

- :mod:`~svgtpu.report.plots`: one figure style, provenance on every figure;
- :mod:`~svgtpu.report.reproduce`: the notebooks through papermill;
- :mod:`~svgtpu.report.paper`: the paper's and README's generated blocks;
- :mod:`~svgtpu.report.preflight`: the tpu profile's compiles, checked before a long run;
- :mod:`~svgtpu.report.preflight_record`: the dated record a preflight of the TPU run leaves, and reading it;
- :mod:`~svgtpu.report.tpu_run_time`: the TPU run's expected time per slice, from that record and the cost model.
"""
