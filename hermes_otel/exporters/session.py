"""The `requests` session we give each SDK OTLP/HTTP exporter (its public `session` argument).

* Exactly our headers: the SDK merges the environment's OTEL_EXPORTER_OTLP_*HEADERS under the headers it is given,
  re-reading values our configuration refused (a control character, a malformed pair); the session sends the SDK's
  own protocol headers (content type, user agent, content encoding) and our validated headers, nothing else.
* Closing aborts what is in flight: the SDK exporter's `shutdown()` closes its session; a request waiting on a
  collector that accepted the connection and never answers then fails at once instead of after the exporter's
  timeout, and no new request starts. So shutting the exporter down bounds an export (exporters/spool/delivery.py).
* The last HTTP status it saw, per thread: the SDK exporter answers only success or failure, and the re-sender
  must tell a refused batch (HTTP 400, 413, 422: removed) from an unreachable endpoint (kept).
"""

from __future__ import annotations

import socket
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import ProxyManager

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
                sock = super()._new_conn()  # type: ignore[misc]
                # A second descriptor of the same connection: shutting it down cuts the connection even while a
                # TLS handshake that never answers holds it (the TLS socket takes over `sock`'s descriptor first).
                self.hermes_twin = sock.dup()
                sockets.add(self)
                return sock

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
