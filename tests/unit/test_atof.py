"""ATOF forwarding: events from spans (explicit provider), sinks, and conformance with nemo-relay."""

from __future__ import annotations

import json
import re
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from hermes_otel.exporters.health import health
from hermes_otel.exporters.relay.atof import (
    AtofSpanProcessor,
    FileSink,
    FileSinkConfig,
    StreamSink,
    StreamSinkConfig,
    rename_fields,
    timestamp,
    uuid7,
)
from tests.harness.http_sink import HttpSink

UUID_V7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
RFC3339_NS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}\+00:00$")
# Relay itself drops trailing zeros of the fraction (e.g. `.142184+00:00` when the nanoseconds end in 000).
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?\+00:00$")


def scenario(tracer) -> None:
    """One Hermes-shaped turn: agent root, an LLM call with a layer, a tool call, a rewrite, an error."""
    with tracer.start_as_current_span(
        "invoke_agent hermes",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s1", "hermes.turn.id": "s1:t:1"},
    ):
        with tracer.start_as_current_span(
            "chat m", kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "m",
                        "gen_ai.request.stream": True, "hermes.api_request.id": "s1:t:1:api:1"},
        ) as chat:
            chat.add_event("hermes.middleware.rewrite", {"hermes.middleware.kind": "llm_request", "hermes.middleware.source": "alpha"})
            with tracer.start_as_current_span(
                "llm_execution alpha", attributes={"hermes.middleware.kind": "llm_execution", "hermes.middleware.plugin": "alpha"}
            ):
                pass
        with tracer.start_as_current_span(
            "execute_tool terminal",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "terminal", "gen_ai.tool.call.id": "call_1",
                        "gen_ai.tool.call.arguments": '{"command":"echo"}', "gen_ai.tool.call.result": '"out"'},
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "boom"))


def run_ours(tmp_path):
    sink = FileSink(FileSinkConfig(output_directory=str(tmp_path), filename="ours.jsonl", mode="overwrite"))
    processor = AtofSpanProcessor([sink])
    provider = TracerProvider()
    provider.add_span_processor(processor)
    scenario(provider.get_tracer("t"))
    provider.shutdown()
    return [json.loads(line) for line in (tmp_path / "ours.jsonl").read_text().splitlines()]


def test_scope_events_balance_and_nest(tmp_path):
    events = run_ours(tmp_path)
    scopes = [e for e in events if e["kind"] == "scope"]
    starts = {e["uuid"]: e for e in scopes if e["scope_category"] == "start"}
    ends = {e["uuid"]: e for e in scopes if e["scope_category"] == "end"}
    assert starts.keys() == ends.keys() and len(starts) == 4  # every start has its end
    by_cat = {e["category"]: e for e in starts.values()}
    assert set(by_cat) == {"agent", "llm", "function", "tool"}
    root = by_cat["agent"]
    assert root["parent_uuid"] is None and root["name"] == "hermes"
    assert by_cat["llm"]["parent_uuid"] == root["uuid"] and by_cat["tool"]["parent_uuid"] == root["uuid"]
    assert by_cat["function"]["parent_uuid"] == by_cat["llm"]["uuid"]
    assert {e["propagation_root_uuid"] for e in events} == {root["uuid"]}
    assert by_cat["llm"]["name"] == "openai" and by_cat["llm"]["category_profile"] == {"model_name": "m"}
    assert by_cat["llm"]["attributes"] == ["streaming"]
    assert by_cat["tool"]["category_profile"] == {"tool_call_id": "call_1"}
    assert by_cat["llm"]["metadata"] == {"api_request_id": "s1:t:1:api:1"}
    assert ends[by_cat["tool"]["uuid"]]["metadata"]["otel.status_code"] == "ERROR"
    assert ends[root["uuid"]]["metadata"] == {"session_id": "s1", "turn_id": "s1:t:1", "otel.status_code": "OK"}
    (mark,) = [e for e in events if e["kind"] == "mark"]
    assert mark["name"] == "hermes.middleware.rewrite" and mark["parent_uuid"] == by_cat["llm"]["uuid"]
    assert mark["metadata"] == {"hermes.middleware.kind": "llm_request", "hermes.middleware.source": "alpha"}
    for event in events:
        assert UUID_V7.match(event["uuid"]) and RFC3339_NS.match(event["timestamp"])
    # Content only when capture put it on the span: the tool's args and result here.
    assert by_cat["tool"]["data"] == {"command": "echo"} and ends[by_cat["tool"]["uuid"]]["data"] == "out"
    assert by_cat["llm"]["data"] is None


def test_helpers():
    assert timestamp(1_764_665_909_279_741_723) == "2025-12-02T08:58:29.279741723+00:00"
    assert UUID_V7.match(uuid7(1_764_665_909_279, 2**64 - 1))
    assert rename_fields({"otel.status_code": "OK", "a": [{"b.c": 1}]}, "replace_dots") == {
        "otel_status_code": "OK", "a": [{"b_c": 1}]}
    assert rename_fields({"a.b": 1}, "preserve") == {"a.b": 1}


def test_stream_sink_batches_retries_and_counts_drops(monkeypatch):
    monkeypatch.setenv("ATOF_TOKEN", "Bearer from-env")
    with HttpSink() as receiver:
        sink = StreamSink(StreamSinkConfig(url=receiver.url, transport="ndjson", header_env={"authorization": "ATOF_TOKEN"},
                                           field_name_policy="replace_dots"))
        sink.write([{"n": 1, "otel.status_code": "OK"}, {"n": 2}])  # on the ATOF worker's thread: sent when it returns
        assert receiver.events() == [{"n": 1, "otel_status_code": "OK"}, {"n": 2}] and sink.sent == 2
        headers, _ = receiver.requests[0]
        assert headers["authorization"] == "Bearer from-env" and headers["content-type"] == "application/x-ndjson"
        sink.close()
    before = health.dropped["atof"]
    with HttpSink(status=503) as failing:
        sink = StreamSink(StreamSinkConfig(url=failing.url, timeout_millis=2000))
        sink.write([{"n": i} for i in range(3)])
        assert health.dropped["atof"] == before + 3
        assert len(failing.requests) == StreamSink.RETRY.total + 1  # retried with backoff, then counted as dropped
        sink.close()


def _stream_processor(url: str, timeout_millis: int) -> tuple[AtofSpanProcessor, TracerProvider]:
    processor = AtofSpanProcessor([StreamSink(StreamSinkConfig(url=url, timeout_millis=timeout_millis))])
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return processor, provider


def test_a_flush_waits_for_the_stream_s_batch_in_flight():
    """force_flush() is True only once the receiver has the events: a batch taken off the queue and still being
    POSTed counts (it once returned True at once, a second before the batch arrived)."""
    with HttpSink(delay_s=1.0) as slow:
        processor, provider = _stream_processor(slow.url, 5000)
        with provider.get_tracer("t").start_as_current_span("work"):
            pass
        time.sleep(0.2)  # the worker has taken the events: its queue is empty, the POST is in flight
        assert not processor.force_flush(100)  # not delivered yet: not flushed
        assert processor.force_flush(5000) and [e["scope_category"] for e in slow.events()] == ["start", "end"]
        provider.shutdown()


def test_a_stream_endpoint_that_drips_its_answer_costs_one_timeout_per_batch_and_never_holds_shutdown():
    """The endpoint answers its headers, then a byte every 0.2 s: `requests`' timeout is per read, so the POST (and the
    one ATOF worker behind it, which also writes the file sinks) was held as long as the drip lasted. Now a request
    ends at timeout_millis, counted as dropped; while the endpoint is failing it is tried again once every
    LIVE_RETRY_S, not for every batch; and a shutdown cuts the request in flight."""
    from tests.harness.fault_servers import FaultServer

    with FaultServer("drip", delay_s=0.2) as server, FaultServer("drip", delay_s=0.2) as other:
        url = f"{server.endpoint}/atof"  # each byte well within the 0.5 s read timeout
        before = health.dropped_at[url]
        processor, provider = _stream_processor(url, 500)
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("one"):
            pass
        started = time.monotonic()
        assert processor.force_flush(5000)  # the worker is free again: the drip was cut at its deadline
        assert time.monotonic() - started < 2.0 and server.longest_drip_s() < 1.0
        assert health.dropped_at[url] == before + 2  # the span's start and end events
        tried = server.count()
        assert tried >= 1
        with tracer.start_as_current_span("two"):
            pass
        assert processor.force_flush(100)  # failing: not tried again for this batch, counted at once
        assert health.dropped_at[url] == before + 4 and server.count() == tried
        provider.shutdown()

        processor, provider = _stream_processor(f"{other.endpoint}/atof", 500)
        with provider.get_tracer("t").start_as_current_span("three"):
            pass
        time.sleep(0.1)  # its POST is in flight, dripping
        started = time.monotonic()
        provider.shutdown()  # flush budget 2 s: the deadline (0.5 s) ends the POST first
        assert time.monotonic() - started < 1.5
        while other.longest_drip_s() and time.monotonic() - started < 2.0:
            time.sleep(0.02)  # the server sees the connection shut as it next looks
        assert other.longest_drip_s() == 0.0


def test_a_retry_after_longer_than_the_timeout_does_not_hold_the_worker():
    """urllib3 sleeps out a `Retry-After` between tries, and the deadline shuts sockets, not sleeps: a 503 asking
    for 3 s held the ATOF worker (and its file sinks) 3.4 s past a 0.5 s timeout. The waits end at the deadline."""
    from tests.harness.fault_servers import FaultServer

    with FaultServer("status", status=503, retry_after="3") as server:
        url = f"{server.endpoint}/atof"
        before = health.dropped_at[url]
        sink = StreamSink(StreamSinkConfig(url=url, timeout_millis=500))
        started = time.monotonic()
        sink.write([{"n": 1}])
        assert time.monotonic() - started < 1.0
        assert health.dropped_at[url] == before + 1
        sink.close()


def test_a_shutdown_that_cuts_a_slow_stream_is_no_failure_of_the_endpoint(caplog):
    """The cut is ours: a healthy but slow endpoint is not reported as failing (said once per process, it would hide
    a real failure later), and a new pipeline streaming to it (a reload) sends at once."""
    with HttpSink(delay_s=3.0) as slow:
        processor, provider = _stream_processor(slow.url, 10_000)
        with provider.get_tracer("t").start_as_current_span("slow"):
            pass
        time.sleep(0.2)  # its POST is in flight
        provider.shutdown()  # 2 s of flush, then the cut
        assert not health.failed_within(slow.url, 60)
        assert "cannot export" not in caplog.text
        sink = StreamSink(StreamSinkConfig(url=slow.url, timeout_millis=10_000))
        sink.write([{"n": 1}])
        assert sink.sent == 1
        sink.close()


def test_stream_sink_never_follows_a_redirect_with_its_headers(monkeypatch):
    monkeypatch.setenv("ATOF_TOKEN", "Bearer secret")
    with HttpSink() as elsewhere, HttpSink(status=307, location=elsewhere.url) as redirecting:
        sink = StreamSink(StreamSinkConfig(url=redirecting.url, header_env={"authorization": "ATOF_TOKEN"}))
        sink.write([{"n": 1}])
        assert len(redirecting.requests) == 1 and elsewhere.requests == []  # the token went nowhere else
        sink.close()


def test_conformance_with_nemo_relay(tmp_path):
    """Same scenario through nemo-relay's own API and ATOF file exporter, and through ours."""
    import nemo_relay as nr  # installed with the test extras: never skipped
    from nemo_relay import llm, scope, subscribers, tools

    cfg = nr.AtofExporterConfig()
    cfg.sink_type, cfg.output_directory, cfg.filename = "file", str(tmp_path), "relay.jsonl"
    cfg.mode = nr.AtofExporterMode.Overwrite
    exporter = nr.AtofExporter(cfg)
    exporter.register("conformance")
    root = scope.push("hermes", nr.ScopeType.Agent, metadata={"session_id": "s1"})
    call = llm.call("openai", nr.LLMRequest({}, {"model": "m"}), handle=root, model_name="m")
    layer = scope.push("llm_execution alpha", nr.ScopeType.Function, handle=root)
    scope.pop(layer)
    llm.call_end(call, {"id": "r"})
    scope.event("hermes.middleware.rewrite", handle=root, data={"k": 1})
    tool = tools.call("terminal", {"command": "echo"}, handle=root, tool_call_id="call_1")
    tools.call_end(tool, nr.ToolExecutionResult("out"))
    scope.pop(root)
    subscribers.flush()
    exporter.deregister("conformance")
    exporter.shutdown()
    relay = [json.loads(line) for line in (tmp_path / "relay.jsonl").read_text().splitlines()]
    ours = run_ours(tmp_path)

    def shape(events, kind):
        return {(k, type(v).__name__ if v is not None else "null") for e in events if e["kind"] == kind for k, v in e.items()}

    for kind in ("scope", "mark"):
        relay_keys = {k for e in relay if e["kind"] == kind for k in e}
        our_keys = {k for e in ours if e["kind"] == kind for k in e}
        assert our_keys == relay_keys, kind
        # Every (field, type) we emit is one relay emits too (relay's root has a parent; ours may be null).
        assert shape(ours, kind) - shape(relay, kind) <= {("parent_uuid", "null"), ("metadata", "dict"), ("data", "str"),
                                                          ("category_profile", "null"), ("data", "null")}
    vocab = {"category": {e["category"] for e in relay}, "scope_category": {e.get("scope_category") for e in relay}}
    assert {e["category"] for e in ours} <= vocab["category"] | {None}
    assert {e.get("scope_category") for e in ours} <= vocab["scope_category"]
    assert {e["atof_version"] for e in ours} == {e["atof_version"] for e in relay} == {"0.1"}
    for events in (relay, ours):
        scopes = [e for e in events if e["kind"] == "scope"]
        assert sorted(e["uuid"] for e in scopes if e["scope_category"] == "start") == sorted(
            e["uuid"] for e in scopes if e["scope_category"] == "end"
        )
        timestamp = RFC3339 if events is relay else RFC3339_NS  # ours always carry nanoseconds
        bad = [e for e in events if not (UUID_V7.match(e["uuid"]) and timestamp.match(e["timestamp"]))]
        assert bad == [], "relay" if events is relay else "ours"
        for e in scopes:
            if e["category"] == "llm":
                assert set(e["category_profile"]) == {"model_name"}
            if e["category"] == "tool":
                assert set(e["category_profile"]) == {"tool_call_id"}
            if e["scope_category"] == "end" and e["category"] == "llm":
                assert e["metadata"]["otel.status_code"] == "OK"


def test_relay_activation_failure_is_reported_once(caplog):
    import logging

    import nemo_relay  # noqa: F401 - installed with the test extras: never skipped

    from hermes_otel.exporters.relay.native import activate

    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    bad = {"kind": "observability", "enabled": True, "config": {"version": 1}}  # Relay 0.10 rejects version 1
    assert activate(bad) is None and activate(bad) is None
    failures = [r for r in caplog.records if "NeMo Relay activation failed" in r.getMessage()]
    assert [r.levelname for r in failures] == ["WARNING", "DEBUG"]
