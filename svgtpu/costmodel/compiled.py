"""The compiled evidence the model prices TPU attention with: ``figures/compiled_tiles.json``.

The kernel benchmark (``svgtpu bench compiled``, notebook 04) reads the real TPU compiler's static
schedules and writes one file (provenance ``compiled-v6e`` / ``compiled-v7x``) with

- ``probe``, per device: the MXUs one TensorCore uses, their columns, the bf16 flops it retires per
  cycle, and the clock the published peak implies (``peak / (cores x flops per cycle)``), with sources;
- ``tiles``, per device, kernel (``ours``, ``splash``, ``tokamax``) and tile shape: the static cycles
  of a full tile body, a tile masked only by the padded keys of the last kv tile (``padding_partial``),
  a tile the mask cuts (``mask_partial``), the one body every tile runs when a kernel's fast path is
  off and the mask cuts no tile (``masked``: the mask read in the kernel on all of a tile's keys), a grid step that skips its body (``empty_step``), the code
  every grid step runs (``step_overhead``) and a q row's init + finish (``init_finish``); the MXU
  roofline of one tile and the HBM bytes a step moves.  A value is ``null`` where the kernel has no
  such body, or ``{"refused": reason}`` where the compiler refused it;
- ``fixed_max``, per device and tile: our kernel's fixed-maximum bodies (:class:`FixedMaxTile`,
  :mod:`svgtpu.compiler.fixed_m`), the production tile and the tile of MaxDiffusion's fixed-M dense control.

This module only reads that file (no JAX): :func:`load_compiled` validates it once at the boundary,
:func:`default_compiled` is the file the model uses when nothing else is given (``None`` when it does
not exist yet: the model then prices with priors and says so).  Cycle counts are static bundles: the
compiler's issue schedule before any memory stall, so the calibration still has something to absorb.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

from svgtpu.facts.kernels import KERNELS as ALL_KERNELS, kernel_names
from svgtpu.facts.results import figures_dir
from svgtpu.errors import BadInput
from svgtpu.geometry import Tile

COMPILED_TILES_NAME = "compiled_tiles.json"
#: The attention kernels the table covers, and whether each has a mask-free body for full tiles (views of
#: :data:`svgtpu.facts.kernels.KERNELS`; JAX's Splash has none: every block pays the masking once any is partial).
KERNELS = kernel_names(compiled=True)
HAS_FAST_PATH = {name: ALL_KERNELS[name].fast_path for name in ALL_KERNELS}
#: Tile fields in cycles: a body, a step, a row.
CYCLE_FIELDS = ("full", "padding_partial", "mask_partial", "masked", "empty_step", "step_overhead", "init_finish")


def _cycles(value, where: str):
    """A cycle count, or ``None`` for a body that is absent or refused."""
    if value is None or isinstance(value, dict) and "refused" in value:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{where} must be a cycle count >= 0, null or {{\"refused\": reason}}, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Probe:
    """What the compiler shows of one TensorCore of ``device``: MXUs, flops per cycle, the implied clock."""

    device: str
    mxus_per_core: int
    mxu_columns: int
    flops_per_cycle: float          # bf16 flops one core retires per cycle at full MXU fill
    published_peak_tflops_per_chip: float
    cores_per_chip: int
    clock_ghz: float                # published peak / (cores x flops per cycle)
    sources: tuple
    provenance: str

    def __post_init__(self):
        for field in ("mxus_per_core", "mxu_columns", "flops_per_cycle", "published_peak_tflops_per_chip",
                      "cores_per_chip", "clock_ghz"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"compiled probe {self.device}: {field} must be positive, got {value!r}")
        implied = self.published_peak_tflops_per_chip * 1e12 / (self.cores_per_chip * self.flops_per_cycle) / 1e9
        if abs(implied - self.clock_ghz) > 1e-3 * implied:
            raise ValueError(f"compiled probe {self.device}: clock_ghz {self.clock_ghz} is not peak / (cores x flops "
                             f"per cycle) = {implied:.4f}")

    @property
    def clock_hz(self) -> float:
        return self.clock_ghz * 1e9

    def same_core(self, other: "Probe") -> bool:
        """Both devices' cores show the same MXUs: count, columns and flops per cycle."""
        return (self.mxus_per_core, self.mxu_columns, self.flops_per_cycle) == \
            (other.mxus_per_core, other.mxu_columns, other.flops_per_cycle)


#: The table prices a tile it does not hold with the row of the same kernel whose ``block_q`` is the nearest
#: multiple of 128 (same ``block_kv``), at most this many query rows away, per score: the published TPU runs
#: use MaxDiffusion's 3024 x 2048 (``published.json``), the table holds the production tile (its block_q rounded up), whose
#: bodies are straight-line code over the q block.  Without it those runs would be priced by the priors
#: (our kernel's jaxpr work per score standing in for Splash's and tokamax's).
NEIGHBOUR_ROWS = 128


@dataclasses.dataclass(frozen=True)
class CompiledTile:
    """Static cycles of one kernel at one tile shape, as the compiler scheduled it (module doc)."""

    device: str
    kernel: str
    resolution: str
    L: int
    block_q: int
    block_kv: int
    head_dim: int
    dtype: str
    full: float | None
    padding_partial: float | None
    mask_partial: float | None
    masked: float | None
    empty_step: float | None
    step_overhead: float | None
    init_finish: float | None
    roofline_tile: float | None
    hbm_bytes_per_step: float | None
    provenance: str

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"compiled tile: kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}")

    @property
    def key(self) -> tuple:
        return self.kernel, self.block_q, self.block_kv, self.head_dim, self.dtype

    @property
    def usable(self) -> bool:
        """Every body the pricing rule may need was compiled (``empty_step``/``init_finish`` may be absent: 0)."""
        return None not in (self.full, self.padding_partial, self.mask_partial, self.step_overhead)

    def partial_body(self, mask_cuts_tiles: bool) -> float:
        """The body a partial tile runs: one the mask cuts, or one masked only by the padded keys."""
        return self.mask_partial if mask_cuts_tiles else self.padding_partial

    def at_tile(self, tile: Tile) -> "CompiledTile":
        """This row for a neighbouring tile (:data:`NEIGHBOUR_ROWS`): the bodies (and the roofline and HBM
        bytes of a step) scaled by the tile's area, i.e. the same cycles per score; the per-step and per-row
        costs as compiled."""
        block_q, block_kv = tile
        scale = block_q * block_kv / (self.block_q * self.block_kv)
        bodies = {f: getattr(self, f) * scale for f in ("full", "padding_partial", "mask_partial", "masked",
                                                        "roofline_tile", "hbm_bytes_per_step")
                  if getattr(self, f) is not None}
        return dataclasses.replace(self, block_q=block_q, block_kv=block_kv, **bodies,
                                   provenance=f"{self.provenance} (its {self.block_q}x{self.block_kv} row per score)")

    @property
    def efficiency(self) -> float | None:
        """The kernel's attention efficiency in the compiled schedule: a full tile's MXU roofline over its
        full body (the share of the MXU peak a mask-free tile reaches), ``None`` without both."""
        return self.roofline_tile / self.full if self.roofline_tile and self.full else None

    def masked_body(self, mask_cuts_tiles: bool) -> float:
        """The body every tile runs with the fast path off: one the mask cuts, else the masked body of a
        whole tile (tables without ``masked`` were written when that was the padding-partial body: our
        kernel now skips the padded key chunks of the last kv tile, so its padding-partial body is shorter)."""
        if mask_cuts_tiles:
            return self.mask_partial
        return self.masked if self.masked is not None else self.padding_partial


@dataclasses.dataclass(frozen=True)
class FixedMaxTile:
    """Our kernel's fixed-maximum bodies at one tile (``KernelConfig.fixed_max``, ``docs/fixed_max.md``): static
    cycles of its full and partial bodies, the running-maximum full body of the same program, the per-step code,
    a row's init + finish and the fixed-maximum pass per head (``fixed_max`` rows of the file)."""

    device: str
    resolution: str
    L: int
    block_q: int
    block_kv: int
    block_kv_compute: int
    head_dim: int
    dtype: str
    full: float
    padding_partial: float | None
    mask_partial: float | None
    running_full: float | None
    step_overhead: float
    init_finish: float
    pass_cycles: float
    roofline_tile: float
    provenance: str


@dataclasses.dataclass(frozen=True)
class CompiledTable:
    """The whole file: probes by device, tile rows, our fixed-maximum rows, and what produced them."""

    probes: tuple
    tiles: tuple
    versions: tuple         # (("jax", ...), ("libtpu", ...))
    command: str
    path: str
    fixed_tiles: tuple = ()

    def fixed(self, device: str, tile: Tile, head_dim: int, dtype: str = "bfloat16") -> FixedMaxTile | None:
        """Our fixed-maximum row for ``device`` at this tile, ``None`` where the table has none."""
        return next((t for t in self.fixed_tiles if (t.device, t.block_q, t.block_kv, t.head_dim, t.dtype)
                     == (device, *tile, head_dim, dtype)), None)

    def probe(self, device: str) -> Probe | None:
        return next((p for p in self.probes if p.device == device), None)

    def tile(self, device: str, kernel: str, tile: Tile, head_dim: int,
             dtype: str = "bfloat16") -> tuple[CompiledTile, str] | None:
        """The row for ``device`` at this tile, and where it comes from; a device without rows of its own
        borrows those of a device whose probe reads the same core (same MXUs, columns and flops per
        cycle), and says so.  ``None``: no usable row (the model then prices with priors)."""
        block_q, block_kv = tile
        want = (kernel, block_q, block_kv, head_dim, dtype)
        if any(t.key == want for t in self.tiles):   # held (a refused compile stays refused)
            return self._tile(device, want)
        # a tile the table does not hold: the nearest row of the same kernel in block_q, per score
        near = sorted({t.block_q for t in self.tiles if t.key == (kernel, t.block_q, block_kv, head_dim, dtype)
                       and 0 < abs(t.block_q - block_q) <= NEIGHBOUR_ROWS}, key=lambda bq: abs(bq - block_q))
        for bq in near:
            found = self._tile(device, (kernel, bq, block_kv, head_dim, dtype))
            if found:
                row = found[0].at_tile(tile)
                return row, found[1].replace(found[0].provenance, row.provenance)
        return None

    def _tile(self, device: str, want: tuple) -> tuple[CompiledTile, str] | None:
        rows = [t for t in self.tiles if t.key == want and t.usable]
        own = [t for t in rows if t.device == device]
        if own:
            return own[0], own[0].provenance
        mine = self.probe(device)
        for t in rows:
            theirs = self.probe(t.device)
            if mine is not None and theirs is not None and mine.same_core(theirs):
                return t, f"{t.provenance} (the {device} probe reads the same core)"
        return None


def _probe(row: dict) -> Probe:
    sources = row.get("sources") or ()
    if not sources:
        raise ValueError(f"compiled probe {row.get('device')!r} must cite its sources")
    return Probe(row["device"], row["mxus_per_core"], row["mxu_columns"], row["flops_per_cycle"],
                 row["published_peak_tflops_per_chip"], row["cores_per_chip"], row["clock_ghz"], tuple(sources),
                 row["provenance"])


def _tile(row: dict) -> CompiledTile:
    where = f"compiled tile {row.get('device')}/{row.get('kernel')} {row.get('block_q')}x{row.get('block_kv')}"
    fields = {f: _cycles(row.get(f), f"{where}: {f}") for f in CYCLE_FIELDS + ("roofline_tile", "hbm_bytes_per_step")}
    return CompiledTile(row["device"], row["kernel"], row["resolution"], int(row["L"]), int(row["block_q"]),
                        int(row["block_kv"]), int(row["head_dim"]), row["dtype"], provenance=row["provenance"], **fields)


def _fixed_tile(row: dict) -> FixedMaxTile | None:
    """A ``fixed_max`` row (``None`` where its dense program was refused: no full body)."""
    where = f"compiled fixed-max tile {row.get('device')} {row.get('block_q')}x{row.get('block_kv')}"
    cycles = {f: _cycles(row.get(f), f"{where}: {f}") for f in (
        "full", "padding_partial", "mask_partial", "running_full", "step_overhead", "init_finish", "pass_cycles",
        "roofline_tile")}
    if None in (cycles["full"], cycles["step_overhead"], cycles["init_finish"], cycles["pass_cycles"]):
        return None
    return FixedMaxTile(row["device"], row["resolution"], int(row["L"]), int(row["block_q"]), int(row["block_kv"]),
                        int(row["block_kv_compute"]), int(row["head_dim"]), row["dtype"], provenance=row["provenance"],
                        **cycles)


def load_compiled(path: str | os.PathLike) -> CompiledTable:
    """The compiled tile table at ``path``, checked by its schema (:mod:`svgtpu.inputs.records`: one line of
    :class:`BadInput` naming the field, the value and what is allowed)."""
    from svgtpu.inputs.records import compiled_tile_table
    path = Path(path)
    data = compiled_tile_table("compiled tile table", path)
    return CompiledTable(tuple(_probe(p) for p in data["probe"]), tuple(_tile(t) for t in data["tiles"]),
                         (("jax", data.get("jax")), ("libtpu", data.get("libtpu"))), data.get("command", ""), str(path),
                         tuple(t for t in map(_fixed_tile, data.get("fixed_max") or ()) if t))


def compiled_path() -> Path | None:
    """``$SVGTPU_COMPILED_TILES`` if set (checked as ``--compiled-tiles`` is; ``none``: no table, ``None``), else
    ``compiled_tiles.json`` in the figures folder."""
    from svgtpu.inputs.environment import NO_TABLE, variable
    if os.environ.get("SVGTPU_COMPILED_TILES") == NO_TABLE:
        return None
    return variable("SVGTPU_COMPILED_TILES") or figures_dir() / COMPILED_TILES_NAME


@functools.lru_cache(maxsize=4)
def _cached(path: str, mtime: float) -> CompiledTable:
    return load_compiled(path)


def default_compiled() -> CompiledTable | None:
    """The table the model uses unless told otherwise (:func:`compiled_path`), or ``None`` if absent."""
    path = compiled_path()
    if path is None or not path.exists():
        return None
    return _cached(str(path), path.stat().st_mtime)


#: The ``compiled`` argument that means "the default table, if the file exists" (:func:`resolve`).
AUTO = "auto"


def resolve(compiled) -> CompiledTable | None:
    """``compiled`` itself, or :func:`default_compiled` for :data:`AUTO`."""
    return default_compiled() if isinstance(compiled, str) and compiled == AUTO else compiled


__all__ = ["AUTO", "resolve", "COMPILED_TILES_NAME", "KERNELS", "HAS_FAST_PATH", "Probe", "CompiledTile", "FixedMaxTile",
           "CompiledTable", "load_compiled",
           "compiled_path", "default_compiled"]
