"""What bounds a static VLIW schedule: the fewest cycles each unit of a TensorCore needs for it.

A ``final_bundles`` schedule (:mod:`svgtpu.compiler.llo`) issues one bundle per cycle; each bundle
holds the instructions of several units side by side.  For each unit we count its instructions in
the bundles and divide by how many it takes per cycle: the cycles the unit alone would need.  The
largest of them is the unit that *binds*; the schedule's bundle count over it says how well the
packer overlapped the rest.

- **mxu**: the cycles of the matmul pushes (``vmatmul``) on the busiest MXU (``mxu0``, ``mxu1``, ...):
  one bf16 push carries 16 rows of at most 256 contraction elements into a 256-column array, and the
  compiler keeps such pushes on one MXU :attr:`Core.push_interval` bundles apart in a steady run (the
  probe, :mod:`svgtpu.compiler.probe`); an f32 push (``vmatmul.*.f32``, a float32 left operand at default
  precision) carries 8 rows and takes half as long (4 bundles apart in the same probe with an f32
  operand).  A push that fills only part of the array (a contraction or output width of 128, as
  attention's ``QK^T`` and ``PV`` at ``head_dim`` 128) costs a whole push.
- **vector_load** / **vector_store**: ``vld`` / ``vst`` over the slots of each kind in a bundle;
- **valu**: the other vector arithmetic (``vadd``, ``vmul``, ``vmax``, ``vsel``, compares, ``vpack``,
  ...) over the vector-ALU slots; mask-register logic (``vmand``, ``vmor``, ...) issues in slots of its
  own and is counted apart (``mask``);
- **eup**: transcendental pushes (``vpow2``, ``vrcp``, ...) and their result pops, one each a bundle;
- **xlu**: cross-lane ops (``vmax.xlane``, ...) and their pops on the busiest XLU, one a bundle.

The slot widths are the most instructions of a kind the compiler packs into one bundle (read off the
probe's schedules, :data:`CORES`); a schedule that packs more is refused, so the table cannot silently
understate a unit.  ``roofline`` is ``flops / Core.flops_per_cycle``, the MXU at full fill.

**Static bundles are not latency**: they are the compiler's cycle count before any stall on memory
(DMA waits, HBM bandwidth) or on a unit the schedule does not model; keep the HBM bytes beside them.
Provenance ``compiled-v6e`` / ``compiled-v7x``: read from what the compiler produced, nothing run.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter

from svgtpu.costmodel.specs import DEVICES, Mxu
from svgtpu.errors import BadInput

#: The units whose minimum cycles :class:`UnitCycles` carries, in table order.
UNITS = ("mxu", "vector_load", "vector_store", "valu", "eup", "xlu")
_UNIT_ID = re.compile(r"\.(mxu|xlu)(\d+)")
_MASK_OPS = ("vmand", "vmor", "vmxor", "vmnot", "vmmov")
_EUP_OPS = ("vpow2", "vexp", "vrcp", "vrsqrt", "vtanh", "vlog2", "vsigmoid")


@dataclasses.dataclass(frozen=True)
class Core:
    """One TensorCore as its static schedules show it: its MXUs (the device spec's one definition,
    :class:`svgtpu.costmodel.specs.Mxu`, checked against the schedule by the probe) and the issue slots
    per bundle of each vector unit (read off compiled probes)."""

    device: str
    mxu: Mxu
    slots: tuple            # ((kind, most per bundle), ...) for vector_load, vector_store, valu, mask, eup, eup_pop

    @property
    def mxus(self) -> int:
        return self.mxu.count

    @property
    def mxu_columns(self) -> int:
        return self.mxu.columns

    @property
    def push_interval(self) -> int:
        """Bundles between pushes on one MXU in a steady run."""
        return self.mxu.push_interval

    @property
    def flops_per_cycle(self) -> int:
        """bf16 flops one core's MXUs retire per cycle at full fill."""
        return self.mxu.flops_per_cycle

    def slot(self, kind: str) -> int:
        return dict(self.slots)[kind]


_SLOTS = (("vector_load", 3), ("vector_store", 2), ("valu", 4), ("mask", 2), ("eup", 1), ("eup_pop", 1))
#: The TPUs whose schedules we read: their MXUs from the device spec, the same slots (v6e and v7x).
CORES = {device: Core(device, mxu=DEVICES[device].mxu, slots=_SLOTS) for device in ("v6e", "v7x")}


def core(device: str) -> Core:
    """The :class:`Core` of ``device`` (``v6e``, ``v7x``); one clear line otherwise."""
    if device not in CORES:
        raise BadInput(f"device must be one of {', '.join(CORES)} (the TPUs whose schedules we read), got {device!r}")
    return CORES[device]


def slot_of(op: str) -> str:
    """What one scheduled instruction occupies: ``mxu``, ``mxu_other`` (operand prep, weight loads,
    result pops), ``vector_load``, ``vector_store``, ``valu``, ``mask``, ``eup``, ``eup_pop``, ``xlu``,
    ``xlu_pop``, ``scalar`` (scalar ALU, branches, DMA, sync) or ``phi`` (a loop's value merge: no slot)."""
    base = op.split(".")[0]
    if base in ("vphi", "sphi", "phi"):
        return "phi"
    if base.startswith("vmatmul"):
        return "mxu"
    if base.startswith(("vmatprep", "vmatpush", "vlatch", "vdwg")) or ".mrf" in op or ".mrb" in op:
        return "mxu_other"
    if op.startswith("vpop.eup"):
        return "eup_pop"
    if base in _EUP_OPS:
        return "eup"
    if base == "vpop" and ("xlane" in op or ".xlu" in op):
        return "xlu_pop"
    if "xlane" in op or ".xlu" in op or base in ("vrot", "vperm", "vxpose"):
        return "xlu"
    if base == "vld":
        return "vector_load"
    if base == "vst":  # (``vstv`` broadcasts a scalar into a vreg: vector arithmetic)
        return "vector_store"
    if base in _MASK_OPS:
        return "mask"
    return "valu" if base.startswith("v") else "scalar"


@dataclasses.dataclass(frozen=True)
class UnitCounts:
    """Instructions by slot kind (:func:`slot_of`) over some bundles, MXU pushes and XLU ops per unit
    id; adds up and scales (a loop body times its trip count)."""

    bundles: int
    slots: tuple            # ((kind, count), ...)
    pushes: tuple           # pushes on mxu0, mxu1, ...
    xlu_ops: tuple          # cross-lane ops (and their pops) on xlu0, xlu1, ...
    push_cycles: tuple = ()  # cycles of the pushes on mxu0, mxu1, ... (bf16: the push interval; f32: half)

    def __add__(self, other: UnitCounts) -> UnitCounts:
        def add(a, b):
            n = max(len(a), len(b))
            return tuple(x + y for x, y in zip(a + (0,) * (n - len(a)), b + (0,) * (n - len(b))))
        slots = Counter(dict(self.slots)) + Counter(dict(other.slots))
        return UnitCounts(self.bundles + other.bundles, tuple(sorted(slots.items())), add(self.pushes, other.pushes),
                          add(self.xlu_ops, other.xlu_ops), add(self.push_cycles, other.push_cycles))

    def times(self, n: int) -> UnitCounts:
        return UnitCounts(self.bundles * n, tuple((k, c * n) for k, c in self.slots), tuple(p * n for p in self.pushes),
                          tuple(x * n for x in self.xlu_ops), tuple(p * n for p in self.push_cycles))

    def count(self, kind: str) -> int:
        return dict(self.slots).get(kind, 0)


def count_units(bundles, device: str = "v6e") -> UnitCounts:
    """:class:`UnitCounts` of ``bundles`` (each a sequence of instruction names, as
    :func:`svgtpu.compiler.llo.parse_bundles` gives them); refuses a bundle that packs more of a kind than
    ``device``'s :class:`Core` allows."""
    c = core(device)
    limits = dict(c.slots)
    slots, pushes, xlu, push_cycles = Counter(), Counter(), Counter(), Counter()
    n = 0
    for ops in bundles:
        n += 1
        here = Counter()
        for op in ops:
            kind = slot_of(op)
            here[kind] += 1
            if kind in ("mxu", "xlu", "xlu_pop"):
                unit = _UNIT_ID.search(op)
                index = int(unit.group(2)) if unit else 0
                (pushes if kind == "mxu" else xlu)[index] += 1
                if kind == "mxu":
                    push_cycles[index] += c.push_interval // 2 if ".f32" in op else c.push_interval
        for kind, count in here.items():
            if kind in limits and count > limits[kind]:
                raise RuntimeError(f"a {device} bundle packs {count} {kind} instructions, more than the {limits[kind]} "
                                   f"svgtpu.compiler.units.CORES allows: the slot table is wrong ({' ;; '.join(ops)})")
        slots.update(here)

    def per_unit(counter):
        return tuple(counter[i] for i in range(max(counter) + 1)) if counter else ()
    return UnitCounts(n, tuple(sorted(slots.items())), per_unit(pushes), per_unit(xlu), per_unit(push_cycles))


@dataclasses.dataclass(frozen=True)
class UnitCycles:
    """Static bundles of a schedule and the fewest cycles each unit needs for it (module doc);
    ``roofline``: flops at the MXU's full-fill peak (``None`` without flops)."""

    device: str
    bundles: int
    mxu: int
    vector_load: int
    vector_store: int
    valu: int
    eup: int
    xlu: int
    roofline: float | None = None
    pushes: tuple = ()      # per MXU
    counts: tuple = ()      # ((slot kind, instructions), ...)

    def binding(self) -> str:
        """The unit that needs the most cycles (ties: the first in :data:`UNITS`)."""
        return max(UNITS, key=lambda u: getattr(self, u))

    @property
    def bound(self) -> int:
        """Cycles of the binding unit: no schedule of these instructions can be shorter."""
        return getattr(self, self.binding())

    @property
    def mxu_share(self) -> float:
        """Share of the bundles the busiest MXU is pushing: 1.0 when the MXU alone sets the length."""
        return self.mxu / self.bundles if self.bundles else 0.0

    @property
    def peak_share(self) -> float | None:
        """``roofline / bundles``: the share of the MXU's full-fill peak these bundles reach."""
        return None if self.roofline is None or not self.bundles else self.roofline / self.bundles

    def as_dict(self) -> dict:
        return {"device": self.device, "bundles": self.bundles, **{u: getattr(self, u) for u in UNITS},
                "binding": self.binding(), "roofline": self.roofline, "mxu_share": self.mxu_share,
                "peak_share": self.peak_share, "pushes": list(self.pushes), "counts": dict(self.counts)}


def cycles_of(counts: UnitCounts, flops: float | None = None, device: str = "v6e", bundles: int | None = None) -> UnitCycles:
    """:class:`UnitCycles` from :class:`UnitCounts` (``bundles``: the static cycles when they differ
    from the counted bundles, e.g. a body whose nested loop runs several times)."""
    c = core(device)

    def over(kind):
        return math.ceil(counts.count(kind) / c.slot(kind))
    return UnitCycles(
        device=device, bundles=counts.bundles if bundles is None else bundles,
        mxu=max(counts.push_cycles, default=0),
        vector_load=over("vector_load"), vector_store=over("vector_store"), valu=over("valu"),
        eup=max(over("eup"), over("eup_pop")), xlu=max(counts.xlu_ops, default=0),
        roofline=None if flops is None else flops / c.flops_per_cycle,
        pushes=counts.pushes, counts=counts.slots)


def unit_cycles(bundles, flops: float | None = None, device: str = "v6e") -> UnitCycles:
    """The :class:`UnitCycles` of ``bundles`` (each a sequence of instruction names, as
    :func:`svgtpu.compiler.llo.parse_bundles` gives them) on ``device``; ``flops`` gives the roofline."""
    return cycles_of(count_units(bundles, device), flops, device)


def kernel_unit_cycles(fn, *args, device: str = "v6e", flops: float | None = None) -> dict[str, UnitCycles]:
    """Compile ``fn(*args)`` (a function holding Pallas TPU kernels; ``args`` arrays or
    ``ShapeDtypeStruct``s) ahead of time for one core of ``device`` and return the
    :class:`UnitCycles` of each kernel's whole static program, by kernel name (every bundle once:
    a grid loop's body counts once).  ``flops`` sets the roofline when there is one kernel.  Small
    kernels take seconds; needs libtpu."""
    from svgtpu.compiler.dumps import kernel_schedules
    core(device)
    schedules = kernel_schedules(fn, *args, device=device)
    from svgtpu.compiler.llo import parse_bundles
    return {name: unit_cycles(parse_bundles(text), flops if len(schedules) == 1 else None, device)
            for name, text in schedules.items()}


__all__ = ["UNITS", "CORES", "Core", "core", "slot_of", "UnitCounts", "count_units", "UnitCycles", "cycles_of",
           "unit_cycles", "kernel_unit_cycles"]
