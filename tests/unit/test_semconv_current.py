"""The current GenAI conventions (issue 25, 1.7): no `exception.escaped`, subagents as `invoke_agent`, chunk timing
of streamed replies, the `gen_ai.invoke_agent.*` call counts, and late records in their turn's trace.

Explicit providers and in-memory exporters; streams are driven the way Hermes drives them (its diagnostics dict,
whose chunk count it sets once per chunk, made on the provider request thread that carries our context).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.capture.bridge import ObserverBridge
from hermes_otel.capture.legacy import stream_diag
from hermes_otel.middleware import contract
from hermes_otel.tracking import Tracker, streaming

V1 = {"telemetry_schema_version": "hermes.observer.v1"}
TURN = "s:t:1"
IDS = {"session_id": "s", "turn_id": TURN, "task_id": "t", "platform": "cli", "model": "m"}


@pytest.fixture
def env():
    exporter, reader, logs = InMemorySpanExporter(), InMemoryMetricReader(), InMemoryLogExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[reader])
    loggers = LoggerProvider()
    loggers.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracker = Tracker(provider.get_tracer("test"), meters.get_meter("test"), max_turns=8)
    bridge = ObserverBridge(tracker, loggers.get_logger("test"))
    yield SimpleNamespace(tracker=tracker, spans=exporter, reader=reader, logs=logs, bridge=bridge)
    streaming.CLOCKS.clear()
    provider.shutdown()
    meters.shutdown()
    loggers.shutdown()


def points(reader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {m.name: list(m.data.data_points) for rm in (data.resource_metrics if data else ())
            for sm in rm.scope_metrics for m in sm.metrics}


def spans_named(exporter, name: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def hermes_diag() -> dict:
    """What `agent.stream_diag.stream_diag_init` returns in Hermes 0.19.0."""
    return {"started_at": 0.0, "first_chunk_at": None, "chunks": 0, "bytes": 0, "headers": {}, "http_status": None}


def stream(chunks: int, context: otel_context.Context) -> dict:
    """Hermes's streaming request thread: under the context it was started with, the diagnostics dict made just
    before the request, then per chunk its count (first thing) and the other fields."""
    made: list[dict] = []

    def request_thread() -> None:
        token = otel_context.attach(context)
        try:
            diag = stream_diag._wrap(hermes_diag)()
            for _ in range(chunks):
                diag["chunks"] = int(diag.get("chunks", 0)) + 1
                if diag.get("first_chunk_at") is None:
                    diag["first_chunk_at"] = 1.0
                diag["bytes"] = int(diag.get("bytes", 0)) + 10
            made.append(diag)
        finally:
            otel_context.detach(token)

    thread = threading.Thread(target=request_thread)
    thread.start()
    thread.join()
    return made[0]


def streamed_reply() -> SimpleNamespace:
    """The namespace Hermes assembles from a stream."""
    message = SimpleNamespace(role="assistant", content="ok", tool_calls=None, reasoning_content=None)
    return SimpleNamespace(id="stream-1", model="m", choices=[SimpleNamespace(index=0, message=message,
                                                                              finish_reason="stop")],
                           usage={"prompt_tokens": 3, "completion_tokens": 1})


# -- exception.escaped ---------------------------------------------------------------------------------------


def test_error_events_carry_no_exception_escaped(env):
    """Deprecated in the conventions, and false where Hermes caught the exception (a fail_open layer)."""
    env.tracker.turn(TURN, "s", IDS)
    chat = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:1"})
    env.tracker.finish_chat(chat, error=ConnectionError("reset"))

    def failing_layer(**kwargs):
        raise RuntimeError("a plugin bug")  # Hermes skips the layer: it is fail_open

    layers, terminal = env.tracker.layers.chain(contract.LLM_EXECUTION, [failing_layer], lambda p: p, IDS)
    with pytest.raises(RuntimeError):
        layers[0](request={}, next_call=terminal)
    env.tracker.end_turn(TURN, {"completed": True})
    events = [e for s in env.spans.get_finished_spans() for e in s.events if e.name == "exception"]
    assert len(events) == 2
    assert all(set(e.attributes) == {"exception.type", "exception.message", "exception.stacktrace"} for e in events)


# -- subagents ---------------------------------------------------------------------------------------------------


def test_a_subagent_is_an_invoke_agent_span_with_its_role_as_an_attribute(env):
    env.tracker.turn(TURN, "s", IDS)
    payload = {"parent_session_id": "s", "parent_turn_id": TURN, "child_session_id": "c", "child_subagent_id": "sa1",
               "child_role": "leaf", "child_goal": "look"}
    env.tracker.subagent_started(payload)
    env.tracker.turn("c:t:1", "c", {**IDS, "session_id": "c"})
    env.tracker.end_turn("c:t:1", {"completed": True})
    env.tracker.subagent_stopped({**payload, "child_status": "completed", "duration_ms": 5})
    env.tracker.end_turn(TURN, {"completed": True})
    agents = spans_named(env.spans, "invoke_agent hermes")
    (subagent,) = [s for s in agents if "hermes.subagent.id" in s.attributes]
    assert not spans_named(env.spans, "subagent leaf")
    assert {k: subagent.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.agent.name", "hermes.subagent.role",
                                               "hermes.subagent.status")} == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "hermes", "hermes.subagent.role": "leaf",
        "hermes.subagent.status": "completed"}
    child_turn = next(s for s in agents if s.attributes.get("hermes.turn.id") == "c:t:1")
    assert child_turn.parent.span_id == subagent.context.span_id


# -- chunk timing ----------------------------------------------------------------------------------------------


def test_a_streamed_reply_records_time_to_first_chunk_and_per_chunk(env):
    env.tracker.turn(TURN, "s", IDS)
    call = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:1", "provider": "openai"})
    diag = stream(4, trace.set_span_in_context(call.span))
    assert type(diag) is not dict and isinstance(diag, dict)  # Hermes still reads a dict
    assert {k: diag[k] for k in ("chunks", "first_chunk_at", "bytes")} == {"chunks": 4, "first_chunk_at": 1.0,
                                                                           "bytes": 40}
    env.tracker.finish_chat(call, streamed_reply())
    env.tracker.end_turn(TURN, {"completed": True})
    (chat,) = spans_named(env.spans, "chat m")
    ttfc = chat.attributes["gen_ai.response.time_to_first_chunk"]
    assert isinstance(ttfc, float) and 0 <= ttfc
    got = points(env.reader)
    (first,) = got["gen_ai.client.inference.time_to_first_chunk"]
    assert (first.count, first.sum) == (1, ttfc)
    assert first.explicit_bounds[:3] == (0.01, 0.02, 0.04)
    assert dict(first.attributes) == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                      "gen_ai.request.model": "m", "gen_ai.response.model": "m"}
    (gaps,) = got["gen_ai.client.inference.time_per_output_chunk"]
    assert gaps.count == 3 and dict(gaps.attributes) == dict(first.attributes)  # every chunk after the first
    assert not streaming.CLOCKS  # taken


def test_under_middleware_layers_the_stream_is_timed_on_the_attempt(env):
    """With layers, the request thread runs under the innermost (`provider_call`) span: the clock still goes to
    the attempt's `chat` span."""
    env.tracker.turn(TURN, "s", IDS)
    call = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:1"})

    def layer(**kwargs):
        return kwargs["next_call"](kwargs["request"])

    token = otel_context.attach(trace.set_span_in_context(call.span))  # where Hermes runs the chain
    try:
        layers, terminal = env.tracker.layers.chain(contract.LLM_EXECUTION, [layer],
                                                    lambda p: stream(2, otel_context.get_current()), IDS)
        layers[0](request={"model": "m"}, next_call=terminal)
    finally:
        otel_context.detach(token)
    env.tracker.finish_chat(call, streamed_reply())
    (chat,) = spans_named(env.spans, "chat m")
    assert "gen_ai.response.time_to_first_chunk" in chat.attributes
    assert points(env.reader)["gen_ai.client.inference.time_per_output_chunk"][0].count == 1


def test_a_reply_that_did_not_stream_has_no_chunk_timing(env):
    env.tracker.turn(TURN, "s", IDS)
    call = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:1"})
    env.tracker.finish_chat(call, {"id": "r", "model": "m", "choices": [{"finish_reason": "stop"}]})
    failed = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:2"})
    stream(1, trace.set_span_in_context(failed.span))  # a stream that broke after a chunk
    env.tracker.finish_chat(failed, error=TimeoutError("stale stream"))
    assert not streaming.CLOCKS
    assert all("gen_ai.response.time_to_first_chunk" not in s.attributes for s in spans_named(env.spans, "chat m"))
    got = points(env.reader)
    assert "gen_ai.client.inference.time_to_first_chunk" not in got
    assert "gen_ai.client.inference.time_per_output_chunk" not in got


# -- gen_ai.invoke_agent.* counts --------------------------------------------------------------------------------


def test_each_turn_records_its_own_inference_and_tool_calls(env):
    env.tracker.turn(TURN, "s", IDS)
    for attempt in range(2):  # a failed attempt counts
        call = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:1"})
        env.tracker.finish_chat(call, **({"error": ConnectionError("x")} if attempt == 0 else {"response": {}}))
    call = env.tracker.start_chat({"model": "m"}, {**IDS, "api_request_id": f"{TURN}:api:2"})
    env.tracker.finish_chat(call, {})
    for n in range(3):
        tool = env.tracker.start_tool("terminal", {**IDS, "tool_call_id": f"c{n}"})
        env.tracker.finish_tool(tool, IDS)
        env.tracker.tool_outcome({**IDS, "tool_call_id": f"c{n}", "status": "ok"})
    env.tracker.end_turn(TURN, {"completed": True})
    env.tracker.turn("s:t:2", "s", IDS)  # a turn without calls: zero is a measurement too
    env.tracker.end_turn("s:t:2", {"completed": True})
    got = points(env.reader)
    (inference,) = got["gen_ai.invoke_agent.inference_calls"]
    (tools,) = got["gen_ai.invoke_agent.tool_calls"]
    assert (inference.count, inference.sum, inference.min, inference.max) == (2, 3, 0, 3)
    assert (tools.count, tools.sum, tools.max) == (2, 3, 3)
    assert dict(inference.attributes) == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "hermes"}
    assert inference.explicit_bounds == (1, 2, 4, 8, 16, 32, 64, 128)


# -- late records ------------------------------------------------------------------------------------------------


def test_records_fired_after_the_turn_ended_carry_its_context(env):
    env.bridge.on_hook("pre_llm_call", {**V1, **IDS, "user_message": "hi"})
    env.bridge.on_hook("on_session_end", {**V1, **IDS, "completed": True})
    env.bridge.on_hook("transform_llm_output", {**V1, **IDS})  # a late hook of the ended turn
    env.bridge.on_hook("on_session_finalize", {**V1, "session_id": "s", "platform": "cli"})  # the CLI's exit
    env.bridge.on_hook("on_session_finalize", {**V1, "session_id": "other"})  # a session we never saw: no context
    (root,) = spans_named(env.spans, "invoke_agent hermes")
    by_hook = {r.log_record.event_name.rsplit(".", 1)[1]: r.log_record for r in env.logs.get_finished_logs()}
    for hook in ("transform_llm_output", "on_session_finalize"):
        record = [r.log_record for r in env.logs.get_finished_logs()
                  if r.log_record.event_name == f"hermes.observer.{hook}"][0]
        assert (record.trace_id, record.span_id) == (root.context.trace_id, root.context.span_id), hook
    assert by_hook["on_session_finalize"].trace_id == 0  # the last one: the unknown session


def test_hermes_stream_diagnostics_are_clocked_while_installed_and_restored_after(env):
    hermes = pytest.importorskip("agent.stream_diag")
    original = hermes.stream_diag_init
    was_installed = hasattr(original, "_hermes_otel_original")
    stream_diag.release()
    try:
        hermes_own = hermes.stream_diag_init
        assert stream_diag.install() and stream_diag.install()  # once, however often
        assert hermes.stream_diag_init._hermes_otel_original is hermes_own
        span = env.tracker.turn(TURN, "s", IDS).span
        with trace.use_span(span):
            diag = hermes.stream_diag_init()
        assert set(diag) == set(hermes_own()) and type(diag) is not dict
        assert type(hermes.stream_diag_init()) is dict  # outside any span: Hermes's own dict
        stream_diag.release()
        assert hermes.stream_diag_init is hermes_own
    finally:
        if was_installed:
            stream_diag.install()
