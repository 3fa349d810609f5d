"""From measurements to the page: the claims, the results file, figures, the notebooks and the paper.

- :mod:`~svgtpu.report.claims`: the write-up's claims and reported numbers, defined once;
- :mod:`~svgtpu.report.results`: the results file and the provenance of every number;
- :mod:`~svgtpu.report.plots`: one figure style, provenance on every figure;
- :mod:`~svgtpu.report.reproduce`: the notebooks through papermill; :mod:`~svgtpu.report.paper`: the
  paper's and README's generated blocks.
"""
