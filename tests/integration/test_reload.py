"""Hermes may call register() again (discover_plugins(force=True)): nothing piles up, new config applies."""

from __future__ import annotations

import threading

import pytest

from hermes_otel.testing.fake_llm import Reply
from tests.harness.hermes import run_agent

pytestmark = pytest.mark.hermes


def test_rediscovery_reuses_the_pipeline_and_applies_changes(traced, llm, receiver, monkeypatch):
    from hermes_cli import middleware
    from hermes_cli.plugins import discover_plugins, get_plugin_manager

    runtime = traced
    live = runtime.current_telemetry()
    threads = threading.active_count()
    for _ in range(20):
        discover_plugins(force=True)
    assert runtime.current_telemetry() is live  # same settings: same providers, processors, threads
    assert threading.active_count() <= threads  # none added (others may have finished)
    assert len(live.tracer_provider._active_span_processor._span_processors) == 2  # OTLP, and the traces file
    assert get_plugin_manager()._hooks["on_session_end"].count(get_plugin_manager()._hooks["on_session_end"][0]) == 1
    # Instrumented exactly once: the wrapper wraps the original runner, not another wrapper.
    assert not hasattr(middleware.run_llm_execution_middleware.__wrapped__, "__wrapped__")

    monkeypatch.setenv("OTEL_SERVICE_NAME", "renamed-agent")
    discover_plugins(force=True)
    assert runtime.current_telemetry() is not live
    llm.push(Reply.text("after reload"))
    assert run_agent(llm.base_url, "hi")["final_response"] == "after reload"
    runtime.flush(5)
    spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=10)
    assert {s.resource["service.name"] for s in spans} == {"renamed-agent"}
    assert sorted(s.name for s in spans) == ["chat fake-model", "invoke_agent hermes"]


def test_a_reload_that_drops_the_plugin_stops_tracing(traced, llm, receiver):
    from hermes_cli.plugins import discover_plugins

    from tests.harness.hermes import write_home

    runtime = traced
    home = __import__("os").environ["HERMES_HOME"]
    write_home(__import__("pathlib").Path(home), llm.base_url, enable=False)
    try:
        discover_plugins(force=True)
        assert runtime.current_tracker() is None  # no hooks would end turns: trace nothing
        llm.push(Reply.text("untraced"))
        assert run_agent(llm.base_url, "hi")["final_response"] == "untraced"
    finally:
        write_home(__import__("pathlib").Path(home), llm.base_url)
        discover_plugins(force=True)
    assert runtime.current_tracker() is not None
