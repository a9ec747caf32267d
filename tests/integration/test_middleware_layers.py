"""Every execution-middleware layer a span; request rewrites as events that mirror middleware_trace.

Real Hermes 0.19.0 with two third-party plugins (tests/plugins): mw_alpha (request rewrites with
source/reason, timing layers) and mw_beta (an anonymous rewrite, a layer that raises before
next_call, a request callback that raises, a tool short circuit).
"""

from __future__ import annotations

import logging

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.documented import assert_documented
from tests.harness.hermes import parallel_reads, run_agent
from tests.harness.trees import named, only, tree

pytestmark = pytest.mark.hermes

LLM_CHAIN = ["chat fake-model", [["llm_execution mw_alpha", ["llm_execution mw_beta", "provider_call fake-model"]]]]
TOOL_CHAIN = ["execute_tool terminal", [["tool_execution mw_alpha", [["tool_execution mw_beta", ["tool_call terminal"]]]]]]
ALPHA_LLM = "hermes_plugins.mw_alpha.time_llm"


def _turn(receiver, traced, count=1):
    traced.flush(5)
    return receiver.wait_for_spans(lambda s: sum(x.name == "invoke_agent hermes" for x in s) >= count, timeout=15)


def _layer_attrs(span):
    return {k: v for k, v in span.attributes.items() if k.startswith("hermes.middleware.")}


def _as_trace(events, kind):
    """Our rewrite events in middleware_trace's shape."""
    keys = {"hermes.middleware.source": "source", "hermes.middleware.reason": "reason", "hermes.middleware.name": "name"}
    return [
        {keys[k]: v for k, v in attrs.items() if k in keys}
        for name, attrs in events
        if name == "hermes.middleware.rewrite" and attrs["hermes.middleware.kind"] == kind
    ]


def _children(spans, parent):
    return sorted((s for s in spans if s.parent_span_id == parent.span_id), key=lambda s: s.start_ns)


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "non-streaming"])
def test_layers_and_rewrites(with_middleware_plugins, traced, llm, receiver, streaming):
    from run_agent import AIAgent

    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo layered"}, id="call_L")), Reply.text("done"))
    agent = AIAgent(
        base_url=llm.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
        enabled_toolsets=["terminal"], quiet_mode=True, skip_context_files=True, skip_memory=True,
        max_iterations=4, platform="cli",
    )
    agent._disable_streaming = not streaming
    assert agent.run_conversation("run it")["final_response"] == "done"
    spans = _turn(receiver, traced)

    assert tree(spans) == [["invoke_agent hermes", [LLM_CHAIN, TOOL_CHAIN, LLM_CHAIN]]]
    first_chat, second_chat = named(spans, "chat fake-model")
    tool = only(spans, "execute_tool terminal")

    # The effective (rewritten) request is what the chat span describes.
    for chat in (first_chat, second_chat):
        # Hermes 0.19.0 hands every llm_request callback the same incoming request and keeps
        # the LAST replacement: beta's (top_p) wins over alpha's (seed). The span shows the effect.
        assert chat.attributes["gen_ai.request.top_p"] == 0.5
        assert "gen_ai.request.seed" not in chat.attributes
        assert chat.attributes.get("gen_ai.request.stream", False) is streaming
        assert chat.attributes["gen_ai.usage.input_tokens"] == 11
        alpha, = _children(spans, chat)
        beta, provider = _children(spans, alpha)  # beta failed open: the chain went on inside alpha
        assert _layer_attrs(alpha) == {
            "hermes.middleware.kind": "llm_execution",
            "hermes.middleware.plugin": "mw_alpha",
            "hermes.middleware.callback": ALPHA_LLM,
            "hermes.middleware.index": 0,
            "hermes.middleware.outcome": "ok",
            "hermes.middleware.payload_changed": False,
        }
        assert _layer_attrs(beta) == {
            "hermes.middleware.kind": "llm_execution",
            "hermes.middleware.plugin": "mw_beta",
            "hermes.middleware.callback": "hermes_plugins.mw_beta.broken_layer",
            "hermes.middleware.index": 1,
            "hermes.middleware.outcome": "fail_open",
            "hermes.middleware.payload_changed": False,
        }
        assert beta.status_code == "ERROR" and beta.attributes["error.type"] == "RuntimeError"
        assert [e[0] for e in beta.events] == ["exception"]
        assert _layer_attrs(provider) == {
            "hermes.middleware.kind": "llm_execution",
            "hermes.middleware.index": 2,
            "hermes.middleware.terminal": True,
        }
        assert beta.end_ns <= provider.start_ns  # skipped before the real call
        assert chat.start_ns <= alpha.start_ns <= provider.start_ns < provider.end_ns <= alpha.end_ns <= chat.end_ns
        assert [(e[0], e[1]) for e in chat.events] == [
            ("hermes.middleware.rewrite", {
                "hermes.middleware.kind": "llm_request", "hermes.middleware.plugin": "mw_alpha",
                "hermes.middleware.callback": "hermes_plugins.mw_alpha.tag_request", "hermes.middleware.index": 0,
                "hermes.middleware.changed_keys": ["seed"], "hermes.middleware.source": "alpha",
                "hermes.middleware.reason": "pinned seed",
            }),
            ("hermes.middleware.rewrite", {
                "hermes.middleware.kind": "llm_request", "hermes.middleware.plugin": "mw_beta",
                "hermes.middleware.callback": "hermes_plugins.mw_beta.anonymous_rewrite",
                "hermes.middleware.index": 1, "hermes.middleware.changed_keys": ["top_p"],
                "hermes.middleware.source": "plugin",
            }),
        ]

    assert [(e[0], e[1]) for e in tool.events] == [
        ("hermes.middleware.rewrite", {
            "hermes.middleware.kind": "tool_request", "hermes.middleware.plugin": "mw_alpha",
            "hermes.middleware.callback": "hermes_plugins.mw_alpha.default_timeout", "hermes.middleware.index": 0,
            "hermes.middleware.changed_keys": ["timeout"], "hermes.middleware.source": "alpha",
            "hermes.middleware.reason": "default timeout", "hermes.middleware.name": "timeout-default",
        }),
        ("hermes.middleware.failure", {
            "hermes.middleware.kind": "tool_request", "hermes.middleware.plugin": "mw_beta",
            "hermes.middleware.callback": "hermes_plugins.mw_beta.broken_request", "hermes.middleware.index": 1,
            "error.type": "ValueError",
        }),
    ]
    # The events equal the middleware_trace Hermes handed to observers for the same calls.
    seen = {(kind, key): trace for kind, key, trace in with_middleware_plugins.TRACES}
    assert _as_trace(first_chat.events, "llm_request") == seen[("llm_request", first_chat.attributes["hermes.api_request.id"])]
    assert _as_trace(second_chat.events, "llm_request") == seen[("llm_request", second_chat.attributes["hermes.api_request.id"])]
    assert _as_trace(tool.events, "tool_request") == seen[("tool_request", "call_L")]
    # The rewritten args reached the tool, the request middleware's copy reached the provider.
    sent = llm.chat_requests[-1].body
    assert (sent["top_p"], "seed" in sent) == (0.5, False)


def test_retry_shows_the_error_passing_through_the_layers(with_middleware_plugins, traced, llm, receiver):
    llm.push(Reply.error(500, "overloaded"), Reply.text("recovered"))
    assert run_agent(llm.base_url, "hello")["final_response"] == "recovered"
    spans = _turn(receiver, traced)
    assert tree(spans) == [["invoke_agent hermes", [LLM_CHAIN, LLM_CHAIN]]]
    failed, ok = named(spans, "chat fake-model")
    assert [failed.attributes["hermes.api.attempt"], ok.attributes["hermes.api.attempt"]] == [1, 2]
    assert failed.attributes["hermes.api_request.id"] == ok.attributes["hermes.api_request.id"]
    assert (failed.status_code, ok.status_code) == ("ERROR", "UNSET")
    alpha, = _children(spans, failed)
    beta, provider = _children(spans, alpha)
    assert alpha.attributes["hermes.middleware.outcome"] == "error"  # the provider's error passed through it
    assert alpha.attributes["error.type"] == "InternalServerError"  # unwrapped: the original error
    assert beta.attributes["hermes.middleware.outcome"] == "fail_open"
    assert provider.status_code == "ERROR" and provider.attributes["http.response.status_code"] == 500
    ok_alpha, = _children(spans, ok)
    assert ok_alpha.attributes["hermes.middleware.outcome"] == "ok"
    # Request middleware ran again for the retry: each attempt carries its own rewrite events.
    assert [e[0] for e in failed.events][:2] == ["hermes.middleware.rewrite", "hermes.middleware.rewrite"]
    assert [e[0] for e in ok.events] == ["hermes.middleware.rewrite", "hermes.middleware.rewrite"]


def test_short_circuit_tool(with_middleware_plugins, traced, llm, receiver, monkeypatch):
    monkeypatch.setenv("MW_BETA_SHORT_CIRCUIT", "1")
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo never-runs"}, id="call_S")), Reply.text("ok"))
    assert run_agent(llm.base_url, "go")["final_response"] == "ok"
    spans = _turn(receiver, traced)
    tool = only(spans, "execute_tool terminal")
    alpha, = _children(spans, tool)
    beta, = _children(spans, alpha)
    assert _children(spans, beta) == []  # no real tool call
    assert beta.attributes["hermes.middleware.outcome"] == "short_circuit"
    assert alpha.attributes["hermes.middleware.outcome"] == "ok"
    assert not [s for s in spans if s.name.startswith("tool_call")]
    # The short-circuit result is what Hermes gave the model.
    tool_messages = [m for m in llm.chat_requests[-1].body["messages"] if m.get("role") == "tool"]
    assert "short-circuited by mw_beta" in tool_messages[-1]["content"]


def test_parallel_tools_one_span_each_with_both_passes_inside(with_middleware_plugins, traced, llm, receiver, tmp_path):
    llm.push(parallel_reads(tmp_path, ("call_P1", "call_P2")), Reply.text("both"))
    assert run_agent(llm.base_url, "two at once", enabled_toolsets=["file"])["final_response"] == "both"
    spans = _turn(receiver, traced)
    root = only(spans, "invoke_agent hermes")
    tools = named(spans, "execute_tool read_file")
    assert sorted(t.attributes["gen_ai.tool.call.id"] for t in tools) == ["call_P1", "call_P2"]
    by_id = {s.span_id: s for s in spans}
    for tool in tools:
        assert tool.parent_span_id == root.span_id
        inside = [s for s in spans if s.name.startswith(("tool_execution", "tool_call"))]
        mine = []
        for span in inside:
            parent = by_id.get(span.parent_span_id)
            while parent is not None and parent is not tool and parent.name != "execute_tool read_file":
                parent = by_id.get(parent.parent_span_id)
            if parent is tool:
                mine.append(span)
        # Hermes runs the chain twice, nested (batch path, then registry path): the batch pass's
        # terminal call is the registry dispatch, which runs the second pass around the real call.
        assert tree(mine + [tool]) == [[
            "execute_tool read_file",
            [["tool_execution mw_alpha", [["tool_execution mw_beta", [["tool_call read_file", [
                ["tool_execution mw_alpha", [["tool_execution mw_beta", ["tool_call read_file"]]]],
            ]]]]]]],
        ]]
        assert all(s.trace_id == root.trace_id for s in mine)
        assert tool.attributes["hermes.tool.status"] == "ok"
        assert [e[0] for e in tool.events] == ["hermes.middleware.rewrite", "hermes.middleware.failure"]


def test_http_client_spans_nest_under_the_provider_call(with_middleware_plugins, traced, llm, receiver):
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=traced.current_telemetry().tracer_provider)
    try:
        llm.push(Reply.text("traced http"))
        assert run_agent(llm.base_url, "hi")["final_response"] == "traced http"
        spans = _turn(receiver, traced)
    finally:
        instrumentor.uninstrument()
    provider = only(spans, "provider_call fake-model")
    url = lambda s: s.attributes.get("url.full") or s.attributes.get("http.url") or ""  # noqa: E731 - new or old semconv
    http = [s for s in spans if s.name == "POST" and url(s).endswith("/chat/completions")]
    assert len(http) == 1, [s.name for s in spans]
    # Hermes sends the request from a thread of its own: our context went with it.
    assert http[0].parent_span_id == provider.span_id
    assert http[0].trace_id == provider.trace_id


def _shape(spans, root):
    """[(name, outcome), [children...]] below `root`, children in start order."""
    return [[(c.name, c.attributes.get("hermes.middleware.outcome")), _shape(spans, c)] for c in _children(spans, root)]


def test_runner_and_hermes_agree_on_the_same_plugins(with_middleware_plugins, traced, llm, receiver):
    """Differential: the same third-party callbacks through real Hermes and through our runner."""
    import sys

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from hermes_otel.middleware.runner import MiddlewareRunner

    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo diff"}, id="call_D")), Reply.text("done"))
    assert run_agent(llm.base_url, "go")["final_response"] == "done"
    spans = _turn(receiver, traced)
    hermes_llm = _shape(spans, named(spans, "chat fake-model")[0])
    hermes_tool = _shape(spans, only(spans, "execute_tool terminal"))

    alpha, beta = sys.modules["hermes_plugins.mw_alpha"], sys.modules["hermes_plugins.mw_beta"]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = MiddlewareRunner(provider.get_tracer("differential"))
    for kind, fn_a, fn_b in (
        ("llm_execution", alpha.time_llm, beta.broken_layer),
        ("tool_execution", alpha.time_tool, beta.maybe_short_circuit),
    ):
        runner.register(kind, fn_a, plugin="mw_alpha")
        runner.register(kind, fn_b, plugin="mw_beta")
    tracer = provider.get_tracer("differential")
    with tracer.start_as_current_span("chat fake-model") as chat:
        assert runner.run_execution("llm_execution", {"model": "fake-model"}, lambda r: "response", model="fake-model") == "response"
    with tracer.start_as_current_span("execute_tool terminal") as tool:
        assert runner.run_execution("tool_execution", {"command": "x"}, lambda a: "output", tool_name="terminal") == "output"
    provider.shutdown()

    finished = exporter.get_finished_spans()

    def shape(parent_id):
        kids = sorted((s for s in finished if s.parent is not None and s.parent.span_id == parent_id), key=lambda s: s.start_time)
        return [[(s.name, s.attributes.get("hermes.middleware.outcome")), shape(s.context.span_id)] for s in kids]

    assert shape(chat.get_span_context().span_id) == hermes_llm == [
        [("llm_execution mw_alpha", "ok"), [
            [("llm_execution mw_beta", "fail_open"), []],
            [("provider_call fake-model", None), []],
        ]],
    ]
    assert shape(tool.get_span_context().span_id) == hermes_tool


def test_hermes_middleware_warnings_are_hermes_own_by_default(with_middleware_plugins, traced, llm, receiver, caplog):
    """With the defaults, Hermes's warning reads as it does without the plugin: every call, Hermes's own words."""
    caplog.set_level(logging.DEBUG, logger="hermes_cli")
    llm.push(Reply.text("one"), Reply.text("two"))
    assert run_agent(llm.base_url, "first")["final_response"] == "one"
    assert run_agent(llm.base_url, "second")["final_response"] == "two"
    records = [r for r in caplog.records if r.getMessage().startswith("Middleware 'llm_execution' callback broken_layer")]
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("WARNING", "Middleware 'llm_execution' callback broken_layer raised: mw_beta layer is broken")] * 2


def test_hermes_middleware_warnings_are_reported_once_when_opted_in(with_middleware_plugins, traced, llm, receiver,
                                                                    caplog, monkeypatch, tmp_path):
    from hermes_cli.plugins import discover_plugins

    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nmiddleware_log_dedupe = true\n')
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    discover_plugins(force=True)
    caplog.set_level(logging.DEBUG, logger="hermes_cli")
    llm.push(Reply.text("one"), Reply.text("two"))
    assert run_agent(llm.base_url, "first")["final_response"] == "one"
    assert run_agent(llm.base_url, "second")["final_response"] == "two"
    records = [r for r in caplog.records if r.getMessage().startswith("Middleware 'llm_execution' callback broken_layer")]
    assert [r.levelname for r in records] == ["WARNING", "DEBUG"]  # Hermes itself warned both times
    assert records[0].getMessage() == (
        "Middleware 'llm_execution' callback broken_layer raised: mw_beta layer is broken (middleware passes: "
        "api_call_count, api_mode, api_request_id, base_url, middleware_schema_version, middleware_trace, model, "
        "next_call, original_request, platform, provider, request, session_id, task_id, telemetry_schema_version, "
        "turn_id; identical repeats are logged at DEBUG)"
    )


def test_middleware_metrics_and_everything_documented(with_middleware_plugins, traced, llm, receiver):
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo m"}, id="call_M")), Reply.error(500), Reply.text("ok"))
    assert run_agent(llm.base_url, "go")["final_response"] == "ok"
    spans = _turn(receiver, traced)
    traced.current_telemetry().meter_provider.force_flush(5000)
    metrics = receiver.wait_for_metrics(lambda m: any(x.name == "hermes.middleware.rewrites" for x in m), timeout=10)
    assert_documented(spans, metrics)
    latest = {}
    for metric in metrics:  # cumulative: the last export of each metric holds the totals
        latest[metric.name] = metric

    def points(name):
        return {tuple(sorted(p["attributes"].items())): p for p in latest[name].points}

    rewrites = points("hermes.middleware.rewrites")
    assert {k: p["value"] for k, p in rewrites.items()} == {
        (("hermes.middleware.kind", "llm_request"), ("hermes.middleware.source", "alpha")): 3,
        (("hermes.middleware.kind", "llm_request"), ("hermes.middleware.source", "plugin")): 3,
        (("hermes.middleware.kind", "tool_request"), ("hermes.middleware.source", "alpha")): 1,
    }
    failures = {k: p["value"] for k, p in points("hermes.middleware.failures").items()}
    assert failures == {
        (("hermes.middleware.kind", "llm_execution"), ("hermes.middleware.plugin", "mw_beta")): 3,
        (("hermes.middleware.kind", "tool_request"), ("hermes.middleware.plugin", "mw_beta")): 1,
    }
    durations = {k: p["count"] for k, p in points("hermes.middleware.duration").items()}
    assert durations == {
        (("hermes.middleware.kind", "llm_execution"), ("hermes.middleware.outcome", "ok"), ("hermes.middleware.plugin", "mw_alpha")): 2,
        (("hermes.middleware.kind", "llm_execution"), ("hermes.middleware.outcome", "error"), ("hermes.middleware.plugin", "mw_alpha")): 1,
        (("hermes.middleware.kind", "llm_execution"), ("hermes.middleware.outcome", "fail_open"), ("hermes.middleware.plugin", "mw_beta")): 3,
        (("hermes.middleware.kind", "tool_execution"), ("hermes.middleware.outcome", "ok"), ("hermes.middleware.plugin", "mw_alpha")): 1,
        (("hermes.middleware.kind", "tool_execution"), ("hermes.middleware.outcome", "ok"), ("hermes.middleware.plugin", "mw_beta")): 1,
    }
