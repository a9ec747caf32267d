"""`make bench`, the spool part: what a collector's fault costs a real `hermes chat -q` at exit, and how fast the spool
takes and gives back batches.

* exit: real `hermes chat -q` runs (a tool call and an answer) without the plugin, with it and a healthy
  collector, and with the collector down (refused), hanging (accepts, never answers), unanswered (a firewall
  drops the connection: the connect is never answered), slow (answers after 5 s) and failing (HTTP 500):
  hermes-otel's own exit work (its atexit shutdown, timed inside the run by tests/harness/exit_timing), the
  process's way out (from the answer, its last line on stdout, to its end: Hermes's
  own teardown varies by a second or more between runs) and the whole run; medians of BENCH_SPOOL_RUNS runs each;
* write: batches of 512 chat-like spans encoded and written to the spool (fsync and rename included);
* replay: the same batches re-sent to an OTLP/HTTP receiver in another process, unpaced (`hermes-otel spool
  send`) and by the background sender with its pace bound.

Writes benchmarks/results/spool.json and spool.md.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

RUNS = int(os.environ.get("BENCH_SPOOL_RUNS", "3"))
BATCHES = int(os.environ.get("BENCH_SPOOL_BATCHES", "100"))
BATCH_SPANS = int(os.environ.get("BENCH_SPOOL_BATCH_SPANS", "512"))
RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).parent / "results")
EXIT_TIMING = str(ROOT / "tests" / "harness" / "exit_timing")  # times our atexit shutdown inside each run


# -- exit time under each fault ---------------------------------------------------------------------------------


def exit_times() -> list[dict[str, Any]]:
    from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
    from tests.harness.fault_servers import FaultServer, refused_endpoint
    from tests.harness.hermes import clean_env, hermes_chat_timed, write_home
    from tests.harness.otlp_receiver import OTLPReceiver

    cases: list[tuple[str, Any, bool]] = [
        ("no plugin", None, False),
        ("collector healthy", OTLPReceiver, True),
        ("collector down (refused)", None, True),
        ("collector hanging", lambda: FaultServer("blackhole"), True),
        ("collector unanswered (a firewall drops the connection)", lambda: FaultServer("unanswered"), True),
        ("collector slow (5 s)", lambda: FaultServer("slow", delay_s=5.0), True),
        ("collector failing (HTTP 500)", lambda: FaultServer("status", status=500), True),
    ]
    rows = []
    with FakeLLMServer() as llm, tempfile.TemporaryDirectory(prefix="hermes-otel-bench-exit-") as tmp:
        for label, factory, plugin in cases:
            exits, walls, ours = [], [], []
            for run in range(RUNS):
                server = factory() if factory is not None else None
                if server is not None:
                    server.__enter__()
                try:
                    endpoint = server.endpoint if server is not None else refused_endpoint()
                    home = write_home(Path(tmp) / f"{len(rows)}-{run}", llm.base_url, enable=plugin)
                    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo bench"}, id="call_bench")),
                             Reply.text("done bench"))
                    timing = Path(tmp) / f"exit-{len(rows)}-{run}.txt"
                    extra = {"HERMES_OTEL_TEST_EXIT_TIMING": str(timing), "PYTHONPATH": EXIT_TIMING} if plugin else {}
                    result = hermes_chat_timed("run echo bench", env=clean_env(
                        home, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, **extra))
                    assert result.returncode == 0 and result.answer == "done bench", result.stderr[-2000:]
                    exits.append(result.exit_s)
                    walls.append(result.seconds)
                    if plugin:
                        ours.append(float(timing.read_text().split()[0]))
                finally:
                    if server is not None:
                        server.__exit__(None, None, None)
            rows.append({"case": label, "exit_s": round(statistics.median(exits), 3),
                         "run_s": round(statistics.median(walls), 3), "exits": [round(x, 3) for x in exits],
                         "ours_s": round(statistics.median(ours), 3) if ours else 0.0,
                         "ours": [round(x, 3) for x in ours]})
            print(f"  {label}: hermes-otel's exit work {rows[-1]['ours_s']:.3f} s (runs {rows[-1]['ours']}); the "
                  f"process's way out {rows[-1]['exit_s']:.3f} s (runs {rows[-1]['exits']}); whole run "
                  f"{rows[-1]['run_s']:.2f} s", flush=True)
    base = rows[0]["exit_s"]
    for row in rows:
        row["added_exit_s"] = round(row["exit_s"] - base, 3)
    return rows


# -- spool write and replay throughput ------------------------------------------------------------------------


def _batches() -> list[list]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "hermes-agent", "service.instance.id": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("hermes_otel", "0.1.0")
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-x",
                  "gen_ai.response.model": "gpt-x", "gen_ai.response.finish_reasons": ["stop"],
                  "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 80, "server.address": "api.example",
                  "hermes.turn.id": "20260101_000000_abcdef:task:0123abcd", "hermes.api.attempt": 1}
    for _ in range(BATCH_SPANS):
        tracer.start_span("chat gpt-x", kind=SpanKind.CLIENT, attributes=attributes).end()
    spans = list(exporter.get_finished_spans())
    return [spans] * BATCHES


def throughput() -> dict[str, Any]:
    from receiver import ReceiverProcess

    from hermes_otel.config import OTLPTarget
    from hermes_otel.exporters.file.otlp_json import encode_spans_json
    from hermes_otel.exporters.spool.resend import Resender, send_all
    from hermes_otel.exporters.spool.store import Spool, endpoint_key

    batches = _batches()
    out: dict[str, Any] = {"batches": BATCHES, "spans_per_batch": BATCH_SPANS}
    with tempfile.TemporaryDirectory(prefix="hermes-otel-bench-spool-") as tmp, ReceiverProcess() as receiver:
        url = f"{receiver.endpoint}/v1/traces"
        key = endpoint_key("http/protobuf", url)
        targets = {("traces", key): OTLPTarget(url, "http/protobuf", {}, 10.0, "none")}
        spool = Spool(Path(tmp) / "spool", 1 << 40, 1e9)
        started = time.perf_counter()
        for batch in batches:
            spool.put("traces", key, [encode_spans_json(batch)])
        took = time.perf_counter() - started
        out["write"] = _rates(took, BATCHES, BATCHES * BATCH_SPANS)
        out["bytes_per_batch"] = round(sum(e.size for e in spool.entries()) / BATCHES)
        started = time.perf_counter()
        report = send_all(spool, targets)
        took = time.perf_counter() - started
        assert report.sent == BATCHES and spool.entries() == [], report
        out["replay_unpaced"] = _rates(took, BATCHES, report.items)
        for batch in batches:  # again, for the background sender and its pace bound
            spool.put("traces", key, [encode_spans_json(batch)])
        sender = Resender()
        started = time.perf_counter()
        sender.serve(spool, targets)
        while spool.entries():
            time.sleep(0.01)
        took = time.perf_counter() - started
        sender.stop(time.monotonic() + 1)
        out["replay_background"] = _rates(took, BATCHES, BATCHES * BATCH_SPANS)
    return out


def _rates(seconds: float, batches: int, spans: int) -> dict[str, float]:
    return {"seconds": round(seconds, 3), "batches_per_s": round(batches / seconds, 1),
            "spans_per_s": round(spans / seconds)}


def markdown(report: dict[str, Any]) -> str:
    lines = ["| `hermes chat -q` (a tool call and an answer) | hermes-otel's exit work (atexit) "
             "| the process's way out (answer → end) | whole run |", "|---|---|---|---|"]
    for row in report["exit"]:
        lines.append(f"| {row['case']} | {row['ours_s'] * 1000:.0f} ms | {row['exit_s']:.2f} s "
                     f"| {row['run_s']:.2f} s |")
    t = report["throughput"]
    lines += ["", f"| spool, batches of {t['spans_per_batch']} spans ({t['bytes_per_batch'] / 1024:.0f} KiB) "
              "| batches/s | spans/s |", "|---|---|---|"]
    for key, label in (("write", "write (encode, fsync, rename)"),
                       ("replay_unpaced", "replay, `hermes-otel spool send`"),
                       ("replay_background", "replay, background sender (paced)")):
        lines.append(f"| {label} | {t[key]['batches_per_s']:,} | {t[key]['spans_per_s']:,} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    print(f"spool benchmark: exit time, {RUNS} real `hermes chat -q` runs per case", flush=True)
    report: dict[str, Any] = {"runs": RUNS, "cpus": os.cpu_count(), "exit": exit_times()}
    print(f"spool benchmark: write and replay, {BATCHES} batches of {BATCH_SPANS} spans", flush=True)
    report["throughput"] = throughput()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "spool.json").write_text(json.dumps(report, indent=2))
    (RESULTS / "spool.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
