"""A Jaeger query API as the Traces tab's second source, for a user whose traces go to Jaeger (say through our
Collector) and whose Jaeger has no UI of its own (a Jaeger built from modules serves only the API).

`HERMES_OTEL_JAEGER_URL` (in the dashboard's environment) names the query service, e.g.
`http://127.0.0.1:16686` (`http://user:password@host:16686` sends the user and password as basic auth; they are
never shown). Its api_v3 answers OTLP/JSON, which the local reader's decoder reads as it reads the files, so both
sources give the same spans.

A slow or hostile Jaeger must not take the dashboard down: requests go only to that address (never to one a request
names, and a redirect is not followed), each has one deadline for the whole exchange (connect, headers and every
read of the body: a Jaeger that drips a byte at a time is cut at it), an answer over MAX_BYTES is refused (what it
costs to decode stays bounded), and at most MAX_IN_FLIGHT requests wait on Jaeger at once: another is answered
"busy" at once, so the dashboard's worker threads stay free for everything else.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping

from ..local.decode import decode_request
from ..local.traces import Trace, group_traces

ENV = "HERMES_OTEL_JAEGER_URL"
LOOKBACK = dt.timedelta(days=2)  # how far back the list searches
TIMEOUT_S = 5.0  # the whole request, from connecting to the last byte
MAX_BYTES = 8 * 1024 * 1024  # decoding costs about ten times the answer's size
MAX_IN_FLIGHT = 2
_CHUNK = 64 * 1024
_in_flight = threading.BoundedSemaphore(MAX_IN_FLIGHT)


class JaegerError(Exception):
    """Jaeger could not answer; the message is for the user (no URL credentials in it)."""


class JaegerBusy(JaegerError):
    """MAX_IN_FLIGHT requests are already waiting on Jaeger."""


def configured(env: Mapping[str, str] | None = None) -> str | None:
    """The query API's base URL when set (http or https), else None."""
    url = (os.environ if env is None else env).get(ENV, "").strip().rstrip("/")
    return url if urllib.parse.urlsplit(url).scheme in ("http", "https") else None


def _get(url: str) -> dict:
    if not _in_flight.acquire(blocking=False):
        raise JaegerBusy(f"Jaeger is busy with {MAX_IN_FLIGHT} requests of this dashboard; try again")
    try:
        status, body = _fetch(url, time.monotonic() + TIMEOUT_S)
    finally:
        _in_flight.release()
    if status == 404:
        return {}
    if 300 <= status < 400:
        raise JaegerError(f"Jaeger answered a redirect (HTTP {status}), which is not followed")
    if status != 200:
        raise JaegerError(f"Jaeger answered HTTP {status}")
    try:
        document = json.loads(body)
    except ValueError:
        raise JaegerError("Jaeger's answer is not JSON") from None
    return document if isinstance(document, dict) else {}


def _fetch(url: str, deadline: float) -> tuple[int, bytes]:
    """(status, body) of one GET, all of it before `deadline`."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept": "application/json"}
    if parts.username is not None:  # credentials in the address: basic auth, never part of what is shown
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        connection = kind(parts.hostname or "", parts.port, timeout=_left(deadline))
    except ValueError:
        raise JaegerError("Jaeger's address is not valid") from None
    # The deadline cuts the socket wherever the request is (a header or a body dripped a byte at a time included,
    # whatever ends the body): the socket itself, since http.client lets go of `connection.sock` for an answer that
    # ends at the connection's close.
    sockets: list[socket.socket] = []
    cut = threading.Timer(max(deadline - time.monotonic(), 0.0), _cut, (sockets,))
    cut.daemon = True
    cut.start()
    try:
        connection.connect()  # bounded by the connection's timeout
        sockets.append(connection.sock)
        if time.monotonic() >= deadline:  # connected just as the cut fired, with nothing to cut yet
            raise TimeoutError
        connection.request("GET", target or "/", headers=headers)
        answer = connection.getresponse()
        chunks, size = [], 0
        while chunk := answer.read1(_CHUNK):
            size += len(chunk)
            if size > MAX_BYTES:
                raise JaegerError(f"Jaeger's answer is over {MAX_BYTES >> 20} MiB: ask for fewer or smaller traces")
            chunks.append(chunk)
        if time.monotonic() >= deadline:
            raise TimeoutError
        return answer.status, b"".join(chunks)
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
            raise JaegerError(f"Jaeger did not answer within {TIMEOUT_S:g} s") from None
        raise JaegerError(f"Jaeger is not reachable ({type(exc).__name__})") from None
    finally:
        cut.cancel()
        connection.close()


def _cut(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


def _traces(document: dict) -> list[Trace]:
    result = document.get("result")
    try:
        return group_traces(decode_request(result)) if isinstance(result, dict) else []
    except (ValueError, KeyError, TypeError):
        raise JaegerError("Jaeger's answer is not OTLP/JSON traces") from None


def newest(base: str, service: str, limit: int, now: dt.datetime | None = None) -> list[Trace]:
    """The newest `limit` traces of `service` in the last LOOKBACK, oldest first (as the files' reader gives them)."""
    now = now or dt.datetime.now(dt.UTC)
    params = {"query.service_name": service, "query.num_traces": str(limit),
              "query.start_time_min": _rfc3339(now - LOOKBACK), "query.start_time_max": _rfc3339(now)}
    traces = _traces(_get(f"{base}/api/v3/traces?{urllib.parse.urlencode(params)}"))
    return traces[-limit:]


def one(base: str, trace_id: str) -> Trace | None:
    found = [t for t in _traces(_get(f"{base}/api/v3/traces/{trace_id}")) if t.trace_id == trace_id]
    return found[0] if found else None


def _rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
