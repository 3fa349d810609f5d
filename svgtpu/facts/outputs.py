"""Files the package writes: a path the user names is checked before any work, and every write is atomic.

:func:`check_output` refuses (:class:`~svgtpu.errors.BadInput`, one line) what would otherwise fail or do harm
only after the long work: a folder where a file is meant, a folder that is missing or is a file, a file that
cannot be written, and what the package ships (the toy checkpoint and its record, the committed results and
GPU runs) unless the caller passes ``force``.  The package's own ``build/`` folders are made as needed; a
folder the user names must exist.  :func:`atomic_path` writes through a temporary file beside the target and
renames it into place, so a write cut short (an error, a kill) leaves the old file whole.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from pathlib import Path

from svgtpu.errors import BadInput
from svgtpu.facts.paths import BUILD_DIR, CHECKPOINT, GPU_RUNS_DIR, REPO_ROOT

#: What the package ships and no command overwrites by default: the toy checkpoint and its training record,
#: the committed results file, the dated GPU runs (a folder: every file in it; a new run beside them is welcome).
SHIPPED = (CHECKPOINT, CHECKPOINT.with_suffix(".loss.json"), REPO_ROOT / "figures" / "results.json", GPU_RUNS_DIR)


def shipped(path: str | os.PathLike) -> bool:
    """Whether ``path`` is one of :data:`SHIPPED`, or a file that exists in one of its folders."""
    resolved = Path(path).resolve()
    return any(resolved == s.resolve() or (s.resolve() in resolved.parents and resolved.exists()) for s in SHIPPED)


def dated_path(base: str | os.PathLike, when: datetime.datetime | None = None) -> Path:
    """A fresh path for a default output: ``base`` with the UTC date and time in its name
    (``build/train/toy_dit-2026-12-06-051502.npz``), ``-2``, ``-3`` ... after it where that exists already."""
    base = Path(base)
    when = when or datetime.datetime.now(datetime.timezone.utc)
    stem = f"{base.stem}-{when:%Y-%m-%d-%H%M%S}"
    path, n = base.with_name(stem + base.suffix), 1
    while path.exists():
        n += 1
        path = base.with_name(f"{stem}-{n}{base.suffix}")
    return path


def check_output(parameter: str, path: str | os.PathLike, *, derived: tuple[str | os.PathLike, ...] = (),
                 folder: bool = False, force: bool = False, new: bool = False) -> Path:
    """``path`` (and the files ``derived`` from it, written beside it) as a place to write, else :class:`BadInput`
    naming ``parameter``; makes the parent folder when it lies under the checkout's ``build/``.  ``folder``: the
    path names a folder to write into (made if its parent exists).  ``force``: a shipped file may be overwritten.
    ``new``: a file that exists is refused (a user-named output is never overwritten unless asked)."""
    if not str(path).strip():   # before Path(), which reads "" as "."
        raise BadInput(f"{parameter} must name a {'folder' if folder else 'file'}, got {str(path)!r}")
    path = Path(path)
    for target in (path, *map(Path, derived)):
        resolved = target.resolve()
        if not force and shipped(resolved):
            raise BadInput(f"{parameter} {target} is shipped with the package ({resolved.relative_to(REPO_ROOT)}); "
                           "name another file, or pass --force to overwrite it")
        if folder:
            if target.exists() and not target.is_dir():
                raise BadInput(f"{parameter} {target} is a file: give a folder")
            parent = resolved if target.is_dir() else resolved.parent
        else:
            if target.is_dir():
                raise BadInput(f"{parameter} {target} is a folder: give a file name")
            if new and target.exists():
                raise BadInput(f"{parameter} {target} exists: name a new file (it is never overwritten"
                               f"{'' if force else ' unless --force is given'})")
            if target.exists() and not os.access(target, os.W_OK):
                raise BadInput(f"{parameter} {target} cannot be written (permission denied)")
            parent = resolved.parent
        build = BUILD_DIR.resolve()
        if not parent.exists() and (parent == build or build in parent.parents):
            parent.mkdir(parents=True, exist_ok=True)
        if not parent.exists():
            raise BadInput(f"{parameter} {target}: the folder {parent} does not exist (make it first)")
        if not parent.is_dir():
            raise BadInput(f"{parameter} {target}: {parent} is a file, not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise BadInput(f"{parameter} {target}: the folder {parent} cannot be written (permission denied)")
    if folder:
        path.mkdir(exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside ``path`` (same suffix, so writers that read it still pick the format);
    on success rename it onto ``path``, on any error remove it and leave ``path`` as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


__all__ = ["SHIPPED", "shipped", "dated_path", "check_output", "atomic_path", "write_text"]
