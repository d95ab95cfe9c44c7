# The two README commands (`make run`, `make test`) do all set-up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
# Solves in a process per solver thread: the search's numpy and Python hold the GIL, so
# threads alone use about one core (docs/deploy.md, SOLVE_IN).
SOLVE_IN ?= processes
# Scaling curves the plans priced, kept for the next `make run` (docs/deploy.md, CURVE_STORE).
CURVE_STORE ?= .layoutopt/curves
STAMP  := $(VENV)/.installed

.PHONY: install run test lint bench validate clean test-engines screenshot

# The installer, uv, is pip's equal in what it installs (the versions pyproject.toml allows)
# and several times faster at unpacking them: a fresh clone's set-up took most of two minutes
# of CI's fifteen with pip. It compiles the bytecode as pip does: where PYTHONDONTWRITEBYTECODE
# is set, nothing else would, and every process the tests start would compile its imports
# again (the suite's spawning half took 1.6 times as long). Where uv cannot reach the package
# index pip is configured with (it reads no pip.conf), pip installs as before.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip 'uv>=0.4'

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]' \
		|| $(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	HOST=$(HOST) PORT=$(PORT) SOLVE_IN=$(SOLVE_IN) CURVE_STORE=$(CURVE_STORE) $(BIN)/layoutopt serve

# Two parts: what neither spawns nor times, on two workers (a module to a worker: its
# fixtures are built once); then, alone, what does (tests/conftest.py SERIAL_MODULES).
test: install
	$(BIN)/python -m pytest -n 2 --dist loadfile -m "not serial"
	$(BIN)/python -m pytest -m serial

lint: install
	$(BIN)/ruff check models optimizer api tests bench
	$(BIN)/ruff format --check models optimizer api tests bench
	$(BIN)/mypy

bench: install
	$(BIN)/python -m bench.solver
	$(BIN)/python -m bench.load
	$(BIN)/python -m bench.studies
	$(BIN)/python -m bench.plan
	$(BIN)/python -m bench.simulate --write
	$(BIN)/python -m bench.simulate --scenario acme --jobs 120 --write
	$(BIN)/python -m bench.simulate --scenario acme --jobs 120 --failures-x 10 --write

validate: install
	$(BIN)/layoutopt validate --calibrate 3 --markdown docs/validation.md --residuals models/presets/residuals.json

# The README's picture of the workshop page, retaken by its browser test.
screenshot: install
	LAYOUTOPT_UPDATE_SCREENSHOT=1 $(BIN)/python -m pytest -q tests/test_page_browser.py -k optimise_fills

# The engines' own parsers (torchtitan, DeepSpeed: torch on the CPU; Megatron-LM: a checkout
# at MEGATRON_LM_PATH) check the exports; too heavy for `make test`, whose suite skips them.
ENGINES_VENV := .venv-engines
test-engines: install
	test -x $(ENGINES_VENV)/bin/python || $(PYTHON) -m venv $(ENGINES_VENV)
	$(ENGINES_VENV)/bin/python -m pip install --quiet 'torch==2.13.0' 'torchtitan==0.3.0' 'deepspeed==0.19.8' -e '.[test]'
	PYTHONPATH=$(MEGATRON_LM_PATH) $(ENGINES_VENV)/bin/python -m pytest -rs tests/test_engines_parsers.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
