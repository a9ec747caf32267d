"""A flush (session finalize) never waits for an endpoint known to be failing, even while the processor's worker
is trying it again (the SDK's flush takes the lock that export holds)."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from hermes_otel.exporters.health import OurBatchSpanProcessor, health

ENDPOINT = "http://127.0.0.1:9/v1/traces"


class Stuck(SpanExporter):
    """An OTLP exporter whose export hangs until released (a retry against a dead collector)."""

    endpoint = ENDPOINT

    def __init__(self) -> None:
        self.exporting = threading.Event()
        self.release = threading.Event()

    def export(self, spans):
        self.exporting.set()
        self.release.wait(10)
        return SpanExportResult.FAILURE


def test_a_flush_leaves_out_a_failing_endpoint_whose_worker_is_exporting():
    exporter = Stuck()
    processor = OurBatchSpanProcessor(exporter, max_queue_size=2048, schedule_delay_millis=1)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    health.failure("traces", ENDPOINT, "connection refused")
    try:
        provider.get_tracer("t").start_span("s").end()
        assert exporter.exporting.wait(5)  # the worker holds the export lock now
        flushed = processor.force_flush(30_000)
        assert (flushed, exporter.release.is_set()) == (False, False)  # returned while the export still hung
    finally:
        exporter.release.set()
        health.success(ENDPOINT)
        provider.shutdown()


def test_a_healthy_endpoint_is_flushed_as_the_sdk_flushes():
    exporter = Stuck()
    exporter.release.set()
    processor = OurBatchSpanProcessor(exporter, max_queue_size=2048, schedule_delay_millis=60_000)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    provider.get_tracer("t").start_span("s").end()
    assert processor.force_flush(5_000) is True
    assert exporter.exporting.is_set()  # the flush exported the span
    provider.shutdown()
