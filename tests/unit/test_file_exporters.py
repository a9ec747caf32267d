"""OTLP/JSON file exporters: wire format, file permissions, rotation, failures."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import Parse
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    SpanKind,
    Status,
    StatusCode,
    format_span_id,
    format_trace_id,
    set_span_in_context,
)

from hermes_otel.exporters.file.exporter import (
    JsonFileLogExporter,
    JsonFileMetricExporter,
    JsonFileSpanExporter,
    RotatingJsonLinesWriter,
    file_paths,
)
from hermes_otel.exporters.file.otlp_json import encode_spans_json
from tests.harness.otlp_json_decode import decode_spans_json

RESOURCE = Resource.create({"service.name": "hermes-test"})


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def hex_ids_to_base64(node: Any) -> Any:
    """Undo the OTLP/JSON hex id mapping so plain ProtoJSON can parse the line."""
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId")
            else hex_ids_to_base64(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [hex_ids_to_base64(v) for v in node]
    return node


@pytest.fixture
def otel_dir(tmp_path: Path) -> Path:
    return tmp_path / "hermes_home" / "otel"


def emit_two_spans(exporter: Any) -> tuple[Any, Any]:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("hermes_otel.test", "1.0")
    with tracer.start_as_current_span("turn") as parent:
        with tracer.start_as_current_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 11,
                "temperature": 0.5,
                "stream": True,
                "stop": ["a", "b"],
            },
        ) as child:
            child.add_event("retry", {"attempt": 2})
            child.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    return parent, child


# --- wire format ------------------------------------------------------------


def test_span_line_is_otlp_json_with_hex_ids(otel_dir: Path) -> None:
    path = file_paths(otel_dir)["traces"]
    parent, child = emit_two_spans(JsonFileSpanExporter(RotatingJsonLinesWriter(path)))

    lines = read_lines(path)
    assert len(lines) == 2  # SimpleSpanProcessor: one request per span, child ends first
    scope_spans = lines[0]["resourceSpans"][0]["scopeSpans"][0]
    assert scope_spans["scope"] == {"name": "hermes_otel.test", "version": "1.0"}
    span = scope_spans["spans"][0]
    ctx, parent_ctx = child.get_span_context(), parent.get_span_context()
    assert span["traceId"] == format_trace_id(ctx.trace_id)
    assert len(span["traceId"]) == 32
    assert span["spanId"] == format_span_id(ctx.span_id)
    assert len(span["spanId"]) == 16
    assert span["parentSpanId"] == format_span_id(parent_ctx.span_id)
    assert span["name"] == "chat gpt-4o"
    assert span["kind"] == 3  # SPAN_KIND_CLIENT, as an integer
    assert span["status"] == {"code": 2, "message": "boom"}
    assert span["attributes"] == [
        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "11"}},
        {"key": "temperature", "value": {"doubleValue": 0.5}},
        {"key": "stream", "value": {"boolValue": True}},
        {
            "key": "stop",
            "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}},
        },
    ]
    assert span["events"][0]["name"] == "retry"
    assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])

    root = read_lines(path)[1]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert "parentSpanId" not in root
    assert root["kind"] == 1  # SPAN_KIND_INTERNAL


def test_span_line_round_trips_through_protojson() -> None:
    memory = InMemorySpanExporter()
    emit_two_spans(memory)
    spans = memory.get_finished_spans()

    line = json.dumps(encode_spans_json(spans), separators=(",", ":"))
    parsed = Parse(json.dumps(hex_ids_to_base64(json.loads(line))), ExportTraceServiceRequest())

    assert parsed == encode_spans(spans)


def test_decode_spans_json_flattens_and_decodes_any_values() -> None:
    memory = InMemorySpanExporter()
    parent, child = emit_two_spans(memory)

    decoded = decode_spans_json(encode_spans_json(memory.get_finished_spans()))

    by_name = {span["name"]: span for span in decoded}
    chat, turn = by_name["chat gpt-4o"], by_name["turn"]
    assert chat["trace_id"] == format_trace_id(child.get_span_context().trace_id)
    assert chat["parent_span_id"] == format_span_id(parent.get_span_context().span_id)
    assert turn["parent_span_id"] is None
    assert chat["kind"] == 3
    assert chat["status_code"] == 2 and chat["status_message"] == "boom"
    assert chat["attributes"] == {
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 11,
        "temperature": 0.5,
        "stream": True,
        "stop": ["a", "b"],
    }
    assert chat["events"][0]["name"] == "retry"
    assert chat["events"][0]["attributes"] == {"attempt": 2}
    assert chat["resource"]["service.name"] == "hermes-test"
    assert isinstance(chat["start_ns"], int) and chat["end_ns"] >= chat["start_ns"]


def test_decode_any_value_kinds() -> None:
    obj = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0AF7651916CD43DD8448EB211C80319C",
                                "spanId": "b7ad6b7169203331",
                                "parentSpanId": "",
                                "name": "x",
                                "kind": "SPAN_KIND_SERVER",
                                "attributes": [
                                    {"key": "kv", "value": {"kvlistValue": {"values": [
                                        {"key": "n", "value": {"intValue": 5}},
                                    ]}}},
                                    {"key": "raw", "value": {"bytesValue": "aGk="}},
                                    {"key": "nan", "value": {"doubleValue": "NaN"}},
                                    {"key": "empty", "value": {}},
                                ],
                                "status": {"code": "STATUS_CODE_OK"},
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (span,) = decode_spans_json(obj)
    assert span["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert span["parent_span_id"] is None
    assert span["kind"] == 2 and span["status_code"] == 1
    assert span["attributes"]["kv"] == {"n": 5}
    assert span["attributes"]["raw"] == b"hi"
    assert math.isnan(span["attributes"]["nan"])
    assert span["attributes"]["empty"] is None
    assert span["start_ns"] == 0 and span["resource"] == {}


def test_log_line_is_otlp_json(otel_dir: Path) -> None:
    path = file_paths(otel_dir)["logs"]
    exporter = JsonFileLogExporter(RotatingJsonLinesWriter(path))
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tracer_provider = TracerProvider(resource=RESOURCE)
    span = tracer_provider.get_tracer("t").start_span("turn")

    provider.get_logger("hermes_otel.test").emit(
        body="tool failed",
        severity_number=SeverityNumber.WARN,
        severity_text="WARN",
        attributes={"gen_ai.tool.name": "web_search"},
        context=set_span_in_context(span),
    )
    span.end()
    provider.shutdown()

    (line,) = read_lines(path)
    record = line["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    ctx = span.get_span_context()
    assert record["traceId"] == format_trace_id(ctx.trace_id)
    assert record["spanId"] == format_span_id(ctx.span_id)
    assert record["severityNumber"] == SeverityNumber.WARN.value
    assert record["body"] == {"stringValue": "tool failed"}
    assert record["attributes"] == [
        {"key": "gen_ai.tool.name", "value": {"stringValue": "web_search"}}
    ]
    Parse(json.dumps(hex_ids_to_base64(line)), ExportLogsServiceRequest())


def test_metric_line_is_otlp_json(otel_dir: Path) -> None:
    path = file_paths(otel_dir)["metrics"]
    exporter = JsonFileMetricExporter(RotatingJsonLinesWriter(path))
    # An infinite interval starts no thread: export happens on force_flush only.
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)
    provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    counter = provider.get_meter("hermes_otel.test").create_counter("hermes.tool.calls")
    counter.add(2, {"gen_ai.tool.name": "web_search"})
    counter.add(1, {"gen_ai.tool.name": "web_search"})

    assert provider.force_flush()
    provider.shutdown()

    line = read_lines(path)[0]
    metric = line["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]
    assert metric["name"] == "hermes.tool.calls"
    point = metric["sum"]["dataPoints"][0]
    assert point["asInt"] == "3"
    assert metric["sum"]["aggregationTemporality"] == 2  # CUMULATIVE, as an integer
    assert metric["sum"]["isMonotonic"] is True
    Parse(json.dumps(hex_ids_to_base64(line)), ExportMetricsServiceRequest())


def test_empty_batch_writes_nothing(otel_dir: Path) -> None:
    path = file_paths(otel_dir)["traces"]
    assert JsonFileSpanExporter(RotatingJsonLinesWriter(path)).export([]) is SpanExportResult.SUCCESS
    assert not path.exists()


# --- files ------------------------------------------------------------------


def test_file_paths(tmp_path: Path) -> None:
    assert file_paths(tmp_path) == {
        "traces": tmp_path / "traces.jsonl",
        "logs": tmp_path / "logs.jsonl",
        "metrics": tmp_path / "metrics.jsonl",
    }


def test_creates_private_dir_and_file(otel_dir: Path) -> None:
    path = file_paths(otel_dir)["traces"]
    writer = RotatingJsonLinesWriter(path)
    assert not otel_dir.exists()  # nothing is created before the first write

    writer.write({"a": 1})
    writer.close()

    assert stat.S_IMODE(otel_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == '{"a":1}\n'


def test_tightens_existing_loose_dir_and_file(otel_dir: Path) -> None:
    otel_dir.mkdir(parents=True)
    os.chmod(otel_dir, 0o755)
    path = file_paths(otel_dir)["logs"]
    path.write_text("")
    os.chmod(path, 0o644)

    RotatingJsonLinesWriter(path).write({"a": 1})

    assert stat.S_IMODE(otel_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rotation_keeps_disk_use_bounded(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    writer = RotatingJsonLinesWriter(path, max_bytes=1000, backups=2)
    for i in range(300):
        writer.write({"i": i, "pad": "x" * 80})  # ~100 bytes per line
    writer.close()

    backups = sorted((p for p in tmp_path.glob("traces.jsonl.*") if p.name[13:].isdigit()),
                     key=lambda p: int(p.name[13:]))
    files = ["traces.jsonl", *(p.name for p in backups)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*files, ".traces.jsonl.lock"])
    newest = int(backups[-1].name[13:])
    assert [int(p.name[13:]) for p in backups] == [newest - 1, newest]  # the two newest generations
    sizes = [(tmp_path / name).stat().st_size for name in files]
    assert all(0 < size <= 1000 for size in sizes)
    assert sum(sizes) <= 3 * 1000
    # Oldest in the lowest-numbered backup, newest in the live file, every line intact and in order.
    numbers = [line["i"] for p in (*backups, tmp_path / "traces.jsonl") for line in read_lines(p)]
    assert numbers == list(range(300 - len(numbers), 300))
    assert all(stat.S_IMODE((tmp_path / n).stat().st_mode) == 0o600 for n in [*files, ".traces.jsonl.lock"])


def test_rotation_without_backups_keeps_one_file(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    writer = RotatingJsonLinesWriter(path, max_bytes=300, backups=0)
    for i in range(50):
        writer.write({"i": i})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".traces.jsonl.lock", "traces.jsonl"]
    assert path.stat().st_size <= 300
    assert read_lines(path)[-1] == {"i": 49}


def test_oversized_line_is_written_to_a_fresh_file(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    writer = RotatingJsonLinesWriter(path, max_bytes=50, backups=1)
    writer.write({"small": 1})
    writer.write({"big": "y" * 200})
    assert read_lines(path) == [{"big": "y" * 200}]
    assert read_lines(tmp_path / "traces.jsonl.1") == [{"small": 1}]

    writer.write({"next": 1})
    assert read_lines(path) == [{"next": 1}]
    assert read_lines(tmp_path / "traces.jsonl.2") == [{"big": "y" * 200}]  # the newest backup
    assert not (tmp_path / "traces.jsonl.1").exists()  # one backup kept


def test_reopens_after_external_removal(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    writer = RotatingJsonLinesWriter(path)
    writer.write({"n": 1})
    path.unlink()
    writer.write({"n": 2})
    assert read_lines(path) == [{"n": 2}]


def test_concurrent_writes_keep_lines_whole(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    writer = RotatingJsonLinesWriter(path, max_bytes=4000, backups=50)

    def work(thread: int) -> None:
        for i in range(100):
            writer.write({"t": thread, "i": i, "pad": "z" * 30})

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    files = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]  # not the lock file
    lines = [line for p in files for line in read_lines(p)]
    assert len(lines) == 400
    assert all(p.stat().st_size <= 4000 for p in files)


# --- failures ---------------------------------------------------------------


def test_unwritable_path_fails_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")  # a file where the directory should be: fails even as root
    path = file_paths(blocker / "otel")["traces"]
    memory = InMemorySpanExporter()
    emit_two_spans(memory)
    spans = memory.get_finished_spans()
    exporter = JsonFileSpanExporter(RotatingJsonLinesWriter(path))

    with caplog.at_level(logging.DEBUG, logger="hermes_otel"):
        results = [exporter.export(spans) for _ in range(3)]

    assert results == [SpanExportResult.FAILURE] * 3
    records = [r for r in caplog.records if r.name == "hermes_otel"]
    assert [r.levelno for r in records] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert str(path) in records[0].getMessage()
    assert "Not a directory" in records[0].getMessage()


def test_log_and_metric_exporters_report_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    paths = file_paths(blocker)

    captured = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(captured))
    provider.get_logger("t").emit(body="x")
    log_exporter = JsonFileLogExporter(RotatingJsonLinesWriter(paths["logs"]))
    assert log_exporter.export(captured.get_finished_logs()) is LogRecordExportResult.FAILURE
    provider.shutdown()

    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter_provider.get_meter("t").create_counter("c").add(1)
    metric_exporter = JsonFileMetricExporter(RotatingJsonLinesWriter(paths["metrics"]))
    assert metric_exporter.export(reader.get_metrics_data()) is MetricExportResult.FAILURE
    meter_provider.shutdown()


def test_exports_after_shutdown_fail(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    emit_two_spans(memory)
    exporter = JsonFileSpanExporter(RotatingJsonLinesWriter(tmp_path / "t.jsonl"))
    exporter.shutdown()
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
    assert exporter.force_flush() is True


def test_log_export_result_type(tmp_path: Path) -> None:
    exporter = JsonFileLogExporter(RotatingJsonLinesWriter(tmp_path / "logs.jsonl"))
    assert exporter.export([]) is LogRecordExportResult.SUCCESS
