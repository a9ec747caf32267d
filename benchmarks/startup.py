"""`make bench`, the start-up part: what the plugin adds to every one-shot `hermes chat -q` run.

* wall: real `hermes chat -q` runs (a tool call and an answer, against the scripted local model), the plugin
  disabled and enabled at its defaults (files only; an OTLP endpoint that answers; a dead one), in rounds of one
  run each (A B C D, A B C D, ...); what a configuration adds is the median over the rounds of its run's wall time
  minus the disabled run's of the same round (the machine's drift between rounds cancels; runs of one `hermes chat`
  vary by ±200 ms here), over BENCH_STARTUP_RUNS rounds (the budget: at most +100 ms in every configuration);
* in-process: the CPU time of importing the plugin, of `register` and of its exit, in a fresh interpreter that
  already imported what `hermes chat` imports before it loads plugins, and the modules it adds; the median of
  BENCH_STARTUP_RUNS processes.

Writes benchmarks/results/startup.json and startup.md.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", "11"))
# The tree whose plugin is measured (default: this one); another checkout gives the "before" of a before/after table.
TREE = Path(os.environ.get("BENCH_STARTUP_TREE") or ROOT).resolve()
RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).parent / "results")
BUDGET_MS = 100.0


def one_shot_runs() -> list[dict[str, Any]]:
    from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
    from tests.harness.fault_servers import refused_endpoint
    from tests.harness.hermes import QUIET_DEFAULTS, clean_env, hermes_chat, write_home
    from tests.harness.otlp_receiver import OTLPReceiver

    def script() -> list[Reply]:
        return [Reply.tools(ToolCall("terminal", {"command": "echo hi"})), Reply.text("done")]

    with FakeLLMServer() as llm, OTLPReceiver() as receiver, tempfile.TemporaryDirectory(
            prefix="hermes-otel-bench-startup-") as tmp:
        cases = {
            "plugin disabled": (False, {}),
            "enabled, files": (True, {}),
            "enabled, OTLP endpoint": (True, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}),
            "enabled, dead endpoint": (True, {"OTEL_EXPORTER_OTLP_ENDPOINT": refused_endpoint()}),
        }
        walls: dict[str, list[float]] = {label: [] for label in cases}
        for run in range(RUNS + 1):  # the first round warms the disk cache and is not counted
            for n, (label, (enabled, extra)) in enumerate(cases.items()):
                home = write_home(Path(tmp) / f"home-{n}-{run}", llm.base_url, enable=enabled)
                llm.push(*script())
                env = clean_env(home, PYTHONPATH=str(TREE), **extra)
                for quiet in QUIET_DEFAULTS:  # the plugin at its defaults, as a user runs it (HTTP client spans on)
                    env.pop(quiet)
                done = hermes_chat("say hi", env=env)
                if done.returncode != 0:
                    raise SystemExit(f"{label}: hermes chat failed:\n{done.stdout}\n{done.stderr}")
                if run:
                    walls[label].append(done.seconds)
    base = walls["plugin disabled"]
    return [{"case": label, "runs": len(values), "median_s": round(statistics.median(values), 3),
             "min_s": round(min(values), 3), "max_s": round(max(values), 3),
             "added_ms": round(statistics.median(v - b for v, b in zip(values, base, strict=True)) * 1000, 1)}
            for label, values in walls.items()]


_IN_PROCESS = """
import os, sys, tempfile, time, json
os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="hermes-otel-bench-import-")
import hermes_cli.plugins, run_agent, model_tools, cli  # what `hermes chat` imported before it loads plugins
from hermes_cli.plugins import PluginContext, PluginManifest, get_plugin_manager
before = set(sys.modules)
t0 = time.process_time()
import hermes_otel.plugin
t1 = time.process_time()
hermes_otel.plugin.register(PluginContext(PluginManifest(name="hermes_otel", source="bench", key="hermes_otel"),
                                          get_plugin_manager()))
t2 = time.process_time()
from hermes_otel import runtime
runtime.shutdown()
t3 = time.process_time()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "register_ms": (t2 - t1) * 1000, "exit_ms": (t3 - t2) * 1000,
                  "modules": sorted(set(sys.modules) - before)}))
"""


def plugin_cost() -> dict[str, Any]:
    """The plugin's own start-up work in a fresh interpreter that imported what `hermes chat` imports before it
    loads plugins: CPU time (every thread) of importing it, `register` with the default configuration (files),
    and its exit; the median of BENCH_STARTUP_RUNS processes, with the modules it adds."""
    runs = []
    for _ in range(RUNS):
        done = subprocess.run([sys.executable, "-c", _IN_PROCESS], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(TREE)}, cwd=TREE)  # `-c` puts the cwd first
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    modules = runs[-1]["modules"]
    by_top: dict[str, int] = {}
    for name in modules:
        parts = name.split(".")
        top = ".".join(parts[:2]) if parts[0] in ("hermes_otel", "opentelemetry") else parts[0]
        by_top[top] = by_top.get(top, 0) + 1
    times = {key: round(statistics.median(r[key] for r in runs), 1) for key in ("import_ms", "register_ms", "exit_ms")}
    return times | {
        "modules": len(modules), "grpc": any(n == "grpc" or n.startswith("grpc.") for n in modules),
        "protobuf": any(n.startswith("google.protobuf") for n in modules),
        "by_package": sorted(by_top.items(), key=lambda kv: -kv[1])[:12]}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Start-up: what the plugin adds to a one-shot `hermes chat -q`", "",
             f"{RUNS} rounds of one run per configuration; added: the median of each round's difference from the "
             f"disabled run; budget +{BUDGET_MS:.0f} ms.", "",
             "| configuration | median | min–max | added (paired) |", "|---|---|---|---|"]
    for row in report["one_shot"]:
        lines.append(f"| {row['case']} | {row['median_s']:.3f} s | {row['min_s']:.3f}–{row['max_s']:.3f} s "
                     f"| {row['added_ms']:+.0f} ms |")
    cost = report["plugin"]
    lines += ["", f"In-process CPU of the plugin's own start-up (median of {RUNS}): import {cost['import_ms']:.1f} ms, "
              f"`register` {cost['register_ms']:.1f} ms, exit {cost['exit_ms']:.1f} ms; {cost['modules']} modules "
              f"added (gRPC: {cost['grpc']}, protobuf: {cost['protobuf']}).", "",
              "| package | modules |", "|---|---|"]
    lines += [f"| {name} | {count} |" for name, count in cost["by_package"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    # A wheel install compiles the package's bytecode; an editable one under PYTHONDONTWRITEBYTECODE never would,
    # and every run would then pay for compiling our sources, which no user pays.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(TREE / "hermes_otel")], check=True,
                   stdout=subprocess.DEVNULL)
    report = {"tree": str(TREE), "runs": RUNS, "budget_ms": BUDGET_MS, "plugin": plugin_cost(),
              "one_shot": one_shot_runs()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (RESULTS / "startup.md").write_text(text)
    print(text)
    over = [row["case"] for row in report["one_shot"] if row["added_ms"] > BUDGET_MS]
    if over:
        print(f"over the +{BUDGET_MS:.0f} ms budget: {', '.join(over)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
