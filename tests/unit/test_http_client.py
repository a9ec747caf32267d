"""Our HTTP client spans (capture/http_client.py) on httpx's real transport, against real local sockets: the stable
HTTP client names, ERROR for a 4xx/5xx answer and for a request that never got one, nothing (span or header) for a
request that is not a provider attempt's of ours (the host's, under its own span), and httpx as it was after
`release()`."""

from __future__ import annotations

import contextlib

import httpx
import pytest
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.capture import http_client
from hermes_otel.tracking import attempt
from tests.harness.fault_servers import FaultServer, refused_endpoint


@pytest.fixture
def traced():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    http_client.release()  # whatever an earlier test left: ours, on this test's provider
    assert http_client.instrument(lambda: provider) == "instrumented"
    yield provider, exporter
    http_client.release()


def _client_spans(exporter):
    return [s for s in exporter.get_finished_spans() if s.name != "turn"]


@contextlib.contextmanager
def _attempt(provider):
    """A provider attempt of ours (what capture/calls.py makes current around a model call), named "turn"."""
    with provider.get_tracer("hermes_otel").start_as_current_span("turn") as span:
        token = otel_context.attach(attempt.context_of(span))
        try:
            yield span
        finally:
            otel_context.detach(token)


def test_an_error_status_is_an_error_span_with_the_stable_names(traced):
    provider, exporter = traced
    with FaultServer("status", status=503) as server, httpx.Client() as client:
        with _attempt(provider) as turn:
            assert client.post(f"{server.endpoint}/v1/chat?api_key=sk-secret", content=b"{}").status_code == 503
    (span,) = _client_spans(exporter)
    assert (span.name, span.kind.name, span.status.status_code.name) == ("POST", "CLIENT", "ERROR")
    assert span.parent.span_id == turn.get_span_context().span_id
    assert span.instrumentation_scope.name == "hermes_otel.http_client"
    assert dict(span.attributes) == {
        "http.request.method": "POST", "url.full": f"{server.endpoint}/v1/chat?api_key=****",
        "server.address": "127.0.0.1", "server.port": server.port, "http.response.status_code": 503,
        "network.protocol.version": "1.1", "error.type": "503"}


def test_a_request_that_gets_no_answer_is_an_error_span_named_by_its_exception(traced):
    provider, exporter = traced
    url = refused_endpoint()
    with httpx.Client() as client, _attempt(provider):
        with pytest.raises(httpx.ConnectError):
            client.get(url)
    (span,) = _client_spans(exporter)
    assert (span.name, span.status.status_code.name, span.attributes["error.type"]) == ("GET", "ERROR", "ConnectError")
    assert "http.response.status_code" not in span.attributes


def test_outside_a_span_there_is_no_span_and_release_leaves_httpx_as_it_was(traced):
    _, exporter = traced
    with FaultServer("status", status=200) as server, httpx.Client() as client:
        assert client.get(server.endpoint).status_code == 200
    assert exporter.get_finished_spans() == ()
    http_client.release()
    assert not hasattr(vars(httpx.HTTPTransport)["handle_request"], "__wrapped__")
    assert not hasattr(vars(httpx.AsyncHTTPTransport)["handle_async_request"], "__wrapped__")


def test_the_hosts_request_under_its_own_span_is_the_hosts_business(traced):
    """A host program with its own provider: its request under its own span gets no span of ours and no header."""
    _, exporter = traced
    host = TracerProvider()
    with FaultServer("status", status=200) as server, httpx.Client() as client:
        with host.get_tracer("host").start_as_current_span("host work"):
            response = client.get(server.endpoint)
    assert response.status_code == 200 and "traceparent" not in response.request.headers
    assert exporter.get_finished_spans() == ()


def test_under_a_client_span_of_the_hosts_own_httpx_instrumentation_ours_stands_down(traced):
    """The host wrapped httpx after us (its span is current when ours runs): one span per request, the host's."""
    provider, exporter = traced
    host = TracerProvider()
    with FaultServer("status", status=200) as server, httpx.Client() as client, _attempt(provider):
        with host.get_tracer("opentelemetry.instrumentation.httpx").start_as_current_span("GET"):
            assert client.get(server.endpoint).status_code == 200
    assert _client_spans(exporter) == []


def test_someone_elses_wrapper_first_means_we_stand_down():
    import wrapt

    http_client.release()
    wrapt.wrap_function_wrapper(httpx, "HTTPTransport.handle_request", lambda wrapped, _, a, k: wrapped(*a, **k))
    try:
        assert http_client.instrument(lambda: None) == "other"
    finally:
        from hermes_otel._internal.suppress import unwrap  # opentelemetry-instrumentation is an optional extra

        unwrap(httpx.HTTPTransport, "handle_request")


def test_the_async_transport_makes_the_same_span(traced):
    import asyncio

    provider, exporter = traced

    async def request(url: str) -> int:
        async with httpx.AsyncClient() as client:
            return (await client.put(url, content=b"x")).status_code

    with FaultServer("status", status=404) as server, _attempt(provider):
        assert asyncio.run(request(f"{server.endpoint}/x")) == 404
    (span,) = _client_spans(exporter)
    assert (span.name, span.status.status_code.name) == ("PUT", "ERROR")
    assert (span.attributes["http.response.status_code"], span.attributes["error.type"]) == (404, "404")


@pytest.mark.parametrize("key", ["_SUPPRESS_INSTRUMENTATION_KEY", "_SUPPRESS_HTTP_INSTRUMENTATION_KEY"])
def test_a_suppressed_request_gets_no_span_and_no_header_not_even_baggage(traced, key):
    """Where no span is made, nothing is injected: a suppressed context (the SDK's own exports, a host's
    `suppress_instrumentation()`) sends neither `traceparent` nor the attempt's baggage."""
    from opentelemetry import baggage

    provider, exporter = traced
    with FaultServer("status", status=200) as server, httpx.Client() as client, _attempt(provider):
        token = otel_context.attach(otel_context.set_value(
            getattr(otel_context, key), True, baggage.set_baggage("tenant", "acme")))
        try:
            response = client.get(server.endpoint)
        finally:
            otel_context.detach(token)
    assert "traceparent" not in response.request.headers and "baggage" not in response.request.headers
    assert _client_spans(exporter) == []


def test_query_values_hermes_treats_as_sensitive_are_masked_in_the_url():
    url = "https://api.example/v1/x?session=s3ss&code=0auth&jwt=a.b.c&sid=42&q=hello&session_id=visible"
    assert http_client.masked_url(url) == (
        "https://api.example/v1/x?session=****&code=****&jwt=****&sid=****&q=hello&session_id=visible")


def test_after_the_hosts_instrumentation_came_and_went_release_still_leaves_httpx_as_it_was():
    """The host instruments httpx over ours and uninstruments it again: ours comes back as a bound copy of itself,
    which release() must still know as ours."""
    contrib = pytest.importorskip("opentelemetry.instrumentation.httpx")
    http_client.release()
    original = vars(httpx.HTTPTransport)["handle_request"]
    assert http_client.instrument(lambda: TracerProvider()) == "instrumented"
    host = contrib.HTTPXClientInstrumentor()
    host.instrument(tracer_provider=TracerProvider())
    host.uninstrument()
    http_client.release()
    assert vars(httpx.HTTPTransport)["handle_request"] is original
