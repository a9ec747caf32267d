"""Span lifecycle with an explicit provider and the in-memory exporter (no global state)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from hermes_otel.tracking import Tracker

SESSION = "s1"
TURN = "s1:task:0001"


@pytest.fixture
def env():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    tracker = Tracker(provider.get_tracer("test"), meter_provider.get_meter("test"), max_turns=3)
    yield tracker, exporter, reader
    provider.shutdown()
    meter_provider.shutdown()


def ctx(**extra):
    base = {"session_id": SESSION, "turn_id": TURN, "task_id": "task", "platform": "cli", "model": "m"}
    base.update(extra)
    return base


def by_name(exporter):
    return {s.name: s for s in exporter.get_finished_spans()}


def test_turn_with_retry_and_late_tool_outcome(env):
    tracker, exporter, reader = env
    tracker.turn(TURN, SESSION, ctx())
    first = tracker.start_chat({"model": "m"}, ctx(api_request_id=f"{TURN}:api:1", provider="openai"))

    class Boom(Exception):
        status_code = 500

    tracker.finish_chat(first, error=Boom("server exploded"))
    second = tracker.start_chat({"model": "m"}, ctx(api_request_id=f"{TURN}:api:1", provider="openai"))
    tracker.finish_chat(second, {"id": "r1", "model": "m", "usage": {"prompt_tokens": 5, "completion_tokens": 2}})

    tool = tracker.start_tool("terminal", ctx(tool_call_id="call_9"))
    tracker.finish_tool(tool, ctx(tool_call_id="call_9"))
    assert "execute_tool terminal" not in by_name(exporter)  # waits for post_tool_call
    tracker.tool_outcome(ctx(tool_call_id="call_9", status="error", error_type="ValueError", error_message="bad"))
    tracker.end_turn(TURN, {"completed": True, "interrupted": False})

    spans = exporter.get_finished_spans()
    root = next(s for s in spans if s.name == "invoke_agent hermes")
    chats = [s for s in spans if s.name == "chat m"]
    tool_span = next(s for s in spans if s.name == "execute_tool terminal")
    assert [c.attributes["hermes.api.attempt"] for c in chats] == [1, 2]
    assert chats[0].status.status_code == StatusCode.ERROR
    assert chats[0].attributes["error.type"] == "Boom"
    assert chats[0].attributes["http.response.status_code"] == 500
    assert chats[0].events[0].name == "exception"
    assert chats[1].status.status_code == StatusCode.UNSET
    assert chats[1].kind == SpanKind.CLIENT
    assert all(s.parent.span_id == root.context.span_id for s in (*chats, tool_span))
    assert tool_span.attributes["hermes.tool.status"] == "error"
    assert tool_span.attributes["error.type"] == "ValueError"
    assert tool_span.status.status_code == StatusCode.ERROR and tool_span.status.description == "bad"
    assert tool_span.end_time < root.end_time  # its end was fixed when the call returned

    metrics = {
        m.name: m
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert set(metrics) == {
        "gen_ai.client.inference.duration",
        "gen_ai.client.inference.operation.input_tokens",
        "gen_ai.client.inference.operation.output_tokens",
        "gen_ai.client.inference.usage.input_tokens",
        "gen_ai.client.inference.usage.output_tokens",
        "gen_ai.execute_tool.duration",
        "gen_ai.invoke_agent.duration",
        "gen_ai.invoke_agent.inference_calls",
        "gen_ai.invoke_agent.tool_calls",
    }  # no chunk timing: nothing streamed
    assert [(p.sum, p.count) for p in metrics["gen_ai.invoke_agent.inference_calls"].data.data_points] == [(2, 1)]
    assert [(p.sum, p.count) for p in metrics["gen_ai.invoke_agent.tool_calls"].data.data_points] == [(1, 1)]
    # Each attempt records its tokens, the failed one 0 (with its error.type on the per-attempt histograms).
    inputs = metrics["gen_ai.client.inference.operation.input_tokens"].data.data_points
    assert sorted((p.sum, dict(p.attributes).get("error.type", "")) for p in inputs) == [(0, "Boom"), (5, "")]
    # The counters too: a series per label set (the failed attempt has no response model), modality unknown.
    counted = {m: sorted((p.value, dict(p.attributes)["gen_ai.token.modality"]) for p in metrics[m].data.data_points)
               for m in metrics if ".usage." in m}
    # The cache and reasoning counters only for what a provider reported (here nothing: no point at all).
    assert counted == {"gen_ai.client.inference.usage.input_tokens": [(0, "unknown"), (5, "unknown")],
                       "gen_ai.client.inference.usage.output_tokens": [(0, "unknown"), (2, "unknown")]}
    durations = metrics["gen_ai.client.inference.duration"].data.data_points
    assert sorted(dict(p.attributes).get("error.type", "") for p in durations) == ["", "Boom"]
    assert list(durations)[0].explicit_bounds[:3] == (0.01, 0.02, 0.04)


def test_blocked_tool_without_execution_still_shows(env):
    tracker, exporter, _ = env
    tracker.turn(TURN, SESSION, ctx())
    tracker.tool_outcome(ctx(tool_call_id="call_b", tool_name="terminal", status="blocked", duration_ms=3))
    tracker.end_turn(TURN, {"completed": True})
    tool = by_name(exporter)["execute_tool terminal"]
    assert tool.attributes["hermes.tool.status"] == "blocked"
    assert tool.status.status_code == StatusCode.ERROR
    assert 2_000_000 <= tool.end_time - tool.start_time <= 4_000_000


def test_interrupted_turn_and_links_between_turns(env):
    tracker, exporter, _ = env
    tracker.turn("s1:a:1", SESSION, ctx())
    tracker.end_turn("s1:a:1", {"completed": True, "interrupted": False})
    tracker.turn("s1:a:2", SESSION, ctx())
    tracker.end_turn("s1:a:2", {"completed": False, "interrupted": True})
    first, second = exporter.get_finished_spans()
    assert second.links[0].context == first.context
    assert second.status.status_code == StatusCode.ERROR and second.status.description == "interrupted"
    assert first.context.trace_id != second.context.trace_id


def test_state_is_bounded_and_orphans_end_explicitly(env):
    tracker, exporter, _ = env
    for i in range(5):
        tracker.turn(f"s:t:{i}", "s", {})
    assert tracker.open_turns() == 3
    evicted = [s for s in exporter.get_finished_spans()]
    assert [s.attributes["hermes.turn.end_reason"] for s in evicted] == ["evicted", "evicted"]
    tracker.end_all("shutdown")
    assert tracker.open_turns() == 0
    assert len(exporter.get_finished_spans()) == 5


def test_parallel_tools_are_kept_apart(env):
    tracker, exporter, _ = env
    a = tracker.start_tool("terminal", ctx(tool_call_id="A"))
    b = tracker.start_tool("terminal", ctx(tool_call_id="B"))
    tracker.tool_outcome(ctx(tool_call_id="B", status="ok"))
    tracker.tool_outcome(ctx(tool_call_id="A", status="cancelled"))
    tracker.finish_tool(b, ctx(tool_call_id="B"))
    tracker.finish_tool(a, ctx(tool_call_id="A"))
    spans = {s.attributes["gen_ai.tool.call.id"]: s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")}
    assert spans["A"].attributes["hermes.tool.status"] == "cancelled"
    assert spans["B"].attributes["hermes.tool.status"] == "ok"
    assert spans["B"].status.status_code == StatusCode.UNSET


def test_calls_without_a_turn_still_get_spans(env):
    tracker, exporter, _ = env
    call = tracker.start_chat(None, {})
    tracker.finish_chat(call, None)
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat" and span.parent is None
    assert tracker.turn(None, None, {}) is None


def test_error_text_is_redacted_everywhere(env):
    tracker, exporter, _ = env
    call = tracker.start_chat({"model": "m"}, ctx(api_request_id=f"{TURN}:api:9"))
    tracker.finish_chat(call, error=RuntimeError("401: bad key sk-live-ABCDEFGHIJKLMNOPQRSTUV (Bearer abcdefghijklmnop)"))
    tool = tracker.start_tool("terminal", ctx(tool_call_id="c9"))
    tracker.finish_tool(tool, ctx(tool_call_id="c9"))
    tracker.tool_outcome(ctx(tool_call_id="c9", status="error", error_message="curl -H 'Authorization: Bearer ghp_" + "a" * 36 + "'"))
    tracker.end_turn(TURN, {"completed": True})
    text = repr([(s.status.description, [(e.name, dict(e.attributes)) for e in s.events]) for s in exporter.get_finished_spans()])
    assert "sk-live-ABCDEFGHIJKLMNOPQRSTUV" not in text and "abcdefghijklmnop" not in text and "ghp_" not in text
    assert "<redacted>" in text


def test_late_events_never_reopen_a_finished_turn(env):
    tracker, exporter, _ = env
    tracker.turn(TURN, SESSION, ctx())
    tracker.end_turn(TURN, {"completed": True, "interrupted": True})
    # An abandoned worker reports after on_session_end: no zombie root, no duplicate span.
    tracker.tool_outcome(ctx(tool_call_id="late", status="ok"))
    late = tracker.start_tool("terminal", ctx(tool_call_id="late2"))
    tracker.finish_tool(late, ctx(tool_call_id="late2"))
    tracker.end_turn(TURN, {})
    assert tracker.open_turns() == 0
    roots = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes"]
    assert len(roots) == 1
    late_span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool terminal")
    assert late_span.context.trace_id == roots[0].context.trace_id  # still in the turn's trace
    assert late_span.parent.span_id == roots[0].context.span_id


def test_same_tool_call_id_in_two_sessions_stays_apart(env):
    tracker, exporter, _ = env
    a = {"session_id": "A", "turn_id": "A:t:1"}
    b = {"session_id": "B", "turn_id": "B:t:1"}
    ta = tracker.start_tool("terminal", {**a, "tool_call_id": "call_same"})
    tb = tracker.start_tool("terminal", {**b, "tool_call_id": "call_same"})
    tracker.tool_outcome({**a, "tool_call_id": "call_same", "status": "error", "error_type": "exit_1"})
    tracker.tool_outcome({**b, "tool_call_id": "call_same", "status": "ok"})
    tracker.finish_tool(ta, {**a, "tool_call_id": "call_same"})
    tracker.finish_tool(tb, {**b, "tool_call_id": "call_same"})
    spans = {s.attributes["hermes.turn.id"]: s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")}
    assert len([s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]) == 2
    assert spans["A:t:1"].attributes["hermes.tool.status"] == "error"
    assert spans["B:t:1"].attributes["hermes.tool.status"] == "ok"


def test_a_tool_request_rewrite_is_an_event_on_its_tool_span_with_source_and_reason(env):
    """The events the request middleware recorded for a call land on that call's span, every attribute kept."""
    from hermes_otel.middleware.runner import MiddlewareRunner

    tracker, exporter, _ = env
    runner = MiddlewareRunner()

    def pin(**kw):
        return {"args": {**kw["args"], "timeout": 5}, "source": "guard", "reason": "cap the timeout", "name": "pin"}

    runner.register("tool_request", pin, plugin="guard")
    call_ctx = ctx(tool_call_id="c1")
    result = runner.apply_request("tool_request", {"command": "ls"}, **call_ctx)
    tracker.request_pass_done("tool_request", call_ctx, result.events)
    tracker.finish_tool(tracker.start_tool("terminal", call_ctx), call_ctx)
    tracker.tool_outcome({**call_ctx, "status": "ok"})
    (event,) = by_name(exporter)["execute_tool terminal"].events
    assert (event.name, dict(event.attributes)) == ("hermes.middleware.rewrite", {
        "hermes.middleware.kind": "tool_request", "hermes.middleware.plugin": "guard",
        "hermes.middleware.callback": "test_tracker.test_a_tool_request_rewrite_is_an_event_on_its_tool_span_with_source_and_reason.<locals>.pin",
        "hermes.middleware.index": 0, "hermes.middleware.changed_keys": ("timeout",),
        "hermes.middleware.source": "guard", "hermes.middleware.reason": "cap the timeout",
        "hermes.middleware.name": "pin"})


# -- the turn joins its caller's trace (issue 25, item 1.1) ---------------------------------------------------------

def test_a_turn_under_a_host_span_joins_the_host_trace_and_keeps_the_previous_turn_link(env, monkeypatch):
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    tracker, exporter, _ = env
    monkeypatch.delenv("TRACEPARENT", raising=False)
    host_provider = TracerProvider()
    with host_provider.get_tracer("host").start_as_current_span("handle request") as host:
        tracker.turn(TURN, SESSION, ctx())
        tracker.end_turn(TURN, {"completed": True})
    token = otel_context.attach(trace.set_span_in_context(trace.INVALID_SPAN))
    try:
        tracker.turn(f"{TURN}b", SESSION, ctx(turn_id=f"{TURN}b"))  # no host span: a trace of its own
        tracker.end_turn(f"{TURN}b", {"completed": True})
    finally:
        otel_context.detach(token)
    first, second = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes"]
    assert first.context.trace_id == host.get_span_context().trace_id
    assert first.parent.span_id == host.get_span_context().span_id and not first.parent.is_remote
    assert second.parent is None and second.context.trace_id != first.context.trace_id
    assert [(link.context.span_id, dict(link.attributes)) for link in second.links] == [
        (first.context.span_id, {"hermes.link.type": "previous_turn"})]


def test_a_turn_joins_a_traceparent_from_the_environment(env, monkeypatch):
    tracker, exporter, _ = env
    monkeypatch.setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    monkeypatch.setenv("TRACESTATE", "vendor=value")
    tracker.turn(TURN, SESSION, ctx())
    tracker.end_turn(TURN, {"completed": True})
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes"]
    assert f"{root.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{root.parent.span_id:016x}" == "b7ad6b7169203331" and root.parent.is_remote
    assert root.context.trace_state.get("vendor") == "value"


def test_baggage_from_the_environment_travels_with_the_traceparent(env, monkeypatch):
    from opentelemetry import baggage

    tracker, exporter, _ = env
    monkeypatch.setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    monkeypatch.setenv("BAGGAGE", "ci.job=1234,tenant=acme")
    turn = tracker.turn(TURN, SESSION, ctx())
    assert baggage.get_all(turn.context) == {"ci.job": "1234", "tenant": "acme"}
    tracker.end_turn(TURN, {"completed": True})
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes"]
    assert f"{root.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"


def test_otel_propagators_none_joins_nothing_from_the_environment(env, monkeypatch):
    """`OTEL_PROPAGATORS=none` gives the global propagator no propagators: the environment's context is not ours to
    join. (The global propagator is built from the variable when `opentelemetry.propagate` is imported: set here as
    it builds it.)"""
    from opentelemetry import propagate
    from opentelemetry.propagators.composite import CompositePropagator

    tracker, exporter, _ = env
    monkeypatch.setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    configured = propagate.get_global_textmap()
    propagate.set_global_textmap(CompositePropagator([]))
    try:
        tracker.turn(TURN, SESSION, ctx())
    finally:
        propagate.set_global_textmap(configured)
    tracker.end_turn(TURN, {"completed": True})
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes"]
    assert root.parent is None and f"{root.context.trace_id:032x}" != "0af7651916cd43dd8448eb211c80319c"


@pytest.mark.parametrize("value", ["", "garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01"])
def test_a_missing_or_invalid_traceparent_starts_a_new_trace(env, monkeypatch, value):
    tracker, exporter, _ = env
    monkeypatch.setenv("TRACEPARENT", value)
    tracker.turn(TURN, SESSION, ctx())
    tracker.end_turn(TURN, {"completed": True})
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent hermes"]
    assert root.parent is None


def test_a_chat_span_under_capture_carries_the_conversation_in_the_conventions_schema():
    """Input (the system prompt stays a message in OpenAI-style chat), tool definitions and output with its
    finish reason, each valid JSON; built from the history as the attempt sent it, whatever the caller appends
    to its list afterwards (the content is built off the agent's thread)."""
    import json
    from types import SimpleNamespace as NS

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracker = Tracker(provider.get_tracer("test"), None, max_turns=3, capture_on_spans=True)
    history = [{"role": "system", "content": "You are Hermes."}, {"role": "user", "content": "list /tmp"}]
    tools = [{"type": "function", "function": {"name": "terminal", "description": "Run a command",
                                               "parameters": {"type": "object"}}}]
    tracker.turn(TURN, SESSION, ctx())
    call = tracker.start_chat({"model": "m", "messages": history, "tools": tools}, ctx(api_request_id="a1"))
    history.append({"role": "assistant", "content": "later"})  # Hermes's list grows after the attempt
    reply = NS(id="r1", model="m", choices=[NS(finish_reason="tool_calls", message=NS(
        role="assistant", content=None, tool_calls=[NS(id="call_1", function=NS(name="terminal",
                                                                                 arguments='{"command": "ls"}'))]))])
    tracker.finish_chat(call, reply)
    provider.force_flush()
    (chat,) = [s for s in exporter.get_finished_spans() if s.name == "chat m"]
    assert json.loads(chat.attributes["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "You are Hermes."}]},
        {"role": "user", "parts": [{"type": "text", "content": "list /tmp"}]}]
    assert "gen_ai.system_instructions" not in chat.attributes
    assert json.loads(chat.attributes["gen_ai.tool.definitions"]) == [
        {"type": "function", "name": "terminal", "description": "Run a command", "parameters": {"type": "object"}}]
    assert json.loads(chat.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "finish_reason": "tool_call",
         "parts": [{"type": "tool_call", "id": "call_1", "name": "terminal", "arguments": {"command": "ls"}}]}]
    provider.shutdown()


def test_each_attempt_has_one_inference_details_event_with_its_span_context_and_content():
    """EVENT_ONLY: no content on the spans; one `gen_ai.client.inference.operation.details` per chat span (the
    failed attempt's too), in that span's context, at DEBUG, with the span's conventions' attributes and the
    content structured (valid under the conventions' schema)."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    records = InMemoryLogRecordExporter()
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(records))
    tracker = Tracker(provider.get_tracer("test"), None, max_turns=3, details=logs.get_logger("test"))
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    tracker.turn(TURN, SESSION, ctx())

    class Boom(Exception):
        status_code = 500

    first = tracker.start_chat(request, ctx(api_request_id="a1", provider="openai"))
    tracker.finish_chat(first, error=Boom("server exploded"))
    second = tracker.start_chat(request, ctx(api_request_id="a1", provider="openai"))  # ends the first
    tracker.finish_chat(second, {"id": "r1", "model": "m", "choices": [
        {"finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}]})
    chats = sorted((s for s in spans.get_finished_spans() if s.name == "chat m"), key=lambda s: s.start_time)
    events = [r.log_record for r in records.get_finished_logs()]
    assert [e.event_name for e in events] == ["gen_ai.client.inference.operation.details"] * 2
    assert [e.span_id for e in events] == [c.context.span_id for c in chats]
    assert all(e.severity_number.name == "DEBUG" and e.body is None for e in events)
    assert not any(k.startswith("gen_ai.input") or k.startswith("gen_ai.output") for c in chats for k in c.attributes)
    failed, ok = (dict(e.attributes) for e in events)
    user = ({"role": "user", "parts": ({"type": "text", "content": "hi"},)},)
    assert (failed["gen_ai.operation.name"], failed["error.type"], failed["gen_ai.input.messages"]) == (
        "chat", "Boom", user)
    assert "gen_ai.output.messages" not in failed
    assert (ok["gen_ai.request.model"], ok["gen_ai.response.id"], ok["gen_ai.input.messages"]) == ("m", "r1", user)
    assert ok["gen_ai.output.messages"] == (
        {"role": "assistant", "parts": ({"type": "text", "content": "hello"},), "finish_reason": "stop"},)
    provider.shutdown()
    logs.shutdown()


def test_the_turn_root_totals_its_attempts_and_a_tool_span_says_what_the_model_was_told_of_it(env):
    """invoke_agent: the turn's token totals and the last reply's finish reasons; execute_tool: the agent's name
    and the tool's description from the schema the request gave the model (read once per tool list)."""
    tracker, exporter, _ = env
    tools = [{"type": "function", "function": {"name": "terminal", "description": "Run a shell command",
                                               "parameters": {"type": "object"}}}]
    tracker.turn(TURN, SESSION, ctx())
    for n, (reason, usage) in enumerate([("tool_calls", (10, 3)), ("stop", (20, 5))], 1):
        call = tracker.start_chat({"model": "m", "tools": tools}, ctx(api_request_id=f"a{n}"))
        tracker.finish_chat(call, {"id": f"r{n}", "model": "m", "choices": [{"finish_reason": reason}],
                                   "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
        if n == 1:
            tool = tracker.start_tool("terminal", ctx(tool_call_id="c1"))
            tracker.finish_tool(tool, ctx(tool_call_id="c1"))
            tracker.tool_outcome(ctx(tool_call_id="c1", status="ok"))
    tracker.end_turn(TURN, {"completed": True, "interrupted": False})
    spans = by_name(exporter)
    root, tool_span = spans["invoke_agent hermes"], spans["execute_tool terminal"]
    assert (root.attributes["gen_ai.usage.input_tokens"], root.attributes["gen_ai.usage.output_tokens"]) == (30, 8)
    assert root.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert (tool_span.attributes["gen_ai.agent.name"], tool_span.attributes["gen_ai.tool.description"]) == (
        "hermes", "Run a shell command")


def test_a_tool_description_is_free_text_redacted_in_every_mode(env):
    """A plugin's or an MCP server's tool describes itself in free text, exported on execute_tool with capture off
    (the default) too: its credentials are redacted as captured content's are."""
    tracker, exporter, _ = env
    about = ("Query the warehouse at postgres://analyst:Wh4reh0use-pw@db.internal:5432/sales; the client reads "
             "OPENAI_API_KEY=sk-live-abcdefghijklmnopqrstuvwx from its environment")
    tools = [{"type": "function", "function": {"name": "warehouse", "description": about, "parameters": {}}}]
    tracker.turn(TURN, SESSION, ctx())
    call = tracker.start_chat({"model": "m", "tools": tools}, ctx(api_request_id="a1"))
    tracker.finish_chat(call, {"id": "r1", "model": "m", "choices": [{"finish_reason": "tool_calls"}]})
    tool = tracker.start_tool("warehouse", ctx(tool_call_id="c1"))
    tracker.finish_tool(tool, ctx(tool_call_id="c1"))
    tracker.tool_outcome(ctx(tool_call_id="c1", status="ok"))
    tracker.end_turn(TURN, {"completed": True, "interrupted": False})
    described = by_name(exporter)["execute_tool warehouse"].attributes["gen_ai.tool.description"]
    assert "Wh4reh0use-pw" not in described and "sk-live-abcdefghijklmnopqrstuvwx" not in described
    assert described.startswith("Query the warehouse at postgres://analyst:")  # our marker or Hermes's, never the secret
    assert described.endswith("OPENAI_API_KEY=<redacted> from its environment")


def test_a_tool_call_s_content_is_redacted_on_the_records_thread_not_the_agent_s(monkeypatch):
    """Capture on: a tool's arguments and its result are held as they were on the agent's thread and redacted and
    converted at the call's end on the records thread, as a model call's content is (a hostile result used to cost
    its redaction on the tool's call path)."""
    import threading

    from hermes_otel.emitter import Emitter
    from hermes_otel.tracking import calls

    converted_on = []
    to_value = calls.content.to_value
    monkeypatch.setattr(calls.content, "to_value", lambda value, **kw: (
        converted_on.append(threading.current_thread().name), to_value(value, **kw))[1])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    emitter = Emitter()
    tracker = Tracker(provider.get_tracer("test"), capture_on_spans=True, emitter=emitter)
    tracker.turn(TURN, SESSION, ctx())
    args = {"command": "cat .env", "token": "tok-1234567890abcdef"}
    tool = tracker.start_tool("terminal", ctx(tool_call_id="c1"), args)
    args["command"] = "changed after the call started"  # held as it was
    tracker.finish_tool(tool, ctx(tool_call_id="c1"))
    assert tracker.hold_tool_result(ctx(tool_call_id="c1"), "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx")
    tracker.tool_outcome(ctx(tool_call_id="c1", status="ok"))
    for _ in range(500):  # the records thread ends the span (drain() would run the rest on this thread)
        if "execute_tool terminal" in by_name(exporter):
            break
        threading.Event().wait(0.01)
    span = by_name(exporter)["execute_tool terminal"]
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"command": "cat .env", "token": "<redacted>"}
    result = span.attributes["gen_ai.tool.call.result"]  # text, as the tool gave it (not a JSON string of it)
    assert result.startswith("OPENAI_API_KEY=") and "sk-abcdefghijklmnopqrstuvwx" not in result  # ours or Hermes's
    assert converted_on == ["hermes-otel-records"] * 2
    emitter.shutdown(5)
    provider.shutdown()
