"""Test-suite wiring.

Multi-device tests need ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before jax is
imported, which is too late in this process; ``test_multidevice.py`` runs ``tests/multidevice/`` in
a fresh pytest subprocess with the flag set, so the outer run skips collecting that folder.
"""

import os

collect_ignore = [] if os.environ.get("SVGTPU_MULTIDEVICE") else ["multidevice"]

# The cost model prices TPU attention from figures/compiled_tiles.json when that file exists (make figures
# writes it); tests must not depend on whether it does: they run on priors unless a test hands the model a
# table itself (tests/data/compiled_tiles_fixture.json).
os.environ["SVGTPU_COMPILED_TILES"] = os.path.join(os.path.dirname(__file__), "data", "no_compiled_tiles.json")
