"""Export health: one clear message for a failing endpoint, counted drops, no waiting on a dead one.

The OTLP exporters retry transient failures with backoff and log a warning per attempt. Around our exports
(exporters/spool/delivery.py) we instead:

* report the first failure per endpoint once, clearly, at WARNING (repeats at DEBUG), from what our exports saw
  (the exporter's result, our HTTP session's exceptions and statuses); the SDK's own warnings inside OUR exports
  are kept at DEBUG (a thread-local marks them, their text is never read), so another OpenTelemetry pipeline in the
  process keeps its logs;
* count what is dropped (``ExportHealth.dropped``): what the spool cannot keep, and what our batch processors
  drop at a full queue (counted from a tally of their queue, never from the SDK's warning);
* tell the shutdown that the endpoint is failing, so it does not wait out the retry backoff on the agent's way
  out, and the live exports skip the network while it lasts (the re-sender's probe says when it answers again).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from .._internal import log as _log
from ..redaction.masking import OTLP_EXPORTER_LOGGERS, mask_url

LIVE_RETRY_S = 5.0  # while an endpoint fails, how often an exporter's thread tries it again

# The export of ours running on this thread: .export (its owner: the SDK's warnings inside it stay at DEBUG) and .at
# (its deadline: deadline.py); .flushing (a flush runs: delivery.py); .room_until (the records thread may wait for
# queue room until then: _Room).
current = threading.local()


class ExportHealth:
    """Process-wide record of failing exports; cheap to query from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: dict[str, float] = {}  # endpoint -> monotonic time of the last failure
        self.dropped: Counter[str] = Counter()  # signal -> items dropped after failed exports
        self.dropped_at: Counter[str] = Counter()  # endpoint -> items dropped exporting to it
        self.spooled_to: dict[str, str] = {}  # endpoint -> the spool directory that keeps what it cannot take
        self.not_taken: dict[str, str] = {}  # endpoint -> why it does not take its signal (for the rest of the run)
        self.left_at_exit: Counter[tuple[str, str]] = Counter()  # (signal, endpoint) -> items spooled at shutdown
        # What this process did with the spool, in batches (the `hermes.otel.spool.*` counters): by signal, and
        # evicted by (signal, reason)
        self.spooled: Counter[str] = Counter()
        self.replayed: Counter[str] = Counter()
        self.evicted: Counter[tuple[str, str]] = Counter()

    def drop(self, signal: str, endpoint: str, count: int) -> None:
        self.dropped[signal] += count
        self.dropped_at[endpoint] += count

    def failure(self, signal: str, endpoint: str, reason: str) -> None:
        """Record and report a failed export. Never raises: it runs inside exporters and logging filters."""
        with self._lock:
            self._failing[endpoint] = time.monotonic()
        try:
            collector = _collector(endpoint)  # one message per collector, not per signal
            spool = self.spooled_to.get(endpoint)
            consequence = (f"what it cannot take is kept in the spool {spool} and re-sent once it answers"
                           if spool else "telemetry is dropped while this lasts")
            _log.once(f"export-failing:{collector}", "hermes-otel: cannot export to %s (%s, first seen exporting %s); "
                      "%s (Hermes is unaffected; repeats are logged at DEBUG)", collector, reason, signal, consequence,
                      per_process=True)  # a plugin reload does not make a dead collector news again
        except Exception:  # noqa: BLE001 - the reporter must not become the failure
            pass

    def not_taking(self, signal: str, endpoint: str, why: str) -> None:
        """The endpoint does not take `signal` at all (HTTP 404, 405, 501): it is not sent there for the rest of the
        run, said once, instead of filling the spool with what it will never take."""
        self.not_taken[endpoint] = why
        _log.once(f"not-taken:{endpoint}", "hermes-otel: %s does not take %s (%s); %s are not sent there for the "
                  "rest of this run and are counted in %s (a wrong URL path answers the same: check the endpoint)",
                  mask_url(endpoint), signal, why, signal, "hermes.otel.exporter.dropped", per_process=True)

    def refused(self, signal: str, endpoint: str, why: str) -> None:
        """The endpoint refused a batch for its content (HTTP 400, 413, 422): it answers, the batch alone is the
        problem. Said once; the spool's sender splits it (resend.py)."""
        spool = self.spooled_to.get(endpoint)
        consequence = (f"it is kept in the spool {spool} and sent again in smaller parts (an item refused on its own "
                       "is removed and counted in hermes.otel.spool.evicted)" if spool
                       else "it is dropped and counted in hermes.otel.exporter.dropped")
        _log.once(f"refused:{endpoint}", "hermes-otel: %s refused a %s batch (%s); %s (repeats are logged at DEBUG)",
                  mask_url(endpoint), signal, why, consequence, per_process=True)

    def say_left(self) -> None:
        """What a shutdown spooled unacknowledged from an endpoint not known to fail (slower than the exit's wait: a
        backend still warming up), said once per endpoint: which signal, how much, where it waits."""
        for (signal, endpoint), items in sorted(self.left_at_exit.items()):
            _log.once(f"left-at-exit:{endpoint}", "hermes-otel: %d %s for %s were not acknowledged before shutting "
                      "down and wait in the spool %s; they are sent once it answers (by the next run, or now by "
                      "`hermes-otel spool send`)", items,
                      _UNITS.get(signal, signal), mask_url(endpoint), self.spooled_to.get(endpoint, "(none)"),
                      per_process=True)
        self.left_at_exit.clear()

    def success(self, endpoint: str) -> None:
        if endpoint in self._failing:
            with self._lock:
                self._failing.pop(endpoint, None)
            _log.logger.info("hermes-otel: export to %s recovered", _collector(endpoint))

    def failed_within(self, endpoint: str, seconds: float) -> bool:
        """Whether the endpoint is failing and its last failure is less than `seconds` old."""
        at = self._failing.get(endpoint)
        return at is not None and time.monotonic() - at < seconds

    def any_failing(self, endpoints: frozenset[str] | None = None) -> bool:
        return any(endpoints is None or e in endpoints for e in list(self._failing))


_UNITS = {"traces": "spans", "logs": "log records", "metrics": "metric points"}
health = ExportHealth()


class _QuietOurRetries(logging.Filter):
    """The SDK exporter's per-attempt warnings inside our exports go to our log at DEBUG: the failure is reported
    once, by us (:meth:`ExportHealth.failure`). Records outside our exports pass untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        active = getattr(current, "export", None)
        if active is None or record.levelno < logging.WARNING:
            return True
        try:
            _log.logger.debug("hermes-otel: %s exporter: %s", active.signal, record.getMessage())
        except Exception:  # noqa: BLE001 - a logging filter must not raise into the exporter
            pass
        return False


_filter = _QuietOurRetries()


def _count_queue_full(signal: str) -> None:
    health.dropped[signal] += 1
    _log.once(f"queue-full:{signal}", "hermes-otel: the %s export queue is full (the exporter cannot keep up); "
              "new items are dropped and counted in hermes.otel.exporter.dropped", signal)


class _AroundTheSDKs:
    """What our two processors add around the SDK's batch processor, which they hold unmodified (no subclass):

    * a tally of its queue (:class:`_Room`: the SDK gives no length nor a drop count on every version it supports),
      so what it drops at a full queue is counted;
    * a flush (session finalize) never waits for an endpoint known to be failing. The SDK's flush takes the lock its
      worker holds while exporting, and that worker tries a failing endpoint again now and then (up to the export
      timeout): so the flush of such a processor is left out. What it holds is exported by the worker (spooled, or
      dropped and counted), and each exporter has a processor of its own: the files still flush."""

    sdk: Any  # the SDK's processor class
    waits = False  # whether our records thread waits for room in a full queue (the logs' only)

    def __init__(self, exporter: Any, *, max_queue_size: int, schedule_delay_millis: float | None = None,
                 max_export_batch_size: int | None = None, export_timeout_millis: float | None = None) -> None:
        endpoint = getattr(exporter, "endpoint", None)  # our spooling exporters' (and Relay's shaped ones')
        self.endpoint: str | None = endpoint if isinstance(endpoint, str) else None
        # The queue's size as our configuration read it (OTEL_B*_MAX_QUEUE_SIZE or plugins.toml), given to the SDK:
        # no variable is read twice.
        wait_s = (export_timeout_millis or 10_000) / 1000 if self.waits else 0
        self.room = _Room(max_queue_size, wait_s, self._failing)
        self.batch = self.sdk(_Counted(exporter, self.room), max_queue_size=max_queue_size,
                              schedule_delay_millis=schedule_delay_millis, max_export_batch_size=max_export_batch_size,
                              export_timeout_millis=export_timeout_millis)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return not self._failing() and self.batch.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.room.close()  # no wait for room after shutdown: the SDK ignores what comes now
        self.batch.shutdown()

    def _failing(self) -> bool:
        return self.endpoint is not None and health.any_failing(frozenset((self.endpoint,)))


class OurBatchSpanProcessor(_AroundTheSDKs, SpanProcessor):
    """The SDK's batch span processor, counting what it drops at a full queue from a tally of its queue (never waits:
    spans end on the agent's threads)."""

    sdk = BatchSpanProcessor

    def on_end(self, span: Any) -> None:
        sampled = span.context is not None and span.context.trace_flags.sampled  # what the SDK's queue takes
        if sampled and self.room.add():
            _count_queue_full("traces")
        self.batch.on_end(span)


class _Room:
    """Room in our log processor's queue, for our records thread to wait for instead of the SDK dropping the oldest.

    The SDK's queue has no public length nor anything to wait on, but the processor and its exporter are both
    ours: what `on_emit` handed in minus what `export` received (what the worker took out) is the queue's length,
    counted here (plus a batch between the worker's pop and its export, a few microseconds). The count is capped at
    the queue's size, as the queue is: at a full queue the SDK drops one for each one added. So a miscount errs
    low, never toward a wait with nothing in the queue to wait for. A full count is what our processors count as a
    drop (the SDK 1.39 that Hermes 0.2x pins drops silently; later ones warn, in words that are theirs to change)."""

    def __init__(self, size: int, timeout_s: float, failing: Callable[[], bool]) -> None:
        self._held = 0
        self._failing = failing  # whether the exporter's endpoint is known to be failing: it spools, no wait
        self._size = size
        self._timeout_s = timeout_s
        self._changed = threading.Condition(threading.Lock())
        self._closed = False
        self._stalled = False  # a wait timed out: no other until the worker's export takes a batch
        if hasattr(os, "register_at_fork"):  # a forked child: the SDK empties the queue, and a lock may be held
            forget = weakref.WeakMethod(self._forget)
            os.register_at_fork(after_in_child=lambda: (method := forget()) is not None and method())

    def _forget(self) -> None:
        self._held = 0
        self._changed = threading.Condition(threading.Lock())

    def add(self) -> bool:
        """One item goes in. On a thread of ours that may wait (`current.room_until`, a monotonic deadline: the
        records thread's work), first wait for room: at most the export timeout once per batch the worker takes
        (an export that hangs past it costs one wait, not one per record), never past that deadline or the
        processor's shutdown, nor while the endpoint is known to be failing (its exports spool at once, but a
        collector that hangs holds the worker's probe of it up to the export timeout every few seconds). Any other
        thread (the agent's) never waits: the SDK drops its oldest, counted. Returns whether the queue is full
        still (this item costs the SDK's oldest one)."""
        until = getattr(current, "room_until", None)
        with self._changed:
            if (until is not None and self._held >= self._size and not self._closed and not self._stalled
                    and not self._failing()):
                wait_s = min(self._timeout_s, until - time.monotonic())
                if wait_s > 0:
                    self._stalled = not self._changed.wait_for(lambda: self._held < self._size or self._closed, wait_s)
            full = self._held >= self._size and not self._closed  # after shutdown the SDK ignores it: no drop
            self._held = min(self._held + 1, self._size)
            return full

    def taken(self, count: int) -> None:
        with self._changed:
            self._held = max(self._held - count, 0)
            self._stalled = False
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()


class _Counted:
    """Our exporter as our processor sees it: each batch the worker hands it made room in the queue."""

    def __init__(self, inner: Any, room: _Room) -> None:
        self.inner, self.room = inner, room  # the rest (shutdown, force_flush) is the inner's: __getattr__

    def export(self, batch: Any) -> Any:
        self.room.taken(len(batch))
        return self.inner.export(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class OurBatchLogRecordProcessor(_AroundTheSDKs, LogRecordProcessor):
    """The SDK's batch log-record processor, counting what it drops at a full queue; our records thread waits for
    room in its full queue (:class:`_Room`) where any other thread's record drops the oldest."""

    sdk, waits = BatchLogRecordProcessor, True

    def on_emit(self, log_record: Any) -> None:
        if self.room.add():
            _count_queue_full("logs")
        self.batch.on_emit(log_record)


def install_log_filter() -> None:
    """Idempotent: logging keeps one instance of a filter per logger."""
    for name in OTLP_EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _filter not in logger.filters:  # first: ahead of the SDK's DuplicateFilter, which would count ours
            logger.filters.insert(0, _filter)


def _collector(endpoint: str) -> str:
    """`scheme://host:port` of an endpoint as written (no user info, path or query); total, even for a port out of
    range."""
    try:
        parts = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    except ValueError:
        return "(an unparsable endpoint)"
    where = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{where}" if parts.scheme else where
