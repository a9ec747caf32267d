"""When the chunks of Hermes's streamed provider calls arrive: time to the first chunk, and between chunks.

Hermes 0.19.0 streams every provider call it can (the default, quiet mode included) on a request thread of its own,
and counts each chunk it reads in a per-attempt diagnostics dict that `agent.stream_diag.stream_diag_init` makes
just before it sends the request. We hand Hermes that dict with a clock in it: still a `dict` (Hermes reads and logs
it as before), which also notes when each chunk came. The clock is filed under the attempt's `chat` span, which the
request thread runs under (it carries our context: capture/patches.py; under middleware layers that is the chain's
innermost span, which hands it over to the attempt's when it ends: middleware/layers.py); the span's end takes it
(tracking/calls.py). A call that does not stream never makes
the dict: it costs nothing.

Hermes 0.20+ reports each delivered delta through its public `on_stream_delta` hook instead, on a worker thread of
its own that runs the callback in the context copied where the delta arose: the attempt's `chat` span is found there
(tracking/attempt.py's marker, set around the attempt), and the first delta's time from that span's start is
its time to the first chunk. The worker delivers each delta a little after it arose (the same lag for every delta:
the gaps between them hold).
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace

from . import attempt as _attempt

_MAX_GAPS = 4096  # per stream: the gaps of a longer reply are dropped, not its first chunk


class Clock:
    """When a streamed request went out and when its chunks came (`time.perf_counter` seconds)."""

    __slots__ = ("started", "first", "last", "gaps")

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.first: float | None = None  # seconds from the request to the first chunk
        self.last = self.started
        self.gaps: list[float] = []  # seconds between each later chunk and the one before it

    def chunk(self) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now - self.started
        elif len(self.gaps) < _MAX_GAPS:
            self.gaps.append(now - self.last)
        self.last = now


class _ClockedDiag(dict):
    """Hermes's diagnostics dict; setting its chunk count (Hermes does, first thing for each chunk) ticks the clock."""

    __slots__ = ("clock",)
    clock: Clock

    def __setitem__(self, key: Any, value: Any) -> None:
        if key == "chunks":
            self.clock.chunk()  # a clock read and an append: nothing there raises
        dict.__setitem__(self, key, value)


# The clock of each span whose request streamed, until the span's end takes it. Bounded: a clock nobody takes (a
# stream under a span that is not an attempt's) goes when the map fills.
CLOCKS: dict[Any, Clock] = {}
_MAX_CLOCKS = 1024


def take(span: Any) -> Clock | None:
    """The clock of `span`'s stream (the last one, if Hermes re-sent the request), once."""
    return CLOCKS.pop(span, None)


def terminal_ended(span: Any, attempt_context: Any) -> None:
    """A chain's real call (`span`) ended: the request thread ran under it, so a stream it timed is the attempt's."""
    if CLOCKS:
        hand_over(span, trace.get_current_span(attempt_context))


def hand_over(span: Any, attempt: Any) -> None:
    """A stream timed under `span` (a chain's innermost span) belongs to `attempt` (its `chat` span)."""
    clock = CLOCKS.pop(span, None)
    if clock is not None:
        CLOCKS[attempt] = clock


def _clocked(diag: Any) -> Any:
    span: Any = trace.get_current_span()
    if type(diag) is not dict or not span.is_recording():
        return diag
    clock = Clock()
    if len(CLOCKS) >= _MAX_CLOCKS:
        CLOCKS.clear()
    CLOCKS[span] = clock
    timed = _ClockedDiag(diag)
    timed.clock = clock
    return timed


def delta() -> None:
    """A delta of the attempt current in this context arrived (Hermes 0.20+'s `on_stream_delta`)."""
    attempt = _attempt.current()
    if attempt is None:
        return
    clock = CLOCKS.get(attempt)
    if clock is None:
        started_ns = getattr(attempt, "start_time", None)  # the SDK's spans; another's: untimed
        if not isinstance(started_ns, int) or not attempt.is_recording():
            return
        if len(CLOCKS) >= _MAX_CLOCKS:
            CLOCKS.clear()
        clock = CLOCKS[attempt] = Clock(time.perf_counter() - (time.time_ns() - started_ns) / 1e9)
    clock.chunk()
