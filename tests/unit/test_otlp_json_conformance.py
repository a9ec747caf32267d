"""Our embedded-default files hold what the OpenTelemetry project's own OTLP/JSON encoder produces.

`opentelemetry-exporter-otlp-json-common` is the reference. Telemetry is generated (Hypothesis): spans
with every attribute type, empty / unicode / huge values, events, links, statuses, kinds, remote parents
and trace state; log records with every body type; counters, gauges, explicit and exponential histograms
with exemplars. It goes through the real SDK and our file exporters (hermes_otel/exporters/file/exporter.py and
otlp_json.py), and each line written must equal, object for object, the reference encoding of the same
slice of the batch.

One deliberate difference, tested on its own: an integer OTLP's int64 cannot hold. We drop that attribute
(and log it) as the OTLP protobuf exporter does; the reference writes it as a number string that no
OTLP/JSON reader accepts.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.json.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics._internal.exemplar import AlwaysOnExemplarFilter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from hermes_otel.exporters.file.exporter import (
    JsonFileLogExporter,
    JsonFileMetricExporter,
    JsonFileSpanExporter,
    RotatingJsonLinesWriter,
)

EXAMPLES = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HUGE = "h" * 300_000  # shared: a huge value costs Hypothesis nothing to generate

# --- strategies (Hypothesis only: no `random`) --------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -math.inf, -0.0]))
TEXT = st.one_of(st.text(max_size=30), st.just(""), st.just(HUGE), st.just("héllo ✓ 日本 🚀 \x00\n\"\\"))
KEYS = st.one_of(st.text(min_size=1, max_size=12), st.sampled_from(["gen_ai.request.model", "k", "ключ", "🔑"]))
SCALARS = st.one_of(TEXT, st.booleans(), INT64, FLOATS)
# The SDK keeps homogeneous sequences (None allowed inside); anything else it drops before us.
SEQUENCES = st.one_of(*(st.lists(st.one_of(s, st.none()), max_size=4).map(tuple)
                        for s in (TEXT, st.booleans(), INT64, FLOATS)))
ATTRIBUTE_VALUES = st.one_of(SCALARS, SEQUENCES)
ATTRIBUTES = st.dictionaries(KEYS, ATTRIBUTE_VALUES, max_size=6)
IDS = st.tuples(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1))
TRACE_STATE = st.one_of(st.none(), st.lists(
    st.tuples(st.sampled_from(["vendor", "rojo", "congo"]), st.sampled_from(["v1", "00f067aa0ba902b7", "t61rcWkgMzE"])),
    max_size=3, unique_by=lambda kv: kv[0]).map(TraceState))
# Log bodies and log attributes may nest (AnyValue): maps, lists, bytes, None.
ANY_VALUE = st.recursive(
    st.one_of(st.none(), SCALARS, st.binary(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def span_contexts(draw, remote: bool | None = None) -> SpanContext:
    trace_id, span_id = draw(IDS)
    return SpanContext(trace_id, span_id, draw(st.booleans()) if remote is None else remote,
                       TraceFlags(draw(st.sampled_from([0, 1]))), draw(TRACE_STATE))


@st.composite
def resources(draw) -> Resource:
    return Resource(draw(ATTRIBUTES), schema_url=draw(st.sampled_from(["", "https://opentelemetry.io/schemas/1.26.0"])))


@st.composite
def span_specs(draw) -> dict[str, Any]:
    return {
        "name": draw(st.one_of(TEXT, st.sampled_from(["chat gpt-4o", "execute_tool terminal"]))),
        "kind": draw(st.sampled_from(list(SpanKind))),
        "attributes": draw(ATTRIBUTES),
        "parent": draw(st.one_of(st.none(), st.just("previous"), span_contexts(remote=True))),
        "links": draw(st.lists(st.tuples(span_contexts(), ATTRIBUTES), max_size=3)),
        "events": draw(st.lists(st.tuples(TEXT, ATTRIBUTES, st.one_of(st.none(), st.integers(0, 2**64 - 1))),
                                max_size=3)),
        "status": draw(st.sampled_from([None, (StatusCode.OK, None), (StatusCode.ERROR, None)]
                                       + [(StatusCode.ERROR, d) for d in ("", "boom", "ü" * 40)])),
        "exception": draw(st.booleans()),
        "times": draw(st.tuples(st.integers(1, 2**62), st.integers(0, 2**62))),
    }


# --- helpers -------------------------------------------------------------------


def written_lines(make_exporter: Callable[[RotatingJsonLinesWriter], Any], export: Callable[[Any], Any]) -> list[dict]:
    """What our file exporter writes for one export call, one dict per line."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "signal.jsonl"
        exporter = make_exporter(RotatingJsonLinesWriter(path))
        export(exporter)
        exporter.shutdown()
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def reference_lines(batch: Sequence[Any], encode: Callable[[Sequence[Any]], Any]) -> list[dict]:
    """The reference encoding of the line our exporters write for a batch (an empty batch writes nothing)."""
    return [obj for obj in (encode(list(batch)).to_dict(),) if obj]


def make_spans(resource: Resource, scope_names: list[str], specs: list[dict[str, Any]]) -> list[Any]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracers = [provider.get_tracer(name, version, schema_url=schema, attributes=attrs)
               for name, version, schema, attrs in (
                   (n, "1.0" if i % 2 else None, "https://example.com/s" if i % 3 else None, {"scope.i": i} if i else None)
                   for i, n in enumerate(scope_names))]
    previous = None
    for i, spec in enumerate(specs):
        tracer = tracers[i % len(tracers)]
        parent = spec["parent"]
        if parent == "previous":
            parent = previous
        context = set_span_in_context(NonRecordingSpan(parent)) if parent is not None else None
        start, length = spec["times"]
        span = tracer.start_span(spec["name"], context=context, kind=spec["kind"], attributes=spec["attributes"],
                                 links=[Link(ctx, attrs) for ctx, attrs in spec["links"]], start_time=start)
        for name, attrs, timestamp in spec["events"]:
            span.add_event(name, attrs, timestamp)
        if spec["exception"]:
            span.record_exception(ValueError("ünïcode failure"), {"extra": 1}, timestamp=start + 1)
        if spec["status"] is not None:
            span.set_status(Status(*spec["status"]))
        span.end(end_time=start + length)
        previous = span.get_span_context()
    return list(memory.get_finished_spans())


# --- the properties -------------------------------------------------------------


@EXAMPLES
@given(resources(), st.lists(st.sampled_from(["hermes_otel", "httpx", ""]), min_size=1, max_size=3, unique=True),
       st.lists(span_specs(), min_size=1, max_size=9))
def test_span_lines_equal_the_reference_encoding(resource, scope_names, specs) -> None:
    spans = make_spans(resource, scope_names, specs)
    ours = written_lines(JsonFileSpanExporter, lambda exporter: exporter.export(spans))
    assert ours == reference_lines(spans, encode_spans)
    assert sum(len(s["spans"]) for line in ours for r in line["resourceSpans"] for s in r["scopeSpans"]) == len(spans)


@st.composite
def log_specs(draw) -> dict[str, Any]:
    return {
        "body": draw(ANY_VALUE),
        "attributes": draw(st.dictionaries(KEYS, ANY_VALUE, max_size=5)),
        "severity": draw(st.sampled_from([None, (1, "TRACE"), (9, "INFO"), (17, ""), (24, "FATAL4")])),
        "event_name": draw(st.one_of(st.none(), st.sampled_from(["", "hermes.observer.pre_tool_call", "ünï"]))),
        "timestamp": draw(st.one_of(st.none(), st.integers(0, 2**64 - 1))),
        "context": draw(st.one_of(st.none(), span_contexts(remote=False))),
    }


@EXAMPLES
@given(resources(), st.lists(log_specs(), min_size=1, max_size=9))
def test_log_lines_equal_the_reference_encoding(resource, specs) -> None:
    from opentelemetry._logs import SeverityNumber

    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    loggers = [provider.get_logger("hermes_otel", "0.1.0"), provider.get_logger("other", attributes={"scope.attr": 1})]
    for i, spec in enumerate(specs):
        severity = spec["severity"]
        context = set_span_in_context(NonRecordingSpan(spec["context"])) if spec["context"] else None
        loggers[i % 2].emit(
            body=spec["body"], attributes=spec["attributes"], event_name=spec["event_name"],
            timestamp=spec["timestamp"], context=context,
            severity_number=SeverityNumber(severity[0]) if severity else None,
            severity_text=severity[1] if severity else None,
        )
    batch = list(memory.get_finished_logs())
    ours = written_lines(JsonFileLogExporter, lambda exporter: exporter.export(batch))
    assert ours == reference_lines(batch, encode_logs)
    assert sum(len(s["logRecords"]) for line in ours for r in line["resourceLogs"] for s in r["scopeLogs"]) == len(specs)


NUMBERS = st.one_of(st.integers(0, 2**40), st.floats(0, 1e12, allow_nan=False))
METRIC_ATTRIBUTES = st.dictionaries(st.sampled_from(["gen_ai.operation.name", "error.type", "k"]),
                                    st.one_of(st.text(max_size=8), st.booleans(), INT64), max_size=2)


@EXAMPLES
@given(resources(), st.lists(st.tuples(st.sampled_from(["counter", "updown", "histogram", "exponential", "gauge"]),
                                       NUMBERS, METRIC_ATTRIBUTES, st.booleans()), min_size=1, max_size=25),
       st.booleans())
def test_metric_lines_equal_the_reference_encoding(resource, records, in_span) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(
        resource=resource, metric_readers=[reader], shutdown_on_exit=False, exemplar_filter=AlwaysOnExemplarFilter(),
        views=[View(instrument_name="exponential", aggregation=ExponentialBucketHistogramAggregation(max_size=20)),
               View(instrument_name="*")],
    )
    meter = provider.get_meter("hermes_otel", "0.1.0", schema_url="https://opentelemetry.io/schemas/1.26.0")
    instruments = {
        "counter": meter.create_counter("counter", unit="{call}", description="ünï"),
        "updown": meter.create_up_down_counter("updown"),
        "histogram": meter.create_histogram("histogram", unit="s",
                                            explicit_bucket_boundaries_advisory=[0.01, 0.1, 1.0, 10.0]),
        "exponential": meter.create_histogram("exponential"),
        "gauge": meter.create_gauge("gauge", unit="By"),
    }
    span_context = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7, False, TraceFlags(1))
    for kind, value, attributes, negative in records:
        if kind in ("updown", "gauge") and negative:
            value = -value
        context = set_span_in_context(NonRecordingSpan(span_context)) if in_span else None
        if kind == "gauge":
            instruments[kind].set(value, attributes, context=context)
        else:
            instruments[kind].add(value, attributes, context=context) if kind in ("counter", "updown") else \
                instruments[kind].record(value, attributes, context=context)
    data = reader.get_metrics_data()
    ours = written_lines(JsonFileMetricExporter, lambda exporter: exporter.export(data))
    reference = encode_metrics(data).to_dict()
    assert ours == ([reference] if reference else [])
    if in_span:
        exemplars = [e for line in ours for r in line["resourceMetrics"] for s in r["scopeMetrics"] for m in s["metrics"]
                     for kind in m.values() if isinstance(kind, dict) for p in kind.get("dataPoints", ())
                     for e in p.get("exemplars", ())]
        assert exemplars and {e["spanId"] for e in exemplars} == {"00f067aa0ba902b7"}


def test_an_int_otlp_cannot_hold_is_dropped_not_written_as_a_number_no_reader_accepts(caplog) -> None:
    spans = make_spans(Resource({}), ["t"], [{
        "name": "s", "kind": SpanKind.INTERNAL, "attributes": {"too.big": 2**63, "ok": 1}, "parent": None,
        "links": [], "events": [], "status": None, "exception": False, "times": (1, 1)}])
    (ours,) = written_lines(JsonFileSpanExporter, lambda exporter: exporter.export(spans))
    (reference,) = reference_lines(spans, encode_spans)
    attributes = lambda obj: obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]  # noqa: E731
    assert attributes(ours) == [{"key": "ok", "value": {"intValue": "1"}}]
    assert attributes(reference) == [{"key": "too.big", "value": {"intValue": str(2**63)}},
                                     {"key": "ok", "value": {"intValue": "1"}}]
    assert "Failed to encode key too.big" in caplog.text

    def parses(obj: dict) -> bool:  # protobuf's own ProtoJSON reader (ids as base64, as ProtoJSON wants them)
        text = json.dumps(obj)
        for key in ("traceId", "spanId"):
            value = obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0][key]
            text = text.replace(value, __import__("base64").b64encode(bytes.fromhex(value)).decode())
        try:
            json_format.Parse(text, ExportTraceServiceRequest())
            return True
        except json_format.ParseError:
            return False

    assert parses(ours) and not parses(reference)


def test_the_strategies_reach_every_value_kind() -> None:
    """The generators above produce each AnyValue kind (a narrowed strategy would pass vacuously)."""
    kinds: set[str] = set()

    def note(value: Any) -> None:
        kinds.add(type(value).__name__)
        if isinstance(value, float) and math.isnan(value):
            kinds.add("nan")
        if isinstance(value, str) and value == HUGE:
            kinds.add("huge")
        for item in (value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()):
            note(item)

    @settings(max_examples=200, database=None, derandomize=True)
    @given(ANY_VALUE)
    def collect(value) -> None:
        note(value)

    collect()
    assert {"NoneType", "str", "bool", "int", "float", "bytes", "list", "dict", "nan", "huge"} <= kinds
