"""Concurrency: eight real Hermes sessions at once on threads, each with a parallel tool batch and a
subagent, plus a soak of many turns driven through Hermes's own hook and middleware machinery.

Every span ends, each trace holds one session (and its own subagent) only, nothing is parented across
sessions, and no state is left behind. The tool call ids are the SAME in every session on purpose.
The full 10,000-turn soak runs with `pytest -m soak tests/integration/test_concurrency.py`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import run_agent
from tests.harness.trees import subagents, tree, turn_roots

pytestmark = pytest.mark.hermes

SESSIONS = 8
EXPECTED_TREE = [[
    "invoke_agent hermes",
    [
        "chat fake-model", "execute_tool read_file", "execute_tool read_file", "chat fake-model",
        ["execute_tool delegate_task", [["invoke_agent hermes", [["invoke_agent hermes", ["chat fake-model"]]]]]],
        "chat fake-model",
    ],
]]


def _responder(directory):
    """Each conversation's next reply, from its own messages: parallel reads, then a subagent, then the answer."""

    def respond(body):
        messages = body.get("messages") or []
        users = json.dumps([m.get("content") for m in messages if m.get("role") == "user"])
        match = re.search(r"sess(\d+)", users)
        if match is None:
            return None
        k = match.group(1)
        if "CHILD" in users:
            return Reply.text(f"child ok sess{k}")
        tools = sum(1 for m in messages if m.get("role") == "tool")
        if tools == 0:
            return Reply.tools(*(ToolCall("read_file", {"path": str(directory / f"sess{k}-{n}.txt")}, id=f"call_r{n}")
                                 for n in (1, 2)))
        if tools == 2:
            return Reply.tools(ToolCall("delegate_task", {"goal": f"CHILD sess{k}: say hi"}, id="call_d"))
        return Reply.text(f"final sess{k}")

    return respond


@pytest.mark.timeout(300)  # the background subagents' wait below, past the suite's 120 s default
def test_eight_sessions_with_parallel_tools_and_subagents(traced, receiver, tmp_path):
    for k in range(SESSIONS):
        for n in (1, 2):
            (tmp_path / f"sess{k}-{n}.txt").write_text(f"content {k}.{n}")
    ours_before = _our_threads()
    results: dict[int, object] = {}
    with FakeLLMServer(responder=_responder(tmp_path)) as server:

        def session(k: int) -> None:
            try:
                results[k] = run_agent(server.base_url, f"sess{k}: read both files, then delegate",
                                       enabled_toolsets=["file", "delegation"], max_iterations=6)["final_response"]
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                results[k] = exc

        workers = [threading.Thread(target=session, args=(k,)) for k in range(SESSIONS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(90)
        assert results == {k: f"final sess{k}" for k in range(SESSIONS)}

        traced.flush(10)
        # Hermes 0.19 runs a top-level delegation in the background (three at once; the rest inline), so a subagent
        # may end well after its parent's session: on a machine without network each child's start waits out Hermes's
        # model metadata fetch first (a subagent took 21 s in CI). The model server stays up for them (a child still
        # running when it closed failed its calls, and its turn stayed open into the next test); the wait ends as soon
        # as every trace is whole.
        spans = receiver.wait_for_spans(
            lambda s: len(turn_roots(s)) >= 2 * SESSIONS and len(subagents(s)) >= SESSIONS, timeout=120)
    traces: dict[str, list] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    assert len(traces) == SESSIONS  # one trace per parent turn, its subagent inside
    seen_sessions = set()
    for members in traces.values():
        assert tree(members) == EXPECTED_TREE  # every span there and ended (only ended spans are exported)
        ids = {s.span_id for s in members}
        assert all(s.parent_span_id is None or s.parent_span_id in ids for s in members)  # no cross-trace parent
        roots = turn_roots(members)
        parent_sid, child_sid = (r.attributes["gen_ai.conversation.id"] for r in roots)
        (subagent,) = subagents(members)
        assert subagent.attributes["hermes.subagent.child_session_id"] == child_sid
        assert {s.attributes.get("gen_ai.conversation.id") for s in members} <= {parent_sid, child_sid}
        child_ids = {roots[1].span_id} | {s.span_id for s in members if s.parent_span_id == roots[1].span_id}
        assert all(s.attributes["gen_ai.conversation.id"] == child_sid for s in members if s.span_id in child_ids)
        reads = [s for s in members if s.name == "execute_tool read_file"]
        assert sorted(s.attributes["gen_ai.tool.call.id"] for s in reads) == ["call_r1", "call_r2"]
        assert all(s.parent_span_id == roots[0].span_id for s in reads)
        seen_sessions |= {parent_sid, child_sid}
    assert len(seen_sessions) == 2 * SESSIONS
    assert traced.current_tracker().open_turns() == 0  # no state left behind
    # Sessions start none of ours: the one deadline watcher of the process is started by its first export.
    after = _our_threads()
    assert Counter(after) - Counter(ours_before) in (Counter(), Counter({"hermes-otel-deadline": 1})), (ours_before, after)


def _our_threads() -> list[str]:
    """Threads of our pipeline: the SDK's batch workers and readers, and hermes-otel's own."""
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(("Otel", "hermes-otel")))


# -- soak -------------------------------------------------------------------------------------------


def _soak(turns: int, threads: int, receiver, traced) -> dict[str, float]:
    """`turns` complete turns spread over `threads` sessions on threads, each turn as Hermes runs it:
    hooks through `invoke_hook`, the provider and tool calls through Hermes's execution runners."""
    import tracemalloc

    from hermes_cli import middleware
    from hermes_cli.plugins import get_plugin_manager

    manager = get_plugin_manager()
    v1 = {"telemetry_schema_version": "hermes.observer.v1"}
    errors: list[BaseException] = []

    def session(t: int, count: int) -> None:
        sid = f"soak-{t}"
        try:
            manager.invoke_hook("on_session_start", session_id=sid, model="fake-model", platform="cli", **v1)
            for i in range(count):
                turn = f"{sid}:task:{i:08x}"
                ids = {"session_id": sid, "task_id": "task", "turn_id": turn}
                manager.invoke_hook("pre_llm_call", user_message="hi", is_first_turn=i == 0, model="fake-model",
                                    platform="cli", **ids, **v1)
                api = {**ids, "api_request_id": f"{turn}:api:1", "model": "fake-model", "provider": "custom",
                       "api_mode": "chat_completions", "api_call_count": 1}
                response = object()
                assert middleware.run_llm_execution_middleware({"model": "fake-model"}, lambda r, response=response: response,
                                                               **api) is response
                manager.invoke_hook("post_api_request", **api, finish_reason="tool_calls", **v1)
                tool = {**ids, "tool_call_id": "call_same", "api_request_id": f"{turn}:api:1"}
                manager.invoke_hook("pre_tool_call", tool_name="terminal", args={"command": "x"}, **tool, **v1)
                assert middleware.run_tool_execution_middleware("terminal", {"command": "x"}, lambda a: "out",
                                                                **tool) == "out"
                manager.invoke_hook("post_tool_call", tool_name="terminal", args={"command": "x"}, result="out",
                                    status="ok", duration_ms=1, **tool, **v1)
                manager.invoke_hook("on_session_end", completed=True, interrupted=False, model="fake-model",
                                    platform="cli", **ids, **v1)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    per = turns // threads
    tracemalloc.start()
    started = time.monotonic()
    try:
        workers = [threading.Thread(target=session, args=(t, per)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(600)
        took = time.monotonic() - started
        traced.flush(30)
        # What is still allocated after the soak, without the in-process receiver's store of what it got.
        kept = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, "*/tests/*"), tracemalloc.Filter(False, "*/google/protobuf/*")])
        current = sum(stat.size for stat in kept.statistics("filename"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert errors == []
    total = per * threads
    spans = receiver.wait_for_spans(lambda s: sum(x.name == "invoke_agent hermes" for x in s) >= total, timeout=60)
    roots = [s for s in spans if s.name == "invoke_agent hermes"]
    assert len(roots) == total  # every turn ended, each once
    by_id = {s.span_id: s for s in spans}
    for span in spans:
        if span.parent_span_id is not None:
            parent = by_id[span.parent_span_id]
            assert parent.attributes["gen_ai.conversation.id"] == span.attributes["gen_ai.conversation.id"]
    assert sorted(s.name for s in spans) == sorted(
        ["invoke_agent hermes", "chat fake-model", "execute_tool terminal"] * total)
    assert traced.current_tracker().open_turns() == 0
    return {"turns": total, "seconds": took, "ms_per_turn": took / total * 1000, "kept_mib": current / 2**20,
            "peak_mib_with_receiver": peak / 2**20}


@pytest.fixture
def soak_pipeline(traced, monkeypatch):
    from hermes_cli.plugins import discover_plugins

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "200000")  # the receiver must see everything to count it
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096")
    discover_plugins(force=True)
    return traced


def test_soak_short(soak_pipeline, receiver):
    numbers = _soak(800, 8, receiver, soak_pipeline)
    print(f"\n[soak] {numbers}")


@pytest.mark.soak
@pytest.mark.timeout(1200)  # ~3 minutes with tracemalloc on; the suite's 120 s default is for the rest
def test_soak_ten_thousand_turns(soak_pipeline, receiver):
    numbers = _soak(10_000, 8, receiver, soak_pipeline)
    print(f"\n[soak] {numbers}")
