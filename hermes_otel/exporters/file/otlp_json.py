"""OTLP/JSON encoding of SDK telemetry, for the files and the spool.

The output is an ``Export*ServiceRequest`` in the OTLP/JSON mapping (ProtoJSON: lowerCamelCase keys, integer
enums, 64-bit integers as decimal strings, default values left out, ids as lowercase hex), what the Collector's
``otlp_json_file`` receiver reads. It is encoded directly from the SDK objects, 3-4 times faster than the official
encoders (docs/performance.md), which it follows field for field, rejected values included: an attribute that
cannot be encoded is logged and dropped, anything else fails the batch with the same exception.
tests/unit/test_otlp_json_fast.py and test_otlp_json_conformance.py hold the output to theirs, key order included.
"""

from __future__ import annotations

import base64
import logging
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.metrics.export import MetricsData

__all__ = ["encode_logs_json", "encode_metrics_json", "encode_spans_json"]

# The official encoder reports attributes it cannot encode on its own logger;
# the direct encoders use the same one so logging configuration applies alike.
_encoder_logger = logging.getLogger("opentelemetry.exporter.otlp.proto.common._internal")


def encode_spans_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Encode spans as one OTLP/JSON ``ExportTraceServiceRequest``."""
    return _request(_group(spans, _encode_span), "resourceSpans", "scopeSpans", "spans")


def encode_logs_json(batch: Sequence[ReadableLogRecord]) -> dict[str, Any]:
    """Encode log records as one OTLP/JSON ``ExportLogsServiceRequest``."""
    return _request(_group(batch, _encode_log_record), "resourceLogs", "scopeLogs", "logRecords")


def encode_metrics_json(data: MetricsData) -> dict[str, Any]:
    """Encode metrics as one OTLP/JSON ``ExportMetricsServiceRequest``, grouped by resource, then scope, as the
    official encoder groups them (a later equal one replaces an earlier one)."""
    resources = {rm.resource: {sm.scope: [_encode_metric(m) for m in sm.metrics] for sm in rm.scope_metrics}
                 for rm in data.resource_metrics}
    return _request(resources, "resourceMetrics", "scopeMetrics", "metrics")


def _encode_metric(metric: Any) -> dict[str, Any]:
    """One metric in field-number order: name, description, unit, then gauge (5), sum (7), histogram (9) or
    exponentialHistogram (10); the data message only when it has points, as the official encoder sets it only
    while adding one."""
    out: dict[str, Any] = {}
    _put_str(out, "name", metric.name)
    _put_str(out, "description", metric.description)
    _put_str(out, "unit", metric.unit)
    data = metric.data
    kind = type(data).__name__
    points = data.data_points
    if not points:
        return out
    if kind not in ("Gauge", "Sum", "Histogram", "ExponentialHistogram"):
        _encoder_logger.warning("unsupported data type %s", kind)
        return out
    if kind in ("Gauge", "Sum"):
        body: dict[str, Any] = {"dataPoints": [_number_point(p, start=kind == "Sum") for p in points]}
    else:
        body = {"dataPoints": [_histogram_point(p, kind == "ExponentialHistogram") for p in points]}
    if kind != "Gauge" and int(data.aggregation_temporality):
        body["aggregationTemporality"] = int(data.aggregation_temporality)
    if kind == "Sum" and data.is_monotonic:
        body["isMonotonic"] = True
    out[kind[0].lower() + kind[1:]] = body  # gauge, sum, histogram, exponentialHistogram
    return out


def _number_point(point: Any, *, start: bool) -> dict[str, Any]:
    """NumberDataPoint: start (2, not for gauges), time (3), asDouble (4), exemplars (5), asInt (6), attributes (7)."""
    out: dict[str, Any] = {}
    if start:
        _put_u64(out, "startTimeUnixNano", point.start_time_unix_nano)
    _put_u64(out, "timeUnixNano", point.time_unix_nano)
    value = point.value
    if not isinstance(value, int):
        out["asDouble"] = _double(value)
    _put_exemplars(out, point.exemplars)
    if isinstance(value, int):
        out["asInt"] = str(_check_int64(value))
    _put_attributes(out, point.attributes)
    return out


def _histogram_point(point: Any, exponential: bool) -> dict[str, Any]:
    """HistogramDataPoint: start (2), time (3), count (4), sum (5), bucketCounts (6), explicitBounds (7),
    exemplars (8), attributes (9), min (11), max (12). ExponentialHistogramDataPoint: attributes (1), start, time,
    count, sum, scale (6), zeroCount (7), positive (8) and negative (9) when they have counts, flags (10),
    exemplars (11), min (12), max (13). Sum, min and max are optional, so set means present."""
    out: dict[str, Any] = {}
    if exponential:
        _put_attributes(out, point.attributes)
    _put_u64(out, "startTimeUnixNano", point.start_time_unix_nano)
    _put_u64(out, "timeUnixNano", point.time_unix_nano)
    _put_u64(out, "count", point.count)
    if point.sum is not None:
        out["sum"] = _double(point.sum)
    if exponential:
        if point.scale:
            out["scale"] = _check(point.scale, _INT32_LIMIT, _INT32_MIN)
        _put_u64(out, "zeroCount", point.zero_count)
        for key, buckets in (("positive", point.positive), ("negative", point.negative)):
            if buckets.bucket_counts:
                out[key] = {"offset": _check(buckets.offset, _INT32_LIMIT, _INT32_MIN)} if buckets.offset else {}
                out[key]["bucketCounts"] = _u64_list(buckets.bucket_counts)
        _put_u32(out, "flags", point.flags)
    else:
        if point.bucket_counts:
            out["bucketCounts"] = _u64_list(point.bucket_counts)
        if point.explicit_bounds:
            out["explicitBounds"] = [_double(b) for b in point.explicit_bounds]
    _put_exemplars(out, point.exemplars)
    if not exponential:
        _put_attributes(out, point.attributes)
    if point.min is not None:
        out["min"] = _double(point.min)
    if point.max is not None:
        out["max"] = _double(point.max)
    return out


def _put_exemplars(point_json: dict[str, Any], exemplars: Sequence[Any]) -> None:
    """Exemplar: time (2), asDouble (3), spanId (4), traceId (5), asInt (6), filteredAttributes (7)."""
    out = []
    for exemplar in exemplars:
        value = exemplar.value
        if not isinstance(value, (int, float)):
            raise ValueError("Exemplar value must be an int or float")
        entry: dict[str, Any] = {}
        _put_u64(entry, "timeUnixNano", exemplar.time_unix_nano)
        if isinstance(value, float):
            entry["asDouble"] = _double(value)
        if exemplar.span_id is not None and exemplar.trace_id is not None:
            entry["spanId"] = exemplar.span_id.to_bytes(8, "big").hex()
            entry["traceId"] = exemplar.trace_id.to_bytes(16, "big").hex()
        if not isinstance(value, float):
            entry["asInt"] = str(_check_int64(value))
        _put_attributes(entry, exemplar.filtered_attributes, "filteredAttributes")
        out.append(entry)
    if out:
        point_json["exemplars"] = out


def _double(value: Any) -> Any:
    value = float(value)
    return value if value - value == 0.0 else _nonfinite(value)


# --- direct encoders ---------------------------------------------------------
#
# Each dict is built in field-number order, the order MessageToDict emits, so
# the JSON text matches byte for byte and not only as parsed objects. A field
# is left out exactly when protobuf would not mark it present: scalars at their
# zero value, empty repeated fields, sub-messages never assigned (None). The
# AnyValue oneof members and explicitly assigned sub-messages are kept even
# when empty or zero ({"intValue": "0"}, "body": {}, "status": {}).

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32_MIN, _INT32_LIMIT = -(1 << 31), 1 << 31
_UINT32_LIMIT = 1 << 32
_UINT64_LIMIT = 1 << 64

# Span.flags: the SDK always knows whether the parent is remote.
_FLAGS_HAS_IS_REMOTE = 0x100
_FLAGS_IS_REMOTE = 0x200

_SPAN_KIND_NUMBERS = {kind: kind.value + 1 for kind in SpanKind}  # INTERNAL (0 in the SDK) is 1 in OTLP


Groups = dict[Any, dict[Any, list[dict[str, Any]]]]  # resource -> scope -> encoded items


def _group(items: Sequence[Any], encode: Callable[[Any], dict[str, Any]]) -> Groups:
    """Encode items in order, grouped by (equal) resource, then scope, in first-seen order, as the official
    encoders do (a bad batch fails on the same item). Resource hashes by JSON-dumping its attributes, so the
    lookups are cached per object: nearly every item of a batch shares the same two or three."""
    resources: Groups = {}  # by equality
    by_identity: dict[tuple[int, int], list[Any]] = {}
    keep_alive: list[Any] = []  # ids are only unique while the objects live
    for item in items:
        resource = item.resource
        scope = item.instrumentation_scope or None
        key = (id(resource), id(scope))
        bucket = by_identity.get(key)
        if bucket is None:
            bucket = resources.setdefault(resource, {}).setdefault(scope, [])
            by_identity[key] = bucket
            keep_alive.append((resource, scope))
        bucket.append(encode(item))
    return resources


def _request(resources: Groups, resources_key: str, scopes_key: str, items_key: str) -> dict[str, Any]:
    if not resources:
        return {}
    out = []
    for resource, scopes in resources.items():
        scope_entries = []
        for scope, items in scopes.items():
            scope_json: dict[str, Any] = {}
            scope_entry: dict[str, Any] = {"scope": scope_json}
            if items:  # (a metrics scope may have none; a scope of spans or log records always has some)
                scope_entry[items_key] = items
            if scope is not None:
                _put_str(scope_json, "name", scope.name)
                _put_str(scope_json, "version", scope.version)
                _put_attributes(scope_json, scope.attributes)
                _put_str(scope_entry, "schemaUrl", scope.schema_url)
            scope_entries.append(scope_entry)
        resource_json: dict[str, Any] = {}
        _put_attributes(resource_json, resource.attributes)
        entry: dict[str, Any] = {"resource": resource_json}
        if scope_entries:
            entry[scopes_key] = scope_entries
        _put_str(entry, "schemaUrl", resource.schema_url)
        out.append(entry)
    return {resources_key: out}


def _encode_span(span: ReadableSpan) -> dict[str, Any]:
    # The sub-messages come first and the scalar fields are checked after, in
    # the official encoder's order, so a span with several bad values fails
    # with the same error. The dict is still filled in field-number order.
    context = span.context
    parent = span.parent
    trace_id = context.trace_id.to_bytes(16, "big").hex()
    span_id = context.span_id.to_bytes(8, "big").hex()
    trace_state = context.trace_state
    if trace_state is not None:
        trace_state = ",".join([f"{key}={value}" for key, value in trace_state.items()])
    parent_id = parent.span_id.to_bytes(8, "big").hex() if parent else None
    name = span.name
    kind = _SPAN_KIND_NUMBERS[span.kind]
    attributes = _attribute_list(span.attributes)
    events = [_encode_event(event) for event in span.events]
    links = [_encode_link(link) for link in span.links]
    status = span.status
    status_json: dict[str, Any] | None = None
    if status is not None:
        code = status.status_code.value
        status_json = {}
        _put_str(status_json, "message", status.description)
        if code:
            status_json["code"] = code

    out: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if trace_state:
        _put_str(out, "traceState", trace_state)
    if parent_id is not None:
        out["parentSpanId"] = parent_id
    _put_str(out, "name", name)
    out["kind"] = kind
    _put_u64(out, "startTimeUnixNano", span.start_time)
    _put_u64(out, "endTimeUnixNano", span.end_time)
    if attributes:
        out["attributes"] = attributes
    _put_u32(out, "droppedAttributesCount", span.dropped_attributes)
    if events:
        out["events"] = events
    _put_u32(out, "droppedEventsCount", span.dropped_events)  # even without events: max_events=0 drops them all
    if links:
        out["links"] = links
    _put_u32(out, "droppedLinksCount", span.dropped_links)
    if status_json is not None:
        out["status"] = status_json
    out["flags"] = _FLAGS_HAS_IS_REMOTE | _FLAGS_IS_REMOTE if parent and parent.is_remote else _FLAGS_HAS_IS_REMOTE
    return out


def _encode_event(event: Any) -> dict[str, Any]:
    attributes = _attribute_list(event.attributes)
    name = _proto_str(event.name)  # checked before the time, as protobuf does
    out: dict[str, Any] = {}
    _put_u64(out, "timeUnixNano", event.timestamp)
    if name:
        out["name"] = name
    if attributes:
        out["attributes"] = attributes
    _put_u32(out, "droppedAttributesCount", event.dropped_attributes)
    return out


def _encode_link(link: Any) -> dict[str, Any]:
    context = link.context
    out: dict[str, Any] = {"traceId": context.trace_id.to_bytes(16, "big").hex(),
                           "spanId": context.span_id.to_bytes(8, "big").hex()}
    _put_attributes(out, link.attributes)
    _put_u32(out, "droppedAttributesCount", link.dropped_attributes)
    out["flags"] = _FLAGS_HAS_IS_REMOTE | _FLAGS_IS_REMOTE if context.is_remote else _FLAGS_HAS_IS_REMOTE
    return out


def _encode_log_record(readable: ReadableLogRecord) -> dict[str, Any]:
    # As in _encode_span: values computed, then checked, in the official
    # encoder's order; the dict filled in field-number order.
    record = readable.log_record
    span_id = None if record.span_id == 0 else record.span_id.to_bytes(8, "big").hex()
    trace_id = None if record.trace_id == 0 else record.trace_id.to_bytes(16, "big").hex()
    flags = int(record.trace_flags)
    body = _any_value(record.body)
    attributes = _attribute_list(record.attributes)
    dropped = readable.dropped_attributes
    severity_number = getattr(record.severity_number, "value", None)

    time = _proto_u64(record.timestamp)
    observed_time = _proto_u64(record.observed_timestamp)
    flags = _check(flags, _UINT32_LIMIT) if flags else 0
    severity_text = _proto_str(record.severity_text)
    dropped = _check(dropped, _UINT32_LIMIT) if dropped else 0
    severity_number = _check(severity_number, _INT32_LIMIT, _INT32_MIN) if severity_number else 0
    event_name = _proto_str(record.event_name)

    out: dict[str, Any] = {}
    if time:
        out["timeUnixNano"] = str(time)
    if severity_number:
        out["severityNumber"] = severity_number
    if severity_text:
        out["severityText"] = severity_text
    out["body"] = body
    if attributes:
        out["attributes"] = attributes
    if dropped:
        out["droppedAttributesCount"] = dropped
    if flags:
        out["flags"] = flags
    if trace_id is not None:
        out["traceId"] = trace_id
    if span_id is not None:
        out["spanId"] = span_id
    if observed_time:
        out["observedTimeUnixNano"] = str(observed_time)
    if event_name:
        out["eventName"] = event_name
    return out


def _put_attributes(out: dict[str, Any], attributes: Mapping[Any, Any] | None, key: str = "attributes") -> None:
    key_values = _attribute_list(attributes)
    if key_values:
        out[key] = key_values


def _attribute_list(attributes: Mapping[Any, Any] | None) -> list[dict[str, Any]]:
    """KeyValues of ``attributes``, dropping (and logging) what protobuf would reject."""
    if not attributes:
        return []
    try:  # dict, mappingproxy and the SDK's BoundedAttributes copy into a plain dict in C: its items() are cheap,
        items = attributes.copy().items()  # type: ignore[attr-defined] # where a Mapping's items() call __iter__/__getitem__ in Python per key
    except (AttributeError, TypeError):
        items = attributes.items()
    key_values: list[dict[str, Any]] = []
    append = key_values.append
    for key, value in items:
        try:
            if type(key) is str and key and key.isascii():
                kind = type(value)  # the common cases of _any_value, inlined
                if kind is str and value.isascii():
                    append({"key": key, "value": {"stringValue": value}})
                elif kind is int and _INT64_MIN <= value <= _INT64_MAX:
                    append({"key": key, "value": {"intValue": str(value)}})
                else:
                    append({"key": key, "value": _any_value(value)})
            else:
                append(_key_value(key, _any_value(value)))
        except Exception as error:  # noqa: BLE001 - mirrors the official encoder
            _encoder_logger.exception("Failed to encode key %s: %s", key, error)
    return key_values


def _key_value(key: Any, value: dict[str, Any]) -> dict[str, Any]:
    """A KeyValue; the value is encoded first, as in the official encoder."""
    key = _proto_str(key)  # protobuf takes None as unset, like ""
    return {"key": key, "value": value} if key else {"value": value}


def _any_value(value: Any) -> dict[str, Any]:
    """The AnyValue of an attribute or body, or raise what protobuf would."""
    kind = type(value)
    if kind is str:
        if value.isascii() or _utf8(value):
            return {"stringValue": value}
    elif kind is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            return {"intValue": str(value)}
    elif kind is float:
        return {"doubleValue": value if value - value == 0.0 else _nonfinite(value)}
    elif kind is bool:
        return {"boolValue": value}
    elif kind is tuple or kind is list:
        return {"arrayValue": {"values": [_any_value(item) for item in value]} if value else {}}
    return _any_value_slow(value)


def _any_value_slow(value: Any) -> dict[str, Any]:
    """Subclasses, containers and errors, in the official encoder's type order."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": _as_proto_str(value)}
    if isinstance(value, int):
        return {"intValue": str(_check_int64(int(value)))}
    if isinstance(value, float):
        return {"doubleValue": _double(value)}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Sequence):
        items = [_any_value(item) for item in value]
        return {"arrayValue": {"values": items} if items else {}}
    if isinstance(value, Mapping):
        pairs = [_key_value(str(key), _any_value(item)) for key, item in value.items()]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    raise Exception(f"Invalid type {type(value)} of value {value}")  # noqa: TRY002 - same as the official encoder


def _nonfinite(value: float) -> str:
    if value != value:  # noqa: PLR0124 - NaN test
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _check_int64(value: int) -> int:
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    raise ValueError(f"Value out of range: {value}")


def _check(value: Any, limit: int, low: int = 0) -> int:
    """An integer field's value in [low, limit), or the error protobuf raises."""
    if type(value) is bool:
        raise TypeError(f"Expected an int, got a boolean: {value!r}")
    value = operator.index(value)  # TypeError for floats, like protobuf
    if low <= value < limit:
        return value
    raise ValueError(f"Value out of range: {value}")


def _utf8(text: str) -> bool:
    """Raise UnicodeEncodeError, as protobuf does, for text UTF-8 cannot hold."""
    text.encode("utf-8")
    return True


def _as_proto_str(value: Any) -> str:
    """What a protobuf string field stores for ``value``, or its error."""
    if type(value) is not str:
        if isinstance(value, str):
            value = str.__str__(value)
        elif isinstance(value, bytes):
            value = value.decode("utf-8")
        else:
            raise TypeError(f"bad argument type for a string field: {type(value).__name__}")
    if not value.isascii():
        _utf8(value)
    return value


def _proto_str(value: Any) -> str | None:
    """A string field's value, None when unset; raises what protobuf would."""
    return None if value is None else _as_proto_str(value)


def _put_str(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        value = _as_proto_str(value)
        if value:
            out[key] = value


def _proto_u64(value: Any) -> int:
    """A uint64 field's value, 0 when unset; raises what protobuf would."""
    if value is None:
        return 0
    if type(value) is int and 0 <= value < _UINT64_LIMIT:
        return value
    return _check(value, _UINT64_LIMIT)


def _put_u64(out: dict[str, Any], key: str, value: Any) -> None:
    value = _proto_u64(value)
    if value:
        out[key] = str(value)


def _u64_list(values: Sequence[Any]) -> list[str]:
    """A repeated uint64 field (bucket counts), the plain ints in range without a call each."""
    return [str(v) if type(v) is int and 0 <= v < _UINT64_LIMIT else str(_check(v, _UINT64_LIMIT)) for v in values]


def _put_u32(out: dict[str, Any], key: str, value: Any) -> None:
    if value:
        out[key] = _check(value, _UINT32_LIMIT)
