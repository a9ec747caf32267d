"""A bounded queue drained by one daemon thread: the agent's thread only enqueues."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ..health import health


class QueueWorker:
    """`submit()` from any thread; `handle(batch)` runs on the worker, in order.

    Past `limit` queued items new ones are dropped and counted under
    `health.dropped[signal]`; after `stop()` nothing is accepted. `on_exit`
    runs on the worker once the queue is drained after a stop (e.g. to close
    files it alone writes to).
    """

    def __init__(
        self,
        name: str,
        handle: Callable[[Sequence[Any]], None],
        *,
        signal: str,
        limit: int = 20_000,
        on_exit: Callable[[], None] | None = None,
    ) -> None:
        self._handle = handle
        self._signal = signal
        self._limit = limit
        self._on_exit = on_exit
        self._pending: deque = deque()
        self._cond = threading.Condition()
        self._idle = threading.Event()
        self._idle.set()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: Any) -> None:
        with self._cond:
            if self._stopped:
                return
            if len(self._pending) >= self._limit:
                health.dropped[self._signal] += 1
                return
            self._pending.append(item)
            self._idle.clear()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._idle.set()
                    self._cond.wait(0.5)
                if not self._pending:
                    self._idle.set()
                    break
                batch = list(self._pending)
                self._pending.clear()
            self._handle(batch)
        if self._on_exit is not None:
            self._on_exit()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            self._cond.notify()
        return self._idle.wait(max(timeout_s, 0))

    def stop(self, timeout_s: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout_s)
