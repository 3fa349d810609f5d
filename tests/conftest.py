"""Test-suite wiring.

Multi-device tests need ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before jax is
imported, which is too late in this process; ``test_multidevice.py`` runs ``tests/multidevice/`` in
a fresh pytest subprocess with the flag set, so the outer run skips collecting that folder.

The suite has two tiers.  ``make test`` runs the library, its kernels against float64 references and its
compiles: what a change is checked against while it is written.  ``make test-system`` runs the tests marked
``system``, each an end-to-end run of a product: every notebook through papermill, JupyterLab driven by
chromium, several JAX processes, the 8-device subprocess suite, a whole study or bench command, README's first
screen in a fresh clone; and the runs at full size that took 10 s or more each on 2 idle cores (a committed
record compiled again, the MXU-rate calibrations of the probe and the fusion reader, a training run, the
shipped checkpoints, the larger Mosaic GPU interpreter cases, the dense and aligned kernels compiled twice to show
they share one program, the preflight's whole-program import of the 720p blocks and the Wan-block record's import of
its 720p SVG block), which kept ``make test`` over its 6 minutes.  CI (``.ci/run``) runs both.

Each hands tests to two xdist workers as they free up (``--dist loadgroup``); the tests marked
``slow`` go first, so that what is left at the end is short and both workers finish together.  Tests that
share a module fixture or compiles cached in build/ carry an ``xdist_group``: one worker runs them in turn.

The suite compiles far more than it runs, so XLA's CPU backend compiles at optimization level 0
(:data:`svgtpu.tpu_env.FAST_CPU_COMPILE_FLAGS`, set here before any backend starts and inherited by the
notebook kernels and subprocesses the tests start; TPU compile children drop them), and JAX's persistent
compilation cache in ``build/jax-cache`` (``JAX_CACHE_DIR``, :func:`svgtpu.tpu_env.persistent_cache_env`) lets
the suite's processes share what they compile; a user's own cache settings win.
"""

import os
import sys

from svgtpu.facts.paths import JAX_CACHE_DIR
from svgtpu.tpu_env import persistent_cache_env, with_fast_cpu_compile

os.environ["XLA_FLAGS"] = with_fast_cpu_compile(os.environ.get("XLA_FLAGS", ""))
for _name, _value in persistent_cache_env(str(JAX_CACHE_DIR)).items():
    os.environ.setdefault(_name, _value)

# jsonschema (under nbformat, which three test modules import) imports rfc3987_syntax for its optional "iri" format
# checks when that package is installed (jupyter-events asks for it), and rfc3987_syntax builds an Earley parser
# as it is imported: about 5 s in each worker, of about 12 s of collecting.  No test checks an IRI's syntax; a None
# entry makes the import fail, and jsonschema goes without those two format checks, as it does without the package.
sys.modules.setdefault("rfc3987_syntax", None)

collect_ignore = [] if os.environ.get("SVGTPU_MULTIDEVICE") else ["multidevice"]

# The cost model prices TPU attention from figures/compiled_tiles.json when that file exists (make figures
# writes it); tests must not depend on whether it does: they run on priors unless a test hands the model a
# table itself (tests/data/compiled_tiles_fixture.json).
os.environ["SVGTPU_COMPILED_TILES"] = "none"


def pytest_collection_modifyitems(config, items):
    """Slow tests first, the rest in file order (a stable sort; every xdist worker sorts alike); the xdist groups."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    group_for_xdist(config, items)


def group_for_xdist(config, items):
    """Give each ``xdist_group`` test the ``@group`` suffix ``--dist loadgroup`` schedules by.

    pytest-xdist 3.8.0 adds it by setting ``item._nodeid``, which pytest 9.2 no longer reads (an item's id is its
    ``_id``, a ``NodeId``): the suffix never reached the scheduler, the groups ran split over both workers, and the
    Wan-block module's tiny block compiled once in each (6-8 CPU-s each).  Only in a loadgroup worker, and only where
    the id lacks the suffix (a fixed xdist adds its own first)."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:   # a pytest before 9.2: xdist's own suffix works there
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid and isinstance(getattr(item, "_id", None), NodeId):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")

