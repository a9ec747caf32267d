"""A real Hermes run with a plugins.toml ATOF file sink and an http_post stream sink."""

from __future__ import annotations

import json
import time

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import run_agent
from tests.harness.http_sink import HttpSink

pytestmark = pytest.mark.hermes


def _relay_toml(tmp_path, url: str, timeout_ms: int = 3000):
    path = tmp_path / "plugins.toml"
    path.write_text(
        f"""version = 1
[[components]]
kind = "observability"
[components.config]
version = 4
[components.config.atof]
enabled = true
[[components.config.atof.sinks]]
type = "file"
output_directory = "{tmp_path / 'atof'}"
filename = "events.jsonl"
mode = "overwrite"
[[components.config.atof.sinks]]
type = "stream"
url = "{url}"
transport = "http_post"
timeout_millis = {timeout_ms}
"""
    )
    return path


def _check(events, spans_expected: int):
    scopes = [e for e in events if e["kind"] == "scope"]
    starts = {e["uuid"]: e for e in scopes if e["scope_category"] == "start"}
    ends = {e["uuid"]: e for e in scopes if e["scope_category"] == "end"}
    assert starts.keys() == ends.keys() and len(starts) == spans_expected
    roots = [e for e in starts.values() if e["parent_uuid"] is None]
    assert [r["category"] for r in roots] == ["agent"]
    for event in starts.values():
        if event["parent_uuid"] is not None:
            assert event["parent_uuid"] in starts  # parentage matches the trace
        assert event["propagation_root_uuid"] == roots[0]["uuid"]
    return sorted((e["category"], e["name"]) for e in starts.values())


def test_file_and_http_post_sinks_carry_the_run(llm, monkeypatch, tmp_path):
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime

    with HttpSink() as stream:
        monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(_relay_toml(tmp_path, stream.url)))
        discover_plugins(force=True)
        llm.push(Reply.tools(ToolCall("terminal", {"command": "echo atof"}, id="call_X")), Reply.text("atof ok"))
        assert run_agent(llm.base_url, "go")["final_response"] == "atof ok"
        assert runtime.flush(5)
        file_events = [json.loads(line) for line in (tmp_path / "atof" / "events.jsonl").read_text().splitlines()]
        deadline = time.monotonic() + 5
        while len(stream.events()) < len(file_events) and time.monotonic() < deadline:
            time.sleep(0.05)
        stream_events = stream.events()
    expected = [("agent", "hermes"), ("llm", "custom"), ("llm", "custom"), ("tool", "terminal")]
    assert _check(file_events, 4) == expected
    assert _check(stream_events, 4) == expected
    assert [e["uuid"] for e in stream_events] == [e["uuid"] for e in file_events]
    # Observer-only happenings are marks, inside the turn they belong to.
    marks = [e for e in file_events if e["kind"] == "mark"]
    names = [m["name"] for m in marks]
    assert "hermes.observer.pre_tool_call" in names and "hermes.observer.post_llm_call" in names
    assert "hermes.observer.post_tool_call" not in names  # that one is the tool scope's end
    root = next(e for e in file_events if e.get("category") == "agent")
    in_turn = [m for m in marks if m["metadata"].get("hermes.turn_id")]
    assert in_turn and all(m["propagation_root_uuid"] == root["uuid"] for m in in_turn)


@pytest.mark.parametrize("fault", ["hanging", "down"])
def test_stream_receiver_down_or_hanging_costs_hermes_nothing(llm, monkeypatch, tmp_path, fault):
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime
    from hermes_otel.exporters.health import health

    with HttpSink(delay_s=5) as hanging:  # accepts, answers far too late
        url = hanging.url
        if fault == "down":
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{s.getsockname()[1]}/atof"  # nothing listens there
        monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(_relay_toml(tmp_path, url, timeout_ms=300)))
        discover_plugins(force=True)
        before = health.dropped["atof"]
        llm.push(Reply.text("still fine"))
        started = time.monotonic()
        assert run_agent(llm.base_url, "hi")["final_response"] == "still fine"
        runtime.flush(0.5)
        assert time.monotonic() - started < 5  # the agent never waited on the stream
        deadline = time.monotonic() + 10
        while health.dropped["atof"] == before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert health.dropped["atof"] > before  # timed out after retries: counted
    # The file sink kept everything meanwhile.
    scopes = [json.loads(x) for x in (tmp_path / "atof" / "events.jsonl").read_text().splitlines()]
    assert len([e for e in scopes if e["kind"] == "scope"]) == 4  # agent + llm, start and end


def test_relay_opentelemetry_endpoints_shape_what_they_receive(llm, monkeypatch, tmp_path, plugins_enabled):
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime
    from tests.harness.otlp_receiver import OTLPReceiver
    from tests.harness.trees import tree

    with OTLPReceiver() as full, OTLPReceiver() as gen_ai, OTLPReceiver() as oi:
        toml = tmp_path / "plugins.toml"
        toml.write_text(
            "version = 1\n[[components]]\nkind = \"observability\"\n[components.config]\nversion = 4\n"
            "[components.config.opentelemetry]\nenabled = true\n"
            + "".join(
                f"[[components.config.opentelemetry.endpoints]]\ntype = \"{kind}\"\nendpoint = \"{recv.endpoint}\"\n"
                f"scheduled_delay_millis = 50\nservice_name = \"svc-{kind}\"\n"
                for kind, recv in (("full", full), ("gen_ai", gen_ai), ("openinference", oi))
            )
        )
        monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
        discover_plugins(force=True)
        with plugins_enabled("mw_alpha"):
            llm.push(Reply.tools(ToolCall("terminal", {"command": "echo r"}, id="call_R")), Reply.text("relayed"))
            assert run_agent(llm.base_url, "go")["final_response"] == "relayed"
            assert runtime.flush(5)
            done = lambda s: any(x.name == "invoke_agent hermes" for x in s)  # noqa: E731
            full_spans, gen_spans, oi_spans = (r.wait_for_spans(done, timeout=10) for r in (full, gen_ai, oi))
    assert {s.resource["service.name"] for s in full_spans} == {"svc-full"}
    # full: everything, layers included
    assert any(s.name.startswith("llm_execution") for s in full_spans)
    # gen_ai: the GenAI operation spans only, gen_ai.* / server.* attributes only
    assert tree(gen_spans) == [["invoke_agent hermes", ["chat fake-model", "execute_tool terminal", "chat fake-model"]]]
    for span in gen_spans:
        assert all(k.startswith(("gen_ai.", "server.")) or k in ("error.type", "http.response.status_code") for k in span.attributes)
        assert span.events == []
    # openinference: every span, with the OpenInference kinds Phoenix reads
    kinds = {s.name: s.attributes["openinference.span.kind"] for s in oi_spans}
    assert kinds["invoke_agent hermes"] == "AGENT" and kinds["chat fake-model"] == "LLM"
    assert kinds["execute_tool terminal"] == "TOOL" and kinds["llm_execution mw_alpha"] == "CHAIN"
    chat = next(s for s in oi_spans if s.name == "chat fake-model")
    assert chat.attributes["llm.token_count.total"] == 18 and chat.attributes["session.id"]
    assert {s.resource["openinference.project.name"] for s in oi_spans} == {"svc-openinference"}


def test_native_handoff_to_nemo_relay(llm, monkeypatch, tmp_path):
    """The real nemo-relay (0.10.4, the one Hermes 0.22 carries; in the test extras: never skipped). Under capture,
    Relay's model and tool calls carry their request again (content is set at a span's end, so a call started at
    the span's start had an empty one), at the spans' own times."""
    import nemo_relay  # noqa: F401 - installed with the test extras
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime

    relay_dir = tmp_path / "relay"
    toml = tmp_path / "plugins.toml"
    toml.write_text(
        f"""version = 1
[[components]]
kind = "hermes_otel"
[components.config]
relay_handoff = true
[[components]]
kind = "observability"
[components.config]
version = 4
[components.config.atof]
enabled = true
[[components.config.atof.sinks]]
type = "file"
output_directory = "{relay_dir}"
filename = "relay.jsonl"
mode = "overwrite"
"""
    )
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    discover_plugins(force=True)
    forwarder = runtime.current_telemetry().tracer_provider._active_span_processor._span_processors[-1]
    assert type(forwarder).__name__ == "RelayForwarder" and forwarder.activation is not None
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo relay"}, id="call_N")), Reply.text("native"))
    assert run_agent(llm.base_url, "go")["final_response"] == "native"
    assert runtime.flush(5)
    # Relay's own ATOF exporter wrote the run (ours stood down: the file is Relay's).
    deadline = time.monotonic() + 5
    path = relay_dir / "relay.jsonl"
    while (not path.exists() or len(path.read_text().splitlines()) < 8) and time.monotonic() < deadline:
        forwarder.force_flush(1000)
        time.sleep(0.1)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    starts = sorted((e["category"], e["name"]) for e in events if e.get("scope_category") == "start")
    assert starts == [("agent", "hermes"), ("llm", "custom"), ("llm", "custom"), ("tool", "terminal")]
    ends = [e for e in events if e.get("scope_category") == "end"]
    assert sorted(e["uuid"] for e in ends) == sorted(e["uuid"] for e in events if e.get("scope_category") == "start")
    by_uuid = {e["uuid"]: e for e in ends}
    llm_starts = [e for e in events if e.get("scope_category") == "start" and e["category"] == "llm"]
    first = llm_starts[0]["data"]["content"]
    assert [m["role"] for m in first] == ["system", "user"] and first[1]["parts"] == [{"type": "text", "content": "go"}]
    (tool,) = [e for e in events if e.get("scope_category") == "start" and e["category"] == "tool"]
    assert tool["data"] == {"command": "echo relay"}
    for start in [*llm_starts, tool]:  # at the spans' own times: each call lasts what its span lasted
        assert start["timestamp"] < by_uuid[start["uuid"]]["timestamp"]
