"""The SDK's OTLP exporter for one endpoint and signal (HTTP or gRPC), as the spooling exporters (live) and the
background sender (re-sends) each make their own: the SDK's HTTP exporter takes no lock, so no exporter is shared
between two threads."""

from __future__ import annotations

import importlib
import time
from typing import TYPE_CHECKING, Any

from .. import deadline

if TYPE_CHECKING:
    from ..session import ExporterSession


def sdk_exporter(signal: str, target: Any) -> tuple[Any, ExporterSession | None]:
    """The SDK's OTLP exporter for `target` (an OTLPTarget), live and re-send alike, and its HTTP session. It
    sends exactly the validated headers, never the environment's OTEL_*_HEADERS re-read by the SDK (HTTP: our
    session; gRPC: metadata it takes as given even when empty). Raises GrpcMissing for gRPC without the `[grpc]`
    extra."""
    gzip = target.compression == "gzip"
    session = None
    kwargs: dict[str, Any]
    if target.protocol == "grpc":
        from ..._internal.extras import GrpcMissing, grpc_missing

        missing = grpc_missing()
        if missing is not None:
            raise GrpcMissing(missing)
        from grpc import Compression as GrpcCompression

        compression: Any = GrpcCompression.Gzip if gzip else GrpcCompression.NoCompression
        kwargs = {"insecure": target.endpoint.startswith("http://"), "headers": _Metadata(target.headers.items())}
    else:
        from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

        from ..session import ExporterSession

        compression = HttpCompression.Gzip if gzip else HttpCompression.NoCompression
        session = ExporterSession(target.headers)
        kwargs = {"headers": dict(target.headers), "session": session}
    module, name = _SDK_EXPORTERS[signal]
    module = f"opentelemetry.exporter.otlp.proto.{'grpc' if target.protocol == 'grpc' else 'http'}.{module}"
    cls = getattr(importlib.import_module(module), name)
    return cls(endpoint=target.endpoint, timeout=target.timeout_s, compression=compression, **kwargs), session


def send_once(exporter: Any, session: ExporterSession | None, owner: Any, timeout_s: float, *args: Any,
              **kwargs: Any) -> tuple[Any, bool, str | None] | Exception:
    """`exporter.export(*args, **kwargs)` on this thread for `owner` (live or re-send), ended at `timeout_s` whatever
    the collector does (deadline.py), the SDK's warnings in it at DEBUG (health.py). Returns (result, acknowledged,
    why not: what our session saw), or the exception it raised."""
    try:
        with deadline.until(time.monotonic() + timeout_s, owner):
            result = exporter.export(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - an exporter bug must not kill the calling thread
        return exc
    if session is None:
        return result, True, None
    return result, session.acknowledged(), session.last_failure()


_SDK_EXPORTERS = {"traces": ("trace_exporter", "OTLPSpanExporter"), "logs": ("_log_exporter", "OTLPLogExporter"),
                  "metrics": ("metric_exporter", "OTLPMetricExporter")}  # module (of the protocol's package), class


class _Metadata(tuple):
    """gRPC metadata the SDK exporter takes as given even when empty: on an empty (falsy) value it would send the
    environment's OTEL_EXPORTER_OTLP_HEADERS instead, values our configuration refused included."""

    def __bool__(self) -> bool:
        return True
