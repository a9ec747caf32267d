"""Hermes's own log lines on real Hermes 0.19.0 in-process: a provider failure's WARNING lines become OTel log
records in the failing turn's trace (the span they were logged under, else the turn), redacted, without content
with capture off (the default) and whole with it on, once each, and none of our own lines or observer records come
back through them."""

from __future__ import annotations

import logging

import pytest

from hermes_otel.capture.logs import LOGGER_ATTR, SCOPE
from hermes_otel.testing.fake_llm import Reply
from tests.harness.documented import assert_documented
from tests.harness.hermes import at_default, run_agent
from tests.harness.trees import only

pytestmark = pytest.mark.hermes

SECRET = "sk-live-0123456789abcdefghijklmnop"


@pytest.fixture
def bridged(traced, monkeypatch):
    """The bridge at its default level (the test suite runs with it off)."""
    at_default(monkeypatch, "HERMES_OTEL_HERMES_LOG_LEVEL")
    return traced


def test_a_provider_failure_logged_by_hermes_lands_in_its_turn(bridged, traced, llm, receiver):
    llm.push(Reply.error(500, f"upstream overloaded key={SECRET}"), Reply(content="ok"))
    assert run_agent(llm.base_url, "hello")["final_response"] == "ok"
    logging.getLogger("hermes_otel").warning("hermes-otel: a line of ours, not Hermes's")
    logging.getLogger("agent.test_probe").info("an INFO line: below the default level")
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    logs = receiver.wait_for_logs(
        lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r), timeout=15)
    root = only(spans, "invoke_agent hermes")
    failed = [s for s in spans if s.name == "chat fake-model" and s.status_code == "ERROR"]
    assert len(failed) == 1
    hermes = [r for r in logs if r.scope_name == SCOPE]
    assert hermes, [(r.scope_name, r.body) for r in logs]
    assert all(r.attributes[LOGGER_ATTR].split(".")[0] in ("agent", "run_agent", "tools", "hermes_cli")
               for r in hermes)
    assert all(r.severity_number >= 13 and r.severity_text in ("WARNING", "ERROR", "CRITICAL") for r in hermes)
    # The lines about the failure are in the turn's trace; with capture off (the default) their text arguments (the
    # provider's error text, the thread and route) read as "…", the numbers and the error type stay.
    about = [r for r in hermes if str(r.body).startswith(("API call failed", "Retrying API call"))]
    assert [(r.attributes[LOGGER_ATTR], r.severity_text, str(r.body), r.trace_id, r.span_id) for r in about] == [
        ("agent.conversation_loop", "WARNING", "API call failed (attempt 1/3) error_type=InternalServerError … "
         "summary=…", root.trace_id, root.span_id),
        ("agent.conversation_loop", "WARNING", str(about[1].body), root.trace_id, root.span_id),
    ]
    assert str(about[1].body).startswith("Retrying API call in ")
    # Lines logged outside the turn (its tool checks before it, Hermes's own background threads) carry no ids.
    assert {r.trace_id for r in hermes} <= {root.trace_id, None}
    assert all(r.span_id is None for r in hermes if r.trace_id is None)
    assert not any("overloaded" in str(r.body) for r in hermes)  # the provider's words: content
    assert not any(SECRET in str(r.body) or SECRET in str(r.attributes) for r in hermes)
    assert not any("a line of ours" in str(r.body) for r in logs)
    assert not any("an INFO line" in str(r.body) for r in logs)
    assert not any(r.event_name.startswith("hermes.observer.") for r in hermes)
    bodies = [(r.time_ns, r.body) for r in hermes]
    assert len(bodies) == len(set(bodies))  # each line once
    assert_documented(spans, logs=logs)


def test_with_capture_on_the_lines_are_whole_and_redacted(bridged, traced, llm, receiver, monkeypatch):
    from hermes_cli.plugins import discover_plugins

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    discover_plugins(force=True)
    llm.push(Reply.error(500, f"upstream overloaded key={SECRET}"), Reply(content="ok"))
    assert run_agent(llm.base_url, "hello")["final_response"] == "ok"
    traced.flush(5)
    logs = receiver.wait_for_logs(
        lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r), timeout=15)
    about = [r for r in logs if r.scope_name == SCOPE and str(r.body).startswith("API call failed")]
    assert len(about) == 1 and "summary=HTTP 500: upstream overloaded key=<redacted>" in str(about[0].body)
    assert not any(SECRET in str(r.body) or SECRET in str(r.attributes) for r in logs)
