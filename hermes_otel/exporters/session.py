"""The `requests` session we give each SDK OTLP/HTTP exporter (its public `session` argument).

* Exactly our headers: the SDK merges the environment's OTEL_EXPORTER_OTLP_*HEADERS under the headers it is given,
  re-reading values our configuration refused (a control character, a malformed pair); the session sends the SDK's
  own protocol headers (content type, user agent, content encoding) and our validated headers, nothing else.
* Closing aborts what is in flight: the SDK exporter's `shutdown()` closes its session; a request stuck at any
  stage (a connect a firewall never answers, a TLS handshake or a proxy that hangs, a collector that accepted the
  request and never answers) then fails at once instead of after the exporter's timeout, and no new request
  starts. So shutting the exporter down bounds an export (exporters/spool/delivery.py).
* The last HTTP status it saw, per thread: the SDK exporter answers only success or failure, and the re-sender
  must tell a refused batch (HTTP 400, 413, 422: removed) from an unreachable endpoint (kept).
"""

from __future__ import annotations

import socket
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.poolmanager import ProxyManager
from urllib3.util.connection import allowed_gai_family

SDK_HEADERS = frozenset({"content-type", "user-agent", "content-encoding"})  # the SDK's own; the rest came from env


class ExporterSession(requests.Session):
    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__()
        self.hermes_headers = dict(headers)
        self.hermes_closed = False
        self.hermes_status = threading.local()  # .code: the last HTTP status this thread received, or None
        self.hermes_sockets: weakref.WeakSet[Any] = weakref.WeakSet()  # connections made through this session
        adapter = _AbortableAdapter(self.hermes_sockets)
        self.mount("http://", adapter)
        self.mount("https://", adapter)

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        self.hermes_status.code = self.hermes_status.retry_after = None
        if self.hermes_closed:
            raise requests.ConnectionError("hermes-otel: the exporter was shut down")
        given = kwargs.get("headers") or {}
        kwargs["headers"] = {k: v for k, v in given.items() if k.lower() in SDK_HEADERS} | self.hermes_headers
        response = super().request(method, url, *args, **kwargs)
        self.hermes_status.code = response.status_code
        self.hermes_status.retry_after = response.headers.get("Retry-After")
        return response

    def last_status(self) -> int | None:
        """The HTTP status of this thread's last request through the session (None: no answer)."""
        return getattr(self.hermes_status, "code", None)

    def acknowledged(self) -> bool:
        """Whether this thread's last request got a 2xx. The SDK exporter takes any status below 400 for success,
        a redirect included (which it does not follow, and nor do we: the headers may hold credentials)."""
        status = self.last_status()
        return status is None or 200 <= status < 300

    def last_retry_after(self) -> float | None:
        """Its `Retry-After` in seconds (0 to 300), when it gave one in seconds."""
        try:
            return min(max(float(self.hermes_status.retry_after), 0.0), 300.0)
        except (AttributeError, TypeError, ValueError):
            return None

    def close(self) -> None:
        self.hermes_closed = True
        for connection in list(self.hermes_sockets):
            twin = connection.hermes_twin
            if twin is not None:
                try:
                    twin.shutdown(socket.SHUT_RDWR)  # a read blocked on the connection returns at once
                except OSError:
                    pass
        super().close()


class _AbortableAdapter(HTTPAdapter):
    """Remembers every connection it opens, so the session can cut them (urllib3's pools only keep idle ones),
    through an environment's HTTP(S) proxy too."""

    def __init__(self, sockets: weakref.WeakSet[Any]) -> None:
        self.hermes_sockets = sockets
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        sockets = self.hermes_sockets

        class Tracked:
            hermes_twin: socket.socket | None = None

            def _new_conn(self) -> socket.socket:
                return _connect(self, sockets)

            def close(self) -> None:
                super().close()  # type: ignore[misc]
                twin, self.hermes_twin = self.hermes_twin, None
                if twin is not None:
                    twin.close()

        self.poolmanager.pool_classes_by_scheme = {
            "http": type("Pool", (HTTPConnectionPool,),
                         {"ConnectionCls": type("Connection", (Tracked, HTTPConnection), {})}),
            "https": type("TLSPool", (HTTPSConnectionPool,),
                          {"ConnectionCls": type("TLSConnection", (Tracked, HTTPSConnection), {})}),
        }

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if type(manager) is ProxyManager:  # a SOCKS proxy keeps its own connection classes
            manager.pool_classes_by_scheme = self.poolmanager.pool_classes_by_scheme
        return manager


def _connect(conn: Any, sockets: weakref.WeakSet[Any]) -> socket.socket:
    """urllib3's `_new_conn` (`create_connection` and its errors), with each socket known to the session before it
    connects: `conn.hermes_twin` is a second descriptor of it, and shutting that down cuts the connection at any
    stage: a connect in progress (a firewall that drops the SYN: Linux aborts it), a TLS handshake (the TLS socket
    takes over the first descriptor), a CONNECT to a proxy, a request waiting for its answer."""
    host = conn.host.strip("[]")
    try:
        addresses = socket.getaddrinfo(host, conn.port, allowed_gai_family(), socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise NameResolutionError(conn.host, conn, exc) from exc
    error: OSError = OSError("getaddrinfo returns an empty list")
    for family, kind, protocol, _, address in addresses:
        sock = socket.socket(family, kind, protocol)
        try:
            for option in conn.socket_options or ():
                sock.setsockopt(*option)
            if conn.timeout is None or isinstance(conn.timeout, (int, float)):
                sock.settimeout(conn.timeout)
            if conn.source_address:
                sock.bind(conn.source_address)
            conn.hermes_twin = sock.dup()
            sockets.add(conn)
            sock.connect(address)
            sys.audit("http.client.connect", conn, conn.host, conn.port)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
            twin, conn.hermes_twin = conn.hermes_twin, None
            if twin is not None:
                twin.close()
    if isinstance(error, TimeoutError):
        raise ConnectTimeoutError(conn, f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})") \
            from error
    raise NewConnectionError(conn, f"Failed to establish a new connection: {error}") from error
