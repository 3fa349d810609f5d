"""The one exception for bad input, and the boundary that turns an unreadable file into it (files are read by
:mod:`svgtpu.inputs.documents`).

Validation at the package's boundaries (configs, public functions, the command line) raises
:class:`BadInput`: one line naming the parameter, the allowed values and, for a hardware or
published rule, its source.  ``svgtpu`` prints it as that line and exits 2.  Any other exception is
a bug of ours (or of a library under us) and keeps its traceback, exit 1: it never passes for bad
input.  ``BadInput`` is a ``ValueError``, so ``except ValueError`` and ``pytest.raises(ValueError)``
written before it still hold.
"""

from __future__ import annotations

import contextlib
from pathlib import Path


class BadInput(ValueError):
    """A value the caller gave breaks a stated rule (the message names the parameter and the rule)."""


@contextlib.contextmanager
def user_file(parameter: str, path: str | Path):
    """Around reading or writing a file the user named: an ``OSError`` becomes :class:`BadInput`
    naming the parameter and the path (``--results no/such.json: No such file or directory``)."""
    try:
        yield Path(path)
    except OSError as error:
        raise BadInput(f"{parameter} {path}: {error.strerror or error}") from None


def positive_int(text: str) -> int:
    """An ``argparse`` type: ``text`` as a positive integer, else argparse's one-line error (exit 2)."""
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


#: The largest seed: JAX's PRNG keys take a 32-bit unsigned seed.
MAX_SEED = 2**32 - 1


def seed_int(text: str) -> int:
    """An ``argparse`` type: ``text`` as a seed, an integer in [0, :data:`MAX_SEED`], else argparse's one-line
    error (exit 2)."""
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be a seed, an integer from 0 to {MAX_SEED} (JAX's 32-bit PRNG "
                                         f"seeds), got {text}")
    return value


__all__ = ["BadInput", "MAX_SEED", "positive_int", "seed_int", "user_file"]
