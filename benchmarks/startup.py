"""`make bench`, the start-up part: what the plugin adds to every one-shot `hermes chat -q` run.

* wall: real `hermes chat -q` runs (a tool call and an answer, against the scripted local model), the plugin
  disabled and enabled at its defaults (files only; an OTLP endpoint that answers; a dead one), in rounds of one
  run each (A B C D, A B C D, ...); what a configuration adds is the median over the rounds of its run's wall time
  minus the disabled run's of the same round (the machine's drift between rounds cancels; runs of one `hermes chat`
  vary by ±200 ms here), over BENCH_STARTUP_RUNS rounds (the budget: at most +100 ms in every configuration);
* the floor: the same rounds also run the OpenTelemetry SDK alone (benchmarks/sdk_floor: its three providers and
  exporters, as an application using the SDK builds them, emitting nothing) for files and for the OTLP endpoint: what
  any plugin built on the SDK pays at least; the plugin's own share is its run minus the floor's of the same round;
* in-process: the CPU time of importing the plugin, of `register` and of its exit, in a fresh interpreter that
  already imported what `hermes chat` imports before it loads plugins, and the modules it adds; beside it the SDK
  floor's import and `register` (files; an OTLP endpoint); the median of BENCH_STARTUP_RUNS processes each.

Writes benchmarks/results/startup.json and startup.md.
"""

from __future__ import annotations

import json
import os
import shutil
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
FLOOR_PLUGIN = Path(__file__).resolve().parent / "sdk_floor"
# Each floor case and the plugin's case it is the floor of.
FLOORS = {"SDK alone, files": "enabled, files", "SDK alone, OTLP endpoint": "enabled, OTLP endpoint"}


def one_shot_runs() -> list[dict[str, Any]]:
    from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
    from tests.harness.fault_servers import refused_endpoint
    from tests.harness.hermes import QUIET_DEFAULTS, clean_env, hermes_chat, write_home
    from tests.harness.otlp_receiver import OTLPReceiver

    def script() -> list[Reply]:
        return [Reply.tools(ToolCall("terminal", {"command": "echo hi"})), Reply.text("done")]

    with FakeLLMServer() as llm, OTLPReceiver() as receiver, tempfile.TemporaryDirectory(
            prefix="hermes-otel-bench-startup-") as tmp:
        otlp = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        cases = {
            "plugin disabled": (False, {}),
            "enabled, files": (True, {}),
            "enabled, OTLP endpoint": (True, otlp),
            "enabled, dead endpoint": (True, {"OTEL_EXPORTER_OTLP_ENDPOINT": refused_endpoint()}),
            "SDK alone, files": (False, {}),
            "SDK alone, OTLP endpoint": (False, otlp),
        }
        walls: dict[str, list[float]] = {label: [] for label in cases}
        for run in range(RUNS + 1):  # the first round warms the disk cache and is not counted
            for n, (label, (enabled, extra)) in enumerate(cases.items()):
                floor = label in FLOORS
                home = write_home(Path(tmp) / f"home-{n}-{run}", llm.base_url, enable=enabled,
                                  plugins=("sdk_floor",) if floor else ())
                if floor:
                    shutil.copytree(FLOOR_PLUGIN, home / "plugins" / "sdk_floor")
                llm.push(*script())
                env = clean_env(home, PYTHONPATH=str(TREE), **extra)
                for quiet in QUIET_DEFAULTS:  # the plugin at its defaults, as a user runs it (HTTP client spans on)
                    env.pop(quiet)
                done = hermes_chat("say hi", env=env)
                if done.returncode != 0:
                    raise SystemExit(f"{label}: hermes chat failed:\n{done.stdout}\n{done.stderr}")
                if floor and not (home / "sdk-floor.loaded").exists():
                    raise SystemExit(f"{label}: Hermes did not load the floor plugin:\n{done.stderr}")
                if run:
                    walls[label].append(done.seconds)
    base = walls["plugin disabled"]
    rows = [{"case": label, "runs": len(values), "median_s": round(statistics.median(values), 3),
             "min_s": round(min(values), 3), "max_s": round(max(values), 3), "added_ms": _added(values, base)}
            for label, values in walls.items()]
    for floor, case in FLOORS.items():
        next(row for row in rows if row["case"] == case)["over_floor_ms"] = _added(walls[case], walls[floor])
    return rows


def _added(values: list[float], base: list[float]) -> float:
    """The median over the rounds of a run's wall time minus the base run's of the same round, in ms."""
    return round(statistics.median(v - b for v, b in zip(values, base, strict=True)) * 1000, 1)


_IN_PROCESS = """
import os, sys, tempfile, time, json
os.environ["HERMES_HOME"] = tempfile.mkdtemp(prefix="hermes-otel-bench-import-")
import hermes_cli.plugins, run_agent, model_tools, cli  # what `hermes chat` imported before it loads plugins
from hermes_cli.plugins import PluginContext, PluginManifest, get_plugin_manager
ctx = PluginContext(PluginManifest(name="hermes_otel", source="bench", key="hermes_otel"), get_plugin_manager())
before = set(sys.modules)
t0 = time.process_time()
if sys.argv[1] == "floor":
    sys.path.insert(0, sys.argv[2])  # benchmarks/, for the floor's process only
    import sdk_floor as plugin
else:
    import hermes_otel.plugin as plugin
t1 = time.process_time()
plugin.register(ctx)
t2 = time.process_time()
if sys.argv[1] != "floor":
    from hermes_otel import runtime
    runtime.shutdown()
t3 = time.process_time()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "register_ms": (t2 - t1) * 1000, "exit_ms": (t3 - t2) * 1000,
                  "modules": sorted(set(sys.modules) - before)}), flush=True)
os._exit(0)  # measured; the SDK's own exit hooks (the floor's) would try the endpoint nobody listens on
"""


def _in_process(which: str, extra: dict[str, str]) -> list[dict[str, Any]]:
    """BENCH_STARTUP_RUNS fresh interpreters loading `which` (the plugin or the SDK floor)."""
    env = {**os.environ, "PYTHONPATH": str(TREE), **extra}
    command = [sys.executable, "-c", _IN_PROCESS, which, str(FLOOR_PLUGIN.parent)]
    return [json.loads(subprocess.run(command, capture_output=True, text=True, check=True, env=env,
                                      cwd=TREE).stdout.strip().splitlines()[-1])  # `-c` puts the cwd first
            for _ in range(RUNS)]


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 1)


def _start_ms(runs: list[dict[str, Any]]) -> float:
    """Import and `register`: the start-up CPU the plugin and the floor both have."""
    return round(_median(runs, "import_ms") + _median(runs, "register_ms"), 1)


def plugin_cost() -> dict[str, Any]:
    """The plugin's own start-up work in a fresh interpreter that imported what `hermes chat` imports before it
    loads plugins: CPU time (every thread) of importing it, `register` with the default configuration (files),
    and its exit; the median of BENCH_STARTUP_RUNS processes, with the modules it adds. Beside it, the SDK floor's
    import and `register` CPU, with files and with an OTLP endpoint (nothing listens: nothing is exported here)."""
    runs = _in_process("plugin", {})
    modules = runs[-1]["modules"]
    by_top: dict[str, int] = {}
    for name in modules:
        parts = name.split(".")
        top = ".".join(parts[:2]) if parts[0] in ("hermes_otel", "opentelemetry") else parts[0]
        by_top[top] = by_top.get(top, 0) + 1
    times = {key: _median(runs, key) for key in ("import_ms", "register_ms", "exit_ms")}
    against_floor = []
    for config, extra in (("files", {}), ("OTLP endpoint", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})):
        plugin = runs if config == "files" else _in_process("plugin", extra)
        floor = _in_process("floor", extra)
        against_floor.append({
            "config": config, "plugin_ms": _start_ms(plugin), "floor_ms": _start_ms(floor),
            "plugin_modules": len(plugin[-1]["modules"]), "floor_modules": len(floor[-1]["modules"])})
    return times | {
        "modules": len(modules), "grpc": any(n == "grpc" or n.startswith("grpc.") for n in modules),
        "protobuf": any(n.startswith("google.protobuf") for n in modules),
        "by_package": sorted(by_top.items(), key=lambda kv: -kv[1])[:12], "against_floor": against_floor}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Start-up: what the plugin adds to a one-shot `hermes chat -q`", "",
             f"{RUNS} rounds of one run per configuration; added: the median of each round's difference from the "
             f"disabled run; budget +{BUDGET_MS:.0f} ms.", "",
             "The floor rows run the OpenTelemetry SDK alone (benchmarks/sdk_floor) instead of the plugin; the last "
             "column is the plugin's run minus the floor's of the same round.", "",
             "| configuration | median | min–max | added (paired) | over the SDK alone (paired) |",
             "|---|---|---|---|---|"]
    for row in report["one_shot"]:
        over = f"{row['over_floor_ms']:+.0f} ms" if "over_floor_ms" in row else ""
        lines.append(f"| {row['case']} | {row['median_s']:.3f} s | {row['min_s']:.3f}–{row['max_s']:.3f} s "
                     f"| {row['added_ms']:+.0f} ms | {over} |")
    cost = report["plugin"]
    lines += ["", f"In-process CPU of the plugin's own start-up (median of {RUNS}): import {cost['import_ms']:.1f} ms, "
              f"`register` {cost['register_ms']:.1f} ms, exit {cost['exit_ms']:.1f} ms; {cost['modules']} modules "
              f"added (gRPC: {cost['grpc']}, protobuf: {cost['protobuf']}).", "",
              "Import and `register` CPU in process against the SDK alone (benchmarks/sdk_floor), median of "
              f"{RUNS}:", "", "| configuration | plugin | SDK alone | modules (plugin / SDK alone) |",
              "|---|---|---|---|"]
    lines += [f"| {row['config']} | {row['plugin_ms']:.1f} ms | {row['floor_ms']:.1f} ms | "
              f"{row['plugin_modules']} / {row['floor_modules']} |" for row in cost["against_floor"]]
    lines += ["",
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
    over = [row["case"] for row in report["one_shot"] if row["added_ms"] > BUDGET_MS and row["case"] not in FLOORS]
    if over:
        print(f"over the +{BUDGET_MS:.0f} ms budget: {', '.join(over)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
