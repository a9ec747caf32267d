"""A real OTLP/HTTP receiver on loopback, for end-to-end tests.

The plugin's *real* OTLP/HTTP exporters post to this server, so tests assert
on what actually went over the wire (protobuf, optionally gzip/deflate
compressed) rather than on in-memory SDK objects.  Everything is decoded into
plain dataclasses with python-native attribute values.

Endpoints: ``POST /v1/traces``, ``/v1/logs``, ``/v1/metrics``; bodies may be
``application/x-protobuf`` or OTLP/JSON (``application/json``).
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = [
    "OTLPReceiver",
    "RecvLog",
    "RecvMetric",
    "RecvSpan",
    "decode_any_value",
    "decode_attributes",
]

T = TypeVar("T")

# -- decoded records ----------------------------------------------------------


@dataclass
class RecvSpan:
    name: str
    trace_id: str  # 32 hex chars
    span_id: str  # 16 hex chars
    parent_span_id: str | None
    kind: str  # "INTERNAL", "CLIENT", ... (proto enum name minus SPAN_KIND_)
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str, dict[str, Any]]]  # (trace_id, span_id, attributes)
    status_code: str  # "UNSET" / "OK" / "ERROR"
    status_message: str
    resource: dict[str, Any]
    scope_name: str


@dataclass
class RecvLog:
    event_name: str
    body: Any
    attributes: dict[str, Any]
    trace_id: str | None
    span_id: str | None
    severity_number: int
    severity_text: str
    time_ns: int
    resource: dict[str, Any]
    scope_name: str = ""
    observed_time_ns: int = 0


@dataclass
class RecvMetric:
    name: str
    unit: str
    kind: str  # "sum" / "gauge" / "histogram" / "exponential_histogram" / "summary"
    points: list[dict[str, Any]]
    resource: dict[str, Any]
    scope_name: str = ""
    description: str = ""


# -- protobuf -> python -------------------------------------------------------


def decode_any_value(value: AnyValue) -> Any:
    """Convert an OTLP ``AnyValue`` into the equivalent python value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [decode_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return decode_attributes(value.kvlist_value.values)
    # string/bool/int/double/bytes map directly onto python types.
    return getattr(value, kind)


def decode_attributes(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {kv.key: decode_any_value(kv.value) for kv in pairs}


def _hex_or_none(raw: bytes) -> str | None:
    # OTLP encodes "no parent" / "no trace context" as empty bytes.
    return raw.hex() if raw else None


def _enum_name(enum: Any, number: int, prefix: str) -> str:
    try:
        return str(enum.Name(number)).removeprefix(prefix)
    except ValueError:  # a value newer than our proto definitions
        return str(number)


def _decode_spans(request: ExportTraceServiceRequest) -> list[RecvSpan]:
    out: list[RecvSpan] = []
    for rs in request.resource_spans:
        resource = decode_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    RecvSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=_hex_or_none(s.parent_span_id),
                        kind=_enum_name(Span.SpanKind, s.kind, "SPAN_KIND_"),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=decode_attributes(s.attributes),
                        events=[(e.name, decode_attributes(e.attributes)) for e in s.events],
                        links=[
                            (ln.trace_id.hex(), ln.span_id.hex(), decode_attributes(ln.attributes))
                            for ln in s.links
                        ],
                        status_code=_enum_name(Status.StatusCode, s.status.code, "STATUS_CODE_"),
                        status_message=s.status.message,
                        resource=resource,
                        scope_name=ss.scope.name,
                    )
                )
    return out


def _decode_logs(request: ExportLogsServiceRequest) -> list[RecvLog]:
    out: list[RecvLog] = []
    for rl in request.resource_logs:
        resource = decode_attributes(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                out.append(_decode_log(r, resource, sl.scope.name))
    return out


def _decode_log(r: LogRecord, resource: dict[str, Any], scope_name: str) -> RecvLog:
    return RecvLog(
        event_name=r.event_name,
        body=decode_any_value(r.body) if r.HasField("body") else None,
        attributes=decode_attributes(r.attributes),
        trace_id=_hex_or_none(r.trace_id),
        span_id=_hex_or_none(r.span_id),
        severity_number=int(r.severity_number),
        severity_text=r.severity_text,
        time_ns=r.time_unix_nano,
        resource=resource,
        scope_name=scope_name,
        observed_time_ns=r.observed_time_unix_nano,
    )


def _decode_metrics(request: ExportMetricsServiceRequest) -> list[RecvMetric]:
    out: list[RecvMetric] = []
    for rm in request.resource_metrics:
        resource = decode_attributes(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data") or "unknown"
                out.append(
                    RecvMetric(
                        name=m.name,
                        unit=m.unit,
                        kind=kind,
                        points=_decode_points(m, kind),
                        resource=resource,
                        scope_name=sm.scope.name,
                        description=m.description,
                    )
                )
    return out


def _decode_points(metric: Metric, kind: str) -> list[dict[str, Any]]:
    if kind not in ("sum", "gauge", "histogram", "exponential_histogram", "summary"):
        return []
    points: list[dict[str, Any]] = []
    for p in getattr(metric, kind).data_points:
        point: dict[str, Any] = {
            "attributes": decode_attributes(p.attributes),
            "start_ns": p.start_time_unix_nano,
            "time_ns": p.time_unix_nano,
        }
        if kind != "summary":
            point["exemplars"] = [
                {"trace_id": e.trace_id.hex() or None, "span_id": e.span_id.hex() or None,
                 "value": getattr(e, e.WhichOneof("value")) if e.WhichOneof("value") else None}
                for e in p.exemplars
            ]
        if kind in ("sum", "gauge"):
            point["value"] = getattr(p, p.WhichOneof("value")) if p.WhichOneof("value") else None
        elif kind == "summary":
            point.update(
                count=p.count,
                sum=p.sum,
                quantile_values=[(q.quantile, q.value) for q in p.quantile_values],
            )
        else:
            # sum/min/max are proto3 "optional": absent differs from zero.
            point.update(
                count=p.count,
                sum=p.sum if p.HasField("sum") else None,
                min=p.min if p.HasField("min") else None,
                max=p.max if p.HasField("max") else None,
            )
            if kind == "histogram":
                point.update(bucket_counts=list(p.bucket_counts), explicit_bounds=list(p.explicit_bounds))
            else:
                point.update(
                    scale=p.scale,
                    zero_count=p.zero_count,
                    positive={"offset": p.positive.offset, "bucket_counts": list(p.positive.bucket_counts)},
                    negative={"offset": p.negative.offset, "bucket_counts": list(p.negative.bucket_counts)},
                )
        points.append(point)
    return points


# -- OTLP/JSON ---------------------------------------------------------------

# OTLP/JSON deviates from the canonical protobuf JSON mapping: ids are hex,
# not base64.  A 32-char hex string is *also* valid base64, so parsing it
# unconverted would silently yield a wrong 24-byte id.
_HEX_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


def _hex_ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in _HEX_ID_KEYS and isinstance(v, str)
            else _hex_ids_to_base64(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


# -- the server ----------------------------------------------------------------


@dataclass(frozen=True)
class _Signal:
    request_type: type[Message]
    response_type: type[Message]
    decode: Callable[[Any], list[Any]]
    store: str  # name of the OTLPReceiver list receiving the records


_SIGNALS: dict[str, _Signal] = {
    "/v1/traces": _Signal(ExportTraceServiceRequest, ExportTraceServiceResponse, _decode_spans, "_spans"),
    "/v1/logs": _Signal(ExportLogsServiceRequest, ExportLogsServiceResponse, _decode_logs, "_logs"),
    "/v1/metrics": _Signal(ExportMetricsServiceRequest, ExportMetricsServiceResponse, _decode_metrics, "_metrics"),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Keep test output clean."""

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # CRLF closing the chunk
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            raw = b"".join(parts)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            return gzip.decompress(raw)
        if encoding == "deflate":
            return zlib.decompress(raw)
        return raw

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        # One request per connection: stop() then never waits on an idle
        # keep-alive socket, and the exporters reconnect transparently.
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_POST(self) -> None:
        receiver = self.server.receiver
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        # A backend's OTLP path may sit under a prefix of its own (`/api/public/otel/v1/traces`).
        signal = next((sig for suffix, sig in _SIGNALS.items() if path == suffix or path.endswith(suffix)), None)
        is_json = headers.get("content-type", "").split(";")[0].strip() == "application/json"
        try:
            raw = self._read_body()
        except (OSError, EOFError, zlib.error) as exc:
            receiver._add(path, headers, None, [], f"{path}: unreadable body: {exc!r}")
            self._reply(400, b"unreadable body", "text/plain")
            return
        if signal is None:
            receiver._add(path, headers, None, [], None)
            self._reply(404, b"not found", "text/plain")
            return
        try:
            request = signal.request_type()
            if is_json:
                json_format.Parse(json.dumps(_hex_ids_to_base64(json.loads(raw))), request)
            else:
                request.ParseFromString(raw)
            records = signal.decode(request)
        except (DecodeError, json_format.ParseError, ValueError) as exc:
            receiver._add(path, headers, None, [], f"{path}: cannot decode body: {exc!r}")
            self._reply(400, b"cannot decode body", "text/plain")
            return
        receiver._add(path, headers, signal.store, records, None)
        response = signal.response_type()
        if is_json:
            self._reply(200, json_format.MessageToJson(response).encode(), "application/json")
        else:
            self._reply(200, response.SerializeToString(), "application/x-protobuf")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, receiver: OTLPReceiver, port: int = 0) -> None:
        self.receiver = receiver
        super().__init__(("127.0.0.1", port), _Handler)


class OTLPReceiver:
    """OTLP/HTTP receiver bound to an ephemeral loopback port.

    Use as a context manager; point exporters at ``endpoint + "/v1/traces"``
    (or set ``OTEL_EXPORTER_OTLP_ENDPOINT=endpoint``).  All accessors return
    snapshots, so they are safe to call while exports are in flight.
    """

    def __init__(self, port: int = 0) -> None:
        """`port`: a given one (a collector back on the address it had while it was down), else any free one."""
        self._port = port
        # The condition guards every list below and wakes wait_for_* callers.
        self._cond = threading.Condition()
        self._spans: list[RecvSpan] = []
        self._logs: list[RecvLog] = []
        self._metrics: list[RecvMetric] = []
        self._headers: list[dict[str, str]] = []
        self._paths: list[str] = []
        self._errors: list[str] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> OTLPReceiver:
        if self._server is None:
            deadline = time.monotonic() + 5
            while True:  # a given port may still be held a moment by the server that had it before
                try:
                    self._server = _Server(self, self._port)
                    break
                except OSError:
                    if not self._port or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},  # bounds how long stop() waits
                name="otlp-receiver",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("OTLPReceiver is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- snapshots ------------------------------------------------------------

    def spans(self) -> list[RecvSpan]:
        with self._cond:
            return list(self._spans)

    def logs(self) -> list[RecvLog]:
        with self._cond:
            return list(self._logs)

    def metrics(self) -> list[RecvMetric]:
        """Every metric received, in order; cumulative exporters resend each
        metric on every collection, so the *last* one with a name is current."""
        with self._cond:
            return list(self._metrics)

    @property
    def request_count(self) -> int:
        with self._cond:
            return len(self._headers)

    @property
    def headers(self) -> list[dict[str, str]]:
        """Headers (lower-cased names) of every request, oldest first."""
        with self._cond:
            return [dict(h) for h in self._headers]

    @property
    def paths(self) -> list[str]:
        """Request path of every request, oldest first."""
        with self._cond:
            return list(self._paths)

    @property
    def errors(self) -> list[str]:
        """Bodies the receiver could not decode (each was answered with 400)."""
        with self._cond:
            return list(self._errors)

    def clear(self) -> None:
        with self._cond:
            for store in (self._spans, self._logs, self._metrics, self._headers, self._paths, self._errors):
                store.clear()

    # -- waiting --------------------------------------------------------------

    def wait_for_spans(
        self, predicate: Callable[[list[RecvSpan]], bool] = bool, timeout: float = 10
    ) -> list[RecvSpan]:
        """Block until ``predicate(spans)`` holds; return that snapshot."""
        return self._wait(self._spans, predicate, timeout, "spans", _describe_span)

    def wait_for_logs(
        self, predicate: Callable[[list[RecvLog]], bool] = bool, timeout: float = 10
    ) -> list[RecvLog]:
        return self._wait(self._logs, predicate, timeout, "logs", _describe_log)

    def wait_for_metrics(
        self, predicate: Callable[[list[RecvMetric]], bool] = bool, timeout: float = 10
    ) -> list[RecvMetric]:
        return self._wait(self._metrics, predicate, timeout, "metrics", _describe_metric)

    def _wait(
        self,
        store: list[T],
        predicate: Callable[[list[T]], bool],
        timeout: float,
        what: str,
        describe: Callable[[T], str],
    ) -> list[T]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                snapshot = list(store)
                # The predicate runs on a copy, so it may be slow or raise
                # without corrupting receiver state.
                if predicate(snapshot):
                    return snapshot
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            errors = list(self._errors)
            requests = list(zip(self._paths, self._headers, strict=False))
        lines = [f"Timed out after {timeout}s waiting for {what}; received {len(snapshot)}:"]
        lines += [f"  {describe(item)}" for item in snapshot[:200]]
        if len(snapshot) > 200:
            lines.append(f"  ... and {len(snapshot) - 200} more")
        lines.append(f"Requests: {[path for path, _ in requests]}")
        if errors:
            lines.append(f"Decode errors: {errors}")
        raise AssertionError("\n".join(lines))

    # -- used by the handler --------------------------------------------------

    def _add(
        self, path: str, headers: dict[str, str], store: str | None, records: list[Any], error: str | None
    ) -> None:
        with self._cond:
            self._paths.append(path)
            self._headers.append(headers)
            if store is not None:
                getattr(self, store).extend(records)
            if error is not None:
                self._errors.append(error)
            self._cond.notify_all()


def _describe_span(s: RecvSpan) -> str:
    parent = s.parent_span_id or "-"
    return (
        f"{s.name!r} kind={s.kind} trace={s.trace_id} span={s.span_id} parent={parent} "
        f"status={s.status_code} attrs={s.attributes}"
    )


def _describe_log(r: RecvLog) -> str:
    return (f"event={r.event_name!r} severity={r.severity_text or r.severity_number} body={r.body!r} "
            f"attrs={r.attributes}")


def _describe_metric(m: RecvMetric) -> str:
    return f"{m.name!r} kind={m.kind} unit={m.unit!r} points={m.points}"
