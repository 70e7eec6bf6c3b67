# Two entry points for a fresh clone:
#   make serve   install into .venv and start the server (SQLite under ~/.tether)
#   make test    install into .venv (with dev tools) and run every check and test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test test-postgresql lint typecheck unit integration browser bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.runtime

serve: $(VENV)/.runtime
	$(BIN)/tether serve

lint: $(VENV)/.dev
	$(BIN)/ruff format --check src tests bench
	$(BIN)/ruff check src tests bench

typecheck: $(VENV)/.dev
	$(BIN)/mypy

test: lint typecheck
	scripts/ensure-chromium
	scripts/ensure-bubblewrap
	scripts/ensure-nginx
	$(BIN)/python -m pytest
	$(MAKE) test-postgresql

# The same tests with every store on PostgreSQL (TETHER_TEST_POSTGRES, default
# postgres@127.0.0.1:5432); the browser tests drive the console and stay on SQLite, and
# the cluster tests are on PostgreSQL (and Redis) in the first pass already.
# Without a PostgreSQL the run is skipped with a note, except on CI (CI=true): it fails.
test-postgresql: $(VENV)/.dev
	TETHER_TEST_DATABASE=postgresql $(BIN)/python -m pytest -m "not browser and not cluster"

bench: $(VENV)/.runtime
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
