"""Correct by the book, with real Hermes 0.19.0: every record of a turn correlated, no made-up ids, a failed
turn is an error."""

from __future__ import annotations

import threading

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import clean_env, hermes_chat, run_agent, write_home
from tests.harness.otlp_receiver import OTLPReceiver
from tests.harness.trees import named, only

pytestmark = pytest.mark.hermes

# The hooks the scripted session below fires (Hermes's VALID_HOOKS less gateway, kanban, verify and
# session-finalize hooks, which an in-process turn cannot fire).
FIRED = (
    "on_session_start", "pre_llm_call", "pre_api_request", "post_api_request", "api_request_error",
    "pre_tool_call", "post_tool_call", "transform_tool_result", "transform_terminal_output",
    "pre_approval_request", "post_approval_response", "subagent_start", "subagent_stop",
    "post_llm_call", "transform_llm_output", "on_session_end",
)


@pytest.fixture(scope="module")
def session(llm, plugins_enabled, tmp_path_factory):
    """One scripted session firing every hook in FIRED: a retry, a terminal command, an approval, a subagent."""
    from hermes_cli.plugins import discover_plugins
    from tools.terminal_tool import set_approval_callback

    from hermes_otel import runtime

    toml = tmp_path_factory.mktemp("every-hook") / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                    'observer_exclude_hooks = []\n')
    with OTLPReceiver() as receiver, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        mp.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
        mp.setenv("HERMES_INTERACTIVE", "1")
        with plugins_enabled("hook_tape") as (tape,):
            tape.TAPE.clear()
            set_approval_callback(lambda command, description, **kw: "once")
            try:
                llm.push(
                    Reply.error(503, "busy"),
                    Reply.tools(ToolCall("terminal", {"command": "echo hooks"}, id="call_T")),
                    Reply.tools(ToolCall("terminal", {"command": "rm -rf /tmp/hermes-otel-approved-never-there"},
                                         id="call_A")),
                    Reply.tools(ToolCall("delegate_task", {"goal": "Say hi"}, id="call_D")),
                    Reply.text("done"), Reply.text("done"),
                )
                result = run_agent(llm.base_url, "fire every hook", enabled_toolsets=["terminal", "delegation"],
                                   max_iterations=8)
                assert result["final_response"] == "done"
                tracker = runtime.current_tracker()
                deadline = threading.Event()
                for _ in range(100):  # the delegated child finishes on its own thread
                    if tracker.open_turns() == 0:
                        break
                    deadline.wait(0.1)
            finally:
                set_approval_callback(None)
            runtime.flush(5)
            tape_copy = list(tape.TAPE)
        spans = receiver.wait_for_spans(lambda s: sum(x.name == "invoke_agent hermes" for x in s) >= 2, timeout=15)
        logs = receiver.wait_for_logs(
            lambda r: sum(x.event_name == "hermes.observer.on_session_end" for x in r) >= 2, timeout=15)
    discover_plugins(force=True)
    return {"spans": spans, "logs": logs, "tape": tape_copy}


def test_the_session_fires_every_hook_it_should(session):
    from hermes_cli.plugins import VALID_HOOKS

    fired = {name for name, _, _ in session["tape"]}
    assert fired == set(FIRED) and fired <= set(VALID_HOOKS)


@pytest.mark.parametrize("hook", FIRED)
def test_every_record_carries_its_turns_trace_and_innermost_span(session, hook):
    spans, logs = session["spans"], session["logs"]
    by_id = {s.span_id: s for s in spans}
    roots = named(spans, "invoke_agent hermes")
    records = [r for r in logs if r.event_name == f"hermes.observer.{hook}"]
    assert records, hook
    if hook == "on_session_start":
        # Fired when a session begins, before its first turn exists: a session-level record, in no trace.
        assert all(r.trace_id is None and r.attributes["hermes.session_id"] for r in records)
        return
    for record in records:
        assert record.trace_id in {r.trace_id for r in roots}, (hook, record.attributes)
        span = by_id[record.span_id]
        call_id = record.attributes.get("hermes.tool_call_id")
        turn_id = record.attributes.get("hermes.turn_id")
        if hook in ("post_tool_call", "transform_tool_result"):
            assert span.name.startswith("execute_tool") and span.attributes["gen_ai.tool.call.id"] == call_id
        elif hook == "transform_terminal_output":
            # Fired inside the terminal tool, with only a task id: the innermost span open there.
            ancestors = []
            while span is not None:
                ancestors.append(span.name)
                span = by_id.get(span.parent_span_id)
            assert "execute_tool terminal" in ancestors and ancestors[0] != "invoke_agent hermes", ancestors
        elif hook in ("pre_approval_request", "post_approval_response"):
            assert span.name in ("execute_tool terminal", "approval"), span.name
        elif hook in ("subagent_start", "subagent_stop"):
            assert span.name in ("execute_tool delegate_task", "invoke_agent hermes"), span.name
        elif turn_id:
            root = next(r for r in roots if r.attributes.get("hermes.turn.id") == turn_id)
            assert span.trace_id == root.trace_id
            if hook in ("transform_llm_output", "post_llm_call", "on_session_end", "pre_llm_call"):
                assert span is root, (hook, span.name)
        else:  # a session id only (transform_llm_output): the session's open turn
            assert span.name == "invoke_agent hermes", (hook, span.name)


def test_no_made_up_response_ids(traced, llm, receiver):
    """Hermes builds a streamed response itself, with an id of its own: that is not the provider's."""
    from run_agent import AIAgent

    kwargs = dict(base_url=llm.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
                  enabled_toolsets=["terminal"], quiet_mode=True, skip_context_files=True, skip_memory=True,
                  max_iterations=2, platform="cli")
    for streaming in (True, False):
        llm.push(Reply.text("ok"))
        agent = AIAgent(**kwargs)
        agent._disable_streaming = not streaming
        assert agent.run_conversation("hello")["final_response"] == "ok"
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: sum(x.name == "chat fake-model" for x in s) >= 2, timeout=15)
    streamed, plain = named(spans, "chat fake-model")
    assert "gen_ai.response.id" not in streamed.attributes
    assert streamed.attributes["hermes.response.id"].startswith("stream-")
    assert streamed.attributes["gen_ai.response.model"] == "fake-model"  # from the provider's chunks
    assert plain.attributes["gen_ai.response.id"].startswith("chatcmpl-fake-")  # the provider's own
    assert "hermes.response.id" not in plain.attributes


def test_a_turn_hermes_gives_up_on_is_an_error(tmp_path):
    """Every attempt fails: Hermes gives up ("API call failed after 3 retries"), exits 1 and fires no
    on_session_end for the turn; its root ends ERROR at the last attempt, with the attempt's error type."""
    from hermes_otel.testing.fake_llm import FakeLLMServer

    home = tmp_path / "home"
    with FakeLLMServer(default=Reply.error(500, "down")) as llm, OTLPReceiver() as receiver:
        write_home(home, llm.base_url)
        result = hermes_chat("hello", env=clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint))
        assert result.returncode == 1 and "API call failed after" in result.stdout + result.stderr
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    root = only(spans, "invoke_agent hermes")
    attempts = named(spans, "chat fake-model")
    assert len(attempts) >= 2 and all(a.status_code == "ERROR" for a in attempts)
    assert root.status_code == "ERROR" and root.attributes["error.type"] == "InternalServerError"
    assert root.attributes["hermes.turn.end_reason"] == "session_closed"
    assert root.end_ns == attempts[-1].end_ns  # the turn ended when Hermes gave up, not at exit


def test_a_failing_tool_the_model_recovers_from_leaves_the_turn_ok(traced, llm, receiver, tmp_path):
    llm.push(Reply.tools(ToolCall("read_file", {"path": str(tmp_path / "missing.txt")}, id="call_M")),
             Reply.text("recovered"))
    assert run_agent(llm.base_url, "read it", enabled_toolsets=["file"])["final_response"] == "recovered"
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    root, tool = only(spans, "invoke_agent hermes"), only(spans, "execute_tool read_file")
    assert tool.status_code == "ERROR" and tool.attributes["hermes.tool.status"] == "error"
    assert root.status_code == "UNSET" and "error.type" not in root.attributes
    assert root.attributes["hermes.turn.completed"] is True and "hermes.turn.end_reason" not in root.attributes
