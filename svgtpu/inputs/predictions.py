"""A predictions file (``figures/predictions/<date>.json``, :func:`svgtpu.report.predictions.predict`): what the
package predicted ``svgtpu bench tpu`` would measure, frozen before the run.

Per slice (``v6e-N``) and quantity: a finite central ``value`` inside its ``interval`` (low <= high), the
swings it was built from, and where a claim's verdict reads the quantity, the rule and threshold that flip it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from svgtpu.inputs.documents import read_document
from svgtpu.inputs.schema import require_object, Number, Pair, Schema, Text, interval, validate

#: A slice name as the predictions key it: ``v6e-1``, ``v6e-8``.
SLICE = r"^v6e-[1-9][0-9]*$"


class VerdictFlip(Schema):
    claim: Annotated[str, Field(pattern=r"^C[1-5]$")]
    rule: Literal["direction", "interval"]
    threshold: Number
    flips_if: Text
    expects: str | None = None   # which way the package expects it to fall (files frozen since issue 64)


class Prediction(Schema):
    value: Number
    interval: Pair
    swings: dict[str, list[Number]] = {}
    cut: dict[str, Number] = {}
    provenance: Text
    pricing: dict[str, str] = {}
    tiles: dict[str, str] = {}
    refuted_if: str = ""
    verdict_flip: VerdictFlip | None = None
    width_from: list[Text] | None = None   # the named sources that move it (files frozen since issue 64)
    width_note: str | None = None

    _ordered = field_validator("interval")(classmethod(lambda cls, v: interval(v)))

    @model_validator(mode="after")
    def _value_inside(self):
        lo, hi = self.interval
        slack = 1e-9 * max(1.0, abs(self.value))
        if not lo - slack <= self.value <= hi + slack:
            raise ValueError(f"value {self.value!r} must lie inside its interval [{lo!r}, {hi!r}]")
        return self


class ClaimNow(Schema):
    key: Text
    value: Number
    interval: Pair | None = None
    provenance: Text
    reported: Number | None = None


class PredictionsFile(Schema):
    date: Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$")]
    commit: Text
    versions: dict[str, str]
    command: Text
    note: str
    interval_rule: Text
    claims_now: dict[Annotated[str, Field(pattern=r"^C[1-5]$")], ClaimNow]
    claims_measured: dict[Annotated[str, Field(pattern=r"^C[1-5]$")], Text]
    quantities: dict[Annotated[str, Field(pattern=SLICE)], dict[Text, Prediction]]

    @field_validator("quantities")
    @classmethod
    def _some(cls, quantities):
        if not quantities or not all(quantities.values()):
            raise ValueError("must predict at least one quantity on every slice it names")
        return quantities


def predictions_file(data, where: str) -> dict:
    """``data`` checked as a :class:`PredictionsFile`, returned as it is."""
    require_object(data, where, "a predictions file")
    validate(PredictionsFile, data, where)
    return data


def read_predictions(parameter: str, path) -> dict:
    """The predictions file ``path`` (given as ``parameter``), checked (:func:`predictions_file`)."""
    return predictions_file(read_document(parameter, path, "json", "a predictions file (JSON)"), f"{parameter} {path}")


__all__ = ["SLICE", "VerdictFlip", "Prediction", "ClaimNow", "PredictionsFile", "predictions_file",
           "read_predictions"]
