"""Keep libtpu quiet on machines without a TPU, without hiding a real one, and let Pallas' interpreter run there.

With ``libtpu`` installed (it brings the TPU compiler for ``svgtpu compile``), JAX asks it to start
a TPU client on every machine.  Without a TPU, libtpu cannot learn the accelerator type and worker
hostnames from the Cloud TPU metadata server (JAX sets ``TPU_SKIP_MDS_QUERY=1`` when no TPU chip is
on the PCI bus) and prints five lines of warnings to stderr; CPU JAX then works as before.  Setting
the two values it looks for, ``TPU_ACCELERATOR_TYPE`` and ``TPU_WORKER_HOSTNAMES``, silences it.
libtpu also takes ``/tmp/libtpu_lockfile`` for the life of every JAX process, so a second process
(a test worker, a notebook next to ``svgtpu compile``) fails with "Internal error when accessing
libtpu multi-process lockfile"; ``ALLOW_MULTIPLE_LIBTPU_LOAD=1`` lifts that, harmless where there
is no chip to share.  We set them **only when no Google TPU device is on the PCI bus** (the check JAX's
``hardware_utils`` makes), and never over values the user set, so a TPU VM is left alone.  The
values name a one-chip v6e host on localhost; ahead-of-time compilation names its own topology
(``get_topology_desc``) and is unaffected (``tests/test_compile.py`` compiles for v5e too).

:func:`prepare_without_tpu` runs when :mod:`svgtpu` is imported, and ``make install`` adds a
``.pth`` file to the virtual environment so that plain ``import jax`` there is quiet too.

Off a TPU every kernel of ours runs in Pallas' interpreter, which turns the grid into an XLA while loop that
slices each operand's block out of the loop state and writes it back at every grid step, inputs included.
XLA's CPU backend then copies each whole operand at every step (a value read and updated in the same iteration),
so a grid step costs time in proportion to the operands, not the block: the toy DiT's attention, six heads, ran
several times slower than one head per call.  Copy insertion with region analysis
(:data:`INTERPRET_CPU_FLAGS`) proves the update in place; :func:`prepare_without_tpu` adds it to
``XLA_FLAGS`` with the libtpu values above (same rule: no TPU chip, never over a user's own setting), before
JAX starts its CPU backend.  ``tests/test_tpu_env.py`` checks the compiled loop holds no such copy.
"""

from __future__ import annotations

import glob
import os
import sysconfig

GOOGLE_PCI_VENDOR = "0x1ae0"
QUIET_VALUES = {"TPU_ACCELERATOR_TYPE": "v6e-1", "TPU_WORKER_HOSTNAMES": "localhost",
                "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
PTH_NAME = "svgtpu_quiet_libtpu.pth"
#: XLA flags that make the CPU backend compile fast and run slower: XLA's own optimization level 0 and no
#: expensive LLVM passes.  The test suite compiles far more programs than it runs (interpret-mode kernels, one
#: compile per shape), so tests/conftest.py sets them; a timing taken under them is never reported.  They are
#: no flags of ours for a TPU compile: :func:`without_cpu_compile_flags` drops them from a compile child's
#: environment, so a static TPU schedule never depends on how the tests were run.
FAST_CPU_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")
#: XLA flags for Pallas' interpreter on CPU: copy insertion with region analysis, so the interpreter's grid loop
#: updates its operands in place instead of copying each whole operand at every grid step (module doc).
INTERPRET_CPU_FLAGS = ("--xla_cpu_copy_insertion_use_region_analysis=true",)
#: JAX's persistent compilation cache, as the test suite sets it (``build/jax-cache``, keyed by JAX on the program,
#: the jax and XLA versions and the flags): its processes (two workers, notebook kernels, subprocesses) compile
#: many of the same interpret-mode programs, and a second local run reuses them all.  A compile child drops it:
#: a cache hit would skip the compile whose dumps it reads, and a TPU executable compiled for a topology without a
#: chip cannot be read back from the cache anyway.
PERSISTENT_CACHE_VARS = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")


def package_version(package: str) -> str:
    """The installed version of ``package`` (``jax``, ``libtpu``): compiled results record both."""
    from importlib import metadata
    return metadata.version(package)


def _with_flags(xla_flags: str, flags: tuple[str, ...]) -> str:
    """``xla_flags`` (an ``XLA_FLAGS`` value) plus those of ``flags`` it does not name already (the user's win)."""
    names = {f.split("=")[0] for f in xla_flags.split()}
    return " ".join([xla_flags, *(f for f in flags if f.split("=")[0] not in names)]).strip()


def with_fast_cpu_compile(xla_flags: str) -> str:
    """``xla_flags`` (an ``XLA_FLAGS`` value) plus :data:`FAST_CPU_COMPILE_FLAGS`, keeping the user's own."""
    return _with_flags(xla_flags, FAST_CPU_COMPILE_FLAGS)


def without_cpu_compile_flags(xla_flags: str) -> str:
    """``xla_flags`` less :data:`FAST_CPU_COMPILE_FLAGS` (for a TPU compile child)."""
    names = {f.split("=")[0] for f in FAST_CPU_COMPILE_FLAGS}
    return " ".join(f for f in xla_flags.split() if f.split("=")[0] not in names)


def persistent_cache_env(cache_dir: str) -> dict[str, str]:
    """The :data:`PERSISTENT_CACHE_VARS` that cache every compile over 0.1 s in ``cache_dir`` (``make clean`` empties it)."""
    return dict(zip(PERSISTENT_CACHE_VARS, (cache_dir, "0.1")))


def has_tpu_chip() -> bool:
    """True when a Google (TPU) device is on the PCI bus."""
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor) as f:
                if f.read().strip() == GOOGLE_PCI_VENDOR:
                    return True
        except OSError:
            continue
    return False


def prepare_without_tpu() -> None:
    """On a machine without a TPU chip (checked once), give libtpu the values it would print warnings about and
    add :data:`INTERPRET_CPU_FLAGS` to ``XLA_FLAGS``; a value the user set wins.  What importing :mod:`svgtpu` and
    the ``.pth`` file run.  XLA reads ``XLA_FLAGS`` when JAX starts a backend: where one has started, the flag
    changes nothing."""
    if has_tpu_chip():
        return
    for name, value in QUIET_VALUES.items():
        os.environ.setdefault(name, value)
    os.environ["XLA_FLAGS"] = _with_flags(os.environ.get("XLA_FLAGS", ""), INTERPRET_CPU_FLAGS)


#: The name the ``.pth`` file of a venv installed before the interpreter flag calls (``make install`` rewrites it).
quiet_libtpu_without_tpu = prepare_without_tpu


def install_pth() -> str:
    """Write the ``.pth`` file that runs :func:`prepare_without_tpu` at interpreter start-up."""
    path = os.path.join(sysconfig.get_paths()["purelib"], PTH_NAME)
    with open(path, "w") as f:
        f.write("import svgtpu.tpu_env as _svgtpu_env; _svgtpu_env.prepare_without_tpu()\n")
    return path

