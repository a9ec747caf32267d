"""The way out of one OTLP exporter: an export never waits on the network, and what is not delivered is spooled.

The SDK's batch processors call `export` on their worker thread and wait for it. Wrapped here, `export` hands
the batch to an outbox of ours (as deep as the batch queue: `batch.max_queue_size` items) and returns at once; a
sender thread of ours runs the SDK exporter, with its own retries and timeout. A batch it could not deliver goes
to the spool (:mod:`.spool`), and so does one that arrives while the outbox is full (the collector cannot keep
up). With the spool off
(`spool = false`) both are dropped and counted in `hermes.otel.exporter.dropped`.

Shutdown (process exit, a retired configuration) waits for the in-flight and queued batches at most
:data:`SPOOL_WAIT_S` — all exporters together, at process exit — then spools what is still unacknowledged, so a
collector that hangs never holds the process. A batch that the collector acknowledges after it was spooled is
sent twice (at-least-once). Without the spool, shutdown waits up to the flush budget (not at all for an endpoint
already failing), then drops and counts what is left.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..._internal import log as _log
from ..file.otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json
from ..health import health
from ..private import UnsafePath
from .store import Spool

SPOOL_WAIT_S = 0.1  # at shutdown, the wait for in-flight exports before their batches are spooled
_FAILURE_POLL_S = 0.005  # within that wait, how often a failure reported meanwhile is looked for
DROPPED_METRIC = "hermes.otel.exporter.dropped"

_exit_at: float | None = None  # monotonic deadline of the process's exit, once it began


def begin_exit(wait_s: float = SPOOL_WAIT_S) -> float:
    """Process exit starts: every spooling exporter stops waiting for the network `wait_s` from now, all together.
    Returns the deadline (monotonic)."""
    global _exit_at
    at = time.monotonic() + wait_s
    if _exit_at is None or at < _exit_at:
        _exit_at = at
    return _exit_at


_deferred = threading.local()  # .outboxes: those closed inside finishing_together() on this thread


@contextlib.contextmanager
def finishing_together() -> Iterator[None]:
    """Inside the block, an outbox being shut down only stops taking batches; its wait for the network is left for
    the end of the block, where every such outbox waits out its own deadline (the waits overlap) and spools or
    counts what is left. So the local exporters, shut down inside the block, never wait behind an endpoint."""
    outboxes: list[Outbox] = []
    _deferred.outboxes = outboxes
    try:
        yield
    finally:
        _deferred.outboxes = None
        for outbox in outboxes:
            outbox.finish()


def cancel_exit() -> None:
    """A new configuration after a shutdown (tests, an embedding host): not exiting after all."""
    global _exit_at
    _exit_at = None


class _Sending:
    __slots__ = ("batch", "taken")

    def __init__(self, batch: Any) -> None:
        self.batch = batch
        self.taken = False  # being spooled (or counted): by the sender after a failure, or by shutdown, never both


class Outbox:
    """Batches for one endpoint: sent in order by one daemon thread; undelivered ones spooled (or counted)."""

    def __init__(
        self,
        signal: str,
        endpoint: str,
        key: str,
        send: Callable[[Any], bool],
        encode: Callable[[Any], dict[str, Any]],
        count: Callable[[Any], int],
        close_inner: Callable[[], None],
        spool: Spool | None,
        budget_s: float,
        limit: int,
    ) -> None:
        self.signal, self.endpoint, self.key = signal, endpoint, key
        self._send, self._encode, self._count, self._close_inner = send, encode, count, close_inner
        self.spool = spool
        self.budget_s = budget_s
        self.limit = limit  # items waiting for the sender, at most; more go to the spool (or are dropped without it)
        self._pending: deque[tuple[Any, int]] = deque()  # (batch, items)
        self._waiting = 0  # items in _pending
        self._inflight: _Sending | None = None
        self._closed = False
        self._deadline = 0.0  # monotonic; set by close()
        self._cond = threading.Condition()
        # Started with the pipeline (not by the first export): sessions never start threads of ours.
        threading.Thread(target=self._run, name=f"hermes-otel-send-{signal}", daemon=True).start()

    def submit(self, batch: Any) -> None:
        """Queue a batch (any thread, never blocks on the network)."""
        items = self._items(batch)
        with self._cond:
            exiting = self.spool is not None and _exit_at is not None and time.monotonic() >= _exit_at
            direct = self._closed or exiting
            full = not direct and self._pending and self._waiting + items > self.limit
            if not direct and not full:
                self._pending.append((batch, items))
                self._waiting += items
                self._cond.notify()
                return
        if full:
            self._overflow()
        self._undelivered(batch)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every queued batch was sent or spooled (at most `timeout_s`)."""
        with self._cond:
            return self._cond.wait_for(self._idle, max(timeout_s, 0))

    def _idle(self) -> bool:
        return not self._pending and self._inflight is None

    def flush(self, timeout_s: float) -> bool:
        """A flush hands over; the outbox delivers on its own. So it waits briefly, like shutdown, never the whole
        budget of the local exporters."""
        return self.wait_idle(max(min(timeout_s, self._close_deadline(time.monotonic()) - time.monotonic()), 0))

    def close(self) -> None:
        """Take no more batches; wait for what is queued within the shutdown bound, spool (or count) the rest and
        close the exporter — or, inside :func:`finishing_together`, leave that wait for the end of the block."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._deadline = self._close_deadline(time.monotonic())
            self._cond.notify_all()
            busy = bool(self._pending or self._inflight is not None)
        deferred = getattr(_deferred, "outboxes", None)
        if deferred is not None and busy and time.monotonic() < self._deadline:
            deferred.append(self)
            return
        self.finish()

    def finish(self) -> None:
        """After :meth:`close`: wait until everything was sent or the deadline, spool (or count) the rest."""
        with self._cond:
            # An endpoint that fails while we wait (refused: the SDK reports it at once, then sleeps out its backoff)
            # will not answer before the deadline: spool now rather than wait it out.
            endpoints = frozenset({self.endpoint})
            while not self._idle() and not health.any_failing(endpoints):
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, _FAILURE_POLL_S))
            leftovers = [batch for batch, _ in self._pending]
            self._pending.clear()
            self._waiting = 0
            sending = self._inflight
            if sending is not None and not sending.taken:
                sending.taken = True
                leftovers.insert(0, sending.batch)
                self._inflight = None
        for batch in leftovers:
            self._undelivered(batch)
        with self._cond:  # a batch the sender is spooling right now: a local write, let it finish before exit
            self._cond.wait_for(lambda: self._inflight is None, SPOOL_WAIT_S)
        try:
            self._close_inner()  # the SDK exporter stops its retries (its backoff sleep ends at once)
        except Exception:  # noqa: BLE001 - closing is best-effort
            pass

    def _close_deadline(self, now: float) -> float:
        if health.any_failing(frozenset({self.endpoint})):
            return now  # it is only sleeping out its retry backoff
        if self.spool is not None:
            return now + SPOOL_WAIT_S if _exit_at is None else min(now + SPOOL_WAIT_S, _exit_at)
        return now + self.budget_s

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, items = self._pending.popleft()
                self._waiting -= items
                sending = self._inflight = _Sending(batch)
            try:
                delivered = self._send(sending.batch)
            except Exception:  # noqa: BLE001 - the guarded exporter reports; the batch is not lost for it
                delivered = False
            with self._cond:
                keep = not delivered and not sending.taken
                sending.taken = True
            if keep:  # still in flight while it is written: shutdown waits for the write, exit cannot cut it
                self._undelivered(sending.batch)
            with self._cond:
                if self._inflight is sending:
                    self._inflight = None
                self._cond.notify_all()
            if delivered:
                from .resend import resender

                resender.wake(self.key)  # the endpoint answers: what waits in the spool can go now

    def _undelivered(self, batch: Any) -> None:
        """Spool a batch, or count it as dropped when there is no spool or it cannot be written."""
        spool = self.spool
        if spool is not None:
            try:
                spool.put(self.signal, self.key, [self._encode(batch)])
                return
            except UnsafePath:
                pass  # said once for the directory by the check itself
            except OSError as exc:
                _log.once(
                    f"spool-write:{spool.directory}",
                    "hermes-otel: cannot write to the spool %s (%s); telemetry that cannot be delivered is dropped "
                    "and counted in %s (Hermes is unaffected; repeats are logged at DEBUG)",
                    spool.directory, exc.strerror or exc, DROPPED_METRIC, per_process=True,
                )
            except Exception as exc:  # noqa: BLE001 - a batch that cannot be encoded is dropped, said once
                _log.once(f"spool-encode:{self.signal}", "hermes-otel: cannot encode a %s batch for the spool (%r); "
                          "it is dropped and counted", self.signal, exc, per_process=True)
        health.drop(self.signal, self.endpoint, self._items(batch))

    def _items(self, batch: Any) -> int:
        try:
            return self._count(batch)
        except Exception:  # noqa: BLE001 - counting must not raise into an SDK thread
            return 1

    def _overflow(self) -> None:
        if self.spool is not None:
            _log.once(
                f"outbox-full:{self.endpoint}",
                "hermes-otel: the %s exporter cannot keep up with %s; what goes beyond %d items waiting is spooled "
                "to %s and re-sent later", self.signal, self.endpoint, self.limit, self.spool.directory,
                level=logging.INFO, per_process=True,
            )
        else:
            _log.once(
                f"queue-full:{self.signal}",
                "hermes-otel: the %s export queue is full (the exporter cannot keep up); new items are dropped and "
                "counted in %s (repeats are logged at DEBUG)", self.signal, DROPPED_METRIC,
            )


def _metric_points(data: Any) -> int:
    return sum(len(m.data.data_points) for rm in getattr(data, "resource_metrics", ()) for sm in rm.scope_metrics
               for m in sm.metrics)


class _Outboxed:
    """What the outbox exporters share: a batch is handed to the outbox, never waited on here."""

    def __init__(self, outbox: Outbox, guarded: Any) -> None:
        self.outbox = outbox
        self.guarded = guarded  # the SDK exporter (guarded) the outbox sends through

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        self.outbox.close()

    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        return self.outbox.flush(timeout_millis / 1000)


class OutboxSpanExporter(_Outboxed, SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        self.outbox.submit(list(spans))
        return SpanExportResult.SUCCESS


class OutboxLogExporter(_Outboxed, LogRecordExporter):
    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        self.outbox.submit(list(batch))
        return LogRecordExportResult.SUCCESS


class OutboxMetricExporter(_Outboxed, MetricExporter):
    def __init__(self, outbox: Outbox, guarded: MetricExporter) -> None:
        _Outboxed.__init__(self, outbox, guarded)
        MetricExporter.__init__(self, preferred_temporality=guarded._preferred_temporality,
                                preferred_aggregation=guarded._preferred_aggregation)

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.outbox.submit(metrics_data)
        return MetricExportResult.SUCCESS


def outbox_exporter(signal: str, guarded: Any, endpoint: str, key: str, spool: Spool | None, budget_s: float,
                    limit: int = 2048) -> Any:
    """`guarded` (an SDK OTLP exporter wrapped by :mod:`.health`, counting no drops itself) behind an outbox."""
    if spool is not None:
        health.spooled_to[endpoint] = str(spool.directory)
    else:
        health.spooled_to.pop(endpoint, None)
    if signal == "traces":
        outbox = Outbox(signal, endpoint, key, lambda b: guarded.export(b) == SpanExportResult.SUCCESS,
                        encode_spans_json, len, guarded.shutdown, spool, budget_s, limit)
        return OutboxSpanExporter(outbox, guarded)
    if signal == "logs":
        outbox = Outbox(signal, endpoint, key, lambda b: guarded.export(b) == LogRecordExportResult.SUCCESS,
                        encode_logs_json, len, guarded.shutdown, spool, budget_s, limit)
        return OutboxLogExporter(outbox, guarded)
    outbox = Outbox(signal, endpoint, key, lambda d: guarded.export(d) == MetricExportResult.SUCCESS,
                    encode_metrics_json, _metric_points, guarded.shutdown, spool, budget_s, limit)
    return OutboxMetricExporter(outbox, guarded)
