"""Where a signal is exported over OTLP, and the URL rules that get it there."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

SIGNALS = ("traces", "logs", "metrics")
HTTP_PATHS = {"traces": "/v1/traces", "logs": "/v1/logs", "metrics": "/v1/metrics"}


@dataclass(frozen=True)
class OTLPTarget:
    """Where one signal is exported over OTLP."""

    endpoint: str  # full URL for http/protobuf, host:port URL for grpc
    protocol: str
    headers: Mapping[str, str]
    timeout_s: float
    compression: str


def signal_url(base: str, signal: str, *, unless_present: bool = False) -> str:
    """A base endpoint with `/v1/<signal>` appended to its path (before any query), as the specification
    says; NeMo Relay's endpoints may already name the path (`unless_present`)."""
    parts = urllib.parse.urlsplit(base)
    path = parts.path.rstrip("/")
    if not (unless_present and path.endswith(HTTP_PATHS[signal])):
        path += HTTP_PATHS[signal]
    return urllib.parse.urlunsplit(parts._replace(path=path))


def url_problem(url: str) -> str | None:
    """None for an http(s) URL with a host and a valid port, else what it should be."""
    expected = "an http:// or https:// URL with a host (and a port from 1 to 65535)"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError:
        return expected
    if port == 0:  # "any free port" makes sense to a server, not to an exporter
        return expected
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return expected
    return None
