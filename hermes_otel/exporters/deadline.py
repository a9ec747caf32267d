"""One deadline for a whole OTLP/HTTP export: connect, send and every byte of the answer, whatever its framing.

`requests` (the SDK exporter's HTTP client) applies its timeout to each socket read, so a collector that drips its
answer a byte at a time holds an export for ever. Our session's connections (:class:`Adapter`) hand their socket,
once connected and at each request, to one watcher thread for the process; at the export's deadline (set by the
exporter around the SDK's export, :func:`until`) the watcher shuts the socket down, so the read in progress ends at
once and the SDK's export returns a failure. :func:`cut` does the same at once (shutdown, exit). No thread per
export, none left behind.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import os
import select
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from .health import current  # .at and .export (the owner) of the export running on this thread


@contextlib.contextmanager
def until(at: float, owner: Any) -> Iterator[None]:
    """Within: every socket our sessions use on this thread is shut down at monotonic time `at` (or by cut(owner))."""
    current.at, current.export = at, owner
    try:
        yield
    finally:
        current.at = current.export = None
        _watcher.disarm(threading.get_ident())


def left() -> float | None:
    """Seconds left before this thread's export's deadline: 0 once past it (None: no export is running on it)."""
    at = getattr(current, "at", None)
    return None if at is None else max(at - time.monotonic(), 0.0)


def cut(owner: Any) -> None:
    """Shut down now every socket armed for `owner`'s exports, and refuse its connects from now on."""
    _watcher.cut(owner)


def is_cut(owner: Any) -> bool:
    """Whether `owner` was cut (closed for good)."""
    return _watcher.is_cut(owner)


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Condition(threading.Lock())
        self._armed: dict[int, tuple[float, Any, _Handle]] = {}  # token -> (deadline, owner, socket)
        self._by_thread: dict[int, list[int]] = {}
        self._heap: list[tuple[float, int]] = []
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self._cut: weakref.WeakSet[Any] = weakref.WeakSet()  # owners cut (closed for good): no connect for them

    def is_cut(self, owner: Any) -> bool:
        return owner is not None and owner in self._cut

    def arm(self, sock: socket.socket) -> None:
        at, owner = getattr(current, "at", None), getattr(current, "export", None)
        if at is None or sock is None:
            return
        handle = _Handle(sock)
        if time.monotonic() >= at or self.is_cut(owner):
            handle.shut()
            return
        with self._lock:
            if self.is_cut(owner):  # cut since the check above: cut() did not see this socket
                handle.shut()
                return
            token = next(self._tokens)
            self._armed[token] = (at, owner, handle)
            self._by_thread.setdefault(threading.get_ident(), []).append(token)
            heapq.heappush(self._heap, (at, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hermes-otel-deadline", daemon=True)
                self._thread.start()
            self._lock.notify()

    def disarm(self, thread: int) -> None:
        with self._lock:
            for token in self._by_thread.pop(thread, ()):
                self._armed.pop(token, None)

    def cut(self, owner: Any) -> None:
        with self._lock:
            self._cut.add(owner)  # a connect in progress for it gives up too
            found = [(token, handle) for token, (_, who, handle) in self._armed.items() if who is owner]
            for token, _ in found:
                del self._armed[token]
        for _, handle in found:
            handle.shut()

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._heap and self._heap[0][1] not in self._armed:
                    heapq.heappop(self._heap)  # disarmed: its export ended in time
                wait = self._heap[0][0] - time.monotonic() if self._heap else None
                if wait is None or wait > 0:
                    self._lock.wait(wait)
                    continue
                _, token = heapq.heappop(self._heap)
                _, _, handle = self._armed.pop(token)
            handle.shut()


class _Handle:
    """A connection's socket by descriptor and inode: TLS takes the descriptor over from the socket object urllib3
    connected (which then reads as closed), and a descriptor closed meanwhile may be another file's by now, which
    the inode tells apart."""

    __slots__ = ("fd", "inode")

    def __init__(self, sock: socket.socket) -> None:
        self.fd = sock.fileno()
        try:
            self.inode = os.fstat(self.fd).st_ino if self.fd >= 0 else -1
        except OSError:
            self.inode = -1

    def shut(self) -> None:
        """Shut the connection down (the read in progress returns at once); a copy of the descriptor is used, so
        the socket is the one armed or none."""
        if self.fd < 0:
            return
        try:
            copy = os.dup(self.fd)
        except OSError:
            return
        try:
            if os.fstat(copy).st_ino == self.inode:
                with socket.socket(fileno=copy) as sock:  # closes the copy only
                    copy = -1
                    sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            if copy >= 0:
                os.close(copy)


_watcher = _Watcher()


class _Armed:
    """A connection whose socket the watcher holds from its TCP handshake on (urllib3 would connect it out of reach:
    a SYN nobody answers, then a TLS handshake or a proxy's CONNECT that hangs), and again at each request."""

    sock: Any
    host: str
    port: int
    timeout: Any
    socket_options: Any
    source_address: Any

    def _new_conn(self) -> socket.socket:
        at, owner = getattr(current, "at", None), getattr(current, "export", None)
        if at is None:
            return super()._new_conn()  # type: ignore[misc]
        error: Exception | None = None
        try:
            addresses = socket.getaddrinfo(self.host.strip("[]"), self.port, 0, socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            try:
                for option in self.socket_options or ():
                    sock.setsockopt(*option)
                if self.source_address:
                    sock.bind(self.source_address)
                _connect(sock, address, at, owner, self.timeout)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            _watcher.arm(sock)
            return sock
        if isinstance(error, TimeoutError):
            raise ConnectTimeoutError(self, f"connecting to {self.host} timed out") from error
        raise NewConnectionError(self, f"failed to connect: {error}") from error  # type: ignore[arg-type]

    def request(self, *args: Any, **kwargs: Any) -> Any:
        if self.sock is not None:  # a kept-alive connection: this export's deadline applies to it now
            _watcher.arm(self.sock)
        return super().request(*args, **kwargs)  # type: ignore[misc]


_SLICE_S = 0.05  # a connect in progress looks at its deadline and at cut() this often


def _connect(sock: socket.socket, address: Any, at: float, owner: Any, timeout: Any) -> None:
    """A TCP connect that ends at `at` or at cut(owner), whichever comes first (a blocking connect cannot be cut)."""
    sock.setblocking(False)
    code = sock.connect_ex(address)
    while code in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
        left = at - time.monotonic()
        if left <= 0 or _watcher.is_cut(owner):
            raise TimeoutError("no connection before the export's deadline")
        if select.select([], [sock], [], min(left, _SLICE_S))[1]:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            break
    if code:
        raise OSError(code, os.strerror(code))
    sock.settimeout(timeout if isinstance(timeout, (int, float)) else None)


class _HTTPConnection(_Armed, HTTPConnection):
    pass


class _HTTPSConnection(_Armed, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


class Adapter(HTTPAdapter):
    """requests' adapter whose connections (direct or through a proxy) are watched for the export's deadline."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if hasattr(manager, "pool_classes_by_scheme"):
            manager.pool_classes_by_scheme = _POOLS
        return manager
