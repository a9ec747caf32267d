"""The OTLP receiver decodes exactly what the real OTLP/HTTP exporters send.

Every provider here is explicit and local to its test: nothing touches the
global OpenTelemetry providers, so these tests cannot leak into others.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/ is not an installed package; make ``tests.harness`` importable when
# pytest is run without ``pythonpath = ["."]`` configured.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from opentelemetry import trace  # noqa: E402
from opentelemetry._logs import SeverityNumber  # noqa: E402
from opentelemetry.exporter.otlp.proto.http import Compression  # noqa: E402
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList  # noqa: E402
from opentelemetry.sdk._logs import LoggerProvider  # noqa: E402
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags  # noqa: E402

from tests.harness.otlp_receiver import OTLPReceiver, decode_any_value  # noqa: E402

# Resource(...) (unlike Resource.create) adds no SDK/env attributes, so the
# decoded resource can be compared exactly.
RESOURCE = Resource({"service.name": "receiver-test", "deployment.environment": "ci"})
LINK_TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
LINK_SPAN_ID = 0xB7AD6B7169203331
T0 = 1_700_000_000_000_000_000


@pytest.fixture
def recv() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


def export_parent_child(recv: OTLPReceiver, compression: Compression | None = None) -> None:
    provider = TracerProvider(resource=RESOURCE)
    exporter = OTLPSpanExporter(endpoint=recv.endpoint + "/v1/traces", compression=compression)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("receiver.test.scope", "1.2.3")

    parent = tracer.start_span("parent", start_time=T0)
    link = Link(
        SpanContext(LINK_TRACE_ID, LINK_SPAN_ID, is_remote=True, trace_flags=TraceFlags(1)),
        attributes={"link.reason": "follows"},
    )
    child = tracer.start_span(
        "child",
        context=trace.set_span_in_context(parent),
        kind=SpanKind.CLIENT,
        links=[link],
        start_time=T0 + 10,
        attributes={
            "str": "s",
            "bool": True,
            "int": 42,
            "float": 1.5,
            "strs": ["a", "b"],
            "ints": [1, 2],
            "floats": [0.5, 2.0],
            "bools": [True, False],
        },
    )
    child.add_event("retry", {"attempt": 2}, timestamp=T0 + 20)
    child.set_status(Status(StatusCode.ERROR, "upstream failed"))
    child.end(end_time=T0 + 30)
    parent.set_status(Status(StatusCode.OK))
    parent.end(end_time=T0 + 40)

    assert provider.force_flush(5_000)
    provider.shutdown()


def test_spans_decode_exactly(recv: OTLPReceiver) -> None:
    export_parent_child(recv)

    by_name = {s.name: s for s in recv.wait_for_spans(lambda spans: len(spans) == 2, timeout=5)}
    parent, child = by_name["parent"], by_name["child"]

    assert len(parent.trace_id) == 32 and len(parent.span_id) == 16
    assert parent.parent_span_id is None
    assert child.trace_id == parent.trace_id
    assert child.parent_span_id == parent.span_id
    assert (parent.kind, child.kind) == ("INTERNAL", "CLIENT")
    assert (parent.start_ns, parent.end_ns) == (T0, T0 + 40)
    assert (child.start_ns, child.end_ns) == (T0 + 10, T0 + 30)
    assert child.attributes == {
        "str": "s",
        "bool": True,
        "int": 42,
        "float": 1.5,
        "strs": ["a", "b"],
        "ints": [1, 2],
        "floats": [0.5, 2.0],
        "bools": [True, False],
    }
    assert child.events == [("retry", {"attempt": 2})]
    assert child.links == [(f"{LINK_TRACE_ID:032x}", f"{LINK_SPAN_ID:016x}", {"link.reason": "follows"})]
    assert (child.status_code, child.status_message) == ("ERROR", "upstream failed")
    assert (parent.status_code, parent.status_message) == ("OK", "")
    assert child.resource == {"service.name": "receiver-test", "deployment.environment": "ci"}
    assert child.scope_name == "receiver.test.scope"

    assert recv.request_count == 1
    assert recv.headers[0]["content-type"] == "application/x-protobuf"
    assert recv.paths == ["/v1/traces"]


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.Deflate])
def test_compressed_exports(recv: OTLPReceiver, compression: Compression) -> None:
    export_parent_child(recv, compression)

    assert sorted(s.name for s in recv.spans()) == ["child", "parent"]
    assert recv.headers[-1]["content-encoding"] == compression.value
    assert recv.errors == []


def test_log_record_decodes_exactly(recv: OTLPReceiver) -> None:
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=recv.endpoint + "/v1/logs")))
    span_context = SpanContext(LINK_TRACE_ID, LINK_SPAN_ID, is_remote=False, trace_flags=TraceFlags(1))

    provider.get_logger("receiver.test.logs").emit(
        timestamp=T0,
        context=trace.set_span_in_context(trace.NonRecordingSpan(span_context)),
        severity_number=SeverityNumber.WARN,
        severity_text="WARN",
        event_name="hermes.tool.result",
        # Log bodies and attributes accept full AnyValue: maps, bytes, nesting.
        body={"tool": "terminal", "exit": 0, "args": ["echo", "hi"], "raw": b"\x00\x01"},
        attributes={"session.id": "s-1", "ok": False},
    )
    assert provider.force_flush(5_000)
    provider.shutdown()

    (log,) = recv.wait_for_logs(lambda logs: len(logs) == 1, timeout=5)
    assert log.event_name == "hermes.tool.result"
    assert log.body == {"tool": "terminal", "exit": 0, "args": ["echo", "hi"], "raw": b"\x00\x01"}
    assert log.attributes == {"session.id": "s-1", "ok": False}
    assert (log.trace_id, log.span_id) == (f"{LINK_TRACE_ID:032x}", f"{LINK_SPAN_ID:016x}")
    assert (log.severity_number, log.severity_text) == (SeverityNumber.WARN.value, "WARN")
    assert log.time_ns == T0
    assert log.resource == {"service.name": "receiver-test", "deployment.environment": "ci"}
    assert log.scope_name == "receiver.test.logs"


def test_histogram_and_counter_decode(recv: OTLPReceiver) -> None:
    # A long interval: only force_flush() exports, so the test is deterministic.
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=recv.endpoint + "/v1/metrics"), export_interval_millis=600_000
    )
    provider = MeterProvider(metric_readers=[reader], resource=RESOURCE)
    meter = provider.get_meter("receiver.test.metrics")
    latency = meter.create_histogram("hermes.llm.duration", unit="s", description="LLM call latency")
    latency.record(0.5, {"model": "fake"})
    latency.record(7, {"model": "fake"})
    meter.create_counter("hermes.tool.calls").add(3, {"tool": "terminal"})

    assert provider.force_flush(5_000)
    metrics = {m.name: m for m in recv.wait_for_metrics(lambda ms: len(ms) >= 2, timeout=5)}
    provider.shutdown()

    hist = metrics["hermes.llm.duration"]
    assert (hist.kind, hist.unit, hist.description) == ("histogram", "s", "LLM call latency")
    assert hist.resource == {"service.name": "receiver-test", "deployment.environment": "ci"}
    assert hist.scope_name == "receiver.test.metrics"
    (point,) = hist.points
    assert point["attributes"] == {"model": "fake"}
    assert (point["count"], point["sum"], point["min"], point["max"]) == (2, 7.5, 0.5, 7.0)
    # SDK default boundaries: 0.5 lands in (0, 5], 7 in (5, 10].
    assert point["explicit_bounds"][:3] == [0.0, 5.0, 10.0]
    assert point["bucket_counts"][:4] == [0, 1, 1, 0]
    assert sum(point["bucket_counts"]) == 2

    counter = metrics["hermes.tool.calls"]
    assert counter.kind == "sum"
    assert [(p["attributes"], p["value"]) for p in counter.points] == [({"tool": "terminal"}, 3)]


def test_otlp_json_body_with_hex_ids(recv: OTLPReceiver) -> None:
    # OTLP/JSON encodes ids as hex (not protobuf-JSON base64) and int64 as strings.
    payload = {
        "resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]},
            "scopeSpans": [{
                "scope": {"name": "json.scope"},
                "spans": [{
                    "traceId": "5b8efff798038103d269b633813fc60c",
                    "spanId": "eee19b7ec3c1b174",
                    "parentSpanId": "eee19b7ec3c1b173",
                    "name": "json-span",
                    "kind": 3,
                    "startTimeUnixNano": "1544712660000000000",
                    "endTimeUnixNano": "1544712661000000000",
                    "attributes": [{"key": "n", "value": {"intValue": "3"}}],
                }],
            }],
        }]
    }
    request = urllib.request.Request(
        recv.endpoint + "/v1/traces",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"

    (span,) = recv.spans()
    assert (span.trace_id, span.span_id, span.parent_span_id) == (
        "5b8efff798038103d269b633813fc60c",
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b173",
    )
    assert (span.name, span.kind, span.attributes) == ("json-span", "CLIENT", {"n": 3})
    assert (span.start_ns, span.resource, span.scope_name) == (1544712660000000000, {"service.name": "json-svc"}, "json.scope")


def test_bad_body_and_unknown_path(recv: OTLPReceiver) -> None:
    for path, status in (("/v1/traces", 400), ("/v1/nope", 404)):
        request = urllib.request.Request(recv.endpoint + path, data=b"\xff\xff not protobuf")
        with pytest.raises(urllib.error.HTTPError) as excinfo:
            urllib.request.urlopen(request, timeout=5)
        assert excinfo.value.code == status
    assert recv.request_count == 2
    assert len(recv.errors) == 1 and "/v1/traces" in recv.errors[0]


def test_wait_timeout_dumps_what_arrived(recv: OTLPReceiver) -> None:
    export_parent_child(recv)
    with pytest.raises(AssertionError, match=r"(?s)waiting for spans; received 2.*'parent'"):
        recv.wait_for_spans(lambda spans: any(s.name == "missing" for s in spans), timeout=0.2)


def test_clear(recv: OTLPReceiver) -> None:
    export_parent_child(recv)
    recv.clear()
    assert (recv.spans(), recv.request_count, recv.headers) == ([], 0, [])


def test_decode_any_value_covers_every_kind() -> None:
    nested = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="s", value=AnyValue(string_value="x")),
                KeyValue(key="b", value=AnyValue(bool_value=False)),
                KeyValue(key="i", value=AnyValue(int_value=-7)),
                KeyValue(key="d", value=AnyValue(double_value=0.25)),
                KeyValue(key="raw", value=AnyValue(bytes_value=b"\x01")),
                KeyValue(key="arr", value=AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1)]))),
                KeyValue(key="empty", value=AnyValue()),
            ]
        )
    )
    assert decode_any_value(nested) == {
        "s": "x", "b": False, "i": -7, "d": 0.25, "raw": b"\x01", "arr": [1], "empty": None,
    }

