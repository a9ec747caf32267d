"""Export health: one clear message for a failing endpoint, counted drops, no waiting on a dead one.

The OTLP exporters retry transient failures with backoff and log a warning
per attempt. Around our exports (exporters/spool/delivery.py) we instead:

* report the first failure per endpoint once, clearly, at WARNING (repeats
  at DEBUG) — the SDK's own per-attempt warnings are suppressed, but only
  those raised inside OUR exports (a thread-local marks them), so another
  OpenTelemetry pipeline in the process keeps its logs;
* count what is dropped (``ExportHealth.dropped``): what the spool cannot keep,
  and what our batch processors refuse at a full queue;
* tell the shutdown that the endpoint is failing, so it does not wait out the
  retry backoff on the agent's way out, and the live exports skip the network
  while it lasts (the re-sender's probe says when it answers again).
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

from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from .._internal import log as _log
from ..redaction.masking import OTLP_EXPORTER_LOGGERS

current = threading.local()  # .export: who exports (.signal, .report(record)) while one of our exports runs


def _sdk_says_queue_full() -> bool:
    """Whether the SDK's batch processors warn for each item they drop at a full queue (SDK 1.40 and later; 1.39,
    Hermes 0.2x's pin, drops silently). A behaviour, not a name, so its release is the only thing to check."""
    from opentelemetry.sdk.version import __version__ as sdk

    try:
        return tuple(int(part) for part in sdk.split(".")[:2]) >= (1, 40)
    except ValueError:  # a release we cannot read: a newer one
        return True


# Where the SDK warns, our log filter counts each of our processors' drops from that warning; where it is silent,
# they count from a tally of their own queue (:class:`_Room`).
SDK_SAYS_QUEUE_FULL = _sdk_says_queue_full()


class ExportHealth:
    """Process-wide record of failing exports; cheap to query from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: dict[str, float] = {}  # endpoint -> monotonic time of the last failure
        self.dropped: Counter[str] = Counter()  # signal -> items dropped after failed exports
        self.dropped_at: Counter[str] = Counter()  # endpoint -> items dropped exporting to it
        self.spooled_to: dict[str, str] = {}  # endpoint -> the spool directory that keeps what it cannot take

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


health = ExportHealth()


class _SuppressOurRetries(logging.Filter):
    """Turn the SDK's per-attempt warnings inside our exports into one health report."""

    def filter(self, record: logging.LogRecord) -> bool:
        active = getattr(current, "export", None)
        if active is None or record.levelno < logging.WARNING:
            return True
        try:
            active.report(record)
            _log.logger.debug("hermes-otel: %s exporter: %s", active.signal, record.getMessage())
        except Exception:  # noqa: BLE001 - a logging filter must not raise into the exporter
            pass
        return False


_filter = _SuppressOurRetries()


class _CountQueueFull(logging.Filter):
    """The SDK's batch processors warn once per item they drop at a full queue ("Queue full, dropping Span.").
    A drop by one of our processors (it runs inside their `on_end` / `on_emit`, on the caller's thread) is counted
    by signal and said once; every other processor's warning passes untouched to its owner's handlers."""

    hermes_otel_queue_full = True  # one of these per logger, whichever copy of this module installed it

    def filter(self, record: logging.LogRecord) -> bool:
        signal = getattr(current, "queueing", None)
        if signal is None:
            return True  # not ours
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - not ours to judge
            return True
        if not message.startswith(QUEUE_FULL):
            return True
        try:
            _count_queue_full(signal)
        except Exception:  # noqa: BLE001 - a logging filter must not raise into the SDK
            pass
        return False


def _count_queue_full(signal: str) -> None:
    health.dropped[signal] += 1
    _log.once(f"queue-full:{signal}", "hermes-otel: the %s export queue is full (the exporter cannot keep up); "
              "new items are dropped and counted in hermes.otel.exporter.dropped", signal)


class _SkipsFailingFlush:
    """A flush (session finalize) never waits for an endpoint known to be failing. The SDK's flush takes the lock
    its worker holds while exporting, and that worker tries a failing endpoint again now and then (up to the
    export timeout): so the flush of such a processor is left out. What it holds is exported by the worker
    (spooled, or dropped and counted), and each exporter has a processor of its own: the files still flush."""

    def __init__(self, exporter: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(exporter, *args, **kwargs)  # type: ignore[call-arg]
        endpoint = getattr(exporter, "endpoint", None)  # our spooling exporters' (and Relay's shaped ones')
        self.endpoint: str | None = endpoint if isinstance(endpoint, str) else None

    def force_flush(self, timeout_millis: int | None = 30000) -> bool:
        return not self._failing() and super().force_flush(timeout_millis)  # type: ignore[misc]

    def _failing(self) -> bool:
        return self.endpoint is not None and health.any_failing(frozenset((self.endpoint,)))


class OurBatchSpanProcessor(_SkipsFailingFlush, BatchSpanProcessor):
    """The SDK's batch span processor, marking its `on_end` as ours for the queue-full count (where the SDK drops
    silently, counting from a tally of its queue: :data:`SDK_SAYS_QUEUE_FULL`)."""

    def __init__(self, exporter: Any, max_queue_size: int | None = None, schedule_delay_millis: float | None = None,
                 max_export_batch_size: int | None = None, export_timeout_millis: float | None = None,
                 **kwargs: Any) -> None:
        self._room: _Room | None = None
        if not SDK_SAYS_QUEUE_FULL:  # a tally that never waits: spans end on the agent's threads
            self._room = _Room(max_queue_size, 0, lambda: True)
            exporter = _Counted(exporter, self._room)
        super().__init__(exporter, max_queue_size, schedule_delay_millis, max_export_batch_size,
                         export_timeout_millis, **kwargs)

    def on_end(self, span: Any) -> None:
        if self._room is not None and self._room.add():
            _count_queue_full("traces")
        current.queueing = "traces"
        try:
            super().on_end(span)
        finally:
            current.queueing = None

    def shutdown(self) -> None:
        if self._room is not None:
            self._room.close()
        super().shutdown()


class _Room:
    """Room in our log processor's queue, for our records thread to wait for instead of the SDK dropping the oldest.

    The SDK's queue has no public length nor anything to wait on, but the processor and its exporter are both
    ours: what `on_emit` handed in minus what `export` received (what the worker took out) is the queue's length,
    counted here (plus a batch between the worker's pop and its export, a few microseconds). The count is capped at
    the queue's size, as the queue is: at a full queue the SDK drops one for each one added. So a miscount errs
    low (toward the SDK's counted drop), never toward a wait with nothing in the queue to wait for. Where the SDK drops
    silently (:data:`SDK_SAYS_QUEUE_FULL`), a full count is what our processors count as a drop, spans' included."""

    def __init__(self, size: int | None, timeout_s: float, failing: Callable[[], bool]) -> None:
        self._held = 0
        self._failing = failing  # whether the exporter's endpoint is known to be failing: it spools, no wait
        self._size = size  # None: unknown (the SDK's default from the environment), never waited for
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
            if self._size is None:
                return False
            if (until is not None and self._held >= self._size and not self._closed and not self._stalled
                    and not self._failing()):
                wait_s = min(self._timeout_s, until - time.monotonic())
                if wait_s > 0:
                    self._stalled = not self._changed.wait_for(
                        lambda: self._held < self._size or self._closed, wait_s)  # type: ignore[operator]
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
        self.inner, self.room = inner, room
        self.shutdown = inner.shutdown  # the SDK passes a timeout when the exporter's own shutdown takes one

    def export(self, batch: Any) -> Any:
        self.room.taken(len(batch))
        return self.inner.export(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class OurBatchLogRecordProcessor(_SkipsFailingFlush, BatchLogRecordProcessor):
    """The SDK's batch log-record processor, marking its `on_emit` as ours for the queue-full count; our records
    thread waits for room in its full queue (:class:`_Room`) where any other thread's record drops the oldest."""

    def __init__(self, exporter: Any, schedule_delay_millis: float | None = None,
                 max_export_batch_size: int | None = None, export_timeout_millis: float | None = None,
                 max_queue_size: int | None = None, **kwargs: Any) -> None:
        self._room = _Room(max_queue_size, (export_timeout_millis or 10_000) / 1000, self._failing)
        super().__init__(_Counted(exporter, self._room), schedule_delay_millis, max_export_batch_size,
                         export_timeout_millis, max_queue_size, **kwargs)

    def on_emit(self, log_record: Any) -> None:
        if self._room.add() and not SDK_SAYS_QUEUE_FULL:
            _count_queue_full("logs")
        current.queueing = "logs"
        try:
            super().on_emit(log_record)
        finally:
            current.queueing = None

    def shutdown(self) -> None:
        self._room.close()  # no wait for room after shutdown: the SDK ignores what comes now
        super().shutdown()


# The SDK's message and logger for a drop at a full batch queue (a contract test holds us to them).
QUEUE_FULL = "Queue full, dropping "
QUEUE_LOGGER = "opentelemetry.sdk._shared_internal"
_queue_filter = _CountQueueFull()


def install_log_filter() -> None:
    """Idempotent: logging keeps one instance of a filter per logger."""
    for name in OTLP_EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _filter not in logger.filters:  # first: the SDK's DuplicateFilter must not hide a failure's reason
            logger.filters.insert(0, _filter)
    queue_logger = logging.getLogger(QUEUE_LOGGER)
    if _queue_filter not in queue_logger.filters:
        # One counter (a second copy of this package, loaded as a directory plugin, replaces the first's),
        # first in line: every drop is counted before the SDK's own duplicate filter can swallow the record.
        for old in [f for f in queue_logger.filters if getattr(f, "hermes_otel_queue_full", False)]:
            queue_logger.removeFilter(old)
        queue_logger.filters.insert(0, _queue_filter)


def _collector(endpoint: str) -> str:
    """`scheme://host:port` of an endpoint as written (no user info, path or query); total, even for a port out of
    range."""
    try:
        parts = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    except ValueError:
        return "(an unparsable endpoint)"
    where = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{where}" if parts.scheme else where


def short_reason(message: str) -> str:
    for marker in ("Connection refused", "timed out", "Name or service not known", "certificate verify failed"):
        if marker.lower() in message.lower():
            return marker.lower()
    return message[:200]
