"""What did it cost, on real Hermes 0.19.0 in-process: a priced route (the scripted server publishes prices on its
`/v1/models`, which Hermes reads to price a custom endpoint) and an unpriced one. Span attributes, roll-ups (a turn
with a failed and a cut-off attempt, parallel tools, a subagent), the counter and its exemplars, the session's end
record, and equality with Hermes's own `session_estimated_cost_usd`."""

from __future__ import annotations

import os
import socket
import threading
from decimal import Decimal
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage
from tests.harness.documented import assert_documented
from tests.harness.hermes import parallel_reads, write_home
from tests.harness.trees import named, only, subagents, tree, turn_roots

pytestmark = pytest.mark.hermes

PRICES = {"prompt": "0.000002", "completion": "0.000008", "cache_read": "0.0000005"}  # USD per token
DEFAULT = Usage()  # what the server reports when a reply names no usage: 11 in, 7 out
CUT = Usage(100, 50)
CACHED = Usage(120, 30, cached_tokens=20)
FINAL = Usage(300, 10)


def usd(usage: Usage) -> Decimal:
    """What Hermes's pricing makes of `usage` at PRICES, computed here by hand."""
    fresh = usage.prompt_tokens - usage.cached_tokens
    return (fresh * Decimal(PRICES["prompt"]) + usage.cached_tokens * Decimal(PRICES["cache_read"])
            + usage.completion_tokens * Decimal(PRICES["completion"]))


@pytest.fixture(scope="module")
def priced_server():
    with FakeLLMServer(pricing=PRICES) as server:
        yield server


@pytest.fixture
def priced(traced, priced_server, llm):
    """The session's HERMES_HOME pointed at the priced server (subagents read the model from config.yaml)."""
    home = Path(os.environ["HERMES_HOME"])
    write_home(home, priced_server.base_url)
    try:
        yield priced_server
    finally:
        write_home(home, llm.base_url)


def agent_for(base_url: str, toolsets=("terminal",), iterations: int = 4):
    from run_agent import AIAgent

    return AIAgent(base_url=base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
                   enabled_toolsets=list(toolsets), quiet_mode=True, skip_context_files=True, skip_memory=True,
                   max_iterations=iterations, platform="cli")


def telemetry(traced, receiver, turns: int):
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: len(turn_roots(s)) >= turns, timeout=15)
    logs = receiver.wait_for_logs(
        lambda r: sum(x.event_name == "hermes.observer.on_session_end" for x in r) >= turns, timeout=15)
    ends = [r for r in logs if r.event_name == "hermes.observer.on_session_end"]
    # Metrics are collected only at the flush (one request: all of them), sent on their own thread.
    # Cumulative metrics are re-sent on every collection: the last one is current.
    metrics = [m for m in receiver.wait_for_metrics(timeout=15) if m.name == "hermes.usage.cost"][-1:]
    return spans, ends, metrics


def cost_points(metrics) -> list[dict]:
    points = [p for m in metrics for p in m.points]
    assert all(m.unit == "{USD}" and m.kind == "sum" for m in metrics)
    return points


@pytest.fixture
def connections(monkeypatch):
    """Every connection attempt during the test, and whether Hermes's pricing was running on that thread."""
    from hermes_otel.cost import pricing as cost

    seen: list[tuple[str, object, bool]] = []
    pricing = threading.local()
    real_connect, real_price = socket.socket.connect, cost.HermesPricing.price
    calls = []

    def connect(sock, address):
        seen.append((threading.current_thread().name, address, getattr(pricing, "active", False)))
        return real_connect(sock, address)

    def price(self, *args, **kwargs):
        pricing.active = True
        try:
            calls.append(threading.current_thread().name)
            return real_price(self, *args, **kwargs)
        finally:
            pricing.active = False

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(cost.HermesPricing, "price", price)
    return seen, calls


def _child_replies(reply: Reply):
    """A responder: the subagent's requests (their first user message is not the parent's) get `reply`."""
    def respond(body: dict) -> Reply | None:
        users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
        return reply if users and "do it all" not in str(users[0]) else None
    return respond


def test_priced_turn_rolls_up_retries_parallel_tools_and_a_subagent(priced, traced, receiver, tmp_path, connections):
    priced.responder = _child_replies(Reply(content="child done", usage=FINAL))
    priced.push(
        Reply.error(500, "overloaded"),  # request 1, attempt 1: failed before any token was used
        Reply(tool_calls=(ToolCall("terminal", {"command": "echo cut"}, id="call_cut"),), finish="length",
              usage=CUT),  # attempt 2: cut off in its tool call; Hermes runs the request again (and never prices it)
        Reply(tool_calls=(ToolCall("terminal", {"command": "echo ok"}, id="call_ok"),), usage=CACHED),  # attempt 3
        parallel_reads(tmp_path, ("call_p1", "call_p2")),  # two tools in one reply: a concurrent batch
        Reply.tools(ToolCall("delegate_task", {"goal": "Say hi"}, id="call_D")),
        # Hermes runs the child beside the parent: the parent's answer waits, so the child is done before the turn.
        Reply(content="done", usage=FINAL, delay_s=2.0),
    )
    agent = agent_for(priced.base_url, ("terminal", "file", "delegation"), iterations=8)
    try:
        assert agent.run_conversation("do it all")["final_response"] == "done"
    finally:
        priced.responder = None
    priced_during_the_run = list(connections[1])
    spans, ends, metrics = telemetry(traced, receiver, 2)

    assert tree(spans) == [[
        "invoke_agent hermes",
        ["chat fake-model", "chat fake-model", "chat fake-model", "execute_tool terminal", "chat fake-model",
         "execute_tool read_file", "execute_tool read_file", "chat fake-model",
         ["execute_tool delegate_task", [["invoke_agent hermes", [["invoke_agent hermes", ["chat fake-model"]]]]]],
         "chat fake-model"],
    ]]
    root, child_root = turn_roots(spans)
    (subagent,) = subagents(spans)
    assert subagent.end_ns < root.end_ns, "the child should have finished while the parent's answer was delayed"
    chats = sorted((s for s in named(spans, "chat fake-model") if s.parent_span_id == root.span_id),
                   key=lambda s: s.start_ns)
    (child_chat,) = [s for s in named(spans, "chat fake-model") if s.parent_span_id == child_root.span_id]
    expected = [None, usd(CUT), usd(CACHED), usd(DEFAULT), usd(DEFAULT), usd(FINAL)]
    assert [c.attributes.get("hermes.usage.cost") for c in chats] == [None if e is None else float(e) for e in expected]
    assert [c.attributes["hermes.api.attempt"] for c in chats[:3]] == [1, 2, 3]
    assert not any(k.startswith("hermes.usage.") for k in chats[0].attributes)  # no response, nothing to price
    for chat in (*chats[1:], child_chat):
        a = chat.attributes
        assert (a["hermes.usage.cost_status"], a["hermes.usage.cost_source"], a["hermes.usage.pricing_version"]) == (
            "estimated", "provider_models_api", "openai-compatible-models-api")
        assert "hermes.usage.cost_reason" not in a
    assert child_chat.attributes["hermes.usage.cost"] == float(usd(FINAL))

    total = sum(e for e in expected if e is not None) + usd(FINAL)
    assert root.attributes["hermes.turn.cost"] == float(total)
    assert root.attributes["hermes.turn.cost_status"] == "estimated"
    assert root.attributes["hermes.profile"] == "default"
    assert child_root.attributes["hermes.turn.cost"] == float(usd(FINAL))
    assert subagent.attributes["hermes.subagent.cost"] == float(usd(FINAL))
    assert subagent.attributes["hermes.subagent.cost_status"] == "estimated"

    session = root.attributes["gen_ai.conversation.id"]
    (parent_end,) = [r for r in ends if r.attributes["hermes.session_id"] == session]
    assert parent_end.attributes["hermes.session.cost"] == float(total)
    assert parent_end.attributes["hermes.session.cost_status"] == "estimated"
    assert parent_end.span_id == root.span_id
    # Hermes's own total is ours less the attempt it threw away (it prices only the responses it keeps).
    assert agent.session_cost_status == "estimated"
    assert round(agent.session_estimated_cost_usd, 12) == round(float(total - usd(CUT)), 12)

    points = cost_points(metrics)
    by_role = {p["attributes"].get("hermes.subagent.role"): p for p in points}
    assert set(by_role) == {None, "leaf"}
    assert by_role[None]["value"] == pytest.approx(float(total - usd(FINAL)), abs=1e-15)
    assert by_role["leaf"]["value"] == pytest.approx(float(usd(FINAL)), abs=1e-15)
    labels = {"gen_ai.provider.name": "custom", "gen_ai.request.model": "fake-model", "hermes.profile": "default",
              "hermes.usage.cost_source": "provider_models_api"}  # Hermes's estimate, from its price source
    assert by_role[None]["attributes"] == {**labels, "hermes.platform": "cli"}
    # Hermes runs a child with platform `subagent`.
    assert by_role["leaf"]["attributes"] == {**labels, "hermes.platform": "subagent", "hermes.subagent.role": "leaf"}
    for role, point in by_role.items():
        assert point["exemplars"], role
        priced_ids = {c.span_id for c in (*chats[1:], child_chat)}
        assert {e["span_id"] for e in point["exemplars"]} <= priced_ids
        assert all(e["trace_id"] == root.trace_id for e in point["exemplars"])
    assert_documented(spans, logs=receiver.logs())
    # Every attempt was priced off the agent's thread, and pricing never tried to connect anywhere (Hermes's own
    # threads did, to the server).
    seen, calls = connections
    assert len(calls) == 6  # every response; the failed attempt had none
    assert priced_during_the_run and set(priced_during_the_run) == {"hermes-otel-records"}, priced_during_the_run
    assert seen and [c for c in seen if c[2]] == []


def test_priced_session_equals_hermes_total(priced, traced, receiver):
    priced.push(Reply(tool_calls=(ToolCall("terminal", {"command": "echo a"}, id="call_e1"),), usage=CACHED),
                Reply(content="first", usage=FINAL), Reply(content="second", usage=DEFAULT))
    agent = agent_for(priced.base_url)
    first = agent.run_conversation("one")
    agent.run_conversation("two", conversation_history=first["messages"])
    spans, ends, metrics = telemetry(traced, receiver, 2)
    turns = sorted(named(spans, "invoke_agent hermes"), key=lambda s: s.start_ns)
    assert [t.attributes["hermes.turn.cost"] for t in turns] == [float(usd(CACHED) + usd(FINAL)), float(usd(DEFAULT))]
    session_totals = [r.attributes["hermes.session.cost"] for r in sorted(ends, key=lambda r: r.time_ns)]
    total = usd(CACHED) + usd(FINAL) + usd(DEFAULT)
    assert session_totals == [float(usd(CACHED) + usd(FINAL)), float(total)]
    assert round(agent.session_estimated_cost_usd, 12) == round(session_totals[-1], 12) == round(float(total), 12)
    assert sum(p["value"] for p in cost_points(metrics)) == pytest.approx(float(total), abs=1e-15)


def test_unpriced_route_is_unknown_and_says_why(traced, llm, receiver):
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo u"}, id="call_u")), Reply.text("unpriced"))
    agent = agent_for(llm.base_url)
    assert agent.run_conversation("price me")["final_response"] == "unpriced"
    spans, ends, metrics = telemetry(traced, receiver, 1)
    for chat in named(spans, "chat fake-model"):
        assert {k: v for k, v in chat.attributes.items() if k.startswith("hermes.usage.")} == {
            "hermes.usage.cost_status": "unknown", "hermes.usage.cost_source": "none",
            "hermes.usage.cost_reason": "no_price"}
    root = only(spans, "invoke_agent hermes")
    assert root.attributes["hermes.turn.cost_status"] == "unknown" and "hermes.turn.cost" not in root.attributes
    (end,) = ends
    assert end.attributes["hermes.session.cost_status"] == "unknown" and "hermes.session.cost" not in end.attributes
    assert (agent.session_cost_status, agent.session_estimated_cost_usd) == ("unknown", 0.0)  # Hermes agrees
    assert cost_points(metrics) == []


def test_the_providers_own_cost_comes_first(traced, llm, receiver):
    """Issue 48: OpenRouter returns what a call cost in `usage.cost` (usage accounting on); Hermes's estimate can be
    far off it. A scripted provider that reports a cost (on a route Hermes has no price for): exactly that cost on
    each chat span, marked as the provider's, in the turn's and the session's roll-ups, in the cost metric and in
    `hermes-otel cost`."""
    from decimal import Decimal

    from hermes_otel import runtime
    from hermes_otel.cli import cost_report

    first, final = Usage(40, 8, cost=0.0123), Usage(90, 5, cost=0.00045)
    llm.push(Reply(tool_calls=(ToolCall("terminal", {"command": "echo p"}, id="call_p"),), usage=first),
             Reply(content="reported", usage=final))
    agent = agent_for(llm.base_url)
    assert agent.run_conversation("what did it cost")["final_response"] == "reported"
    spans, ends, metrics = telemetry(traced, receiver, 1)
    chats = sorted(named(spans, "chat fake-model"), key=lambda s: s.start_ns)
    assert [{k: v for k, v in c.attributes.items() if k.startswith("hermes.usage.cost")} for c in chats] == [
        {"hermes.usage.cost": 0.0123, "hermes.usage.cost_status": "actual", "hermes.usage.cost_source": "provider"},
        {"hermes.usage.cost": 0.00045, "hermes.usage.cost_status": "actual", "hermes.usage.cost_source": "provider"}]
    total = float(Decimal("0.0123") + Decimal("0.00045"))
    root = only(spans, "invoke_agent hermes")
    assert (root.attributes["hermes.turn.cost"], root.attributes["hermes.turn.provider_cost"],
            root.attributes["hermes.turn.cost_status"]) == (total, total, "actual")
    (end,) = ends
    assert (end.attributes["hermes.session.cost"], end.attributes["hermes.session.provider_cost"],
            end.attributes["hermes.session.cost_status"]) == (total, total, "actual")
    assert sum(p["value"] for p in cost_points(metrics)) == pytest.approx(total, abs=1e-12)
    assert {p["attributes"]["hermes.usage.cost_source"] for p in cost_points(metrics)} == {"provider"}  # the split
    result = cost_report.report(runtime.current_telemetry().settings.file_directory, by="turn")
    (row,) = [r for r in result.rows if r.key == root.attributes["hermes.turn.id"]]  # (the home's other turns too)
    assert (float(row.amount), float(row.provider_amount), row.status) == (total, total, "actual")
    table = cost_report.render_table(result)
    assert "by provider" in table and "of the total is what the providers reported for" in table
