"""Real Hermes 0.19.0 -> our Collector (collector/ files as shipped) -> real Jaeger v2, read back
through Jaeger's query API; span metrics through the Collector's Prometheus exporter into a real
Prometheus. Binaries: `make backends` (our Collector distribution and Jaeger, from Go modules)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness import dashboards as dq
from tests.harness import otelcol
from tests.harness.backends import Prometheus, wait_until
from tests.harness.hermes import clean_env, hermes_chat, install_test_plugins, parallel_reads, write_home
from tests.harness.otelcol import Collector, Jaeger
from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.harness.trees import named, only, tree

pytestmark = pytest.mark.hermes

SERVICE = "hermes-otel-live"
LLM_CHAIN = ["chat fake-model", [["llm_execution mw_alpha", ["llm_execution mw_beta", "provider_call fake-model"]]]]
def tool_chain(tool: str) -> list:
    return ["tool_execution mw_alpha", [["tool_execution mw_beta", [f"tool_call {tool}"]]]]


READ_CHAIN = [  # a tool of a concurrent batch: Hermes runs its chain twice, nested (batch path, registry path)
    ["tool_execution mw_alpha", [["tool_execution mw_beta", [["tool_call read_file", [
        ["tool_execution mw_alpha", [["tool_execution mw_beta", ["tool_call read_file"]]]],
    ]]]]]],
]


@pytest.fixture(scope="module")
def binaries(request) -> None:
    otelcol.go_binary(otelcol.OTELCOL, request)
    otelcol.go_binary(otelcol.JAEGER, request)


@pytest.fixture(scope="module")
def jaeger(binaries) -> Iterator[Jaeger]:
    server = Jaeger()
    try:
        yield server.start()
    finally:
        server.stop()


@contextlib.contextmanager
def exporting_to(endpoint: str, llm: FakeLLMServer, *plugins: str, **env: str) -> Iterator[object]:
    """The in-process plugin re-registered by real Hermes, exporting to `endpoint` (and `plugins` enabled)."""
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime

    home = Path(os.environ["HERMES_HOME"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        mp.setenv("OTEL_SERVICE_NAME", SERVICE)
        mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        mp.setenv("OTEL_METRIC_EXPORT_INTERVAL", "500")
        for key, value in env.items():
            mp.setenv(key, value)
        install_test_plugins(home)
        write_home(home, llm.base_url, plugins=plugins)
        discover_plugins(force=True)
        try:
            yield runtime
        finally:
            runtime.flush(5)
            write_home(home, llm.base_url)
            mp.undo()
            discover_plugins(force=True)


def settled(runtime, timeout: float = 15) -> None:
    """Every turn ended (Hermes runs delegated subagents on their own threads, past the parent's answer)."""
    wait_until(lambda: runtime.current_tracker().open_turns() == 0, timeout, "every open turn ended")


def _agent(llm: FakeLLMServer, toolsets: list[str]):
    from run_agent import AIAgent

    return AIAgent(
        base_url=llm.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
        enabled_toolsets=toolsets, quiet_mode=True, skip_context_files=True, skip_memory=True,
        max_iterations=8, platform="cli",
    )


def _jaeger_traces(jaeger: Jaeger, count: int, timeout: float = 30, service: str = SERVICE) -> dict[str, list]:
    """`count` traces of `service`, each read back whole (its span count stable across two reads)."""
    ids = wait_until(lambda: len(ids := jaeger.trace_ids(service)) >= count and ids, timeout,
                     f"{count} traces in Jaeger")
    assert len(ids) == count, ids
    return {trace_id: whole_trace(jaeger, trace_id) for trace_id in ids}


def whole_trace(jaeger: Jaeger, trace_id: str, timeout: float = 30) -> list:
    """A trace once every parent is in it (spans of one trace travel in several batches)."""

    deadline = time.monotonic() + timeout
    while True:
        spans = jaeger.trace(trace_id)
        ids = {s.span_id for s in spans}
        orphans = [s.name for s in spans if s.parent_span_id is not None and s.parent_span_id not in ids]
        if not orphans and any(s.parent_span_id is None for s in spans):
            return spans
        if time.monotonic() > deadline:
            pytest.fail(f"trace {trace_id} not whole in Jaeger within {timeout:.0f}s: {len(spans)} spans, "
                        f"parents missing for {orphans}", pytrace=False)
        time.sleep(0.5)


# -- a. single-node.yaml: the whole story of a session, in Jaeger ---------------------------------


@pytest.fixture(scope="module")
def single_node(jaeger, llm, tmp_path_factory) -> Iterator[dict]:
    tempo = OTLPGrpcReceiver()  # stands in for Tempo: the config fans out to both backends
    with contextlib.ExitStack() as stack:
        stack.enter_context(tempo)
        collector = Collector("single-node.yaml", env={
            "JAEGER_OTLP_GRPC": jaeger.otlp_grpc, "TEMPO_OTLP_GRPC": f"127.0.0.1:{tempo.port}",
            "SPANMETRICS_FLUSH_INTERVAL": "1s",
        })
        stack.callback(collector.stop)
        collector.start()
        prom = Prometheus(f"127.0.0.1:{collector.ports.prometheus}")
        stack.callback(prom.stop)
        prom.start()
        yield {"collector": collector, "prometheus": prom, "tempo": tempo,
               "files": tmp_path_factory.mktemp("single-node")}


def _session_script(directory: Path) -> list[Reply]:
    """One turn: a provider 500 then the retry, two parallel reads, a denied command, a subagent, the answer."""
    return [
        Reply.error(500, "overloaded"),
        parallel_reads(directory, ("call_P1", "call_P2")),
        Reply.tools(ToolCall("terminal", {"command": "rm -rf /tmp/hermes-otel-never"}, id="call_A")),
        Reply.tools(ToolCall("delegate_task", {"goal": "Say hello from the child"}, id="call_D")),
        Reply.text("done"),  # the child and the parent both answer "done", in either order
        Reply.text("done"),
    ]


def test_single_node_jaeger_shows_each_turn_as_the_exact_tree(single_node, jaeger, llm):
    from tools.terminal_tool import set_approval_callback

    collector: Collector = single_node["collector"]
    with exporting_to(collector.otlp_http, llm, "mw_alpha", "mw_beta") as runtime, pytest.MonkeyPatch.context() as mp:
        mp.setenv("HERMES_INTERACTIVE", "1")
        set_approval_callback(lambda command, description, **kw: "deny")
        try:
            llm.push(*_session_script(single_node["files"]))
            agent = _agent(llm, ["terminal", "file", "delegation"])
            assert agent.run_conversation("do the whole story")["final_response"] == "done"
            settled(runtime)  # the asynchronous subagent may still be finishing its turn
        finally:
            set_approval_callback(None)
    (spans,) = _jaeger_traces(jaeger, 1).values()

    assert tree(spans) == [[
        "invoke_agent hermes",
        [
            LLM_CHAIN,  # the failed attempt: mw_beta fails open, the provider answers 500
            LLM_CHAIN,  # the retry
            ["execute_tool read_file", READ_CHAIN],
            ["execute_tool read_file", READ_CHAIN],
            LLM_CHAIN,
            # The approval wait is a child of the tool it guards; the command was denied, never run.
            ["execute_tool terminal", [tool_chain("terminal"), "approval"]],
            LLM_CHAIN,
            # Hermes delegates asynchronously: the subagent outlives the tool call that started it.
            ["execute_tool delegate_task", [
                tool_chain("delegate_task"), ["subagent leaf", [["invoke_agent hermes", [LLM_CHAIN]]]],
            ]],
            LLM_CHAIN,
        ],
    ]]
    root = only(named(spans, "invoke_agent hermes")[:1], "invoke_agent hermes")
    assert root.parent_span_id is None and root.kind == "INTERNAL"
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert {s.resource["service.name"] for s in spans} == {SERVICE}
    kinds = {s.name.split(" ")[0]: s.kind for s in spans}
    assert kinds == {
        "invoke_agent": "INTERNAL", "chat": "CLIENT", "llm_execution": "INTERNAL",
        "provider_call": "INTERNAL", "execute_tool": "INTERNAL",
        "tool_execution": "INTERNAL", "tool_call": "INTERNAL", "approval": "INTERNAL",
        "subagent": "INTERNAL",
    }
    chats = named(spans, "chat fake-model")
    failed = [c for c in chats if c.status_code == "ERROR"]
    assert len(failed) == 1 and failed[0].attributes["error.type"] == "InternalServerError"
    assert [c.attributes["hermes.api.attempt"] for c in chats if c.parent_span_id == root.span_id][:2] == [1, 2]
    for chat in chats:  # every attempt shows both request rewrites, as Hermes's middleware_trace has them
        rewrites = [(a["hermes.middleware.source"], a.get("hermes.middleware.reason")) for n, a in chat.events
                    if n == "hermes.middleware.rewrite"]
        assert rewrites == [("alpha", "pinned seed"), ("plugin", None)], chat.events
    beta = named(spans, "llm_execution mw_beta")
    assert beta and all(s.status_code == "ERROR"
                        and s.attributes["hermes.middleware.outcome"] == "fail_open" for s in beta)
    approval = only(spans, "approval")
    assert approval.status_code == "ERROR" and approval.attributes["hermes.approval.choice"] == "deny"
    terminal = only(spans, "execute_tool terminal")
    assert terminal.status_code == "ERROR" and terminal.attributes["hermes.tool.status"] == "blocked"
    reads = named(spans, "execute_tool read_file")
    assert sorted(r.attributes["gen_ai.tool.call.id"] for r in reads) == ["call_P1", "call_P2"]
    assert all(r.status_code == "UNSET" and r.attributes["hermes.tool.status"] == "ok" for r in reads)
    assert only(spans, "subagent leaf").attributes["hermes.subagent.status"] == "completed"
    # Tempo (its stand-in) received the same spans: the fan-out loses nothing.
    tempo_ids = wait_until(lambda: (ids := {s.span_id for s in single_node["tempo"].spans()}) >= {
        s.span_id for s in spans} and ids, 15, "the same spans at the Tempo stand-in")
    assert {s.span_id for s in spans} <= tempo_ids


def test_single_node_span_metrics_feed_the_dashboards(single_node, jaeger, llm):
    """The spanmetrics-fed panels (checked by shape only until now) return data from a live Prometheus."""
    prom: Prometheus = single_node["prometheus"]
    collector: Collector = single_node["collector"]
    calls = 'sum by (span_name) (traces_span_metrics_calls_total{service_name="%s"})' % SERVICE
    with exporting_to(collector.otlp_http, llm, "mw_alpha", "mw_beta") as runtime:
        for turn in range(2):  # rate() needs an increase between two scrapes: a turn, a scrape, another turn
            llm.push(Reply.text("done"))
            assert _agent(llm, ["terminal"]).run_conversation(f"metrics turn {turn}")["final_response"] == "done"
            runtime.flush(5)
            wait_until(lambda: sum(float(r["value"][1]) for r in prom.query(calls)
                                   if r["metric"]["span_name"] == "invoke_agent hermes") >= 3 + turn,
                       30, f"metrics turn {turn} in Prometheus")
    fed = [q for q in dq.prometheus_queries() if q.spanmetrics_fed]
    assert fed, "no dashboard panel is fed by span metrics"
    for query in fed:
        result = wait_until(lambda: prom.query(dq.concrete(query.expr)), 30, f"{query.panel} in Prometheus")
        # A quantile of a series that did not grow in the window is NaN (0/0); series that did give data.
        values = [v for r in result if math.isfinite(v := float(r["value"][1]))]
        assert values and max(values) > 0, (query.panel, result)
    counts = {r["metric"]["span_name"]: float(r["value"][1]) for r in prom.query(calls)}
    # The story turn (the parent's and the subagent's turn) and the two metrics turns; the read and the
    # approval only in the first.
    assert counts["invoke_agent hermes"] == 4
    assert counts["execute_tool read_file"] == 2 and counts["approval"] == 1
