"""HTTP client spans for the requests under our spans, with W3C `traceparent` injected, so a model server (an
instrumented LiteLLM proxy, vLLM or NIM) or an MCP server over HTTP continues the trace.

Hermes's model clients (the `openai` and `anthropic` SDKs) and the MCP SDK's HTTP transports send with `httpx`;
the contrib `HTTPXClientInstrumentor` makes the spans. It is given our tracer provider (never the global one), behind
two rules of ours:

* a request outside any span (Hermes's background fetches of model metadata, a tool's own downloads) gets no span
  and no header: only requests made under a span continue a trace (the provider request thread Hermes starts carries
  our context: capture/instrumentor.py);
* the provider is the live one, looked up per request: a configuration reload, `http.client_spans = false` or
  telemetry off take effect at once, and nothing is left pointing at retired providers.

Never a second span for one request: when someone else instrumented `httpx` first (an application embedding
Hermes), we stand down and theirs makes the span. Query values that carry a key (`?key=` of Gemini-style APIs, and
every credential-named parameter) are masked in `url.full`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider

from .._internal import log as _log
from ..redaction.masking import MASK, mask_url

ProviderSource = Callable[[], "trace.TracerProvider | None"]
_URL_ATTRS = ("url.full", "http.url")
_KEY_PARAM = re.compile(r"([?&;](?:key|api-key|apikey|access_token|sig|signature)=)[^&;#]*", re.IGNORECASE)

_installed = False  # by us (the instrumentor is a process-wide singleton)


class _LiveTracer(trace.Tracer):
    """The live provider's tracer, for requests under a span only (else the invalid span: no span, no header)."""

    def __init__(self, source: ProviderSource, name: str, version: str | None, schema_url: str | None) -> None:
        self._source = source
        self._args = (name, version, schema_url)
        self._cached: tuple[Any, trace.Tracer] | None = None

    def _tracer(self) -> trace.Tracer | None:
        provider = self._source()
        if provider is None:
            return None
        cached = self._cached
        if cached is None or cached[0] is not provider:
            cached = self._cached = (provider, provider.get_tracer(*self._args))
        return cached[1]

    def start_span(self, name: str, context: Any = None, *args: Any, **kwargs: Any) -> trace.Span:
        tracer = self._tracer()
        if tracer is None or not trace.get_current_span(context).get_span_context().is_valid:
            return trace.INVALID_SPAN
        return tracer.start_span(name, context, *args, **kwargs)

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
            self, name: str, context: Any = None, *args: Any, end_on_exit: bool = True,
            **kwargs: Any) -> Iterator[trace.Span]:
        span = self.start_span(name, context, *args, **kwargs)
        with trace.use_span(span, end_on_exit=end_on_exit) as current:
            yield current


class _LiveProvider(trace.TracerProvider):
    def __init__(self, source: ProviderSource) -> None:
        self._source = source

    def get_tracer(self, instrumenting_module_name: str, instrumenting_library_version: str | None = None,
                   schema_url: str | None = None, attributes: Any = None) -> trace.Tracer:
        return _LiveTracer(self._source, instrumenting_module_name, instrumenting_library_version, schema_url)


def masked_url(url: str) -> str:
    return _KEY_PARAM.sub(lambda m: m.group(1) + MASK, mask_url(url))


def _mask_request_url(span: Any, request: Any) -> None:
    attributes = getattr(span, "attributes", None) or {}
    for key in _URL_ATTRS:
        value = attributes.get(key)
        if isinstance(value, str):
            masked = masked_url(value)
            if masked != value:
                span.set_attribute(key, masked)


async def _mask_request_url_async(span: Any, request: Any) -> None:
    _mask_request_url(span, request)


def instrument(source: ProviderSource) -> str:
    """Put HTTP client spans in place (once per process): `instrumented`, `other` (someone else's instrumentation
    makes them), or `unavailable` (the contrib package or httpx is missing)."""
    global _installed
    try:
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    except Exception:  # noqa: BLE001 - not installed: no HTTP client spans, said once
        _log.once("http-client-spans", "hermes-otel: opentelemetry-instrumentation-httpx is not installed: no HTTP "
                  "client spans, and model servers do not continue our traces")
        return "unavailable"
    instrumentor = HTTPXClientInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        return "instrumented" if _installed else "other"
    instrumentor.instrument(tracer_provider=_LiveProvider(source), meter_provider=NoOpMeterProvider(),
                            request_hook=_mask_request_url, async_request_hook=_mask_request_url_async,
                            skip_dep_check=True)
    _installed = instrumentor.is_instrumented_by_opentelemetry
    return "instrumented" if _installed else "unavailable"


def release() -> None:
    """Take our instrumentation out (the setting or telemetry turned off): httpx is as it was, free for others."""
    global _installed
    if not _installed:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    instrumentor = HTTPXClientInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    _installed = False
