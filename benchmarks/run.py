"""`make bench`: what the plugin costs real Hermes 0.19.0, against what the same telemetry costs the SDK.

Every case alternates rounds with the plugin registered (through its real
`register`) and without it, in one process, and reports medians (µs):

* agent_wall: the added time of one call on the agent's thread, calls back to
  back (warm caches); observer records are emitted after the round;
* agent_cold: the same with the agent idle between calls, as while its model
  thinks (caches go cold; the records thread and exporters run in between);
* total_cpu: the process CPU per call, the records thread and exporters included;
* floor_wall / floor_cpu: the same spans, events, log records and metric
  points emitted directly through the SDK on the agent's thread with
  precomputed attributes, measured the same way; the ratios compare to them.

Also: per-turn cost against history length, observer events per second,
RSS over a soak, and per-turn latency and exit time with a collector that is
healthy, down, hanging or slow. Writes benchmarks/results/latest.json and
latest.md (the README's tables).
"""

from __future__ import annotations

import gc
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HOME = Path(tempfile.mkdtemp(prefix="hermes-otel-bench-"))
os.environ["HERMES_HOME"] = str(HOME)  # before any Hermes import
# A config.yaml, as every real home has: without one Hermes 0.2x rebuilds its config (deep copies) on every hook
# dispatch, which no user pays.
(HOME / "config.yaml").write_text("model:\n  provider: custom\n", encoding="utf-8")
for _key in [k for k in os.environ if k.startswith("OTEL_")]:
    del os.environ[_key]
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import drivers  # noqa: E402
from floor import Capture, blueprint, floor_fn  # noqa: E402
from hermes_cli.plugins import get_plugin_manager  # noqa: E402
from quiet import settle  # noqa: E402
from receiver import ReceiverProcess  # noqa: E402

from hermes_otel import runtime  # noqa: E402
from hermes_otel.exporters.health import health  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
CALLS = int(os.environ.get("BENCH_CALLS", "200"))
SOAK_TURNS = int(os.environ.get("BENCH_SOAK_TURNS", "10000"))
PACE_S = float(os.environ.get("BENCH_PACE_S", "0.0005"))
HISTORY_ROUNDS = int(os.environ.get("BENCH_HISTORY_ROUNDS", "15"))
LATENCY_TURNS = int(os.environ.get("BENCH_LATENCY_TURNS", "1200"))  # p99 is the 12th-worst turn
RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).parent / "results")


# -- plugin on / off -------------------------------------------------------------


class Plugin:
    """Our plugin registered through Hermes with the given environment; switchable between rounds."""

    def __init__(self, env: dict[str, str]) -> None:
        for key in [k for k in os.environ if k.startswith("OTEL_")]:
            del os.environ[key]
        os.environ.update(env)
        drivers.register_plugin()
        self.manager = get_plugin_manager()
        self.hooks = {name: list(cbs) for name, cbs in self.manager._hooks.items()}
        self.state = (runtime._state.tracker, runtime._state.bridge)
        self.telemetry = runtime.current_telemetry()
        self.capture = Capture()
        self.telemetry.tracer_provider.add_span_processor(self.capture)
        self.telemetry.logger_provider.add_log_record_processor(self.capture.logs)

    @property
    def emitter(self):
        return self.telemetry.emitter

    def on(self) -> None:
        self.manager._hooks.clear()
        self.manager._hooks.update({name: list(cbs) for name, cbs in self.hooks.items()})
        runtime._state.tracker, runtime._state.bridge = self.state

    def off(self) -> None:
        self.manager._hooks.clear()  # Hermes then skips building hook payloads (has_hook is False)
        runtime._state.tracker, runtime._state.bridge = None, None

    def flush(self) -> None:
        """Everything queued so far built and exported (spans and logs; metrics are periodic)."""
        self.emitter.drain()
        self.telemetry.tracer_provider.force_flush(10_000)
        self.telemetry.logger_provider.force_flush(10_000)

    def close(self) -> None:
        self.on()
        runtime.shutdown()


def _timed(fn: Callable[[int], Any], calls: int, pace_s: float = 0.0) -> list[float]:
    """Per-call wall times; with `pace_s`, the caller idles between calls as an agent does while its
    model thinks (the records thread and exporters run then, as they would)."""
    times = []
    clock, sleep = time.perf_counter, time.sleep
    for i in range(calls):
        started = clock()
        fn(i)
        times.append(clock() - started)
        if pace_s:
            sleep(pace_s)
    return times


class Round:
    """One round's clocks: wall time per call, the agent thread's CPU, and the whole process's CPU
    (records, exporter and send threads included, until they are done with what the round made)."""

    def __init__(self, plugin: Plugin, fn: Callable[[int], Any], calls: int, pace_s: float = 0.0) -> None:
        cpu, thread = time.process_time(), time.thread_time()
        self.wall = _timed(fn, calls, pace_s)
        self.thread = (time.thread_time() - thread) / calls
        plugin.flush()
        settle()  # OTLP exports go on after a flush, on our send threads
        self.process = (time.process_time() - cpu) / calls


def measure(plugin: Plugin, fn: Callable[[int], Any], calls: int = CALLS, rounds: int | None = None,
            floor: Callable[[int], Any] | None = None) -> dict:
    """Alternate plugin-on and plugin-off rounds; medians in µs.

    Tight rounds (calls back to back, warm caches; the round's process CPU includes the records
    thread's work, drained at its end) give the
    agent-thread and total figures. Paced rounds (the agent idles between calls, as while its model
    thinks; caches go cold, the records thread and exporters run in between) give the cold figure. With
    `floor` (the same telemetry emitted straight through the SDK), a floor round follows each tight
    pair, so that the ratio compares rounds run under the same conditions.
    """
    warm, cold, total, bare, floor_cpu, floor_wall = [], [], [], [], [], []
    for _ in range(rounds or ROUNDS):
        for pace_s, sink in ((0.0, warm), (PACE_S, cold)):
            plugin.on()
            plugin.flush()
            on = Round(plugin, fn, calls, pace_s)
            plugin.off()
            off = Round(plugin, fn, calls, pace_s)
            sink.append((statistics.median(on.wall) - statistics.median(off.wall)) * 1e6)
            if not pace_s:
                total.append((on.process - off.process) * 1e6)
                bare.append(statistics.median(off.wall) * 1e6)
                if floor is not None:
                    direct = Round(plugin, floor, calls)
                    floor_cpu.append(direct.process * 1e6)
                    floor_wall.append(statistics.median(direct.wall) * 1e6)
    plugin.on()
    row = {
        "without_us": round(statistics.median(bare), 2),
        "agent_wall_us": round(statistics.median(warm), 2),
        "agent_cold_us": round(statistics.median(cold), 2),
        "total_cpu_us": round(statistics.median(total), 2),
    }
    if floor is not None:
        row["floor_wall_us"] = round(statistics.median(floor_wall), 2)
        row["floor_cpu_us"] = round(statistics.median(floor_cpu), 2)
    return row


# -- cases ---------------------------------------------------------------------------


def per_call_rows(plugin: Plugin, label: str) -> list[dict]:
    hermes = drivers.Hermes()
    messages = drivers.history(10)
    rows = []
    for layers in (0, 1):
        drivers.install_layers(layers)
        hermes.start_turn(0, messages)
        for kind, fn in (("llm call", lambda i: hermes.llm_call(messages)), ("tool call", hermes.tool_call)):
            ops = blueprint(plugin, fn, plugin.emitter.drain)
            row = {"case": f"{kind}, {layers} layer(s), {label}", **measure(plugin, fn, floor=floor_fn(plugin, ops))}
            row["emitted"] = {k: sum(op[0] == k for op in ops) for k in ("span", "metric", "log")}
            row["total_vs_floor"] = round(row["total_cpu_us"] / row["floor_cpu_us"], 2)
            row["agent_vs_floor"] = round(row["agent_wall_us"] / row["floor_wall_us"], 2)
            rows.append(row)
        hermes.end_turn(messages)
    drivers.install_layers(0)
    return rows


def history_rows(plugin: Plugin, label: str = "") -> list[dict]:
    """Per-turn cost at 10, 100 and 1000 history messages; the lengths take turns within each round,
    so that drift on this machine cannot pass for growth."""
    hermes = drivers.Hermes()
    lengths = (10, 100, 1000)
    histories = {length: drivers.history(length) for length in lengths}
    runs: dict[int, list[dict]] = {length: [] for length in lengths}
    for _ in range(HISTORY_ROUNDS):
        for length in lengths:
            messages = histories[length]
            runs[length].append(measure(plugin, lambda i, messages=messages: hermes.turn(i, messages),
                                        calls=max(CALLS // 4, 20), rounds=1))
    return [{"case": f"turn (2 llm + 1 tool), {length} msgs{', ' + label if label else ''}", "history": length,
             **{key: round(statistics.median(r[key] for r in runs[length]), 2) for key in runs[length][0]}}
            for length in lengths]


def throughput(plugin: Plugin) -> dict:
    """Observer events per second into the pipeline (one hook call = one log record), records thread included."""
    manager = get_plugin_manager()
    payload = {"telemetry_schema_version": drivers.V1, "session_id": "s", "turn_id": "s:t:1", "platform": "cli",
               "model": drivers.MODEL, "tool_name": "terminal", "status": "ok", "duration_ms": 3}
    plugin.on()
    plugin.emitter.drain()
    count = CALLS * 20
    started = time.perf_counter()
    for _ in range(count):
        manager.invoke_hook("transform_terminal_output", **payload)
    hot = time.perf_counter() - started
    plugin.emitter.drain()
    elapsed = time.perf_counter() - started
    return {"events": count, "events_per_s": round(count / elapsed), "agent_thread_events_per_s": round(count / hot)}


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory(plugin: Plugin, label: str) -> dict:
    hermes = drivers.Hermes()
    messages = drivers.history(10)
    for i in range(500):  # warm-up: caches, first allocations
        hermes.turn(i, messages)
    plugin.emitter.drain()
    gc.collect()
    before = _rss_mb()
    for i in range(SOAK_TURNS):
        hermes.turn(i, messages)
        if i % 50 == 49:
            # An agent waits on its model between turns; the records thread works then. A tight loop
            # gives it no such time, so do its work here (on this thread) every 50 turns.
            plugin.emitter.drain()
    plugin.emitter.drain()
    gc.collect()
    after = _rss_mb()
    tracker = runtime.current_tracker()
    return {"case": f"{SOAK_TURNS} turns, {label}", "rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1),
            "growth_mb": round(after - before, 1), "open_turns": tracker.open_turns() if tracker else None,
            "records_dropped": plugin.emitter.dropped}


def latency(plugin: Plugin, label: str, turns: int = LATENCY_TURNS) -> dict:
    """Per-turn time as the agent sees it, with the agent idle between turns as while waiting on its model
    (15-30 ms, varied so that turns do not fall into step with the exporters' timers)."""
    hermes = drivers.Hermes()
    messages = drivers.history(10)
    samples = {"on": [], "off": []}
    thinking = random.Random(8)
    for i in range(turns):
        for side in ("on", "off"):
            getattr(plugin, side)()
            started = time.perf_counter()
            hermes.turn(i, messages)
            samples[side].append(time.perf_counter() - started)
            time.sleep(thinking.uniform(0.015, 0.03))  # the model thinks: the records thread and exporters run now
    plugin.on()

    def pct(values: list[float], q: float) -> float:
        return sorted(values)[min(int(q * len(values)), len(values) - 1)]

    return {"case": label, **{f"added_{name}_us": round((pct(samples["on"], q) - pct(samples["off"], q)) * 1e6, 1)
                              for name, q in (("p50", 0.5), ("p99", 0.99))}}


# -- misbehaving collectors --------------------------------------------------------


class Hanging:
    """Accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.conns: list[socket.socket] = []
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return


class Slow:
    """Answers every export with 200, after 5 s."""

    def __init__(self, delay_s: float = 5.0) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(delay_s)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _refused_endpoint() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def _env(endpoint: str | None = None, capture: bool = False, **extra: str) -> dict[str, str]:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT" if capture else "NO_CONTENT"}
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    env.update(extra)
    return env


def main() -> int:
    report: dict[str, Any] = {"rounds": ROUNDS, "calls": CALLS, "cpus": os.cpu_count(), "latency_turns": LATENCY_TURNS,
                              "history_rounds": HISTORY_ROUNDS}
    per_call: list[dict] = []
    with ReceiverProcess() as receiver:
        for label, env in (
            ("embedded files", _env()),
            ("embedded files, capture on", _env(capture=True)),
            ("OTLP loopback", _env(receiver.endpoint)),
        ):
            plugin = Plugin(env)
            dropped_before = dict(health.dropped)
            per_call += per_call_rows(plugin, label)
            if label == "embedded files":
                report["history"] = history_rows(plugin)
            if label == "embedded files, capture on":  # the whole history on each chat span, built off-thread
                report["history_capture"] = history_rows(plugin, "capture on")
                report["throughput"] = throughput(plugin)
                report["memory"] = [memory(plugin, "embedded files")]
            if label == "OTLP loopback":
                report["memory"].append(memory(plugin, "OTLP loopback"))
                report["latency"] = [latency(plugin, "collector healthy (OTLP loopback)")]
            plugin.close()
            report.setdefault("exporter_dropped", {})[label] = {
                signal: dropped for signal, n in health.dropped.items()
                if (dropped := n - dropped_before.get(signal, 0))}
    hanging, slow = Hanging(), Slow()
    for label, endpoint in (("collector down (refused)", _refused_endpoint()), ("collector hanging", hanging.endpoint),
                            ("collector slow (5 s)", slow.endpoint)):
        plugin = Plugin(_env(endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="5000"))
        report["latency"].append(latency(plugin, label))
        if label.startswith("collector down"):
            report["memory"].append(memory(plugin, "collector down"))
        started = time.perf_counter()
        plugin.close()
        report.setdefault("exit_s", {})[label] = round(time.perf_counter() - started, 2)
    report["per_call"] = per_call
    for rows, name in ((report["history"], "history_ratio_1000_vs_10"),
                       (report["history_capture"], "history_capture_ratio_1000_vs_10")):
        h = {row["history"]: row for row in rows}
        report[name] = {key: round(h[1000][key] / h[10][key], 2) for key in ("agent_wall_us", "total_cpu_us")
                        if h[10][key] > 0}

    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=2, default=str))
    (RESULTS / "latest.md").write_text(markdown(report))
    _print(report)
    return 0


def markdown(report: dict) -> str:
    """The README's overhead table, from a report."""
    lines = [
        "| case | agent's thread, warm | agent's thread, cold | SDK floor (same telemetry, agent's thread) "
        "| CPU in total | SDK floor (CPU) | total ÷ floor |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["per_call"]:
        lines.append(f"| {r['case']} | {r['agent_wall_us']:.0f} µs | {r['agent_cold_us']:.0f} µs | "
                     f"{r['floor_wall_us']:.0f} µs | {r['total_cpu_us']:.0f} µs | {r['floor_cpu_us']:.0f} µs | "
                     f"{r['total_vs_floor']:.2f}× |")
    for r in report["history"] + report["history_capture"]:
        lines.append(f"| {r['case']} | {r['agent_wall_us']:.0f} µs | {r['agent_cold_us']:.0f} µs | | "
                     f"{r['total_cpu_us']:.0f} µs | | |")
    lines += ["", f"| collector ({report['latency_turns']} turns each, the model idle 15-30 ms between them) "
              "| added per turn, p50 | p99 | process exit |", "|---|---|---|---|"]
    for lat in report["latency"]:
        exit_s = report["exit_s"].get(lat["case"])
        lines.append(f"| {lat['case']} | {lat['added_p50_us']:.0f} µs | {lat['added_p99_us']:.0f} µs | "
                     f"{'' if exit_s is None else f'{exit_s:.2f} s'} |")
    lines += ["", "| memory over the soak | RSS growth | records dropped |", "|---|---|---|"]
    for m in report["memory"]:
        lines.append(f"| {m['case']} | {m['growth_mb']:.1f} MB | {m['records_dropped']} |")
    t = report["throughput"]
    ratio, captured = report["history_ratio_1000_vs_10"], report["history_capture_ratio_1000_vs_10"]
    lines += ["", f"History 1000 vs 10 messages, added per turn: {ratio.get('agent_wall_us')}× on the agent's "
              f"thread, {ratio.get('total_cpu_us')}× in CPU; with capture on (each chat span carries the history, "
              f"capped), {captured.get('agent_wall_us')}× on the agent's thread, {captured.get('total_cpu_us')}× in "
              f"CPU. Throughput: {t['events_per_s']:,} observer events/s "
              f"end to end on one core ({t['agent_thread_events_per_s']:,}/s on the agent's thread)."]
    return "\n".join(lines) + "\n"


def _print(report: dict) -> None:
    cols = ("without_us", "agent_wall_us", "agent_cold_us", "total_cpu_us", "floor_wall_us", "floor_cpu_us",
            "agent_vs_floor", "total_vs_floor")
    rows = report["per_call"] + report["history"] + report["history_capture"]
    width = max(len(r["case"]) for r in rows)
    print(f"µs per call, medians of {report['rounds']} rounds × {report['calls']} calls ({report['cpus']} cpus)")
    print(f"{'case':<{width}}  " + "  ".join(f"{c.removesuffix('_us'):>12}" for c in cols))
    for r in rows:
        print(f"{r['case']:<{width}}  " + "  ".join(f"{r.get(c, ''):>12}" for c in cols))
    print(f"added per turn, 1000 vs 10 history messages: {report['history_ratio_1000_vs_10']}; capture on: "
          f"{report['history_capture_ratio_1000_vs_10']}")
    print(f"throughput: {report['throughput']}")
    for m in report["memory"]:
        print(f"memory: {m}")
    for lat in report["latency"]:
        print(f"latency: {lat}")
    print(f"exit: {report['exit_s']}")
    print(f"dropped by the exporters (healthy pipelines): {report['exporter_dropped']}")


if __name__ == "__main__":
    sys.exit(main())
