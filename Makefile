# One-command entry points. Everything installs into .venv; nothing global.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

# Real backends for the live tests, cached outside the tracked files (.cache/ is gitignored).
CACHE  ?= .cache
PROMETHEUS      := $(CACHE)/prometheus/usr/bin/prometheus
VALGRIND        := $(CACHE)/valgrind/usr/bin/valgrind
PHOENIX_VERSION := 20.26.1
PHOENIX_STAMP   := $(CACHE)/phoenix-venv/.installed-$(PHOENIX_VERSION)
MLFLOW_VERSION  := 3.17.2
MLFLOW_STAMP    := $(CACHE)/mlflow-venv/.installed-$(MLFLOW_VERSION)
export HERMES_OTEL_BACKENDS := $(abspath $(CACHE))

# Our Collector distribution and Jaeger v2, built from Go modules pinned in go.mod/go.sum.
# A binary is rebuilt only when its pins change (first build: minutes; the Go caches make
# rebuilds fast). Without Go on PATH they are skipped: the live tests then say so.
GO              ?= go
OTELCOL         := $(CACHE)/bin/otelcol-hermes
JAEGER          := $(CACHE)/bin/jaeger
COLLECTOR_DIST  := collector/distribution
JAEGER_MODULE   := tests/backends/jaeger
HAVE_GO         := $(shell command -v $(GO) 2>/dev/null)

.PHONY: demo test test-matrix unit integration lint bench docs backends collector jaeger clean

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install --upgrade pip > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }

# Stamp files re-run the install when the project metadata changes. The demo's install is quiet on
# success (its log is in .venv/install.log) and shows the log when it fails.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	@echo "Installing hermes-otel and hermes-agent into $(VENV) (log: $(VENV)/install.log)..."
	@$(PIP) install -e '.[hermes]' > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[test]'
	@touch $@

demo: $(VENV)/.demo-installed  ## run a real Hermes session and show its trace
	@$(BIN)/hermes-otel demo

# Prometheus (Debian package, promtool included), unpacked without installing anything.
$(PROMETHEUS):
	mkdir -p $(CACHE)/deb
	cd $(CACHE)/deb && { apt-get download prometheus || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download prometheus; }; }
	dpkg -x "$$(ls -t $(CACHE)/deb/prometheus_*.deb | head -n 1)" $(CACHE)/prometheus
	test -x $@

# valgrind (Debian package) for `make bench`'s instruction counts, unpacked the same way.
$(VALGRIND):
	mkdir -p $(CACHE)/deb
	cd $(CACHE)/deb && { apt-get download valgrind || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download valgrind; }; }
	dpkg -x "$$(ls -t $(CACHE)/deb/valgrind_*.deb | head -n 1)" $(CACHE)/valgrind
	test -x $@

# A server from PyPI in a venv of its own under $(CACHE), never in the project's:
# $(1) the venv's name, $(2) the requirement, $(3) the program it must provide.
define server_venv
rm -rf $(CACHE)/$(1)
$(PYTHON) -m venv $(CACHE)/$(1)
$(CACHE)/$(1)/bin/python -m pip --disable-pip-version-check -q install '$(2)'
test -x $(CACHE)/$(1)/bin/$(3)
@touch $@
endef

# Arize Phoenix (~850 MB).
$(PHOENIX_STAMP):
	$(call server_venv,phoenix-venv,arize-phoenix==$(PHOENIX_VERSION),phoenix)

# An MLflow tracking server (OTLP ingestion at /v1/traces).
$(MLFLOW_STAMP):
	$(call server_venv,mlflow-venv,mlflow==$(MLFLOW_VERSION),mlflow)


$(OTELCOL): $(COLLECTOR_DIST)/go.mod $(COLLECTOR_DIST)/go.sum $(wildcard $(COLLECTOR_DIST)/*.go)
	mkdir -p $(@D)
	cd $(COLLECTOR_DIST) && $(GO) build -trimpath -ldflags='-s -w' -o $(abspath $@) .

$(JAEGER): $(JAEGER_MODULE)/go.mod $(JAEGER_MODULE)/go.sum
	mkdir -p $(@D)
	cd $(JAEGER_MODULE) && $(GO) build -trimpath -ldflags='-s -w' -o $(abspath $@) github.com/jaegertracing/jaeger/cmd/jaeger

collector: $(OTELCOL)  ## build our Collector distribution (collector/distribution) into .cache/bin
jaeger: $(JAEGER)      ## build Jaeger v2 (all-in-one, in-memory storage) into .cache/bin

ifeq ($(HAVE_GO),)
GO_BACKENDS :=
else
GO_BACKENDS := $(OTELCOL) $(JAEGER)
endif

CHROMIUM        := /usr/bin/chromium

# The headless browser of the dashboard tab's test (Debian's chromium, driven by Playwright with this executable;
# Playwright's own browser download is never used). Installing needs root, as CI has.
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; \
	else echo "chromium is not installed (apt-get install chromium, as root): the dashboard browser tests will skip"; fi

backends: $(PROMETHEUS) $(PHOENIX_STAMP) $(MLFLOW_STAMP) $(GO_BACKENDS) $(CHROMIUM)  ## fetch/build the real backends the live tests start (and chromium)

test: $(VENV)/.test-installed backends  ## the whole suite (unit + real Hermes integration + live backends)
	$(BIN)/python -m pytest -q -p no:cacheprovider

unit: $(VENV)/.test-installed $(PROMETHEUS)  ## promtool checks the dashboards
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit

integration: $(VENV)/.test-installed backends
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/integration

lint: $(VENV)/.test-installed  ## ruff and mypy, as configured in pyproject.toml
	$(BIN)/ruff check hermes_otel docsgen tests benchmarks grafana
	$(BIN)/mypy

# Every supported Hermes release, each in a venv of its own under .cache/ (created once, reused;
# recreated when pyproject.toml changes): the real-Hermes smoke, `hermes-otel enable` included.
HERMES_RELEASES := 0.16.0 0.17.0 0.18.2 0.19.0
MATRIX := .cache/hermes-matrix

$(MATRIX)/%/.installed: pyproject.toml
	rm -rf $(MATRIX)/$*
	$(PYTHON) -m venv $(MATRIX)/$*
	$(MATRIX)/$*/bin/python -m pip --disable-pip-version-check -q install -e . 'hermes-agent==$*' 'pytest>=8' 'pytest-timeout>=2.3' 'hypothesis>=6.100,<7' 'playwright>=1.40,<2'
	@touch $@

test-matrix: $(foreach v,$(HERMES_RELEASES),$(MATRIX)/$(v)/.installed) $(CHROMIUM)  ## the real-Hermes smoke on every supported release
	@for v in $(HERMES_RELEASES); do \
		echo "== hermes-agent $$v"; \
		$(MATRIX)/$$v/bin/python -m pytest -q -p no:cacheprovider tests/matrix || exit 1; \
	done

bench: $(VENV)/.test-installed $(VALGRIND)  ## overhead vs the SDK floor, history, throughput, memory, dead collectors; exit time per fault, spool write/replay, start-up per one-shot run, bytecodes and instructions per call (writes benchmarks/results/)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/compare.py  # the chosen design against the replaced one, side by side
	$(BIN)/python benchmarks/spool.py
	$(BIN)/python benchmarks/startup.py  # what the plugin adds to a one-shot `hermes chat -q`, and its import set
	$(BIN)/python benchmarks/opcodes.py  # bytecodes per call against the floor: counted, not timed
	VALGRIND=$(abspath $(VALGRIND)) VALGRIND_LIB=$(abspath $(CACHE)/valgrind/usr/libexec/valgrind) \
		$(BIN)/python benchmarks/instructions.py  # machine instructions per call, every thread: counted

docs: $(VENV)/.test-installed  ## regenerate the reference pages and dashboards, build the site into site/
	$(BIN)/python -m docsgen.reference docs
	$(BIN)/python -m grafana.dashboards
	$(BIN)/python -m mkdocs build --strict --clean --site-dir site

clean:
	rm -rf $(VENV) build dist *.egg-info
