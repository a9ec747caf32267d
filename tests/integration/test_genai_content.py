"""Real Hermes turns in every capture mode, read the way a GenAI backend reads them: each span kind's attributes by
the conventions' requirement levels, every content attribute and details event against the conventions' message
schemas (parsed), one details event per `chat` span. At the default budget (`capture_max_chars`, 512 Ki characters)
a turn whose history is over 8 KiB arrives whole (issue 48: it used to be cut at 8 KiB); with the standard
attribute-length variable at 8192 it is cut there, still valid JSON."""

from __future__ import annotations

import json

import pytest

from docsgen import catalog
from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.documented import assert_documented
from tests.harness.genai_schema import check_definitions, check_messages
from tests.harness.hermes import run_agent
from tests.harness.trees import only

pytestmark = [pytest.mark.hermes, pytest.mark.usefixtures("at_the_defaults")]

LIMIT = 8192  # OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT in the capped case
LONG = "The quick brown fox jumps over the lazy dog. " * 150  # ~6.7 KB: this turn's history is over 8 KiB


@pytest.mark.parametrize(("mode", "limit"), [("NO_CONTENT", None), ("SPAN_ONLY", None), ("EVENT_ONLY", None),
                                             ("SPAN_AND_EVENT", None), ("SPAN_ONLY", LIMIT)])
def test_a_turn_reads_as_a_conversation_in_every_capture_mode(traced, llm, receiver, monkeypatch, mode, limit):
    from hermes_cli.plugins import discover_plugins

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    if limit is not None:
        monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", str(limit))
    discover_plugins(force=True)
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo first"}, id="call_1")),
             Reply.tools(ToolCall("terminal", {"command": f"echo '{LONG[:200]}'"}, id="call_2")),
             Reply.text("All done."))
    assert run_agent(llm.base_url, f"Run two commands. Context: {LONG}")["final_response"] == "All done."
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    logs = receiver.wait_for_logs(lambda r: any(x.event_name == "hermes.observer.on_session_end" for x in r),
                                  timeout=10)
    assert_documented(spans, logs=logs)
    root = only(spans, "invoke_agent hermes")
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_ns)
    tools = [s for s in spans if s.name == "execute_tool terminal"]
    assert len(chats) == 3 and len(tools) == 2

    # Each span kind's Required attributes, and the Recommended ones a reply or Hermes gives.
    for kind, found in (("chat", chats), ("invoke_agent", [root]), ("execute_tool", tools)):
        required = [name for name, level, _ in catalog.CONVENTIONS[kind] if level == "Required"]
        for span in found:
            assert all(name in span.attributes for name in required), (kind, span.attributes)
    for chat in chats:
        assert {"gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                "server.address", "server.port", "gen_ai.response.model"} <= set(chat.attributes), chat.attributes
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ["tool_calls"], ["tool_calls"], ["stop"]]
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert root.attributes[key] == sum(c.attributes[key] for c in chats), key
    assert root.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    for tool in tools:
        assert tool.attributes["gen_ai.agent.name"] == "hermes"
        assert tool.attributes["gen_ai.tool.description"]  # Hermes's schema of `terminal`, as the model got it

    on_spans, in_events = mode in ("SPAN_ONLY", "SPAN_AND_EVENT"), mode in ("EVENT_ONLY", "SPAN_AND_EVENT")
    content = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions")
    if on_spans:
        for chat in chats:
            texts = {key: chat.attributes[key] for key in content}
            assert all(len(text) <= (limit or 512 * 1024) for text in texts.values()), {
                k: len(t) for k, t in texts.items()}
            inputs, outputs = json.loads(texts["gen_ai.input.messages"]), json.loads(texts["gen_ai.output.messages"])
            check_messages(inputs)
            check_messages(outputs, output=True)
            check_definitions(json.loads(texts["gen_ai.tool.definitions"]))
            assert inputs[0]["role"] == "system" and "gen_ai.system_instructions" not in chat.attributes
        if limit is not None:
            assert all("…[truncated]" in c.attributes["gen_ai.input.messages"] for c in chats)  # the limit was hit
        else:  # whole: the long prompt and every message, nothing shortened
            assert all("…[truncated]" not in c.attributes["gen_ai.input.messages"] and LONG.strip() in json.loads(
                c.attributes["gen_ai.input.messages"])[1]["parts"][0]["content"] for c in chats)
        last_inputs = json.loads(chats[-1].attributes["gen_ai.input.messages"])
        assert [m["role"] for m in last_inputs][-2:] == ["assistant", "tool"]  # the history, newest whole
        assert json.loads(chats[0].attributes["gen_ai.output.messages"])[0]["parts"] == [
            {"type": "tool_call", "id": "call_1", "name": "terminal", "arguments": {"command": "echo first"}}]
        assert json.loads(chats[-1].attributes["gen_ai.output.messages"]) == [
            {"role": "assistant", "parts": [{"type": "text", "content": "All done."}], "finish_reason": "stop"}]
        assert json.loads(root.attributes["gen_ai.output.messages"]) == [
            {"role": "assistant", "parts": [{"type": "text", "content": "All done."}], "finish_reason": "stop"}]
        # The tools the agent had, on its invoke_agent span too (Opt-In there; issue 48): the chats' own list.
        assert json.loads(root.attributes["gen_ai.tool.definitions"]) == json.loads(
            chats[-1].attributes["gen_ai.tool.definitions"])
        check_definitions(json.loads(root.attributes["gen_ai.tool.definitions"]))
    else:
        assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.definitions",
                                       "gen_ai.system_instructions")) for s in spans for key in s.attributes)

    details = [r for r in logs if r.event_name == catalog.DETAILS_EVENT]
    if not in_events:
        assert details == []
        return
    assert sorted(r.span_id for r in details) == sorted(c.span_id for c in chats)  # one per chat span
    for record in details:
        chat = next(c for c in chats if c.span_id == record.span_id)
        assert record.trace_id == chat.trace_id and record.severity_text == "DEBUG" and record.body is None
        assert record.attributes["gen_ai.operation.name"] == "chat"
        assert record.attributes["gen_ai.request.model"] == chat.attributes["gen_ai.request.model"]
        check_messages(record.attributes["gen_ai.input.messages"])
        check_messages(record.attributes["gen_ai.output.messages"], output=True)
        check_definitions(record.attributes["gen_ai.tool.definitions"])
        assert len(json.dumps(record.attributes["gen_ai.input.messages"], ensure_ascii=False)) <= 512 * 1024
