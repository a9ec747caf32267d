"""Run unit tests in both ways observer records are emitted: inline, and on the records thread.

The draining exporters drain the emitter before they are read, so a test's expectations are the
same in both: the exported data must not depend on where records were emitted.
"""

from __future__ import annotations

from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.emitter import Emitter, Inline

MODES = ("inline", "background")


def emitter_for(mode: str) -> Emitter | Inline:
    return Emitter() if mode == "background" else Inline()


def _draining(base: type, reader: str) -> type:
    """`base` (an in-memory exporter or reader) whose `reader` method drains the emitter first."""

    def __init__(self, emitter) -> None:
        base.__init__(self)
        self.emitter = emitter

    def read(self, *args, **kwargs):
        self.emitter.drain()
        return getattr(base, reader)(self, *args, **kwargs)

    return type(f"Draining{base.__name__}", (base,), {"__init__": __init__, reader: read})


DrainingSpans = _draining(InMemorySpanExporter, "get_finished_spans")
DrainingLogs = _draining(InMemoryLogRecordExporter, "get_finished_logs")
DrainingReader = _draining(InMemoryMetricReader, "get_metrics_data")
