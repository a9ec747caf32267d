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


def _draining(base: type, reader: str) -> type:
    """`base` (an in-memory exporter or reader) whose `reader` method drains the backlog first."""

    def __init__(self, backlog) -> None:
        base.__init__(self)
        self.backlog = backlog

    def read(self, *args, **kwargs):
        self.backlog.drain()
        return getattr(base, reader)(self, *args, **kwargs)

    return type(f"Draining{base.__name__}", (base,), {"__init__": __init__, reader: read})


DrainingSpans = _draining(InMemorySpanExporter, "get_finished_spans")
DrainingLogs = _draining(InMemoryLogRecordExporter, "get_finished_logs")
DrainingReader = _draining(InMemoryMetricReader, "get_metrics_data")
