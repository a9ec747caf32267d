"""A trace that continues into the model server, across two services, in the real Jaeger: real Hermes 0.19.0 sends
its model request through an OpenTelemetry-instrumented HTTP server (a WSGI proxy in front of the scripted model, as
a LiteLLM proxy would sit), both export through our Collector build (collector/single-node.yaml) to Jaeger v2, and
Jaeger holds one trace: the turn, its `chat` span, the HTTP client span, and the server's span under it."""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from collections.abc import Iterator
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply
from tests.harness.backends import wait_until
from tests.harness.otelcol import Collector
from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.harness.trees import only, tree
from tests.integration.test_collector_live import SERVICE, _agent, _jaeger_traces, exporting_to

pytestmark = pytest.mark.hermes

MODEL_SERVICE = "model-server"
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _proxy(upstream: str):
    """A WSGI app forwarding each request to `upstream` (the scripted model), whole."""

    def app(environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else None
        url = upstream + environ["PATH_INFO"] + (f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else "")
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        request = urllib.request.Request(url, data=body, headers=headers, method=environ["REQUEST_METHOD"])
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                status, reply_headers, data = reply.status, reply.headers.items(), reply.read()
        except urllib.error.HTTPError as exc:
            status, reply_headers, data = exc.code, exc.headers.items(), exc.read()
        start_response(f"{status} X", [(k, v) for k, v in reply_headers if k.lower() not in _HOP]
                       + [("Content-Length", str(len(data)))])
        return [data]

    return app


@contextlib.contextmanager
def instrumented_model_server(llm: FakeLLMServer, collector_http: str) -> Iterator[str]:
    """The proxy, traced by the contrib WSGI instrumentation with a provider of its own (another service)."""
    provider = TracerProvider(resource=Resource({"service.name": MODEL_SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{collector_http}/v1/traces")))
    app = OpenTelemetryMiddleware(_proxy(llm.base_url.removesuffix("/v1")), tracer_provider=provider)
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        provider.shutdown()


class _Route:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


def test_the_model_servers_span_is_in_the_turns_trace(jaeger, llm, tmp_path):
    with contextlib.ExitStack() as stack:
        tempo = stack.enter_context(OTLPGrpcReceiver())
        collector = Collector("single-node.yaml", env={
            "JAEGER_OTLP_GRPC": jaeger.otlp_grpc, "TEMPO_OTLP_GRPC": f"127.0.0.1:{tempo.port}",
            "SPANMETRICS_FLUSH_INTERVAL": "1s"})
        stack.callback(collector.stop)
        collector.start()
        base_url = stack.enter_context(instrumented_model_server(llm, collector.otlp_http))
        with exporting_to(collector.otlp_http, _Route(base_url), HERMES_OTEL_HTTP_CLIENT_SPANS="true"):
            llm.push(Reply.text("through the proxy"))
            agent = _agent(_Route(base_url), ["terminal"])
            assert agent.run_conversation("hello")["final_response"] == "through the proxy"
        (trace_id,) = _jaeger_traces(jaeger, 1)
        # The two services' spans reach the Collector in batches of their own: wait for all four.
        def both() -> list | None:
            found = jaeger.trace(trace_id)
            return found if len(found) >= 4 else None

        spans = wait_until(both, 30, "both services' spans in the trace")

    assert tree(spans) == [["invoke_agent hermes", [["chat fake-model", [["POST", ["POST /v1/chat/completions"]]]]]]]
    chat, server = only(spans, "chat fake-model"), only(spans, "POST /v1/chat/completions")
    (client,) = [s for s in spans if s.name == "POST"]
    assert {s.resource["service.name"] for s in spans} == {SERVICE, MODEL_SERVICE}
    assert (client.kind, client.resource["service.name"], client.parent_span_id) == ("CLIENT", SERVICE, chat.span_id)
    assert (server.kind, server.resource["service.name"], server.parent_span_id) == (
        "SERVER", MODEL_SERVICE, client.span_id)
    assert server.trace_id == chat.trace_id == trace_id

