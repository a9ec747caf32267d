"""Sliced encoding: the same OTLP data, with the GIL handed back between slices."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel import _gil
from hermes_otel.config import OTLPTarget, Settings
from hermes_otel.exporters import slices
from hermes_otel.exporters.file import JsonFileSpanExporter, RotatingJsonLinesWriter
from hermes_otel.exporters.otlp_json import decode_spans_json
from hermes_otel.telemetry import _otlp_exporter

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
from tests.harness.otlp_receiver import OTLPReceiver  # noqa: E402

RESOURCE = Resource({"service.name": "slices-test"})
COUNT = 2 * slices.SLICE_ITEMS + 3  # three slices, the last one short


def finished_spans(count: int = COUNT) -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("slices.test")
    for i in range(count):
        tracer.start_span(f"span {i}", attributes={"i": i}).end()
    return list(exporter.get_finished_spans())


def emitted_logs(count: int = COUNT) -> list:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("slices.test")
    for i in range(count):
        logger.emit(event_name=f"event {i}", body=f"body {i}", attributes={"i": i})
    return list(exporter.get_finished_logs())


def flat_spans(request: ExportTraceServiceRequest) -> list:
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def flat_logs(request: ExportLogsServiceRequest) -> list:
    return [log for rl in request.resource_logs for sl in rl.scope_logs for log in sl.log_records]


def test_slices_cover_the_batch_in_order_and_block_between_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = []
    monkeypatch.setattr(_gil.time, "sleep", pauses.append)
    size = slices.SLICE_ITEMS
    assert [list(part) for part in slices.slices(list(range(COUNT)))] == [
        list(range(0, size)), list(range(size, 2 * size)), list(range(2 * size, COUNT))]
    # A real block between slices (sleep(0) would not let a waiting thread in), none after the last.
    assert pauses == [_gil.PAUSE_S, _gil.PAUSE_S]
    assert _gil.PAUSE_S > 0


def test_a_batch_that_shows_the_exporter_is_behind_gets_longer_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses = []
    monkeypatch.setattr(_gil.time, "sleep", pauses.append)
    big = list(range(slices.SLICE_ITEMS * slices.MAX_SLICES * 4 + 1))
    parts = [list(part) for part in slices.slices(big)]
    assert sum(parts, []) == big
    assert len(parts) == slices.MAX_SLICES  # no more pauses than that, in longer slices
    assert len(pauses) == slices.MAX_SLICES - 1


def test_sliced_span_request_decodes_to_the_same_spans() -> None:
    spans = finished_spans()
    sliced = ExportTraceServiceRequest.FromString(slices.encode_sliced(encode_spans, spans))
    whole = encode_spans(spans)
    assert flat_spans(sliced) == flat_spans(whole)
    assert [s.name for s in flat_spans(sliced)] == [f"span {i}" for i in range(COUNT)]
    # Concatenated requests: one resource entry per slice, each with the same resource.
    assert len(sliced.resource_spans) == 3
    assert all(rs.resource == whole.resource_spans[0].resource for rs in sliced.resource_spans)


def test_sliced_log_request_decodes_to_the_same_records() -> None:
    logs = emitted_logs()
    sliced = ExportLogsServiceRequest.FromString(slices.encode_sliced(encode_logs, logs))
    assert flat_logs(sliced) == flat_logs(encode_logs(logs))
    assert len(sliced.resource_logs) == 3


def test_http_exporters_send_one_request_per_batch() -> None:
    with OTLPReceiver() as recv:
        span_exporter = slices.sliced_http_exporter("traces", OTLPSpanExporter)(endpoint=recv.endpoint + "/v1/traces")
        log_exporter = slices.sliced_http_exporter("logs", OTLPLogExporter)(endpoint=recv.endpoint + "/v1/logs")
        assert slices.supports_sliced_export(span_exporter) and slices.supports_sliced_export(log_exporter)
        assert span_exporter.export(finished_spans()) is SpanExportResult.SUCCESS
        assert log_exporter.export(emitted_logs()).name == "SUCCESS"
        assert recv.paths == ["/v1/traces", "/v1/logs"]
        assert [s.name for s in recv.spans()] == [f"span {i}" for i in range(COUNT)]
        assert [s.attributes for s in recv.spans()] == [{"i": i} for i in range(COUNT)]
        assert [(r.event_name, r.body, r.attributes) for r in recv.logs()] == [
            (f"event {i}", f"body {i}", {"i": i}) for i in range(COUNT)]
        assert all(s.resource["service.name"] == "slices-test" for s in recv.spans())


def test_http_exporter_reports_a_refused_batch_as_failed() -> None:
    with OTLPReceiver() as recv:
        endpoint = recv.endpoint
    exporter = slices.sliced_http_exporter("traces", OTLPSpanExporter)(endpoint=endpoint + "/v1/traces", timeout=1)
    assert exporter.export(finished_spans()) is SpanExportResult.FAILURE


def test_http_exporter_drops_a_batch_over_the_request_size_limit() -> None:
    with OTLPReceiver() as recv:
        exporter = slices.sliced_http_exporter("traces", OTLPSpanExporter)(
            endpoint=recv.endpoint + "/v1/traces", max_request_size=100)
        assert exporter.export(finished_spans()) is SpanExportResult.FAILURE
        assert recv.request_count == 0


def test_pipeline_slices_http_traces_and_logs_only() -> None:
    common = {"headers": {}, "timeout_s": 1.0, "compression": "none"}
    http = OTLPTarget(endpoint="http://127.0.0.1:1/v1/traces", protocol="http/protobuf", **common)
    grpc = OTLPTarget(endpoint="http://127.0.0.1:1", protocol="grpc", **common)
    settings = Settings(spool_enabled=False)

    def sdk(signal: str, target: OTLPTarget):  # the SDK exporter behind our outbox and guard
        return _otlp_exporter(signal, target, settings).guarded._inner

    assert isinstance(sdk("traces", http), OTLPSpanExporter)
    assert type(sdk("traces", http)).__name__ == "SlicedOTLPSpanExporter"
    assert type(sdk("logs", http)).__name__ == "SlicedOTLPLogExporter"
    assert type(sdk("metrics", http)) is OTLPMetricExporter
    assert type(sdk("traces", grpc)) is GrpcSpanExporter


def test_file_exporter_writes_a_slice_per_line(tmp_path: Path) -> None:
    writer = RotatingJsonLinesWriter(tmp_path / "traces.jsonl", 1 << 20, 1)
    assert JsonFileSpanExporter(writer).export(finished_spans()) is SpanExportResult.SUCCESS
    lines = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    assert [s["name"] for line in lines for s in decode_spans_json(line)] == [f"span {i}" for i in range(COUNT)]



def test_one_sliced_class_per_exporter_class() -> None:
    assert slices.sliced_http_exporter("traces", OTLPSpanExporter) is slices.sliced_http_exporter("traces", OTLPSpanExporter)
    assert slices.sliced_http_exporter("logs", OTLPLogExporter) is not slices.sliced_http_exporter("traces", OTLPSpanExporter)
