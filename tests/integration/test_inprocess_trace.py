"""Real Hermes 0.19.0 in-process, plugin enabled through its entry point, OTLP/HTTP to a loopback receiver."""

from __future__ import annotations

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.documented import assert_documented
from tests.harness.hermes import parallel_reads, run_agent
from tests.harness.trees import named, only, tree

pytestmark = pytest.mark.hermes


def _wait_turn(receiver, count: int = 1):
    return receiver.wait_for_spans(lambda s: sum(x.name == "invoke_agent hermes" for x in s) >= count, timeout=15)


def test_tool_call_then_answer_is_one_trace(traced, llm, receiver):
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo traced"}, id="call_a")), Reply.text("It printed traced."))
    result = run_agent(llm.base_url, "run echo traced")
    assert result["final_response"] == "It printed traced."
    traced.flush(5)
    spans = _wait_turn(receiver)

    assert tree(spans) == [
        ["invoke_agent hermes", ["chat fake-model", "execute_tool terminal", "chat fake-model"]],
    ]
    root = only(spans, "invoke_agent hermes")
    first, second = named(spans, "chat fake-model")
    tool = only(spans, "execute_tool terminal")
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert root.parent_span_id is None and root.kind == "INTERNAL"
    session_id = root.attributes["gen_ai.conversation.id"]
    turn_id = root.attributes["hermes.turn.id"]
    assert turn_id.startswith(session_id + ":")
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "hermes"
    assert root.attributes["hermes.turn.completed"] is True
    assert root.attributes["hermes.turn.interrupted"] is False
    assert root.status_code == "UNSET"

    for attempt, chat in enumerate((first, second), start=1):
        assert chat.kind == "CLIENT"
        assert chat.status_code == "UNSET"
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == "fake-model"
        assert a["gen_ai.response.model"] == "fake-model"
        assert a["gen_ai.conversation.id"] == session_id
        assert a["hermes.turn.id"] == turn_id
        assert a["hermes.api_request.id"] == f"{turn_id}:api:{attempt}"
        assert a["hermes.api.attempt"] == 1
        assert a["gen_ai.request.stream"] is True
        assert a["gen_ai.usage.input_tokens"] == 11
        assert a["gen_ai.usage.output_tokens"] == 7
        assert a["server.address"] == "127.0.0.1"
        assert a["server.port"] == llm.port
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert second.attributes["gen_ai.response.finish_reasons"] == ["stop"]

    t = tool.attributes
    assert tool.kind == "INTERNAL" and tool.status_code == "UNSET"
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert t["gen_ai.tool.name"] == "terminal"
    assert t["gen_ai.tool.call.id"] == "call_a"
    assert t["gen_ai.tool.type"] == "function"
    assert t["hermes.tool.status"] == "ok"
    assert t["gen_ai.conversation.id"] == session_id
    # The chain spans nest inside the turn in time, too.
    assert root.start_ns <= first.start_ns < first.end_ns <= tool.start_ns < tool.end_ns <= second.start_ns
    assert second.end_ns <= root.end_ns

    resource = root.resource
    assert resource["service.name"] == "hermes-agent"
    assert resource["service.version"] == "0.19.0"
    assert resource["hermes.version"] == "0.19.0"
    assert resource["service.instance.id"]


def test_two_tool_calls_in_one_reply_are_two_spans(traced, llm, receiver, tmp_path):
    llm.push(parallel_reads(tmp_path, ("call_1x", "call_2x")), Reply.text("Both ran."))
    result = run_agent(llm.base_url, "read two files", enabled_toolsets=["file"])
    assert result["final_response"] == "Both ran."
    traced.flush(5)
    spans = _wait_turn(receiver)
    assert tree(spans)[0][0] == "invoke_agent hermes"
    tools = named(spans, "execute_tool read_file")
    root = only(spans, "invoke_agent hermes")
    # Hermes runs tool_execution twice, nested, per call of a concurrent batch: still one span per call.
    assert sorted(t.attributes["gen_ai.tool.call.id"] for t in tools) == ["call_1x", "call_2x"]
    assert all(t.parent_span_id == root.span_id for t in tools)
    assert all(t.attributes["hermes.tool.status"] == "ok" for t in tools)
    assert len(named(spans, "chat fake-model")) == 2


def test_http_500_then_success_is_two_attempts(traced, llm, receiver):
    llm.push(Reply.error(500, "boom"), Reply.text("recovered"))
    result = run_agent(llm.base_url, "hello")
    assert result["final_response"] == "recovered"
    traced.flush(5)
    spans = _wait_turn(receiver)
    chats = named(spans, "chat fake-model")
    assert len(chats) == 2
    failed, ok = chats
    assert failed.attributes["hermes.api_request.id"] == ok.attributes["hermes.api_request.id"]
    assert [failed.attributes["hermes.api.attempt"], ok.attributes["hermes.api.attempt"]] == [1, 2]
    assert failed.status_code == "ERROR"
    assert failed.attributes["error.type"] == "InternalServerError"
    assert failed.attributes["http.response.status_code"] == 500
    assert [e[0] for e in failed.events] == ["exception"]
    assert ok.status_code == "UNSET"


def test_second_turn_links_to_first(traced, llm, receiver):
    from run_agent import AIAgent

    llm.push(Reply.text("first"), Reply.text("second"))
    agent = AIAgent(
        base_url=llm.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
        enabled_toolsets=["terminal"], quiet_mode=True, skip_context_files=True, skip_memory=True,
        max_iterations=4, platform="cli",
    )
    r1 = agent.run_conversation("one")
    r2 = agent.run_conversation("two", conversation_history=r1["messages"])
    assert (r1["final_response"], r2["final_response"]) == ("first", "second")
    traced.flush(5)
    spans = _wait_turn(receiver, 2)
    first, second = named(spans, "invoke_agent hermes")
    assert first.trace_id != second.trace_id
    assert first.attributes["gen_ai.conversation.id"] == second.attributes["gen_ai.conversation.id"]
    assert second.links == [(first.trace_id, first.span_id, {"hermes.link.type": "previous_turn"})]
    assert first.links == []


def test_everything_emitted_is_documented(traced, llm, receiver):
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo doc"}, id="call_doc")), Reply.text("ok"))
    run_agent(llm.base_url, "run echo doc")
    traced.flush(5)
    spans = _wait_turn(receiver)
    traced.current_telemetry().meter_provider.force_flush(5000)
    metrics = receiver.wait_for_metrics(lambda m: any(x.name == "gen_ai.invoke_agent.duration" for x in m), timeout=10)
    assert_documented(spans, metrics)
