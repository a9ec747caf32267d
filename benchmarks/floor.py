"""The floor: the telemetry one call makes, emitted straight through the SDK on the calling thread.

`blueprint` records what the plugin hands the SDK for one call: its spans (with their parents), log
records (with the span they belong to and a timestamp) and metric points (with their context, which
exemplars read). `floor_fn` replays exactly that through the same providers, with everything
precomputed: what an application using the SDK directly would pay for the same telemetry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags


class Capture(SpanProcessor):
    """Keeps the spans (and, through `logs`, the log records) it sees while `on`: the floor's blueprint."""

    def __init__(self) -> None:
        self.on = False
        self.spans: list = []
        capture = self

        class Logs(LogRecordProcessor):
            records: list = []

            def on_emit(self, log_data) -> None:
                if capture.on:
                    self.records.append(getattr(log_data, "log_record", log_data))

            emit = on_emit

            def shutdown(self) -> None:
                pass

            def force_flush(self, timeout_millis: int = 30000) -> bool:
                return True

        self.logs = Logs()

    def on_end(self, span) -> None:
        if self.on:
            self.spans.append(span)


def _in(span_context: SpanContext | None) -> Any:
    """A context whose current span is `span_context` (None for none)."""
    if span_context is None or not span_context.is_valid:
        return None
    return trace.set_span_in_context(NonRecordingSpan(span_context))


def captured(plugin: Any, fn: Callable[[int], Any], drain: Callable[[], Any]) -> tuple[list, list]:
    """The spans and log records the SDK receives for one call of `fn` (the records thread's work included)."""
    capture = plugin.capture
    drain()
    capture.on = True
    try:
        fn(10**6)
        drain()
    finally:
        capture.on = False
    spans, records = list(capture.spans), list(capture.logs.records)
    capture.spans.clear()
    capture.logs.records.clear()
    return spans, records


def blueprint(plugin: Any, fn: Callable[[int], Any], drain: Callable[[], Any]) -> list[tuple]:
    """The spans, log records and metric points one call emits, as the SDK receives them."""
    ops: list[tuple] = []
    # Metric points are seen where every instrument of the provider hands them to the SDK (a private
    # attribute, fine for a benchmark), wherever they were recorded.
    consumer = plugin.telemetry.meter_provider._measurement_consumer
    consume = consumer.consume_measurement

    def seen(measurement: Any) -> None:
        instrument = measurement.instrument
        ops.append(("metric", getattr(instrument, "record", None) or instrument.add, measurement.value,
                    measurement.attributes, measurement.context))  # exemplars are telemetry too
        consume(measurement)

    consumer.consume_measurement = seen
    try:
        spans, records = captured(plugin, fn, drain)
    finally:
        del consumer.consume_measurement
    for span in spans:
        ops.append(("span", span.name, span.kind, dict(span.attributes),
                    [(e.name, dict(e.attributes)) for e in span.events], span.status, _in(span.parent)))
    for record in records:
        span_context = SpanContext(record.trace_id or 0, record.span_id or 0, False,
                                   TraceFlags(record.trace_flags or 0))
        ops.append(("log", record.event_name, dict(record.attributes or {}), record.body, _in(span_context),
                    record.severity_number, record.severity_text))
    return ops


def floor_fn(plugin: Any, ops: list[tuple]) -> Callable[[int], None]:
    tracer = plugin.telemetry.tracer_provider.get_tracer("floor")
    logger = plugin.telemetry.logger_provider.get_logger("floor")

    def emit(_: int) -> None:
        for op in ops:
            if op[0] == "span":
                span = tracer.start_span(op[1], context=op[6], kind=op[2], attributes=op[3])
                for name, attributes in op[4]:
                    span.add_event(name, attributes)
                if op[5].status_code is not StatusCode.UNSET:
                    span.set_status(op[5])
                span.end()
            elif op[0] == "metric":
                op[1](*op[2:])
            else:
                now = time.time_ns()  # when the hook fired: its timestamp and when it was observed
                logger.emit(timestamp=now, observed_timestamp=now, context=op[4], severity_number=op[5],
                            severity_text=op[6], event_name=op[1], attributes=op[2], body=op[3])

    return emit
