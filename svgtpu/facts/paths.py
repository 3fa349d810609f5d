"""Where the checkout is: the notebooks, figures, paper and build folder the commands read and write.

Found once, here: ``$SVGTPU_ROOT`` if set; else the folder above the package when it is a checkout
(an editable install, or ``PYTHONPATH=.``); else the current directory.  So an installed wheel
writes into the working tree it is run from, never into site-packages.
"""

from __future__ import annotations

import os
from pathlib import Path


def checkout_root() -> Path:
    """The svgtpu checkout this process works in (see the module docstring)."""
    if os.environ.get("SVGTPU_ROOT"):
        return Path(os.environ["SVGTPU_ROOT"]).resolve()
    above_package = Path(__file__).resolve().parents[2]
    if (above_package / "notebooks").is_dir():
        return above_package
    return Path.cwd()


REPO_ROOT = checkout_root()
#: The shipped toy DiT (``svgtpu train`` reproduces it): the default checkpoint of every command and notebook
#: that samples, found from the package's location, so they work from any working directory.
CHECKPOINT = REPO_ROOT / "checkpoints" / "toy_dit.npz"
#: Measured GPU runs, one dated file each beside ``index.json`` (their sha256, kind, commit, provenance): inputs
#: committed as they came off the machine, never rewritten (:func:`svgtpu.bench.gpu_results.committed_runs`).
GPU_RUNS_DIR = REPO_ROOT / "figures" / "gpu-runs"
#: What commands build and cache (compiles, scratch figures, sampled videos); ignored by git.
BUILD_DIR = REPO_ROOT / "build"
#: The committed compile records (:func:`svgtpu.compiler.dumps.cached`): what the TPU compiler made of each program
#: the figures read, by content key, so a checkout reads them instead of compiling again (``make evidence`` remakes them).
RECORDS_NAME = "compiled"
COMPILED_RECORDS = REPO_ROOT / "figures" / RECORDS_NAME
#: Records compiled outside ``svgtpu reproduce`` (tests, commands): the local cache beside :data:`COMPILED_RECORDS`.
COMPILED_CACHE = BUILD_DIR / "compiled"
#: JAX's persistent compilation cache of the test suite and of ``svgtpu reproduce``'s notebook kernels
#: (:func:`svgtpu.tpu_env.persistent_cache_env`); JAX keys each entry on the program, its versions and the XLA flags.
JAX_CACHE_DIR = BUILD_DIR / "jax-cache"
#: Where ``svgtpu train`` writes its checkpoint (and ``<name>.loss.json`` next to it) unless told: never the shipped one.
TRAINED_CHECKPOINT = BUILD_DIR / "train" / "toy_dit.npz"
#: Where ``svgtpu generate`` writes its GIF (and the contact sheet next to it) unless told: never the working directory.
GENERATED_VIDEO = BUILD_DIR / "generate" / "video.gif"
