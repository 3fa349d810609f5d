# The README's two commands: `make figures` and `make test`.  Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu

.PHONY: install test figures lab clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -c "import svgtpu.tpu_env as e; e.install_pth()"  # libtpu quiet without a TPU (svgtpu/tpu_env.py)
	$(PY) -m ipykernel install --user --name svgtpu --display-name "svgtpu (.venv)" >/dev/null
	touch $@

test: install
	$(PY) -m pytest -q -n 2 tests

figures: install
	$(PY) -m svgtpu reproduce --profile $(PROFILE)

lab: install
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf build .pytest_cache
