"""Run unit tests in both build modes: inline through the SDK, and deferred to the builder.

The deferred mode's exporters and readers drain the backlog before they are
read, so a test's expectations are the same in both modes: the exported data
must not depend on where it was built.
"""

from __future__ import annotations

from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.deferred import Backlog, DeferredMeter, DeferredTracer, Inline

MODES = ("inline", "deferred")


def backlog_for(mode: str) -> Backlog | Inline:
    # The builder never wakes on its own here: what is built, and when, is up to the test (drain).
    return Backlog(interval_s=3600, wake_at=10**9) if mode == "deferred" else Inline()


def tracer_for(provider, backlog):
    tracer = provider.get_tracer("test")
    return DeferredTracer(tracer, backlog) if isinstance(backlog, Backlog) else tracer


def meter_for(provider, backlog):
    meter = provider.get_meter("test")
    return DeferredMeter(meter, backlog) if isinstance(backlog, Backlog) else meter


class DrainingSpans(InMemorySpanExporter):
    def __init__(self, backlog) -> None:
        super().__init__()
        self.backlog = backlog

    def get_finished_spans(self):
        self.backlog.drain()
        return super().get_finished_spans()


class DrainingLogs(InMemoryLogRecordExporter):
    def __init__(self, backlog) -> None:
        super().__init__()
        self.backlog = backlog

    def get_finished_logs(self):
        self.backlog.drain()
        return super().get_finished_logs()


class DrainingReader(InMemoryMetricReader):
    def __init__(self, backlog) -> None:
        super().__init__()
        self.backlog = backlog

    def get_metrics_data(self):
        self.backlog.drain()
        return super().get_metrics_data()
