"""A TPU attention kernel's realized over static time, from published measured kernel times: the instrument for
``Efficiency.attention`` (docs/plausibility.md, "Attention realized over static").

A published kernel time whose chip, shape and tile are stated (:class:`KernelRun`) is set beside the static time the
model prices the same call at: :func:`call_cycles`, the one count :mod:`~svgtpu.costmodel.sparse_layers` prices
MaxDiffusion's attention calls with (the compiled body of the kernel family, its per-step code, its row init and
finish), at the chip's clock.  ``realized over static = static seconds / published seconds``: what
``Efficiency.attention`` stands for (1: the call takes its static schedule).  Each kernel family the model prices has
its own (:data:`FAMILIES`): ``online`` (an online-softmax body: ours, Splash, tokamax, MaxDiffusion's SVG kernel, all
priced from our compiled online-softmax body) and ``fixed-m`` (MaxDiffusion's fixed-M dense calls, priced from our
compiled fixed-maximum body, ``docs/fixed_max.md``).

The runs: MaxDiffusion's fixed-M pull request (https://github.com/AI-Hypercomputer/maxdiffusion/pull/452, merged as
14f1669b; the timing in its commit 8dd630549ce1's message) times one ring hop of its Ulysses x ring attention kernel
inside a Wan 2.2 A14B 720p 81-frame denoise on v7x-8 (data 2 x ring 2 x Ulysses 2, CFG folded into the batch), for
the online-softmax kernel at 9472 x 1024 and the fixed-M kernel at 6400 x 2048 (the calibration run's dense tile),
``block_kv_compute`` = ``block_kv`` and ``block_kv_compute_in`` 1024 (``run_wan_fast_inference.sh`` at that commit).
One hop is one kernel call on one device: the Ulysses group's heads over the ring shard's queries and its keys.
Our bodies run the inner step of 256 keys (1024 needs more VMEM than our kernel's budget on v7x: the compile
refuses), and the fixed-maximum pass is not in the hop (MaxDiffusion computes its bound outside the kernel): the
ratio measures the model's pricing of the call, not one program's realized schedule.

JAX-free: the compiled tile table is read from its committed file.
"""

from __future__ import annotations

import dataclasses
import functools

from svgtpu.costmodel.compiled import CompiledTable
from svgtpu.costmodel.plausible import ATTENTION_REALIZED
from svgtpu.costmodel.specs import get_device
from svgtpu.costmodel.workload import get_model
from svgtpu.errors import BadInput
from svgtpu.geometry import Tile, ceil_div, get_geometry
from svgtpu.recipes import MAXDIFFUSION_REPO, Source
from svgtpu.setting import PRODUCTION

#: The kernel families the model prices, each with its own realized over static time.
FAMILIES = ("online", "fixed-m")

PR452 = Source(MAXDIFFUSION_REPO, "end_to_end/tpu/run_wan_fast_inference.sh", "8dd630549ce1cb55e167a66102dcc3aef4cc1926",
               "commit message: 720p 81f T2V, 40 steps, v7x-8, dp2 x (ring2 x uly2): 'In-kernel the ring hop goes "
               "22.65 -> 21.15 ms' (ulysses_ring_custom 9472/1024 -> ulysses_ring_custom_fixed_m 6400/2048); the "
               "script: block_kv_compute = block_kv, block_kv_compute_in 1024, Wan 2.2 (base_wan_27b.yml)")


@dataclasses.dataclass(frozen=True)
class KernelRun:
    """One published, measured TPU attention-kernel call: the kernel family the model prices it as, the chip, the
    model and video whose attention it ran, how the run split it (queries over ``ring``, heads over ``ulysses``:
    one call is one ring hop), the tile and the measured seconds of one call on one device."""

    name: str
    family: str
    device: str
    model: str
    resolution: str
    ring: int
    ulysses: int
    block_q: int
    block_kv: int
    seconds: float
    source: Source

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise BadInput(f"family must be one of {', '.join(FAMILIES)}, got {self.family!r}")

    @property
    def shape(self) -> dict:
        """Heads, queries and keys of one call on one device."""
        L = get_geometry(self.resolution).L
        return {"heads": get_model(self.model).heads // self.ulysses, "queries": ceil_div(L, self.ring),
                "keys": ceil_div(L, self.ring)}


#: The published runs, one per family (:data:`PR452`).
RUNS = (KernelRun("maxdiffusion-pr452-ring-hop-online", "online", "v7x", "wan2.2-a14b", "720p", 2, 2, 9472, 1024,
                  22.65e-3, PR452),
        KernelRun("maxdiffusion-pr452-ring-hop-fixed-m", "fixed-m", "v7x", "wan2.2-a14b", "720p", 2, 2, 6400, 2048,
                  21.15e-3, PR452))


def fixed_row(compiled: CompiledTable, device: str, tile: Tile, head_dim: int, dtype: str):
    """Our compiled fixed-maximum row at ``tile`` for ``device``, or the production tile's priced per score at that
    tile; one clear line where the table has neither."""
    block_q, block_kv = tile
    row = compiled.fixed(device, tile, head_dim, dtype) if compiled else None
    if row is None and compiled:
        near = compiled.fixed(device, PRODUCTION.tile, head_dim, dtype)
        if near is not None:
            scale = block_q * block_kv / (near.block_q * near.block_kv)
            row = dataclasses.replace(near, block_q=block_q, block_kv=block_kv, full=near.full * scale,
                                      roofline_tile=near.roofline_tile * scale)
    if row is None:
        raise BadInput(f"pricing a fixed-M kernel needs the compiled tile table's fixed_max row for {device} "
                       f"(`svgtpu reproduce --only 04 --profile cpu` writes it)")
    return row


def online_row(compiled: CompiledTable, device: str, kernel: str, head_dim: int, dtype: str):
    """``kernel``'s compiled row at the production tile for ``device`` (its bodies priced per score at any tile);
    one clear line where the table has none."""
    found = compiled.tile(device, kernel, PRODUCTION.tile, head_dim, dtype) if compiled else None
    if not found:
        raise BadInput(f"pricing an online-softmax kernel needs the compiled tile table's {device} rows at the "
                       "production tile (`make figures` writes figures/compiled_tiles.json)")
    return found[0]


def call_cycles(compiled: CompiledTable, device: str, family: str, tile: Tile, queries: int, keys: int,
                head_dim: int = 128, dtype: str = "bfloat16") -> float:
    """Static cycles of one head of one call (a grid of ``queries / block_q`` rows by ``keys / block_kv`` steps) of a
    ``family`` kernel (:data:`FAMILIES`): every step its full body and step code, every row its init and finish;
    ``fixed-m`` at our fixed-maximum body (the pass that computes the maxima apart), ``online`` at our
    online-softmax full body per score."""
    block_q, block_kv = tile
    rows, cols = ceil_div(queries, block_q), ceil_div(keys, block_kv)
    if family == "fixed-m":
        row = fixed_row(compiled, device, tile, head_dim, dtype)
        return rows * cols * (row.full + row.step_overhead) + rows * row.init_finish
    if family == "online":
        row = online_row(compiled, device, "ours", head_dim, dtype)
        body = row.full / (row.block_q * row.block_kv) * block_q * block_kv
        return rows * cols * (body + row.step_overhead) + rows * (row.init_finish or 0.0)
    raise BadInput(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")


def run_reading(run: KernelRun, compiled: CompiledTable) -> dict:
    """``run`` beside the static seconds the model prices its call at: the realized over static time."""
    shape = run.shape
    device = get_device(run.device, compiled)
    cycles = call_cycles(compiled, run.device, run.family, Tile(run.block_q, run.block_kv), shape["queries"],
                         shape["keys"], get_model(run.model).head_dim)
    static = shape["heads"] * cycles / device.clock_hz
    return {"run": run.name, "family": run.family, "device": run.device, **shape, "block_q": run.block_q,
            "block_kv": run.block_kv, "published_s": run.seconds, "static_s": static,
            "realized_over_static": static / run.seconds, "bounds": ATTENTION_REALIZED,
            "inside": ATTENTION_REALIZED[0] <= static / run.seconds <= ATTENTION_REALIZED[1],
            "source": run.source.cite(), "provenance": f"computed: compiled-{run.device} cycles over a published "
                                                       "measured-tpu time"}


@functools.lru_cache(maxsize=8)
def readings(compiled: CompiledTable) -> dict[str, dict | None]:
    """:func:`run_reading` of each of :data:`RUNS`, by family; ``None`` for a run whose chip the table holds no rows
    of (an older or a test table: the instrument cannot be read from it)."""
    out = {}
    for run in RUNS:
        try:
            out[run.family] = run_reading(run, compiled)
        except BadInput:
            out[run.family] = None
    return out


def realized_over_static(family: str, compiled: CompiledTable | None) -> float:
    """``family``'s realized over static time from its published run; 1 (as compiled) without the compiled table
    (the model then prices attention from priors), where the table cannot price the run (:func:`readings`), and
    where the reading leaves its plausible range (:data:`~svgtpu.costmodel.plausible.ATTENTION_REALIZED`, written
    before it was applied: such a reading is shown, ``inside`` false, never applied; ``tests/test_plausible.py``
    holds the committed table's inside)."""
    reading = readings(compiled)[family] if compiled is not None else None
    return reading["realized_over_static"] if reading is not None and reading["inside"] else 1.0


__all__ = ["FAMILIES", "PR452", "KernelRun", "RUNS", "fixed_row", "online_row", "call_cycles", "run_reading",
           "readings", "realized_over_static"]
