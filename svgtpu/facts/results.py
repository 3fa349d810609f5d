"""The results file: every number the notebooks produce, keyed by claim and figure.

One JSON file, ``figures/results.json``, holds

- ``claims``: ``{claim_id: {name: entry}}`` for the claims C1–C5 of docs/design.md (plus ``Q`` for
  dense-vs-sparse video quality), each entry a value with its unit, the reported number where the
  write-up gives one, and how it was made (provenance, profile, versions, backend, notebook);
- ``figures``: ``{figure_id: entry}`` with the files written, the caption and the provenance;
- ``notebooks``: when and how each notebook last ran.

Notebooks write through a :class:`NotebookRun`, which replaces only that notebook's own entries
when it saves (read-modify-write, atomic rename), so a notebook that fails leaves every other
notebook's results intact.  The paper's tables are generated from this file
(:mod:`svgtpu.report.paper`), never typed.

Where the files go: ``$SVGTPU_FIGURES_DIR`` if set (tests point it at a temporary folder), else
``figures/`` at the repository root.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

from svgtpu.facts.claims import CLAIMS, REPORTED
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.errors import BadInput

#: How a number was made (docs/design.md, "How we measure"); :func:`provenance` derives the label from
#: the source, never typed by hand.  ``computed``: exact arithmetic (tile counts, op counts);
#: ``modeled-<device>``: the cost model for a device (``modeled-cpu``: fed with this CPU's measured
#: rates); ``compiled-<device>``: counted in the program the real TPU compiler builds, nothing run;
#: ``measured-cpu`` / ``measured-cpu-interpret``: timed on this CPU, plain XLA / with our Pallas
#: kernels in interpret mode; ``measured-tpu``; ``measured-gpu-<device>``.
PROVENANCES = ("measured-cpu-interpret", "measured-cpu", "measured-tpu", "measured-gpu-h200", "compiled-v6e",
               "modeled-v6e", "modeled-cpu", "computed")
SOURCES = ("computed", "modeled", "compiled", "measured")

RESULTS_NAME = "results.json"
#: A GPU machine's run (same layout), next to the results file; absent until one happened.
GPU_RESULTS_NAME = "results-gpu.json"


#: ``svgtpu reproduce`` names a file in this environment variable for each notebook it runs: the notebook's
#: :meth:`NotebookRun.save_figure` appends the name of every file it writes (the summary's figures column,
#: exact when notebooks run side by side).
FIGURE_LOG = "SVGTPU_FIGURE_LOG"


def figures_dir(override: str | os.PathLike | None = None) -> Path:
    """Where figures and the results file go: ``override``, ``$SVGTPU_FIGURES_DIR``, or ``figures/``."""
    from svgtpu.inputs.environment import variable
    return Path(override or variable("SVGTPU_FIGURES_DIR") or REPO_ROOT / "figures")


def results_path(directory: str | os.PathLike | None = None) -> Path:
    """The results file inside :func:`figures_dir`."""
    return figures_dir(directory) / RESULTS_NAME


def empty_results() -> dict:
    return {"claims": {}, "figures": {}, "notebooks": {}}


def load_results(path: str | os.PathLike | None = None) -> dict:
    """The results file as a dict (an empty skeleton if it does not exist yet); a file that is no JSON object with
    ``claims``, ``figures`` and ``notebooks`` objects is refused (:class:`BadInput`)."""
    from svgtpu.inputs.documents import read_json
    path = Path(path) if path is not None else results_path()
    if not path.exists():
        return empty_results()
    # NaN: a results file's own "no value" (json.dumps writes it; e.g. a validation row's calibration_related)
    data = read_json("results", path, "a results object (claims, figures, notebooks)", allow_nan=True)
    for section, value in empty_results().items():
        data.setdefault(section, value)
        if not isinstance(data[section], dict):
            raise BadInput(f"results {path}: {section} must be a JSON object, got a JSON {type(data[section]).__name__}")
    return data


def write_results(data: dict, path: str | os.PathLike | None = None) -> Path:
    """Write ``data`` atomically (temporary file + rename).

    Keys keep their order (table rows keep their column order); :meth:`NotebookRun.save` sorts
    claims, entries and figures by name so regenerated files diff cleanly.
    """
    from svgtpu.facts.outputs import write_text
    path = Path(path) if path is not None else results_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, json.dumps(data, indent=1, default=_jsonable) + "\n")


def _jsonable(value):
    """numpy scalars and arrays, paths: what notebooks naturally hand us."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in the results file")


def environment() -> dict:
    """Versions and backend stamped on every entry."""
    import jax

    import svgtpu
    return {"jax": jax.__version__, "svgtpu": svgtpu.__version__, "backend": jax.default_backend(),
            "python": platform.python_version()}


def provenance(source: str, *, device: str | None = None, interpret: bool = False) -> str:
    """The provenance label of a number, from where it came from (the one place labels are made).

    ``source``: ``computed`` (exact arithmetic), ``modeled`` or ``compiled`` (need ``device``, e.g.
    ``v6e``), or ``measured`` (timed now, on ``jax.default_backend()``).  For ``measured``,
    ``interpret=True`` says our Pallas kernels ran in interpret mode; the caller resolves it
    (:func:`svgtpu.kernels.common.resolve_interpret`), so the facts never import a kernel.
    """
    if source not in SOURCES:
        raise BadInput(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if source == "computed":
        return "computed"
    if source in ("modeled", "compiled"):
        if not device or not re.fullmatch(r"[a-z0-9]+", str(device)):
            raise BadInput(f"a {source} number needs device, a lower-case name like 'v6e', got {device!r}")
        return f"{source}-{device}"
    import jax

    backend = jax.default_backend()
    if backend == "tpu":
        return "measured-tpu"
    if backend == "gpu":
        kind = device or jax.devices()[0].device_kind.split()[-1]   # "NVIDIA H200" -> "h200"
        return f"measured-gpu-{kind.lower()}"
    return "measured-cpu-interpret" if interpret else "measured-cpu"


def check_provenance(provenance: str) -> str:
    if provenance not in PROVENANCES and not re.fullmatch(r"(modeled|compiled|measured-gpu)-[a-z0-9]+",
                                                          str(provenance)):
        raise BadInput(f"provenance must be one of {', '.join(PROVENANCES)}, got {provenance!r}")
    return provenance


def check_claim(claim: str) -> str:
    if claim not in CLAIMS:
        raise BadInput(f"claim must be one of {', '.join(CLAIMS)}, got {claim!r}")
    return claim


class NotebookRun:
    """Collects one notebook's numbers and figures and saves them into the results file.

    ``record`` and ``save_figure`` only collect; :meth:`save` replaces this notebook's previous
    entries in one read-modify-write, leaving every other notebook's entries untouched.
    """

    def __init__(self, notebook: str, profile: str, directory: str | os.PathLike | None = None):
        self.notebook = notebook
        self.profile = profile
        self.directory = figures_dir(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.env = environment()
        self.claims: dict[str, dict[str, dict]] = {}
        self.figures: dict[str, dict] = {}

    def _stamp(self, provenance: str) -> dict:
        return {"provenance": check_provenance(provenance), "profile": self.profile,
                "notebook": self.notebook, **self.env}

    def record(self, claim: str, name: str, value: Any, *, provenance: str, unit: str = "",
               description: str = "", **extra) -> Any:
        """Keep ``value`` as ``claims[claim][name]``; returns ``value`` for chaining in a cell.

        The reported number, where :data:`REPORTED` has one for ``(claim, name)``, is attached.
        ``extra`` keys the paper reads: ``band`` (a modeled range) or ``iqr`` (a measured spread),
        and for a claims-table row ``mask`` (its words), ``density`` (kept pairs), ``block_q``, ``block_kv``.
        """
        entry = {"value": value, "unit": unit, "description": description,
                 "reported": REPORTED.get((check_claim(claim), name)), **extra,
                 **self._stamp(provenance)}
        self.claims.setdefault(claim, {})[name] = json.loads(json.dumps(entry, default=_jsonable))
        return value

    def save_figure(self, fig, name: str, *, caption: str, provenance: str, claim: str | None = None,
                    formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
        """Write ``fig`` as ``<name>.png`` (+ vector copies) and remember it with its caption."""
        from svgtpu.facts.outputs import atomic_path
        if claim is not None:
            check_claim(claim)
        paths = []
        for fmt in formats:
            path = self.directory / f"{name}.{fmt}"
            with atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=150 if fmt == "png" else None, bbox_inches="tight",
                            metadata=_figure_metadata(fmt, name))
            paths.append(path)
        if os.environ.get(FIGURE_LOG):
            with open(os.environ[FIGURE_LOG], "a") as log:
                log.writelines(f"{p.name}\n" for p in paths)
        self.figures[name] = {"files": [p.name for p in paths], "caption": caption, "claim": claim,
                              **self._stamp(provenance)}
        return paths

    def save(self) -> Path:
        """Merge this notebook's entries into the results file, replacing its old ones (under a lock on
        ``.results.json.lock`` beside it: notebooks run side by side)."""
        import fcntl

        path = results_path(self.directory)
        with open(path.with_name(f".{path.name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = load_results(path)
            for claim in list(data["claims"]):
                kept = {k: v for k, v in data["claims"][claim].items() if v.get("notebook") != self.notebook}
                data["claims"][claim] = kept
            for claim, entries in self.claims.items():
                data["claims"].setdefault(claim, {}).update(entries)
            data["claims"] = {k: dict(sorted(v.items())) for k, v in sorted(data["claims"].items()) if v}
            figures = {k: v for k, v in data["figures"].items() if v.get("notebook") != self.notebook}
            data["figures"] = dict(sorted({**figures, **self.figures}.items()))
            data["notebooks"][self.notebook] = {
                "profile": self.profile, "finished": datetime.datetime.now(datetime.timezone.utc)
                .isoformat(timespec="seconds"), "figures": sorted(self.figures),
                "entries": sum(len(v) for v in self.claims.values()), **self.env}
            data["notebooks"] = dict(sorted(data["notebooks"].items()))
            return write_results(data, path)


def _figure_metadata(fmt: str, name: str) -> dict | None:
    """Stable metadata so regenerated vector figures do not differ by a timestamp alone."""
    if fmt == "svg":
        return {"Date": None, "Title": name}
    if fmt == "pdf":
        return {"CreationDate": None, "Title": name}
    return {"Software": "svgtpu"} if fmt == "png" else None


def entry(data: dict, claim: str, name: str) -> dict | None:
    """``data['claims'][claim][name]`` or ``None``."""
    return data.get("claims", {}).get(claim, {}).get(name)


__all__ = ["PROVENANCES", "SOURCES", "RESULTS_NAME", "GPU_RESULTS_NAME", "CLAIMS", "REPORTED", "FIGURE_LOG", "figures_dir",
           "results_path", "load_results", "write_results", "environment", "provenance",
           "check_provenance", "NotebookRun", "entry"]
