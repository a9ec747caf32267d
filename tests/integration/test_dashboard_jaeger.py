"""Issue 26, item 3: a Jaeger query API as the Traces tab's second source (for the API-only Jaeger `make backends`
builds), through FastAPI's TestClient against a real Jaeger v2 (in-memory storage) fed over OTLP/HTTP by the SDK."""

from __future__ import annotations

import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import set_span_in_context

from tests.harness.otelcol import Jaeger


def send_turns(jaeger: Jaeger, count: int) -> list[str]:
    provider = TracerProvider(resource=Resource.create({"service.name": "hermes-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{jaeger.http}/v1/traces")))
    tracer = provider.get_tracer("test")
    ids = []
    for _ in range(count):
        root = tracer.start_span("invoke_agent hermes", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s-jaeger",
            "hermes.turn.cost": 0.5, "hermes.turn.cost_status": "estimated"})
        chat = tracer.start_span("chat fake-model", context=set_span_in_context(root), attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model", "gen_ai.usage.input_tokens": 9,
            "gen_ai.usage.output_tokens": 2})
        chat.add_event("hermes.middleware.rewrite", {"hermes.middleware.source": "demo",
                                                      "hermes.middleware.changed_keys": ["messages"]})
        chat.end()
        root.end()
        ids.append(f"{root.get_span_context().trace_id:032x}")
        time.sleep(0.01)
    provider.shutdown()
    return ids


@pytest.fixture
def client(tmp_path, monkeypatch, jaeger):
    from hermes_otel.tab.routes import router

    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_OTEL_JAEGER_URL", jaeger.url + "/")
    for name in ("HERMES_OTEL_PLUGINS_TOML", "HERMES_NEMO_RELAY_PLUGINS_TOML", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    app = FastAPI()
    app.include_router(router)
    return TestClient(app)


def test_the_tab_reads_jaeger_as_it_reads_the_files(client, jaeger):
    assert client.get("/sources").json() == {"sources": ["files", "jaeger"], "jaeger_url": jaeger.url}
    ids = send_turns(jaeger, 3)
    deadline = time.monotonic() + 10
    while True:
        body = client.get("/traces?source=jaeger").json()
        if len(body["traces"]) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    rows = [row for row in body["traces"] if row["trace_id"] in ids]
    assert [row["trace_id"] for row in rows] == ids[::-1]  # newest first
    assert {(r["spans"], r["models"][0], r["input_tokens"], r["rewrites"], r["session"], r["cost"]["amount"])
            for r in rows} == {(2, "fake-model", 9, 1, "s-jaeger", 0.5)}
    detail = client.get(f"/traces/{ids[0]}?source=jaeger").json()
    assert [(s["depth"], s["name"]) for s in detail["spans"]] == [(0, "invoke_agent hermes"), (1, "chat fake-model")]
    assert detail["spans"][1]["events"][0]["attributes"] == {"hermes.middleware.source": "demo",
                                                             "hermes.middleware.changed_keys": ["messages"]}
    assert client.get(f"/traces/{'0' * 32}?source=jaeger").status_code == 404
    sessions = client.get("/sessions?source=jaeger").json()["sessions"]
    assert [(s["session"], s["turns"] >= 3) for s in sessions] == [("s-jaeger", True)]
    assert client.get("/traces?source=elsewhere").status_code == 422


def test_an_unreachable_or_unset_jaeger_is_one_message(client, monkeypatch):
    monkeypatch.setenv("HERMES_OTEL_JAEGER_URL", "http://user:pw@127.0.0.1:9")
    answer = client.get("/traces?source=jaeger")
    assert (answer.status_code, answer.json()) == (502, {"detail": "Jaeger is not reachable (ConnectionRefusedError)"})
    assert client.get("/sources").json() == {"sources": ["files", "jaeger"], "jaeger_url": None}  # credentials
    monkeypatch.delenv("HERMES_OTEL_JAEGER_URL")
    answer = client.get("/traces?source=jaeger")
    assert (answer.status_code, answer.json()) == (404, {"detail": "no Jaeger query API configured "
                                                                   "(HERMES_OTEL_JAEGER_URL)"})
    assert client.get("/sources").json() == {"sources": ["files"], "jaeger_url": None}
