"""A Jaeger query API as the Traces tab's second source, for a user whose traces go to Jaeger (say through our
Collector) and whose Jaeger has no UI of its own (a Jaeger built from modules serves only the API).

`HERMES_OTEL_JAEGER_URL` (in the dashboard's environment) names the query service, e.g.
`http://127.0.0.1:16686`. Its api_v3 answers OTLP/JSON, which the local reader's decoder reads as it reads the
files, so both sources give the same spans. Requests go only to that address, never to one a request names, with
a timeout; an answer over MAX_BYTES is refused.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from ..local.decode import decode_request
from ..local.traces import Trace, group_traces

ENV = "HERMES_OTEL_JAEGER_URL"
LOOKBACK = dt.timedelta(days=2)  # how far back the list searches
TIMEOUT_S = 5.0
MAX_BYTES = 64 * 1024 * 1024


class JaegerError(Exception):
    """Jaeger could not answer; the message is for the user (no URL credentials in it)."""


def configured(env: Mapping[str, str] | None = None) -> str | None:
    """The query API's base URL when set (http or https), else None."""
    url = (os.environ if env is None else env).get(ENV, "").strip().rstrip("/")
    return url if urllib.parse.urlsplit(url).scheme in ("http", "https") else None


def _get(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            body = answer.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {}
        raise JaegerError(f"Jaeger answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise JaegerError(f"Jaeger is not reachable ({type(exc).__name__})") from None
    if len(body) > MAX_BYTES:
        raise JaegerError("Jaeger's answer is too large")
    try:
        document = json.loads(body)
    except ValueError:
        raise JaegerError("Jaeger's answer is not JSON") from None
    return document if isinstance(document, dict) else {}


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
