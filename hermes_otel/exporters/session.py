"""The `requests` session we give each SDK OTLP/HTTP exporter (its public `session` argument).

* Exactly our headers: the SDK merges the environment's OTEL_EXPORTER_OTLP_*HEADERS under the headers it is given,
  re-reading values our configuration refused (a control character, a malformed pair); the session sends the SDK's
  own protocol headers (content type, user agent, content encoding) and our validated headers, nothing else.
* What each request came to, per thread: the SDK exporter answers only success or failure, and we must tell a
  refused batch (HTTP 400, 413, 422: removed) from an unreachable endpoint (kept), and say why an endpoint fails.
  A request that fails calls `on_failure(reason)` at once, before the SDK's retry backoff.
* One deadline per export (deadline.py): the connections are watched, and cut at the export timeout however slowly
  the collector answers.
* Once closed (the SDK exporter's `shutdown()` closes it), no new request starts; the one in flight is cut
  (exporters/spool/delivery.py).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Mapping
from typing import Any

import requests

from . import deadline

SDK_HEADERS = frozenset({"content-type", "user-agent", "content-encoding"})  # the SDK's own; the rest came from env
REFUSED = frozenset({400, 413, 422})  # the batch itself is refused (too large, or not valid to the endpoint)
NOT_TAKEN = frozenset({404, 405, 501})  # the endpoint does not take this signal at all


class ExporterSession(requests.Session):
    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__()
        self.mount("http://", deadline.Adapter())  # every request ends at its export's deadline
        self.mount("https://", deadline.Adapter())
        self.hermes_headers = dict(headers)
        self.hermes_closed = False
        self.hermes_status = threading.local()  # this thread's last request: .code, .retry_after (None: no answer)
        #   and .failure (why it got no answer or a status >= 300)
        self.on_failure: Callable[[str], None] | None = None  # told why a request got no answer, or a status >= 400

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        self.hermes_status.code = self.hermes_status.retry_after = self.hermes_status.failure = None
        if self.hermes_closed:
            raise requests.ConnectionError("hermes-otel: the exporter was shut down")
        given = kwargs.get("headers") or {}
        kwargs["headers"] = {k: v for k, v in given.items() if k.lower() in SDK_HEADERS} | self.hermes_headers
        try:
            response = super().request(method, url, *args, **kwargs)
        except Exception as exc:
            if not self.hermes_closed:
                self._failed("no whole answer within the export timeout" if deadline.left() == 0 else reason(exc))
            raise
        self.hermes_status.code = response.status_code
        self.hermes_status.retry_after = response.headers.get("Retry-After")
        if response.status_code >= 300:  # an answer about the batch or the signal is not the endpoint failing
            self._failed(f"HTTP {response.status_code}", response.status_code not in REFUSED | NOT_TAKEN)
        return response

    def _failed(self, why: str, failing: bool = True) -> None:
        self.hermes_status.failure = why
        if failing and self.on_failure is not None:
            try:
                self.on_failure(why)
            except Exception:  # noqa: BLE001 - the reporter must not become the failure
                pass

    def last_status(self) -> int | None:
        """The HTTP status of this thread's last request through the session (None: no answer)."""
        return getattr(self.hermes_status, "code", None)

    def last_failure(self) -> str | None:
        """Why this thread's last request got no answer or a status of 300 or more (None: it got a 2xx)."""
        return getattr(self.hermes_status, "failure", None)

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
        super().close()


def reason(exc: BaseException) -> str:
    """A short reason for a failed request, from the exception types along its chain (never its message text)."""
    seen: set[int] = set()
    chain: BaseException | None = exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, ConnectionRefusedError):
            return "connection refused"
        if isinstance(chain, (TimeoutError, requests.Timeout)):
            return "timed out"
        if isinstance(chain, ssl.SSLCertVerificationError):
            return "certificate verify failed"
        if type(chain).__name__ in ("NameResolutionError", "gaierror"):
            return "name not resolved"
        if isinstance(chain, ConnectionResetError):
            return "connection reset"
        # requests and urllib3 wrap the cause in their own errors: MaxRetryError keeps it in `reason`
        chain = chain.__cause__ or chain.__context__ or _wrapped(chain)
    return type(exc).__name__


def _wrapped(exc: BaseException) -> BaseException | None:
    inner = getattr(exc, "reason", None)
    if isinstance(inner, BaseException):
        return inner
    first = exc.args[0] if exc.args else None
    return first if isinstance(first, BaseException) else None
