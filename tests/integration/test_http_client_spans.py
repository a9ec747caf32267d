"""HTTP client spans on real Hermes 0.19.0 in-process: the model request is one `POST` CLIENT span under its `chat`
span, and the request the model server receives carries that span in `traceparent`; off by a setting; nothing for a
request made outside our spans; a key in the URL's query masked."""

from __future__ import annotations

import pytest

from hermes_otel.capture.http_client import masked_url
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply
from tests.harness.hermes import at_default, run_agent
from tests.harness.trees import only

pytestmark = pytest.mark.hermes


def _turn(traced, receiver):
    traced.flush(5)
    return receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)


@pytest.fixture
def spans_on(traced, monkeypatch):
    """HTTP client spans at their default, on (the test suite runs with them off)."""
    at_default(monkeypatch, "HERMES_OTEL_HTTP_CLIENT_SPANS")
    return traced


def test_the_model_request_is_a_client_span_that_the_server_sees(spans_on, traced, llm, receiver):
    before = len(llm.requests)
    llm.push(Reply.text("continued"))
    assert run_agent(llm.base_url, "hi")["final_response"] == "continued"
    spans = _turn(traced, receiver)
    chat = only(spans, "chat fake-model")
    (http,) = [s for s in spans if s.kind == "CLIENT" and s.name == "POST"]
    assert (http.parent_span_id, http.trace_id) == (chat.span_id, chat.trace_id)
    assert http.scope_name == "hermes_otel.http_client"
    assert http.status_code == "UNSET"
    # The stable HTTP client conventions.
    assert http.attributes == {"http.request.method": "POST", "url.full": f"{llm.base_url}/chat/completions",
                               "server.address": "127.0.0.1", "server.port": llm.port,
                               "http.response.status_code": 200, "network.protocol.version": "1.1"}
    (request,) = [r for r in llm.requests[before:] if r.path.endswith("/chat/completions")]
    version, trace_id, parent_id, flags = request.headers["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", http.trace_id, http.span_id)
    assert int(flags, 16) & 0x01  # sampled (the SDK may also set the random bit, 0x02)
    # Requests Hermes makes outside any span of ours (its /models probes) get no span and no header.
    others = [r for r in llm.requests[before:] if not r.path.endswith("/chat/completions")]
    assert all("traceparent" not in r.headers for r in others)
    assert len([s for s in spans if s.name in ("GET", "POST")]) == 1


def _wrapped() -> bool:
    import httpx

    return hasattr(vars(httpx.HTTPTransport)["handle_request"], "__wrapped__")


def test_a_setting_turns_them_off(spans_on, traced, llm, receiver, monkeypatch):
    from hermes_cli.plugins import discover_plugins

    assert _wrapped()
    monkeypatch.setenv("HERMES_OTEL_HTTP_CLIENT_SPANS", "false")
    discover_plugins(force=True)
    assert not _wrapped()  # httpx as it was, free for others
    before = len(llm.requests)
    llm.push(Reply.text("quiet"))
    assert run_agent(llm.base_url, "hi")["final_response"] == "quiet"
    spans = _turn(traced, receiver)
    assert not [s for s in spans if s.kind == "CLIENT" and s.name == "POST"]
    assert all("traceparent" not in r.headers for r in llm.requests[before:])


def test_a_key_in_the_query_is_masked():
    base = "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent"
    assert masked_url(f"{base}?key=AIzaSy123&alt=sse") == f"{base}?key=****&alt=sse"
    assert masked_url("https://u:pw@host/v1/chat/completions?api_key=abc") == (
        "https://u:****@host/v1/chat/completions?api_key=****")


def test_a_tools_own_download_gets_no_span_and_no_header(spans_on, traced, llm, receiver, plugins_enabled):
    """A tool runs with its `execute_tool` span current, but its requests are the tool's business: no client span,
    no `traceparent` to a host the model chose, and its URL (content: a search query) is not exported."""
    from hermes_otel.testing.fake_llm import ToolCall

    url = f"{llm.base_url}/search?q=divorce+lawyer+for+jane+doe&session=s3cr3t"
    before = len(llm.requests)
    with plugins_enabled("fetcher"):
        llm.push(Reply.tools(ToolCall("fetch_url", {"url": url}, id="call_F")), Reply.text("fetched"))
        assert run_agent(llm.base_url, "fetch it", enabled_toolsets=["fetcher"])["final_response"] == "fetched"
    spans = _turn(traced, receiver)
    (download,) = [r for r in llm.requests[before:] if r.path.startswith("/v1/search")]
    assert "traceparent" not in download.headers and "baggage" not in download.headers
    tool = only(spans, "execute_tool fetch_url")
    assert tool.attributes["hermes.tool.status"] == "ok"
    # The model's two requests are ours (a span each); the tool's download is not.
    assert sorted(s.name for s in spans if s.kind == "CLIENT" and s.scope_name == "hermes_otel.http_client") == [
        "POST", "POST"]
    assert "jane" not in repr([(s.attributes, s.events) for s in spans])


def test_the_environments_traceparent_and_baggage_reach_the_model_server(spans_on, traced, llm, receiver,
                                                                         monkeypatch):
    """A CI job's TRACEPARENT and BAGGAGE (environment variables as carriers), extracted by the global propagator:
    the turn joins that trace, and the model request carries both on."""
    monkeypatch.setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    monkeypatch.setenv("BAGGAGE", "ci.job=1234")
    before = len(llm.requests)
    llm.push(Reply.text("joined"))
    assert run_agent(llm.base_url, "hi")["final_response"] == "joined"
    spans = _turn(traced, receiver)
    root = only(spans, "invoke_agent hermes")
    assert (root.trace_id, root.parent_span_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    (request,) = [r for r in llm.requests[before:] if r.path.endswith("/chat/completions")]
    assert request.headers["traceparent"].split("-")[1] == root.trace_id
    assert request.headers["baggage"] == "ci.job=1234"


@pytest.mark.timeout(300)
def test_a_propagator_that_is_not_installed_costs_only_itself(tmp_path):
    """`OTEL_PROPAGATORS=b3,tracecontext,baggage` without the b3 package (a typo costs the same): a real `hermes chat`
    is traced as ever, the environment's TRACEPARENT and BAGGAGE still reach the model server through the other two,
    and the missing one is said once. (OpenTelemetry's own global propagator raises at its import for such a name,
    which used to fail the plugin's load: nothing was exported.)"""
    from tests.harness.hermes import clean_env, hermes_chat, write_home
    from tests.harness.otlp_receiver import OTLPReceiver

    with FakeLLMServer((Reply.text("still traced"),)) as server, OTLPReceiver() as receiver:
        home = write_home(tmp_path / "home", server.base_url)
        env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_PROPAGATORS="b3,tracecontext,baggage",
                        HERMES_OTEL_HTTP_CLIENT_SPANS="true",  # the default users get: our spans inject the headers
                        TRACEPARENT="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", BAGGAGE="ci.job=77")
        result = hermes_chat("say it", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
        (request,) = [r for r in server.requests if r.path.endswith("/chat/completions")]
    root = only(spans, "invoke_agent hermes")
    assert (root.trace_id, root.parent_span_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert request.headers["traceparent"].split("-")[1] == root.trace_id and request.headers["baggage"] == "ci.job=77"
    said = (home / "logs" / "agent.log").read_text(errors="replace")  # (errors.log has the warnings again)
    assert said.count("names the propagator 'b3', which cannot be used") == 1, said[-3000:]
    assert "Failed to load plugin" not in said + result.stderr
