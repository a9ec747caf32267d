"""The spool: batches the OTLP exporters could not deliver, on disk until they can be re-sent (docs/reliability.md:
layout and format, hostile contents, caps, the free-space floor, claims across processes).

``<directory>/<signal>/<created ns>-<pid>-<seq>-<key>.jsonl``: one batch per file, one OTLP/JSON export request a
line; ``<key>`` hashes the endpoint and its headers (:func:`endpoint_key`). Written whole (temporary file, fsync,
rename), 0600 in 0700 directories of ours; read never through a link nor blocking on a FIFO (a :class:`Stray`);
claimed with an exclusive non-blocking ``flock`` and removed while it is held.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import itertools
import json
import logging
import os
import re
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._internal import log as _log
from ...config.files import not_regular
from ..health import health
from ..private import ensure_dir

SIGNALS = ("traces", "logs", "metrics")
REASONS = ("size", "age", "disk", "rejected", "not_taken", "unreadable")  # why a batch left the spool unsent
FREE_FLOOR_BYTES = 64 * 1024 * 1024  # left free on the spool's disk for the local record (a tenth on small disks)
_NAME = re.compile(r"(\d{19})-(\d+)-(\d+)-([0-9a-f]{16})\.jsonl")
_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# Never follows a link, never waits for a FIFO's writer: anything but a regular file is refused after the open.
_OPEN_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
SPOOL_HINT = ("undeliverable telemetry is dropped and counted; make $HERMES_HOME/otel/spool a directory of your own, "
              "or set spool = false")
STALE_TEMP_S = 3600.0  # a temporary file this old was left by a crash
RESCAN_S = 30.0  # how often a writing process recounts what other processes added


def endpoint_key(protocol: str, endpoint: str, headers: Mapping[str, str] | None = None) -> str:
    """The name of an endpoint in spool file names: a hash, so no URL or credential is written to disk. The
    headers are part of it (names and values: a tenant, a project, a key), so a batch is only ever re-sent to the
    endpoint AND identity it was meant for: a changed tenant key never receives another tenant's batches. An
    endpoint without headers keeps the key it always had."""
    identity = f"{protocol} {endpoint}"
    if headers:
        identity += "".join(f"\n{name.lower()}: {value}" for name, value in sorted(headers.items()))
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def item_count(signal: str, batch: Any) -> int:
    """How many items a batch of `signal` holds, as the health counters count them (a metrics batch: its points)."""
    if signal != "metrics":
        return len(batch)
    return sum(len(m.data.data_points) for rm in batch.resource_metrics for sm in rm.scope_metrics for m in sm.metrics)


@dataclass(frozen=True)
class Entry:
    """One spooled batch."""

    signal: str
    path: Path
    key: str
    created_ns: int
    size: int
    mtime: float


class NotABatch(Exception):
    """A spool name that is not a batch we can read (a FIFO, a link, a file we may not open): reported and
    skipped, never waited on, followed or called busy; `hermes-otel spool drop` removes it."""


@dataclass(frozen=True)
class Stray:
    """Something under a batch's name, or in place of a spool directory, that is not one: what and why."""

    path: Path
    why: str
    removable: bool = True  # a name in a signal folder (removed by drop); a refused folder is left alone

    def text(self) -> str:
        if self.removable:
            return f"skipped {self.path}: {self.why} (`hermes-otel spool drop` removes it)"
        return f"not reading {self.path}: {self.why}"


def _kind(mode: int) -> str | None:
    """None for a regular file, else what it is."""
    return None if stat.S_ISREG(mode) else not_regular(mode)


class Spool:
    """One spool directory; thread-safe; shared with other processes through the file system."""

    def __init__(self, directory: Path, max_bytes: int, max_age_s: float) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._bytes: Counter[str] = Counter()  # signal -> bytes, as of the last scan plus our own changes
        self._scanned_at = -RESCAN_S  # monotonic time of the last scan (never: scan on first use)

    # -- writing -----------------------------------------------------------------------------------

    def put(self, signal: str, key: str, requests: list[dict[str, Any]]) -> int:
        """Write one batch (its export requests, one per line); returns its size. Raises OSError (a full disk,
        a read-only or foreign directory: :class:`.private.UnsafePath`)."""
        data = b"".join(json.dumps(r, separators=(",", ":")).encode("utf-8") + b"\n" for r in requests if r)
        if not data:
            return 0
        folder = self.directory / signal
        ensure_dir(self.directory, SPOOL_HINT)
        ensure_dir(folder, SPOOL_HINT)
        self._make_room(len(data))
        name = f"{time.time_ns():019d}-{os.getpid()}-{next(self._seq)}-{key}.jsonl"
        temporary = folder / f".{name}.tmp"
        handle = open(os.open(temporary, _OPEN_NEW, 0o600), "wb")  # noqa: SIM115 - closed by the with below
        try:
            with handle:
                handle.write(data)  # a buffered write: whole, however many os.write() it takes
                handle.flush()
                os.fsync(handle.fileno())  # the rename below must never publish a file whose data is not on disk yet
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        os.rename(temporary, folder / name)
        health.spooled[signal] += 1
        with self._lock:
            self._bytes[signal] += len(data)
            due = sum(self._bytes.values()) > self.max_bytes or time.monotonic() - self._scanned_at >= RESCAN_S
        if due:
            self.enforce_caps()
        return len(data)

    # -- reading -----------------------------------------------------------------------------------

    def entries(self, signal: str | None = None) -> list[Entry]:
        """Spooled batches, oldest first (all signals, or one); what is not a batch is skipped (see :meth:`scan`)."""
        return self.scan(signal)[0]

    def scan(self, signal: str | None = None) -> tuple[list[Entry], list[Stray]]:
        """Spooled batches, oldest first, and what sits under a batch's name or a spool folder's without being one.
        The directories are checked like the output directories (ours, no symbolic link), never followed."""
        found: list[Entry] = []
        strays: list[Stray] = []
        signals: tuple[str, ...] = (signal,) if signal else SIGNALS
        why = _folder_problem(self.directory)
        if why:
            strays.append(Stray(self.directory, why, removable=False))
            signals = ()
        for sig in signals:
            folder = self.directory / sig
            why = _folder_problem(folder)
            if why:
                strays.append(Stray(folder, why, removable=False))
                continue
            try:
                scan = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                strays.append(Stray(folder, f"cannot be listed ({exc.strerror})", removable=False))
                continue
            for item in scan:
                match = _NAME.fullmatch(item.name)
                if match is None:
                    if item.name.startswith(".") and item.name.endswith(".tmp"):
                        _remove_stale(Path(item.path))
                    continue
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue  # sent and removed meanwhile
                kind = _kind(st.st_mode)
                if kind:
                    strays.append(Stray(Path(item.path), kind))
                    continue
                found.append(Entry(sig, Path(item.path), match.group(4), int(match.group(1)), st.st_size,
                                   st.st_mtime))
        found.sort(key=lambda e: (e.created_ns, e.path.name))
        return found, strays

    def bytes_by_signal(self) -> dict[str, int]:
        """Bytes waiting per signal, as this process last counted them (no disk access)."""
        with self._lock:
            return {signal: self._bytes.get(signal, 0) for signal in SIGNALS}

    @contextlib.contextmanager
    def claim(self, entry: Entry) -> Iterator[int | None]:
        """The batch's file, open and exclusively locked; None when another process holds it or it is gone.
        Raises :class:`NotABatch` for anything but a regular file we may open (checked on the open file)."""
        try:
            fd = os.open(entry.path, _OPEN_READ)
        except FileNotFoundError:
            yield None
            return
        except OSError as exc:
            raise NotABatch(_open_problem(entry.path, exc)) from None
        try:
            kind = _kind(os.fstat(fd).st_mode)
            if kind:
                raise NotABatch(kind)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield None
                return
            yield None if os.fstat(fd).st_nlink == 0 else fd  # nlink 0: sent and removed by another process
        finally:
            os.close(fd)

    def remove(self, entry: Entry) -> None:
        """Remove a claimed batch (call while holding the claim)."""
        entry.path.unlink(missing_ok=True)
        with self._lock:
            self._bytes[entry.signal] = max(self._bytes[entry.signal] - entry.size, 0)

    def evict(self, entry: Entry, reason: str) -> bool:
        """Remove a batch unsent, unless a sender holds it; counted by reason."""
        try:
            with self.claim(entry) as fd:
                if fd is None:
                    return False
                self.remove(entry)
        except NotABatch:
            return False
        health.evicted[(entry.signal, reason)] += 1
        return True

    # -- caps ----------------------------------------------------------------------------------------

    def _make_room(self, size: int) -> None:
        """Room for `size` bytes above the disk's free-space floor, evicting the oldest batches ("disk") when
        that makes it; else OSError(ENOSPC): the batch is dropped (and counted), the local record keeps its room."""
        disk = os.statvfs(self.directory)
        free, short = disk.f_bavail * disk.f_frsize, size + free_floor(disk.f_blocks * disk.f_frsize)
        if free >= short:
            return
        for entry in self.entries():
            if free >= short:
                break
            if self.evict(entry, "disk"):
                free += entry.size
        if free < short:
            raise OSError(errno.ENOSPC, "No space left on device (the spool leaves the last of it to the local record)")

    def enforce_caps(self) -> dict[str, int]:
        """Evict batches older than the age cap, then the oldest until the size cap holds; returns evictions by
        reason. Also recounts what other processes added."""
        evicted: Counter[str] = Counter()
        cutoff = time.time() - self.max_age_s
        kept = []
        for entry in self.entries():
            if entry.mtime < cutoff and self.evict(entry, "age"):
                evicted["age"] += 1
            else:
                kept.append(entry)
        total, sizes = sum(e.size for e in kept), Counter[str]()
        for entry in kept:  # oldest first, until the size cap holds
            if total > self.max_bytes and self.evict(entry, "size"):
                evicted["size"] += 1
                total -= entry.size
            else:
                sizes[entry.signal] += entry.size
        with self._lock:
            self._bytes, self._scanned_at = sizes, time.monotonic()
        if evicted:
            _log.once(
                f"spool-evicted:{self.directory}",
                "hermes-otel: the spool %s is over its cap (%s); the oldest batches were evicted unsent (%s) and "
                "counted in hermes.otel.spool.evicted (repeats are logged at DEBUG)",
                self.directory, f"spool_max_mb {self.max_bytes // (1024 * 1024)}, spool_max_age "
                f"{self.max_age_s / 86400:g} days", ", ".join(f"{n} by {r}" for r, n in sorted(evicted.items())),
                per_process=True,
            )
        return dict(evicted)


class Requests:
    """The export requests of a spool file, read and decoded one line at a time, so a re-send never holds the
    whole batch as text and as dicts at once; `bad` counts the lines that could not be read (torn or not JSON
    objects), said once when the reading ends."""

    def __init__(self, path: Path, fd: int | None = None) -> None:
        self.path, self.fd, self.bad = Path(path), fd, 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.fd is not None:
            os.lseek(self.fd, 0, os.SEEK_SET)
            handle = os.fdopen(os.dup(self.fd), "rb")
        else:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed by the with below
        self.bad = 0
        with handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                except ValueError:
                    self.bad += 1
                    continue
                if isinstance(request, dict):
                    yield request
                else:
                    self.bad += 1
        if self.bad:
            _log.once(
                "spool-torn-line",
                "hermes-otel: skipped %d unreadable line(s) in the spooled batch %s (a torn write); the rest of the "
                "spool is unaffected (repeats are logged at DEBUG)", self.bad, self.path, level=logging.WARNING,
                per_process=True,
            )


_spools: dict[Path, Spool] = {}
_spools_lock = threading.Lock()


def free_floor(disk_bytes: int) -> int:
    """What the spool leaves free on a disk of `disk_bytes`: FREE_FLOOR_BYTES, or a tenth of a small disk."""
    return min(FREE_FLOOR_BYTES, disk_bytes // 10)


def open_spool(directory: Path, max_bytes: int, max_age_s: float) -> Spool:
    """The process's one :class:`Spool` for `directory` (its caps updated), so its accounting is shared."""
    with _spools_lock:
        spool = _spools.get(Path(directory))
        if spool is None:
            spool = _spools[Path(directory)] = Spool(directory, max_bytes, max_age_s)
        spool.max_bytes, spool.max_age_s = max_bytes, max_age_s
        return spool


def _folder_problem(folder: Path) -> str | None:
    """Why a spool folder is not read (a symbolic link, another user's), or None (ours, or not there yet)."""
    from ..private import problem

    why = problem(folder, ())
    if why is None or why.startswith("cannot be created") or why == "is not writable":
        return None
    return f"it {why}" if why.startswith("is ") else why


def _open_problem(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP or os.path.islink(path):
        return "a symbolic link, not followed"
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def _remove_stale(path: Path) -> None:
    try:
        if time.time() - os.lstat(path).st_mtime > STALE_TEMP_S:
            os.unlink(path)
    except OSError:
        pass


def spool_for(settings: Any) -> Spool | None:
    """The spool undeliverable telemetry goes to under `settings` (None with `spool = false`)."""
    if not settings.spool_enabled:
        return None
    return open_spool(settings.spool_directory, settings.spool_max_bytes, settings.spool_max_age_s)


REASON_ATTR = "hermes.otel.spool.reason"


def observe(meter_provider: Any, spool: Spool | None, scope: str, signal_attr: str) -> None:
    """`hermes.otel.spool.*`: what waits in `spool`, and what this process spooled, re-sent and evicted."""
    if spool is None:
        return
    from opentelemetry.metrics import Observation

    from ...version import __version__

    meter = meter_provider.get_meter(scope, __version__)

    def per_signal(counts: Any) -> list[Observation]:
        return [Observation(counts.get(signal, 0), {signal_attr: signal}) for signal in SIGNALS]

    def evicted(options: Any) -> list[Observation]:
        return [Observation(health.evicted.get((signal, reason), 0), {signal_attr: signal, REASON_ATTR: reason})
                for signal in SIGNALS for reason in REASONS]

    meter.create_observable_gauge(
        "hermes.otel.spool.size", callbacks=[lambda options: per_signal(spool.bytes_by_signal())], unit="By",
        description="Bytes of undelivered telemetry waiting in the spool, by signal")
    meter.create_observable_counter(
        "hermes.otel.spool.spooled", callbacks=[lambda options: per_signal(health.spooled)], unit="{batch}",
        description="Batches this process wrote to the spool, by signal")
    meter.create_observable_counter(
        "hermes.otel.spool.replayed", callbacks=[lambda options: per_signal(health.replayed)], unit="{batch}",
        description="Spooled batches this process re-sent and the endpoint acknowledged, by signal")
    meter.create_observable_counter(
        "hermes.otel.spool.evicted", callbacks=[evicted], unit="{batch}",
        description="Spooled batches this process removed unsent, by signal and reason")
