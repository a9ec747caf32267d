"""An unreachable collector: Hermes answers as usual, one clear message, no waiting on the way out."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import run_agent

pytestmark = pytest.mark.hermes


def _refused_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_endpoint_costs_nothing_visible(llm, monkeypatch, caplog):
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime
    from hermes_otel.exporters.health import health

    endpoint = f"http://127.0.0.1:{_refused_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")  # retries give up after ~1s
    discover_plugins(force=True)
    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo x"}, id="c1")), Reply.text("fine"))
    assert run_agent(llm.base_url, "go")["final_response"] == "fine"
    time.sleep(0.3)  # let the batch worker attempt an export

    started = time.monotonic()
    runtime.flush()
    flush_s = time.monotonic() - started
    assert flush_s < 0.1, f"session-finalize flush waited {flush_s:.3f}s on a dead endpoint"

    ours = ("hermes_otel", "opentelemetry")

    def about_this_run(message: str) -> bool:
        # Providers of earlier tests, retired on reload, may still report their own closed receivers.
        return endpoint in message or not message.startswith("hermes-otel: cannot export to")

    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith(ours) and about_this_run(r.getMessage())
    ]
    # One message for the dead collector, whatever the signal and however many retries.
    assert len(warnings) == 1, "\n".join(warnings)
    assert warnings[0].startswith(f"hermes-otel: cannot export to {endpoint} (")
    assert warnings[0].endswith("(Hermes is unaffected; repeats are logged at DEBUG)")
    deadline = time.monotonic() + 10
    while health.dropped["traces"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert health.dropped["traces"] >= 1  # what failed is counted once the exporter gives up
