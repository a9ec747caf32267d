"""Issue 17, item 2, end to end: every credential shape of tests/unit/test_redaction_shapes.py, in the user message,
a failed provider call's error, a tool's arguments and result, and the answer, through a real Hermes turn in every
capture mode: no shape leaves in spans (attributes, events, status), log records (attributes, bodies) or ATOF events."""

from __future__ import annotations

import json

import pytest

from hermes_otel.capture.logs import SCOPE as HERMES_LOGS
from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import QUIET_DEFAULTS, run_agent
from tests.harness.trees import only
from tests.unit.test_redaction_shapes import SHAPES

pytestmark = pytest.mark.hermes

# A collector's key the configuration holds (OTEL_EXPORTER_OTLP_HEADERS), printed by the tool in a shape no value
# pattern knows: captured content is redacted of the configuration's secrets as log lines are (one store).
COLLECTOR_KEY = "hcKey7Qw2Zt9Lm4Rv8Xp"
SHAPES = {**SHAPES, "a configured collector header": (f"x-honeycomb-team={COLLECTOR_KEY}", COLLECTOR_KEY)}
ONE_LINE = " | ".join(text for text, _ in SHAPES.values() if "\n" not in text)


@pytest.mark.parametrize(
    ("mode", "full_payloads"),
    [("NO_CONTENT", False), ("SPAN_ONLY", False), ("EVENT_ONLY", False), ("SPAN_AND_EVENT", False),
     ("NO_CONTENT", True)],  # Relay's enable_full_payloads puts content on spans (and so in ATOF) in any mode
)
def test_no_credential_shape_leaves_in_any_capture_mode(traced, llm, receiver, monkeypatch, tmp_path, mode,
                                                        full_payloads):
    from hermes_cli.plugins import discover_plugins

    secrets_file = tmp_path / "secrets.txt"
    secrets_file.write_text("\n".join(text for text, _ in SHAPES.values()) + "\n")
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
                    f'enable_full_payloads = {str(full_payloads).lower()}\n[[components.config.atof.sinks]]\ntype = "file"\n'
                    f'output_directory = "{tmp_path / "atof"}"\nfilename = "events.jsonl"\n')
    toml.chmod(0o600)
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-honeycomb-team={COLLECTOR_KEY}")
    for variable in QUIET_DEFAULTS:  # the defaults users get: Hermes's log lines bridged, client spans on
        monkeypatch.delenv(variable)
    discover_plugins(force=True)
    llm.push(
        Reply.error(500, f"upstream failed for {ONE_LINE}"),
        Reply.tools(ToolCall("terminal", {"command": f"cat {secrets_file}", "note": ONE_LINE}, id="call_R")),
        Reply.text(f"done: {ONE_LINE}"),
    )
    user_message = "use these:\n" + "\n".join(text for text, _ in SHAPES.values())
    assert run_agent(llm.base_url, user_message)["final_response"].startswith("done: ")
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    logs = receiver.wait_for_logs(lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r), timeout=10)
    atof = (tmp_path / "atof" / "events.jsonl").read_text()
    exported = {
        "spans": repr([(s.attributes, s.events, s.status_message) for s in spans]),
        "logs": repr([(r.attributes, r.body) for r in logs]),
        "atof": atof,
    }
    for shape, (_, secret) in SHAPES.items():
        for where, text in exported.items():
            assert secret not in text, (mode, shape, where)
    chats = [s for s in spans if s.name.startswith("chat ")]
    failed = next(s for s in chats if s.status_code == "ERROR")
    assert [name for name, _ in failed.events] == ["exception"]  # the provider's error text, redacted
    assert "<redacted>" in failed.events[0][1]["exception.message"]
    tool = only(spans, "execute_tool terminal")
    if mode in ("SPAN_ONLY", "SPAN_AND_EVENT") or full_payloads:
        assert "<redacted>" in tool.attributes["gen_ai.tool.call.result"]  # the content flowed, redacted
        assert "<redacted>" in json.dumps([json.loads(e) for e in atof.splitlines()])
    else:
        assert "gen_ai.tool.call.result" not in tool.attributes
    if mode in ("EVENT_ONLY", "SPAN_AND_EVENT"):
        assert any("<redacted>" in repr(r.body) for r in logs if r.body)
    else:  # no observer content
        assert [r.body for r in logs if r.body and r.event_name.startswith("hermes.observer.")] == []
    hermes_lines = [r for r in logs if r.scope_name == HERMES_LOGS]
    assert hermes_lines  # bridged, as by default
    if mode == "NO_CONTENT":  # Hermes's own lines carry no content with capture off (the provider's words are)
        assert not any("upstream failed" in str(r.body) for r in hermes_lines)
