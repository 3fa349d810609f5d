"""Test-suite wiring.

Multi-device tests need ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before jax is
imported, which is too late in this process; ``test_multidevice.py`` runs ``tests/multidevice/`` in
a fresh pytest subprocess with the flag set, so the outer run skips collecting that folder.
"""

import os

collect_ignore = [] if os.environ.get("SVGTPU_MULTIDEVICE") else ["multidevice"]
