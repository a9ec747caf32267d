"""Span, log and metric exporters that append OTLP/JSON lines to rotating files.

Each line is an ``Export*ServiceRequest`` in the OTLP/JSON mapping, the
format the Collector's ``otlp_json_file`` receiver reads: one batch (a span
or log batch, a metrics collection) per line. The exporters run on the SDK's worker threads, so encoding and
I/O stay off the agent's thread; they never raise into those threads.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..._internal.log import logger as _logger
from ..private import UnsafePath
from ..private import open_file as open_private
from .otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord

_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT  # os.open makes every descriptor close-on-exec (PEP 446)


SIGNAL_FILES = ("traces.jsonl", "logs.jsonl", "metrics.jsonl")


def file_paths(directory: Path) -> dict[str, Path]:
    """The per-signal files inside an output directory."""
    directory = Path(directory)
    return {name.split(".")[0]: directory / name for name in SIGNAL_FILES}


class RotatingJsonLinesWriter:
    """Thread- and process-safe appender of compact JSON lines with size-based rotation.

    A full ``path`` is renamed to ``path.<n>``, ``n`` counting up (the newest backup has the highest number),
    and ``path.<n - backups>`` is removed: two operations, however many backups are kept, so disk use stays
    within ``(backups + 1) * max_bytes`` except for a single line larger than ``max_bytes``, which gets a fresh
    file of its own rather than being lost.

    Several processes may share the files (Hermes CLI runs, a gateway): rotation happens under an exclusive
    ``flock`` on a hidden lock file next to ``path`` (``.<name>.lock``, which also keeps the backup counter),
    after checking that the file is still the one found full, so no process renames over another's backup or
    rotates a file that another just started. The descriptor stays open between writes, but every write first
    stats the path (one syscall per export batch) and reopens if the file was rotated or removed by someone
    else (another process, logrotate, a user clearing the files).

    A line left torn by a failed write (a full disk) or a killed process is terminated before the next record
    is appended (the last byte is checked, one ``pread``), so it never costs that record. Nothing is opened or
    created until the first write, so a bad path shows up as an export failure instead of breaking plugin
    start-up.
    """

    def __init__(self, path: Path, max_bytes: int = 20 * 1024 * 1024, backups: int = 3) -> None:  # config's defaults
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        if backups < 0:
            raise ValueError("backups must be >= 0")
        self._path = Path(path)
        self._max_bytes = max_bytes
        self._backups = backups
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._size = 0

    @property
    def path(self) -> Path:
        return self._path

    def write(self, obj: dict[str, Any]) -> None:
        """Append ``obj`` as one JSON line. Raises ``OSError`` on I/O failure."""
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            try:
                fd = self._current_fd()
                if self._size > 0 and self._size + len(data) > self._max_bytes:
                    fd = self._rotate(len(data))
                if self._size > 0 and os.pread(fd, 1, self._size - 1) not in (b"\n", b""):
                    data = b"\n" + data  # end a torn line (a failed write, a killed writer) first
                _write_all(fd, data)
                self._size += len(data)
            except OSError:
                self._close_fd()  # start clean next time, e.g. after the disk frees up
                raise

    def close(self) -> None:
        """Release the descriptor; a later ``write`` reopens the file."""
        with self._lock:
            self._close_fd()

    def _current_fd(self) -> int:
        if self._fd is not None:
            try:
                st = os.stat(self._path)
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_dev, st.st_ino) == self._identity:
                self._size = st.st_size  # also counts appends by other processes
                return self._fd
            self._close_fd()
        return self._open()

    def _open(self) -> int:
        # Ours, 0600, in a directory of ours whose other signal files are not planted; else UnsafePath.
        fd, st = open_private(self._path, _OPEN_FLAGS, SIGNAL_FILES)
        self._fd = fd
        self._identity = (st.st_dev, st.st_ino)
        self._size = st.st_size
        return fd

    def _rotate(self, incoming: int) -> int:
        """Under the lock: rotate the current file if it is still the full one we saw, else take the one another
        process started. Returns the descriptor to append to."""
        lock_fd, _ = open_private(self._path.with_name(f".{self._path.name}.lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            fd = self._current_fd()  # re-checked under the lock: another process may have rotated meanwhile
            if self._size > 0 and self._size + incoming > self._max_bytes:
                self._close_fd()
                self._shift(lock_fd)
                fd = self._open()
            return fd
        finally:
            os.close(lock_fd)  # releases the lock

    def _shift(self, lock_fd: int) -> None:
        """``path`` becomes the newest backup and the backup ``backups`` generations older goes (lock held)."""
        if self._backups == 0:
            _remove(self._path)
            return
        counted = _read_counter(lock_fd)
        generation = (counted if counted is not None else max((n for n, _ in self._backups_found()), default=0)) + 1
        try:
            os.rename(self._path, self._backup(generation))
        except FileNotFoundError:
            return  # removed meanwhile; nothing to keep
        os.pwrite(lock_fd, f"{generation}\n".encode(), 0)
        os.ftruncate(lock_fd, len(f"{generation}\n"))
        if counted is None:
            self._keep_newest()  # no counter yet (first rotation, or files of an older version): tidy once
        else:
            _remove(self._backup(generation - self._backups))

    def _backups_found(self) -> list[tuple[int, Path]]:
        pattern = re.compile(re.escape(self._path.name) + r"\.(\d+)")
        found = []
        for child in self._path.parent.iterdir():
            match = pattern.fullmatch(child.name)
            if match:
                found.append((int(match.group(1)), child))
        return found

    def _keep_newest(self) -> None:
        def newest_first(item: tuple[int, Path]) -> tuple[float, int]:
            try:
                return -item[1].stat().st_mtime, -item[0]
            except OSError:
                return 0.0, -item[0]

        for _, path in sorted(self._backups_found(), key=newest_first)[self._backups:]:
            _remove(path)

    def _backup(self, index: int) -> Path:
        return self._path.with_name(f"{self._path.name}.{index}")

    def _close_fd(self) -> None:
        fd, self._fd, self._identity, self._size = self._fd, None, None, 0
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _read_counter(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _FileExporter:
    """Encodes and writes one batch per export, turning every failure into FAILURE (never raising into the SDK).

    The first failure is logged at WARNING and later ones at DEBUG, so a full
    disk does not flood the log, nor loop if hermes_otel's own log records are
    themselves exported.
    """

    _signal = ""

    def __init__(self, writer: RotatingJsonLinesWriter) -> None:
        super().__init__()  # (the metric exporter's: the SDK's default temporality and aggregation)
        self._writer = writer
        self._warned = False
        self._shut_down = False

    def _emit(self, encode: Callable[[], dict[str, Any]], result: Any) -> Any:
        """`result`: the signal's export result enum (SUCCESS / FAILURE)."""
        if self._shut_down:
            return result.FAILURE
        try:
            obj = encode()
            if obj:  # an empty batch encodes to {}; do not write blank requests
                self._writer.write(obj)
        except UnsafePath:
            return result.FAILURE  # said once per directory by the check itself
        except OSError as exc:
            self._report("cannot write %s to %s: %s", self._signal, self._writer.path, exc)
            return result.FAILURE
        except Exception as exc:  # noqa: BLE001 - an exporter must not raise into the SDK
            self._report("cannot encode %s for %s: %r", self._signal, self._writer.path, exc)
            return result.FAILURE
        return result.SUCCESS

    def _report(self, message: str, *args: object) -> None:
        if self._warned:
            _logger.debug(message, *args)
            return
        self._warned = True
        _logger.warning(message + " (further failures are logged at DEBUG)", *args)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._shut_down = True
        self._writer.close()

    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        return True  # writes go straight to the kernel; nothing is buffered here


class JsonFileSpanExporter(_FileExporter, SpanExporter):
    """Writes span batches as ``ExportTraceServiceRequest`` lines, one batch per line."""

    _signal = "spans"

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._emit(lambda: encode_spans_json(spans), SpanExportResult)


class JsonFileLogExporter(_FileExporter, LogRecordExporter):
    """Writes log batches as ``ExportLogsServiceRequest`` lines, one batch per line."""

    _signal = "logs"

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return self._emit(lambda: encode_logs_json(batch), LogRecordExportResult)


class JsonFileMetricExporter(_FileExporter, MetricExporter):
    """Writes each metrics collection as one ``ExportMetricsServiceRequest`` line."""

    _signal = "metrics"

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return self._emit(lambda: encode_metrics_json(metrics_data), MetricExportResult)
