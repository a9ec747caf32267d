"""What really answers at an endpoint, for `hermes-otel doctor`: a real, empty OTLP export.

An empty `Export*ServiceRequest` is a valid request that carries no telemetry. Over OTLP/HTTP it is
an empty protobuf body; a receiver answers 2xx with a protobuf body. Over gRPC it is a call of the
signal's `Export` method. A TCP connect alone would call any web server "reachable"; this says what
answered (status, content type) and whether that is an OTLP receiver. An ATOF stream sink gets an
empty batch. Redirects are never followed and every probe is bounded by a short timeout.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._internal.extras import grpc_missing
from ..redaction.masking import mask_text

TIMEOUT_S = 2.0
_GRPC_METHODS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "metrics": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}


@dataclass(frozen=True)
class Answer:
    ok: bool
    text: str  # what answered, for a human
    kept: bool = False  # a failure the spool rides out: its re-sender tries again (nothing answered, a 5xx, 401 ...)


# Answers the spool does not ride out: the batch itself is refused (the re-sender drops it), or the endpoint or its
# credentials must change, and spooled batches are keyed by both (they would never be sent to the new one).
_NOT_KEPT_HTTP = frozenset({400, 401, 403, 404, 405, 413, 415, 422})
_NOT_KEPT_GRPC = frozenset({"INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "UNIMPLEMENTED"})


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # headers may hold credentials: stay put
        return None


def _post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> tuple[int, str, str]:
    """(status, content type, short body) of a POST; raises OSError/ValueError when nothing answers."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read(200).decode("latin-1")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers.get("Content-Type", "") if exc.headers else "", exc.read(200).decode("latin-1")


def _unreachable(exc: BaseException) -> Answer:
    reason = getattr(exc, "reason", None) or exc
    if isinstance(reason, ssl.SSLError):
        return Answer(False, f"TLS failed ({getattr(reason, 'reason', None) or reason})", kept=True)
    text = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
    return Answer(False, f"not reachable ({mask_text(str(text))})", kept=True)


def otlp_http(url: str, headers: Mapping[str, str], timeout_s: float = TIMEOUT_S) -> Answer:
    try:
        status, kind, body = _post(url, b"", {"Content-Type": "application/x-protobuf", **headers}, timeout_s)
    except (OSError, ValueError) as exc:
        return _unreachable(exc)
    kind_shown = kind.split(";")[0].strip() or "no content type"
    what = f"HTTP {status} ({kind_shown})"
    if 200 <= status < 300 and kind_shown == "application/x-protobuf":
        return Answer(True, f"an OTLP/HTTP receiver accepted an empty export: {what}")
    if 200 <= status < 300:
        return Answer(False, f"{what} to an empty export: not an OTLP/HTTP receiver (it answers protobuf)")
    hint = {401: "the credentials were refused", 403: "the credentials were refused", 404: "nothing serves this path",
            405: "this path does not take POST", 415: "protobuf is not accepted here"}.get(status, "refused")
    return Answer(False, f"{what} to an empty export: {hint}", kept=status not in _NOT_KEPT_HTTP)


def otlp_grpc(endpoint: str, signal: str, headers: Mapping[str, str], timeout_s: float = TIMEOUT_S) -> Answer:
    import urllib.parse

    missing = grpc_missing()
    if missing is not None:
        return Answer(False, missing)
    import grpc

    parts = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    target = parts.netloc.rsplit("@", 1)[-1]
    if parts.scheme == "http":
        channel = grpc.insecure_channel(target)
    else:
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials())
    try:
        call = channel.unary_unary(_GRPC_METHODS[signal], request_serializer=None, response_deserializer=None)
        call(b"", timeout=timeout_s, metadata=[(k.lower(), v) for k, v in headers.items()])
        return Answer(True, f"an OTLP/gRPC receiver accepted an empty {signal} export (status OK)")
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = mask_text(str(exc.details() if callable(getattr(exc, "details", None)) else exc))[:160]
        name = code.name if code is not None else "UNKNOWN"
        kept = name not in _NOT_KEPT_GRPC
        if name == "UNIMPLEMENTED":
            return Answer(False, f"a gRPC server without the OTLP {signal} service answered ({name})", kept=kept)
        lowered = details.lower()
        if name == "UNAVAILABLE" and ("http1" in lowered.replace(".", "") or "failed parsing http/2" in lowered):
            return Answer(False, "an HTTP/1 server answered, not gRPC (is this the OTLP/HTTP port, 4318?)")
        if name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            return Answer(False, f"not reachable over gRPC ({name}: {details})", kept=kept)
        return Answer(False, f"the empty {signal} export was refused ({name}: {details})", kept=kept)
    finally:
        channel.close()


def atof_stream(url: str, transport: str, headers: Mapping[str, str], timeout_s: float = TIMEOUT_S) -> Answer:
    ndjson = transport == "ndjson"
    body = b"" if ndjson else json.dumps([]).encode()
    kind = "application/x-ndjson" if ndjson else "application/json"
    try:
        status, answered, _ = _post(url, body, {"Content-Type": kind, **headers}, timeout_s)
    except (OSError, ValueError) as exc:
        return _unreachable(exc)
    what = f"HTTP {status} ({answered.split(';')[0].strip() or 'no content type'})"
    if 200 <= status < 300:
        return Answer(True, f"accepted an empty batch: {what}")
    return Answer(False, f"{what} to an empty batch: events will be dropped")


def health_check(url: str, timeout_s: float = TIMEOUT_S) -> Answer:
    """A Collector's `health_check` extension: 200 once every pipeline runs, 503 while it starts or stops."""
    request = urllib.request.Request(url, method="GET")
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=timeout_s) as response:
            status, body = response.status, response.read(500)
    except urllib.error.HTTPError as exc:
        with exc:
            status, body = exc.code, exc.read(500)
    except (OSError, ValueError) as exc:
        return _unreachable(exc)
    try:
        reply = json.loads(body)
    except ValueError:
        reply = None
    if not (isinstance(reply, dict) and isinstance(reply.get("status"), str)):
        return Answer(False, f"HTTP {status}, but not a Collector health_check answer")
    said = mask_text(reply["status"])[:80]
    since = reply.get("upSince")
    if status == 200:
        up = f", up since {since}" if isinstance(since, str) else ""
        return Answer(True, f"the Collector is ready ({said}{up})")
    return Answer(False, f"the Collector is not ready: HTTP {status} ({said})")
