"""Run the notebooks through papermill: one command regenerates every figure and number.

``svgtpu reproduce --profile cpu`` executes ``notebooks/*.ipynb``, each with the parameters
``profile`` and ``figures_dir``, writes the executed copies to ``build/notebooks/`` (ignored by git),
shows a tqdm bar, prints a summary table (notebook, status, seconds, figures written) and then
regenerates the paper's tables from the results file.  A failing notebook is reported with its cell
and error; the others still run, and since every notebook replaces only its own entries in the
results file (under a lock), their results stay intact.

Notebooks run :data:`JOBS` at a time (the cpu profile: two, one per core of a 2-core machine), each
in a worker process of its own, in file order but for what they read from each other (:data:`AFTER`)
and never two that time code on this machine side by side (:data:`TIMED`).  Their kernels share JAX's
persistent compilation cache in ``build/jax-cache`` (``make clean`` empties it), so a second run skips the XLA
compiles of the first.  libtpu's compiles for the static schedules are records (:mod:`svgtpu.compiler.dumps`)
committed in ``figures/compiled/``: a notebook reads each whose key matches and compiles any other into that
folder; a run of every notebook then removes the records none of them used (stale keys).

The profiles trade size for time.  ``quick`` is for the test suite (seconds per notebook),
``cpu`` is the default of ``make figures`` on a 2-core machine (minutes in all), ``tpu`` uses the
real sizes on a TPU VM.  What a student would change (geometry, kept fraction, tile sizes) sits in
each notebook's ``parameters`` cell; :data:`PROFILES` holds the sizes that trade time for
precision and may override a parameter (``quick`` shrinks the geometry, ``tpu`` grows it).

A notebook run by hand writes to a scratch folder (:data:`SCRATCH_DIR`) unless its parameter
``update_figures`` is true; ``svgtpu reproduce`` always passes ``figures_dir``, so it writes the
committed ``figures/`` (or the folder it is given).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import sys
import time
from pathlib import Path

from svgtpu.compiler.dumps import RECORD_LOG_VAR, RECORDS_DIR_VAR, prune
from svgtpu.errors import BadInput
from svgtpu.setting import PRODUCTION
from svgtpu.facts.paths import BUILD_DIR, CHECKPOINT, JAX_CACHE_DIR, RECORDS_NAME, REPO_ROOT
from svgtpu.tpu_env import persistent_cache_env

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
KERNEL_NAME = "svgtpu-reproduce"
#: Where a notebook run by hand writes its figures and results (ignored by git).
SCRATCH_DIR = BUILD_DIR / "scratch" / "figures"
#: papermill's kernel draws with the inline backend, so executed copies hold their figures.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

#: The notebooks in reading order (the file order): the primer and the kernel track first, then the
#: research track; the explorer is a tool beside them.
NOTEBOOKS = ("00_primer", "01_pallas_in_five_kernels", "01b_block_sparse_by_hand", "02_kernel_walkthrough", "03_mask_alignment",
             "04_fast_path_ablation", "05_quadratic_scaling", "06_end_to_end_speedup", "07_quality", "08_on_a_gpu",
             "explorer")

#: What a notebook needs finished before it starts: 04 rewrites the compiled tile table (``compiled_tiles.json``)
#: that the cost model reads in 00, 05, 06, 07 and the explorer, and makes the compile records of the kernels 05
#: reads (else both compile them where the records are stale).
AFTER = {name: ("04_fast_path_ablation",) for name in ("00_primer", "05_quadratic_scaling", "06_end_to_end_speedup",
                                                       "07_quality", "explorer")}
#: Notebooks whose results hold timings taken on this machine: never two of them side by side.
TIMED = ("04_fast_path_ablation", "05_quadratic_scaling", "06_end_to_end_speedup")
#: The longest notebooks under the cpu profile, longest first: of those ready, these start before file order, so the
#: longest is not the last to start (``make figures`` on 2 idle cores at dc6b6aa: 07 339 s, 03 120 s, the others
#: 4-191 s; 07 started at 4 min, behind 05, and ended the run at 9:40).
LONGEST = ("07_quality", "03_mask_alignment")
#: Notebooks run at once, per profile (others: one at a time): the cpu profile (``make figures``) takes both
#: cores of a 2-core machine; the tpu profile's notebooks share one TPU, which one process holds at a time.
JOBS = {"cpu": 2}

# What every profile shares: the resolutions of the C2/C5 sweep (cheap: modeled).
_SWEEP = ["480p", "720p", "1080p", "1440p", "2160p"]
# Notebooks that only compute: the same at every profile, no sizes to set.
_COMPUTED_ONLY = {"explorer": {}, "00_primer": {}, "01_pallas_in_five_kernels": {}, "01b_block_sparse_by_hand": {},
                  "02_kernel_walkthrough": {}, "08_on_a_gpu": {}}   # 08 reads the committed GPU runs: no GPU, seconds
# cpu: the balanced variant (aligned at the unaligned mask's kept pairs) in place of inner, to keep 07's time
_QUALITY_VARIANTS = ["svg", "svg-no-fast-path", "svg-aligned", "svg-aligned-no-fast-path", "svg-aligned-balanced"]
# 05's method chart: None = every sparse method unaligned and snapped (svgtpu.bench.methods.VARIANTS).
_METHOD_VARIANTS = None

# 05's compiled Wan blocks (svgtpu.compiler.wan_block): the model, its tiles, the blocks ([resolution, device,
# variants...]; no variant: dense and SVG), where our kernel's cycles come from, and the resolutions of C5's
# compiled-cycles sweep.  quick: a tiny block of the same code in seconds.
_WAN_BLOCKS = {"block_model": "wan2.1-14b", "block_tiles": [PRODUCTION.block_q, PRODUCTION.block_kv], "c5_resolutions": _SWEEP}
_QUICK_BLOCKS = {"block_model": {"name": "tiny", "layers": 40, "dim": 512, "heads": 8, "head_dim": 64, "ffn": 1024,
                                 "text_len": 16, "patch_in": 64, "source": "quick profile: the code path, not Wan"},
                 "block_tiles": [128, 128], "blocks": [["2x8x16", "v6e"]], "block_kernel": "in-block",
                 "c5_resolutions": ["2x8x16", "2x16x32", "4x16x32"]}

#: Parameters ``svgtpu reproduce`` passes to a notebook besides ``profile`` and ``figures_dir`` (papermill
#: overrides its parameters cell), per notebook, then per profile: the kernel-writing notebooks run their worked
#: solutions (a student's own run keeps ``show_solutions = False``, so *Run All* never replaces their code), and
#: the cpu and quick profiles (``make figures``, ``make test``) skip their compile demonstrations, which feed no figure.
RUN_PARAMETERS: dict[str, dict] = {"01_pallas_in_five_kernels": {"show_solutions": True},
                                   "01b_block_sparse_by_hand": {"show_solutions": True}}
PROFILE_RUN_PARAMETERS: dict[str, dict[str, dict]] = {
    "cpu": {"01_pallas_in_five_kernels": {"compile_lessons": False}, "01b_block_sparse_by_hand": {"compile_lessons": False}}}
# quick (make test) skips them too: each is a compile child of its own (01b's 3024x2048 tile alone is several
# seconds); tests/test_aot.py checks the compile_report machinery they call, and 01b's ex11 check and block-size
# sweep, which the quick run keeps, compile lesson kernels through it
PROFILE_RUN_PARAMETERS["quick"] = PROFILE_RUN_PARAMETERS["cpu"]


def run_parameters(notebook: str, profile: str) -> dict:
    """What ``svgtpu reproduce`` passes ``notebook`` under ``profile`` besides ``profile`` and ``figures_dir``."""
    return {**RUN_PARAMETERS.get(notebook, {}), **PROFILE_RUN_PARAMETERS.get(profile, {}).get(notebook, {})}


def tuned_tiles(resolution: str) -> list[int]:
    """``[block_q, block_kv]`` ``svgtpu tune --record`` found fastest for :data:`PRODUCTION`'s device at
    ``resolution`` (``figures/tuned_tiles.json``, committed: nothing compiles here), else PRODUCTION's tile."""
    from svgtpu.compiler.tune import tuned_tile
    t = tuned_tile(resolution, PRODUCTION.device)
    return [t["block_q"], t["block_kv"]] if t else [PRODUCTION.block_q, PRODUCTION.block_kv]


# the tpu profile's tiles: the tuned 720p tile for 04's kernel runs, the tuned production-resolution tile for 05's
# blocks, and 04's compiled comparison (at 1440p) at the production tile, the tuned one and 512 x 512
_TUNED_720P, _TUNED_PRODUCTION = tuned_tiles("720p"), tuned_tiles(PRODUCTION.resolution)
_TPU_COMPILED_TILES = ",".join(dict.fromkeys(f"{q}x{kv}" for q, kv in (
    (PRODUCTION.block_q, PRODUCTION.block_kv), _TUNED_PRODUCTION, (512, 512))))

#: Per profile and notebook, the sizes each notebook runs at.
PROFILES: dict[str, dict[str, dict]] = {
    "quick": {
        **_COMPUTED_ONLY,
        "05_quadratic_scaling": {"toy_repeats": 3, "toy_frames": [2, 4], "sweep": _SWEEP, **_QUICK_BLOCKS},
        "03_mask_alignment": {"layout_geometry": "9x16x24", "layout_block": 256,
                              "search_geometries": ["480p"], "search_tiles": [[PRODUCTION.block_q, PRODUCTION.block_kv], [512, 512]],
                              "error_geometry": "4x6x10", "error_block": 64, "error_heads": 2,
                              "error_head_dim": 64},
        "04_fast_path_ablation": {"geometry": "4x8x16", "block_q": 128, "block_kv": 128, "rounds": 3,
                                  "heads": 1, "head_dim": 64, "compiled_geometry": None},
        "06_end_to_end_speedup": {"seeds": [0], "steps": 2, "repeats": 1},
        "07_quality": {"seeds": [0], "steps": 2, "kept_fractions": [0.3],
                       "variants": ["svg", "svg-aligned", "svg-aligned-balanced"],
                       "method_variants": ["svg", "sta-aligned"], "method_kept": [0.3], "method_seeds": [0],
                       "method_steps": 2},
    },
    "cpu": {
        **_COMPUTED_ONLY,
        # compiled blocks on v6e: dense at 720p, dense and SVG at 1440p, our kernel read from its own compile
        # (notebook 04's); the tpu profile compiles the whole set with the kernel in the block
        "05_quadratic_scaling": {"toy_repeats": 5, "toy_frames": [2, 4, 8, 16], "sweep": _SWEEP,
                                 **_WAN_BLOCKS, "blocks": [["720p", "v6e", "dense"], ["1440p", "v6e"]],
                                 "block_kernel": "own-compile"},
        "03_mask_alignment": {"layout_geometry": "480p", "layout_block": 512,
                              "error_geometry": "8x10x14", "error_block": 128, "error_heads": 4,
                              "error_head_dim": 64},
        # 2 timed calls of each kernel per round, not 3 (the fastest kept: one call slowed by the notebook beside it is
        # still filtered out): 12 kernels x 3 rounds x 1 call less, about 40 of the 150 CPU-s 04's timing took
        "04_fast_path_ablation": {"rounds": 3, "repeats": 2,  # geometry and tiles: the notebook's parameters cell
                                  "heads": 1, "head_dim": 128},  # compiled part: 1440p (its records: figures/compiled/)
        # the toy's timed sampling at 5 steps: the same 20 % dense warm-up share as at 10 (1 step of 5, 2 of 10), so
        # the same dense / SVG ratio per video in half the time (its 4 backends x 3 videos were 111 s of 06's 146 s)
        "06_end_to_end_speedup": {"seeds": [0], "steps": 5, "repeats": 2},
        # sized down for 2 cores (the tpu profile runs the full study).  Section 6's method chart samples every
        # method at 5 steps (the same 20 % dense warm-up share as at 10: 1 step of 5): its 9 videos were half of 07's
        # time, 07 the long pole of make figures; the Q claims (sections 1-2) keep their 10 steps
        "07_quality": {"seeds": [0], "steps": 10, "kept_fractions": [0.3, 0.6], "variants": _QUALITY_VARIANTS,
                       "method_variants": _METHOD_VARIANTS, "method_kept": [0.3], "method_seeds": [0],
                       "method_steps": 5},
    },
    "tpu": {
        **_COMPUTED_ONLY,
        "05_quadratic_scaling": {"toy_repeats": 15, "toy_frames": [4, 8, 16, 32], "sweep": _SWEEP, **_WAN_BLOCKS,
                                 "block_tiles": _TUNED_PRODUCTION,
                                 "blocks": [["720p", "v6e"], ["1440p", "v6e"], ["720p", "v7x"], ["1440p", "v7x"]],
                                 "block_kernel": "in-block"},
        "03_mask_alignment": {"layout_geometry": "480p", "layout_block": 512,
                              "error_geometry": "21x30x52", "error_block": 512, "error_heads": 8,
                              "error_head_dim": 128},
        "04_fast_path_ablation": {"geometry": "720p", "block_q": _TUNED_720P[0], "block_kv": _TUNED_720P[1], "rounds": 15,
                                  "heads": 8, "head_dim": 128, "compiled_tiles": _TPU_COMPILED_TILES,
                                  "compiled_devices": "v6e,v7x", "compiled_sweep": True},
        "06_end_to_end_speedup": {"seeds": [0, 1, 2], "steps": 50, "repeats": 3},
        "07_quality": {"seeds": [0, 1, 2, 3], "steps": 50, "kept_fractions": [0.3, 0.5, 0.6, 0.8],
                       "variants": _QUALITY_VARIANTS + ["svg-aligned-inner"], "method_variants": _METHOD_VARIANTS,
                       "method_kept": [0.15, 0.2, 0.3, 0.45, 0.6], "method_seeds": [0, 1, 2, 3], "method_steps": 50},
    },
}

def settings(notebook: str, profile: str, **parameters) -> dict:
    """The sizes ``notebook`` runs at under ``profile``: its ``parameters`` cell values, overridden
    by whatever the profile sets for the same names."""
    if profile not in PROFILES:
        raise BadInput(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    if notebook not in PROFILES[profile]:
        raise BadInput(f"notebook must be one of {', '.join(NOTEBOOKS)}, got {notebook!r}")
    # profiles share lists: never hand one out
    return copy.deepcopy({**parameters, **PROFILES[profile][notebook]})


def output_dir(figures_dir: str | os.PathLike | None = None, update_figures: bool = False) -> Path:
    """Where a notebook writes: ``figures_dir`` when given (``svgtpu reproduce`` passes it), the
    committed ``figures/`` when ``update_figures``, else :data:`SCRATCH_DIR`."""
    from svgtpu.facts.results import figures_dir as committed_figures_dir
    if figures_dir is not None:
        return Path(figures_dir)
    return committed_figures_dir() if update_figures else SCRATCH_DIR


def notebook_names(notebook: str) -> set[str]:
    """What names ``notebook`` exactly: its file name, its number, its name after the number (``07_quality``:
    ``07``, ``quality``)."""
    number, _, rest = notebook.partition("_")
    return {notebook, number} | ({rest} if rest else set())


def select(only: list[str] | None) -> list[str]:
    """The notebooks ``only`` names, each exactly (:func:`notebook_names`; ``01`` is not ``01b``), in file order;
    all when ``only`` is ``None``.  A name that matches none is refused, the empty one too."""
    if only is None:
        return list(NOTEBOOKS)
    unknown = [o for o in only if not any(o in notebook_names(n) for n in NOTEBOOKS)]
    if unknown or not only:
        raise BadInput(f"--only must name notebooks by number or name among {', '.join(NOTEBOOKS)} (e.g. 02), "
                       f"got {', '.join(map(repr, unknown or only)) or 'none'}")
    return [n for n in NOTEBOOKS if any(o in notebook_names(n) for o in only)]


def install_kernel(build_dir: Path = BUILD_DIR) -> str:
    """A kernelspec that runs *this* interpreter, found through ``$JUPYTER_PATH``.

    Works in a fresh venv without ``ipykernel install`` and never picks up some other Python's
    ``python3`` kernel from the user's Jupyter directories.
    """
    spec_dir = build_dir / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                     "--IPKernelApp.log_level=ERROR"],  # no per-kernel transport warnings
            "display_name": "svgtpu (reproduce)", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    jupyter_path = str(build_dir / "jupyter")
    current = os.environ.get("JUPYTER_PATH", "")
    if jupyter_path not in current.split(os.pathsep):
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (jupyter_path, current) if p)
    return KERNEL_NAME


@dataclasses.dataclass
class NotebookResult:
    notebook: str
    status: str           # "ok" or "failed"
    seconds: float
    figures: list[str]    # figure files (re)written by this run
    error: str = ""       # "cell N: ExcName: message" when failed
    output: str = ""      # the executed copy

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _describe_failure(error: Exception) -> str:
    """One line naming the failing cell (execution count and index) and the exception."""
    from papermill.exceptions import PapermillExecutionError
    if isinstance(error, PapermillExecutionError):
        message = str(error.evalue).strip().splitlines()
        first = message[0] if message else ""
        return f"cell {error.cell_index} (execution count {error.exec_count}): {error.ename}: {first}"
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"


#: Seconds a notebook's kernel gets to exit after papermill's shutdown request before it is terminated.
#: jupyter_client's default (5 s: SIGTERM at half of it) is shorter than a JAX kernel takes to exit on 2 busy
#: cores, and its SIGTERM made XLA's failure handler print a stack trace on the user's terminal per notebook.
KERNEL_EXIT_S = 60.0


@functools.cache
def _patient_kernel_manager() -> type:
    """jupyter_client's async kernel manager, waiting :data:`KERNEL_EXIT_S` for a kernel to exit."""
    from jupyter_client import AsyncKernelManager
    from traitlets import Float

    class PatientKernelManager(AsyncKernelManager):
        shutdown_wait_time = Float(KERNEL_EXIT_S, config=True)

    return PatientKernelManager


def run_notebook(name: str, profile: str, *, figures_dir: Path, output_dir: Path,
                 kernel_name: str, notebook_dir: Path = NOTEBOOK_DIR) -> NotebookResult:
    """Execute one notebook with papermill; never raises for errors inside the notebook."""
    import papermill

    from svgtpu.facts.results import FIGURE_LOG

    source = notebook_dir / f"{name}.ipynb"
    output = output_dir / f"{name}.ipynb"
    log = output_dir / f"{name}.figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    record_log(output_dir, name).write_text("")
    start = time.perf_counter()
    status, error = "ok", ""
    cache = persistent_cache_env(str(JAX_CACHE_DIR))
    saved = {k: os.environ.get(k) for k in ("MPLBACKEND", FIGURE_LOG, RECORDS_DIR_VAR, RECORD_LOG_VAR, *cache)}
    os.environ["MPLBACKEND"] = INLINE_BACKEND  # the kernel inherits it: figures land in the executed copy
    os.environ[FIGURE_LOG] = str(log)         # and this: it names every figure file it writes there
    os.environ[RECORDS_DIR_VAR] = str(figures_dir / RECORDS_NAME)   # its compile records go beside the figures
    os.environ[RECORD_LOG_VAR] = str(record_log(output_dir, name))  # and it names each record it used
    for key, value in cache.items():          # and JAX's compilation cache, unless the user set their own
        os.environ.setdefault(key, value)
    try:
        papermill.execute_notebook(
            str(source), str(output), parameters={"profile": profile, "figures_dir": str(figures_dir),
                                                     **run_parameters(name, profile)},
            kernel_name=kernel_name, language="python", cwd=str(notebook_dir), progress_bar=False,
            log_output=False, kernel_manager_class=_patient_kernel_manager())
    except Exception as exc:  # noqa: BLE001 -- any failure is reported, the next notebook still runs
        status, error = "failed", _describe_failure(exc)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    seconds = time.perf_counter() - start
    written = sorted(set(log.read_text().split()))
    return NotebookResult(name, status, seconds, written, error, str(output))


def record_log(output_dir: Path, notebook: str) -> Path:
    """The file that names every compile record ``notebook`` used in its last run."""
    return output_dir / f"{notebook}.records"


def next_notebook(pending: list[str], running: set[str]) -> str | None:
    """The notebook to start now: of ``pending`` the first whose :data:`AFTER` have finished (those not run at
    all do not count) and that is not a :data:`TIMED` one beside another; a notebook others wait for goes first,
    then the :data:`LONGEST`, then file order."""
    waits = {n: [a for a in AFTER.get(n, ()) if a in pending or a in running] for n in pending}
    ready = [n for n in pending if not waits[n] and not (n in TIMED and running & set(TIMED))]
    needed = [n for n in ready if any(n in waits[m] for m in pending)]
    longest = sorted((n for n in ready if n in LONGEST), key=LONGEST.index)
    return (needed or longest or ready or [None])[0]


def run_notebooks(names: list[str], jobs: int, run, started=lambda running: None):
    """``run(name)`` for every one of ``names``, ``jobs`` at a time in worker processes (in this process
    when ``jobs`` is 1), in the order :func:`next_notebook` picks; ``started`` hears the names running after each
    start; yields each result as it finishes."""
    import concurrent.futures
    import multiprocessing

    pending = list(names)
    if jobs == 1:
        while pending:
            name = next_notebook(pending, set())
            pending.remove(name)
            started([name])
            yield run(name)
        return
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        running = {}
        while pending or running:
            while len(running) < jobs and (name := next_notebook(pending, set(running.values()))):
                pending.remove(name)
                running[pool.submit(run, name)] = name
                started(sorted(running.values(), key=names.index))
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                del running[future]
                yield future.result()


def reproduce(profile: str = "cpu", only: list[str] | None = None, *,
              figures_dir: str | os.PathLike | None = None, build_dir: str | os.PathLike | None = None,
              progress: bool = True, jobs: int | None = None) -> list[NotebookResult]:
    """Run the selected notebooks under ``profile``, ``jobs`` at a time (default :data:`JOBS`); results go
    to ``figures_dir``; one result per notebook, in file order."""
    from tqdm.auto import tqdm

    from svgtpu.facts.outputs import check_output
    from svgtpu.facts.results import figures_dir as default_figures_dir
    from svgtpu.geometry import check_positive_int

    if profile not in PROFILES:
        raise BadInput(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    jobs = check_positive_int("jobs", JOBS.get(profile, 1) if jobs is None else jobs)
    names = select(only)
    build = Path(build_dir) if build_dir is not None else BUILD_DIR
    if figures_dir is not None:   # a folder the user named that cannot be made: refused at once
        check_output("figures_dir", figures_dir, folder=True)
    figures = default_figures_dir(figures_dir).resolve()
    figures.mkdir(parents=True, exist_ok=True)
    output_dir = build / "notebooks"
    output_dir.mkdir(parents=True, exist_ok=True)
    kernel = install_kernel(build)
    run = functools.partial(run_notebook, profile=profile, figures_dir=figures, output_dir=output_dir,
                            kernel_name=kernel)
    results = {}
    bar = tqdm(total=len(names), desc="notebooks", unit="nb", disable=not progress, file=sys.stderr)
    for result in run_notebooks(names, jobs, run, started=lambda running: bar.set_postfix_str(", ".join(running))):
        bar.update()
        if result.status != "ok":
            tqdm.write(f"notebook {result.notebook} failed at {result.error} (executed copy: {result.output})",
                       file=sys.stderr)
        results[result.notebook] = result
    bar.close()
    if not only and all(r.status == "ok" for r in results.values()):  # every notebook ran: drop unused records
        used = [line for name in names for line in record_log(output_dir, name).read_text().split()]
        stale = prune(figures / RECORDS_NAME, used)
        if stale and progress:
            tqdm.write(f"removed {len(stale)} compile record(s) no notebook used from {figures / RECORDS_NAME}",
                       file=sys.stderr)
    return [results[name] for name in names]


def reproduce_all(profile: str = "cpu", only: list[str] | None = None, *,
                  figures_dir: str | os.PathLike | None = None, paper: bool = True, jobs: int | None = None,
                  blocks: dict[str, str] | None = None) -> dict:
    """``svgtpu reproduce``: :func:`reproduce`, then with ``paper`` (and into the committed results only,
    never a ``figures_dir``) the paper's tables (:func:`svgtpu.report.paper.generate`, with ``blocks``); the failed
    notebooks are named in ``failed``."""
    from svgtpu.report.paper import generate
    from svgtpu.facts.results import results_path

    start = time.perf_counter()
    results = reproduce(profile, only, figures_dir=figures_dir, jobs=jobs)
    tables = generate(results_path(), blocks=blocks) if paper and not figures_dir else []
    return {"profile": profile, "notebooks": [r.as_dict() for r in results],
            "failed": [r.notebook for r in results if r.status != "ok"], "results": str(results_path(figures_dir)),
            "paper": tables, "wall_seconds": time.perf_counter() - start}


def format_reproduce(result: dict) -> str:
    """:func:`reproduce_all` as one row per notebook, the wall time and where the results went."""
    from svgtpu.facts.tables import format_table
    rows = [{"notebook": r["notebook"], "status": r["status"], "seconds": round(r["seconds"], 1),
             "figures": len(r["figures"]), "error": r["error"]} for r in result["notebooks"]]
    text = format_table(rows, ["notebook", "status", "seconds", "figures", "error"])
    text += f"\n\nwall time {result['wall_seconds']:.0f} s; results in {result['results']}"
    if result["paper"]:
        text += "; paper tables regenerated in " + ", ".join(p["file"] for p in result["paper"])
    return text


__all__ = ["CHECKPOINT", "NOTEBOOKS", "AFTER", "TIMED", "LONGEST", "JOBS", "PROFILES", "RUN_PARAMETERS", "PROFILE_RUN_PARAMETERS", "run_parameters", "SCRATCH_DIR", "settings", "output_dir", "notebook_names", "select", "install_kernel", "NotebookResult", "KERNEL_EXIT_S",
           "run_notebook", "next_notebook", "run_notebooks", "reproduce", "reproduce_all", "format_reproduce"]
