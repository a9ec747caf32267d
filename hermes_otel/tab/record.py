"""The Traces tab's reads of the local record, bounded whatever the record's size and however fast a user types.

- At most MAX_SCANS reads of the files at once; another request that needs one is answered "busy" at once (as the
  Jaeger source does), so typing cannot pile up scans and the dashboard's worker threads stay free.
- A scan's newest SCAN turns are kept (per profile's record, the last KEPT of them) and reused while the files are
  unchanged; when the newest file only grew, just the lines appended since are read and merged in.
- A scan reads at most SCAN_BYTES of the newest lines, and what is kept is re-read whole once SCAN_BYTES more has been
  appended to it, so memory stays bounded by those two numbers, not by the record.
"""

from __future__ import annotations

import heapq
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..local.decode import Span
from ..local.files import Counter, decoded, forward, open_file, trace_files
from ..local.traces import Trace, build_trace, read_traces

SCAN = 1000  # turns kept: those a filter searches and the sessions view sums, the newest ones
SCAN_BYTES = 32 * 1024 * 1024  # of the newest lines one scan reads at most
MAX_SCANS = 1
KEPT = 4  # records (profiles) whose newest turns are kept
_BACK = 64 * 1024

_slots = threading.BoundedSemaphore(MAX_SCANS)
_lock = threading.Lock()  # guards _kept
_kept: OrderedDict[Path, _Kept] = OrderedDict()

State = tuple[tuple[str, int, int, int, int], ...]  # per file: path, device, inode, size, mtime


class RecordBusy(Exception):
    """MAX_SCANS reads of the record are already running."""


@dataclass(frozen=True)
class _Kept:
    state: State  # the files as they were when read
    tail: int  # where the newest file's complete lines ended
    spans: dict[str, dict[str, Span]]  # by trace, then span id
    traces: list[Trace]  # the newest SCAN, oldest first
    held: int  # bytes of lines read into it
    bad_lines: int
    complete: bool


def newest(directory: Path, last: int) -> tuple[list[Trace], int, bool]:
    """The `last` newest turns (oldest first), lines skipped, and whether the whole record was searched."""
    kept = _current(directory)
    return kept.traces[-last:], kept.bad_lines, kept.complete


def one(directory: Path, trace_id: str) -> Trace | None:
    """One of the newest turns by its full id, else None (the caller then searches the files)."""
    spans = _current(directory).spans.get(trace_id)
    return build_trace(trace_id, spans) if spans else None


class scan_slot:
    """Holds one of the MAX_SCANS slots, or raises RecordBusy at once."""

    def __enter__(self) -> None:
        if not _slots.acquire(blocking=False):
            raise RecordBusy("the local record is being read for another request; try again")

    def __exit__(self, *exc: object) -> None:
        _slots.release()


def _current(directory: Path) -> _Kept:
    state = _state(trace_files(directory))
    with _lock:
        kept = _kept.get(directory)
    if kept is not None and kept.state == state:
        return kept
    with scan_slot():
        with _lock:  # another request may have read it while this one waited for the slot
            kept = _kept.get(directory)
        if kept is not None and kept.state == state:
            return kept
        if kept is not None and _appended(kept, state) and kept.held < 2 * SCAN_BYTES:
            kept = _extend(kept, state)
        else:
            kept = _scan(directory, state)
    with _lock:
        _kept[directory] = kept
        _kept.move_to_end(directory)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return kept


def _state(files: list[Path]) -> State:
    found = []
    for path in files:
        try:
            info = os.stat(path)
        except OSError:
            continue
        found.append((str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))
    return tuple(found)


def _appended(kept: _Kept, state: State) -> bool:
    """Only the newest file changed, and only by growing (no rotation, no file replaced)."""
    if not kept.state or len(state) != len(kept.state) or state[:-1] != kept.state[:-1]:
        return False
    was, now = kept.state[-1], state[-1]
    return was[:3] == now[:3] and now[3] >= was[3]


def _scan(directory: Path, state: State) -> _Kept:
    reading = read_traces(directory, last=SCAN, max_bytes=SCAN_BYTES)
    spans = {trace.trace_id: {span["span_id"]: span for span in trace.spans} for trace in reading.traces}
    tail = 0
    if state and (opened := open_file(Path(state[-1][0]))) is not None:
        with opened[0] as handle:
            tail = _line_end(handle, state[-1][3], 0)
    return _Kept(state, tail, spans, reading.traces, reading.bytes_read, reading.bad_lines, reading.complete)


def _extend(kept: _Kept, state: State) -> _Kept:
    """`kept` with the lines appended to the newest file since: the turns they touch rebuilt, the oldest let go."""
    opened = open_file(Path(state[-1][0]))
    if opened is None:
        return kept
    counter = Counter()
    spans = dict(kept.spans)
    touched: set[str] = set()
    with opened[0] as handle:
        tail = _line_end(handle, state[-1][3], kept.tail)
        handle.seek(kept.tail)
        for batch in decoded(forward(handle, tail - kept.tail, counter), counter):
            for span in batch:
                trace_id = span["trace_id"]
                if trace_id not in touched:  # copied before changing: an answer being built may hold the old one
                    spans[trace_id] = dict(spans.get(trace_id, {}))
                    touched.add(trace_id)
                spans[trace_id].setdefault(span["span_id"], span)
    built = {trace.trace_id: trace for trace in kept.traces if trace.trace_id not in touched}
    built.update((trace_id, build_trace(trace_id, spans[trace_id])) for trace_id in touched)
    traces = heapq.nlargest(SCAN, built.values(), key=_order)
    traces.reverse()  # oldest first
    spans = {trace.trace_id: spans[trace.trace_id] for trace in traces}
    return _Kept(state, tail, spans, traces, kept.held + counter.bytes, kept.bad_lines + counter.bad,
                 kept.complete and len(built) <= SCAN)


def _order(trace: Trace) -> tuple[int, str]:
    """The order group_traces gives: by first root's start."""
    return (trace.roots[0]["start_ns"] if trace.roots else trace.start_ns, trace.trace_id)


def _line_end(handle: BinaryIO, size: int, floor: int) -> int:
    """Where the last complete line within the first `size` bytes ends (not before `floor`)."""
    end = size
    while end > floor:
        start = max(floor, end - _BACK)
        handle.seek(start)
        newline = handle.read(end - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return floor
