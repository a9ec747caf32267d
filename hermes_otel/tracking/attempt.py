"""The marker of a provider attempt of ours in the OpenTelemetry context.

What runs under it is a model call we trace: its HTTP requests get client spans and carry the trace
(capture/http_client.py), its stream's deltas are timed against it (tracking/streaming.py). Anything else (a
tool's own downloads, Hermes's metadata probes, the host's requests under its own spans) is not ours to touch.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

_KEY = otel_context.create_key("hermes_otel.attempt")


def context_of(span: trace.Span) -> otel_context.Context:
    """The current context with `span` current and marked as the attempt."""
    return otel_context.set_value(_KEY, span, trace.set_span_in_context(span))


def current() -> Any:
    """The attempt's span this context runs under, or None."""
    return otel_context.get_value(_KEY)
