"""The start-up floor: what any Hermes plugin built on the OpenTelemetry SDK pays, whatever it does.

`register` builds what our plugin builds for the same configuration, straight from the SDK and nothing of ours:
a resource, the three providers with their batch processors and periodic metric reader, and the SDK's exporters
(OTLP/HTTP with an endpoint; without one the SDK's console exporters, writing to a file under $HERMES_HOME), shut
down at exit by the SDK's own hooks. It emits nothing, so it is a lower bound. It leaves `sdk-floor.loaded` in
$HERMES_HOME, so the bench knows it ran.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def register(ctx: Any) -> None:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    home = Path(os.environ["HERMES_HOME"])
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        spans, metrics, logs = OTLPSpanExporter(), OTLPMetricExporter(), OTLPLogExporter()
    else:
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        out = (home / "sdk-floor.jsonl").open("a", encoding="utf-8")
        spans, metrics, logs = (ConsoleSpanExporter(out=out), ConsoleMetricExporter(out=out),
                                ConsoleLogRecordExporter(out=out))
    resource = Resource.create({"service.name": "hermes-agent"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(metrics)])
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(logs))
    (home / "sdk-floor.loaded").touch()
