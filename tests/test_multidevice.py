"""Run tests/multidevice/ in a subprocess that fakes 8 CPU devices (XLA_FLAGS before jax import)."""

import os
import pathlib
import subprocess
import sys

import pytest


@pytest.mark.system
@pytest.mark.slow
def test_multidevice_suite():
    here = pathlib.Path(__file__).parent
    env = dict(os.environ, SVGTPU_MULTIDEVICE="1",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8".strip())
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(here / "multidevice")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout
