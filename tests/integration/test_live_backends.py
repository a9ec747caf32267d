"""One real Hermes run feeds two real backends: a Prometheus (Debian package) scraping our pull
endpoint, and Arize Phoenix receiving our OTLP traces. The dashboards' queries are checked
against the first, the trace as Phoenix understood it against the second. The model is priced
(the scripted server publishes prices, Hermes prices with them), so the cost panels and the
budget alerts (grafana/alerts, evaluated by the same Prometheus and a second one) have data.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage
from tests.harness import dashboards as dq
from tests.harness.backends import Phoenix, Prometheus, free_port, wait_until
from tests.harness.genai_schema import openinference_messages
from tests.harness.hermes import install_test_plugins, write_home

pytestmark = pytest.mark.hermes

PROJECT = "hermes-otel-live"
TURNS = 2
# USD per token; cached input at the input's price, so the turn's cost does not depend on how Hermes splits it.
PRICES = {"prompt": "0.000002", "completion": "0.000008", "cache_read": "0.000002", "cache_write": "0.000002"}
TURN_COST = 3 * (11 * 2e-6 + 7 * 8e-6)  # three answered calls a turn, 11 in and 7 out each
ALERTS = Path(__file__).resolve().parents[2] / "grafana" / "alerts" / "hermes-cost-budget.rules.yml"


def _with_budget(usd: float) -> str:
    text = ALERTS.read_text()
    assert text.count("expr: vector(100)") == 1
    return text.replace("expr: vector(100)", f"expr: vector({usd!r})")
# Panels that only the Collector's spanmetrics connector feeds: test_collector_live.py checks them
# against our Collector. Everything else must answer from this run.
SPANMETRICS_FED = {
    ("hermes-ops-overview.json", "Span calls per operation"),
    ("hermes-ops-overview.json", "Middleware span latency p95 (exemplars)"),
    ("hermes-trace-drilldown.json", "Operation latency p95 from spans (exemplars)"),
}
# Queries whose healthy value is exactly zero (no drops in a healthy pipeline).
ZERO_EXPECTED = {("hermes-ops-overview.json", "Exporter drops"), ("hermes-ops-overview.json", "Spool backlog"),
                 ("hermes-ops-overview.json", "Spool batches")}


def _script() -> list[Reply]:
    """One turn: a failed provider attempt and its retry, a tool that works, a tool that fails, an answer."""
    # Every usage counter a dashboard reads has something to show: cache reads and writes, reasoning.
    usage = Usage(prompt_tokens=11, completion_tokens=7, cached_tokens=4, cache_write_tokens=2, reasoning_tokens=3)
    return [
        Reply.error(500, "overloaded"),
        dataclasses.replace(Reply.tools(ToolCall("terminal", {"command": "echo live"}, id="call_ok")), usage=usage),
        dataclasses.replace(Reply.tools(ToolCall("read_file", {"path": "/nonexistent/hermes-otel-live.txt"},
                                                 id="call_err")), usage=usage),
        dataclasses.replace(Reply.text("done"), usage=usage),
    ]


@pytest.fixture(scope="module")
def live(llm, tmp_path_factory) -> Iterator[dict]:
    from hermes_cli.plugins import discover_plugins
    from run_agent import AIAgent

    from hermes_otel import runtime
    from hermes_otel.exporters import prometheus as pull

    home = Path(os.environ["HERMES_HOME"])
    # Earlier tests' pipelines may still be retrying a dead collector and would spool into this home later: close
    # them now (what they hold is spooled at once) and empty the spool, so the spool panels start from zero.
    runtime.shutdown()
    _pipelines_ended()
    _empty_spool(home)
    with contextlib.ExitStack() as stack:  # unwinds: environment, home, plugins, endpoint, Prometheus, Phoenix
        phoenix = Phoenix()
        stack.callback(phoenix.stop)
        phoenix.start()
        metrics_port = free_port()
        prom = Prometheus(f"127.0.0.1:{metrics_port}", rules={ALERTS.name: ALERTS.read_text()})  # as shipped
        stack.callback(prom.stop)
        prom.start()
        priced = stack.enter_context(FakeLLMServer(pricing=PRICES))
        stack.callback(pull.stop)
        stack.callback(discover_plugins, force=True)  # back to the session's configuration
        stack.callback(write_home, home, llm.base_url)
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        # A home of its own: the spool panels show this run's spool only, whatever an earlier test's pipeline (one
        # still exporting to its receiver, gone by now) writes into the session's home meanwhile.
        home = tmp_path_factory.mktemp("live-home")
        mp.setenv("HERMES_HOME", str(home))
        mp.setenv("OTEL_METRICS_EXPORTER", "prometheus")
        mp.setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
        mp.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", str(metrics_port))
        mp.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", phoenix.otlp_traces)
        mp.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={PROJECT}")
        mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        mp.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")  # opted in: Phoenix's view of it
        install_test_plugins(home)
        write_home(home, priced.base_url, plugins=("mw_alpha", "mw_beta"))
        discover_plugins(force=True)
        agent = AIAgent(
            base_url=priced.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
            enabled_toolsets=["terminal", "file"], quiet_mode=True, skip_context_files=True, skip_memory=True,
            max_iterations=6, platform="cli",
        )
        history = None
        for turn in range(TURNS):
            priced.push(*_script())
            result = agent.run_conversation(f"live turn {turn}", conversation_history=history)
            assert result["final_response"] == "done"
            history = result["messages"]
            runtime.flush(5)
            # Prometheus holds this turn before the next starts: rate() sees each turn as a change.
            done = f"sum(gen_ai_invoke_agent_duration_seconds_count) == {turn + 1}"
            wait_until(lambda done=done: prom.query(done), 30, f"turn {turn + 1} in Prometheus")
        yield {"prometheus": prom, "phoenix": phoenix, "agent": agent}


def _pipelines_ended(timeout_s: float = 30.0) -> None:
    """Every earlier pipeline's batch workers and shutdowns have ended (the shutdown's one budget covers the live
    pipeline first; a retired one may finish its shutdown, and its last spool write, after it returned: the metrics'
    final collection is exported by the shutdown's own thread, once the reader's has ended): nothing of theirs can
    spool into this home once the spool is emptied."""
    import threading

    deadline = time.monotonic() + timeout_s
    workers = ("OtelBatchSpanRecordProcessor", "OtelBatchLogRecordProcessor", "OtelPeriodicExportingMetricReader",
               "hermes-otel-flush")
    while time.monotonic() < deadline and any(t.name.startswith(workers) for t in threading.enumerate()):
        time.sleep(0.05)


def _empty_spool(home: Path) -> None:
    from hermes_otel.exporters.spool.store import open_spool

    spool = open_spool(home / "otel" / "spool", 1 << 30, 1e9)
    for entry in spool.entries():
        with spool.claim(entry) as fd:
            if fd is not None:
                spool.remove(entry)
    spool.enforce_caps()


# -- Prometheus -----------------------------------------------------------------------------------


def test_every_panel_fed_by_our_metrics_returns_data(live):
    prom: Prometheus = live["prometheus"]
    checked, skipped = [], set()
    for query in dq.prometheus_queries():
        key = (query.dashboard, query.panel)
        if query.spanmetrics_fed:
            skipped.add(key)
            continue
        result = prom.query(dq.concrete(query.expr))
        values = [float(r["value"][1]) for r in result]
        assert values, f"{key}: no data for {query.expr}"
        assert all(math.isfinite(v) for v in values), (key, result)
        if key in ZERO_EXPECTED:
            assert set(values) == {0.0}, (key, result)
        else:
            assert max(values) > 0, (key, result)
        checked.append(key)
    assert skipped == SPANMETRICS_FED  # nothing escapes the live check silently
    panels = {(q.dashboard, q.panel) for q in dq.prometheus_queries()}
    assert set(checked) == panels - SPANMETRICS_FED


def test_panel_values_match_the_run(live):
    prom: Prometheus = live["prometheus"]

    def one(expr: str) -> dict[str, float]:
        return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in prom.query(expr)}

    def single(expr: str) -> float:
        (value,) = one(expr).values()
        return value

    assert single("sum(gen_ai_invoke_agent_duration_seconds_count)") == TURNS
    # Per turn: 4 provider attempts (one failed with a 500), a good and a failing tool call.
    assert single('sum(gen_ai_client_inference_duration_seconds_count{error_type="InternalServerError"})') == TURNS
    assert single("sum(gen_ai_client_inference_duration_seconds_count)") == 4 * TURNS
    assert single('sum(hermes_tool_calls_total{gen_ai_tool_name="read_file", hermes_tool_status="error"})') == TURNS
    assert single('sum(hermes_tool_calls_total{gen_ai_tool_name="terminal", hermes_tool_status="ok"})') == TURNS
    assert single('sum(hermes_api_errors_total{http_response_status_code="500"})') == TURNS
    # The fake server reports 11 input and 7 output tokens per successful call.
    # (The failed attempt adds 0, as the conventions ask: every attempt is counted.)
    assert single("sum(gen_ai_client_inference_usage_input_tokens_total)") == 11.0 * 3 * TURNS
    assert single("sum(gen_ai_client_inference_usage_output_tokens_total)") == 7.0 * 3 * TURNS
    assert single("sum(gen_ai_client_inference_operation_input_tokens_count)") == 4 * TURNS
    # mw_beta's llm_execution layer raises before next_call on every attempt: fail-open, counted per layer.
    fail_open = one('sum by (hermes_middleware_plugin) (hermes_middleware_duration_seconds_count{'
                    'hermes_middleware_outcome="fail_open"})')
    assert fail_open == {'{"hermes_middleware_plugin": "mw_beta"}': 4.0 * TURNS}
    rewrites = one("sum by (hermes_middleware_kind, hermes_middleware_source) (hermes_middleware_rewrites_total)")
    assert rewrites[json.dumps({"hermes_middleware_kind": "llm_request", "hermes_middleware_source": "alpha"})] == 4 * TURNS
    assert rewrites[json.dumps({"hermes_middleware_kind": "llm_request", "hermes_middleware_source": "plugin"})] == 4 * TURNS
    labels = dq.model_variable_values(prom)
    assert labels == ["fake-model"]
    # Cost: every answered call priced by Hermes's own pricing, with its dimensions.
    spent = one("sum by (gen_ai_request_model, gen_ai_provider_name, hermes_platform, hermes_profile) "
                "(hermes_usage_cost_total)")
    assert list(spent) == [json.dumps({"gen_ai_provider_name": "custom", "gen_ai_request_model": "fake-model",
                                       "hermes_platform": "cli", "hermes_profile": "default"}, sort_keys=True)]
    assert list(spent.values())[0] == pytest.approx(TURNS * TURN_COST, rel=1e-9)
    assert live["agent"].session_estimated_cost_usd == pytest.approx(TURNS * TURN_COST, rel=1e-9)  # Hermes's own


def test_budget_alerts_fire_on_the_live_spending(live):
    """The shipped rules on the live spending: silent under the shipped 100 USD; with a budget a little above what
    Prometheus can see, the 80 % warning alone; with one below it, both."""
    prom: Prometheus = live["prometheus"]
    assert {r["name"]: r["health"] for r in prom.rules()} == {
        "hermes:cost_budget_usd:monthly": "ok", "hermes:usage_cost_usd:30d": "ok",
        "HermesCostBudget80Percent": "ok", "HermesCostBudgetExceeded": "ok"}
    assert prom.alerts() == {}
    # increase() counts the rise after the counter's first sample (which held part or all of the first turn), plus
    # an extrapolation that shrinks as samples accrue.
    (first,) = prom.query("sum(min_over_time(hermes_usage_cost_total[10m]))")
    rise = TURNS * TURN_COST - float(first["value"][1])
    assert TURN_COST * 0.999 < rise < TURNS * TURN_COST
    wait_until(lambda: float(prom.query("hermes:usage_cost_usd:30d")[0]["value"][1]) >= rise * 0.999, 30,
               "the 30-day spending recorded")
    prom.reload_rules(ALERTS.name, _with_budget(rise * 1.24))  # 80 % of it is just under what was spent
    wait_until(lambda: prom.alerts() == {"HermesCostBudget80Percent": "firing"}, 60, "the 80 % warning alone")
    prom.reload_rules(ALERTS.name, _with_budget(rise / 2))
    wait_until(lambda: prom.alerts() == {"HermesCostBudget80Percent": "firing", "HermesCostBudgetExceeded": "firing"},
               30, "both alerts")


# -- Phoenix ----------------------------------------------------------------------------------------


def _phoenix_spans(phoenix: Phoenix, count: int) -> list[dict]:
    return wait_until(
        lambda: (s := phoenix.spans(PROJECT)) and sum(x["name"] == "invoke_agent hermes" for x in s) >= count and s,
        30, "both turns in Phoenix",
    )


def test_phoenix_reads_back_the_trace_tree_and_genai_attributes(live):
    phoenix: Phoenix = live["phoenix"]
    spans = _phoenix_spans(phoenix, TURNS)
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = sorted((s for s in spans if s["name"] == "invoke_agent hermes"), key=lambda s: s["start_time"])
    assert len(roots) == TURNS and all(r["parent_id"] is None for r in roots)
    for root in roots:
        trace = [s for s in spans if s["context"]["trace_id"] == root["context"]["trace_id"]]
        children = sorted((s for s in trace if s["parent_id"] == root["context"]["span_id"]),
                          key=lambda s: s["start_time"])
        assert [s["name"] for s in children] == [
            "chat fake-model", "chat fake-model", "execute_tool terminal", "chat fake-model",
            "execute_tool read_file", "chat fake-model",
        ]
        # Middleware layers nest inside the calls, in chain order, in Phoenix too.
        for chat in (s for s in children if s["name"] == "chat fake-model"):
            layers = [s for s in trace if s["parent_id"] == chat["context"]["span_id"]]
            assert [s["name"] for s in layers] == ["llm_execution mw_alpha"]
            beta, provider = sorted((s for s in trace if s["parent_id"] == layers[0]["context"]["span_id"]),
                                    key=lambda s: s["start_time"])
            assert provider["name"] == "provider_call fake-model"
            assert beta["name"] == "llm_execution mw_beta" and beta["status_code"] == "ERROR"
            assert beta["attributes"]["hermes.middleware.outcome"] == "fail_open"
        assert all(by_id[s["parent_id"]]["context"]["trace_id"] == root["context"]["trace_id"]
                   for s in trace if s["parent_id"])

    kinds = {s["name"]: s["span_kind"] for s in spans if s["name"].split(" ")[0] in ("invoke_agent", "chat",
                                                                                     "execute_tool")}
    assert kinds == {"invoke_agent hermes": "AGENT", "chat fake-model": "LLM", "execute_tool terminal": "TOOL",
                     "execute_tool read_file": "TOOL"}
    chats = [s for s in spans if s["name"] == "chat fake-model" and s["status_code"] != "ERROR"]
    assert len(chats) == 3 * TURNS
    for chat in chats:
        a = chat["attributes"]
        assert (a["llm.token_count.prompt"], a["llm.token_count.completion"]) == (11, 7)
        assert a["gen_ai.request.model"] == "fake-model" and a["gen_ai.operation.name"] == "chat"
    failed = [s for s in spans if s["name"] == "chat fake-model" and s["status_code"] == "ERROR"]
    assert len(failed) == TURNS and all(s["attributes"]["error.type"] == "InternalServerError" for s in failed)
    bad_tool = [s for s in spans if s["name"] == "execute_tool read_file"]
    assert all(s["status_code"] == "ERROR" and s["attributes"]["hermes.tool.status"] == "error" for s in bad_tool)


def test_phoenix_groups_the_turns_into_one_session(live):
    phoenix: Phoenix = live["phoenix"]
    spans = _phoenix_spans(phoenix, TURNS)
    roots = [s for s in spans if s["name"] == "invoke_agent hermes"]
    (conversation,) = {r["attributes"]["gen_ai.conversation.id"] for r in roots}
    session = phoenix.session(conversation)
    assert session["session_id"] == conversation
    assert sorted(t["trace_id"] for t in session["traces"]) == sorted(r["context"]["trace_id"] for r in roots)



def test_phoenix_shows_each_model_call_as_a_conversation_from_plain_otlp(live):
    """No preset, no OpenInference attributes from us: Phoenix reads the conventions' messages itself (it converts
    them only when they validate against the schema) into its conversation view."""
    phoenix: Phoenix = live["phoenix"]
    spans = _phoenix_spans(phoenix, TURNS)
    # The first turn (the script gives both turns the same tool call ids, which Hermes repairs in the second's history)
    turn = min((s for s in spans if s["name"] == "invoke_agent hermes"), key=lambda s: s["start_time"])
    chats = sorted((s for s in spans if s["name"] == "chat fake-model" and s["status_code"] != "ERROR"
                    and s["context"]["trace_id"] == turn["context"]["trace_id"]), key=lambda s: s["start_time"])
    first, second, final = (c["attributes"] for c in chats)
    sent = openinference_messages(final, "llm.input_messages")
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert sent[1]["content"] == "live turn 0"
    assert sent[2]["tool_calls"] == [("terminal", {"command": "echo live"})]
    assert sent[3]["tool_call_id"] == "call_ok" and json.loads(sent[3]["content"])["output"] == "live"
    assert sent[4]["tool_calls"] == [("read_file", {"path": "/nonexistent/hermes-otel-live.txt"})]
    assert openinference_messages(first, "llm.output_messages") == [
        {"role": "assistant", "content": None, "tool_calls": [("terminal", {"command": "echo live"})],
         "tool_call_id": None}]
    assert openinference_messages(final, "llm.output_messages") == [
        {"role": "assistant", "content": "done", "tool_calls": [], "tool_call_id": None}]
