"""Re-sending the spool: oldest first, one batch at a time, each removed only once its endpoint acknowledged it.

Every process with the plugin on and an OTLP endpoint runs one :class:`Resender` thread (never the agent's),
so the next `hermes` run on the same `$HERMES_HOME` sends what an earlier one spooled. Each spooled batch is
claimed with a file lock (:meth:`.spool.Spool.claim`), so processes sharing a home never send the same batch.

The first spooled batch is also the probe: while its endpoint fails, the sender backs off (1 s doubling to
60 s, jittered, `Retry-After` honoured); a live export that succeeds wakes it at once. A batch is converted
back to the protobuf request the SDK exporters send (OTLP/HTTP or gRPC, the configured headers and
compression) and removed after a 2xx / OK; one the endpoint rejects as malformed (HTTP 400, 413, 422; gRPC
INVALID_ARGUMENT) is removed and counted, anything else is kept for later. At-least-once: a batch is sent
again only when its acknowledgement was lost (the process died, or the answer never came).

The background sender's pace is bounded (:data:`MIN_GAP_S` between batches, and at most :data:`BUSY_SHARE`
of one core), so a large backlog never starves live telemetry or the agent; `hermes-otel spool send` runs
unbounded.
"""

from __future__ import annotations

import base64
import gzip
import os
import random
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._internal import log as _log
from ...redaction.masking import mask_url
from ...version import __version__
from .store import Entry, NotABatch, Requests, Spool, Stray, endpoint_key, stats

# Our own generator: the sender thread never moves the process-wide `random` state under someone else.
_JITTER = random.Random()

MIN_GAP_S = 0.02  # between two batches of the background sender (so at most 50 batches/s)
BUSY_SHARE = 0.25  # of one core, at most, for the background sender
BACKOFF_S = (1.0, 60.0)  # first and longest wait after a failed send
IDLE_RESCAN_S = 5.0  # how often an idle sender looks for batches spooled by other processes
CAPS_EVERY_S = 60.0  # how often the sender enforces the spool's caps (age)
PIECE = 16  # items converted between two GIL pauses
PIECE_ITEMS = 512  # items per re-sent request at most (the SDK batch processor's default max_export_batch_size)
GIL_PAUSE_S = 0.0002  # a blocking sleep lets a waiting thread take the GIL (sleep(0) takes it straight back)
REJECTED_HTTP = frozenset({400, 413, 422})  # the batch itself is refused: sending it again cannot help
_GRPC_METHODS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    "metrics": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}
# OTLP/JSON field names at each level of a request: resource list, scope list, items.
_LEVELS = {
    "traces": (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans", "spans")),
    "logs": (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records")),
    "metrics": (("resourceMetrics", "resource_metrics"), ("scopeMetrics", "scope_metrics"), ("metrics", "metrics")),
}
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})
_OPAQUE_KEYS = frozenset({"attributes", "body", "filteredAttributes"})


@dataclass(frozen=True)
class Outcome:
    kind: str  # sent | retry | rejected | unreadable | busy | stray
    items: int = 0  # spans, log records or metric points in the batch
    detail: str = ""
    retry_after_s: float | None = None
    bad_lines: int = 0  # lines of the batch that could not be read or converted: skipped


Targets = Mapping[str, tuple[str, Any]]  # endpoint key -> (signal, OTLPTarget)


def targets_of(settings: Any) -> dict[str, tuple[str, Any]]:
    """Every OTLP endpoint a configuration exports to, by spool key."""
    pairs = [*settings.otlp.items(), *(("traces", e.target) for e in settings.relay_span_endpoints),
             *(("logs", t) for t in settings.relay_log_targets),
             *(("metrics", t) for t in settings.relay_metric_targets)]
    return {endpoint_key(t.protocol, t.endpoint, t.headers): (signal, t) for signal, t in pairs}


# -- one batch ---------------------------------------------------------------------------------------------------


def send_entry(spool: Spool, entry: Entry, target: Any, channels: _Channels, *, paced: bool = True) -> Outcome:
    """Claim one spooled batch, send it, and remove it once acknowledged (or rejected as malformed)."""
    try:
        with spool.claim(entry) as fd:
            if fd is None:
                return Outcome("busy")
            return _send_claimed(spool, entry, fd, target, channels, paced)
    except NotABatch as exc:  # swapped for a FIFO or a link since the listing: never waited on, never followed
        return Outcome("stray", detail=str(exc))


def _send_claimed(spool: Spool, entry: Entry, fd: int, target: Any, channels: _Channels, paced: bool) -> Outcome:
    """Send a claimed batch in pieces of at most :data:`PIECE_ITEMS` items (one request each, as the SDK's batch
    processor sends them), read one line at a time: a re-send holds one piece, never the whole batch. The batch
    is removed once every piece was acknowledged (or rejected as malformed); a piece that fails keeps it, and the
    pieces already acknowledged are sent again with it later (at-least-once)."""
    requests = Requests(entry.path, fd)
    sent = rejected = items = bad = 0
    refusal = ""
    for message, count, skipped in pieces(entry.signal, requests, paced=paced):
        bad += skipped
        if message is None:
            continue
        outcome = post(entry.signal, target, message.SerializeToString(), channels)
        del message  # the next piece is built without this one in memory
        if outcome.kind == "retry":
            return Outcome("retry", items, outcome.detail, outcome.retry_after_s, bad + requests.bad)
        if outcome.kind == "sent":
            sent, items = sent + 1, items + count
        else:
            rejected, refusal = rejected + 1, outcome.detail
    if bad:  # (a torn line was said by the reader)
        _log.once("spool-bad-lines", "hermes-otel: skipped %d unreadable line(s) of the spooled %s batch %s; "
                  "the rest was sent (repeats are logged at DEBUG)", bad, entry.signal, entry.path.name,
                  per_process=True)
    spool.remove(entry)
    if sent:
        stats.replayed[entry.signal] += 1
        return Outcome("sent", items, bad_lines=bad + requests.bad)
    if rejected:
        stats.evicted[(entry.signal, "rejected")] += 1
        _log.once(f"spool-rejected:{target.endpoint}", "hermes-otel: %s rejected a spooled %s batch (%s); it "
                  "was removed and counted in hermes.otel.spool.evicted (repeats are logged at DEBUG)",
                  mask_url(target.endpoint), entry.signal, refusal, per_process=True)
        return Outcome("rejected", 0, refusal, bad_lines=bad + requests.bad)
    detail = "no line could be converted" if bad else "no readable request"
    stats.evicted[(entry.signal, "unreadable")] += 1
    _log.once("spool-unreadable", "hermes-otel: removed the spooled %s batch %s: it cannot be sent (%s); "
              "counted in hermes.otel.spool.evicted (repeats are logged at DEBUG)", entry.signal,
              entry.path.name, detail, per_process=True)
    return Outcome("unreadable", 0, detail)


def to_request(signal: str, requests: Iterable[Mapping[str, Any]], *, paced: bool = True) -> tuple[Any, int, int]:
    """One protobuf export request from OTLP/JSON requests (their lists appended), its item count, and how many
    requests (lines) could not be converted and were skipped: one piece without a size limit."""
    return next(pieces(signal, requests, paced=paced, limit=None))


def pieces(signal: str, requests: Iterable[Mapping[str, Any]], *, paced: bool = True,
           limit: int | None = PIECE_ITEMS) -> Iterator[tuple[Any, int, int]]:
    """Protobuf export requests from OTLP/JSON requests (their lists appended), each closed once it holds `limit`
    items or more (a request is never split), with its item count and how many requests (lines) could not be
    converted and were skipped (a non-hex id, a wrong type): one bad line costs that line, never the batch. A
    piece is None when not one of its requests could be converted; at least one piece is yielded.

    Converted item by item (pausing for the GIL every few items when `paced`): json_format is pure Python, and a
    batch of hundreds of spans would otherwise hold the GIL for tens of milliseconds."""
    message = _request_class(signal)()
    items = bad = converted = yielded = 0
    for request in requests:
        part = _request_class(signal)()
        try:
            count = _convert(signal, request, part, items, paced)
        except Exception:  # noqa: BLE001 - any shape json_format or the id conversion refuses
            bad += 1
            continue
        message.MergeFrom(part)  # repeated fields: the lists appended, as one request
        del part
        items += count
        converted += 1
        if limit is not None and items >= limit:
            yield message, items, bad
            message, items, bad, converted, yielded = _request_class(signal)(), 0, 0, 0, yielded + 1
    if converted or bad or not yielded:
        yield (message if converted else None), items, bad


def _convert(signal: str, request: Mapping[str, Any], message: Any, done: int, paced: bool) -> int:
    from google.protobuf.json_format import ParseDict

    (l1, f1), (l2, f2), (l3, f3) = _LEVELS[signal]
    items = 0
    for resource in request.get(l1) or ():
        resource = dict(resource)
        scopes = resource.pop(l2, None) or ()
        resource_msg = getattr(message, f1).add()
        ParseDict(resource, resource_msg, ignore_unknown_fields=True)
        for scope in scopes:
            scope = dict(scope)
            members = scope.pop(l3, None) or ()
            scope_msg = getattr(resource_msg, f2).add()
            ParseDict(scope, scope_msg, ignore_unknown_fields=True)
            target = getattr(scope_msg, f3)
            for member in members:
                ParseDict(_ids_to_base64(member), target.add(), ignore_unknown_fields=True)
                items += _points(member) if signal == "metrics" else 1
                if paced and (done + items) % PIECE == 0:
                    time.sleep(GIL_PAUSE_S)
    return items


def _points(metric: Mapping[str, Any]) -> int:
    for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
        if kind in metric:
            return len(metric[kind].get("dataPoints") or ())
    return 0


def _ids_to_base64(node: Any) -> Any:
    """A copy with hex ids (OTLP/JSON) as base64 (protobuf's JSON mapping); attribute values are left alone."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                out[key] = base64.b64encode(bytes.fromhex(value)).decode()
            elif key not in _OPAQUE_KEYS and isinstance(value, (dict, list)):
                out[key] = _ids_to_base64(value)
            else:
                out[key] = value
        return out
    if isinstance(node, list):
        return [_ids_to_base64(item) for item in node]
    return node


def _request_class(signal: str) -> type:
    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        return ExportTraceServiceRequest
    if signal == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        return ExportLogsServiceRequest
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    return ExportMetricsServiceRequest


# -- transports --------------------------------------------------------------------------------------------------


def post(signal: str, target: Any, body: bytes, channels: _Channels) -> Outcome:
    """Send one serialized request to `target` (an OTLPTarget) the way its SDK exporter would."""
    if target.protocol == "grpc":
        return _post_grpc(signal, target, body, channels)
    return _post_http(signal, target, body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # headers may hold credentials: stay put
        return None


def _tls_file(signal: str, name: str) -> str | None:
    """The SDK exporters' TLS variables (per signal first), which they read themselves."""
    env = os.environ
    return env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}") or env.get(f"OTEL_EXPORTER_OTLP_{name}") or None


def _post_http(signal: str, target: Any, body: bytes) -> Outcome:
    headers = {"Content-Type": "application/x-protobuf", "User-Agent": f"hermes-otel/{__version__}",
               **dict(target.headers)}
    if target.compression == "gzip":
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    handlers: list[Any] = [_NoRedirect]
    if target.endpoint.startswith("https://"):
        context = ssl.create_default_context(cafile=_tls_file(signal, "CERTIFICATE"))
        certificate = _tls_file(signal, "CLIENT_CERTIFICATE")
        if certificate:
            context.load_cert_chain(certificate, _tls_file(signal, "CLIENT_KEY"))
        handlers.append(urllib.request.HTTPSHandler(context=context))
    request = urllib.request.Request(target.endpoint, data=body, headers=headers, method="POST")
    try:
        with urllib.request.build_opener(*handlers).open(request, timeout=target.timeout_s) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        with exc:
            status = exc.code
            retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        if status in REJECTED_HTTP:
            return Outcome("rejected", detail=f"HTTP {status}")
        return Outcome("retry", detail=f"HTTP {status}", retry_after_s=retry_after)
    except (OSError, ValueError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return Outcome("retry", detail=str(getattr(reason, "strerror", None) or reason)[:200])
    if 200 <= status < 300:
        return Outcome("sent")
    return Outcome("retry", detail=f"HTTP {status}")


def _retry_after(value: str | None) -> float | None:
    try:
        return min(max(float(value), 0.0), 300.0) if value else None
    except ValueError:
        return None


class _Channels:
    """gRPC channels by endpoint, reused across batches."""

    def __init__(self) -> None:
        self._channels: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def get(self, signal: str, target: Any) -> Any:
        import grpc

        with self._lock:
            channel = self._channels.get((signal, target.endpoint))
            if channel is None:
                parts = urllib.parse.urlsplit(target.endpoint if "://" in target.endpoint else f"//{target.endpoint}")
                address = parts.netloc.rsplit("@", 1)[-1]
                if target.endpoint.startswith("http://"):
                    channel = grpc.insecure_channel(address)
                else:
                    channel = grpc.secure_channel(address, _grpc_credentials(signal))
                self._channels[(signal, target.endpoint)] = channel
            return channel

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            try:
                channel.close()
            except Exception:  # noqa: BLE001 - closing is best-effort
                pass


def _grpc_credentials(signal: str) -> Any:
    import grpc

    def read(name: str) -> bytes | None:
        path = _tls_file(signal, name)
        if not path:
            return None
        with open(path, "rb") as handle:
            return handle.read()

    return grpc.ssl_channel_credentials(read("CERTIFICATE"), read("CLIENT_KEY"), read("CLIENT_CERTIFICATE"))


def _post_grpc(signal: str, target: Any, body: bytes, channels: _Channels) -> Outcome:
    import grpc

    try:
        call = channels.get(signal, target).unary_unary(_GRPC_METHODS[signal], request_serializer=None,
                                                        response_deserializer=None)
        compression = grpc.Compression.Gzip if target.compression == "gzip" else grpc.Compression.NoCompression
        call(body, timeout=target.timeout_s, metadata=[(k.lower(), v) for k, v in target.headers.items()],
             compression=compression)
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        name = code.name if code is not None else "UNKNOWN"
        return Outcome("rejected" if name == "INVALID_ARGUMENT" else "retry", detail=f"gRPC {name}")
    except (OSError, ValueError) as exc:
        return Outcome("retry", detail=str(exc)[:200])
    return Outcome("sent")


# -- the background sender ---------------------------------------------------------------------------------------


class Resender:
    """The process's background sender of the spool (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._spool: Spool | None = None
        self._targets: dict[str, tuple[str, Any]] = {}
        self._thread: threading.Thread | None = None
        self._backoff: dict[str, tuple[float, float]] = {}  # key -> (monotonic time of the next try, last delay)
        self._channels = _Channels()
        self._strays: set[Any] = set()  # paths of batches that turned out not to be batches we can open

    def serve(self, spool: Spool | None, targets: Targets) -> None:
        """Send `spool` to `targets` from now on (nothing when either is empty); starts the thread if needed."""
        with self._lock:
            self._spool, self._targets = spool, dict(targets)
            if spool is None or not targets:
                self._wake.set()
                return
            self._stopped.clear()
            self._backoff = {k: v for k, v in self._backoff.items() if k in self._targets}
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hermes-otel-resend", daemon=True)
                self._thread.start()
        self._wake.set()

    def wake(self, key: str | None = None) -> None:
        """Look again now (a live export to `key` succeeded: its endpoint answers)."""
        if key is not None and key in self._backoff:
            self._backoff.pop(key, None)
            self._wake.set()

    def stop(self, until: float | None = None) -> None:
        """Stop sending; wait for a send in flight until monotonic time `until` (its batch stays spooled if cut)."""
        with self._lock:
            self._spool, self._targets = None, {}
            self._stopped.set()
            self._backoff.clear()
        self._wake.set()
        if until is not None:
            self._idle.wait(max(until - time.monotonic(), 0))

    def _run(self) -> None:
        while True:
            try:
                self._loop()
            except Exception as exc:  # noqa: BLE001 - the sender must survive anything
                _log.logger.debug("hermes-otel: spool sender: %r", exc)
            finally:
                self._channels.close()
            with self._lock:  # serve() after a stop() either finds this thread alive or none at all
                if self._stopped.is_set():
                    self._thread = None
                    return

    def _loop(self) -> None:
        queue: deque[Entry] = deque()
        caps_at = 0.0
        while not self._stopped.is_set():
            spool, targets = self._spool, self._targets
            if spool is None or not targets:
                self._wake.wait(IDLE_RESCAN_S)
                self._wake.clear()
                continue
            now = time.monotonic()
            if now >= caps_at:
                _quietly(spool.enforce_caps)
                caps_at = now + CAPS_EVERY_S
            entry = self._next(queue, spool, targets)
            if entry is None:
                waits = [at - now for at, _ in self._backoff.values() if at > now]
                self._wake.wait(min([IDLE_RESCAN_S, *waits]) if waits else IDLE_RESCAN_S)
                self._wake.clear()
                continue
            started = time.monotonic()
            self._idle.clear()
            try:
                outcome = send_entry(spool, entry, targets[entry.key][1], self._channels)
            except Exception as exc:  # noqa: BLE001 - the sender must survive anything
                outcome = Outcome("retry", detail=f"{type(exc).__name__}: {exc}")
            finally:
                self._idle.set()
            busy = time.monotonic() - started
            if outcome.kind == "retry":
                self._back_off(entry.key, outcome.retry_after_s)
                queue = deque(e for e in queue if e.key != entry.key)
                continue
            if outcome.kind == "sent":
                self._backoff.pop(entry.key, None)
            elif outcome.kind == "stray":  # not a batch we can open: said once, never tried again by this process
                self._strays.add(entry.path)
                _log.once(f"spool-stray:{entry.path}", "hermes-otel: spool: %s",
                          Stray(entry.path, outcome.detail).text(), per_process=True)
                continue
            self._stopped.wait(max(MIN_GAP_S, busy * (1 / BUSY_SHARE - 1)))

    def _next(self, queue: deque[Entry], spool: Spool, targets: Targets) -> Entry | None:
        """The oldest batch this process can send now (re-listing the spool when the last listing is used up)."""
        now = time.monotonic()
        for attempt in range(2):
            while queue:
                entry = queue.popleft()
                if self._sendable(entry, targets, now):
                    return entry
            if attempt == 0:
                entries, strays = _quietly(spool.scan) or ((), ())
                for stray in strays:  # nobody else would say it: a background sender has no terminal
                    _log.once(f"spool-stray:{stray.path}", "hermes-otel: spool: %s", stray.text(), per_process=True)
                queue.extend(e for e in entries if self._sendable(e, targets, now))
        return None

    def _sendable(self, entry: Entry, targets: Targets, now: float) -> bool:
        target = targets.get(entry.key)
        if target is None or target[0] != entry.signal or entry.path in self._strays:
            return False
        retry_at = self._backoff.get(entry.key)
        return retry_at is None or retry_at[0] <= now

    def _back_off(self, key: str, retry_after_s: float | None) -> None:
        last = self._backoff.get(key, (0.0, 0.0))[1]
        delay = min(max(last * 2, BACKOFF_S[0]), BACKOFF_S[1])
        wait = retry_after_s if retry_after_s is not None else delay * _JITTER.uniform(0.8, 1.2)
        self._backoff[key] = (time.monotonic() + wait, delay)


def _quietly(work: Callable[[], Any]) -> Any:
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - a spool we cannot read now is retried later
        _log.logger.debug("hermes-otel: spool: %r", exc)
        return None


resender = Resender()


# -- everything now (`hermes-otel spool send`) ------------------------------------------------------------------


@dataclass
class SendReport:
    sent: int = 0
    items: int = 0
    rejected: int = 0
    unreadable: int = 0
    failed: int = 0  # kept: the endpoint did not take them now
    busy: int = 0  # another process is sending them
    no_target: int = 0  # for an endpoint that is not configured now
    bad_lines: int = 0  # lines of sent batches that could not be read or converted: skipped
    strays: list[Stray] = field(default_factory=list)  # what is not a batch: skipped, never read
    problems: dict[str, str] = field(default_factory=dict)  # endpoint -> why it did not take a batch


def send_all(spool: Spool, targets: Targets, progress: Callable[[SendReport, int], None] | None = None) -> SendReport:
    """Send every spooled batch for a configured endpoint now, oldest first; an endpoint that fails is skipped
    for the rest of the run."""
    entries, strays = spool.scan()
    report = SendReport(strays=strays)
    failing: set[str] = set()
    channels = _Channels()
    try:
        for entry in entries:
            target = targets.get(entry.key)
            if target is None or target[0] != entry.signal:
                report.no_target += 1
            elif entry.key in failing:
                report.failed += 1
            else:
                outcome = send_entry(spool, entry, target[1], channels, paced=False)
                if outcome.kind == "sent":
                    report.sent += 1
                    report.items += outcome.items
                    report.bad_lines += outcome.bad_lines
                elif outcome.kind == "stray":
                    report.strays.append(Stray(entry.path, outcome.detail))
                elif outcome.kind == "retry":
                    report.failed += 1
                    failing.add(entry.key)
                    report.problems[target[1].endpoint] = outcome.detail
                else:
                    setattr(report, outcome.kind, getattr(report, outcome.kind) + 1)
            if progress is not None:
                progress(report, len(entries))
    finally:
        channels.close()
    return report
