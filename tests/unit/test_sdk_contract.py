"""The one SDK private attribute we read, pinned by a test that fails when the SDK changes it.

A metric exporter's preferred temporality and aggregation are constructor arguments with no public getter; the
SDK's own PeriodicExportingMetricReader reads them from `_preferred_temporality` / `_preferred_aggregation`. Our
wrappers (the export-health guard, the spool's outbox) must present the wrapped OTLP exporter's, or a
delta-temporality backend would get cumulative sums.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import Counter, Histogram
from opentelemetry.sdk.metrics.export import AggregationTemporality
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation

from hermes_otel.exporters.health import GuardedMetricExporter
from hermes_otel.exporters.spool.delivery import OutboxMetricExporter


def test_wrappers_present_the_wrapped_exporters_temporality_and_aggregation():
    aggregation = ExplicitBucketHistogramAggregation(boundaries=(1.0, 2.0))
    inner = OTLPMetricExporter(endpoint="http://127.0.0.1:9/v1/metrics",
                               preferred_temporality={Counter: AggregationTemporality.DELTA},
                               preferred_aggregation={Histogram: aggregation})
    try:
        assert inner._preferred_temporality[Counter] is AggregationTemporality.DELTA  # the SDK's side of it
        assert inner._preferred_aggregation[Histogram] is aggregation
        guarded = GuardedMetricExporter(inner, "http://127.0.0.1:9")
        outboxed = OutboxMetricExporter(None, guarded)  # type: ignore[arg-type]  # the outbox is not used here
        for wrapper in (guarded, outboxed):
            assert wrapper._preferred_temporality == inner._preferred_temporality
            assert wrapper._preferred_aggregation == inner._preferred_aggregation
    finally:
        inner.shutdown()
