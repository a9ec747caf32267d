"""Follow the local record as it grows: each turn, whole, once its root span is written (`hermes-otel view --follow`).

The file exporter writes a batch per line and a turn's root ends (and is written) after its children, so a trace is
shown when its root arrives. The traces file is read from where the last poll stopped; when it is rotated (the
name now holds a new file) the old file is read to its end through the handle still open on it, then the new one
from its start, so nothing written around a rotation is lost. Memory is bounded: at most MAX_PENDING unfinished
traces are held (the oldest is dropped), and a partial last line is held only up to MAX_LINE.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import BinaryIO

from .decode import Span, decode_line
from .files import MAX_LINE, TRACES_FILE, open_file
from .traces import Trace, group_traces

__all__ = ["Follower"]

MAX_PENDING = 1000  # unfinished traces held; an older one is dropped
_READ = 1024 * 1024


class Follower:
    """`poll()` returns the traces whose root arrived since the last poll, in the order their roots were written.

    It starts at the end of the file: what was written before it started is not shown."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        self.path = path / TRACES_FILE if path.is_dir() else path
        self.bad_lines = 0
        self._handle: BinaryIO | None = None
        self._inode: tuple[int, int] | None = None
        self._partial = b""
        self._pending: OrderedDict[str, dict[str, Span]] = OrderedDict()
        self._open(at_end=True)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def poll(self) -> list[Trace]:
        done: list[Trace] = []
        if self._handle is None:
            self._open(at_end=False)  # the file appeared since
        if self._handle is None:
            return done
        self._read_new(done)
        if self._replaced():  # rotated: the rest of the old file, then the new one from its start
            self._read_new(done)
            self.close()
            self._partial = b""
            self._open(at_end=False)
            if self._handle is not None:
                self._read_new(done)
        return done

    def _open(self, at_end: bool) -> None:
        opened = open_file(self.path)
        if opened is None:
            return
        self._handle, size = opened
        info = os.fstat(self._handle.fileno())
        self._inode = (info.st_dev, info.st_ino)
        if at_end:
            self._handle.seek(size)

    def _replaced(self) -> bool:
        try:
            info = os.stat(self.path)
        except OSError:
            return False  # between the rename and the new file: keep reading the old one
        return (info.st_dev, info.st_ino) != self._inode

    def _read_new(self, done: list[Trace]) -> None:
        assert self._handle is not None
        while chunk := self._handle.read(_READ):
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()
            if len(self._partial) > MAX_LINE:  # an endless line: drop it, count it once
                self._partial = b""
                self.bad_lines += 1
            for line in lines:
                if line.strip():
                    self._take(line, done)

    def _take(self, line: bytes, done: list[Trace]) -> None:
        try:
            spans = decode_line(line)
        except Exception:  # noqa: BLE001 - a malformed line is skipped and counted, as everywhere
            self.bad_lines += 1
            return
        ended: list[str] = []
        for span in spans:
            members = self._pending.setdefault(span["trace_id"], {})
            members.setdefault(span["span_id"], span)
            if span["parent_span_id"] is None:
                ended.append(span["trace_id"])
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        for trace_id in dict.fromkeys(ended):
            members = self._pending.pop(trace_id, {})
            if members:
                done.extend(group_traces(members.values()))
