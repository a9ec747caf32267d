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


def test_stream_receiver_down_or_hanging_costs_hermes_nothing(llm, monkeypatch, tmp_path):
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime
    from hermes_otel.exporters.health import health

    with HttpSink(delay_s=5) as hanging:  # accepts, answers far too late
        monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(_relay_toml(tmp_path, hanging.url, timeout_ms=300)))
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
    lines = (tmp_path / "atof" / "events.jsonl").read_text().splitlines()
    assert len(lines) == 4  # agent + llm, start and end
