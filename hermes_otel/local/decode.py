"""One OTLP/JSON trace export request (a line of the files) decoded strictly and with bounds into plain span dicts.

Whatever comes from the files is untrusted: anything that is not a valid request raises, and the reader skips and
counts that line."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["Span", "as_dict", "as_list", "attributes", "decode_line", "decode_request"]

Span = dict[str, Any]
HEX_ID = re.compile(r"[0-9a-fA-F]+")
STATUS_ERROR = 2


_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
          "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_STATUSES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_MAX_DEPTH = 8  # of attribute values (arrays, kvlists)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def as_list(value: Any) -> list:
    """An OTLP/JSON array (absent: empty), or raise (as_dict: an object); the spool's decoder shares both."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("expected an array")
    return value


def as_dict(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected an object")
    return value


def _hex(value: Any, size: int) -> str:
    if not isinstance(value, str) or len(value) != size or not HEX_ID.fullmatch(value):
        raise ValueError("expected a hex id")
    return value.lower()


def _nanos(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("expected a time in nanoseconds")
    number = int(value)
    if not 0 <= number < 2**64:
        raise ValueError("time out of range")
    return number


def _enum(value: Any, names: Mapping[str, int]) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("expected an enum")


def _value(value: Any, depth: int = 0) -> Any:
    value = as_dict(value)
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if depth >= _MAX_DEPTH:
        return "…"
    if "arrayValue" in value:
        return [_value(v, depth + 1) for v in as_list(as_dict(value["arrayValue"]).get("values"))]
    if "kvlistValue" in value:
        return _attributes(as_dict(value["kvlistValue"]).get("values"), depth + 1)
    if "bytesValue" in value:
        return f"<{len(str(value['bytesValue'])) * 3 // 4} bytes>"
    return None


def _attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    out = {}
    for item in as_list(items):
        item = as_dict(item)
        out[str(item["key"])] = _value(item.get("value"), depth)
    return out


def _span(span: Any, resource: dict[str, Any]) -> Span:
    span = as_dict(span)
    parent = span.get("parentSpanId") or None
    status = as_dict(span.get("status"))
    return {
        "trace_id": _hex(span.get("traceId"), 32),
        "span_id": _hex(span.get("spanId"), 16),
        "parent_span_id": _hex(parent, 16) if parent is not None else None,
        "name": str(span.get("name", "")),
        "kind": _enum(span.get("kind", 0), _KINDS),
        "start_ns": _nanos(span.get("startTimeUnixNano", 0)),
        "end_ns": _nanos(span.get("endTimeUnixNano", 0)),
        "attributes": _attributes(span.get("attributes")),
        "events": [
            {"name": str(as_dict(e).get("name", "")), "time_ns": _nanos(as_dict(e).get("timeUnixNano", 0)),
             "attributes": _attributes(as_dict(e).get("attributes"))}
            for e in as_list(span.get("events"))
        ],
        "status_code": _enum(status.get("code", 0), _STATUSES),
        "status_message": str(status.get("message", "")),
        "resource": resource,
    }


def decode_line(line: bytes | str) -> list[Span]:
    """The spans of one `ExportTraceServiceRequest` line; raises on anything else (the caller counts it)."""
    return decode_request(json.loads(line, parse_constant=_no_constant))


def decode_request(request: Any) -> list[Span]:
    """The spans of a decoded OTLP/JSON traces document (`{"resourceSpans": [...]}`); raises on anything else."""
    request = as_dict(request)
    spans: list[Span] = []
    for resource_spans in as_list(request.get("resourceSpans")):
        resource_spans = as_dict(resource_spans)
        resource = _attributes(as_dict(resource_spans.get("resource")).get("attributes"))
        for scope_spans in as_list(resource_spans.get("scopeSpans")):
            spans.extend(_span(s, resource) for s in as_list(as_dict(scope_spans).get("spans")))
    return spans


attributes = _attributes  # the public name (an OTLP/JSON attribute list -> a dict)
