"""Devices as data: the per-chip rates of each accelerator, each with its public source.

A TPU's vector rates are built from its units (:func:`tpu_spec`): the MXU count and size and the
peak bf16 rate give the clock; the clock, the vreg shape and the issue rates of the vector ALUs and
of the transcendental unit (EUP) give the VPU and EUP rates.  No public source states the clock, so
it is *derived*, and public sources disagree on the MXU count it is derived from (v6e: 2 per core
in JAX's ``pltpu.TpuInfo``, 4 in other public descriptions).  The clock is therefore not a fact but
a named band, :data:`CLOCK_BANDS`: every alternative MXU count and the clock it implies.  The model
runs at the first alternative and the sensitivity knob ``efficiency.vector_scale`` spans the band
(``vector_scale = clock(alternative) / clock(first)``; :mod:`svgtpu.costmodel.sensitivity`).
"""

from __future__ import annotations

import dataclasses

from svgtpu.errors import BadInput

#: TPU vector registers hold 8 sublanes x 128 lanes of 32-bit values (Cloud TPU docs, "TPU v6e":
#: "a 128x8 vector processing unit (VPU) with 128 lanes x 8 sublanes"; JAX ``pltpu.TpuInfo``).
VREG_ELEMENTS = 8 * 128
#: Vector-ALU slots that can each retire one vreg op per cycle: Hot Chips 32 (2020), Norrie &
#: Patil, "Google's Training Chips Revealed: TPUv2 and TPUv3" (2 vector-ALU slots in the VLIW
#: bundle); later generations assumed to keep two (no public figure).
VALU_SLOTS = 2
#: Issue interval of the EUP (exp via vpow2, rsqrt, tanh, reciprocal): one vreg every 2 cycles,
#: measured with the on-chip cycle counter in the public Pallas TPU tutorial
#: (ayaka14732.github.io/pallas-tpu-tutorial, chapter 1, unit table: "EUP ... interval 2"); the f32
#: vector ALU ops there issue every cycle.
EUP_CYCLES_PER_VREG = 2
#: Device families: one calibrated efficiency each (svgtpu.costmodel.validate).  GPUs are split by
#: architecture because the same kernel reaches very different shares of peak on them: FlashAttention-2
#: reaches 50-73 % of an A100's peak (FA2 paper, Dao 2023) but 35 % of an H100's (FA3 paper, Shah et al.
#: 2024, section 1).
FAMILIES = ("tpu", "hopper", "ampere", "cpu")
GPU_FAMILIES = ("hopper", "ampere")


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
    clock_hz: float | None = None       # derived TPU clock at the first MXU count of its band (CLOCK_BANDS)
    grid_step_seconds: float = 0.0      # fixed cost of one sequential kernel grid step (TPU Pallas)
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

    def matmul_utilization(self, width: int) -> float:
        """Fraction of the MXU used along one side when a matmul's contraction (or output) width
        is ``width``: a ``256 x 256`` array fed a 128-wide contraction idles half its cells."""
        return 1.0 if self.matmul_tile is None else min(1.0, width / self.matmul_tile)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: Fixed cost of one Pallas TPU grid step (DMA issue + semaphore waits + scalar bookkeeping).  An
#: assumption: no public measured figure was found; the sensitivity band is 0.1-1 us.
GRID_STEP_SECONDS = 0.35e-6
#: The derived clock of each TPU per MXU-count alternative: ``{device: {mxus_per_core: clock_hz}}``,
#: first entry = the modeled one.  Filled by :func:`tpu_spec`; a band, not a fact.
CLOCK_BANDS: dict[str, dict[int, float]] = {}


def derived_clock(matmul_flops: float, cores: int, mxus_per_core: int, mxu_dim: int) -> float:
    """``matmul_flops / (cores x mxus_per_core x mxu_dim^2 x 2 FLOP per MAC)``: the clock a peak rate
    implies for a given MXU count."""
    return matmul_flops / (cores * mxus_per_core * mxu_dim ** 2 * 2)


def tpu_spec(name: str, *, matmul_flops: float, hbm_bandwidth: float, hbm_bytes: float,
             cores: int, mxus_per_core: tuple[int, ...], mxu_dim: int, ici_bandwidth: float, ici_ports: int,
             source: str) -> DeviceSpec:
    """A TPU spec whose vector rates come from its units, at the first of the ``mxus_per_core``
    alternatives public sources give (the others are the clock band, :data:`CLOCK_BANDS`).

    VPU ``= cores x VALU_SLOTS x 1024 lanes x clock``; EUP ``= cores x 1024 / 2 cycles x clock``.
    """
    clocks = [derived_clock(matmul_flops, cores, m, mxu_dim) for m in mxus_per_core]
    clock = clocks[0]
    band = ", ".join(f"{m} MXU/core -> {c / 1e9:.3g} GHz" for m, c in zip(mxus_per_core, clocks))
    derivation = (f"clock = {matmul_flops:.4g} FLOP/s / ({cores} core x MXUs x {mxu_dim}^2 x 2), a band: "
                  f"{band} (modeled at the first); VPU = {cores} x {VALU_SLOTS} VALU x "
                  f"8x128 lanes x clock; EUP = {cores} x 8x128 / {EUP_CYCLES_PER_VREG} cycles x clock")
    CLOCK_BANDS[name] = {m: c for m, c in zip(mxus_per_core, clocks)}
    return DeviceSpec(name, matmul_flops, hbm_bandwidth, hbm_bytes,
                      vector_ops=cores * VALU_SLOTS * VREG_ELEMENTS * clock,
                      exp_ops=cores * VREG_ELEMENTS * clock / EUP_CYCLES_PER_VREG,
                      matmul_tile=mxu_dim, source=source, derivation=derivation,
                      ici_bandwidth=ici_bandwidth, family="tpu", cores=cores, ici_ports=ici_ports,
                      clock_hz=clock, grid_step_seconds=GRID_STEP_SECONDS)


DEVICES: dict[str, DeviceSpec] = {
    # Cloud TPU docs, "TPU v6e": 918 TFLOP/s bf16, 1638 GB/s HBM, 32 GB; one TensorCore with 256x256
    # MXUs: two in JAX pltpu.TpuInfo for v6e (num_mxus=2, mxu_column_size=256), four in other public
    # descriptions of Trillium (hence the clock band 3.5 / 1.75 GHz); "Bidirectional inter-chip
    # interconnect (ICI) bandwidth (per chip): 800 GBps", "ICI ports per chip: 4".
    "v6e": tpu_spec("v6e", matmul_flops=918e12, hbm_bandwidth=1638e9, hbm_bytes=32e9, cores=1,
                    mxus_per_core=(2, 4), mxu_dim=256, ici_bandwidth=800e9, ici_ports=4,
                    source="Cloud TPU docs 'TPU v6e' (system architecture + specifications table); "
                           "JAX pallas tpu_info (MXU count and size)"),
    # Cloud TPU docs, "TPU v5e": 197 TFLOP/s bf16, 16 GB HBM2 at 819 GB/s, one TensorCore with four
    # MXUs (128x128: JAX pltpu.TpuInfo); ICI "400 GBps" bidirectional per chip, 4 ports (2D torus).
    "v5e": tpu_spec("v5e", matmul_flops=197e12, hbm_bandwidth=819e9, hbm_bytes=16e9, cores=1,
                    mxus_per_core=(4,), mxu_dim=128, ici_bandwidth=400e9, ici_ports=4,
                    source="Cloud TPU docs 'TPU v5e' (system architecture + key chip specifications); "
                           "JAX pallas tpu_info"),
    # Cloud TPU docs, "TPU v5p": 459 TFLOP/s bf16, 95 GB HBM2e at 2765 GB/s, four MXUs per
    # TensorCore, two TensorCores per chip (JAX 'TPU Hardware Reference'); ICI 1200 GB/s
    # bidirectional per chip, 6 ports (3D torus).
    "v5p": tpu_spec("v5p", matmul_flops=459e12, hbm_bandwidth=2765e9, hbm_bytes=95e9, cores=2,
                    mxus_per_core=(4,), mxu_dim=128, ici_bandwidth=1200e9, ici_ports=6,
                    source="Cloud TPU docs 'TPU v5p' (key specifications); JAX docs 'TPU Hardware Reference'"),
    # Cloud TPU docs, "TPU7x (Ironwood)" (docs.cloud.google.com/tpu/docs/tpu7x, specification table):
    # 2307 TFLOP/s bf16 per chip, 192 GiB HBM, two TensorCores per chip, 3D torus (6 ports, as v5p);
    # Google Cloud blog "Ironwood: the first Google TPU for the age of inference" (2025-04-09): 7.37 TB/s
    # HBM and 1.2 TB/s bidirectional ICI per chip.  MXUs: 256x256, four per TensorCore (an assumption by
    # analogy with v5p's four per core, carried as a band with two).  A v7x-N slice has N TensorCores,
    # N/2 chips (the accelerator type counts cores, as v5p-8 = 4 chips).
    "v7x": tpu_spec("v7x", matmul_flops=2307e12, hbm_bandwidth=7.37e12, hbm_bytes=192 * 2 ** 30, cores=2,
                    mxus_per_core=(4, 2), mxu_dim=256, ici_bandwidth=1200e9, ici_ports=6,
                    source="Cloud TPU docs 'TPU7x (Ironwood)' (specification table); Google Cloud blog "
                           "'Ironwood' 2025-04-09 (HBM bandwidth, ICI)"),
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


def clock_variants(device: DeviceSpec) -> dict[int, DeviceSpec]:
    """The device at each alternative of its clock band (:data:`CLOCK_BANDS`), keyed by MXUs per core:
    the VPU and EUP rates scaled with the clock; ``{}`` for a device without a derived clock."""
    band = CLOCK_BANDS.get(device.name, {})
    return {m: dataclasses.replace(device, clock_hz=c, vector_ops=device.vector_ops * c / device.clock_hz,
                                   exp_ops=device.exp_ops * c / device.clock_hz) for m, c in band.items()}


def get_device(name: "str | DeviceSpec") -> DeviceSpec:
    """A spec by name (``v6e``, ``v5e``, ``v5p``, ``v7x``, ``h100``, ``h200``, ``a100``); ``cpu`` is measured, see
    :func:`svgtpu.bench.cpu.calibrate_cpu`."""
    if isinstance(name, DeviceSpec):
        return name
    if name not in DEVICES:
        raise BadInput(f"device must be one of {', '.join(DEVICES)} (or cpu, measured), got {name!r}")
    return DEVICES[name]


__all__ = ["DeviceSpec", "DEVICES", "get_device", "tpu_spec", "derived_clock", "CLOCK_BANDS", "clock_variants", "VREG_ELEMENTS", "VALU_SLOTS",
           "EUP_CYCLES_PER_VREG", "GRID_STEP_SECONDS", "FAMILIES", "GPU_FAMILIES"]
