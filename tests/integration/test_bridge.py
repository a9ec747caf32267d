"""Observer bridge with real Hermes 0.19.0: log stream, subagents, approvals, interruption, redaction."""

from __future__ import annotations

import threading

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.documented import assert_documented
from tests.harness.hermes import QUIET_DEFAULTS, run_agent
from tests.harness.trees import named, only, subagents, tree, turn_roots

pytestmark = pytest.mark.hermes


def _turns(receiver, traced, count=1):
    traced.flush(5)
    return receiver.wait_for_spans(lambda s: sum(x.name == "invoke_agent hermes" for x in s) >= count, timeout=15)


def _subscribe_every_hook(monkeypatch, tmp_path) -> None:
    """A plugins.toml that opts in to every hook (pre_api_request is opt-in); applies at the next discovery."""
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nobserver_exclude_hooks = []\n')
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))


@pytest.fixture
def every_hook(monkeypatch, tmp_path):
    _subscribe_every_hook(monkeypatch, tmp_path)


def test_log_stream_is_one_record_per_hook_call_in_order(every_hook, hook_tape, traced, llm, receiver):
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo tape"}, id="call_T")), Reply.text("taped"))
    assert run_agent(llm.base_url, "record everything")["final_response"] == "taped"
    spans = _turns(receiver, traced)
    logs = receiver.wait_for_logs(lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r), timeout=10)
    tape = list(hook_tape)
    assert [r.event_name.removeprefix("hermes.observer.") for r in logs] == [name for name, _, _ in tape]
    assert {name for name, _, _ in tape} >= {
        "on_session_start", "pre_llm_call", "pre_api_request", "post_api_request", "pre_tool_call",
        "post_tool_call", "transform_tool_result", "post_llm_call", "on_session_end",
    }
    root = only(spans, "invoke_agent hermes")
    tool = only(spans, "execute_tool terminal")
    for record, (name, turn_id, tool_call_id) in zip(logs, tape, strict=False):
        assert record.attributes["hermes.telemetry_schema_version"] == "hermes.observer.v1"
        assert record.attributes["hermes.observer.hook"] == name
        if turn_id:
            assert record.attributes["hermes.turn_id"] == turn_id
            assert record.trace_id == root.trace_id  # correlated to the turn's trace
        if name == "post_tool_call":  # pre_tool_call comes before the call's span exists: the turn's
            assert record.span_id == tool.span_id and tool_call_id == "call_T"
        assert record.body is None  # no content unless capture is on
    post_tool = next(r for r in logs if r.event_name == "hermes.observer.post_tool_call")
    assert post_tool.attributes["hermes.status"] == "ok"
    assert isinstance(post_tool.attributes["hermes.duration_ms"], int)
    traced.current_telemetry().meter_provider.force_flush(5000)
    metrics = receiver.wait_for_metrics(lambda m: any(x.name == "hermes.tool.calls" for x in m), timeout=10)
    assert_documented(spans, metrics, logs)


def test_retry_attempt_carries_hermes_account_of_the_error(traced, llm, receiver):
    llm.push(Reply.error(503, "busy"), Reply.text("recovered"))
    assert run_agent(llm.base_url, "hello")["final_response"] == "recovered"
    failed, ok = named(_turns(receiver, traced), "chat fake-model")
    assert failed.status_code == "ERROR" and ok.status_code == "UNSET"
    a = failed.attributes
    assert a["http.response.status_code"] == 503
    assert a["hermes.api.retryable"] is True
    assert a["hermes.api.retry_count"] == 0 and a["hermes.api.max_retries"] >= 1
    assert isinstance(a["hermes.api.error_reason"], str) and a["hermes.api.error_reason"]
    assert failed.end_ns <= ok.start_ns  # the span's end is the attempt's, not the hook's


def test_interrupted_turn(traced, llm, receiver):
    from run_agent import AIAgent

    llm.push(Reply(content="too late", delay_s=3.0))
    agent = AIAgent(
        base_url=llm.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
        enabled_toolsets=["terminal"], quiet_mode=True, skip_context_files=True, skip_memory=True,
        max_iterations=4, platform="cli",
    )
    timer = threading.Timer(0.8, agent.interrupt, args=("test interrupt",))
    timer.start()
    agent.run_conversation("slow please")
    timer.cancel()
    root = only(_turns(receiver, traced), "invoke_agent hermes")
    assert root.attributes["hermes.turn.interrupted"] is True
    assert root.status_code == "ERROR" and root.status_message == "interrupted"
    assert root.attributes["error.type"] == "interrupted"


def test_subagent_nests_under_the_parents_delegate_task(traced, llm, receiver):
    goal = "Say hello from the child"
    # Hermes runs the child on another thread while the parent goes on: both get "done", in either order.
    llm.push(Reply.tools(ToolCall("delegate_task", {"goal": goal}, id="call_D")), Reply.text("done"), Reply.text("done"))
    result = run_agent(llm.base_url, "delegate something", enabled_toolsets=["terminal", "delegation"])
    assert result["final_response"] == "done"
    spans = _turns(receiver, traced, 3)  # the two turns and the subagent
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: bool(subagents(s)) and len(turn_roots(s)) == 2, timeout=10)
    assert tree(spans) == [[
        "invoke_agent hermes",
        [
            "chat fake-model",
            ["execute_tool delegate_task", [["invoke_agent hermes", [["invoke_agent hermes", ["chat fake-model"]]]]]],
            "chat fake-model",
        ],
    ]]
    parent_root, child_root = turn_roots(spans)
    (subagent,) = subagents(spans)
    assert subagent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert subagent.attributes["gen_ai.agent.name"] == "hermes"
    assert child_root.trace_id == parent_root.trace_id
    assert child_root.parent_span_id == subagent.span_id
    child_session = subagent.attributes["hermes.subagent.child_session_id"]
    assert child_root.attributes["gen_ai.conversation.id"] == child_session
    assert child_session != parent_root.attributes["gen_ai.conversation.id"]
    assert subagent.attributes["gen_ai.conversation.id"] == parent_root.attributes["gen_ai.conversation.id"]
    assert subagent.attributes["hermes.subagent.role"] == "leaf"
    assert subagent.attributes["hermes.subagent.goal_chars"] == len(goal)
    assert subagent.attributes["hermes.subagent.status"] == "completed"
    assert subagent.attributes["hermes.subagent.duration_ms"] >= 0
    assert subagent.status_code == "UNSET"


def test_denied_approval_is_a_span_under_a_blocked_tool(traced, llm, receiver, monkeypatch):
    from tools.terminal_tool import set_approval_callback

    monkeypatch.setenv("HERMES_INTERACTIVE", "1")
    decisions = []
    set_approval_callback(lambda command, description, **kw: decisions.append(command) or "deny")
    try:
        llm.push(Reply.tools(ToolCall("terminal", {"command": "rm -rf /tmp/hermes-otel-never"}, id="call_A")), Reply.text("ok, not done"))
        assert run_agent(llm.base_url, "delete it")["final_response"] == "ok, not done"
    finally:
        set_approval_callback(None)
    assert decisions == ["rm -rf /tmp/hermes-otel-never"]
    spans = _turns(receiver, traced)
    assert tree(spans) == [["invoke_agent hermes", ["chat fake-model", ["execute_tool terminal", ["approval"]], "chat fake-model"]]]
    tool = only(spans, "execute_tool terminal")
    approval = only(spans, "approval")
    assert approval.attributes == {
        "hermes.approval.surface": "cli",
        "hermes.approval.pattern_key": "delete in root path",
        "hermes.approval.pattern_keys": ["delete in root path"],
        "hermes.approval.choice": "deny",
        "hermes.turn.id": tool.attributes["hermes.turn.id"],
        "gen_ai.tool.call.id": "call_A",
    }
    assert approval.status_code == "ERROR" and approval.status_message == "approval deny"
    assert tool.attributes["hermes.tool.status"] == "blocked"
    assert tool.attributes["error.type"] == "approval_denied"
    assert tool.status_code == "ERROR"
    assert tool.start_ns <= approval.start_ns <= approval.end_ns <= tool.end_ns
    assert "rm -rf" not in repr([s.attributes for s in spans])  # the command is content: not exported


SECRETS = (
    "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123",
    "AKIAABCDEFGHIJKLMNOP",
    "abcdefghijklmnopqrstuvwxyz012345",  # a bearer token
    "s3cr3t-pass",  # in a URL's user:password
)


@pytest.mark.parametrize("mode", ["NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"])
def test_secrets_never_leave_in_any_capture_mode(traced, llm, receiver, monkeypatch, mode):
    """With the defaults users get: Hermes's log lines bridged and HTTP client spans on (the suite runs with both
    off), in every capture mode."""
    from hermes_cli.plugins import discover_plugins

    for variable in QUIET_DEFAULTS:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    discover_plugins(force=True)
    user_message = f"use key {SECRETS[0]} and {SECRETS[1]} please"
    command = f"echo 'Authorization: Bearer {SECRETS[2]}' https://bob:{SECRETS[3]}@example.invalid/x > /dev/null"
    llm.push(Reply.tools(ToolCall("terminal", {"command": command}, id="call_S")), Reply.text("done"))
    assert run_agent(llm.base_url, user_message)["final_response"] == "done"
    spans = _turns(receiver, traced)
    logs = receiver.wait_for_logs(lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r), timeout=10)
    exported = repr([(s.attributes, s.events, s.status_message) for s in spans]) + repr(
        [(r.attributes, r.body) for r in logs]
    )
    for secret in SECRETS:
        assert secret not in exported, (mode, secret)
    root = only(spans, "invoke_agent hermes")
    tool = only(spans, "execute_tool terminal")
    bodies = [r.body for r in logs if r.body and r.event_name.startswith("hermes.observer.")]
    assert any(s.name == "POST" for s in spans)  # the defaults are on: the model requests' client spans
    if mode in ("SPAN_ONLY", "SPAN_AND_EVENT"):
        assert "use key <redacted> and <redacted> please" in root.attributes["gen_ai.input.messages"]
        assert "Bearer <redacted>" in tool.attributes["gen_ai.tool.call.arguments"]
        assert "https://bob:<redacted>@example.invalid" in tool.attributes["gen_ai.tool.call.arguments"]
        assert "gen_ai.tool.call.result" in tool.attributes
    else:
        assert not any(k.startswith("gen_ai.input") or k.startswith("gen_ai.tool.call.a") for s in spans for k in s.attributes)
    if mode in ("EVENT_ONLY", "SPAN_AND_EVENT"):
        pre_llm = next(r for r in logs if r.event_name == "hermes.observer.pre_llm_call")
        assert pre_llm.body == {"user_message": "use key <redacted> and <redacted> please"}
        pre_tool = next(r for r in logs if r.event_name == "hermes.observer.pre_tool_call")
        assert "Bearer <redacted>" in pre_tool.body["args"]["command"]
    else:
        assert bodies == []


def test_pre_api_request_is_opt_in(traced, llm, receiver, monkeypatch, tmp_path):
    from hermes_cli.plugins import discover_plugins, get_plugin_manager

    # By default (observer_exclude_hooks = ["pre_api_request"]) Hermes's per-call request copy is skipped.
    assert not get_plugin_manager().has_hook("pre_api_request")  # Hermes then skips serialising requests
    assert get_plugin_manager().has_hook("post_api_request")
    llm.push(Reply.text("lean"))
    assert run_agent(llm.base_url, "hi")["final_response"] == "lean"
    _turns(receiver, traced)
    logs = receiver.wait_for_logs(lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r), timeout=10)
    names = [r.event_name for r in logs]
    assert "hermes.observer.pre_api_request" not in names and "hermes.observer.post_api_request" in names
    _subscribe_every_hook(monkeypatch, tmp_path)
    discover_plugins(force=True)
    assert get_plugin_manager().has_hook("pre_api_request")
