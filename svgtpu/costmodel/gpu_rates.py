"""Self-attention on a GPU priced per kernel from measured rates (docs/costmodel.md, "The H200 model").

A GPU kernel's self-attention over a mask is its computed tiles at the GPU kernels' own 128 x 128 tile times
the tile's matmul work (``4 x 128 x 128 x d``) over the kernel's rate: no per-step, per-row or fast-path
term.  Each kernel has its own rate, separate from the matmul efficiency of the other ops:

- ``cudnn`` (cuDNN's fused attention, ``jax.nn.dot_product_attention``) and ``ours`` (our Triton kernel, its
  default launch): fitted on the 720p dense block rows of the committed H200 run, and nothing else;
- ``flash`` (FlashAttention-2: the flash-attn package's kernels, which torch SDPA's flash backend vendors): read off
  the dense FlashAttention-2 row at 720p of the peer measured beside that run (torch SDPA's FlashAttention-2
  backend, same GPU, same hour);
- ``flex`` (PyTorch's FlexAttention over a block mask, SVG's sparse layers on Wan 2.1): read off the same peer's
  720p ``flex-svg`` row, per computed tile (its full and partial 128 x 128 blocks, as it counted them).

A rate read on the H200 prices an H100 unchanged: one GH100 die (132 SMs, one tensor-core peak,
:mod:`~svgtpu.costmodel.specs`), and attention at head width 128 over these sequences is bound by the tensor
cores, not HBM; the H100's own HBM bandwidth prices the memory-bound ops around it.  No rate is read at another
resolution than :data:`CALIBRATION_RESOLUTION` (tests/test_costmodel_gpu.py).

Two more numbers since 2026-12-06 (issue 61), read at the same resolution, for our kernel's SVG layers: its rate on a
sparse mask, from the run's 720p attention row of the mask and kernel its SVG block calls (``ours-aligned-fast``,
per computed tile: our kernel runs a band's tiles faster than a dense mask's), and SVG's own work around it
(profiling, layout transform), the 720p SVG block's self-attention minus that kernel alone, per head and token
(the model's form of that work, ``pipeline.svg_overhead_seconds``, is linear in both).

The third fitted number, the non-attention ops' matmul efficiency, is fitted where setups are built
(:func:`svgtpu.costmodel.validate.fit_efficiency`) against :attr:`GpuRates.rest_seconds`, the same run's
720p dense-cuDNN block minus its self-attention.

An A100 (Ampere) has no measured run here: its matmul and attention efficiencies are each one published A100
measurement (:data:`AMPERE_MATMUL`, :data:`AMPERE_ATTENTION`; docs/costmodel.md, "The A100's efficiencies"),
chosen and written down before the validation rows were read with them, never fitted.
"""

from __future__ import annotations

import dataclasses
import functools

from svgtpu.costmodel.roofline import Efficiency
from svgtpu.facts.gpu_runs import committed_runs, peers
from svgtpu.geometry import Tile, ceil_div

#: The GPU kernels' tile (our Triton kernel's block_q x block_kv, FlashAttention's and cuDNN's 128-wide tiles;
#: FlashAttention-2's forward block_m x block_n for head_dim 128), defined once: the tile ``svgtpu bench gpu``'s plan
#: runs (:data:`svgtpu.bench.gpu.FULL`) and the one a GPU kernel's computed tiles are priced at here.
GPU_TILE = 128
#: The run and resolution the rates are fitted at, fixed before the fit: every other row of that run, and every
#: later run, is validation (docs/costmodel.md, "The H200 model").
CALIBRATION_RUN = "2026-12-04-314194b.json"
CALIBRATION_RESOLUTION = "720p"
#: The model whose block the rates are fitted on; a run's block of another model (Wan 2.1 1.3B since 2026-12-07) is
#: validation like every other row.
CALIBRATION_MODEL = "wan2.1-14b"
#: The peer whose dense FlashAttention-2 row gives ``flash``'s rate, and that row; its FlexAttention row on the SVG
#: mask (full tiles as full blocks, partial ones through the mask) gives ``flex``'s.
FLASH_PEER, FLASH_ROW, FLEX_ROW = "peer-flexattention", "sdpa-flash2-dense", "flex-svg"
#: Our kernel on the mask its SVG block calls (the attention section's row), and that block's row: the sparse rate
#: and SVG's own work (module doc).
SPARSE_ROW, SVG_BLOCK_ROW = "ours-aligned-fast", "svg-aligned-ours"

#: An A100 SXM's measured bf16 matmul rate over its 312 TFLOP/s peak: 271.2 TFLOP/s, best at M x N x K = 1024 x 10240
#: x 5120 (stas00/ml-engineering b9e29720 ``compute/accelerator/README.md``, "Maximum Achievable Matmul FLOPS
#: comparison table", BF16, ``mamf-finder.py``, torch 2.6.0+cu126).  Plausible 0.81 (the same table's A100 PCIe) to
#: 0.87; the same table's H100 SXM (0.803) sits 2 % above the Hopper fit (docs/costmodel.md).
AMPERE_MATMUL = 271.2 / 312
#: FlashAttention-2's forward pass on an A100 80GB SXM4: up to 73 % of the theoretical maximum (Dao 2023, arXiv
#: 2307.08691, sections 1 and 4.1; its FLOP count 4 x seqlen^2 x head dim x heads is the model's).  Plausible 0.50-0.73
#: (the paper's spread over head dims 64/128, causal or not, 512-16k tokens); Wan's long non-causal head-dim-128 case
#: is the favourable corner, so its top.
AMPERE_ATTENTION = 0.73
AMPERE_SOURCE = ("published A100 measurements: matmul 271.2/312 TFLOP/s (stas00/ml-engineering b9e29720, MAMF "
                 "BF16 A100 SXM), attention 73 % (FlashAttention-2 paper, A100 forward)")
#: FlexAttention's forward rate over FlashAttention-2's on an A100, at the torch that shipped it (2.5, the version SVG's
#: README runs pinned: svg-project/Sparse-VideoGen 95acd8a requirements.txt torch==2.5.1+cu124): "FlexAttention
#: achieves 90% of FlashAttention2's performance in the forward pass" (causal attention, A100; the PyTorch blog
#: "FlexAttention: The Flexibility of PyTorch with the Performance of FlashAttention", 2024-08-07,
#: https://pytorch.org/blog/flexattention/, pytorch/pytorch.github.io 67fc54cf _posts/2024-08-07-flexattention.md).
#: Plausible 0.90-1.00 (docs/plausibility.md); on Hopper the measured rate prices Flex (module doc).
AMPERE_FLEX_OVER_FLASH = 0.90
AMPERE_FLEX_SOURCE = "0.90 of FlashAttention-2's, A100 forward (PyTorch blog, FlexAttention, 2024-08-07)"


def kernel_efficiency(family: str, kernel: str, efficiency: Efficiency) -> tuple[Efficiency, str]:
    """``efficiency`` for ``kernel``'s attention on a GPU family priced from published measurements (no measured
    rate), and why: on Ampere FlexAttention at :data:`AMPERE_FLEX_OVER_FLASH` of FlashAttention-2's attention
    efficiency; otherwise ``efficiency`` as it is and ``""``."""
    if family == "ampere" and kernel == "flex":
        return dataclasses.replace(efficiency, attention=efficiency.attention * AMPERE_FLEX_OVER_FLASH), \
            AMPERE_FLEX_SOURCE
    return efficiency, ""


def measured_efficiency(family: str, prior: Efficiency) -> tuple[Efficiency, str] | None:
    """``prior`` with the matmul and attention efficiencies a GPU family without a measured run takes from published
    measurements, and their source (Ampere: :data:`AMPERE_MATMUL`, :data:`AMPERE_ATTENTION`); ``None`` for any other
    family (its prior, or its fit)."""
    if family != "ampere":
        return None
    return dataclasses.replace(prior, matmul=AMPERE_MATMUL, attention=AMPERE_ATTENTION), AMPERE_SOURCE


def tile_flops(head_dim: int) -> float:
    """Matmul FLOPs of one 128 x 128 tile of one head: QK^T and PV, ``2 x 2 x 128 x 128 x d``."""
    return 4.0 * GPU_TILE * GPU_TILE * head_dim


def dense_tiles(L: int) -> int:
    """Computed tiles of a dense head at 128 x 128, the padded tail included."""
    return ceil_div(L, GPU_TILE) ** 2


@dataclasses.dataclass(frozen=True)
class GpuRates:
    """Measured attention rates of a GPU's kernels (FLOP/s of computed-tile work) and the calibration target of
    the non-attention ops, with where each comes from."""

    device: str
    rates: tuple[tuple[str, float, str], ...]   # (kernel, rate, source)
    rest_seconds: float                         # one block's non-attention seconds at the calibration resolution
    rest_geometry: str
    run: str                                    # the committed run file
    sparse_rates: tuple[tuple[str, float, str], ...] = ()   # (kernel, rate on a sparse mask, source)
    svg_work: tuple[tuple[str, float, str], ...] = ()       # (kernel, SVG's own seconds per head and token, source)

    def _entry(self, kernel: str, sparse: bool) -> tuple[float | None, str]:
        """``(rate, source)`` of ``kernel``: on a sparse mask its sparse rate where one was measured, else its rate."""
        tables = (self.sparse_rates, self.rates) if sparse else (self.rates,)
        return next(((r, s) for table in tables for k, r, s in table if k == kernel), (None, ""))

    def rate(self, kernel: str, sparse: bool = False) -> float | None:
        return self._entry(kernel, sparse)[0]

    def source(self, kernel: str, sparse: bool = False) -> str:
        return self._entry(kernel, sparse)[1]

    def head_seconds(self, kernel: str, computed_tiles: int, head_dim: int, tile: Tile, sparse: bool = False) -> float:
        """One head of ``kernel`` over ``computed_tiles`` tiles of ``tile`` (:data:`GPU_TILE` square: the GPU kernels'
        own; another tile is priced by its work at the same rate); ``sparse``: a mask with skipped tiles, at the
        kernel's sparse rate where one was measured."""
        scale = tile.block_q * tile.block_kv / GPU_TILE ** 2
        return computed_tiles * tile_flops(head_dim) * scale / self.rate(kernel, sparse)

    def svg_work_seconds(self, kernel: str, heads: int, L: int) -> float | None:
        """SVG's own work (profiling, layout transform) of ``heads`` heads over ``L`` tokens around ``kernel``,
        where it was measured (our kernel's SVG path), else ``None``."""
        per = next((w for k, w, _ in self.svg_work if k == kernel), None)
        return None if per is None else per * heads * L


def fit_rates(run: dict, peer_runs: dict[str, dict]) -> GpuRates:
    """The rates of :class:`GpuRates` from a committed package run (``committed_runs`` entry) and its peers:
    its :data:`CALIBRATION_RESOLUTION` dense blocks only (module doc)."""
    data = run["data"]["run"]
    block = next(b for b in data["block"] if b["geometry"] == CALIBRATION_RESOLUTION
                 and b["model"] == CALIBRATION_MODEL)
    rows = {r["attention"]: r for r in block["rows"] if r["status"] == "ok"}
    heads, head_dim = _block_heads(block["model"])
    work = heads * dense_tiles(block["L"]) * tile_flops(head_dim)
    where = f"{run['file']}, {CALIBRATION_RESOLUTION} block"
    rates = [("cudnn", work / rows["dense-cudnn"]["attention_s"], f"fitted: {where}, dense-cudnn self-attention"),
             ("ours", work / rows["dense-ours"]["attention_s"], f"fitted: {where}, dense-ours self-attention")]
    peer = next((p for name, p in peer_runs.items() if FLASH_PEER in name), None)
    if peer is not None:
        case = next(c for c in peer["data"]["cases"] if c["geometry"] == CALIBRATION_RESOLUTION)
        flash = case["heads"] * dense_tiles(case["L"]) * tile_flops(head_dim) / case["rows"][FLASH_ROW]["median_s"]
        rates.append(("flash", flash, f"measured: {peer['file']}, {CALIBRATION_RESOLUTION} {FLASH_ROW}"))
        flex = case["rows"][FLEX_ROW]
        rates.append(("flex", case["heads"] * flex["tiles_computed"] * tile_flops(head_dim) / flex["median_s"],
                      f"measured: {peer['file']}, {CALIBRATION_RESOLUTION} {FLEX_ROW} (per computed tile)"))
    section = next(a for a in data["attention"] if a["geometry"] == CALIBRATION_RESOLUTION)
    sparse = next(r for r in section["rows"] if r["variant"] == SPARSE_ROW and r["status"] == "ok")
    sparse_rates = (("ours", sparse["tflops"] * 1e12, f"fitted: {where.replace('block', 'attention')}, {SPARSE_ROW} "
                     "(per computed tile)"),)
    svg = rows[SVG_BLOCK_ROW]
    svg_work = (("ours", (svg["attention_s"] - sparse["median_s"] * heads / section["heads"]) / (heads * block["L"]),
                 f"fitted: {where}, {SVG_BLOCK_ROW} self-attention minus {SPARSE_ROW} alone"),)
    cudnn = rows["dense-cudnn"]
    return GpuRates(device=data["device"], rates=tuple(rates), rest_seconds=cudnn["block_s"] - cudnn["attention_s"],
                    rest_geometry=CALIBRATION_RESOLUTION, run=run["file"], sparse_rates=sparse_rates,
                    svg_work=svg_work)


def _block_heads(model: str) -> tuple[int, int]:
    from svgtpu.costmodel.workload import get_model
    m = get_model(model)
    return m.heads, m.head_dim


def calibration_run() -> dict | None:
    """The committed run the rates are fitted on (:data:`CALIBRATION_RUN`), or ``None`` where it is absent."""
    return next((r for r in committed_runs() if r["file"] == CALIBRATION_RUN), None)


@functools.lru_cache(maxsize=1)
def hopper_rates() -> GpuRates | None:
    """:func:`fit_rates` on :data:`CALIBRATION_RUN` (``None`` without it)."""
    run = calibration_run()
    return None if run is None else fit_rates(run, peers(run))


__all__ = ["GPU_TILE", "CALIBRATION_RUN", "CALIBRATION_RESOLUTION", "CALIBRATION_MODEL", "calibration_run", "GpuRates", "tile_flops",
           "dense_tiles", "fit_rates", "hopper_rates", "AMPERE_MATMUL", "AMPERE_ATTENTION", "AMPERE_SOURCE",
           "measured_efficiency", "AMPERE_FLEX_OVER_FLASH", "kernel_efficiency"]
