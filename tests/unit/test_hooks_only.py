"""Hooks-only chat spans (a Hermes without middleware): from pre_api_request to post_api_request or api_request_error.

Payloads as Hermes 0.16.0 passes them (agent/conversation_loop.py); explicit providers, in-memory exporters,
no global state. The real run on 0.16.0 is tests/matrix/test_smoke.py.
"""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from hermes_otel.capture.hooks_only import chat_callbacks
from hermes_otel.tracking import Tracker

TURN = "s1:task:0001"
IDS = {"session_id": "s1", "task_id": "task", "turn_id": TURN, "platform": "cli", "model": "fake-model",
       "provider": "custom", "base_url": "http://127.0.0.1:8000/v1", "api_mode": "chat_completions",
       "telemetry_schema_version": "hermes.observer.v1"}


@pytest.fixture
def env():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracker = Tracker(provider.get_tracer("test"), meter_provider.get_meter("test"))
    yield tracker, exporter
    provider.shutdown()
    meter_provider.shutdown()


def pre(api: str, **extra):
    return {**IDS, "api_request_id": api, "api_call_count": 1, "started_at": 1.0,
            "request": {"method": "POST", "body": {"model": "fake-model", "temperature": 0.5, "stream": True}}, **extra}


def test_an_attempt_is_a_chat_span_with_the_request_and_the_response(env):
    tracker, exporter = env
    hooks = chat_callbacks(lambda: tracker)
    tracker.turn(TURN, "s1", IDS)
    assert hooks["pre_api_request"](**pre(f"{TURN}:api:1")) is None
    assert hooks["post_api_request"](**IDS, api_request_id=f"{TURN}:api:1", finish_reason="tool_calls",
                                     response_model="fake-model-2", usage={"input_tokens": 11, "output_tokens": 7},
                                     api_duration=0.2) is None
    tracker.end_turn(TURN, {"completed": True, "interrupted": False})
    chat = next(s for s in exporter.get_finished_spans() if s.name == "chat fake-model")
    turn = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes")
    assert chat.parent.span_id == turn.context.span_id and chat.kind is SpanKind.CLIENT
    attrs = dict(chat.attributes)
    assert {k: attrs[k] for k in ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.request.temperature",
                                  "gen_ai.request.stream", "gen_ai.response.model", "gen_ai.response.finish_reasons",
                                  "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                                  "hermes.api_request.id", "hermes.api.attempt")} == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model", "gen_ai.request.temperature": 0.5,
        "gen_ai.request.stream": True, "gen_ai.response.model": "fake-model-2",
        "gen_ai.response.finish_reasons": ("tool_calls",), "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 7, "hermes.api_request.id": f"{TURN}:api:1", "hermes.api.attempt": 1}
    assert "gen_ai.response.id" not in attrs  # Hermes's hook payload has no provider id
    assert chat.status.status_code is StatusCode.UNSET


def test_a_failed_attempt_is_an_error_named_after_hermes_error_type_then_the_retry_succeeds(env):
    tracker, exporter = env
    hooks = chat_callbacks(lambda: tracker)
    api = f"{TURN}:api:1"
    hooks["pre_api_request"](**pre(api))
    error = {**IDS, "api_request_id": api, "retry_count": 1, "max_retries": 3, "retryable": True,
             "reason": "server_error", "status_code": 500, "error": {"type": "InternalServerError", "message": "boom"}}
    hooks["api_request_error"](**error)
    tracker.api_error(error)  # what the bridge's own api_request_error callback does next
    hooks["pre_api_request"](**pre(api))
    hooks["post_api_request"](**IDS, api_request_id=api, finish_reason="stop", response_model="fake-model")
    tracker.end_turn(TURN, {"completed": True, "interrupted": False})
    failed, ok = sorted((s for s in exporter.get_finished_spans() if s.name == "chat fake-model"),
                        key=lambda s: s.start_time)
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes["error.type"], failed.attributes["http.response.status_code"]) == ("InternalServerError", 500)
    assert [e.attributes["exception.type"] for e in failed.events if e.name == "exception"] == ["InternalServerError"]
    assert (failed.attributes["hermes.api.attempt"], ok.attributes["hermes.api.attempt"]) == (1, 2)
    assert ok.status.status_code is StatusCode.UNSET


def test_hooks_without_an_open_attempt_or_tracker_do_nothing(env):
    tracker, exporter = env
    hooks = chat_callbacks(lambda: tracker)
    hooks["post_api_request"](**IDS, api_request_id="never-started")
    hooks["api_request_error"](**IDS, api_request_id="never-started", error="not a mapping")
    hooks["pre_api_request"](**{**pre("x"), "api_request_id": None})  # nothing could match its end
    off = chat_callbacks(lambda: None)
    for callback in off.values():
        assert callback(**pre(f"{TURN}:api:9")) is None
    assert [s.name for s in exporter.get_finished_spans()] == []
    assert sorted(cb.__name__ for cb in hooks.values()) == [
        "hermes_otel_chat_api_request_error", "hermes_otel_chat_post_api_request", "hermes_otel_chat_pre_api_request"]
