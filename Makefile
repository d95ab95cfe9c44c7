# The two README commands (`make run`, `make test`) do all set-up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
STAMP  := $(VENV)/.installed

.PHONY: install run test lint bench validate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	HOST=$(HOST) PORT=$(PORT) $(BIN)/layoutopt serve

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check models optimizer api tests bench
	$(BIN)/ruff format --check models optimizer api tests bench
	$(BIN)/mypy

bench: install
	$(BIN)/python -m bench.solver
	$(BIN)/python -m bench.load
	$(BIN)/python -m bench.plan
	$(BIN)/python -m bench.simulate --write

validate: install
	$(BIN)/layoutopt validate --markdown docs/validation.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
