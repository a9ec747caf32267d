"""Prometheus pull endpoint (`OTEL_METRICS_EXPORTER=prometheus`), from the optional `prometheus` extra.

One HTTP server per process serves a registry of our own (never prometheus_client's
global one, which the host application may use). A reconfigured pipeline registers
its reader in the same registry, so a reload keeps the port; the retired reader
unregisters itself at shutdown. The server runs on a daemon thread: a scrape never
touches the agent's thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .._internal import log as _log

_lock = threading.Lock()
_registry: Any = None
_server: tuple[str, int, Any] | None = None  # (host, port, httpd)


def pull_reader(host: str, port: int):
    """A PrometheusMetricReader served at http://host:port/metrics, or None (reported once) when the
    `prometheus` extra is missing or the port cannot be bound; the caller then pushes metrics instead."""
    global _registry
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry
    except ImportError as exc:
        _log.once(
            "prometheus-missing",
            "hermes-otel: metrics.exporter=prometheus needs the optional package opentelemetry-exporter-prometheus "
            "(hermes-otel's `prometheus` extra, `hermes-otel[prometheus]`; %s); pushing metrics (OTLP or files) "
            "instead", exc,
            level=logging.ERROR, per_process=True,
        )
        return None
    with _lock:
        if _registry is None:
            _registry = CollectorRegistry(auto_describe=True)
        try:
            _serve(host, port)
        except OSError as exc:
            _log.once(
                f"prometheus-bind:{host}:{port}",
                "hermes-otel: cannot serve Prometheus metrics on %s:%s (%s); pushing metrics (OTLP or files) instead",
                host, port, exc, level=logging.ERROR,
            )
            return None

        class PullReader(PrometheusMetricReader):
            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                # Pull has nothing to push. The base class would collect here and queue a snapshot that the
                # next scrape serves next to its own: every series twice, and Prometheus drops the samples.
                return True

        return PullReader(registry=_registry)


def _serve(host: str, port: int) -> None:
    global _server
    if _server is not None and _server[:2] == (host, port):
        return
    from prometheus_client import start_http_server

    httpd, _thread = start_http_server(port, addr=host, registry=_registry)
    if _server is not None:  # one endpoint per process: the new address replaces the old one
        _server[2].shutdown()
        _server[2].server_close()
    _server = (host, port, httpd)
    _log.logger.info("hermes-otel: serving Prometheus metrics at http://%s:%s/metrics", host, port)


def stop() -> None:
    """Close the endpoint (tests; the process exit does this anyway)."""
    global _server
    with _lock:
        if _server is not None:
            _server[2].shutdown()
            _server[2].server_close()
            _server = None
