"""Real Hermes 0.19.0 -> our Collector (collector/ files as shipped) -> real Jaeger v2, read back
through Jaeger's query API; span metrics through the Collector's Prometheus exporter into a real
Prometheus. Binaries: `make backends` (our Collector distribution and Jaeger, from Go modules)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness import dashboards as dq
from tests.harness.backends import Prometheus, get_json, wait_until
from tests.harness.hermes import clean_env, hermes_chat, install_test_plugins, parallel_reads, write_home
from tests.harness.otelcol import Collector, Jaeger
from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.harness.trees import named, only, subagents, tree

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


def all_spans(jaeger: Jaeger, trace_id: str, span_ids: set[str], timeout: float = 60) -> list:
    """A trace once every span Hermes emitted for it is in Jaeger (a retried batch may come later)."""

    def complete() -> list | None:
        spans = jaeger.trace(trace_id)
        return spans if {s.span_id for s in spans} >= span_ids else None

    return wait_until(complete, timeout, f"every span of trace {trace_id} in Jaeger")


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
                tool_chain("delegate_task"), ["invoke_agent hermes", [["invoke_agent hermes", [LLM_CHAIN]]]],
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
    (subagent,) = subagents(spans)
    assert subagent.attributes["hermes.subagent.status"] == "completed"
    # Tempo (its stand-in) received the same spans: the fan-out loses nothing.
    tempo_ids = wait_until(lambda: (ids := {s.span_id for s in single_node["tempo"].spans()}) >= {
        s.span_id for s in spans} and ids, 15, "the same spans at the Tempo stand-in")
    assert {s.span_id for s in spans} <= tempo_ids


def test_single_node_span_metrics_feed_the_dashboards(single_node, jaeger, llm):
    """The spanmetrics-fed panels (checked by shape only until now) return data from a live Prometheus."""
    prom: Prometheus = single_node["prometheus"]
    collector: Collector = single_node["collector"]
    calls = f'sum by (span_name) (traces_span_metrics_calls_total{{service_name="{SERVICE}"}})'
    with exporting_to(collector.otlp_http, llm, "mw_alpha", "mw_beta") as runtime:
        for turn in range(2):  # rate() needs an increase between two scrapes: a turn, a scrape, another turn
            llm.push(Reply.text("done"))
            assert _agent(llm, ["terminal"]).run_conversation(f"metrics turn {turn}")["final_response"] == "done"
            runtime.flush(5)
            wait_until(lambda turn=turn: sum(float(r["value"][1]) for r in prom.query(calls)
                                             if r["metric"]["span_name"] == "invoke_agent hermes") >= 3 + turn,
                       30, f"metrics turn {turn} in Prometheus")
    fed = [q for q in dq.prometheus_queries() if q.spanmetrics_fed]
    assert fed, "no dashboard panel is fed by span metrics"
    for query in fed:
        result = wait_until(lambda query=query: prom.query(dq.concrete(query.expr)), 30, f"{query.panel} in Prometheus")
        # A quantile of a series that did not grow in the window is NaN (0/0); series that did give data.
        values = [v for r in result if math.isfinite(v := float(r["value"][1]))]
        assert values and max(values) > 0, (query.panel, result)
    counts = {r["metric"]["span_name"]: float(r["value"][1]) for r in prom.query(calls)}
    # The story turn (the parent's and the subagent's turn) and the two metrics turns; the read and the
    # approval only in the first.
    assert counts["invoke_agent hermes"] == 4
    assert counts["execute_tool read_file"] == 2 and counts["approval"] == 1


# -- b. the tail-sampling overlay: every error kept, the rest at the configured rate --------------


def _fnv1a64(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def probabilistic_keeps(trace_id: str, percentage: int, salt: str = "default-hash-seed") -> bool:
    """The tail_sampling processor's probabilistic policy: FNV-1a of salt + trace id under a threshold."""
    threshold = (2**64 - 1) * percentage // 100
    return _fnv1a64(salt.encode() + bytes.fromhex(trace_id)) <= threshold


class Recorder:
    """The SDK's in-memory exporter on the live pipeline: what the plugin emitted, for predictions."""

    def __init__(self, runtime) -> None:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        runtime.current_telemetry().tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def traces(self) -> dict[str, list]:
        out: dict[str, list] = {}
        for span in self.exporter.get_finished_spans():
            out.setdefault(f"{span.context.trace_id:032x}", []).append(span)
        return out


def test_tail_sampling_keeps_every_error_and_the_predicted_share(jaeger, llm, tmp_path):
    from opentelemetry.trace import StatusCode

    service, percentage, turns = "hermes-otel-tail", 50, 16
    tempo = OTLPGrpcReceiver()
    collector = Collector("single-node.yaml", "tail-sampling.yaml", env={
        "JAEGER_OTLP_GRPC": jaeger.otlp_grpc, "TEMPO_OTLP_GRPC": f"127.0.0.1:{tempo.port}",
        "TAIL_SAMPLING_DECISION_WAIT": "2s", "TAIL_SAMPLING_PERCENTAGE": str(percentage),
    })
    try:
        tempo.__enter__()
        collector.start()
        with exporting_to(collector.otlp_http, llm, OTEL_SERVICE_NAME=service) as runtime:
            recorder = Recorder(runtime)
            for turn in range(turns):
                if turn % 4 == 3:  # a failing tool: the turn's trace holds an ERROR span
                    llm.push(Reply.tools(ToolCall("read_file", {"path": str(tmp_path / "missing.txt")})),
                             Reply.text("done"))
                else:
                    llm.push(Reply.text("done"))
                _agent(llm, ["file"]).run_conversation(f"tail turn {turn}")
            runtime.flush(5)
        emitted = recorder.traces()
        assert len(emitted) == turns
        errors = {t for t, spans in emitted.items() if any(s.status.status_code is StatusCode.ERROR for s in spans)}
        assert len(errors) == turns // 4
        expected = errors | {t for t in emitted if probabilistic_keeps(t, percentage)}
        assert 0 < len(expected - errors) < turns - len(errors)  # the share is neither none nor all
        time.sleep(2.5)  # the decision wait
        kept = wait_until(lambda: len(ids := jaeger.trace_ids(service)) >= len(expected) and ids, 30,
                          "the sampled traces in Jaeger")
        time.sleep(3)  # nothing more arrives: the others were dropped, not late
        assert set(jaeger.trace_ids(service)) == expected
        for trace_id in kept:  # a kept trace is whole
            assert len(whole_trace(jaeger, trace_id)) == len(emitted[trace_id])
    finally:
        collector.stop()
        tempo.__exit__(None, None, None)


# -- e. our exporters into the Collector over OTLP/HTTP and OTLP/gRPC, gzip on --------------------


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_every_signal_reaches_the_collector_gzipped(single_node, jaeger, llm, protocol):
    collector: Collector = single_node["collector"]
    transport = "grpc" if protocol == "grpc" else "http"
    service = f"hermes-otel-{transport}"

    def accepted() -> dict[str, float]:
        return {f"{verb}_{signal}": _by_transport(collector, f"otelcol_receiver_{verb}_{signal}", transport)
                for verb in ("accepted", "refused") for signal in ("spans", "log_records", "metric_points")}

    before = accepted()
    endpoint = collector.otlp_grpc if protocol == "grpc" else collector.otlp_http
    with exporting_to(endpoint, llm, OTEL_SERVICE_NAME=service, OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                      OTEL_EXPORTER_OTLP_COMPRESSION="gzip") as runtime:
        llm.push(Reply.tools(ToolCall("terminal", {"command": "echo gz"}, id="call_G")), Reply.text("done"))
        assert _agent(llm, ["terminal"]).run_conversation("zip it")["final_response"] == "done"
        runtime.flush(5)
    (spans,) = _jaeger_traces(jaeger, 1, service=service).values()
    assert tree(spans) == [["invoke_agent hermes", ["chat fake-model", "execute_tool terminal", "chat fake-model"]]]
    assert only(spans, "execute_tool terminal").attributes["gen_ai.tool.call.id"] == "call_G"
    after = wait_until(lambda: (a := accepted())["accepted_log_records"] > before["accepted_log_records"]
                       and a["accepted_metric_points"] > before["accepted_metric_points"] and a, 15,
                       f"logs and metrics accepted over {transport}")
    assert after["accepted_spans"] - before["accepted_spans"] == len(spans)
    refused = {k: v for k, v in after.items() if k.startswith("refused")}
    assert refused == {k: before[k] for k in refused}  # nothing refused


def _by_transport(collector: Collector, name: str, transport: str) -> float:
    return collector.metrics(lambda labels: f'transport="{transport}"' in labels).get(name, 0.0)


# -- d. replay: the embedded-default files of a real run, through replay-files.yaml, into Jaeger ---


def _file_spans(path: Path) -> dict[str, dict]:
    """Every span in an OTLP-JSON-lines file, by span id, as Jaeger's api_v3 would show it."""
    from tests.harness.otelcol import JaegerSpan

    spans = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    parsed = JaegerSpan.from_otlp(span, resource)
                    spans[parsed.span_id] = parsed
    return spans


def test_replayed_files_arrive_in_jaeger_as_recorded(jaeger, tmp_path):
    service = "hermes-otel-replay"
    home = tmp_path / "home"
    with FakeLLMServer() as llm:
        write_home(home, llm.base_url)
        llm.push(Reply.tools(ToolCall("terminal", {"command": "echo replay"}, id="call_R")), Reply.text("done"))
        result = hermes_chat("replay me", env=clean_env(home, OTEL_SERVICE_NAME=service))
    assert result.returncode == 0, result.stderr[-2000:]
    recorded = _file_spans(home / "otel" / "traces.jsonl")
    trace_ids = {s.trace_id for s in recorded.values()}
    assert len(trace_ids) == 1 and len(recorded) >= 4
    (trace_id,) = trace_ids
    spans = _replayed(jaeger, service, home, trace_id)
    assert jaeger.trace_ids(service) == [trace_id]
    assert {s.span_id: s for s in spans} == recorded  # ids, parents, names, kinds, times, attributes, events


def _replayed(jaeger: Jaeger, service: str, home: Path, trace_id: str, *overlays: str) -> list:
    """replay-files.yaml (with `overlays`) reading `home`'s files into Jaeger: the trace's spans once whole."""
    collector = Collector("replay-files.yaml", *overlays, env={"HERMES_OTEL_DIR": str(home / "otel"),
                                                               "OTLP_TARGET": jaeger.otlp_grpc})
    try:
        collector.start()
        return wait_until(lambda: len(jaeger.trace_ids(service)) == 1 and whole_trace(jaeger, trace_id), 60,
                          "the replayed trace in Jaeger", collector.proc, collector.log)
    finally:
        collector.stop()


def test_the_collectors_otlpjsonfile_receiver_reads_the_spool(jaeger, tmp_path):
    """What a dead collector never took waits in the spool as OTLP/JSON lines: replay-files.yaml, pointed at the
    spool, brings it into Jaeger exactly as recorded."""
    from tests.harness.fault_servers import refused_endpoint

    service = "hermes-otel-spool-replay"
    home = tmp_path / "home"
    with FakeLLMServer() as llm:
        write_home(home, llm.base_url)
        llm.push(Reply.tools(ToolCall("terminal", {"command": "echo spool"}, id="call_S")), Reply.text("done"))
        result = hermes_chat("spool me", env=clean_env(home, OTEL_SERVICE_NAME=service,
                                                       OTEL_EXPORTER_OTLP_ENDPOINT=refused_endpoint()))
    assert result.returncode == 0, result.stderr[-2000:]
    recorded: dict = {}
    for path in sorted((home / "otel" / "spool" / "traces").glob("*.jsonl")):
        recorded.update(_file_spans(path))
    trace_ids = {s.trace_id for s in recorded.values()}
    assert len(trace_ids) == 1 and len(recorded) >= 4
    overlay = tmp_path / "spool-overlay.yaml"
    overlay.write_text('receivers:\n  otlp_json_file/traces:\n    include: ["${env:HERMES_OTEL_DIR}/spool/traces/*.jsonl"]\n')
    (trace_id,) = trace_ids
    spans = _replayed(jaeger, service, home, trace_id, str(overlay))
    assert {s.span_id: s for s in spans} == recorded


# -- c. the gateway tier: load balancing by trace id into two samplers, then one sampler dies ------


def _gateway_responder(body: dict) -> Reply:
    """Each CLI conversation on its own: a tool call, then the answer (concurrent runs share the server)."""
    tools = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    return Reply.tools(ToolCall("terminal", {"command": "echo gateway"})) if tools == 0 else Reply.text("done")


@contextlib.contextmanager
def gateway(jaeger: Jaeger) -> Iterator[dict]:
    """agent.yaml (+ the static-resolver overlay) in front of two sampler.yaml collectors, into Jaeger."""
    with contextlib.ExitStack() as stack:
        samplers, stand_ins = [], []
        for name in ("sampler-a", "sampler-b"):
            tempo = stack.enter_context(OTLPGrpcReceiver())  # what this sampler kept, for the test to see
            sampler = Collector("gateway/sampler.yaml", name=name, env={
                "JAEGER_OTLP_GRPC": jaeger.otlp_grpc, "TEMPO_OTLP_GRPC": f"127.0.0.1:{tempo.port}",
                "TAIL_SAMPLING_DECISION_WAIT": "2s", "TAIL_SAMPLING_PERCENTAGE": "100",
            })
            stack.callback(sampler.stop)
            samplers.append(sampler.start())
            stand_ins.append(tempo)
        ports = [s.ports.otlp_grpc for s in samplers]
        agent = Collector("gateway/agent.yaml", "gateway/agent-static.yaml", name="gateway-agent", env={
            "SAMPLERS": "[" + ", ".join(f"127.0.0.1:{p}" for p in ports) + "]",
            "SAMPLERS_DNS": "127.0.0.1", "SAMPLERS_PORT": str(ports[0]),
        })
        stack.callback(agent.stop)
        yield {"agent": agent.start(), "samplers": samplers, "stand_ins": stand_ins}


def _cli_runs(llm: FakeLLMServer, homes: list[Path], runs: int, endpoint: str, service: str) -> None:
    """`runs` `hermes chat` runs in each home, the homes' processes side by side."""
    failures: list[str] = []

    def one_process(home: Path) -> None:
        for n in range(runs):
            result = hermes_chat(f"gateway run {n}", env=clean_env(
                home, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SERVICE_NAME=service, OTEL_BSP_SCHEDULE_DELAY="50",
                HERMES_OTEL_PLUGINS_TOML=str(home / "plugins.toml")))
            if result.returncode != 0:
                failures.append(result.stderr[-1000:])

    threads = [threading.Thread(target=one_process, args=(home,)) for home in homes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


def _send_spooled(homes: list[Path], endpoint: str) -> None:
    """What the agent collector had not acknowledged 100 ms into a run's exit (this machine is loaded) waits in that
    home's spool for the next run; `hermes-otel spool send` delivers it now, as a user would."""
    import subprocess

    from tests.harness.hermes import BIN

    for home in homes:
        if any((home / "otel" / "spool").rglob("*.jsonl")):
            done = subprocess.run([str(BIN / "hermes-otel"), "spool", "send"], capture_output=True, text=True,
                                  timeout=120, env=clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint))
            assert done.returncode == 0, done.stdout + done.stderr


def _recorded_traces(homes: list[Path]) -> dict[str, set[str]]:
    """trace id -> span ids, from the local files each run also wrote (what Hermes emitted)."""
    out: dict[str, set[str]] = {}
    for home in homes:
        path = home / "otel" / "traces.jsonl"
        for span in (_file_spans(path).values() if path.exists() else ()):
            out.setdefault(span.trace_id, set()).add(span.span_id)
    return out


def _homes(tmp_path: Path, llm: FakeLLMServer, count: int) -> list[Path]:
    homes = []
    for n in range(count):
        home = write_home(tmp_path / f"home{n}", llm.base_url)
        (home / "plugins.toml").write_text(
            'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nfile = { enabled = true }\n')
        homes.append(home)
    return homes


def test_gateway_routes_every_trace_whole_to_one_sampler(jaeger, tmp_path):
    service = "hermes-otel-gateway"
    with FakeLLMServer(responder=_gateway_responder) as llm, gateway(jaeger) as tier:
        homes = _homes(tmp_path, llm, 2)
        _cli_runs(llm, homes, 2, tier["agent"].otlp_http, service)
        _send_spooled(homes, tier["agent"].otlp_http)
        emitted = _recorded_traces(homes)
        assert len(emitted) == 4
        wait_until(lambda: set(jaeger.trace_ids(service)) == set(emitted), 60, "every trace in Jaeger")
        kept = [{} for _ in tier["stand_ins"]]
        for n, stand_in in enumerate(tier["stand_ins"]):
            for span in stand_in.spans():
                kept[n].setdefault(span.trace_id, set()).add(span.span_id)
        for trace_id, span_ids in emitted.items():
            assert {s.span_id for s in all_spans(jaeger, trace_id, span_ids)} == span_ids  # whole, nothing more
            holders = [n for n in range(2) if trace_id in kept[n]]
            assert len(holders) == 1 and kept[holders[0]][trace_id] == span_ids, (trace_id, holders)


def test_gateway_when_a_sampler_dies(jaeger, tmp_path):
    """A sampler killed mid-run (docs/scaling.md has the measured numbers):
    - what it held in its decision wait is lost, and nothing counts it (the agent had its acknowledgement);
    - while it is down, its share is not re-routed (a static list; DNS would drop it from the ring): the
      agent's persistent queue retries it, and it arrives whole once the sampler is back;
    - the other sampler's share is unaffected."""
    service = "hermes-otel-gateway-fault"
    with FakeLLMServer(responder=_gateway_responder) as llm, gateway(jaeger) as tier:
        agent, (_, sampler_b), stand_ins = tier["agent"], tier["samplers"], tier["stand_ins"]
        homes = _homes(tmp_path, llm, 2)

        def holders() -> dict[str, list[int]]:
            held: dict[str, list[int]] = {}
            for n, stand_in in enumerate(stand_ins):
                for trace_id in {span.trace_id for span in stand_in.spans()}:
                    held.setdefault(trace_id, []).append(n)
            return held

        _cli_runs(llm, homes, 2, agent.otlp_http, service)
        first = _recorded_traces(homes)
        sampler_b.kill()  # at once: B may still hold traces in its 2 s decision wait
        time.sleep(5)  # A's decision wait passes: what no sampler exported by now was in B's memory
        routed_to_b_and_lost = set(first) - set(holders())
        for home in homes:
            (home / "otel" / "traces.jsonl").unlink()
        _cli_runs(llm, homes, 3, agent.otlp_http, service)
        during = _recorded_traces(homes)
        time.sleep(5)  # longer than A's decision wait: A's share of the outage has arrived
        arrived_while_down = set(jaeger.trace_ids(service)) & set(during)
        assert all(holders()[t] == [0] for t in arrived_while_down)  # A's share only: nothing re-routed
        sampler_b.start()  # back on the same address
        _send_spooled(homes, agent.otlp_http)
        wait_until(lambda: set(jaeger.trace_ids(service)) >= set(during), 120, "B's share once B is back")
        for trace_id, span_ids in during.items():  # nothing of the outage lost, each trace whole, once
            assert {s.span_id for s in all_spans(jaeger, trace_id, span_ids)} == span_ids
            assert len(holders()[trace_id]) == 1
        in_jaeger = set(jaeger.trace_ids(service))
        # Lost for good: at most what no sampler had exported by the kill. Such a trace may still show in part: the
        # batches B held died with it, a batch still queued at the agent (or in a home's spool) arrives once B is
        # back. Everything else of before the kill is whole.
        assert set(first) - in_jaeger <= routed_to_b_and_lost
        for trace_id in set(first) & in_jaeger:
            if trace_id in routed_to_b_and_lost:
                assert {s.span_id for s in jaeger.trace(trace_id)} <= first[trace_id]
            else:
                assert {s.span_id for s in all_spans(jaeger, trace_id, first[trace_id])} == first[trace_id]


# -- doctor asks the Collector's health_check ------------------------------------------------------


def test_doctor_probes_the_collectors_health_check(single_node, tmp_path):
    import subprocess
    import sys

    collector: Collector = single_node["collector"]
    home = write_home(tmp_path / "home", "http://127.0.0.1:9/v1")

    def doctor(**env: str) -> list[str]:
        result = subprocess.run([str(Path(sys.executable).parent / "hermes-otel"), "doctor"], capture_output=True,
                                text=True, timeout=60, env=clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=collector.otlp_http,
                                                                     **env))
        return [line.strip() for line in result.stdout.splitlines() if "health_check" in line]

    assert doctor(HERMES_OTEL_COLLECTOR_HEALTH_CHECK=collector.health_url) == [
        f"ok    Collector health_check {collector.health_url}: the Collector is ready (Server available, up since "
        + get_json(collector.health_url)["upSince"] + ")"
    ]
    # Not configured: the guess (port 13133 on the endpoint's host) finds nothing there, and says so as a note.
    (line,) = doctor()
    assert line.startswith("note  Collector health_check http://127.0.0.1:13133/: not reachable") and line.endswith(
        "no health_check there; set collector.health_check to your Collector's")
    # Something that is not a health_check: the Collector's own metrics page.
    (line,) = doctor(HERMES_OTEL_COLLECTOR_HEALTH_CHECK=f"http://127.0.0.1:{collector.ports.telemetry}/metrics")
    assert line.startswith("FAIL") and "HTTP 200, but not a Collector health_check answer" in line
    collector.kill()  # gone: the configured check fails
    try:
        (line,) = doctor(HERMES_OTEL_COLLECTOR_HEALTH_CHECK=collector.health_url)
        assert line.startswith(f"FAIL  Collector health_check {collector.health_url}: not reachable")
    finally:
        collector.start()

