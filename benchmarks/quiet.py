"""Clock a round's CPU up to quiet: the work a round hands to other threads (the records thread, the SDK's
exporters, our OTLP send threads) must be charged to that round, not to the next one."""

from __future__ import annotations

import time

STEP_S = 0.02
QUIET = 0.02  # the process used under 2% of a core during a step: nothing of the round is left running


def settle(limit_s: float = 10.0) -> None:
    """Return once the process's CPU has gone quiet (at most `limit_s`)."""
    deadline = time.monotonic() + limit_s
    last = time.process_time()
    while time.monotonic() < deadline:
        time.sleep(STEP_S)
        now = time.process_time()
        if now - last < STEP_S * QUIET:
            return
        last = now
