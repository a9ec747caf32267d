"""Which GenAI conventions' names are emitted: the latest by default, v1.41.0's beside them under
`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup` (docs/configuration.md says why the latest is the default).

Explicit providers and in-memory exporters; the same streamed, cached, captured call under both settings, every
emitted metric name and its attributes asserted exactly (test_semconv_registry holds the names to the releases).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.config import load_settings
from hermes_otel.tracking import Tracker, streaming
from tests.unit.test_semconv_current import stream

TURN = "s:t:1"
IDS = {"session_id": "s", "turn_id": TURN, "task_id": "t", "platform": "cli", "model": "m"}
LABELS = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
          "gen_ai.response.model": "m"}
LATEST = {
    "gen_ai.client.inference.duration", "gen_ai.client.inference.time_to_first_chunk",
    "gen_ai.client.inference.time_per_output_chunk", "gen_ai.client.inference.operation.input_tokens",
    "gen_ai.client.inference.operation.output_tokens", "gen_ai.client.inference.usage.input_tokens",
    "gen_ai.client.inference.usage.output_tokens", "gen_ai.client.inference.usage.cache_read.input_tokens",
    "gen_ai.client.inference.usage.cache_write.input_tokens", "gen_ai.client.inference.usage.reasoning.output_tokens",
    "gen_ai.invoke_agent.duration", "gen_ai.invoke_agent.inference_calls", "gen_ai.invoke_agent.tool_calls",
}
V1_41 = {"gen_ai.client.operation.duration", "gen_ai.client.token.usage",
         "gen_ai.client.operation.time_to_first_chunk", "gen_ai.client.operation.time_per_output_chunk"}


def run_one_call(v1_41: bool):
    """One streamed, cached, captured attempt in one turn; its chat span, turn span and metric points by name."""
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[reader])
    tracker = Tracker(provider.get_tracer("test"), meters.get_meter("test"), capture_on_spans=True, v1_41=v1_41)
    try:
        tracker.turn(TURN, "s", IDS)
        call = tracker.start_chat({"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                  {**IDS, "api_request_id": f"{TURN}:api:1", "provider": "openai"})
        stream(3, trace.set_span_in_context(call.span))
        message = SimpleNamespace(role="assistant", content="ok", tool_calls=None, reasoning_content=None)
        tracker.finish_chat(call, SimpleNamespace(
            id="chatcmpl-1", model="m", choices=[SimpleNamespace(index=0, message=message, finish_reason="stop")],
            usage={"prompt_tokens": 30, "completion_tokens": 4, "completion_tokens_details": {"reasoning_tokens": 2},
                   "prompt_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 6}}))
        tracker.end_turn(TURN, {"completed": True})
        spans = {s.name: s for s in exporter.get_finished_spans()}
        data = reader.get_metrics_data()
        points = {m.name: list(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics
                  for m in sm.metrics}
        return spans["chat m"], spans["invoke_agent hermes"], points
    finally:
        streaming.CLOCKS.clear()
        provider.shutdown()
        meters.shutdown()


def test_by_default_the_latest_names_only():
    chat, _, points = run_one_call(v1_41=False)
    assert set(points) == LATEST
    (duration,) = points["gen_ai.client.inference.duration"]
    assert (duration.count, dict(duration.attributes)) == (1, LABELS)
    counters = {name: [(p.value, dict(p.attributes)) for p in got] for name, got in points.items() if ".usage." in name}
    counted = {**LABELS, "gen_ai.token.modality": "unknown"}
    assert counters == {"gen_ai.client.inference.usage.input_tokens": [(30, counted)],
                        "gen_ai.client.inference.usage.output_tokens": [(4, counted)],
                        "gen_ai.client.inference.usage.cache_read.input_tokens": [(20, counted)],
                        "gen_ai.client.inference.usage.cache_write.input_tokens": [(6, counted)],
                        "gen_ai.client.inference.usage.reasoning.output_tokens": [(2, counted)]}
    assert [(p.sum, dict(p.attributes)) for p in points["gen_ai.client.inference.operation.input_tokens"]] == [
        (30, LABELS)]
    assert [(p.sum, dict(p.attributes)) for p in points["gen_ai.client.inference.operation.output_tokens"]] == [
        (4, LABELS)]
    assert [p.count for p in points["gen_ai.client.inference.time_per_output_chunk"]] == [2]
    assert chat.attributes["gen_ai.usage.cache_write.input_tokens"] == 6
    assert "gen_ai.usage.cache_creation.input_tokens" not in chat.attributes
    # Deprecated for gen_ai.response.finish_reasons, still allowed, and what Phoenix needs to show the reply.
    assert json.loads(chat.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "ok"}], "finish_reason": "stop"}]
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_under_gen_ai_dup_the_v1_41_names_beside_them():
    chat, turn, points = run_one_call(v1_41=True)
    assert set(points) == LATEST | V1_41
    tokens = sorted((dict(p.attributes)["gen_ai.token.type"], p.sum) for p in points["gen_ai.client.token.usage"])
    assert tokens == [("input", 30), ("output", 4)]
    assert [dict(p.attributes) for p in points["gen_ai.client.token.usage"]] == [
        {**LABELS, "gen_ai.token.type": "input"}, {**LABELS, "gen_ai.token.type": "output"}]
    for old, new in (("gen_ai.client.operation.duration", "gen_ai.client.inference.duration"),
                     ("gen_ai.client.operation.time_to_first_chunk", "gen_ai.client.inference.time_to_first_chunk"),
                     ("gen_ai.client.operation.time_per_output_chunk", "gen_ai.client.inference.time_per_output_chunk")):
        assert [(p.count, p.sum, dict(p.attributes)) for p in points[old]] == [
            (p.count, p.sum, dict(p.attributes)) for p in points[new]], old
    assert (chat.attributes["gen_ai.usage.cache_creation.input_tokens"],
            chat.attributes["gen_ai.usage.cache_write.input_tokens"]) == (6, 6)
    assert "gen_ai.provider.name" not in turn.attributes  # not on invoke_agent in either release


@pytest.mark.parametrize(("value", "v1_41"), [
    (None, False),
    ("gen_ai_latest_experimental", False),
    ("gen_ai/dup", True),
    ("http/dup, gen_ai/dup", True),  # the list other instrumentations read too
    ("http,database", False),
])
def test_the_variable_as_the_contrib_instrumentations_read_it(value, v1_41, tmp_path):
    env = {"HERMES_HOME": str(tmp_path)} | ({} if value is None else {"OTEL_SEMCONV_STABILITY_OPT_IN": value})
    loaded = load_settings(env)
    assert not loaded.problems and loaded.settings.semconv_v1_41 is v1_41
