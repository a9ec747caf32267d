"""Decoding of OTLP/JSON span lines into flat dicts, for tests that read what the file exporters wrote."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

# Accept enum names too, for files written by producers that do not use
# integer enums.
_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

# What decode_spans_json raises on a well-formed JSON line of the wrong shape
# (binascii.Error from bad base64 is a ValueError).
DECODE_ERRORS: tuple[type[Exception], ...] = (KeyError, TypeError, ValueError, AttributeError)




def decode_spans_json(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Flatten one ``ExportTraceServiceRequest`` object into simple span dicts.

    Raises one of :data:`DECODE_ERRORS` on malformed input so the caller can
    count and skip the line.
    """
    spans: list[dict[str, Any]] = []
    for resource_spans in obj.get("resourceSpans", ()):
        resource = decode_attributes(resource_spans.get("resource", {}).get("attributes", ()))
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                spans.append(_decode_span(span, resource))
    return spans


def _decode_span(span: Mapping[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    status = span.get("status") or {}
    return {
        "trace_id": _hex_id(span["traceId"]),
        "span_id": _hex_id(span["spanId"]),
        "parent_span_id": _hex_id(span.get("parentSpanId", "")) or None,
        "name": str(span.get("name", "")),
        "kind": _enum(span.get("kind", 0), _SPAN_KINDS),
        "start_ns": int(span.get("startTimeUnixNano", 0)),
        "end_ns": int(span.get("endTimeUnixNano", 0)),
        "attributes": decode_attributes(span.get("attributes", ())),
        "events": [
            {
                "name": str(event.get("name", "")),
                "time_ns": int(event.get("timeUnixNano", 0)),
                "attributes": decode_attributes(event.get("attributes", ())),
            }
            for event in span.get("events", ())
        ],
        "status_code": _enum(status.get("code", 0), _STATUS_CODES),
        "status_message": str(status.get("message", "")),
        "resource": resource,
    }


def decode_attributes(key_values: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Decode an OTLP/JSON ``KeyValue`` list into a plain dict."""
    return {kv["key"]: decode_any_value(kv.get("value") or {}) for kv in key_values}


def decode_any_value(value: Mapping[str, Any]) -> Any:
    """Decode an OTLP/JSON ``AnyValue``; an empty one is ``None``."""
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])  # 64-bit ints arrive as decimal strings
    if "doubleValue" in value:
        return float(value["doubleValue"])  # also parses "NaN"/"Infinity"
    if "arrayValue" in value:
        return [decode_any_value(v) for v in value["arrayValue"].get("values", ())]
    if "kvlistValue" in value:
        return decode_attributes(value["kvlistValue"].get("values", ()))
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])  # bytes stay base64 in OTLP/JSON
    return None


def _hex_id(value: Any) -> str:
    text = str(value).lower()
    try:
        bytes.fromhex(text)
    except ValueError as exc:
        raise ValueError(f"not a hex id: {value!r}") from exc
    return text


def _enum(value: Any, names: Mapping[str, int]) -> int:
    return names[value] if isinstance(value, str) and value in names else int(value)
