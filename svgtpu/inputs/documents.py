"""Reading a file the user named into a JSON-like document, refusing what no schema could see once parsed.

:func:`read_document` refuses, each in one line naming the parameter and the path: a missing file, a folder, a
device or pipe (``/dev/null`` is no config), a file that cannot be read, an empty file, a binary one (a NUL byte,
or bytes that are not UTF-8), a truncated or malformed document, a key given twice in one mapping (JSON's and
YAML's parsers keep the last, silently), and JSON's ``NaN``/``Infinity`` (not JSON; YAML's ``.inf`` parses to a
float the schemas refuse, :mod:`svgtpu.inputs.schema`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from svgtpu.errors import BadInput

#: The largest document read (bytes): every input of the package is far smaller; a bigger file is not one of them.
MAX_BYTES = 64 * 2**20
FORMATS = ("json", "yaml")


def check_input_file(parameter: str, path: str | os.PathLike) -> Path:
    """``path`` as a regular file that can be read, else :class:`BadInput` naming ``parameter`` (missing, a
    folder, a device or pipe, unreadable)."""
    if not str(path).strip():
        raise BadInput(f"{parameter} must name a file, got {str(path)!r}")
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise BadInput(f"{parameter} {path}: no such file") from None
    except OSError as error:
        raise BadInput(f"{parameter} {path}: {error.strerror or error}") from None
    if stat.S_ISDIR(mode):
        raise BadInput(f"{parameter} {path} is a folder: give a file")
    if not stat.S_ISREG(mode):
        raise BadInput(f"{parameter} {path} is not a regular file (a device or a pipe): give a file")
    if not os.access(p, os.R_OK):
        raise BadInput(f"{parameter} {path}: cannot be read (permission denied)")
    return p


def read_text(parameter: str, path: str | os.PathLike, what: str = "a text file") -> str:
    """The text of the file ``path``: refused if it is not a readable regular file (:func:`check_input_file`),
    is empty or blank, larger than :data:`MAX_BYTES`, or binary (a NUL byte, not UTF-8)."""
    p = check_input_file(parameter, path)
    if p.stat().st_size > MAX_BYTES:
        raise BadInput(f"{parameter} {path}: {p.stat().st_size} bytes, more than any {what} ({MAX_BYTES} at most)")
    try:
        raw = p.read_bytes()
    except OSError as error:
        raise BadInput(f"{parameter} {path}: {error.strerror or error}") from None
    if b"\0" in raw:
        raise BadInput(f"{parameter} {path} is a binary file, not {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInput(f"{parameter} {path} is a binary file, not {what} (byte {error.start} is not UTF-8)") from None
    if not text.strip():
        raise BadInput(f"{parameter} {path} is empty: it must hold {what}")
    return text


def _no_duplicates(where: str):
    def pairs(items):
        out = {}
        for key, value in items:
            if key in out:
                raise BadInput(f"{where}: the key {key!r} is given twice (a parser would keep the last); give it once")
            out[key] = value
        return out
    return pairs


def _no_constant(where: str):
    def refuse(name):
        raise BadInput(f"{where}: {name} is not a JSON number (JSON has no NaN or infinity); give a finite number")
    return refuse


def parse_json(text: str, where: str, allow_nan: bool = False):
    """``text`` as JSON, refusing duplicate keys, ``NaN``/``Infinity`` (unless ``allow_nan``: the package's own
    results files write NaN for a value that does not apply) and truncation, one line naming ``where``."""
    constant = {} if allow_nan else {"parse_constant": _no_constant(where)}
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(where), **constant)
    except json.JSONDecodeError as error:
        end = len(text.rstrip())
        cut = " (the file ends before the document does: truncated?)" if error.pos >= end else ""
        raise BadInput(f"{where}: not JSON, {error.msg} at line {error.lineno} column {error.colno}{cut}") from None
    except RecursionError:
        raise BadInput(f"{where}: not JSON, nested too deep") from None


def _yaml_loader():
    import yaml

    class NoDuplicates(yaml.SafeLoader):
        """PyYAML's safe loader refusing a mapping that gives one key twice (it keeps the last, silently)."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:   # an unhashable key: PyYAML's own error says so
                    break
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"the key {key!r} is given twice (a parser would keep the last); give it once",
                        key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)
    return NoDuplicates


def parse_yaml(text: str, where: str):
    """``text`` as one YAML document (safe types only), refusing duplicate keys, one line naming ``where``."""
    import yaml
    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None)
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        text = problem or str(error).splitlines()[0]
        raise BadInput(f"{where}: not YAML, {text}{at}") from None
    except RecursionError:
        raise BadInput(f"{where}: not YAML, nested too deep") from None


def read_document(parameter: str, path: str | os.PathLike, fmt: str = "json", what: str | None = None,
                  allow_nan: bool = False):
    """The document in the file ``path`` the user gave as ``parameter`` (``fmt``: json or yaml), else one line of
    :class:`BadInput` (module doc).  The document may be any JSON value: its schema says what it must be."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    what = what or f"a {fmt.upper()} document"
    text = read_text(parameter, path, what)
    where = f"{parameter} {path}"
    return parse_json(text, where, allow_nan) if fmt == "json" else parse_yaml(text, where)


def read_json(parameter: str, path: str | os.PathLike, what: str = "a JSON object", allow_nan: bool = False) -> dict:
    """The JSON object in the file ``path`` (:func:`read_document`), refusing any other JSON value (a list, a number)."""
    data = read_document(parameter, path, "json", what, allow_nan)
    if not isinstance(data, dict):
        raise BadInput(f"{parameter} {path}: must hold {what}, got a JSON {type(data).__name__}")
    return data


__all__ = ["MAX_BYTES", "FORMATS", "check_input_file", "read_text", "parse_json", "parse_yaml", "read_document",
           "read_json"]
