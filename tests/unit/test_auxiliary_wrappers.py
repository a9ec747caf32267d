"""The auxiliary-call wrappers (capture/legacy/auxiliary.py) with explicit providers and in-memory exporters: fail-open,
errors untouched, what is not traced (streams, the aggregator the main loop already has), the route learnt from
the request Hermes builds."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.capture.legacy import auxiliary
from hermes_otel.tracking import Tracker


@pytest.fixture
def env():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracker = Tracker(provider.get_tracer("t"), max_turns=8)
    yield tracker, exporter
    provider.shutdown()


def reply(model: str = "m-1") -> SimpleNamespace:
    message = SimpleNamespace(role="assistant", content="ok", tool_calls=None)
    return SimpleNamespace(id="r1", model=model, choices=[SimpleNamespace(index=0, message=message,
                                                                           finish_reason="stop")],
                           usage=SimpleNamespace(prompt_tokens=5, completion_tokens=2, total_tokens=7))


def call(tracker, wrapped, **kwargs):
    return auxiliary._sync(lambda: tracker, wrapped, None, (), {"task": "compression", "messages": [], **kwargs})


def test_a_call_is_a_chat_span_named_for_the_route_hermes_built(env):
    tracker, exporter = env

    def hermes_call_llm(**kwargs):
        # what call_llm does: build the request from the route it resolved, then call the provider
        auxiliary._routed(lambda *a, **k: {"model": "m-1", "messages": [], "max_tokens": 64}, None,
                          ("custom", "m-1", []), {"base_url": "http://127.0.0.1:9/v1"})
        return reply()

    response = call(tracker, hermes_call_llm)
    assert response.model == "m-1"
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat m-1"
    assert {k: span.attributes[k] for k in ("hermes.llm.purpose", "gen_ai.request.model", "gen_ai.provider.name",
                                            "server.address", "server.port", "gen_ai.request.max_tokens",
                                            "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")} == {
        "hermes.llm.purpose": "compression", "gen_ai.request.model": "m-1", "gen_ai.provider.name": "custom",
        "server.address": "127.0.0.1", "server.port": 9, "gen_ai.request.max_tokens": 64,
        "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 2}


def test_a_failure_is_raised_untouched_and_the_span_says_so(env):
    tracker, exporter = env
    boom = RuntimeError("no provider")

    def failing(**kwargs):
        raise boom

    with pytest.raises(RuntimeError) as raised:
        call(tracker, failing)
    assert raised.value is boom
    (span,) = exporter.get_finished_spans()
    assert (span.name, span.status.status_code.name, span.attributes["error.type"]) == ("chat", "ERROR",
                                                                                         "RuntimeError")


def test_streams_and_the_aggregator_pass_untraced(env):
    tracker, exporter = env
    assert call(tracker, lambda **k: "a stream", stream=True) == "a stream"
    assert call(tracker, lambda **k: "aggregated", task="moa_aggregator") == "aggregated"
    assert exporter.get_finished_spans() == ()


def test_our_fault_leaves_the_call_untraced_and_untouched(env):
    tracker, exporter = env
    tracker.chats.start_auxiliary = None  # broken: calling it raises TypeError
    assert call(tracker, lambda **k: "answer") == "answer"
    assert exporter.get_finished_spans() == ()
    assert auxiliary._sync(lambda: None, lambda **k: "off", None, (), {"task": "x"}) == "off"  # telemetry off


def test_the_async_entry_point(env):
    tracker, exporter = env

    async def async_call_llm(**kwargs):
        return reply("m-2")

    response = asyncio.run(auxiliary._async(lambda: tracker, async_call_llm, None, (), {"task": "vision"}))
    assert response.model == "m-2"
    (span,) = exporter.get_finished_spans()
    assert (span.name, span.attributes["hermes.llm.purpose"]) == ("chat m-2", "vision")
