# Each target installs what it needs into .venv first (idempotent).
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

.PHONY: install demo test lint bench
install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/pumice simulate

test: $(STAMP)
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m pytest -n 2

# mypy reads its settings and the files to check from pyproject.toml ([tool.mypy]).
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m pytest -q -n 0 tests/test_import_graph.py

# Benchmarks of the scheduling core (see docs/performance.md); BENCH=... picks scenarios.
BENCH ?=
bench: $(STAMP)
	$(VENV)/bin/pumice bench $(BENCH) --repeat 3 --json bench-results.json
