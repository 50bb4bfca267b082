# Veil developer entry points. `make quickstart` and `make test` each set up .venv first.
PY ?= python3
VENV ?= .venv
# CPU-only machines take the CPU torch wheel; GPU users run `make setup CONSTRAINTS=` to get a CUDA build.
CONSTRAINTS ?= -c constraints-cpu.txt

.PHONY: setup quickstart lint docs test test-all ui clean

$(VENV)/.installed: pyproject.toml constraints-cpu.txt
	$(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q $(CONSTRAINTS) -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(VENV)/bin/veil sweep sweeps/quickstart.yaml

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks studies tools
	$(VENV)/bin/ruff format --check src tests benchmarks studies tools
	$(VENV)/bin/mypy

# Generated docs, from the code and from recorded results, each by its script under tools/ (nothing is measured
# here; tests check they are current): docs/methods.md and docs/sweeps.md tables, README.md's reproduction block,
# docs/targets.md, docs/eigan-defaults.md, the benchmarks README's Targets block and the quickstart's quoted figures.
docs: setup
	$(VENV)/bin/python tools/methods_doc.py
	$(VENV)/bin/python tools/sweeps_doc.py
	$(VENV)/bin/python tools/reproduce_readme.py
	$(VENV)/bin/python tools/targets_doc.py
	$(VENV)/bin/python tools/eigan_defaults_doc.py
	$(VENV)/bin/python tools/bench_targets_block.py
	$(VENV)/bin/python tools/quickstart_quote.py
	$(VENV)/bin/python tools/coverage_doc.py

# the fast default: every test but those marked slow (chaos sweeps, the 2-node cluster, the calibrated
# defaults of every method, ...); test-all runs everything, as CI does (.ci/run). Each in TEST_WORKERS
# processes, a test file to a worker (its module fixtures set up once); TEST_WORKERS=0 runs them in this one.
# Files go out in tests/conftest.py's order (slow files first): xdist would otherwise hand out the files with
# the most tests first, leaving the slow files, which hold few tests each, to end the run on one worker.
TEST_WORKERS ?= 2
PYTEST_PAR = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: lint
	$(VENV)/bin/pytest $(PYTEST_PAR) -m "not slow"

test-all: lint
	$(VENV)/bin/pytest $(PYTEST_PAR) --durations=15

# The MLflow UI on ./mlflow.db (127.0.0.1, a free port; prints the latest sweep's links). make ui UI_ARGS="--port 5000"
ui: setup
	$(VENV)/bin/veil ui $(UI_ARGS)

clean:
	rm -rf $(VENV) .veil mlruns mlartifacts mlflow.db
