"""The ``SVGTPU_*`` environment variables, each checked exactly as the flag it stands for.

A variable set to something that is not what its flag takes is refused in one line naming it, never read as
unset: ``SVGTPU_COMPILED_TILES`` at a missing file, a folder or a binary file (it had switched the cost model to
priors, or raised), ``SVGTPU_FIGURES_DIR`` at a file or a missing folder, ``SVGTPU_ROOT`` at a missing folder or
one that is no checkout.  An empty variable is unset.  :func:`check_environment` checks every one at once
(``svgtpu`` does before any command); the functions that read a variable check it as they read it.
"""

from __future__ import annotations

import os
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.inputs.documents import read_text

#: Each variable and the flag it stands for (the same check).
VARIABLES = {"SVGTPU_COMPILED_TILES": "--compiled-tiles", "SVGTPU_FIGURES_DIR": "--figures-dir",
             "SVGTPU_ROOT": "the checkout folder"}
#: ``--compiled-tiles none`` (and the variable set to it): no table, the cost model's priors.
NO_TABLE = "none"


def compiled_tiles(value: str, parameter: str = "--compiled-tiles") -> Path | None:
    """``--compiled-tiles`` (or ``$SVGTPU_COMPILED_TILES``): :data:`NO_TABLE` (``None``: priors) or a readable
    text file (its content is the compiled tile table's schema to check, :mod:`svgtpu.inputs.records`)."""
    if value == NO_TABLE:
        return None
    read_text(parameter, value, "a compiled tile table (JSON; `svgtpu bench compiled` writes one, notebook 04 "
                                "figures/compiled_tiles.json), or none for priors")
    return Path(value)


def figures_folder(value: str, parameter: str = "--figures-dir") -> Path:
    """``$SVGTPU_FIGURES_DIR``: a folder that exists (figures and the results file are read from and written there)."""
    path = Path(value)
    if path.is_dir():
        return path
    if path.exists():
        raise BadInput(f"{parameter} {value} is a file: give the folder of figures and results.json")
    raise BadInput(f"{parameter} {value}: no such folder (make it first, or leave {parameter} unset for figures/)")


def checkout_folder(value: str, parameter: str = "$SVGTPU_ROOT") -> Path:
    """``$SVGTPU_ROOT``: an svgtpu checkout (a folder holding ``notebooks/``)."""
    path = Path(value)
    if not path.is_dir():
        raise BadInput(f"{parameter} {value}: {'is a file' if path.exists() else 'no such folder'}: give the svgtpu "
                       "checkout the commands read and write (or leave it unset)")
    if not (path / "notebooks").is_dir():
        raise BadInput(f"{parameter} {value} is no svgtpu checkout (it holds no notebooks/ folder)")
    return path


_CHECKS = {"SVGTPU_COMPILED_TILES": compiled_tiles, "SVGTPU_FIGURES_DIR": figures_folder,
           "SVGTPU_ROOT": checkout_folder}


def variable(name: str, environ=None):
    """The checked value of variable ``name`` (:data:`VARIABLES`), or ``None`` when unset or empty."""
    value = (os.environ if environ is None else environ).get(name, "")
    return _CHECKS[name](value, f"${name}") if value else None


def check_environment(environ=None) -> None:
    """Every variable of :data:`VARIABLES` that is set, checked (the first bad one refused)."""
    for name in VARIABLES:
        variable(name, environ)


__all__ = ["VARIABLES", "NO_TABLE", "compiled_tiles", "figures_folder", "checkout_folder", "variable",
           "check_environment"]
