"""The prepared TPU run (``svgtpu bench tpu``, ``make tpu-bench``): one run on a v6e VM (v6e-1 or v6e-8), within 30 minutes.

No TPU has run anything of ours; this is the run that would settle the claims, written and tested before
there is one (``--smoke`` runs the same code at tiny shapes on CPU, in Pallas' interpreter).  Every program
it will run is one :class:`Program` of :func:`programs`, the one list the run and its compile check read
(``svgtpu bench tpu --preflight`` compiles each for v6e ahead of time, :mod:`svgtpu.report.preflight`).
Sections (``--sections``), in section groups (a section at one resolution) under one time budget: a group's
float64 checks (and the compiles they make) run until the run's deadline; then the group gets its section's
weight's share of the time left, for the rest of its work (building, compiles, warm-ups, timing rounds):

1. **kernels** (1440p, then 720p; one head, ``d = 128``, bf16): our kernel and JAX's Splash, each at its own best
   tiles (ours: the tile ``svgtpu tune`` recorded, ``figures/tuned_tiles.json``; Splash: MaxDiffusion's Wan
   tile for v6e with ``block_q`` a lane multiple, :data:`svgtpu.setting.PRODUCTION`, and MaxDiffusion's
   ``block_kv_compute``), on the dense mask, SVG's mask and the mask snapped to the tiles; ours with the fast
   path off and on (C4 measured), and ours again at the production tile (``@production``: the tile of C4's
   verdict row and of the compiled tile table the cost model prices both kernels from);
2. **block** (1440p, then 720p; on one chip 720p only, the 1440p block does not fit its HBM:
   :attr:`Sizes.block_geometries_by_chips`): one Wan 2.1 14B block (:class:`svgtpu.model.wan.WanBlock`, random bf16 weights)
   with self-attention dense through Splash and through ours, with SVG (profiling, layout transform, ours on
   the snapped mask), and with no attention (its output is ``v``): the self-attention share (C2) is
   ``1 - t(no attention) / t(dense)``, the sparse block's speedup ``t(dense) / t(SVG)``;
3. **moderate**: MaxDiffusion's moderate run's 720p setting (Wan 2.2 A14B, its two SVG densities), one block
   as in 2.

On several chips a block runs on all of them (CFG pair x Ulysses over the rest, weights replicated); a
kernel on the first.  **Every variant is checked against float64 before it is timed** (sampled query rows
against every key, on the host); a variant whose check fails or is skipped is not timed and the run's
``all_ok`` is false.  A block's check is its self-attention function's (the rest of the block is the same
XLA code in every variant); the block without attention is checked for a finite output.  Timing:
interleaved rounds (:mod:`svgtpu.bench.timing`), medians of paired ratios with their IQR.

The run file is ``figures/tpu-runs/<date>-<commit>.json`` (provenance ``measured-tpu``), never overwritten:
the path is checked before any work; after each section the run so far is saved beside it
(``<name>.partial.json``, removed once the run file is written), so a VM taken back early leaves what it measured.  :func:`quantities` flattens it to the measured quantities that
``figures/predictions/*.json`` predicted (:mod:`svgtpu.report.predictions`).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import statistics
import subprocess
import traceback
from pathlib import Path

import numpy as np

from svgtpu.costmodel.policy import MODERATE_KEYS
from svgtpu.errors import BadInput
from svgtpu.facts.paths import REPO_ROOT
from svgtpu.geometry import Tile
from svgtpu.kernels.config import KernelConfig
from svgtpu.models import MODELS, ModelConfig
from svgtpu.setting import DEFAULT_KEPT, PRODUCTION

SECTIONS = ("kernels", "block", "moderate")
#: The slices the run is prepared for: chips -> the topology its programs are compiled for (libtpu has no
#: one-chip v6e topology: one chip is the first of a host's four).
SLICES = {1: "v6e:2x2x1", 8: "v6e:2x4x1"}
#: MaxDiffusion's moderate run (``svgtpu.costmodel.policy.MODERATE_KEYS``): its model, resolution and the
#: SVG densities of its two experts (high noise, low noise).
MODERATE_MODEL = "wan2.2-a14b"
MODERATE_KEPT = (MODERATE_KEYS["svg_high_noise_density"], MODERATE_KEYS["svg_low_noise_density"])
#: The Splash variants' tolerance and ours: bf16 inputs, float32 accumulation (as the GPU run's check).
TOLERANCE = 2e-2
#: Mask variants of the kernel section (:data:`svgtpu.compiler.variants.MASKS`).
KERNEL_MASKS = ("dense", "svg", "svg-aligned")
#: A block's self-attention variants: dense through Splash and ours, SVG through ours, none.
BLOCK_ATTENTIONS = ("dense-splash", "dense-ours", "svg-ours", "none")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What one run measures: geometries per section, the block models, rows checked, time budget."""

    kernel_geometries: tuple[str, ...] = ("1440p", "720p")   # the claims' resolution first: the budget may cut
    #: chips -> the block geometries a slice of that many chips runs (the claims' resolution first, as above).
    #: One chip runs no 1440p block: the compiler refuses every 1440p block program on one v6e chip for HBM, its
    #: temporaries above the chip's memory (``svgtpu bench tpu --preflight``; tests/test_tpu_bench.py compiles one
    #: and prints the compiler's message); on eight they are split over the chips and compile.
    block_geometries_by_chips: tuple[tuple[int, tuple[str, ...]], ...] = ((1, ("720p",)), (8, ("1440p", "720p")))
    moderate_geometry: str = "720p"
    model: str | ModelConfig = PRODUCTION.model
    moderate_model: str | ModelConfig = MODERATE_MODEL
    moderate_kept: tuple[float, ...] = MODERATE_KEPT
    kept: float = DEFAULT_KEPT
    check_rows: int = 128
    max_rounds: int = 9
    budget_s: float = 1500.0
    #: section -> weight of the time left after a group's checks (compile time dominates the blocks)
    weights: tuple[tuple[str, float], ...] = (("kernels", 0.3), ("block", 0.5), ("moderate", 0.2))
    #: None: each kernel's best tiles (:func:`best_tiles`); else one ``(block_q, block_kv, kv_compute)`` for all
    tiles: tuple[int, int, int] | None = None
    profile: str = "v6e"

    def block_geometries(self, chips: int) -> tuple[str, ...]:
        """The block section's geometries on ``chips`` chips (:attr:`block_geometries_by_chips`)."""
        return dict(self.block_geometries_by_chips)[chips]


def mesh_shape(chips: int) -> tuple[int, int]:
    """``(data, seq)``: how a block spreads over ``chips`` chips (the CFG pair over ``data`` where the chips are
    even and several, Ulysses over ``seq``, the rest); a block's heads and tokens must divide over ``seq``."""
    data = 2 if chips > 1 and chips % 2 == 0 else 1
    return data, chips // data


FULL = Sizes()
#: The smoke model's heads: the fewest that divide over every prepared slice's Ulysses devices (two heads on
#: v6e-8's four ``seq`` devices would refuse every block and moderate program).
_SMOKE_HEADS = math.lcm(*(mesh_shape(c)[1] for c in SLICES))
_SMOKE_MODEL = ModelConfig("smoke", layers=40, dim=128 * _SMOKE_HEADS, heads=_SMOKE_HEADS, head_dim=128, ffn=512,
                           text_len=16, patch_in=64, source="the smoke profile: tiny shapes")
#: The same code at tiny shapes (interpret mode on CPU): one small geometry everywhere (160 tokens: they divide
#: over every slice's ``seq`` devices too), 128-square tiles.
SMOKE = Sizes(kernel_geometries=("2x8x10",), block_geometries_by_chips=tuple((c, ("2x8x10",)) for c in SLICES),
              moderate_geometry="2x8x10",
              model=_SMOKE_MODEL, moderate_model=_SMOKE_MODEL, check_rows=16, max_rounds=2, budget_s=600.0,
              tiles=(128, 128, 128), profile="smoke")


def _model(m: str | ModelConfig) -> ModelConfig:
    return m if isinstance(m, ModelConfig) else MODELS[m]


def best_tiles(kernel: str, geometry: str, sizes: Sizes = FULL) -> tuple[int, int, int]:
    """``(block_q, block_kv, block_kv_compute)`` a kernel runs at: ours the tile ``svgtpu tune`` recorded for
    v6e at ``geometry`` (the production tile where none is), Splash MaxDiffusion's (module doc)."""
    if sizes.tiles is not None:
        return sizes.tiles
    from svgtpu.compiler.tile_table import theirs_kv_compute
    if kernel == "splash":
        return PRODUCTION.block_q, PRODUCTION.block_kv, theirs_kv_compute(PRODUCTION.block_q, PRODUCTION.block_kv)
    from svgtpu.compiler.tune import tuned_tile
    from svgtpu.kernels.config import default_block_kv_compute
    t = tuned_tile(geometry, "v6e")
    if t is None:
        return PRODUCTION.block_q, PRODUCTION.block_kv, default_block_kv_compute(PRODUCTION.block_q, PRODUCTION.block_kv)
    return t["block_q"], t["block_kv"], t["block_kv_compute"]


#: The name suffix of our kernel at the production tile (:func:`production_tiles`).
PRODUCTION_TAG = "@production"


def production_tiles(sizes: Sizes = FULL) -> tuple[int, int, int]:
    """Our kernel at the production tile too (:data:`svgtpu.setting.PRODUCTION`, the tile of the compiled
    tile table the cost model prices from and of C4's verdict row), with its default ``block_kv_compute``."""
    if sizes.tiles is not None:
        return sizes.tiles
    from svgtpu.kernels.config import default_block_kv_compute
    return PRODUCTION.block_q, PRODUCTION.block_kv, default_block_kv_compute(PRODUCTION.block_q, PRODUCTION.block_kv)


@dataclasses.dataclass(frozen=True)
class Program:
    """One program the run times: a kernel on a mask (``section`` kernels: ``variant`` ``ours-svg-fast``,
    ``splash-dense``, as :class:`svgtpu.compiler.variants.Variant` names them) or a block with one
    self-attention (:data:`BLOCK_ATTENTIONS`, ``svg-ours`` at a kept fraction) on ``chips`` chips."""

    section: str
    geometry: str
    variant: str
    kernel: str
    mask: str
    block_q: int
    block_kv: int
    block_kv_compute: int
    fast_path: bool = True
    kept: float = DEFAULT_KEPT
    model: str | ModelConfig | None = None
    chips: int = 1

    @property
    def name(self) -> str:
        return f"{self.section} {self.geometry} {self.variant}"

    @property
    def kernel_config(self) -> KernelConfig:
        """The program's tile and fast-path switch, one value (Splash's block sizes too)."""
        return KernelConfig(self.block_q, self.block_kv, self.block_kv_compute, self.fast_path)

    def svg_config(self):
        from svgtpu.attention.svg import SVGConfig
        return SVGConfig(kept=self.kept, block_q=self.block_q, block_kv=self.block_kv,
                         block_kv_compute=self.block_kv_compute, align="snap", fast_path=self.fast_path)

    def the_mask(self):
        """The mask the program's kernel runs (kernels: its variant's; blocks: dense or SVG's snapped band)."""
        from svgtpu.geometry import get_geometry
        from svgtpu.masks.core import DenseMask
        g = get_geometry(self.geometry)
        if self.mask == "dense":
            return DenseMask(g.L)
        if self.section == "kernels":
            from svgtpu.attention.svg import SVGConfig
            return SVGConfig(kept=self.kept, block_q=self.block_q, block_kv=self.block_kv,
                             align="snap" if self.mask == "svg-aligned" else None).mask(g)
        return self.svg_config().mask(g)


def all_programs(sizes: Sizes = FULL) -> list[Program]:
    """The programs of a run on any slice of :data:`SLICES` (a kernel runs on one chip of any): what
    ``svgtpu bench tpu --preflight`` compiles."""
    out = []
    for chips in SLICES:
        out += [p for p in programs(sizes, chips) if p not in out]
    return out


def programs(sizes: Sizes = FULL, chips: int = 1, sections=SECTIONS) -> list[Program]:
    """Every program a run of ``sizes`` on ``chips`` chips times, in run order (the list preflight compiles)."""
    out = []
    if "kernels" in sections:
        for g in sizes.kernel_geometries:
            for kernel, tiles, at in (("ours", best_tiles("ours", g, sizes), ""),
                                      ("splash", best_tiles("splash", g, sizes), ""),
                                      ("ours", production_tiles(sizes), PRODUCTION_TAG)):
                for mask in KERNEL_MASKS:
                    for fast in ((True, False) if kernel == "ours" and mask != "dense" else (True,)):
                        tail = "" if kernel != "ours" else ("-fast" if fast else "-nofast")
                        out.append(Program("kernels", g, f"{kernel}-{mask}{tail}{at}", kernel, mask, *tiles, fast,
                                           kept=sizes.kept))
    block_sections = [("block", g, sizes.model, (sizes.kept,)) for g in sizes.block_geometries(chips)
                      if "block" in sections]
    if "moderate" in sections:
        block_sections.append(("moderate", sizes.moderate_geometry, sizes.moderate_model, sizes.moderate_kept))
    for section, g, model, kepts in block_sections:
        ours, splash = best_tiles("ours", g, sizes), best_tiles("splash", g, sizes)
        # in the order they matter (a budget cut drops the last): C2's share, SVG's speedup, then ours dense
        out.append(Program(section, g, "dense-splash", "splash", "dense", *splash, model=model, chips=chips))
        out.append(Program(section, g, "none", "none", "dense", *ours, model=model, chips=chips))
        for kept in kepts:
            name = "svg-ours" if len(kepts) == 1 else f"svg-ours-kept{kept:g}"
            out.append(Program(section, g, name, "ours", "svg", *ours, kept=kept, model=model, chips=chips))
        out.append(Program(section, g, "dense-ours", "ours", "dense", *ours, model=model, chips=chips))
    return out


# -- the programs as functions ------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def splash_heads(mask, L: int, tile: KernelConfig):
    """JAX's Splash on ``[heads, L, d]`` at ``tile``'s block sizes (scaled by ``1/sqrt(d)`` before it, padded to its
    tiles, heads one after another), its mask read block by block as the compiled comparison gives it
    (:func:`svgtpu.compiler.variants.library_mask`), with the VMEM limit our kernel asks for (the default
    refuses MaxDiffusion's own tiles); interpret mode off-TPU.  Built once per mask and tiles (at 1440p
    Splash's mask info takes a while): the check and the timed program share it."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu import splash_attention as lib
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mlib

    from svgtpu.compiler.variants import _with_vmem_limit, library_mask
    from svgtpu.geometry import round_up
    from svgtpu.kernels.common import resolve_interpret
    _with_vmem_limit(splash_attention_kernel, "v6e")
    Lq, Lk = round_up(L, tile.block_q), round_up(L, tile.block_kv)
    kernel = lib.make_splash_mha(lib.MultiHeadMask([library_mask(mlib, mask, (Lq, Lk))]),
                                 block_sizes=lib.BlockSizes(block_q=tile.block_q, block_kv=tile.block_kv,
                                                            block_kv_compute=tile.block_kv_compute),
                                 head_shards=1, q_seq_shards=1, interpret=resolve_interpret(None))

    def attend(q, k, v):
        q = (q.astype(jnp.float32) / math.sqrt(q.shape[-1])).astype(q.dtype)
        pad = lambda x, n: jnp.pad(x, ((0, 0), (0, n - L), (0, 0)))  # noqa: E731
        one = lambda x: kernel(x[0][None], x[1][None], x[2][None])[0]  # noqa: E731
        return jax.lax.map(one, (pad(q, Lq), pad(k, Lk), pad(v, Lk)))[:, :L]
    return attend


@functools.lru_cache(maxsize=64)
def kernel_fn(p: Program):
    """``[heads, L, d] x 3 -> [heads, L, d]``: the kernel of a kernels-section program on its mask.  One function
    per program, so that its float64 check and its timed call are one jit program: traced and compiled once, the
    check's compile serving the timed call (in Pallas' interpreter a kernel's trace and compile took about 5 s on a
    busy 2-core host, each time a new function was jitted)."""
    mask = p.the_mask()
    if p.kernel == "splash":
        return splash_heads(mask, mask.L, p.kernel_config)
    from svgtpu.kernels.api import block_sparse
    config = p.kernel_config
    return lambda q, k, v: block_sparse(q, k, v, mask, config=config, implementation="mosaic")


def attention_fn(p: Program):
    """A block program's self-attention (:class:`svgtpu.model.wan.WanBlock`'s ``attention``): ``[B, H, L, d]``."""
    from svgtpu.geometry import get_geometry
    from svgtpu.model.wan import self_attention
    if p.variant == "none":
        return lambda q, k, v, **_: v
    if p.kernel == "splash":
        heads = splash_heads(p.the_mask(), get_geometry(p.geometry).L, p.kernel_config)

        def attend(q, k, v, **_):
            B, H, L, d = q.shape
            return heads(*(x.reshape(B * H, L, d) for x in (q, k, v))).reshape(B, H, L, d)
        return attend
    if p.mask == "dense":
        return self_attention("ours-dense", tile=Tile(p.block_q, p.block_kv), implementation="mosaic")
    return self_attention("svg", get_geometry(p.geometry), svg_config=p.svg_config())


def block_program(p: Program, devices):
    """``(fn, abstract args)``: one block on ``devices`` (:func:`svgtpu.model.sharded.block_program`; one: plainly;
    several: a CFG pair over ``data`` and Ulysses over ``seq``, weights replicated)."""
    from svgtpu.geometry import get_geometry
    from svgtpu.model.sharded import block_program as sharded_block
    data, _ = mesh_shape(len(devices))
    return sharded_block(_model(p.model), get_geometry(p.geometry), devices, data, attention_fn(p), name=p.name)


def program(p: Program, devices):
    """``(fn, abstract args)`` of ``p`` on ``devices`` (a kernel: the first of them)."""
    import jax
    import jax.numpy as jnp

    from svgtpu.geometry import get_geometry
    if p.section != "kernels":
        return block_program(p, devices)
    x = jax.ShapeDtypeStruct((1, get_geometry(p.geometry).L, 128), jnp.bfloat16,
                             sharding=jax.sharding.SingleDeviceSharding(devices[0]))
    return kernel_fn(p), (x, x, x)


def concrete(args, seed: int = 0):
    """Random arrays for abstract ``args`` (their shapes, dtypes and shardings): normal, weights scaled by
    ``1/sqrt(fan_in)`` (2-D leaves), integer leaves (keys) random bits; made on the host from ``seed`` (numpy) and
    put on the devices in their shardings.  On the host because a ``jax.random`` program is an XLA compile: a
    block's 30 leaves took 12 s to compile on a 2-core host (numpy: 0.1 s), in every block section of the run."""
    import jax
    rng = np.random.default_rng(seed)

    def make(a):
        if np.issubdtype(a.dtype, np.integer):
            info = np.iinfo(a.dtype)
            return rng.integers(info.min, info.max, a.shape, dtype=a.dtype, endpoint=True)
        x = rng.standard_normal(a.shape, np.float32)
        return (x / np.float32(math.sqrt(a.shape[0])) if len(a.shape) == 2 and a.shape[0] > 16 else x).astype(a.dtype)
    leaves, tree = jax.tree.flatten(args)
    return jax.tree.unflatten(tree, [jax.device_put(make(a), a.sharding) for a in leaves])


# -- checks against float64 ----------------------------------------------------------------------

def _rows(L: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` query rows to check: the first and last and a seeded sample between."""
    rng = np.random.default_rng(seed)
    return np.unique(np.concatenate([[0, L - 1], rng.choice(L, size=min(n, L), replace=False)]))


def check_rows(out, q, k, v, mask, rows) -> float:
    """Max relative error of ``out``'s ``rows`` (``[H, L, d]``) against float64 attention of those rows on ``mask``."""
    from svgtpu.kernels.reference import float64_attention, relative_error
    allowed = np.asarray(mask.allowed(rows[:, None], np.arange(mask.L)[None, :]))
    ref = np.stack([float64_attention(q[h, rows], k[h], v[h], allowed) for h in range(q.shape[0])])
    return relative_error(np.asarray(out, np.float32)[:, rows], ref)


@functools.lru_cache(maxsize=2)
def _check_inputs(heads: int, L: int, device) -> tuple:
    """Seeded bf16 ``q, k, v [heads, L, 128]`` on ``device`` and the float32 values they hold, on the host;
    made once per shape (every check of a section reads the same)."""
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(1)
    host = [rng.standard_normal((heads, L, 128)).astype(np.float32) for _ in range(3)]
    qkv = tuple(jax.device_put(jnp.asarray(x, jnp.bfloat16), device) for x in host)
    return qkv, [np.asarray(x.astype(jnp.float32)) for x in qkv]  # what the kernel sees


def check(p: Program, sizes: Sizes, device) -> dict:
    """``p``'s check before it is timed: ``{"ok", "max_rel_error" | "reason"}`` (module doc: what is checked)."""
    import jax

    from svgtpu.geometry import get_geometry
    g = get_geometry(p.geometry)
    if p.variant == "none":
        return {"ok": None, "reason": "checked in the run: finite output"}
    heads = 1 if p.section == "kernels" else 2
    (q, k, v), host = _check_inputs(heads, g.L, device)
    rows = _rows(g.L, sizes.check_rows)
    mask = p.the_mask()
    if p.section == "kernels":
        out = jax.jit(kernel_fn(p))(q, k, v)
        return _verdict(check_rows(out, *host, mask, rows))
    if p.mask == "dense":
        out = jax.jit(attention_fn(p))(q[None], k[None], v[None])[0]
        return _verdict(check_rows(out, *host, mask, rows))
    from svgtpu.attention.svg import svg_attention
    fn = jax.jit(lambda q, k, v, key: svg_attention(q, k, v, g, p.svg_config(), key=key, return_info=True,
                                                     **PRODUCTION.sparse_call()))
    out, info = fn(q, k, v, jax.random.PRNGKey(0))
    out, kinds = np.asarray(out, np.float32), np.asarray(info.kinds)
    worst = 0.0
    for h in range(heads):  # a temporal head ran the band in spatial-major order
        idx = g.to_spatial_major_index() if kinds[h] == 1 else np.arange(g.L)
        worst = max(worst, check_rows(out[h][idx][None], *(x[h][idx][None] for x in host), mask, rows))
    return _verdict(worst)


def _verdict(err: float) -> dict:
    return {"ok": bool(err <= TOLERANCE), "max_rel_error": err}


# -- the run -------------------------------------------------------------------------------------

def commit() -> str:
    """The checkout's short commit (``unknown`` outside git), ``+`` when it has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


RUNS_DIR = Path("figures", "tpu-runs")


def runs_folder(smoke: bool) -> Path:
    """Where a run's default file goes: ``figures/tpu-runs/`` (committed), a smoke run ``build/tpu-runs/``."""
    return REPO_ROOT / ("build/tpu-runs" if smoke else RUNS_DIR)


def default_out(smoke: bool, when: datetime.datetime | None = None) -> Path:
    """``figures/tpu-runs/<date>-<commit>.json`` (a smoke run: ``build/tpu-runs/``, not committed); where that file
    (or its ``.partial.json``) exists already, a second run the same day at the same commit (the rest of a cut run)
    takes ``<date>-<commit>-2.json``, then ``-3``: never the existing file."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    stem = f"{when:%Y-%m-%d}-{commit()}{'-smoke' if smoke else ''}"
    for n in range(1, 1000):
        path = runs_folder(smoke) / (stem + (f"-{n}" if n > 1 else "") + ".json")
        if not path.exists() and not path.with_name(path.stem + ".partial.json").exists():
            return path
    raise BadInput(f"{runs_folder(smoke)}: 999 runs named {stem}; name the run file with --out")


#: ``--resume latest``: the newest run file of the slice in the default folder (:func:`resume_source`).
LATEST = "latest"


def resume_source(name: str | Path, smoke: bool) -> dict:
    """The run ``--resume`` finishes: the file ``name`` (a run file or the ``.partial.json`` a run cut short left),
    or with :data:`LATEST` the newest file (by modification time) in :func:`runs_folder`; read and checked
    (sections, chips, smoke or not), with ``file``."""
    from svgtpu.inputs.runs import read_tpu_run
    if str(name) == LATEST:
        folder = runs_folder(smoke)
        files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime) if folder.is_dir() else []
        if not files:
            raise BadInput(f"--resume latest: no run file in {folder} to finish")
        name = files[-1]
    path = Path(name)
    if not path.exists():
        raise BadInput(f"--resume {name}: no such run file")
    run = read_tpu_run("--resume", path, measured=False)   # its schema (svgtpu.inputs.runs): types and fields
    if not {"kernels", "blocks", "chips"} <= set(run):
        raise BadInput(f"--resume {name}: not a run file of svgtpu bench tpu (no kernels, blocks or chips)")
    run["file"] = path.name
    if bool(run.get("smoke")) != smoke:
        raise BadInput(f"--resume {name}: a {'smoke' if run.get('smoke') else 'full'} run; resume it "
                       f"{'with' if run.get('smoke') else 'without'} --smoke")
    return run


def done_groups(run: dict) -> dict[tuple[str, str], dict]:
    """The section groups of ``run`` that need no rerun: every program of the group timed (``(section, geometry)``
    -> its section dict).  A group with anything not timed runs again whole: its ratios pair rounds run together."""
    return {(s["section"], s["geometry"]): s for s in run["kernels"] + run["blocks"]
            if s["rows"] and all(r["status"] == "ok" for r in s["rows"])}


def check_out(path: str | Path, named: bool = True) -> Path:
    """Refuse (:class:`BadInput`) a run file that exists (runs are never overwritten); one the user ``named`` must
    also be writable where it is (:func:`~svgtpu.facts.outputs.check_output`), the default's folder is made."""
    from svgtpu.facts.outputs import check_output
    path = Path(path)
    if path.exists():
        raise BadInput(f"--out {path} exists: a run file is never overwritten (name another file)")
    if named:
        check_output("--out", path)
    elif path.parent.exists() and not path.parent.is_dir():
        raise BadInput(f"--out {path}: {path.parent} is not a folder")
    return path


def check_sections(sections) -> tuple[str, ...]:
    sections = tuple(sections)
    bad = [s for s in sections if s not in SECTIONS]
    if bad or not sections:
        raise BadInput(f"sections must be some of {', '.join(SECTIONS)}, got {', '.join(sections) or 'none'}")
    return sections


def run(smoke: bool = False, sections=SECTIONS, out: str | Path | None = None, budget_s: float | None = None,
        resume: str | Path | None = None) -> dict:
    """The whole run (``smoke``: tiny shapes, any backend); writes the run file (``out``, default
    :func:`default_out`) and returns the result dict.  ``resume`` (a run file, its ``.partial.json``, or
    :data:`LATEST`): run only the section groups it lacks or did not time in full (:func:`done_groups`), on the same
    slice, and write them with its finished groups into the new run file (never into ``resume``'s)."""
    import jax
    from tqdm.auto import tqdm

    from svgtpu.bench.gpu_timing import Budget, check_budget, reason, time_variants
    from svgtpu.compiler.dumps import versions
    from svgtpu.facts.results import provenance
    from svgtpu.kernels.common import resolve_interpret
    sections = check_sections(sections)
    earlier = resume_source(resume, smoke) if resume is not None else None
    path = check_out(out) if out else check_out(default_out(smoke), named=False)
    partial = path.with_name(path.stem + ".partial.json")
    sizes = SMOKE if smoke else FULL
    if budget_s is not None:
        sizes = dataclasses.replace(sizes, budget_s=check_budget(budget_s, f"a v6e run: about {FULL.budget_s:.0f}"))
    if not smoke and jax.default_backend() != "tpu":
        raise BadInput(f"bench tpu needs a TPU backend (jax.default_backend() is {jax.default_backend()!r}); "
                       f"use --smoke to run the same code at tiny shapes here")
    devices = jax.devices()
    chips = max(c for c in SLICES if c <= len(devices))
    done = {}
    if earlier is not None:
        if earlier["chips"] != chips:
            raise BadInput(f"--resume {earlier['file']}: ran on {earlier['chips']} chips, this machine gives {chips}; "
                           "finish it on its own slice")
        done = done_groups(earlier)
    todo = programs(sizes, chips, sections)
    budget = Budget(sizes.budget_s)
    v = versions() if not smoke else {"jax": jax.__version__}
    result = {"provenance": provenance("measured", interpret=resolve_interpret(None)),
              "device": devices[0].device_kind, "chips": chips, "backend": jax.default_backend(), **v,
              "commit": commit(), "smoke": smoke, "profile": sizes.profile, "sections": list(sections),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "budget_s": sizes.budget_s, "programs": [p.name for p in todo], "kernels": [], "blocks": [],
              "errors": []}
    if earlier is not None:
        result["resumed_from"] = {"file": earlier["file"], "commit": earlier.get("commit"),
                                  "date": earlier.get("date"), "groups": [f"{s} {g}" for s, g in done]}
    weights = dict(sizes.weights)
    groups: dict[tuple[str, str], list[Program]] = {}
    for p in todo:
        if (p.section, p.geometry) in done:   # finished in the run resumed: its rows and ratios as they were
            if not any(s is done[p.section, p.geometry] for s in result["kernels"] + result["blocks"]):
                result["kernels" if p.section == "kernels" else "blocks"].append(done[p.section, p.geometry])
            continue
        groups.setdefault((p.section, p.geometry), []).append(p)
    left = [weights[s] for s, _ in groups]
    for i, ((section, geometry), group) in enumerate(tqdm(groups.items(), desc="bench tpu")):
        budget.section(1.0)   # the checks (and their compiles) are the run's work: only its deadline stops them
        try:
            checks = {}
            for p in tqdm(group, desc=f"{section} {geometry}: check vs float64", leave=False):
                checks[p.name] = check(p, sizes, devices[0]) if budget.left() > 0 else {"ok": False,
                                                                                          "reason": "time budget"}
            budget.section(left[i] / sum(left[i:]))   # the group's share of what is left, for compiles and rounds
            calls, inputs, unbuilt = {}, {}, {}
            for p in group:
                if checks[p.name]["ok"] is False:
                    continue
                try:
                    fn, args = program(p, devices[:chips])
                    # one set of inputs per shape: a section's programs share them (four 1440p blocks' own
                    # activations would not fit one chip)
                    shape = str(jax.tree.map(lambda a: (a.shape, a.dtype, a.sharding), args))
                    if shape not in inputs:
                        inputs[shape] = concrete(args)
                    calls[p.name] = functools.partial(jax.jit(fn), *inputs[shape])
                except Exception as error:  # noqa: BLE001 - out of memory making its inputs: recorded, the run goes on
                    unbuilt[p.name] = reason(error)
            for p in group:  # the block without attention: its check is a finite output, before it is timed
                if p.variant == "none" and p.name in calls:
                    try:
                        checks[p.name] = {"ok": bool(np.isfinite(np.asarray(calls[p.name](), np.float32)).all())}
                    except Exception as error:  # noqa: BLE001 - out of memory: time_variants says so again
                        checks[p.name] = {"ok": None, "reason": reason(error)}
                    if not checks[p.name]["ok"]:
                        calls.pop(p.name)
            times, skipped = time_variants(calls, budget, sizes.max_rounds, f"{section} {geometry}")
            skipped |= unbuilt
            found = _section_rows(section, geometry, group, checks, times, skipped)
            result["kernels" if section == "kernels" else "blocks"].append(found)
        except Exception as error:  # one broken section must not lose the others' numbers
            result["errors"].append({"section": f"{section} {geometry}", "reason": reason(error),
                                     "traceback": traceback.format_exc(limit=4)})
        _save_partial(result, partial)
    rows = [r for s in result["kernels"] + result["blocks"] for r in s["rows"]]
    result["all_ok"] = not result["errors"] and len(rows) == len(todo) and all(r["check"]["ok"] for r in rows)
    result["quantities"] = quantities(result)
    result["elapsed_s"] = budget.elapsed()
    result["written"] = str(write(result, path))
    partial.unlink(missing_ok=True)
    return result


def _save_partial(result: dict, partial: Path) -> None:
    """The run so far, after each section (overwritten each time, removed once the run file is written): what a
    run killed before its end leaves behind."""
    import json

    from svgtpu.facts.outputs import write_text
    partial.parent.mkdir(parents=True, exist_ok=True)
    write_text(partial, json.dumps(result | {"partial": True}, indent=1, default=float) + "\n")   # never half a file


def _section_rows(section, geometry, group, checks, times, skipped) -> dict:
    from svgtpu.bench.timing import paired_ratio, paired_ratio_iqr
    rows = []
    for p in group:
        row = {"variant": p.variant, "kernel": p.kernel, "mask": p.mask, "fast_path": p.fast_path, "kept": p.kept,
               "tile": f"{p.block_q}x{p.block_kv}/{p.block_kv_compute}", "check": checks[p.name],
               "status": "ok" if p.name in times else "not timed",
               "reason": (skipped.get(p.name) or ("check failed or skipped" if checks[p.name]["ok"] is False else "")
                          or (checks[p.name].get("reason", "") if p.name not in times else ""))}
        if p.name in times:
            row |= {"median_s": statistics.median(times[p.name]), "rounds": len(times[p.name]), "times": times[p.name]}
        rows.append(row)
    ratios = {}
    names = {p.variant: p.name for p in group if p.name in times}
    for a in names:
        for b in names:
            if a != b:
                ratios[f"{a}/{b}"] = {"value": paired_ratio(times, names[a], names[b]),
                                      "iqr": paired_ratio_iqr(times, names[a], names[b])}
    model = group[0].model
    return {"section": section, "geometry": geometry, "chips": group[0].chips,
            "model": None if model is None else _model(model).name, "rows": rows, "ratios": ratios}


def quantities(result: dict) -> dict:
    """The run's measured quantities by id (those a predictions file predicts): ``{id: {"value", "interval"}}``
    (interval: the IQR of the per-round ratios).  Kernels: the fast path's speedup (C4), the sparse mask's
    speedup over dense and ours over Splash, at the production tile (both kernels priced from the compiled
    table there) and with each kernel at its best tiles (``best_``); blocks: the self-attention share with
    each dense kernel (C2) and SVG's block speedup over dense Splash; over the block resolutions, the
    exponent of self-attention time (dense block minus the block without attention) in ``L`` (C5)."""
    out = {}

    def put(qid, section, a, b, transform=None):
        r = section["ratios"].get(f"{a}/{b}")
        if r is not None:
            f = transform or (lambda x: x)
            lo, hi = sorted((f(r["iqr"][0]), f(r["iqr"][1])))
            out[qid] = {"value": f(r["value"]), "interval": [lo, hi], "rounds": _rounds(section, a, b)}
    for s in result["kernels"]:
        g = s["geometry"]
        for prefix, at in (("", PRODUCTION_TAG), ("best_", "")):
            for mask in ("svg", "svg-aligned"):
                put(f"kernels_{g}_{prefix}fast_path_speedup_{mask}", s, f"ours-{mask}-nofast{at}", f"ours-{mask}-fast{at}")
                put(f"kernels_{g}_{prefix}sparse_speedup_{mask}", s, f"ours-dense-fast{at}", f"ours-{mask}-fast{at}")
            for mask in KERNEL_MASKS:
                put(f"kernels_{g}_{prefix}ours_over_splash_{mask}", s, f"ours-{mask}-fast{at}", f"splash-{mask}")
    for s in result["blocks"]:
        g, sec = s["geometry"], s["section"]
        for dense in ("splash", "ours"):
            put(f"{sec}_{g}_attention_share_{dense}", s, "none", f"dense-{dense}", lambda x: 1 - x)
        for variant in (r["variant"] for r in s["rows"] if r["variant"].startswith("svg")):
            put(f"{sec}_{g}_block_speedup_{variant}", s, "dense-splash", variant)
    for dense in ("splash", "ours"):
        k = attention_exponent([s for s in result["blocks"] if s["section"] == "block"], f"dense-{dense}")
        if k is not None:
            out[f"block_attention_exponent_{dense}"] = k
    return out


def _rounds(section: dict, *variants: str) -> int | None:
    """The fewest timing rounds among ``variants``' rows of ``section`` (what a quantity of them rests on)."""
    found = [r.get("rounds") for r in section["rows"] if r["variant"] in variants]
    return min(found) if found and None not in found else None


def attention_exponent(sections: list[dict], dense: str) -> dict | None:
    """C5 measured: ``k`` of self-attention seconds ``~ L^k`` between the smallest and the largest block
    resolution, self-attention being the block with ``dense`` attention minus the block without (per round,
    as they ran interleaved); the value from the medians, the interval the IQR over every pair of rounds."""
    from svgtpu.geometry import get_geometry

    def attention(s):
        rows = {r["variant"]: r for r in s["rows"]}
        if "times" not in rows.get(dense, {}) or "times" not in rows.get("none", {}):
            return None
        per_round = [a - b for a, b in zip(rows[dense]["times"], rows["none"]["times"])]
        return get_geometry(s["geometry"]).L, per_round
    found = sorted(x for x in map(attention, sections) if x is not None)
    if len(found) < 2:
        return None
    (l0, t0), (l1, t1) = found[0], found[-1]
    exponent = lambda a, b: math.log(b / a) / math.log(l1 / l0)  # noqa: E731
    pairs = [exponent(a, b) for a in t0 for b in t1 if a > 0 and b > 0]
    if not pairs or statistics.median(t0) <= 0 or statistics.median(t1) <= 0:  # no time left for attention: none
        return None
    return {"value": exponent(statistics.median(t0), statistics.median(t1)),
            "interval": [float(np.percentile(pairs, 25)), float(np.percentile(pairs, 75))],
            "rounds": min(len(t0), len(t1))}


def write(result: dict, path: str | Path) -> Path:
    """Write the run file (JSON) at ``path``, atomically, refusing one that exists."""
    import json

    from svgtpu.facts.outputs import write_text
    path = check_out(path, named=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, json.dumps(result, indent=1, default=float) + "\n")


def format_result(result: dict) -> str:
    """The run as tables, for the terminal."""
    from svgtpu.facts.tables import format_table
    parts = [f"bench tpu on {result['device']} x{result['chips']} ({result['backend']}, jax {result['jax']}) "
             f"[{result['provenance']}]{' SMOKE' if result['smoke'] else ''}, {result['elapsed_s']:.0f} s of a "
             f"{result['budget_s']:.0f} s budget; every check passed: {result['all_ok']}"]
    for s in result["kernels"] + result["blocks"]:
        rows = [{**{k: r.get(k) for k in ("variant", "tile", "status", "median_s", "rounds", "reason")},
                 "check": r["check"].get("max_rel_error", r["check"].get("reason"))} for r in s["rows"]]
        parts.append(f"{s['section']} {s['geometry']}" + (f" ({s['model']}, {s['chips']} chips)" if s["model"] else "")
                     + "\n" + format_table(rows))
    if result["quantities"]:
        parts.append("measured quantities (median paired ratio, IQR over rounds)\n" + format_table(
            [{"quantity": k, "value": q["value"], "iqr": f"[{q['interval'][0]:.3g}, {q['interval'][1]:.3g}]"}
             for k, q in result["quantities"].items()]))
    for e in result["errors"]:
        parts.append(f"section {e['section']} failed: {e['reason']}")
    return "\n\n".join(parts + [f"written: {result['written']}"])


__all__ = ["SECTIONS", "SLICES", "MODERATE_MODEL", "MODERATE_KEPT", "TOLERANCE", "KERNEL_MASKS", "BLOCK_ATTENTIONS", "Sizes", "mesh_shape", "FULL",
           "SMOKE", "best_tiles", "PRODUCTION_TAG", "production_tiles", "Program", "all_programs", "programs", "splash_heads", "kernel_fn", "attention_fn", "block_program",
           "program", "concrete", "check_rows", "check", "commit", "RUNS_DIR", "runs_folder", "default_out", "LATEST", "resume_source", "done_groups",
           "check_out",
           "check_sections", "run", "quantities", "attention_exponent", "write", "format_result"]
