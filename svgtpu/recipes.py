"""Named settings from sources: SVG's Wan 2.1 recipes and the production tile, each number cited.

A :class:`Recipe` is what one of SVG's own Wan 2.1 scripts runs: the kept fraction (SVG's
``sparsity``), ``first_times_fp`` / ``first_layers_fp`` (the dense warm-up) and the profiling rows
(``num_sampled_rows``).  SVG's code has read ``first_times_fp`` two ways:

- ``timestep`` (the SVG1 release, up to commit 5efea72): a step runs dense while its timestep is
  above ``1000 * (1 - first_times_fp)``, so the share of dense *steps* follows from the sampler's
  shifted flow-matching schedule (:class:`FlowSchedule`); the scripts' own comment maps one to the
  other ("35% -> 0.09, 30% -> 0.075, ...") and ``tests/test_recipes.py`` rederives that comment;
- ``step`` (the scripts rewritten with SVG2, 2025-09-25 and at HEAD): ``floor(first_times_fp *
  steps)`` leading steps run dense.

The write-up we reproduce names no recipe: :data:`RECIPES` holds it as ``write-up`` with every
number ``None`` (unknown).  The package's default (:data:`DEFAULT_RECIPE`) is SVG's own current
T2V-14B 720p script (kept fraction 0.3, the first 20 % of steps, ``floor(0.03 x 40)`` layers);
:mod:`svgtpu.warmup` takes its defaults from it.  The SVG1 recipes differ (kept 0.25, 30 % or 35 %
of the steps dense): the cost model's sensitivity spans them.  No JAX here: the cost model and
the CLI import this.
"""

from __future__ import annotations

import dataclasses
import math

from svgtpu.errors import BadInput
from svgtpu.geometry import Tile

# -- sources ------------------------------------------------------------------------------------

SVG_REPO = "svg-project/Sparse-VideoGen"
#: The last commit before the SVG2 rewrite; the SVG1 Wan scripts are unchanged since 3c71be2 (2025-04-11).
SVG1_COMMIT = "5efea724f4b44579dae3f3e130648c3148131d90"
#: HEAD of the repository when read (2025-12-09); its Wan scripts date from 2025-09-25 (e0f1183, 009e440).
SVG_HEAD_COMMIT = "5ce7b0127c0d44383ee8b9e5512431feb625f621"
WAN_REPO = "Wan-Video/Wan2.1"
WAN_COMMIT = "9737cba9c1c3c4d04b33fcad41c111989865d315"
MAXDIFFUSION_REPO = "AI-Hypercomputer/maxdiffusion"
MAXDIFFUSION_COMMIT = "7cfb8801d41d1728f0232cd7ee59e900a151fecf"


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a number was read: a repository, a path in it and a commit (or a package version)."""

    repo: str
    path: str
    commit: str
    what: str = ""

    def cite(self) -> str:
        """``repo/path@commit12 (what)``."""
        return f"{self.repo}/{self.path}@{self.commit[:12]}" + (f" ({self.what})" if self.what else "")


#: The sampler's timestep grid (Wan 2.1's FlowUniPCMultistepScheduler.set_timesteps; SVG's scripts use
#: diffusers' UniPCMultistepScheduler with use_flow_sigmas=True, num_train_timesteps=1000, which builds the
#: same grid).
WAN_SCHEDULE_SOURCE = Source(WAN_REPO, "wan/utils/fm_solvers_unipc.py", WAN_COMMIT,
                             "set_timesteps: sigmas = linspace(sigma_max, sigma_min, N+1)[:-1], "
                             "shifted shift*s/(1+(shift-1)*s), timesteps = int64(sigma*1000)")


# -- the sampler's schedule ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FlowSchedule:
    """Wan's shifted flow-matching timestep grid: ``steps`` timesteps from ~999 down, for ``shift``.

    ``sigma_i = shift*s_i / (1 + (shift-1)*s_i)`` with ``s_i = linspace(0.999, 0, steps+1)[i]``,
    ``i < steps`` (the training sigmas run from ``1 - 1/1000`` to 0), and the timestep is
    ``int(1000 * sigma_i)`` (:data:`WAN_SCHEDULE_SOURCE`).
    """

    steps: int
    shift: float
    train_timesteps: int = 1000

    def __post_init__(self):
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps <= 0:
            raise BadInput(f"steps must be a positive integer, got {self.steps!r}")
        if not self.shift > 0:
            raise BadInput(f"shift must be positive, got {self.shift!r}")

    def timesteps(self) -> tuple[int, ...]:
        n, top = self.steps, 1 - 1 / self.train_timesteps
        out = []
        for i in range(n):
            s = top - top * i / n
            sigma = self.shift * s / (1 + (self.shift - 1) * s)
            out.append(int(sigma * self.train_timesteps))
        return tuple(out)

    def dense_steps_above(self, first_times_fp: float) -> int:
        """SVG1's rule: how many steps have ``timestep > 1000 * (1 - first_times_fp)`` (they run dense)."""
        threshold = self.train_timesteps * (1 - first_times_fp)
        return sum(t > threshold for t in self.timesteps())


# -- recipes ------------------------------------------------------------------------------------

RULES = ("timestep", "step")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One SVG run as a script gives it.  ``None`` numbers are unknown (the write-up's recipe).

    ``dense_step_share`` and ``dense_layer_share`` are what the package's schedule takes
    (:func:`svgtpu.warmup.warmup_count` of them gives the script's counts): the script's own
    fractions under the ``step`` rule (they carry over to other step and layer counts as the script
    would), the counts' shares under the ``timestep`` rule.
    """

    name: str
    model: str | None
    geometry: str | None          # a :data:`svgtpu.geometry.PRESETS` name
    steps: int | None
    shift: float | None           # the scheduler's flow shift
    kept: float | None            # SVG's ``sparsity``: the kept fraction of (q, k) pairs
    first_times_fp: float | None
    rule: str | None              # how the script reads first_times_fp: one of RULES
    first_layers_fp: float | None
    num_sampled_rows: int | None
    sources: tuple[Source, ...]
    layers: int = 40              # Wan 2.1 14B
    note: str = ""

    def __post_init__(self):
        if self.rule is not None and self.rule not in RULES:
            raise BadInput(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}")

    @property
    def known(self) -> bool:
        return self.kept is not None

    @property
    def dense_steps(self) -> int | None:
        """Dense warm-up steps: through the schedule (``timestep`` rule) or ``floor(fp * steps)``."""
        if self.first_times_fp is None:
            return None
        if self.rule == "timestep":
            return FlowSchedule(self.steps, self.shift).dense_steps_above(self.first_times_fp)
        return math.floor(round(self.first_times_fp * self.steps, 9))

    @property
    def dense_layers(self) -> int | None:
        """Dense layers: SVG1 runs layers ``idx < layers * fp`` (a ceiling), the later scripts ``floor(fp * layers)``."""
        if self.first_layers_fp is None:
            return None
        product = round(self.first_layers_fp * self.layers, 9)
        return math.ceil(product) if self.rule == "timestep" else math.floor(product)

    @property
    def dense_step_share(self) -> float | None:
        if self.dense_steps is None:
            return None
        return self.first_times_fp if self.rule == "step" else self.dense_steps / self.steps

    @property
    def dense_layer_share(self) -> float | None:
        if self.dense_layers is None:
            return None
        return self.first_layers_fp if self.rule == "step" else self.dense_layers / self.layers

    def as_dict(self) -> dict:
        return {"name": self.name, "model": self.model, "geometry": self.geometry, "steps": self.steps,
                "shift": self.shift, "kept": self.kept, "first_times_fp": self.first_times_fp, "rule": self.rule,
                "dense_steps": self.dense_steps, "dense_step_share": self.dense_step_share,
                "first_layers_fp": self.first_layers_fp, "dense_layers": self.dense_layers,
                "dense_layer_share": self.dense_layer_share, "num_sampled_rows": self.num_sampled_rows,
                "sources": [s.cite() for s in self.sources], "note": self.note}


def _svg1(path: str, what: str) -> Source:
    return Source(SVG_REPO, path, SVG1_COMMIT, what)


def _head(path: str, what: str) -> Source:
    return Source(SVG_REPO, path, SVG_HEAD_COMMIT, what)


_SVG1_T2V = _svg1("scripts/wan_t2v_inference.sh",
                  "first_times_fp=0.075, first_layers_fp=0.025, sparsity=0.25, --num_sampled_rows 64; "
                  "runs 1280x720 and 832x480")
_SVG1_T2V_PY = _svg1("wan_t2v_inference.py", "num_inference_steps default 50; flow_shift = 5.0 for both resolutions")
_SVG1_I2V = _svg1("scripts/wan_i2v_inference.sh",
                  "first_times_fp=0.09, first_layers_fp=0.025, sparsity=0.25, 40 steps, --num_sampled_rows 64")
_SVG1_I2V_PY = _svg1("wan_i2v_inference.py", "Wan2.1-I2V-14B-720P, flow_shift = 5.0")
_SVG1_RULE = _svg1("svg/models/wan/attention.py",
                   "dense if layer_idx < num_layers * first_layers_fp or timestep > 1000 * (1 - first_times_fp)")
_HEAD_RULE = "num_fp_timesteps = floor(first_times_fp * steps), num_fp_layers = floor(first_layers_fp * layers)"
_HEAD_T2V_PY = _head("wan_t2v_inference.py", _HEAD_RULE)
_HEAD_I2V_PY = _head("wan_i2v_inference.py", _HEAD_RULE)

#: Every named recipe.  The SVG1 ones are the scripts of SVG's first release (the ICML 2025 paper's
#: code); the ``svg-head`` ones are the same repository's scripts after the SVG2 rewrite.
RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("svg1-t2v-14b-720p", "wan2.1-t2v-14b", "720p", 50, 5.0, 0.25, 0.075, "timestep", 0.025, 64,
           (_SVG1_T2V, _SVG1_T2V_PY, _SVG1_RULE, WAN_SCHEDULE_SOURCE)),
    Recipe("svg1-t2v-14b-480p", "wan2.1-t2v-14b", "480p", 50, 5.0, 0.25, 0.075, "timestep", 0.025, 64,
           (_SVG1_T2V, _SVG1_T2V_PY, _SVG1_RULE, WAN_SCHEDULE_SOURCE),
           note="the script's comment says shift 3.0 for 480p, but the code runs 5.0"),
    Recipe("svg1-i2v-14b-720p", "wan2.1-i2v-14b", "720p", 40, 5.0, 0.25, 0.09, "timestep", 0.025, 64,
           (_SVG1_I2V, _SVG1_I2V_PY, _SVG1_RULE, WAN_SCHEDULE_SOURCE)),
    Recipe("svg-head-t2v-14b-720p", "wan2.1-t2v-14b", "720p", 50, 5.0, 0.3, 0.2, "step", 0.03, 64,
           (_head("scripts/wan/wan_t2v_720p_svg.sh",
                  "infer_step=50, first_times_fp=0.2, first_layers_fp=0.03, sparsity=0.3, --num_sampled_rows 64"),
            _HEAD_T2V_PY)),
    Recipe("svg-head-i2v-14b-720p", "wan2.1-i2v-14b", "720p", 40, 5.0, 0.3, 0.35, "step", 0.03, 64,
           (_head("scripts/wan/wan_i2v_720p_svg.sh",
                  "infer_step=40, first_times_fp=0.35, first_layers_fp=0.03, sparsity=0.3, --num_sampled_rows 64"),
            _HEAD_I2V_PY)),
    Recipe("svg-head-i2v-14b-480p", "wan2.1-i2v-14b", "480p", 40, 5.0, 0.3, 0.2, "step", 0.03, 64,
           (_head("scripts/wan/wan_i2v_480p_svg.sh",
                  "infer_step=40, first_times_fp=0.2, first_layers_fp=0.03, sparsity=0.3, --num_sampled_rows 64"),
            _HEAD_I2V_PY)),
    Recipe("write-up", None, None, None, None, None, None, None, None, None, (),
           note="unknown: the write-up names no model, kept fraction, warm-up, profiling rows or tile"),
)}

#: SVG1's own mapping of first_times_fp to a share of dense steps, as the comment in its Wan scripts
#: gives it ("35% -> 0.09, 30% -> 0.075, 25% -> 0.055, 20% -> 0.045, 15% -> 0.03, 10% -> 0.02").
SVG1_TIMES_FP_COMMENT = {0.35: 0.09, 0.30: 0.075, 0.25: 0.055, 0.20: 0.045, 0.15: 0.03, 0.10: 0.02}
SVG1_TIMES_FP_COMMENT_SOURCE = _svg1("scripts/wan_t2v_inference.sh", "lines 1-3 (the same in wan_i2v_inference.sh)")

#: The package's default: SVG's own current Wan 2.1 T2V-14B 720p script.
DEFAULT_RECIPE = RECIPES["svg-head-t2v-14b-720p"]


def get_recipe(name: str) -> Recipe:
    """A recipe by name; a ``ValueError`` naming the known ones otherwise."""
    if name not in RECIPES:
        raise BadInput(f"recipe must be one of {', '.join(RECIPES)}, got {name!r}")
    return RECIPES[name]


# -- tiles --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TileRecipe:
    """A Splash block-size setting: ``block_q x block_kv`` tiles, ``block_kv_compute`` keys per update."""

    name: str
    block_q: int
    block_kv: int
    block_kv_compute: int | None
    source: Source

    @property
    def tile(self) -> Tile:
        """``Tile(block_q, block_kv)``."""
        return Tile(self.block_q, self.block_kv)

    def as_dict(self) -> dict:
        return {"name": self.name, "block_q": self.block_q, "block_kv": self.block_kv,
                "block_kv_compute": self.block_kv_compute, "source": self.source.cite()}


#: MaxDiffusion's Wan 2.1 14B block sizes for v6e (the commented "# Use on v6e" block of its config).
MAXDIFFUSION_V6E_TILE = TileRecipe("maxdiffusion-wan-v6e", 3024, 2048, 1024, Source(
    MAXDIFFUSION_REPO, "src/maxdiffusion/configs/base_wan_14b.yml", MAXDIFFUSION_COMMIT,
    'flash_block_sizes "# Use on v6e": block_q 3024, block_kv 2048, block_kv_compute 1024'))
#: MaxDiffusion's default (uncommented) Wan 2.1 14B block sizes.
MAXDIFFUSION_DEFAULT_TILE = TileRecipe("maxdiffusion-wan-default", 512, 512, 512, Source(
    MAXDIFFUSION_REPO, "src/maxdiffusion/configs/base_wan_14b.yml", MAXDIFFUSION_COMMIT,
    "flash_block_sizes: block_q 512, block_kv 512, block_kv_compute 512"))
#: MaxDiffusion's SVG kernel tiles for Wan 2.2 on v6e (its SVG documentation's example; not in :data:`TILES`,
#: which the compiled tile table compiles): the C3 search counts them beside the others.
#: MaxDiffusion's SVG pull request (480) as stored when read (its docs, policy code and Wan 2.2 config).
MAXDIFFUSION_SVG_COMMIT = "2a52ee9c79ad6f991c998af600804f7519a49350"
MAXDIFFUSION_SVG_DOCS = Source(MAXDIFFUSION_REPO, "docs/svg.md", MAXDIFFUSION_SVG_COMMIT)
MAXDIFFUSION_SVG_TILE = TileRecipe("maxdiffusion-svg", 3328, 2816, 256, dataclasses.replace(
    MAXDIFFUSION_SVG_DOCS, what="svg_flash_block_sizes: block_q 3328, block_kv 2816, block_kv_compute 256"))
#: The retained pair densities of MaxDiffusion's moderate Wan 2.2 SVG policy (low-noise and high-noise expert);
#: its band half-width follows from a density by :func:`svgtpu.masks.core.density_band_window`.
MAXDIFFUSION_SVG_DENSITIES = (0.2, 0.5)
MAXDIFFUSION_SVG_DENSITIES_SOURCE = dataclasses.replace(
    MAXDIFFUSION_SVG_DOCS, what="moderate policy: svg_low_noise_density 0.20, svg_high_noise_density 0.50")
#: MaxDiffusion's dense attention beside its SVG tiles: the fixed-M splash (``ulysses_ring_custom_fixed_m``) at
#: 6400 x 2048 (no ``block_kv_compute`` given).
MAXDIFFUSION_FIXED_M_TILE = TileRecipe("maxdiffusion-fixed-m", 6400, 2048, None, dataclasses.replace(
    MAXDIFFUSION_SVG_DOCS, what="flash_block_sizes block_q 6400, block_kv 2048 (dense fixed-M splash)"))
#: JAX Splash attention's default block sizes.
SPLASH_DEFAULT_TILE = TileRecipe("splash-default", 128, 128, 128, Source(
    "jax-ml/jax", "jax/experimental/pallas/ops/tpu/splash_attention/splash_attention_kernel.py", "jax-v0.10.2",
    "BlockSizes.get_default(): block_q = block_kv = block_kv_compute = 128"))
TILES: dict[str, TileRecipe] = {t.name: t for t in (MAXDIFFUSION_V6E_TILE, MAXDIFFUSION_DEFAULT_TILE,
                                                   SPLASH_DEFAULT_TILE)}

#: The production tile every 1440p number of ours uses unless it says otherwise: MaxDiffusion's v6e tile
#: with block_q rounded up to a multiple of 128 (3024 -> 3072), which our key-major body needs (Mosaic's
#: lane rule, :mod:`svgtpu.kernels.config`); its full-tile body takes fewer static v6e bundles than the
#: query-major body at MaxDiffusion's 3024 x 2048 (the record: figures/compiled_tiles.json, `svgtpu bench
#: compiled`; docs/compiled_schedule.md).  ``block_kv_compute`` 256: our default at that tile.
PRODUCTION_TILE = TileRecipe("svgtpu-wan-v6e", -(-MAXDIFFUSION_V6E_TILE.block_q // 128) * 128,
                             MAXDIFFUSION_V6E_TILE.block_kv, 256, Source(
    MAXDIFFUSION_REPO, "src/maxdiffusion/configs/base_wan_14b.yml", MAXDIFFUSION_COMMIT,
    '"# Use on v6e" block_q 3024 rounded up to 3072 for the key-major body, block_kv 2048'))


def recipes_report(name: str | None = None) -> dict:
    """``svgtpu recipes``: one recipe (``name``) or all, the tile settings, each with its source."""
    recipes = [get_recipe(name)] if name is not None else list(RECIPES.values())
    return {"default": DEFAULT_RECIPE.name, "recipes": [r.as_dict() for r in recipes],
            "tiles": [t.as_dict() for t in TILES.values()], "provenance": "cited"}


def format_recipes(result: dict) -> str:
    """:func:`recipes_report` as a table, then each recipe's sources and the tiles'."""
    import textwrap

    from svgtpu.facts.tables import FIT_WIDTH, format_table

    def known(value, text=None):
        return "unknown" if value is None else (text if text is not None else value)
    rows = [{"recipe": r["name"] + (" (default)" if r["name"] == result["default"] else ""),
             "kept": known(r["kept"]), "first_times_fp": known(r["first_times_fp"]),
             "dense steps": known(r["steps"] or None, f"{r['dense_steps']}/{r['steps']} ({r['rule']})"),
             "dense layers": known(r["dense_layers"], f"{r['dense_layers']}/40"),
             "rows": known(r["num_sampled_rows"])} for r in result["recipes"]]
    def wrap(text: str, first: str = "  - ") -> str:   # sources are long: one per line, wrapped, paths unbroken
        return textwrap.fill(text, FIT_WIDTH, initial_indent=first, subsequent_indent="    ",
                             break_long_words=False, break_on_hyphens=False)
    sources = ["\n".join([f"{r['name']}:", *(wrap(s) for s in (r["sources"] or [r["note"]]))])
               for r in result["recipes"]]
    tiles = [wrap(f"{t['name']}: {t['block_q']}x{t['block_kv']} (kv compute {t['block_kv_compute']}) {t['source']}",
                  "") for t in result["tiles"]]
    return "\n\n".join([format_table(rows), "\n".join(sources), "\n".join(tiles)])


__all__ = ["DEFAULT_RECIPE", "FlowSchedule", "MAXDIFFUSION_DEFAULT_TILE", "MAXDIFFUSION_FIXED_M_TILE", "MAXDIFFUSION_SVG_DENSITIES",
           "MAXDIFFUSION_SVG_DENSITIES_SOURCE", "MAXDIFFUSION_SVG_TILE",
           "MAXDIFFUSION_V6E_TILE", "PRODUCTION_TILE", "RECIPES", "Recipe", "SPLASH_DEFAULT_TILE",
           "SVG1_TIMES_FP_COMMENT", "Source", "TILES", "TileRecipe", "format_recipes", "get_recipe", "recipes_report"]
