"""Hermes's auxiliary model calls on real Hermes 0.19.0 in-process: a smart-approval verdict made inside a turn and a
session title made after it, each a `chat {model}` span with `hermes.llm.purpose`, priced like the main loop's
attempts, in the turn's and the session's totals and in `hermes-otel cost --by purpose`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage
from tests.harness.documented import assert_documented
from tests.harness.hermes import write_home
from tests.harness.trees import named, only, tree
from tests.integration.test_cost_hermes import PRICES, usd

pytestmark = pytest.mark.hermes

VERDICT = Usage(90, 1)
FIRST = Usage(50, 20)
FINAL = Usage(300, 10)
TITLE = Usage(70, 6)


@pytest.fixture
def smart(traced, llm, monkeypatch):
    """A priced server and smart approvals (Hermes asks its auxiliary model whether a flagged command may run)."""
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # approvals apply (an interactive CLI session)
    home = Path(os.environ["HERMES_HOME"])
    with FakeLLMServer(pricing=PRICES) as server:
        write_home(home, server.base_url)
        config = home / "config.yaml"
        config.write_text(config.read_text().replace("mode: manual", "mode: smart").replace("enabled: false", "enabled: true"))
        try:
            yield server
        finally:
            write_home(home, llm.base_url)


def test_auxiliary_calls_are_chat_spans_priced_and_rolled_up(smart, traced, receiver, tmp_path):
    smart.push(
        Reply(tool_calls=(ToolCall("terminal", {"command": "python3 -c 'print(1)'"}, id="call_py"),), usage=FIRST),
        Reply(content="APPROVE", usage=VERDICT),  # the auxiliary verdict on the flagged command
        Reply(content="done", usage=FINAL),
    )
    from hermes_state import SessionDB
    from run_agent import AIAgent

    session_db = SessionDB()  # as Hermes's CLI and gateway give their agents: Hermes accounts auxiliary usage in it
    agent = AIAgent(base_url=smart.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
                    enabled_toolsets=["terminal"], quiet_mode=True, skip_context_files=True, skip_memory=True,
                    max_iterations=4, platform="cli", session_db=session_db)
    assert agent.run_conversation("run it")["final_response"] == "done"
    # The title Hermes's CLI generates after the first exchange, on a thread of its own (the turn has ended).
    from agent.title_generator import auto_title_session

    smart.push(Reply(content="Running a script", usage=TITLE))
    auto_title_session(session_db, agent.session_id, "run it", "done",
                       main_runtime={"model": "fake-model", "provider": "custom", "base_url": smart.base_url,
                                     "api_key": "sk-fake-test-key", "api_mode": "chat_completions"})
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: sum(x.name == "chat fake-model" for x in s) >= 4, timeout=15)

    assert tree(spans) == [[
        "invoke_agent hermes",
        ["chat fake-model", ["execute_tool terminal", ["approval", "chat fake-model"]], "chat fake-model",
         "chat fake-model"],
    ]]
    root, tool = only(spans, "invoke_agent hermes"), only(spans, "execute_tool terminal")
    chats = sorted(named(spans, "chat fake-model"), key=lambda s: s.start_ns)
    purposes = [c.attributes.get("hermes.llm.purpose") for c in chats]
    assert purposes == [None, "approval", None, "title_generation"]
    verdict, title = chats[1], chats[3]
    # The verdict is asked while the tool call waits for approval; the title comes after the turn, in its trace.
    assert (verdict.parent_span_id, title.parent_span_id) == (tool.span_id, root.span_id)
    for span, usage in ((verdict, VERDICT), (title, TITLE)):
        a = span.attributes
        assert span.kind == "CLIENT" and span.trace_id == root.trace_id
        assert a["gen_ai.operation.name"] == "chat"
        assert (a["gen_ai.provider.name"], a["hermes.provider"]) == ("auto", "auto")  # Hermes's auxiliary route
        assert (a["server.address"], a["server.port"]) == ("127.0.0.1", smart.port)
        assert a["gen_ai.request.model"] == "fake-model"
        assert a["gen_ai.conversation.id"] == agent.session_id
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (usage.prompt_tokens,
                                                                                      usage.completion_tokens)
        assert a["hermes.usage.cost"] == float(usd(usage))
        assert a["hermes.usage.cost_status"] == "estimated"
    assert verdict.attributes["hermes.turn.id"] == root.attributes["hermes.turn.id"]
    assert verdict.attributes["gen_ai.request.max_tokens"] == 16
    assert verdict.attributes["gen_ai.request.temperature"] == 0
    # The verdict is in the turn's total (the title came after the turn ended).
    assert root.attributes["hermes.turn.cost"] == float(usd(FIRST) + usd(VERDICT) + usd(FINAL))
    # Hermes's own session total (what `/usage` shows) is the main loop's; ours adds the calls it does not see,
    # the title too (it came after the turn: in the session's total, not the turn's).
    assert round(agent.session_estimated_cost_usd, 12) == round(float(usd(FIRST) + usd(FINAL)), 12)
    session = traced.current_tracker().costs.session_attributes(agent.session_id)
    assert session == {"hermes.session.cost": float(usd(FIRST) + usd(VERDICT) + usd(FINAL) + usd(TITLE)),
                       "hermes.session.cost_status": "estimated"}
    # Hermes 0.19 keeps its own account of these calls apart from the session total (state.db, one row per task):
    # our spans carry the same tokens and cost, call for call.
    rows = session_db._conn.execute(
        "SELECT task, input_tokens, output_tokens, estimated_cost_usd FROM session_model_usage "
        "WHERE session_id = ? AND task != '' ORDER BY task", (agent.session_id,)).fetchall()
    assert [tuple(r) for r in rows] == [
        (s.attributes["hermes.llm.purpose"], s.attributes["gen_ai.usage.input_tokens"],
         s.attributes["gen_ai.usage.output_tokens"], s.attributes["hermes.usage.cost"]) for s in (verdict, title)]
    assert_documented(spans, logs=receiver.logs())
