# The README's two commands: `make figures` and `make test`.  Both create .venv on first use.  `make test-system`
# runs the end-to-end tests `make test` leaves out (notebooks, JupyterLab in chromium, several processes); CI runs both.
VENV ?= .venv
PY := $(VENV)/bin/python
# The Python the venv is made with: 3.11 or later (jax 0.10.2, jaxlib, libtpu 0.0.42.1 and tokamax 0.0.12, as
# requirements.txt pins them, each declare Requires-Python >= 3.11); `make install PYTHON=python3.11` where the
# machine's python3 is older (a TPU VM's image may be).
PYTHON ?= python3
PROFILE ?= cpu

.PHONY: install test test-system figures evidence lab clean gpu-bench tpu-bench

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and f"svgtpu needs Python 3.11 or later (jax 0.10.2, libtpu and tokamax require it); $(PYTHON) is {sys.version.split()[0]}: make install PYTHON=python3.11")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -c "import svgtpu.tpu_env as e; e.install_pth()"  # without a TPU: libtpu quiet, the CPU backend fit for Pallas' interpreter (svgtpu/tpu_env.py)
	$(PY) -m ipykernel install --user --name svgtpu --display-name "svgtpu (.venv)" >/dev/null
	touch $@

# Two tiers of one suite (tests/conftest.py): `make test` the library, kernels and compiles, `make test-system` the
# end-to-end runs (marked `system`).  Bytecode first, here and for the figures: every compile child, notebook kernel
# and worker imports the package, and where PYTHONDONTWRITEBYTECODE is set (containers, CI images) each would compile
# it again (about 0.6 s a process).
test: TIER = not system
test-system: TIER = system
test test-system: install
	$(PY) -m compileall -q svgtpu
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=15 -m "$(TIER)" tests

figures: install
	$(PY) -m compileall -q svgtpu
	$(PY) -m svgtpu reproduce --profile $(PROFILE)

# Every compile record made again from nothing: `make figures` reads those in figures/compiled/ whose content key
# matches (svgtpu.compiler.dumps); this deletes them all, and the local ones in build/compiled/, first.
evidence: install
	rm -rf figures/compiled build/compiled
	$(MAKE) figures

# JupyterLab refuses to start as root unless asked (containers, some TPU VMs).  No news pop-up ("Would you like
# to get notified about official Jupyter news?") and no update check: JupyterLab 4's notification settings
# (fetchNews, checkForUpdates) default to Never in the overrides.json of the venv's JupyterLab app settings.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
lab: install
	mkdir -p $(dir $(LAB_OVERRIDES))
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' \
		> $(LAB_OVERRIDES)
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

# The prepared GPU run (svgtpu/bench/gpu.py): the GPU machine's own python, jax and torch, from the checkout (no
# venv, no installs), within five minutes by construction: 200 s of work (the float64 checks, each under its own
# watchdog in a process of its own, then attention timed at 720p and 1440p), the run's watchdog 260 s after the
# command started (it saves the run as far as it got, exit status 3), and `timeout` at 295 s behind both.  Each call
# writes its own run file, figures/gpu-runs/<date>-<commit>.json (the commit from git, or SVGTPU_COMMIT where the
# copy has no git), listed in figures/gpu-runs/index.json, and where $OUT names a folder (a remote runner's way
# back) copies both there.  JAX takes 70 % of the GPU's memory, leaving the rest to PyTorch's peers in the same
# process.  A longer slot: GPU_ARGS="--sections attention --variants all --budget 420" GPU_TIMEOUT=560 (every
# variant, about 8 minutes), or the block section: GPU_ARGS="--sections block --budget 420" GPU_TIMEOUT=560.
GPU_PYTHON ?= python3
GPU_ARGS ?= --sections attention --resolution 720p,1440p
GPU_TIMEOUT ?= 295

gpu-bench:
	XLA_PYTHON_CLIENT_MEM_FRACTION=0.7 PYTHONPATH=. timeout -s KILL $(GPU_TIMEOUT) $(GPU_PYTHON) -m svgtpu bench gpu $(GPU_ARGS); rc=$$?; \
	if [ $$rc -ne 0 ] && [ $$rc -ne 3 ]; then echo "no run file written (exit status $$rc)"; exit $$rc; fi; \
	run=$$(ls -t figures/gpu-runs/*.json | grep -v /index.json | head -1); echo "run file: $$run (exit status $$rc)"; \
	if [ -n "$$OUT" ] && [ -d "$$OUT" ]; then cp "$$run" figures/gpu-runs/index.json "$$OUT"/ && echo "copied to $$OUT"; fi; \
	echo "Commit the run file and its index entry: git add figures/gpu-runs/ && git commit"; exit $$rc

# The prepared TPU run (svgtpu/bench/tpu.py) on a v6e VM, from the venv: a dated run file in figures/tpu-runs/
# (never overwritten), copied to $$OUT where that names a folder.  Compiles are kept in build/jax-cache (JAX's
# persistent cache), so a second call (e.g. TPU_ARGS="--sections block" after a run the budget cut short) reuses them.
TPU_ARGS ?=
tpu-bench: install
	mkdir -p build; JAX_COMPILATION_CACHE_DIR=$${JAX_COMPILATION_CACHE_DIR:-build/jax-cache} \
	  $(PY) -m svgtpu bench tpu $(TPU_ARGS) --json > build/tpu-bench.json; status=$$?; \
	  tail -c 2000 build/tpu-bench.json; \
	  if [ -n "$$OUT" ] && [ -d "$$OUT" ]; then cp figures/tpu-runs/*.json build/tpu-bench.json "$$OUT"/; fi; exit $$status
	@echo "Commit the run: git add figures/tpu-runs && git commit -m 'v6e run: make tpu-bench'"

clean:
	rm -rf build .pytest_cache
