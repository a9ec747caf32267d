"""HTTP client spans for the requests of our provider attempts, with the context injected (W3C `traceparent` by
default), so a model server (an instrumented LiteLLM proxy, vLLM or NIM) continues the trace.

Hermes's model clients (the `openai` and `anthropic` SDKs) and the MCP SDK's HTTP transports send with `httpx`, and
every request passes `HTTPTransport.handle_request` (or its async twin): we wrap those two (wrapt), as the contrib
`opentelemetry-instrumentation-httpx` does. Not that package itself: importing it (with `packaging` and its semconv
tables) cost about 40 ms of every `hermes chat` start-up, and its default names are the deprecated HTTP ones. Ours
are the stable HTTP client conventions, on our tracer provider (never the global one), behind two rules:

* only a request made under a provider attempt of ours (tracking/attempt.py's marker: the model calls we trace)
  gets a span and the header. Anything else is not ours: the host's own requests under its own spans, a tool's
  downloads and an MCP server's requests under `execute_tool`, Hermes's background fetches of model metadata;
* the provider is the live one, looked up per request: a configuration reload, `http.client_spans = false` or
  telemetry off take effect at once, and nothing is left pointing at retired providers.

Never a second span for one request: when someone else wrapped the transports first (an application embedding
Hermes, with the contrib instrumentation), we stand down and theirs makes the span; a suppressed-instrumentation
context passes the request through. Query values that carry a key (`?key=` of Gemini-style APIs, and every
credential-named parameter) and user info are masked in `url.full`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._internal import log as _log
from .._internal import propagation
from .._internal.safety import safely
from .._internal.suppress import is_http_instrumentation_enabled, unwrap
from ..redaction.masking import MASK, mask_url
from ..semconv import ERROR_TYPE, HTTP_STATUS, SCHEMA_URL, SERVER_ADDRESS, SERVER_PORT
from ..semconv import SCOPE as TRACES_SCOPE_NAME
from ..tracking import attempt
from ..version import __version__

ProviderSource = Callable[[], "trace.TracerProvider | None"]
SCOPE = "hermes_otel.http_client"
METHOD = "http.request.method"
URL = "url.full"
PROTOCOL_VERSION = "network.protocol.version"
ATTRIBUTES = (METHOD, URL, SERVER_ADDRESS, SERVER_PORT, HTTP_STATUS, PROTOCOL_VERSION, ERROR_TYPE)
_KNOWN_METHODS = frozenset(("CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"))
_DEFAULT_PORTS = {"http": 80, "https": 443}
_KEY_PARAM = re.compile(r"([?&;](?:key|api-key|apikey|access_token|sig|signature)=)[^&;#]*", re.IGNORECASE)
_TARGETS = (("HTTPTransport", "handle_request"), ("AsyncHTTPTransport", "handle_async_request"))

_installed: list[Any] = []  # our wrappers, while they are in place (once per process)
_cached: tuple[Any, trace.Tracer] | None = None  # (provider, its tracer)


def masked_url(url: str) -> str:
    return _KEY_PARAM.sub(lambda m: m.group(1) + MASK, mask_url(url))


def _ours() -> bool:
    """The request is made under a provider attempt of ours, with a span of ours current (not, say, the client
    span of an httpx instrumentation the host put around ours: that one is the request's span then)."""
    marked = attempt.current()
    if marked is None:
        return False
    span = trace.get_current_span()
    return span is marked or getattr(getattr(span, "instrumentation_scope", None), "name", None) == TRACES_SCOPE_NAME


def _tracer(source: ProviderSource) -> trace.Tracer | None:
    """The live provider's tracer, for a request of ours only."""
    global _cached
    if not _ours() or not is_http_instrumentation_enabled():
        return None
    provider = source()
    if provider is None:
        return None
    cached = _cached
    if cached is None or cached[0] is not provider:
        cached = _cached = (provider, provider.get_tracer(SCOPE, __version__, schema_url=SCHEMA_URL))
    return cached[1]


def request_attributes(request: Any) -> tuple[str, dict[str, Any]]:
    """The span name and attributes of an `httpx.Request` (stable HTTP client conventions)."""
    method = request.method.upper()
    known = method in _KNOWN_METHODS
    url = request.url
    attributes: dict[str, Any] = {METHOD: method if known else "_OTHER", URL: masked_url(str(url))}
    if url.host:
        attributes[SERVER_ADDRESS] = url.host
    port = url.port or _DEFAULT_PORTS.get(url.scheme)
    if port:
        attributes[SERVER_PORT] = port
    return (method if known else "HTTP"), attributes


def _respond(span: trace.Span, response: Any) -> None:
    status = response.status_code
    version = getattr(response, "http_version", "")
    attributes: dict[str, Any] = {HTTP_STATUS: status}
    if isinstance(version, str) and version.startswith("HTTP/"):
        attributes[PROTOCOL_VERSION] = version[5:]
    if status >= 400:  # a client span's error: any 4xx or 5xx
        attributes[ERROR_TYPE] = str(status)
        span.set_status(Status(StatusCode.ERROR))
    span.set_attributes(attributes)


def _failed(span: trace.Span, exc: BaseException) -> None:
    span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def _start(source: ProviderSource, request: Any) -> trace.Span | None:
    try:
        tracer = _tracer(source)
        if tracer is None:
            return None
        name, attributes = request_attributes(request)
        return tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
    except Exception as exc:  # noqa: BLE001 - the request goes out whatever happens here
        _log.once("http-client-spans:start", "hermes-otel: no HTTP client span (%s: %s)", type(exc).__name__, exc)
        return None


@contextlib.contextmanager
def _in_span(span: trace.Span, request: Any) -> Iterator[None]:
    """The request's span current, its context in the request's headers, and an exception recorded as its error.
    A fault of ours (the span's own methods included) never reaches the request: it goes out, and its answer or
    its error comes back, as without us."""
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        safely(lambda: propagation.textmap().inject(request.headers))
        try:
            yield
        except BaseException as exc:
            safely(_failed, span, exc)
            raise
    finally:
        otel_context.detach(token)
        safely(span.end)


def _wrapper(source: ProviderSource, is_async: bool) -> Callable[..., Any]:
    def handle(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        request = args[0] if args else kwargs["request"]
        span = _start(source, request)
        if span is None:
            return wrapped(*args, **kwargs)
        with _in_span(span, request):
            response = wrapped(*args, **kwargs)
            safely(_respond, span, response)
        return response

    async def handle_async(wrapped: Callable[..., Any], instance: Any, args: tuple, kwargs: dict) -> Any:
        request = args[0] if args else kwargs["request"]
        span = _start(source, request)
        if span is None:
            return await wrapped(*args, **kwargs)
        with _in_span(span, request):
            response = await wrapped(*args, **kwargs)
            safely(_respond, span, response)
        return response

    return handle_async if is_async else handle


def instrument(source: ProviderSource) -> str:
    """Put HTTP client spans in place (once per process): `instrumented`, `other` (someone else's instrumentation
    makes them), or `unavailable` (httpx is missing)."""
    if _installed:
        return "instrumented"
    try:
        import httpx
    except ImportError:
        return "unavailable"
    if any(hasattr(vars(getattr(httpx, owner))[method], "__wrapped__") for owner, method in _TARGETS):
        return "other"
    for owner, method in _TARGETS:
        wrapt.wrap_function_wrapper(httpx, f"{owner}.{method}", _wrapper(source, method.endswith("async_request")))
        _installed.append(vars(getattr(httpx, owner))[method])
    return "instrumented"


def release() -> None:
    """Take our wrappers out (the setting or telemetry turned off): httpx is as it was, free for others. A wrapper
    someone put over ours stays (unwrapping ours would take theirs), and ours stays under it, passing requests on
    untraced (no provider)."""
    global _cached
    if not _installed:
        return
    import httpx

    handlers = {getattr(ours, "_self_wrapper", None) for ours in _installed}
    for owner, method in _TARGETS:
        cls = getattr(httpx, owner)
        # Ours by its handler, not by identity: a wrapper someone put over ours and took off again (the contrib
        # instrumentation's uninstrument) leaves ours back as a bound copy of itself.
        if getattr(vars(cls)[method], "_self_wrapper", None) in handlers:
            unwrap(cls, method)
    _installed.clear()
    _cached = None
