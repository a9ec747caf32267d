"""The observer bridge with explicit providers and in-memory exporters: records, hostility, bounds."""

from __future__ import annotations

import json
import logging
import math

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from hermes_otel._internal import log as _log
from hermes_otel.capture import bridge as bridge_module
from hermes_otel.capture.bridge import KNOWN_HOOKS, UNRECORDED_HOOKS, ObserverBridge
from hermes_otel.tracking import Tracker
from tests.unit.modes import MODES, DrainingLogs, DrainingSpans, emitter_for

V1 = {"telemetry_schema_version": "hermes.observer.v1"}


@pytest.fixture(params=MODES)
def env(request):
    emitter = emitter_for(request.param)
    spans, logs = DrainingSpans(emitter), DrainingLogs(emitter)
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracker = Tracker(tracer_provider.get_tracer("test"), max_turns=8)
    _log.reset()

    def make(capture="NO_CONTENT"):
        return ObserverBridge(tracker, logger_provider.get_logger("t"), capture=capture, emitter=emitter)

    yield make, tracker, spans, logs
    emitter.shutdown()
    tracer_provider.shutdown()
    logger_provider.shutdown()


def records(logs):
    return [r.log_record for r in logs.get_finished_logs()]


def test_one_record_per_hook_correlated_to_its_span(env):
    make, tracker, spans, logs = env
    bridge = make()
    ids = {"session_id": "s", "turn_id": "s:t:1", **V1}
    bridge.on_hook("pre_llm_call", {**ids, "task_id": "t", "user_message": "hi", "conversation_history": [1] * 10})
    call = tracker.start_tool("terminal", {**ids, "tool_call_id": "c1"})
    bridge.on_hook("post_tool_call", {**ids, "tool_call_id": "c1", "status": "ok", "duration_ms": 5, "result": "x"})
    tracker.finish_tool(call, {**ids, "tool_call_id": "c1"})
    bridge.on_hook("on_session_end", {**ids, "completed": True, "interrupted": False})
    got = records(logs)
    assert [r.event_name for r in got] == [
        "hermes.observer.pre_llm_call",
        "hermes.observer.post_tool_call",
        "hermes.observer.on_session_end",
    ]
    finished = {s.name: s for s in spans.get_finished_spans()}
    root, tool = finished["invoke_agent hermes"], finished["execute_tool terminal"]
    assert got[0].span_id == root.context.span_id and got[2].span_id == root.context.span_id
    assert got[1].span_id == tool.context.span_id
    assert dict(got[1].attributes) == {
        "hermes.observer.hook": "post_tool_call",
        "hermes.telemetry_schema_version": "hermes.observer.v1",
        "hermes.session_id": "s",
        "hermes.turn_id": "s:t:1",
        "hermes.tool_call_id": "c1",
        "hermes.status": "ok",
        "hermes.duration_ms": 5,
    }
    assert all(r.body is None for r in got)  # no capture: no content


def test_record_attributes_take_ids_and_numbers_but_no_content_even_numeric(env):
    make, _, _, logs = env
    payload = {**V1, "session_id": "s", "turn_id": "", "status": 200, "model": ["not", "a", "string"],
               "api_duration": 1.5, "message_count": 12, "is_first_turn": True, "huge": 2**64, "nan": math.nan,
               "result": 42, "args": 7, "output": 1.5, "usage": 3, "conversation_history": 9, "note": "free text"}
    make().on_hook("post_api_request", payload)
    assert dict(records(logs)[0].attributes) == {
        "hermes.observer.hook": "post_api_request",
        "hermes.telemetry_schema_version": "hermes.observer.v1",
        "hermes.session_id": "s",
        "hermes.status": 200,  # a number in an id/enum field is still a number, not content
        "hermes.api_duration": 1.5,
        "hermes.message_count": 12,
        "hermes.is_first_turn": True,
    }


def test_payload_shapes_are_classified_once_each_and_the_memo_stays_bounded(env):
    make, _, _, logs = env
    bridge = make()
    for i in range(300):  # more shapes than the memo keeps: every record still gets its own keys
        bridge.on_hook("post_tool_call", {**V1, "session_id": "s", f"count_{i}": i, "status": "ok" if i % 2 else 7})
    got = records(logs)
    assert len(got) == 300 and len(bridge_module._PLANS) <= 256
    for i, record in enumerate(got):
        assert dict(record.attributes) == {
            "hermes.observer.hook": "post_tool_call", "hermes.telemetry_schema_version": "hermes.observer.v1",
            "hermes.session_id": "s", f"hermes.count_{i}": i, "hermes.status": "ok" if i % 2 else 7}


def test_tool_hook_records_belong_to_the_span_open_when_the_hook_ran(env):
    """pre_tool_call runs before the call's span, post_tool_call ends it, transform_tool_result comes
    after (and still belongs to the call); a verdict for a call that never ran gets a span of its own,
    and its record the turn's."""
    make, tracker, spans, logs = env
    bridge = make()
    ids = {"session_id": "s", "turn_id": "s:t:1", **V1}
    bridge.on_hook("pre_llm_call", dict(ids))
    ran = {**ids, "tool_call_id": "c1", "tool_name": "terminal"}
    bridge.on_hook("pre_tool_call", dict(ran))
    call = tracker.start_tool("terminal", dict(ran))
    tracker.finish_tool(call, dict(ran))
    bridge.on_hook("post_tool_call", {**ran, "status": "ok"})
    bridge.on_hook("transform_tool_result", {**ran, "status": "ok"})
    bridge.on_hook("post_tool_call", {**ids, "tool_call_id": "c2", "tool_name": "patch", "status": "blocked"})
    bridge.on_hook("on_session_end", {**ids, "completed": True})
    finished = {s.name: s for s in spans.get_finished_spans()}
    root, ran_span, blocked = (finished[n] for n in ("invoke_agent hermes", "execute_tool terminal", "execute_tool patch"))
    assert [(r.event_name.removeprefix("hermes.observer."), r.span_id) for r in records(logs)] == [
        ("pre_llm_call", root.context.span_id),
        ("pre_tool_call", root.context.span_id),
        ("post_tool_call", ran_span.context.span_id),
        ("transform_tool_result", ran_span.context.span_id),
        ("post_tool_call", root.context.span_id),
        ("on_session_end", root.context.span_id),
    ]
    assert ran_span.attributes["hermes.tool.status"] == "ok" and ran_span.end_time is not None
    assert blocked.attributes["hermes.tool.status"] == "blocked" and blocked.parent.span_id == root.context.span_id


def test_capture_in_events_is_redacted_and_excludes_history(env):
    make, _, _, logs = env
    bridge = make("EVENT_ONLY")
    bridge.on_hook(
        "pre_llm_call",
        {**V1, "session_id": "s", "turn_id": "s:t:1", "user_message": "key sk-abcdefghijklmnopqrstuvwx",
         "conversation_history": ["x" * 100_000]},
    )
    (record,) = records(logs)
    assert record.body == {"user_message": "key <redacted>"}


class Hostile:
    def __repr__(self):
        raise RuntimeError("no repr for you")

    def __eq__(self, other):
        raise RuntimeError("no eq either")

    __hash__ = object.__hash__


def _hostile_values():
    cycle: list = []
    cycle.append(cycle)
    deep: dict = {}
    node = deep
    for _ in range(200):
        node["k"] = {}
        node = node["k"]
    return [None, 0, -1, 2**80, math.nan, math.inf, "", "x" * 10_000_000, b"\x00\xff" * 1000, cycle, deep,
            Hostile(), {1: 2, None: 3}, [Hostile()] * 3, {"api_key": "sk-abcdefghijklmnopqrstuvwx"}, object()]


@pytest.mark.parametrize("capture", ["NO_CONTENT", "SPAN_AND_EVENT"])
def test_hostile_payloads_never_raise(env, capture, caplog):
    make, tracker, _, logs = env
    bridge = make(capture)
    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    values = _hostile_values()
    keys = ("session_id", "turn_id", "tool_call_id", "api_request_id", "child_session_id", "user_message", "args",
            "result", "status", "choice", "duration_ms", "telemetry_schema_version", "completed", "error")
    for hook in sorted(KNOWN_HOOKS) + ["not_a_hook"]:
        for value in values:
            bridge.on_hook(hook, {key: value for key in keys})
    # every call exported, best effort (but the per-chunk stream hook, which only feeds timing)
    assert len(records(logs)) == (len(KNOWN_HOOKS - UNRECORDED_HOOKS) + 1) * len(values)
    for record in records(logs):
        text = repr(record.body) + repr(dict(record.attributes or {}))
        assert "sk-abcdefghijklmnopqrstuvwx" not in text
        assert len(text) < 200_000
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "hermes-otel: unknown observer hook 'not_a_hook'; exported best-effort" in warnings
    assert sum("unknown observer hook" in w for w in warnings) == 1


def test_unknown_schema_version_is_warned_once(env, caplog):
    make, _, _, logs = env
    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    bridge = make()
    for _ in range(3):
        bridge.on_hook("pre_llm_call", {"telemetry_schema_version": "hermes.observer.v2", "turn_id": "s:t:9"})
    assert len(records(logs)) == 3
    assert [r.levelname for r in caplog.records if "schema" in r.getMessage()] == ["WARNING", "DEBUG", "DEBUG"]


def test_state_stays_bounded_over_ten_thousand_turns(env):
    make, tracker, spans, logs = env
    bridge = make()
    for i in range(10_000):
        ids = {**V1, "session_id": f"s{i % 50}", "turn_id": f"s{i % 50}:t:{i}", "api_request_id": f"s:t:{i}:api:1"}
        bridge.on_hook("pre_llm_call", ids)
        tracker.finish_chat(tracker.start_chat({"model": "m"}, ids), error=ValueError("x"))  # never gets api_request_error
        tracker.start_tool("terminal", {**ids, "tool_call_id": f"c{i}"})  # never finishes
        if i % 3:
            bridge.on_hook("on_session_end", {**ids, "completed": True})
    limit = 8
    state = {"turns": tracker.turns.open, "previous turns": tracker.turns.previous, "ended turns": tracker.turns.ended,
             "sessions": tracker.turns.sessions, "tools": tracker.tools.open, "failed chats": tracker.chats.failed,
             "request events": tracker._pending}
    assert {name: len(m) for name, m in state.items() if len(m) > limit} == {}
    tracker.end_all("shutdown")
    assert tracker.open_turns() == 0 and not tracker.tools.open and not tracker.chats.failed


def test_ttl_sweep_ends_stale_turns_explicitly(env):
    _, tracker, spans, _ = env
    tracker.turn("s:t:old", "s", {})
    tracker.sweep(now=10**9)  # far in the future: past every TTL
    (span,) = spans.get_finished_spans()
    assert span.attributes["hermes.turn.end_reason"] == "ttl"
    assert not tracker.turns.sessions


@pytest.mark.parametrize("capture", ["NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"])
def test_secret_keys_are_redacted_by_name_in_every_capture_mode(capture):
    """Issue 30: values no value pattern knows, under credential key names in any letter case and nesting, never
    leave in any mode; where content is captured, the keys stay and their values read `<redacted>`."""
    from hermes_otel.redaction.content import in_events, on_spans, redact_text

    secrets = {"API_KEY": "abcd1234xyz", "X-Api-Key": "plainsecretvalue", "Password": "hunter2"}
    assert all(redact_text(v) == v for v in secrets.values())
    args = {"path": "/tmp/x", **secrets, "nested": [{"client_Secret": "s3cr3tvalue9"}]}
    redacted = {"path": "/tmp/x", **dict.fromkeys(secrets, "<redacted>"), "nested": [{"client_Secret": "<redacted>"}]}
    spans, logs = DrainingSpans(emitter_for("inline")), DrainingLogs(emitter_for("inline"))
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracker = Tracker(tracer_provider.get_tracer("test"), capture_on_spans=on_spans(capture))
    bridge = ObserverBridge(tracker, logger_provider.get_logger("t"), capture=capture, emitter=spans.emitter)
    ids = {**V1, "session_id": "s", "turn_id": "s:t:1", "tool_call_id": "c1"}
    bridge.on_hook("pre_tool_call", {**ids, "tool_name": "terminal", "args": args})
    call = tracker.start_tool("terminal", ids, args)
    tracker.finish_tool(call, ids)
    bridge.on_hook("on_session_end", {**ids, "completed": True, "interrupted": False})
    exported = [s.to_json() for s in spans.get_finished_spans()] + [r.to_json() for r in logs.get_finished_logs()]
    assert exported and not [v for v in [*secrets.values(), "s3cr3tvalue9"] if any(v in text for text in exported)]
    tool = next(s for s in spans.get_finished_spans() if s.name == "execute_tool terminal")
    on_span = tool.attributes.get("gen_ai.tool.call.arguments")
    assert (json.loads(on_span) if on_span else None) == (redacted if on_spans(capture) else None)
    (pre,) = [r.log_record for r in logs.get_finished_logs() if r.log_record.event_name == "hermes.observer.pre_tool_call"]
    assert pre.body == ({"args": redacted} if in_events(capture) else None)
    tracer_provider.shutdown()
    logger_provider.shutdown()
