"""The facts every layer may cite: the ground floor of the package.

- :mod:`~svgtpu.facts.claims`: the write-up's claims and reported numbers, defined once;
- :mod:`~svgtpu.facts.results`: the results file and the provenance label of every number;
- :mod:`~svgtpu.facts.paths`: where the repository, the figures and the shipped checkpoint are;
- :mod:`~svgtpu.facts.tables`: one plain-text table format for every command.

Floors, bottom first (``tests/test_imports.py`` holds the package to them: a module imports its own floor
and those below, never one above)::

    cli, explore                    the commands
    report                          products: the paper, figures, notebooks run, preflight
    bench                           timings (CPU, interpret mode, the GPU run)
    compiler                        the real TPU compiler's static schedule, read ahead of time
    costmodel                       the TPU cost model
    toy, model                      the toy DiT, the Wan block
    attention                       SVG: profiling, layout, sharding
    course                          the notebooks' worked answers and their checks
    baselines                       Splash and tokamax on our masks
    kernels                         our Pallas kernels (TPU, GPU), their plan, the reference
    styles                          figure colours and markers (the report's and the explorer's)
    masks                           masks and tiles
    setting, geometry, recipes, warmup, launch, models               the setting
    facts, errors, tpu_env          this floor: imports nothing of svgtpu but errors
"""
