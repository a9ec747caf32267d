"""Fixtures that run the real hermes-agent in-process with the plugin enabled via its entry point."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer
from tests.harness import otelcol
from tests.harness.hermes import QUIET_DEFAULTS, install_test_plugins, write_home
from tests.harness.otelcol import Jaeger
from tests.harness.otlp_receiver import OTLPReceiver

# One HERMES_HOME for the in-process tests of this session, set before any
# Hermes module is imported (they read it at import time).
_SESSION_HOME = Path(tempfile.mkdtemp(prefix="hermes-otel-it-"))
os.environ["HERMES_HOME"] = str(_SESSION_HOME)
for _key in [k for k in os.environ if k.startswith("OTEL_")]:
    del os.environ[_key]
# Most trees and record lists here are of our own spans and records: HTTP client spans and Hermes's own log lines
# (both on by default) are off for them. The tests of what users get run at the defaults (`at_the_defaults`): the
# leak tests in every capture mode, the exact-tree, fail-open, fault, exit and streaming tests, and the tests about
# those two features themselves.
os.environ.update(QUIET_DEFAULTS)


@pytest.fixture
def at_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defaults users get, not the suite's quiet ones: Hermes's log lines bridged, HTTP client spans on. Used
    before `traced` (as a `usefixtures` mark) so the plugin registers with them."""
    for variable in QUIET_DEFAULTS:
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture(autouse=True)
def _empty_spool() -> Iterator[None]:
    """Batches a test spooled (its collector was down) must not be re-sent into a later test's receiver."""
    yield
    from hermes_otel.exporters.spool.store import open_spool

    directory = _SESSION_HOME / "otel" / "spool"
    spool = open_spool(directory, 1 << 30, 1e9)
    for entry in spool.entries():
        with spool.claim(entry) as fd:
            if fd is not None:
                spool.remove(entry)
    spool.enforce_caps()  # recount: this process's size gauge starts from zero again


@pytest.fixture(scope="session")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        write_home(_SESSION_HOME, server.base_url)
        yield server


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as recv:
        yield recv


@pytest.fixture
def traced(llm: FakeLLMServer, receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch):
    """Plugin discovered by real Hermes (entry point + plugins.enabled), exporting OTLP/HTTP to `receiver`."""
    from hermes_cli.plugins import discover_plugins, get_plugin_manager

    from hermes_otel import runtime

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
    discover_plugins(force=True)
    loaded = get_plugin_manager()._plugins.get("hermes_otel")
    assert loaded is not None and loaded.enabled, loaded
    llm.push()  # nothing; tests push their own script
    yield runtime
    runtime.flush(5)


@contextlib.contextmanager
def enabled_plugins(llm: FakeLLMServer, *names: str):
    """Test plugins (tests/plugins) enabled next to hermes_otel while the block runs."""
    from hermes_cli.plugins import discover_plugins

    install_test_plugins(_SESSION_HOME)
    write_home(_SESSION_HOME, llm.base_url, plugins=names)
    discover_plugins(force=True)
    try:
        yield [sys.modules[f"hermes_plugins.{name}"] for name in names]
    finally:
        write_home(_SESSION_HOME, llm.base_url)
        discover_plugins(force=True)


@pytest.fixture(scope="session")
def plugins_enabled(llm):
    """`with plugins_enabled("mw_alpha"): ...` inside a test."""
    return lambda *names: enabled_plugins(llm, *names)


@pytest.fixture
def with_middleware_plugins(traced, llm):
    """mw_alpha and mw_beta enabled next to hermes_otel, for this test only."""
    with enabled_plugins(llm, "mw_alpha", "mw_beta") as (alpha, _):
        alpha.TRACES.clear()
        yield alpha


@pytest.fixture
def hook_tape(traced, llm):
    """hook_tape records every observer hook call Hermes makes, in order."""
    with enabled_plugins(llm, "hook_tape") as (tape,):
        tape.TAPE.clear()
        yield tape.TAPE


@pytest.fixture(scope="module")
def jaeger(request: pytest.FixtureRequest) -> Iterator[Jaeger]:
    """A real Jaeger v2 (in-memory storage; OTLP in, query API out) for the module's tests. Our Collector build is
    made sure of too: the tests that read Jaeger mostly send through it."""
    otelcol.go_binary(otelcol.OTELCOL, request)
    otelcol.go_binary(otelcol.JAEGER, request)
    server = Jaeger()
    try:
        yield server.start()
    finally:
        server.stop()
