"""Handing the GIL to a waiting thread, from our background threads.

`time.sleep(0)` releases the GIL, but the releasing thread takes it straight
back before a waiting thread is scheduled; the waiter then waits out the
interpreter's 5 ms switch interval. Blocking briefly lets it in. The builder
and our exporters call :func:`pause` between small units of work, so that an
agent thread that wakes up (its model answered) never waits long.
"""

from __future__ import annotations

import time

PAUSE_S = 0.0002  # long enough for a waiting thread to be scheduled and take the GIL


def pause() -> None:
    """Block briefly so that a thread waiting for the GIL gets it now (background threads only)."""
    time.sleep(PAUSE_S)
