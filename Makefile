# One-command entry points. Everything installs into .venv; nothing global.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test unit integration bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# Stamp files re-run the install when the project metadata changes.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[hermes]'
	@touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[test]'
	@touch $@

demo: $(VENV)/.demo-installed  ## run a real Hermes session and show its trace
	$(BIN)/hermes-otel demo

test: $(VENV)/.test-installed  ## the whole suite (unit + real Hermes integration)
	$(BIN)/python -m pytest -q -p no:cacheprovider

unit: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

integration: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/integration

bench: $(VENV)/.test-installed  ## overhead vs the SDK floor, history, throughput, memory, dead collectors (writes benchmarks/results/latest.json)
	$(BIN)/python benchmarks/run.py

docs: $(VENV)/.test-installed  ## regenerate the reference pages from the code
	$(BIN)/python -m hermes_otel.reference docs

clean:
	rm -rf $(VENV) build dist *.egg-info
