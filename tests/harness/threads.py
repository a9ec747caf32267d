"""Tests that export to dead endpoints leave exporter threads retrying after a bounded shutdown; this waits for
them, so they do not run on into the next test (where, say, their retry jitter moves the global `random`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


@contextlib.contextmanager
def threads_finish(timeout_s: float = 30.0) -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + timeout_s
    for thread in set(threading.enumerate()) - before:
        if thread.daemon and thread.name.startswith(("Otel", "hermes-otel")):
            thread.join(max(deadline - time.monotonic(), 0))
