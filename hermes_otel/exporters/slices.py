"""Export without holding the GIL for long: a batch is encoded in slices, with a pause between them.

The SDK's batch processors hand an exporter hundreds of items at once, and
encoding them is pure Python (70–100 µs per span or log record with the OTLP
protobuf encoder), so one batch holds the GIL for many milliseconds. An agent
thread that wakes up meanwhile (its model answered) waits for the interpreter's
switch interval, 5 ms. Between slices we pause (see :mod:`hermes_otel._gil`).

A batch is cut into at most MAX_SLICES slices. Only the encoding is sliced:
an OTLP/HTTP batch is still one request, since protobuf messages concatenate
(the slices' `resource_spans` / `resource_logs` lists are appended), and a
file batch becomes one line per slice.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .._gil import pause

SLICE_ITEMS = 4  # about 0.3-0.4 ms of encoding (OTLP protobuf, 70-100 µs per item)
MAX_SLICES = 8  # per batch

_logger = logging.getLogger("hermes_otel")


def slices(items: Sequence[Any], size: int | None = None) -> Iterator[Sequence[Any]]:
    """`items` in slices of `size`, pausing between them.

    By default slices are SLICE_ITEMS long, or longer when that would take more than
    MAX_SLICES slices: a big batch means the exporter is behind, and then keeping up
    matters more than the length of a GIL hold.
    """
    size = size or max(SLICE_ITEMS, -(-len(items) // MAX_SLICES))
    for start in range(0, len(items), size):
        if start:
            pause()
        yield items[start : start + size]


def encode_sliced(encode: Callable[[Sequence[Any]], Any], items: Sequence[Any]) -> bytes:
    """One serialized OTLP request for `items`: the concatenation of each slice's request."""
    return b"".join(encode(part).SerializePartialToString() for part in slices(items))


def supports_sliced_export(exporter: Any) -> bool:
    """The SDK's OTLP/HTTP exporters (>= 1.45) send already-encoded bytes through `_client`."""
    return callable(getattr(getattr(exporter, "_client", None), "export", None)) and hasattr(exporter, "_metrics")


def export_sliced(exporter: Any, batch: Sequence[Any], encode: Callable[[Sequence[Any]], Any], signal: str) -> bool:
    """What the SDK exporter's `export` does, with the encoding sliced; True on success."""
    with exporter._metrics.export_operation(len(batch)) as result:
        try:
            data = encode_sliced(encode, batch)
        except Exception as error:  # noqa: BLE001 - as the SDK exporter: a batch that cannot be encoded fails
            _logger.error("Failed to encode %s batch: %s", signal, error)
            result.error = error
            return False
        limit = getattr(exporter, "_max_request_size", 0) or 0
        if 0 < limit < len(data):
            _logger.warning("Dropping %s batch: serialized size %d bytes exceeds max_request_size %d bytes.",
                            signal, len(data), limit)
            result.error = ValueError(f"{signal} request of {len(data)} bytes exceeds {limit} bytes")
            return False
        sent = exporter._client.export(data)
        if not sent.success:
            result.error = sent.error
            status = getattr(sent, "status_code", None)
            result.error_attrs = {"http.response.status_code": status} if status is not None else None
            return False
    return True


@functools.lru_cache(maxsize=None)  # one subclass per (signal, exporter class), however often we reconfigure
def sliced_http_exporter(signal: str, cls: type) -> type:
    """A subclass of the SDK's OTLP/HTTP `cls` for `signal` ("traces" or "logs") that encodes in slices."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk._logs.export import LogRecordExportResult
    from opentelemetry.sdk.trace.export import SpanExportResult

    encode, result = {"traces": (encode_spans, SpanExportResult), "logs": (encode_logs, LogRecordExportResult)}[signal]

    class Sliced(cls):  # type: ignore[misc, valid-type]
        def export(self, batch: Sequence[Any]) -> Any:
            if getattr(self, "_shutdown", False) or not supports_sliced_export(self):
                return super().export(batch)
            return result.SUCCESS if export_sliced(self, batch, encode, signal) else result.FAILURE

    Sliced.__name__ = Sliced.__qualname__ = f"Sliced{cls.__name__}"
    return Sliced
