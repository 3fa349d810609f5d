"""The run files: a TPU run of ``svgtpu bench tpu`` (``figures/tpu-runs/``: ``svgtpu predict --against`` and
``svgtpu paper`` read it) and the GPU runs of ``figures/gpu-runs/`` (``svgtpu paper`` and the cost model read them).

:class:`TpuRun` is what :func:`svgtpu.bench.tpu.run` writes; :func:`svgtpu.report.prediction_outcomes.compare` reads its
``chips``, ``provenance`` and ``quantities`` (each a finite ``value`` and its IQR, low <= high; that the chips are
a slice the predictions hold is its check).  A GPU run handed
where a TPU run is meant (its provenance ``measured-gpu-*``, or a results file with a ``run`` section) is refused
as such, not read as a v6e run.  Whether the run may be judged at all (a smoke run, a partial one, its commit and
predictions hash) is :mod:`svgtpu.report.predictions`' rule, not the file's shape.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from svgtpu.errors import BadInput
from svgtpu.inputs.documents import read_document
from svgtpu.inputs.schema import require_object, Number, Pair, Schema, Text, interval, validate

#: Provenance of a GPU run (:func:`svgtpu.facts.results.provenance`): never a TPU measurement.
GPU_PROVENANCE = "measured-gpu-"


class Measured(Schema):
    """One measured quantity: the median of the per-round ratios and their IQR."""

    value: Number
    interval: Pair
    rounds: Annotated[int, Field(ge=1)] | None = None   # the timing rounds it rests on (run files since issue 64)

    _ordered = field_validator("interval")(classmethod(lambda cls, v: interval(v, "IQR")))


class Check(Schema):
    model_config = ConfigDict(extra="allow")   # the check's own numbers (errors, rows) beside ok and reason
    ok: bool | None
    reason: str = ""


class Row(Schema):
    """One timed (or not) variant of a section group."""

    variant: Text
    kernel: str | None = None
    mask: str | None = None
    fast_path: bool | None = None
    kept: Number | None = None
    tile: str = ""
    check: Check
    status: Literal["ok", "not timed"]
    reason: str = ""
    median_s: Annotated[float, Field(gt=0)] | None = None
    rounds: Annotated[int, Field(ge=1)] | None = None
    times: list[Annotated[float, Field(gt=0)]] | None = None


class Ratio(Schema):
    value: Number
    iqr: Pair


class SectionGroup(Schema):
    """A section at one geometry: its rows and the paired ratios of every two timed variants."""

    section: Literal["kernels", "block", "moderate"]
    geometry: Text
    chips: Annotated[int, Field(ge=1)]
    model: str | None = None
    rows: list[Row]
    ratios: dict[str, Ratio]


class RunError(Schema):
    section: Text
    reason: str
    traceback: str = ""


class ResumedFrom(Schema):
    """The run a ``--resume`` finished: its file, commit and date, and the section groups carried over from it."""

    file: Text
    commit: str | None = None
    date: str | None = None
    groups: list[Text]


class TpuRun(Schema):
    """A run file of ``svgtpu bench tpu`` (the synthetic test run holds only ``chips``, ``provenance``,
    ``quantities`` and a ``note``)."""

    provenance: Text
    chips: Annotated[int, Field(ge=1, le=4096)]
    quantities: dict[Text, Measured] | None = None   # none in a run cut short (.partial.json): see tpu_run
    note: str = ""
    device: str | None = None
    backend: str | None = None
    jax: str | None = None
    libtpu: str | None = None
    tokamax: str | None = None
    commit: str | None = None
    smoke: bool = False
    partial: bool = False
    profile: str | None = None
    sections: list[Literal["kernels", "block", "moderate"]] | None = None
    date: str | None = None
    budget_s: Annotated[float, Field(gt=0)] | None = None
    programs: list[str] | None = None
    kernels: list[SectionGroup] | None = None
    blocks: list[SectionGroup] | None = None
    errors: list[RunError] | None = None
    all_ok: bool | None = None
    elapsed_s: Annotated[float, Field(ge=0)] | None = None
    written: str | None = None
    resumed_from: ResumedFrom | None = None

    @field_validator("provenance")
    @classmethod
    def _not_gpu(cls, provenance: str) -> str:
        if provenance.startswith(GPU_PROVENANCE):
            raise ValueError("is a GPU run's: a TPU run file (svgtpu bench tpu, figures/tpu-runs/) is measured on a "
                             "TPU (measured-tpu) or in the smoke run's interpreter")
        return provenance


# -- GPU runs ---------------------------------------------------------------------------------

class Entry(Schema):
    """One recorded value of a results file; a notebook may add metadata of its own beside these."""

    model_config = ConfigDict(extra="allow")
    value: Any
    provenance: Text
    unit: str = ""
    description: str = ""


class GpuRunInfo(Schema):
    model_config = ConfigDict(extra="allow")   # the run's sections (attention, block, end_to_end, check, ...)
    provenance: Annotated[str, Field(pattern=r"^measured-gpu-")]
    device: Text
    backend: Text
    smoke: bool = False
    date: Text


class GpuRun(Schema):
    """A package GPU run (``svgtpu bench gpu``): a results file of its own plus the run's ``run`` section."""

    claims: dict[Text, dict[Text, Entry]]
    figures: dict[str, Any]
    notebooks: dict[str, dict[str, Any]]
    run: GpuRunInfo | None = None   # the run's own section (a results file of a GPU machine's notebooks has none)


class PeerRun(Schema):
    """A peer script's run measured beside a package run (read beside it, never as it)."""

    model_config = ConfigDict(extra="allow")
    device: Text
    errors: list[Any]
    elapsed_s: Annotated[float, Field(ge=0)]


class IndexEntry(Schema):
    file: Annotated[str, Field(pattern=r"^[^/]+\.json$")]
    kind: Literal["package", "peer"]
    date: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    commit: str | None
    provenance: Annotated[str, Field(pattern=r"^measured-gpu-")]
    device: Text
    command: str = ""
    machine: str = ""
    note: str = ""
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class GpuRunIndex(Schema):
    about: str = ""
    runs: list[IndexEntry]


def _looks_gpu(data) -> str | None:
    """The provenance of a GPU run ``data`` is, or ``None``."""
    if not isinstance(data, dict):
        return None
    for p in (data.get("provenance"), (data.get("run") or {}).get("provenance") if isinstance(data.get("run"), dict)
              else None):
        if isinstance(p, str) and p.startswith(GPU_PROVENANCE):
            return p
    return None


def tpu_run(data, where: str, measured: bool = True) -> dict:
    """``data`` checked as a :class:`TpuRun` (a GPU run refused as one), returned as it is; ``measured``: it must
    hold its measured quantities (a finished run; ``bench tpu --resume`` reads one cut short, which has none)."""
    gpu = _looks_gpu(data)
    if gpu is not None:
        raise BadInput(f"{where} is a GPU run ({gpu}); it takes a TPU run file of svgtpu bench tpu "
                       "(figures/tpu-runs/<date>-<commit>.json)")
    require_object(data, where, "a bench tpu run file")
    validate(TpuRun, data, where)
    if measured and data.get("quantities") is None:
        raise BadInput(f"{where}: quantities is missing (a required field: what the run measured; a run cut short has "
                       "none, svgtpu bench tpu --resume finishes it)")
    return data


def read_tpu_run(parameter: str, path, measured: bool = True) -> dict:
    """The TPU run file ``path`` the user gave as ``parameter``, checked (:func:`tpu_run`)."""
    return tpu_run(read_document(parameter, path, "json", "a bench tpu run file (JSON)"), f"{parameter} {path}",
                   measured)


def gpu_run(data, where: str, kind: str = "package") -> dict:
    """``data`` checked as a package :class:`GpuRun` or a :class:`PeerRun`, returned as it is."""
    require_object(data, where, "a GPU run file")
    validate(GpuRun if kind == "package" else PeerRun, data, where)
    return data


def gpu_run_index(data, where: str) -> dict:
    require_object(data, where, "about, runs")
    validate(GpuRunIndex, data, where)
    return data


__all__ = ["GPU_PROVENANCE", "Measured", "TpuRun", "GpuRun", "PeerRun", "GpuRunIndex", "tpu_run", "read_tpu_run",
           "gpu_run", "gpu_run_index"]
