"""The local record's files: which ones, opened safely, read forwards or backwards in bounded memory and time.

Only regular files are read (a FIFO, a device such as /dev/zero or a socket would block or never end), each only
as far as its size when it was opened (a file that keeps growing cannot make a read endless), and a line longer
than MAX_LINE is skipped and counted, never held whole. A file that vanishes between listing and opening (a
spool another process is draining, a rotation) is skipped.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .decode import Span, decode_line

__all__ = ["MAX_LINE", "TRACES_FILE", "Counter", "backward", "batches", "decoded", "forward", "open_file",
           "trace_files"]

TRACES_FILE = "traces.jsonl"
MAX_LINE = 64 * 1024 * 1024  # a longer line is skipped (counted as bad), never held whole
_BLOCK = 1024 * 1024


def trace_files(path: Path) -> list[Path]:
    """A traces file, or a directory's ``traces.jsonl`` and its rotated backups, oldest first (or, for a directory
    without them, such as ``otel/spool/traces``, its ``*.jsonl`` files in name order).

    A path named directly must be a regular file (OSError "not a regular file" otherwise)."""
    path = Path(path)
    if not path.is_dir():
        mode = path.stat().st_mode  # FileNotFoundError when it does not exist
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return [path]
    backup = re.compile(re.escape(TRACES_FILE) + r"\.(\d+)")
    numbered = [
        (_mtime(child), int(match.group(1)), child)
        for child in _children(path)
        if (match := backup.fullmatch(child.name)) and child.is_file()
    ]
    # Oldest first by last write: backups are numbered upwards (the highest is the newest), but files of
    # older versions numbered the other way (.1 the newest); the time of the last write orders both.
    files = [child for _, _, child in sorted(numbered)]
    current = path / TRACES_FILE
    files = files + [current] if current.is_file() else files
    if not files:
        files = sorted(c for c in _children(path)
                       if c.suffix == ".jsonl" and not c.name.startswith(".") and c.is_file())
    return files


def _children(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except FileNotFoundError:  # the directory itself went away (a drained spool)
        return []


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def open_file(path: Path) -> tuple[BinaryIO, int] | None:
    """The file opened for reading and its size now, or None when it vanished or is not a regular file.

    Opened non-blocking, so a FIFO put in a file's place cannot hang the reader before it is seen as one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        try:
            os.close(fd)
        except OSError:
            pass
        raise


@dataclass
class Counter:
    lines: int = 0  # non-blank lines read
    bad: int = 0
    bytes: int = 0  # of those lines


def forward(file: BinaryIO, size: int, counter: Counter) -> Iterator[bytes]:
    """The lines of the first `size` bytes of a file, first first (a line longer than MAX_LINE is skipped)."""
    left = size
    while left > 0:
        line = file.readline(min(MAX_LINE + 1, left))
        if not line:
            return
        left -= len(line)
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            counter.bad += 1
            while left > 0 and (rest := file.readline(min(_BLOCK, left))):
                left -= len(rest)
                if rest.endswith(b"\n"):
                    break
            continue
        if line.strip():
            counter.lines += 1
            counter.bytes += len(line)
            yield line


def backward(file: BinaryIO, size: int, counter: Counter) -> Iterator[bytes]:
    """The lines of the first `size` bytes of a file, last first, reading blocks from the end (a line longer than
    MAX_LINE is skipped)."""
    position, tail, skipping = size, b"", False
    while position > 0:
        block = min(_BLOCK, position)
        position -= block
        file.seek(position)
        chunk = file.read(block)
        if skipping:
            newline = chunk.rfind(b"\n")
            if newline < 0:
                continue  # still inside the overlong line
            chunk, skipping = chunk[: newline + 1], False
        parts = (chunk + tail).split(b"\n")
        tail = parts[0]
        for line in reversed(parts[1:]):
            if line.strip():
                counter.lines += 1
                counter.bytes += len(line)
                yield line
        if len(tail) > MAX_LINE:
            counter.bad += 1
            tail, skipping = b"", True
    if tail.strip() and not skipping:
        counter.lines += 1
        counter.bytes += len(tail)
        yield tail


def decoded(lines: Iterable[bytes], counter: Counter) -> Iterator[list[Span]]:
    """The spans of each line that has any; a line that is not a valid request is counted in `counter.bad`."""
    for line in lines:
        try:
            spans = decode_line(line)
        except Exception:  # noqa: BLE001 - any malformed line (deep, huge numbers, Infinity, wrong types): skip it
            counter.bad += 1
            continue
        if spans:
            yield spans


def batches(files: Iterable[Path], counter: Counter, *, newest_first: bool = False,
            keep: Callable[[bytes], bool] | None = None) -> Iterator[list[Span]]:
    """The decoded lines of `files` (given oldest first) in file order, or newest line first, only those `keep`
    accepts (before decoding); files that vanished or are not regular files are skipped."""
    for path in (reversed(list(files)) if newest_first else files):
        opened = open_file(path)
        if opened is None:
            continue
        handle, size = opened
        with handle:
            lines = backward(handle, size, counter) if newest_first else forward(handle, size, counter)
            yield from decoded(lines if keep is None else filter(keep, lines), counter)
