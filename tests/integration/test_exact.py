"""OpenTelemetry-exact by construction, with real Hermes 0.19.0 and a host's own providers
(`runtime.use_providers`): a custom id generator, the contrib BaggageSpanProcessor, a stateful sampler
and a TraceIdRatioBased sampler see exactly what an inline SDK call shows them, and the same session
exports the same telemetry whether observer records are emitted inline or on our records thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import run_agent

pytestmark = [pytest.mark.hermes, pytest.mark.usefixtures("at_the_defaults")]
TURNS = 4


class CountingIds(IdGenerator):
    """Ids that say who made them: 0x0c0ffee0000... + a counter (deterministic across runs)."""

    def __init__(self) -> None:
        self.issued_traces: list[int] = []
        self.issued_spans: list[int] = []

    def generate_trace_id(self) -> int:
        self.issued_traces.append((0xC0FFEE << 100) + len(self.issued_traces) * 0x9E3779B97F4A7C15 + 1)
        return self.issued_traces[-1]

    def generate_span_id(self) -> int:
        self.issued_spans.append((0xC0FFEE << 40) + len(self.issued_spans) + 1)
        return self.issued_spans[-1]


class Asked(Sampler):
    """A root sampler that records each question about a turn (and drops other roots: Hermes's own HTTP
    probes outside any turn)."""

    def __init__(self, decide) -> None:
        self.decide = decide
        self.asked: list[tuple[int, bool]] = []  # (trace id, sampled) per turn root

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None, trace_state=None):
        if name != "invoke_agent hermes":
            return SamplingResult(Decision.DROP)
        result = self.decide(parent_context, trace_id, name, kind, attributes, links)
        self.asked.append((trace_id, result.decision.is_sampled()))
        return result

    def get_description(self) -> str:
        return "Asked"


def every_other_root():
    """A stateful sampler: the 1st, 3rd, ... turn sampled, the others dropped."""
    count = [0]

    def decide(parent_context, trace_id, name, kind, attributes, links):
        count[0] += 1
        return SamplingResult(Decision.RECORD_AND_SAMPLE if count[0] % 2 else Decision.DROP, attributes)

    return Asked(decide)


class Witness(SpanProcessor):
    """What a span processor sees at on_start: the thread, the time, the parent context's baggage."""

    def __init__(self) -> None:
        self.starts: dict[int, tuple[str, int, dict]] = {}

    def on_start(self, span, parent_context=None) -> None:
        self.starts[span.context.span_id] = (threading.current_thread().name, time.time_ns(),
                                             dict(baggage.get_all(parent_context)))


class KeepMetrics(MetricExporter):
    """Every collection exported (exemplars are reported once, by the collection after their measurement)."""

    def __init__(self) -> None:
        super().__init__()
        self.exported: list = []

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        self.exported.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        pass


class Host:
    """A host application's providers, handed to hermes-otel before Hermes loads plugins."""

    def __init__(self, root_sampler: Sampler) -> None:
        self.ids, self.witness = CountingIds(), Witness()
        self.sampler = ParentBased(root_sampler, local_parent_sampled=ALWAYS_ON, local_parent_not_sampled=ALWAYS_OFF)
        self.spans, self.logs, self.metrics = InMemorySpanExporter(), InMemoryLogRecordExporter(), KeepMetrics()
        self.tracer_provider = TracerProvider(id_generator=self.ids, sampler=self.sampler)
        for processor in (BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS), self.witness, SimpleSpanProcessor(self.spans)):
            self.tracer_provider.add_span_processor(processor)
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.meter_provider = MeterProvider(metric_readers=[PeriodicExportingMetricReader(self.metrics, 3_600_000)])


@pytest.fixture
def host_session(llm, plugins_enabled) -> Iterator:
    """Runs TURNS scripted turns (a retry, a tool call) under a host's providers, with baggage on the agent's
    thread; `records` = "inline" (the host's pipeline) or "thread" (our records thread)."""
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime
    from hermes_otel.emitter import Emitter

    def run(root_sampler: Sampler, records: str, prepare=lambda host: None) -> tuple[Host, list]:
        host = Host(root_sampler)
        prepare(host)
        runtime.use_providers(host.tracer_provider, host.meter_provider, host.logger_provider)
        with plugins_enabled("hook_tape") as (tape,):
            tape.TAPE.clear()
            tape.TIMES.clear()
            if records == "thread":
                emitter = Emitter()
                runtime.current_telemetry().emitter = emitter
                runtime.current_bridge()._emitter = emitter
            token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
            try:
                for turn in range(TURNS):
                    llm.push(Reply.error(503, "busy"),
                             Reply.tools(ToolCall("terminal", {"command": f"echo {turn}"}, id=f"call_{turn}")),
                             Reply.text(f"done {turn}"))
                    assert run_agent(llm.base_url, f"turn {turn}")["final_response"] == f"done {turn}"
            finally:
                otel_context.detach(token)
            runtime.flush(5)
            times = list(tape.TIMES)
        return host, times

    try:
        yield run
    finally:
        runtime._state.shared = None  # back to our own pipeline for the other tests
        runtime._state.telemetry = None
        discover_plugins(force=True)


def _normalised(host: Host) -> tuple[list, list]:
    """Spans and records with Hermes's run-specific ids and the clock taken out (placeholders in order of
    first appearance), everything else as exported."""
    names: dict[str, str] = {}

    def norm(value, key=""):
        if key in timed:  # a measured time: present, its value the clock's
            return "<seconds>"
        if isinstance(value, str) and (value.startswith(("20", "call_", "stream-")) or len(value) == 36):
            return names.setdefault(value, f"<id{len(names)}>")
        return value

    timed = {"gen_ai.response.time_to_first_chunk"}

    varying = {"hermes.duration_ms", "hermes.api_duration", "hermes.started_at", "hermes.ended_at",
               "hermes.api.retry_after", "hermes.subagent.duration_ms"}
    spans = [(s.name, s.kind, s.context.trace_id, s.context.span_id, s.parent.span_id if s.parent else None,
              s.context.trace_flags, {k: norm(v, k) for k, v in s.attributes.items() if k not in varying},
              [(e.name, {k: norm(v) for k, v in e.attributes.items()}) for e in s.events],
              s.status.status_code, [(link.context.span_id, dict(link.attributes)) for link in s.links])
             for s in host.spans.get_finished_spans()]
    records = sorted(
        ((r.log_record.event_name, r.log_record.trace_id, r.log_record.span_id,
          tuple(sorted((k, norm(v)) for k, v in r.log_record.attributes.items() if k not in varying)))
         for r in host.logs.get_finished_logs() if r.log_record.event_name), key=repr)
    # Hermes's own log lines (bridged, as by default) are Hermes's text and timing (a retry's random delay, lines
    # its background threads log when they happen to): they are not ours to compare run against run.
    return spans, records


def test_spans_are_what_the_sdk_makes_inline(host_session):
    host, hook_times = host_session(ParentBased(ALWAYS_ON), "thread")
    spans = host.spans.get_finished_spans()
    assert len([s for s in spans if s.name == "invoke_agent hermes"]) == TURNS
    # Ids: every one from the tracer's own generator.
    assert {s.context.trace_id for s in spans} <= set(host.ids.issued_traces)
    assert {s.context.span_id for s in spans} <= set(host.ids.issued_spans)
    for span in spans:
        thread, started_at, seen_baggage = host.witness.starts[span.context.span_id]
        # on_start ran at the start, on the thread that started the span (never ours), with the real parent
        # context: the agent's baggage, which the contrib processor copied onto the span.
        # (within 20 ms: the provider request thread may wait for the GIL between the two clocks under load)
        assert thread != "hermes-otel-records" and abs(started_at - span.start_time) < 20_000_000, span.name
        assert seen_baggage == {"tenant": "acme"} and span.attributes["tenant"] == "acme", span.name
    # Records: stamped when Hermes called the hook, though emitted on our records thread: each stamp lies between
    # the tape plugin's clock for the same hook call and for the neighbouring call on the side our callback runs
    # (Hermes calls the hook's callbacks one after another, in registration order; other plugins' and our
    # tracker's callbacks may run in between, so no fixed bound, which only the machine's load would decide).
    # Our observer records (Hermes's own log lines, bridged by default, have no event name and their own stamps).
    records = [r.log_record for r in host.logs.get_finished_logs() if r.log_record.event_name]
    assert any(not r.log_record.event_name for r in host.logs.get_finished_logs())  # the bridge is on
    all_times = [at for _, at in hook_times]
    hook_times = [(name, at, i) for i, (name, at) in enumerate(hook_times) if name != "pre_api_request"]
    assert [r.event_name for r in records] == [f"hermes.observer.{name}" for name, _, _ in hook_times]
    after = records[0].timestamp >= hook_times[0][1]  # our callback runs after the tape's (else before it)
    for record, (name, called_at, i) in zip(records, hook_times, strict=True):
        if after:
            bound = all_times[i + 1] if i + 1 < len(all_times) else time.time_ns()
            assert called_at <= record.timestamp <= bound, name
        else:
            bound = all_times[i - 1] if i else 0
            assert bound <= record.timestamp <= called_at, name
    # Metric points: exemplars point at spans the tracer made. Their time is the SDK's clock when the
    # measurement reaches it on our records thread: after the call, by that thread's delay.
    points = [p for data in host.metrics.exported for rm in data.resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == "gen_ai.client.inference.duration" for p in m.data.data_points]
    exemplars = [e for p in points for e in p.exemplars]
    assert exemplars and all(e.span_id in host.ids.issued_spans for e in exemplars)
    chat_ends = {s.context.span_id: s.end_time for s in spans if s.name.startswith("chat")}
    lags = [e.time_unix_nano - chat_ends[e.span_id] for e in exemplars]
    assert all(0 <= lag < 100_000_000 for lag in lags), lags


@pytest.mark.parametrize("root_sampler", ["stateful", "ratio"])
def test_the_sampler_is_asked_once_per_root_and_dropped_turns_leave_nothing(host_session, root_sampler):
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    sampler = every_other_root() if root_sampler == "stateful" else Asked(TraceIdRatioBased(0.5).should_sample)
    instrumentor = HTTPXClientInstrumentor()  # HTTP client spans under the chat spans: none may be orphaned
    try:
        host, _ = host_session(sampler, "thread", lambda h: instrumentor.instrument(tracer_provider=h.tracer_provider))
    finally:
        instrumentor.uninstrument()
    spans = host.spans.get_finished_spans()
    roots = [s for s in spans if s.name == "invoke_agent hermes"]
    assert len(sampler.asked) == TURNS  # once per turn, never again
    assert sorted(r.context.trace_id for r in roots) == sorted(t for t, sampled in sampler.asked if sampled)
    if root_sampler == "stateful":
        assert [sampled for _, sampled in sampler.asked] == [True, False] * (TURNS // 2)
    else:  # the ratio sampler's rule, on the generator's ids
        assert all(sampled == ((t & 0xFFFFFFFFFFFFFFFF) < 2**63) for t, sampled in sampler.asked)
    sampled = {r.context.trace_id for r in roots}
    assert {s.context.trace_id for s in spans} == sampled  # nothing of a dropped turn, HTTP spans included
    assert any(s.name.startswith(("POST", "HTTP")) for s in spans)
    ids = {s.context.span_id for s in spans}
    assert all(s.parent is None or s.parent.span_id in ids for s in spans)  # no orphans


def test_records_on_our_thread_export_what_inline_records_do(host_session):
    """The differential: the same session, records emitted inline (the host's pipeline) vs on our records
    thread, through providers with the same deterministic id generator and sampler."""
    inline, _ = host_session(ParentBased(ALWAYS_ON), "inline")
    threaded, _ = host_session(ParentBased(ALWAYS_ON), "thread")
    (inline_spans, inline_records), (threaded_spans, threaded_records) = _normalised(inline), _normalised(threaded)
    for a, b in zip(threaded_spans, inline_spans, strict=False):
        assert a == b
    assert len(threaded_spans) == len(inline_spans)
    assert threaded_records == inline_records
