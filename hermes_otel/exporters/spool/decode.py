"""Spooled OTLP/JSON back into the SDK's own telemetry objects (ReadableSpan, ReadableLogRecord, MetricsData, all
public constructors), so a re-send goes through an SDK exporter made as the live one is: one encoding, the same
headers, TLS and compression.

:func:`pieces` yields batches of at most :data:`PIECE_ITEMS` items (a request of the file is never split), each with
its item count and how many requests (lines) could not be decoded and were skipped: one bad line (a non-hex id, a
wrong type) costs that line, never the batch. Decoded item by item, pausing for the GIL every few items when
`paced`, so a large backlog never holds the GIL for long.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.metrics import Exemplar
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Buckets,
    ExponentialHistogram,
    ExponentialHistogramDataPoint,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace import set_span_in_context as _in_context
from opentelemetry.trace.span import TraceState

from ...local.decode import as_dict as _dict
from ...local.decode import as_list as _list

PIECE = 16  # items decoded between two GIL pauses
PIECE_ITEMS = 512  # items per re-sent batch at most (the SDK batch processor's default max_export_batch_size)
GIL_PAUSE_S = 0.0002  # a blocking sleep lets a waiting thread take the GIL (sleep(0) takes it straight back)
# OTLP/JSON field names at each level of a request: resource list, scope list, items.
LEVELS = {"traces": ("resourceSpans", "scopeSpans", "spans"), "logs": ("resourceLogs", "scopeLogs", "logRecords"),
          "metrics": ("resourceMetrics", "scopeMetrics", "metrics")}


def pieces(signal: str, requests: Iterable[Mapping[str, Any]], *, paced: bool = True,
           limit: int | None = PIECE_ITEMS) -> Iterator[tuple[Any, int, int]]:
    """(batch, items, bad lines) per piece; a batch is None when not one of its requests could be decoded; at
    least one piece is yielded. A batch is what the signal's SDK exporter takes: a list of spans or log records,
    or a MetricsData."""
    batch: list[Any] = []
    items = bad = converted = yielded = 0
    for request in requests:
        try:
            decoded, count = _decode(signal, request, items, paced)
        except Exception:  # noqa: BLE001 - any shape we cannot take back: that line only
            bad += 1
            continue
        batch += decoded
        items += count
        converted += 1
        if limit is not None and items >= limit:
            yield _batch(signal, batch), items, bad
            batch, items, bad, converted, yielded = [], 0, 0, 0, yielded + 1
    if converted or bad or not yielded:
        yield (_batch(signal, batch) if converted else None), items, bad


def _batch(signal: str, decoded: list[Any]) -> Any:
    return MetricsData(resource_metrics=decoded) if signal == "metrics" else decoded


def _decode(signal: str, request: Mapping[str, Any], done: int, paced: bool) -> tuple[list[Any], int]:
    level1, level2, level3 = LEVELS[signal]
    out: list[Any] = []
    items = 0
    for rs in _list(request.get(level1)):
        resource = Resource(_attributes(_dict(rs.get("resource")).get("attributes")), _str(rs.get("schemaUrl")))
        scopes: list[ScopeMetrics] = []
        for ss in _list(rs.get(level2)):
            s = _dict(ss.get("scope"))
            scope = InstrumentationScope(_str(s.get("name")) or "", _str(s.get("version")), _str(ss.get("schemaUrl")),
                                         _attributes(s.get("attributes")) or None)
            members: list[Any] = []
            for member in _list(ss.get(level3)):
                if signal == "metrics":
                    members.append(_metric(_dict(member)))
                    items += len(members[-1].data.data_points)
                else:
                    members.append(_span(_dict(member), resource, scope) if signal == "traces"
                                   else ReadableLogRecord(_log_record(_dict(member)), resource, scope))
                    items += 1
                if paced and (done + items) % PIECE == 0:
                    time.sleep(GIL_PAUSE_S)
            if signal == "metrics":
                scopes.append(ScopeMetrics(scope, members, _str(ss.get("schemaUrl")) or ""))
            else:
                out += members
        if signal == "metrics":
            out.append(ResourceMetrics(resource, scopes, _str(rs.get("schemaUrl")) or ""))
    return out, items


# -- fields: each read strictly, as protobuf's JSON parser would, so a value the SDK exporter cannot encode costs
# -- its line here, not the whole batch at every re-send --------------------------------------------------------


def _str(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v or None
    raise TypeError("not a string")


def _int(v: Any, bits: int = 64, signed: bool = False) -> int:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, str, float)):
        raise TypeError("not an integer")
    number = int(v)
    if isinstance(v, float) and number != v:
        raise ValueError("not an integer")
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if not low <= number < high:
        raise ValueError("out of range")
    return number


def _float(v: Any) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError("not a number")
    return float(v)


def _value(v: Any) -> Any:
    v = _dict(v)
    if "stringValue" in v:
        return _str(v["stringValue"]) or ""
    if "boolValue" in v:
        if not isinstance(v["boolValue"], bool):
            raise TypeError("not a bool")
        return v["boolValue"]
    if "intValue" in v:
        return _int(v["intValue"], signed=True)
    if "doubleValue" in v:
        return _float(v["doubleValue"])
    if "arrayValue" in v:
        return tuple(_value(x) for x in _list(_dict(v["arrayValue"]).get("values")))
    if "kvlistValue" in v:
        return _attributes(_dict(v["kvlistValue"]).get("values"))
    if "bytesValue" in v:
        return base64.b64decode(_str(v["bytesValue"]) or "", validate=True)
    return None


def _attributes(key_values: Any, dropped: Any = 0) -> Any:
    """Attributes as given (no limits applied again), with the dropped count the file recorded."""
    values = {}
    for kv in _list(key_values):
        kv = _dict(kv)
        values[_str(kv.get("key")) or ""] = _value(kv.get("value"))
    count = _int(dropped, 32)
    if not count:
        return values
    bounded = BoundedAttributes(attributes=values, immutable=False)
    bounded.dropped = count
    return bounded


def _id(hex_id: Any, size: int) -> int:
    raw = bytes.fromhex(_str(hex_id) or "")
    if len(raw) not in (0, size):
        raise ValueError(f"an id of {len(raw)} bytes")
    return int.from_bytes(raw, "big")


def _context(trace_id: Any, span_id: Any, flags: int = 0, state: Any = None) -> SpanContext:
    state = _str(state)
    return SpanContext(_id(trace_id, 16), _id(span_id, 8), is_remote=bool(flags & 0x200), trace_flags=TraceFlags(
        flags & 0xFF), trace_state=TraceState.from_header([state]) if state else None)


# -- the three signals ---------------------------------------------------------------------------------------------


def _span(s: Mapping[str, Any], resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    flags = _int(s.get("flags"), 32)
    parent = _str(s.get("parentSpanId"))
    status = _dict(s.get("status"))
    return ReadableSpan(
        name=_str(s.get("name")) or "",
        context=_context(s.get("traceId"), s.get("spanId"), flags & 0xFF, s.get("traceState")),
        parent=_context(s.get("traceId"), parent, flags & 0x2FF) if parent else None,
        resource=resource,
        attributes=_attributes(s.get("attributes"), s.get("droppedAttributesCount")),
        events=[Event(_str(e.get("name")) or "", _attributes(e.get("attributes"), e.get("droppedAttributesCount")),
                      _int(e.get("timeUnixNano"))) for e in map(_dict, _list(s.get("events")))],
        links=[Link(_context(link.get("traceId"), link.get("spanId"), _int(link.get("flags"), 32),
                             link.get("traceState")),
                    _attributes(link.get("attributes"), link.get("droppedAttributesCount")))
               for link in map(_dict, _list(s.get("links")))],
        kind=SpanKind(max(_int(s.get("kind"), 32), 1) - 1),
        status=Status(StatusCode(_int(status.get("code"), 32)), _str(status.get("message"))),
        start_time=_int(s.get("startTimeUnixNano")),
        end_time=_int(s.get("endTimeUnixNano")),
        instrumentation_scope=scope,
    )


def _log_record(r: Mapping[str, Any]) -> LogRecord:
    trace_id, span_id = _str(r.get("traceId")), _str(r.get("spanId"))
    context = None
    if trace_id or span_id:
        context = _in_context(NonRecordingSpan(_context(trace_id, span_id, _int(r.get("flags"), 32))))
    severity = _int(r.get("severityNumber"), 32)
    return LogRecord(
        timestamp=_int(r.get("timeUnixNano")) or None,
        observed_timestamp=_int(r.get("observedTimeUnixNano")) or None,
        context=context,
        severity_text=_str(r.get("severityText")),
        severity_number=SeverityNumber(severity) if severity else None,
        body=_value(r["body"]) if "body" in r else None,
        attributes=_attributes(r.get("attributes"), r.get("droppedAttributesCount")),
        event_name=_str(r.get("eventName")),
    )


def _exemplars(point: Mapping[str, Any]) -> list[Exemplar]:
    return [Exemplar(_attributes(e.get("filteredAttributes")) or None,
                     _float(e["asDouble"]) if "asDouble" in e else _int(e.get("asInt"), signed=True),
                     _int(e.get("timeUnixNano")), _id(e.get("spanId"), 8) or None, _id(e.get("traceId"), 16) or None)
            for e in map(_dict, _list(point.get("exemplars")))]


def _common(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"attributes": _attributes(p.get("attributes")), "start_time_unix_nano": _int(p.get("startTimeUnixNano")),
            "time_unix_nano": _int(p.get("timeUnixNano")), "exemplars": _exemplars(p)}


def _number(p: Mapping[str, Any]) -> NumberDataPoint:
    value = _float(p["asDouble"]) if "asDouble" in p else _int(p.get("asInt"), signed=True)
    return NumberDataPoint(value=value, **_common(p))


def _histogram(p: Mapping[str, Any]) -> HistogramDataPoint:
    return HistogramDataPoint(count=_int(p.get("count")), sum=_float(p.get("sum")),
                              bucket_counts=[_int(c) for c in _list(p.get("bucketCounts"))],
                              explicit_bounds=[_float(b) for b in _list(p.get("explicitBounds"))],
                              min=_float(p.get("min")), max=_float(p.get("max")), **_common(p))


def _buckets(b: Any) -> Buckets:
    b = _dict(b)
    return Buckets(_int(b.get("offset"), 32, signed=True), [_int(c) for c in _list(b.get("bucketCounts"))])


def _exponential(p: Mapping[str, Any]) -> ExponentialHistogramDataPoint:
    return ExponentialHistogramDataPoint(
        count=_int(p.get("count")), sum=_float(p.get("sum")), scale=_int(p.get("scale"), 32, signed=True),
        zero_count=_int(p.get("zeroCount")), positive=_buckets(p.get("positive")),
        negative=_buckets(p.get("negative")), flags=_int(p.get("flags"), 32), min=_float(p.get("min")),
        max=_float(p.get("max")), **_common(p))


def _metric(m: Mapping[str, Any]) -> Metric:
    def points(kind: str, make: Any) -> tuple[list[Any], AggregationTemporality]:
        body = _dict(m[kind])
        return ([make(_dict(p)) for p in _list(body.get("dataPoints"))],
                AggregationTemporality(_int(body.get("aggregationTemporality"), 32)))

    if "sum" in m:
        monotonic = _dict(m["sum"]).get("isMonotonic") or False
        if not isinstance(monotonic, bool):
            raise TypeError("not a bool")
        data: Any = Sum(*points("sum", _number), monotonic)
    elif "gauge" in m:
        data = Gauge(points("gauge", _number)[0])
    elif "histogram" in m:
        data = Histogram(*points("histogram", _histogram))
    elif "exponentialHistogram" in m:
        data = ExponentialHistogram(*points("exponentialHistogram", _exponential))
    else:
        raise ValueError("a metric without data")
    return Metric(_str(m.get("name")) or "", _str(m.get("description")), _str(m.get("unit")), data)
