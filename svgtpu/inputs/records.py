"""The compile records: the compiled tile table (``figures/compiled_tiles.json``, ``--compiled-tiles``,
``$SVGTPU_COMPILED_TILES``) and the content-keyed records of each compile (``figures/compiled/``, ``build/compiled/``).

The tile table's rows hold what :func:`svgtpu.costmodel.compiled.load_compiled` reads, typed (a cycle count is a
number >= 0, ``null`` or ``{"refused": reason}``; sizes positive integers); a row may carry more of the compile's
numbers beside them.  A compile record is ``{"key", "made_of", "value"}`` gzipped: the key is 20 hex digits and
``made_of`` what it was compiled from (:func:`svgtpu.compiler.dumps.made_of`).
"""

from __future__ import annotations

import functools
import gzip
import zlib
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field

from svgtpu.errors import BadInput
from svgtpu.inputs.documents import parse_json, read_document
from svgtpu.inputs.schema import require_object, Schema, Text, validate

Size = Annotated[int, Field(ge=1, le=2**31 - 1)]
Cycles = Annotated[float, Field(ge=0)] | dict[str, str] | None


class ProbeRow(Schema):
    """The matmul probe of one device: what the static schedule's cycles are converted to FLOPs with."""

    model_config = ConfigDict(extra="allow")   # the probe's own measurements beside the numbers read
    device: Text
    provenance: Text
    mxus_per_core: Size
    mxu_columns: Size
    flops_per_cycle: Annotated[float, Field(gt=0)]
    published_peak_tflops_per_chip: Annotated[float, Field(gt=0)]
    cores_per_chip: Size
    clock_ghz: Annotated[float, Field(gt=0)]
    sources: Annotated[list[Any], Field(min_length=1)]


class TileRow(Schema):
    """One kernel's tile bodies at one tile, static cycles each."""

    model_config = ConfigDict(extra="allow")   # layout, notes and other numbers of the compile
    device: Text
    kernel: Text
    resolution: Text
    L: Size
    block_q: Size
    block_kv: Size
    head_dim: Size
    dtype: Text
    provenance: Text
    full: Cycles = None
    padding_partial: Cycles = None
    mask_partial: Cycles = None
    masked: Cycles = None
    empty_step: Cycles = None
    step_overhead: Cycles = None
    init_finish: Cycles = None
    roofline_tile: Cycles = None
    hbm_bytes_per_step: Cycles = None


class CompiledTileTable(Schema):
    """The table: the probes and tile rows read, typed; more of a compile's numbers may ride beside them."""

    model_config = ConfigDict(extra="allow")
    about: str = ""   # what a fixture is (tests/data)
    jax: str | None = None
    libtpu: str | None = None
    tokamax: str | None = None
    command: str = ""
    note: str = ""
    probe: list[ProbeRow]
    tiles: list[TileRow]


class MadeOf(Schema):
    model_config = ConfigDict(extra="allow")   # a newer record schema may say more
    description: dict[str, Any]
    sources: dict[str, str]
    versions: dict[str, str]
    libtpu_flags: str
    schema_: Annotated[int, Field(alias="schema", ge=1)]


class CompileRecord(Schema):
    key: Annotated[str, Field(pattern=r"^[0-9a-f]{20}$")]
    made_of: MadeOf
    value: Any


def compiled_tile_table(parameter: str, path) -> dict:
    """The compiled tile table in the file ``path`` (given as ``parameter``), checked; the document as it is."""
    data = read_document(parameter, path, "json", "a compiled tile table (JSON; `svgtpu bench compiled` writes one)")
    where = f"{parameter} {path}"
    require_object(data, where, "a compiled tile table")
    validate(CompiledTileTable, data, where)
    return data


def compile_record(path: str | Path, raw: bytes) -> dict:
    """The compile record ``raw`` (the gzipped bytes of ``path``), checked; a record cut short or corrupt is refused
    naming the file (delete it and the compile is made again)."""
    where = f"compile record {path}"
    try:
        text = gzip.decompress(raw).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        raise BadInput(f"{where}: not a gzipped JSON record ({error}); delete it and the compile is made again") \
            from None
    data = parse_json(text, where)
    require_object(data, where, "key, made_of, value")
    validate(CompileRecord, data, where)
    return data


@functools.lru_cache(maxsize=32)
def committed_value(path: Path) -> dict:
    """The value of the committed compile record at ``path`` (:func:`compile_record`, checked), with ``record``: the
    file's name.  Read once a process: the cost model prices every pass it models from these records."""
    return compile_record(path, path.read_bytes())["value"] | {"record": path.name}


__all__ = ["ProbeRow", "TileRow", "CompiledTileTable", "CompileRecord", "compiled_tile_table", "compile_record",
           "committed_value"]
