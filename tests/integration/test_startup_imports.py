"""Issue 29: what loading the plugin imports, in a real Hermes plugin discovery. Every `hermes chat` run pays for
each module at start-up, so the plugin imports only what its configuration needs: never the CLI, the viewer, the
docs generators, NeMo Relay or Prometheus support unless configured, gRPC only for `grpc`, the spool only with an
OTLP endpoint (its decoder only with something to re-send), protobuf not for files, the backend presets' tables only
when one is chosen, a TOML parser only with a plugins.toml, and no `packaging` (the contrib instrumentations')."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.hermes import QUIET_DEFAULTS, clean_env, write_home

pytestmark = pytest.mark.hermes

_PROBE = """
import json, sys
from hermes_cli.plugins import discover_plugins
discover_plugins()
print(json.dumps(sorted(sys.modules)))
"""

NEVER = ("hermes_otel.cli", "hermes_otel.local", "hermes_otel.tab", "docsgen", "hermes_otel.exporters.relay",
         "hermes_otel.exporters.prometheus", "opentelemetry.exporter.prometheus", "prometheus_client",
         "opentelemetry.instrumentation.instrumentor", "opentelemetry.instrumentation.httpx", "packaging",
         "hermes_otel.capture.instrumentor", "hermes_otel.config.presets", "hermes_otel.config.relay", "tomllib",
         "hermes_otel.exporters.spool.decode")


def _added(tmp_path: Path, **env: str) -> set[str]:
    """The modules a Hermes plugin discovery imports with the plugin on, beyond those it imports with it off, in a
    home whose dashboard tab is in place (the first run of a home without it puts it there, once)."""
    from hermes_otel.tab import install

    seen = {}
    for state in ("off", "on"):
        home = write_home(tmp_path / state, "http://127.0.0.1:9/v1", enable=state == "on")
        if state == "on":
            install.install(home)
        environment = clean_env(home, **env)
        for quiet in QUIET_DEFAULTS:  # the plugin at its defaults (HTTP client spans and Hermes's log lines on)
            environment.pop(quiet)
        done = subprocess.run([sys.executable, "-c", _PROBE], env=environment, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        seen[state] = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "hermes_otel.plugin" in seen["on"] and not _matching(seen["off"], ("hermes_otel",))
    return seen["on"] - seen["off"]


def _matching(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.startswith(prefixes) and (m in prefixes or m.startswith(
        tuple(p + "." for p in prefixes))))


def test_files_only_loads_no_grpc_no_protobuf_no_spool_and_no_tools(tmp_path: Path) -> None:
    added = _added(tmp_path)
    assert "opentelemetry.sdk.trace" in added  # the plugin's pipeline was built
    assert _matching(added, (*NEVER, "grpc", "google.protobuf", "opentelemetry.proto", "opentelemetry.exporter",
                             "hermes_otel.exporters.spool")) == []


def test_an_http_endpoint_adds_the_http_exporter_and_the_spool_but_not_grpc(tmp_path: Path) -> None:
    added = _added(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert {"opentelemetry.exporter.otlp.proto.http.trace_exporter", "hermes_otel.exporters.spool.delivery"} <= added
    assert _matching(added, (*NEVER, "grpc", "opentelemetry.exporter.otlp.proto.grpc")) == []


def test_grpc_is_imported_for_a_grpc_endpoint(tmp_path: Path) -> None:
    added = _added(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    assert "grpc" in added and _matching(added, NEVER) == []


def test_the_first_run_of_a_home_puts_the_traces_tab_in_place(tmp_path: Path) -> None:
    """Enabled Hermes's way (no `hermes-otel enable`), the tab is there after the plugin's first run."""
    home = write_home(tmp_path / "home", "http://127.0.0.1:9/v1")
    done = subprocess.run([sys.executable, "-c", _PROBE], env=clean_env(home), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (home / "plugins" / "hermes_otel" / "dashboard" / "manifest.json").is_file()
