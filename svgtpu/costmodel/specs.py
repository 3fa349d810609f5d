"""Devices as data: the per-chip rates of each accelerator, each with its public source.

A TPU's vector rates are built from its units (:func:`tpu_spec`): the MXUs' flops per cycle and the
published peak bf16 rate give the clock (no public page states it); the clock, the vreg shape and the
issue rates of the vector ALUs and of the transcendental unit (EUP) give the VPU and EUP rates.

One definition of the MXU: every TPU spec carries its :class:`Mxu` (count, width, rows per push, push
interval), and its clock is ``published peak / (cores x Mxu.flops_per_cycle)``.  The compiler's unit reader
(:mod:`svgtpu.compiler.units`), the whole-kernel estimate and the cost model all read it from here, so the
model gives one clock with or without a compiled table: a compiled probe (:func:`with_probe`, from
``figures/compiled_tiles.json``) only *checks* the MXU against what the real compiler's schedule shows, and a
disagreement is an error to fix here, not a second clock.  v6e and v7x have two 256-wide MXUs per TensorCore by
every source we have (JAX's ``tpu_info`` lists ``num_mxus=2`` for both; Google's v6e page: two MXUs per
TensorCore), and the compiled schedules use ``mxu0`` and ``mxu1`` only, pushing 16 bf16 rows 8 bundles apart on
each (:mod:`svgtpu.compiler.probe`).  v5e and v5p have no compiled probe here: their MXU is the prior, one
multiply-accumulate per cell per cycle (``Mxu.source`` says which).

The vector issue widths are read off compiled v6e schedules (``svgtpu.compiler.units``): bundles hold up
to four vector-ALU ops, and ``vpow2`` (the exp) issues in back-to-back bundles, one vreg a cycle.
"""

from __future__ import annotations

import dataclasses
import re

from svgtpu.errors import BadInput

#: TPU vector registers hold 8 sublanes x 128 lanes of 32-bit values (Cloud TPU docs, "TPU v6e":
#: "a 128x8 vector processing unit (VPU) with 128 lanes x 8 sublanes"; JAX ``pltpu.TpuInfo``).
VREG_ELEMENTS = 8 * 128
#: Vector-ALU ops one bundle issues: four in the compiled v6e schedules of our kernel (the unit reader
#: of ``svgtpu.compiler.units`` refuses a schedule that packs more); the earlier prior of two (Hot Chips 32,
#: TPUv2/v3) is contradicted by those schedules.
VALU_SLOTS = 4
#: Cycles between two EUP pushes (exp via ``vpow2``, rsqrt, reciprocal): 1, back-to-back ``vpow2`` in the
#: compiled v6e schedules (the earlier prior of 2, from the public Pallas TPU tutorial's cycle table, is
#: contradicted by them).
EUP_CYCLES_PER_VREG = 1
#: Device families: one calibrated efficiency each (svgtpu.costmodel.validate).  GPUs are split by
#: architecture because the same kernel reaches very different shares of peak on them: FlashAttention-2
#: reaches 50-73 % of an A100's peak (FA2 paper, Dao 2023) but 35 % of an H100's (FA3 paper, Shah et al.
#: 2024, section 1).
FAMILIES = ("tpu", "hopper", "ampere", "cpu")
GPU_FAMILIES = ("hopper", "ampere")


@dataclasses.dataclass(frozen=True)
class Mxu:
    """The matrix units of one TensorCore, as its static schedules issue them."""

    count: int              # MXUs per TensorCore
    columns: int            # the systolic array's side
    push_rows: int          # bf16 rows one push carries
    push_interval: int      # cycles (bundles) between pushes on one MXU in a steady run
    source: str             # the compiled probe that shows it, or "prior"

    @property
    def flops_per_cycle(self) -> int:
        """bf16 flops one core's MXUs retire per cycle at full fill."""
        return self.count * self.push_rows * self.columns ** 2 * 2 // self.push_interval


#: v6e and v7x as the compiler schedules them (libtpu 0.0.42.1, :mod:`svgtpu.compiler.probe`): a lone bf16
#: matmul pushes 16 rows (2,097,152 flop) 8 bundles apart on each of ``mxu0`` / ``mxu1``.  v7x's schedule
#: lets pushes that accumulate in the MXU result buffer queue closer, which no clock at its published peak
#: allows, so its interval is taken as v6e's (the probe records both readings).
MXU_256 = Mxu(count=2, columns=256, push_rows=16, push_interval=8,
              source="compiled probe (svgtpu.compiler.probe, libtpu 0.0.42.1): 16-row pushes 8 bundles apart")
#: v5e / v5p: four 128-wide MXUs (JAX ``tpu_info``), no compiled probe here: one multiply-accumulate per
#: cell per cycle.
MXU_128_PRIOR = Mxu(count=4, columns=128, push_rows=8, push_interval=8,
                    source="prior (cited MXU count and width, one multiply-accumulate per cell per cycle)")


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """Per-chip rates of one accelerator (or of this CPU, measured)."""

    name: str
    matmul_flops: float        # peak dense matmul FLOP/s per chip (bf16 on accelerators)
    hbm_bandwidth: float       # main-memory bytes/s per chip
    hbm_bytes: float           # main-memory capacity per chip
    vector_ops: float          # elementwise f32 ops/s per chip (TPU VPU, GPU CUDA cores)
    exp_ops: float             # transcendental (exp) element-ops/s per chip (TPU EUP, GPU SFU)
    matmul_tile: int | None    # systolic array side; a contraction or output width below it
                               # leaves part of the array idle (None: no such penalty)
    source: str                # public sources of the constants above
    ici_bandwidth: float | None = None  # bidirectional chip-to-chip bytes/s per chip (None: unknown)
    derivation: str = ""       # how derived constants were computed
    family: str = "tpu"        # which calibrated efficiency applies (svgtpu.costmodel.validate)
    cores: int = 1             # TensorCores per chip splitting a kernel's parallel grid axis
    ici_ports: int | None = None        # links per chip (mesh topology); None: a full switch (NVLink)
    clock_hz: float | None = None       # TPU clock: peak / (cores x flops per core cycle)
    clock_source: str = ""              # where the clock comes from: the MXU's source, checked by a probe
    mxu: Mxu | None = None             # the MXUs of one TensorCore (TPU)
    grid_step_seconds: float = 0.0      # fixed cost of one sequential kernel grid step (TPU Pallas), a
                                        # prior used only where no compiled tile table prices the kernel
    kv_reuse: int = 1          # q tiles served by one HBM read of a K/V tile: 1 on a TPU core (tiles run
                               # one after another); a GPU's concurrent thread blocks (one per SM) share
                               # each K/V tile through L2

    def __post_init__(self):
        for field in ("matmul_flops", "hbm_bandwidth", "hbm_bytes", "vector_ops", "exp_ops"):
            value = getattr(self, field)
            if not value > 0:
                raise ValueError(f"DeviceSpec.{field} must be positive, got {value!r}")
        if not self.source:
            raise ValueError("DeviceSpec.source must cite where the constants come from")
        if self.family not in FAMILIES:
            raise ValueError(f"DeviceSpec.family must be one of {', '.join(FAMILIES)}, got {self.family!r}")

    @property
    def is_gpu(self) -> bool:
        return self.family in GPU_FAMILIES

    @property
    def mxus_per_core(self) -> int | None:
        return self.mxu.count if self.mxu else None

    @property
    def core_flops_per_cycle(self) -> float | None:
        """bf16 flops one TensorCore retires per cycle at full MXU fill (TPU)."""
        return self.matmul_flops / self.cores / self.clock_hz if self.clock_hz else None

    def matmul_utilization(self, width: int) -> float:
        """Fraction of the MXU used along one side when a matmul's contraction (or output) width
        is ``width``: a ``256 x 256`` array fed a 128-wide contraction idles half its cells."""
        return 1.0 if self.matmul_tile is None else min(1.0, width / self.matmul_tile)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: Fixed cost of one Pallas TPU grid step (DMA issue + semaphore waits + scalar bookkeeping), used only
#: where no compiled tile table prices the kernel (the table has the step's static cycles).  An
#: assumption: no public measured figure was found; the sensitivity band is 0.1-1 us.
GRID_STEP_SECONDS = 0.35e-6


def derived_clock(matmul_flops: float, cores: int, flops_per_cycle: float) -> float:
    """``matmul_flops / (cores x flops per core cycle)``: the clock a published peak implies."""
    return matmul_flops / (cores * flops_per_cycle)


def _vector_rates(cores: int, clock: float) -> dict:
    """VPU and EUP element-ops per second of a chip at ``clock``: :data:`VALU_SLOTS` and
    :data:`EUP_CYCLES_PER_VREG` on 8 x 128 lanes per core."""
    return {"vector_ops": cores * VALU_SLOTS * VREG_ELEMENTS * clock,
            "exp_ops": cores * VREG_ELEMENTS * clock / EUP_CYCLES_PER_VREG}


def _derivation(spec_peak: float, cores: int, flops_per_cycle: float, why: str) -> str:
    return (f"clock = {spec_peak:.4g} FLOP/s / ({cores} core x {flops_per_cycle:,.0f} flop per core cycle: {why}); "
            f"VPU = {cores} x {VALU_SLOTS} VALU x 8x128 lanes x clock; EUP = {cores} x 8x128 / "
            f"{EUP_CYCLES_PER_VREG} cycle x clock")


def tpu_spec(name: str, *, matmul_flops: float, hbm_bandwidth: float, hbm_bytes: float,
             cores: int, mxu: Mxu, ici_bandwidth: float, ici_ports: int, source: str) -> DeviceSpec:
    """A TPU spec whose clock is what the published peak implies at ``mxu``'s flops per cycle."""
    clock = derived_clock(matmul_flops, cores, mxu.flops_per_cycle)
    why = f"{mxu.count} MXUs x {mxu.push_rows} rows x {mxu.columns}^2 x 2 flops every {mxu.push_interval} cycles"
    return DeviceSpec(name, matmul_flops, hbm_bandwidth, hbm_bytes, **_vector_rates(cores, clock),
                      matmul_tile=mxu.columns, source=source,
                      derivation=_derivation(matmul_flops, cores, mxu.flops_per_cycle, why),
                      ici_bandwidth=ici_bandwidth, family="tpu", cores=cores, ici_ports=ici_ports,
                      clock_hz=clock, clock_source=mxu.source, mxu=mxu, grid_step_seconds=GRID_STEP_SECONDS)


def with_probe(device: DeviceSpec, probe) -> DeviceSpec:
    """``device`` checked against the compiled probe (a :class:`svgtpu.costmodel.compiled.Probe`): the probe's
    peak, cores, MXU count, width and flops per cycle must be this spec's (one definition of each), so the
    clock stays the spec's; the clock's source then names the probe that confirmed it."""
    mxu = device.mxu
    if abs(probe.published_peak_tflops_per_chip * 1e12 - device.matmul_flops) > 1e-6 * device.matmul_flops \
            or probe.cores_per_chip != device.cores:
        raise ValueError(f"compiled probe for {device.name}: peak {probe.published_peak_tflops_per_chip} TFLOP/s and "
                         f"{probe.cores_per_chip} cores per chip differ from the spec's {device.matmul_flops / 1e12:g} "
                         f"and {device.cores}")
    if mxu is None or (probe.mxus_per_core, probe.mxu_columns, probe.flops_per_cycle) != \
            (mxu.count, mxu.columns, mxu.flops_per_cycle):
        raise ValueError(f"compiled probe for {device.name}: {probe.mxus_per_core} MXUs x {probe.mxu_columns} columns, "
                         f"{probe.flops_per_cycle:,.0f} flop per cycle differ from the spec's MXU {mxu}: update "
                         "svgtpu.costmodel.specs (the one definition) from the probe")
    return dataclasses.replace(device, clock_source=f"{mxu.source}; checked by the {probe.provenance} probe of the "
                                                    f"compiled tile table")


DEVICES: dict[str, DeviceSpec] = {
    # Cloud TPU docs, "TPU v6e": 918 TFLOP/s bf16, 1638 GB/s HBM, 32 GB; one TensorCore with two 256x256
    # MXUs (the page's system architecture; JAX tpu_info: num_mxus=2, mxu_column_size=256);
    # "Bidirectional inter-chip interconnect (ICI) bandwidth (per chip): 800 GBps", "ICI ports per chip: 4".
    "v6e": tpu_spec("v6e", matmul_flops=918e12, hbm_bandwidth=1638e9, hbm_bytes=32e9, cores=1,
                    mxu=MXU_256, ici_bandwidth=800e9, ici_ports=4,
                    source="Cloud TPU docs 'TPU v6e' (system architecture + specifications table); "
                           "JAX pallas tpu_info (MXU count and size)"),
    # Cloud TPU docs, "TPU v5e": 197 TFLOP/s bf16, 16 GB HBM2 at 819 GB/s, one TensorCore with four
    # MXUs (128x128: JAX pltpu.TpuInfo); ICI "400 GBps" bidirectional per chip, 4 ports (2D torus).
    "v5e": tpu_spec("v5e", matmul_flops=197e12, hbm_bandwidth=819e9, hbm_bytes=16e9, cores=1,
                    mxu=MXU_128_PRIOR, ici_bandwidth=400e9, ici_ports=4,
                    source="Cloud TPU docs 'TPU v5e' (system architecture + key chip specifications); "
                           "JAX pallas tpu_info"),
    # Cloud TPU docs, "TPU v5p": 459 TFLOP/s bf16, 95 GB HBM2e at 2765 GB/s, four MXUs per
    # TensorCore, two TensorCores per chip (JAX 'TPU Hardware Reference'); ICI 1200 GB/s
    # bidirectional per chip, 6 ports (3D torus).
    "v5p": tpu_spec("v5p", matmul_flops=459e12, hbm_bandwidth=2765e9, hbm_bytes=95e9, cores=2,
                    mxu=MXU_128_PRIOR, ici_bandwidth=1200e9, ici_ports=6,
                    source="Cloud TPU docs 'TPU v5p' (key specifications); JAX docs 'TPU Hardware Reference'"),
    # Cloud TPU docs, "TPU7x (Ironwood)" (docs.cloud.google.com/tpu/docs/tpu7x, specification table):
    # 2307 TFLOP/s bf16 per chip, 192 GiB HBM, two TensorCores per chip, 3D torus (6 ports, as v5p);
    # Google Cloud blog "Ironwood: the first Google TPU for the age of inference" (2025-04-09): 7.37 TB/s
    # HBM and 1.2 TB/s bidirectional ICI per chip.  MXUs: two 256x256 per TensorCore (JAX tpu_info:
    # ChipVersion.TPU_7X num_mxus=2, mxu_column_size=256).
    "v7x": tpu_spec("v7x", matmul_flops=2307e12, hbm_bandwidth=7.37e12, hbm_bytes=192 * 2 ** 30, cores=2,
                    mxu=MXU_256, ici_bandwidth=1200e9, ici_ports=6,
                    source="Cloud TPU docs 'TPU7x (Ironwood)' (specification table); Google Cloud blog "
                           "'Ironwood' 2025-04-09 (HBM bandwidth, ICI); JAX pallas tpu_info (MXU count and size)"),
    # NVIDIA H100 SXM datasheet: 989 TFLOP/s dense bf16 tensor core, 80 GB HBM3 at 3.35 TB/s,
    # 67 TFLOP/s FP32 non-tensor (= 33.5e12 FMA lanes/s); exp on the SFUs: FlashAttention-3 paper
    # (Shah et al. 2024): "989 TFLOPS of FP16 matmul but only 3.9 TFLOPS of special functions".
    # NVLink 4: 900 GB/s bidirectional per GPU through NVSwitch (no mesh: ici_ports None).
    # 132 SMs (H100/H200 SXM datasheets): the thread blocks of one wave share K/V tiles through L2.
    "h100": DeviceSpec("h100", matmul_flops=989e12, hbm_bandwidth=3.35e12, hbm_bytes=80e9,
                       vector_ops=33.5e12, exp_ops=3.9e12, matmul_tile=None, ici_bandwidth=900e9,
                       family="hopper", kv_reuse=132,
                       source="NVIDIA H100 SXM datasheet; FlashAttention-3 paper (Shah et al. 2024) for SFU rate"),
    # NVIDIA H200 SXM datasheet: same GH100 compute as H100 (989 TFLOP/s dense bf16), 141 GB HBM3e
    # at 4.8 TB/s.
    "h200": DeviceSpec("h200", matmul_flops=989e12, hbm_bandwidth=4.8e12, hbm_bytes=141e9,
                       vector_ops=33.5e12, exp_ops=3.9e12, matmul_tile=None, ici_bandwidth=900e9,
                       family="hopper", kv_reuse=132,
                       source="NVIDIA H200 SXM datasheet; compute rates as H100 (same GH100 die)"),
    # NVIDIA A100 SXM 80GB datasheet: 312 TFLOP/s dense bf16 tensor core, 2.039 TB/s HBM2e, 19.5 TFLOP/s
    # FP32 non-tensor (= 9.75e12 FMA lanes/s), NVLink 3 600 GB/s bidirectional; NVIDIA Ampere GA100
    # whitepaper: 108 SMs at 1.41 GHz boost, 16 special-function ops per SM per clock (4 SFUs in each of
    # 4 partitions) = 2.44e12 exp/s, the same count that gives H100's 3.9 TFLOP/s in the FA3 paper.
    "a100": DeviceSpec("a100", matmul_flops=312e12, hbm_bandwidth=2.039e12, hbm_bytes=80e9,
                       vector_ops=9.75e12, exp_ops=16 * 108 * 1.41e9, matmul_tile=None, ici_bandwidth=600e9,
                       family="ampere", kv_reuse=108,
                       source="NVIDIA A100 SXM datasheet; NVIDIA A100 (GA100) architecture whitepaper for SMs, clock, SFUs"),
}


#: How a TPU slice's accelerator type counts: ``v5p-N`` and ``v7x-N`` count TensorCores (two per chip, so
#: v7x-8 is 4 chips), ``v5e-N`` and ``v6e-N`` count chips (Cloud TPU docs: "TPU v5p" and "TPU7x"
#: accelerator types, "TPU v6e" and "TPU v5e" configurations).
SLICE_COUNTS = {"v5e": "chips", "v6e": "chips", "v5p": "cores", "v7x": "cores"}
_SLICE = re.compile(r"(v5e|v6e|v5p|v7x)-(\d+)")


def parse_slice(name: str) -> tuple[str, int]:
    """``"v7x-8"`` -> ``("v7x", 4)``: a slice name as Cloud TPU writes it, as (device, chips)."""
    match = _SLICE.fullmatch(name.strip())
    if not match:
        raise BadInput(f"slice must be a TPU accelerator type like v6e-8 or v7x-8 ({', '.join(SLICE_COUNTS)}), "
                       f"got {name!r}")
    device, n = match[1], int(match[2])
    if SLICE_COUNTS[device] == "chips":
        return device, n
    cores = DEVICES[device].cores
    if n % cores:
        raise BadInput(f"slice {name}: {device}-N counts TensorCores, {cores} per chip, so N must be a multiple "
                       f"of {cores} (Cloud TPU docs), got {n}")
    return device, n // cores


def get_device(name: "str | DeviceSpec", compiled=None) -> DeviceSpec:
    """A spec by name (``v6e``, ``v5e``, ``v5p``, ``v7x``, ``h100``, ``h200``, ``a100``), with its clock
    from ``compiled``'s probe when it has one for this device (a :class:`~svgtpu.costmodel.compiled.CompiledTable`);
    ``cpu`` is measured, see :func:`svgtpu.bench.cpu.calibrate_cpu`."""
    if isinstance(name, DeviceSpec):
        return name
    if not isinstance(name, str) or name not in DEVICES:
        raise BadInput(f"device must be one of {', '.join(DEVICES)} (or cpu, measured), got {name!r}")
    probe = compiled.probe(name) if compiled is not None else None
    return with_probe(DEVICES[name], probe) if probe is not None else DEVICES[name]


__all__ = ["Mxu", "MXU_256", "MXU_128_PRIOR", "DeviceSpec", "DEVICES", "get_device", "tpu_spec", "with_probe", "derived_clock", "parse_slice",
           "SLICE_COUNTS", "VREG_ELEMENTS", "VALU_SLOTS", "EUP_CYCLES_PER_VREG", "GRID_STEP_SECONDS", "FAMILIES",
           "GPU_FAMILIES"]
