"""Observer log records and metric measurements, handed off the agent's thread.

Spans are the SDK's own, made inline where the call happens. An observer hook's log record is
complete when the hook fires (timestamps, attributes, body and span are fixed then), and a metric
measurement is a value, attributes and a context: both go through the SDK a moment later on this
thread, unchanged; what that saves the agent's thread is the SDK's log and metric pipelines (more
than half of what our telemetry costs it, measured in `make bench`). The only thing that moves is
the time the SDK stamps on an exemplar, by this thread's delay (sub-millisecond when it is idle).

The queue is bounded: past `limit` items new records and measurements are refused, counted in
`hermes.otel.exporter.dropped{hermes.otel.signal="logs"}` and reported once, while work that ends a
span (`submit_end`) runs at once on the caller's thread instead. After shutdown, work runs at once
on the caller's thread, so nothing submitted is lost.

This thread's work (and a drain's) may wait: a log record emitted into one of our log processors whose queue is
full waits for the processor's thread to take a batch, at most the export timeout per wait
(exporters/health.py, `_Room`). So a healthy collector slower than the agent costs no record; the agent's thread,
which only hands work over, never waits.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from ._internal import log as _log
from .exporters.health import current, health


class Inline:
    """Run at once (pipelines the host owns, and tests)."""

    dropped = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        _run(fn, args)

    submit_end = submit

    def drain(self, timeout_s: float | None = None) -> bool:
        return True

    def shutdown(self, timeout_s: float | None = None) -> bool:
        return True


class Emitter:
    """Work run in order on one daemon thread (`hermes-otel-records`), woken when work arrives."""

    def __init__(self, *, limit: int = 16384) -> None:
        self._items: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._limit = limit
        self._wake = threading.Event()
        self._running = threading.Lock()  # held while work runs: drain() keeps the order
        self._stopped = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._loop, name="hermes-otel-records", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._stopped:
            _run(fn, args)
            return
        if len(self._items) >= self._limit:
            self._drop()
            return
        self._items.append((fn, args))
        if not self._wake.is_set():  # set() takes a lock and notifies; once set, the worker is due to look anyway
            self._wake.set()
        if self._stopped:  # shut down while we appended: the final drain may have missed it
            self.drain(0)

    def submit_end(self, fn: Callable[..., Any], *args: Any) -> None:
        """Work that ends a span: never dropped. Past the limit it runs at once on the caller's thread
        (the queue stays bounded; the caller pays for it instead)."""
        if self._stopped or len(self._items) >= self._limit:
            _run(fn, args)
            return
        self.submit(fn, *args)

    def drain(self, timeout_s: float | None = None) -> bool:
        """Run everything submitted so far (on this thread if the worker is idle); False on timeout. The work
        waits for room in a full log queue of ours as on the records thread, but not past `timeout_s`."""
        until = math.inf if timeout_s is None else time.monotonic() + max(timeout_s, 0.0)
        if not self._running.acquire(timeout=-1 if timeout_s is None else max(timeout_s, 0.0)):
            return False
        try:
            self._run_all(until)
        finally:
            self._running.release()
        return True

    def shutdown(self, timeout_s: float | None = None) -> bool:
        self._stopped = True
        self._wake.set()
        return self.drain(timeout_s)

    def __len__(self) -> int:
        return len(self._items)

    def _loop(self) -> None:
        while not self._stopped:
            self._wake.wait()
            self._wake.clear()
            with self._running:
                self._run_all(math.inf)

    def _run_all(self, until: float) -> None:
        """Run the queue; a log record emitted by this work into a full queue of ours waits for room, each wait
        bounded by the export timeout and by `until` (exporters/health.py, `_Room`)."""
        pop = self._items.popleft
        current.room_until = until
        try:
            while True:
                try:
                    fn, args = pop()
                except IndexError:
                    return
                _run(fn, args)
        finally:
            current.room_until = None

    def _drop(self) -> None:
        self.dropped += 1
        health.dropped["logs"] += 1
        _log.once("records:full", "hermes-otel: %d observer records are waiting to be emitted; new ones are dropped "
                  "and counted until the queue drains", self._limit)


def _run(fn: Callable[..., Any], args: tuple) -> None:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - a fault in one record must not stop the rest
        _log.once(
            f"records:{getattr(fn, '__qualname__', fn)}:{type(exc).__name__}",
            "hermes-otel: internal error emitting a record in %s (%s: %s)",
            getattr(fn, "__qualname__", repr(fn)), type(exc).__name__, exc, exc_info=True,
        )
