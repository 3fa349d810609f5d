"""The base of every input schema, and the one line a refusal prints.

:class:`Schema` is a pydantic v2 model in strict mode (no string read as a number, no ``true`` read as ``1``, no
number read as a string), frozen, refusing unknown keys and NaN or infinity.  :func:`validate` checks a document
against a schema and turns the first problem into :class:`svgtpu.errors.BadInput`: one line naming where the
document came from, the field (``quantities.kernels_720p_x.value``), the value given and what is allowed.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from svgtpu.errors import BadInput

#: Every schema's settings: strict types, frozen, unknown keys refused, NaN and infinity refused.
STRICT = ConfigDict(strict=True, extra="forbid", frozen=True, allow_inf_nan=False)


class Schema(BaseModel):
    """A document of a stated shape (module doc)."""

    model_config = STRICT


#: A finite number (an integer is a number; ``true`` is not).
Number = float
#: A non-empty string.
Text = Annotated[str, Field(min_length=1)]
#: Two finite numbers, low then high (an interval); the order is checked where it is used (:func:`interval`).
Pair = Annotated[list[float], Field(min_length=2, max_length=2)]

M = TypeVar("M", bound=BaseModel)

#: pydantic's message openings, said as a rule.
_SAID = (("Input should be ", "must be "), ("Value error, ", ""), ("Assertion failed, ", ""),
         ("String should ", "must "), ("List should ", "must "), ("Dictionary should ", "must "))


#: What a value of the wrong type must be, by pydantic's error type.
_TYPES = {"bool_type": "must be true or false (a boolean, unquoted)", "int_type": "must be an integer",
          "float_type": "must be a number", "string_type": "must be a string", "dict_type": "must be a mapping",
          "list_type": "must be a list", "model_type": "must be a mapping", "finite_number":
          "must be a finite number (no NaN or infinity)", "model_attributes_type": "must be a mapping"}


def _value(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the schema allows at ``loc`` (the mapping an unknown key was found in)."""
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue
        inner = getattr(field.annotation, "model_fields", None)
        if inner is not None:
            model = field.annotation
    return list(model.model_fields)


def one_line(error: ValidationError, where: str, model: type[BaseModel]) -> str:
    """The first problem of ``error`` as one line: ``where: field = value: what is allowed``."""
    e = error.errors(include_url=False)[0]
    loc = tuple(e["loc"])
    field = ".".join(str(p) for p in loc) or "the document"
    if e["type"] == "missing":
        return f"{where}: {field} is missing (a required field)"
    if e["type"] == "extra_forbidden":
        allowed = ", ".join(_allowed_keys(model, loc[:-1]))
        return f"{where}: unknown key {field} = {_value(e['input'])}; the keys allowed there are {allowed}"
    message = e["msg"]
    for opening, said in _SAID:
        if message.startswith(opening):
            message = said + message[len(opening):]
    message = _TYPES.get(e["type"], message)
    return f"{where}: {field} = {_value(e['input'])}: {message}"


def require_object(data, where: str, what: str) -> None:
    """:class:`BadInput` unless ``data`` is a JSON object; ``what`` names the document it should be."""
    if not isinstance(data, dict):
        raise BadInput(f"{where}: must hold a JSON object ({what}), got a JSON {type(data).__name__}")


def validate(model: type[M], data, where: str) -> M:
    """``data`` as ``model``, else :class:`BadInput` with :func:`one_line`."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise BadInput(one_line(error, where, model)) from None


def interval(pair: list[float], what: str = "interval") -> list[float]:
    """A validator's check that ``[low, high]`` has ``low <= high``."""
    if pair[0] > pair[1]:
        raise ValueError(f"must be an {what} [low, high] with low <= high")
    return pair


__all__ = ["require_object", "STRICT", "Schema", "Number", "Text", "Pair", "one_line", "validate", "interval"]
