"""Our own bugs fail open: faults injected into the span and attribute code under a real Hermes run.

Every way our telemetry code touches a span goes through the OpenTelemetry SDK's `Tracer.start_span` /
`Span.*` (and content goes through `hermes_otel.redaction.content`); each injection makes one of them raise on
every call. With third-party middleware that misbehaves in the documented ways (mw_beta) next to a
well-behaved one (mw_alpha), Hermes must answer exactly as it does without the fault: same provider
calls, the tool run once with its result unchanged, Hermes's own fail-open handling of mw_beta intact.
"""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk import trace as sdk_trace

from hermes_otel.emitter import Emitter
from hermes_otel.redaction import content
from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import run_agent

pytestmark = [pytest.mark.hermes, pytest.mark.usefixtures("at_the_defaults")]


def _boom(*args, **kwargs):
    raise RuntimeError("injected fault in hermes-otel's telemetry path")


INJECTIONS = {
    "none": [],
    "start_span": [(sdk_trace.Tracer, "start_span")],
    "set_attribute": [(sdk_trace.Span, "set_attribute"), (sdk_trace.Span, "set_attributes")],
    "add_event": [(sdk_trace.Span, "add_event"), (sdk_trace.Span, "record_exception")],
    "set_status": [(sdk_trace.Span, "set_status")],
    "span_end": [(sdk_trace.Span, "end")],
    "content": [(content, "sanitize"), (content, "to_json"), (content, "redact_text")],
    # The hand-over of observer records to their own thread:
    "emitter": [(Emitter, "submit")],
}


def _run(llm, tmp_path, tag: str):
    marker = tmp_path / f"ran-{tag}.txt"
    command = f"echo {tag} >> {marker} && echo result-{tag}"
    llm.push(Reply.tools(ToolCall("terminal", {"command": command}, id=f"call_{tag}")), Reply.error(500),
             Reply.text(f"answer {tag}"))
    before = len(llm.chat_requests)
    result = run_agent(llm.base_url, f"run the {tag} command")
    tool_messages = [m for m in result["messages"] if m.get("role") == "tool"]
    return {
        "answer": result["final_response"],
        "provider_calls": len(llm.chat_requests) - before,
        "tool_runs": marker.read_text().splitlines() if marker.exists() else [],
        "tool_results": [str(m.get("content")).replace(tag, "TAG") for m in tool_messages],
    }


_REFERENCE: dict = {}


@pytest.fixture
def reference(with_middleware_plugins, llm, tmp_path_factory):
    """What Hermes does with the same script and plugins and no injected fault (run once)."""
    if not _REFERENCE:
        _REFERENCE.update(_run(llm, tmp_path_factory.mktemp("ref"), "reference"))
    return _REFERENCE


@pytest.mark.parametrize("injection", list(INJECTIONS))
def test_faults_in_our_span_code_change_nothing_hermes_does(
    injection, reference, with_middleware_plugins, traced, llm, tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    for owner, name in INJECTIONS[injection]:
        monkeypatch.setattr(owner, name, _boom)
    got = _run(llm, tmp_path, injection)
    monkeypatch.undo()

    assert got["answer"] == f"answer {injection}"
    assert got["tool_runs"] == [injection]  # the tool ran exactly once
    assert got["provider_calls"] == reference["provider_calls"] == 3  # tool call, a 500 retried, the answer
    assert got["tool_results"] == [r.replace("reference", "TAG") for r in reference["tool_results"]]
    assert "result-TAG" in got["tool_results"][0]  # the tool result reached the model unchanged
    # Hermes's own fail-open handling of mw_beta is intact: its broken layers are reported by Hermes.
    hermes_warnings = [r.getMessage() for r in caplog.records if r.name.startswith("hermes_cli")]  # WARNING, then DEBUG
    assert any("mw_beta layer is broken" in m for m in hermes_warnings), hermes_warnings
    assert any("mw_beta cannot read args" in m for m in hermes_warnings), hermes_warnings
    ours = [r for r in caplog.records if r.name == "hermes_otel" and r.levelno >= logging.WARNING
            and "internal error" in r.getMessage()]
    if injection != "none":
        assert ours, "an internal fault must be visible"
        keys = {r.getMessage().split(" (")[0] for r in ours}
        assert len(ours) == len(keys)  # each distinct fault once at WARNING, repeats at DEBUG
    else:
        assert ours == []
