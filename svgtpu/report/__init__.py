"""Products: from the results file to the page: figures, the notebooks run, the paper, the preflight.

The top floor below the commands: it may import every layer; nothing but ``cli`` imports
it (:mod:`svgtpu.facts` draws the floors).  The facts it cites (claims, results, paths) are
:mod:`svgtpu.facts`.

- :mod:`~svgtpu.report.plots`: figure helpers in the one style (:mod:`svgtpu.styles`), provenance on every figure;
- :mod:`~svgtpu.report.reproduce`: the notebooks through papermill;
- :mod:`~svgtpu.report.paper`: ``svgtpu paper``, filling the paper's and README's generated blocks, one job a module:
  :mod:`~svgtpu.report.blocks` (the markers and what each renders), :mod:`~svgtpu.report.tables` (the tables),
  :mod:`~svgtpu.report.verdicts` (the verdict engine), :mod:`~svgtpu.report.published` (the published numbers prose
  may quote) and :mod:`~svgtpu.report.budget` (the note's word budget);
- :mod:`~svgtpu.report.preflight`: the tpu profile's compiles, checked before a long run;
- :mod:`~svgtpu.report.preflight_record`: the dated record a preflight of the TPU run leaves, and reading it;
- :mod:`~svgtpu.report.tpu_run_time`: the TPU run's expected time per slice, from that record and the cost model.
"""
