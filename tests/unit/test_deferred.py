"""Deferred building: what the SDK exports is exactly what the agent's thread recorded."""

from __future__ import annotations

import gc
import logging

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from hermes_otel import _log
from hermes_otel.bridge import ObserverBridge
from hermes_otel.deferred import Backlog, DeferredMeter, DeferredSpan, DeferredTracer, Inline, collect_young
from hermes_otel.tracker import Tracker
from tests.unit.modes import DrainingLogs, DrainingReader


@pytest.fixture
def built():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    backlog = Backlog(interval_s=3600, wake_at=10**9)
    yield DeferredTracer(provider.get_tracer("t"), backlog), backlog, exporter, provider
    backlog.shutdown()
    provider.shutdown()


def test_spans_are_built_later_with_the_recorded_ids_times_and_data(built):
    tracer, backlog, exporter, _ = built
    other = trace.SpanContext(0xABC, 0xDEF, False, trace.TraceFlags(1))
    root = tracer.start_span("root", kind=SpanKind.SERVER, attributes={"a": 1}, links=[Link(other, {"l": "x"})],
                             start_time=1_000)
    child = tracer.start_span("child", context=trace.set_span_in_context(root), kind=SpanKind.CLIENT, start_time=2_000)
    child.set_attribute("b", "two")
    child.set_attributes({"c": 3.5, "d": (1, 2)})
    child.add_event("ev", {"k": "v"}, timestamp=2_500)
    child.add_link(other, {"late": True})
    child.update_name("child renamed")
    child.set_status(Status(StatusCode.ERROR, "broke"))
    child.set_status(StatusCode.UNSET)  # never overrides
    child.end(end_time=3_000)
    child.set_attribute("after", "end")  # ignored, as by the SDK
    root.end(end_time=4_000)
    assert isinstance(root, DeferredSpan) and exporter.get_finished_spans() == ()  # nothing built yet

    backlog.drain()
    got_child, got_root = exporter.get_finished_spans()
    # The default sampler: the root's flags and trace state are preset without asking it, and must match.
    assert tracer.samples_every_root and tracer.follows_local_parent
    assert got_root.context == root.get_span_context() and got_root.parent is None
    assert (got_root.name, got_root.kind, got_root.start_time, got_root.end_time) == ("root", SpanKind.SERVER, 1_000, 4_000)
    assert dict(got_root.attributes) == {"a": 1}
    assert [(link.context, dict(link.attributes)) for link in got_root.links] == [(other, {"l": "x"})]
    assert got_child.context == child.get_span_context()
    assert got_child.parent.span_id == root.get_span_context().span_id
    assert got_child.context.trace_id == root.get_span_context().trace_id
    assert (got_child.name, got_child.kind, got_child.start_time, got_child.end_time) == (
        "child renamed", SpanKind.CLIENT, 2_000, 3_000)
    assert dict(got_child.attributes) == {"b": "two", "c": 3.5, "d": (1, 2)}
    assert [(e.name, dict(e.attributes), e.timestamp) for e in got_child.events] == [("ev", {"k": "v"}, 2_500)]
    assert [dict(link.attributes) for link in got_child.links] == [{"late": True}]
    assert (got_child.status.status_code, got_child.status.description) == (StatusCode.ERROR, "broke")


def test_spans_of_other_instrumentations_nest_under_a_deferred_span(built):
    tracer, backlog, exporter, provider = built
    chat = tracer.start_span("chat")
    token = otel_context.attach(trace.set_span_in_context(chat))
    try:  # what opentelemetry-instrumentation-httpx does inside the provider call
        http = provider.get_tracer("httpx").start_span("POST")
        http.end()
    finally:
        otel_context.detach(token)
    chat.end()
    backlog.drain()
    http_span, chat_span = exporter.get_finished_spans()
    assert http_span.parent.span_id == chat_span.context.span_id
    assert http_span.context.trace_id == chat_span.context.trace_id


def test_a_lazy_span_is_complete_when_it_is_queued():
    """The builder may take a queued span at once (mid-pass): here it always does (an inline backlog)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = DeferredTracer(provider.get_tracer("t"), Inline())
    root = tracer.start_span("root")
    for parent in (None, root.get_span_context()):  # looked up from the context, or handed in
        child = tracer.start_lazy(lambda model: (f"chat {model}", {"m": model}), ("gpt",),
                                  context=trace.set_span_in_context(root), kind=SpanKind.CLIENT, parent=parent)
        child.end()
    root.end()
    first, second, _ = exporter.get_finished_spans()
    for got in (first, second):
        assert (got.name, dict(got.attributes), got.kind) == ("chat gpt", {"m": "gpt"}, SpanKind.CLIENT)
        assert got.parent.span_id == root.get_span_context().span_id
    provider.shutdown()


def test_the_sampler_decides_on_the_agent_thread():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    backlog = Backlog(interval_s=3600, wake_at=10**9)
    tracer = DeferredTracer(provider.get_tracer("t"), backlog)
    root = tracer.start_span("root")
    assert not root.is_recording() and not root.get_span_context().trace_flags.sampled
    tracer.start_span("child", context=trace.set_span_in_context(root)).end()
    root.end()
    assert len(backlog) == 0  # nothing queued for spans that are not recorded
    backlog.shutdown()
    assert exporter.get_finished_spans() == ()


def test_a_full_backlog_drops_and_counts_new_work_but_keeps_every_end(built, caplog):
    tracer, _, exporter, provider = built
    _log.reset()
    backlog = Backlog(limit=4, interval_s=3600, wake_at=10**9)
    small = DeferredTracer(provider.get_tracer("small"), backlog)
    spans = [small.start_span(f"s{i}") for i in range(6)]  # 4 starts fit, 2 are dropped
    with caplog.at_level(logging.WARNING, logger="hermes_otel"):
        for span in spans:
            span.end()  # ends are always queued (an admitted start must be closed)
    assert backlog.dropped == 2
    assert len([r for r in caplog.records if "backlog full" in r.getMessage()]) == 1
    backlog.shutdown()
    assert [s.name for s in exporter.get_finished_spans()] == ["s0", "s1", "s2", "s3"]


def test_a_fault_in_one_item_is_reported_once_and_the_rest_still_runs(caplog):
    backlog = Backlog(interval_s=3600, wake_at=10**9)
    ran = []
    _log.reset()

    def boom():
        raise RuntimeError("builder bug")

    with caplog.at_level(logging.WARNING, logger="hermes_otel"):
        for i in range(3):
            backlog.defer(boom)
            backlog.defer(ran.append, i)
        backlog.drain()
    assert ran == [0, 1, 2]
    assert len([r for r in caplog.records if "builder bug" in r.getMessage()]) == 1
    backlog.shutdown()


def test_after_shutdown_work_runs_inline_and_nothing_is_lost():
    backlog = Backlog(interval_s=3600, wake_at=10**9)
    backlog.shutdown()
    ran = []
    backlog.defer(ran.append, 1)
    assert ran == [1]


def test_the_builder_wakes_by_itself():
    backlog = Backlog(interval_s=0.01)
    ran = []
    backlog.defer(ran.append, 1)
    for _ in range(500):
        if ran:
            break
        import time

        time.sleep(0.01)
    assert ran == [1]
    backlog.shutdown()


def test_metric_points_and_log_records_carry_the_recorded_context_and_time(built):
    tracer, backlog, spans, _ = built
    reader = DrainingReader(backlog)
    meter_provider = MeterProvider(metric_readers=[reader])
    logs = DrainingLogs(backlog)
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracker = Tracker(tracer, DeferredMeter(meter_provider.get_meter("t"), backlog))
    bridge = ObserverBridge(tracker, logger_provider.get_logger("t"), DeferredMeter(meter_provider.get_meter("t"), backlog),
                            backlog=backlog)
    turn = "s:t:1"
    v1 = {"telemetry_schema_version": "hermes.observer.v1", "session_id": "s", "turn_id": turn}
    bridge.on_hook("pre_llm_call", dict(v1))
    call = tracker.start_tool("terminal", {**v1, "tool_call_id": "c1"})
    tracker.finish_tool(call, {**v1, "tool_call_id": "c1"})
    bridge.on_hook("post_tool_call", {**v1, "tool_call_id": "c1", "tool_name": "terminal", "status": "ok"})
    bridge.on_hook("on_session_end", dict(v1))
    assert len(backlog) > 0
    records = [r.log_record for r in logs.get_finished_logs()]
    tool_span = next(s for s in spans.get_finished_spans() if s.name == "execute_tool terminal")
    post = next(r for r in records if r.event_name == "hermes.observer.post_tool_call")
    assert (post.trace_id, post.span_id) == (tool_span.context.trace_id, tool_span.context.span_id)
    assert post.observed_timestamp == post.timestamp <= tool_span.end_time + 10**9
    names = {m.name: m for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    calls, duration = (names[n].data.data_points[0] for n in ("hermes.tool.calls", "gen_ai.execute_tool.duration"))
    assert calls.value == 1 and duration.count == 1
    # Both are recorded on the builder, with the tool's span as their context: exemplars point at it.
    assert [e.span_id for e in calls.exemplars] == [e.span_id for e in duration.exemplars] == [tool_span.context.span_id]
    meter_provider.shutdown()
    logger_provider.shutdown()


class _Collections:
    """Records the garbage collections that start while it is installed (gc.callbacks)."""

    def __enter__(self) -> list[int]:
        self.generations: list[int] = []
        gc.callbacks.append(self._seen)
        return self.generations

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._seen)

    def _seen(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.generations.append(info["generation"])


def _fill_young_generation() -> list:
    young_limit = gc.get_threshold()[0]
    # Tracked containers: the young count passes half the limit, and stays short of it (no automatic collection).
    return [[] for _ in range(young_limit * 3 // 4)]


def test_the_builder_runs_the_pending_young_collection_itself():
    gc.collect()
    with _Collections() as generations:
        gc.disable()  # nothing else may collect while the young generation fills
        try:
            keep = _fill_young_generation()
            young_before = gc.get_count()[0]
        finally:
            gc.enable()
        collect_young()
    assert young_before >= gc.get_threshold()[0] // 2
    assert generations == [0]
    assert gc.get_count()[0] < young_before
    del keep


def test_the_builder_collects_the_middle_generation_when_it_is_due():
    gc.collect()
    middle_limit = gc.get_threshold()[1]
    for _ in range(middle_limit - 1):
        gc.collect(0)  # each young collection counts towards the middle generation's
    assert gc.get_count()[1] == middle_limit - 1
    with _Collections() as generations:
        gc.disable()
        try:
            keep = _fill_young_generation()
        finally:
            gc.enable()
        collect_young()
    assert generations == [1]
    del keep


def test_the_builder_leaves_the_hosts_gc_settings_alone():
    gc.collect()
    with _Collections() as generations:
        gc.disable()
        try:
            keep = _fill_young_generation()
            collect_young()  # disabled by the host: no collection from us
        finally:
            gc.enable()
        gc.collect(0)
        collect_young()  # a young generation far below the threshold: nothing to do yet
    assert generations == [0]  # only our own explicit gc.collect(0)
    del keep
