"""`make bench`, the start-up part: what the plugin adds to every one-shot `hermes chat -q` run.

* wall: real `hermes chat -q` runs (a tool call and an answer, against the scripted local model), the plugin
  disabled and enabled (files only; an OTLP endpoint that answers; a dead one), run in turn A B C D A B C D ...
  so that the machine's drift falls on every configuration alike; the median of BENCH_STARTUP_RUNS runs each and
  its difference from the disabled runs (the budget: at most +100 ms in every configuration);
* import: `import hermes_otel.plugin` alone in a fresh interpreter that already imported what Hermes imports before
  it loads plugins (`hermes_cli.plugins`), as `python -X importtime` reports it: the modules it adds and their time;
  the median of BENCH_STARTUP_RUNS processes.

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

RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", "7"))
RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).parent / "results")
BUDGET_MS = 100.0


def one_shot_runs() -> list[dict[str, Any]]:
    from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
    from tests.harness.fault_servers import refused_endpoint
    from tests.harness.hermes import clean_env, hermes_chat, write_home
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
                done = hermes_chat("say hi", env=clean_env(home, **extra))
                if done.returncode != 0:
                    raise SystemExit(f"{label}: hermes chat failed:\n{done.stdout}\n{done.stderr}")
                if run:
                    walls[label].append(done.seconds)
    base = statistics.median(walls["plugin disabled"])
    return [{"case": label, "runs": len(values), "median_s": round(statistics.median(values), 3),
             "min_s": round(min(values), 3), "max_s": round(max(values), 3),
             "added_ms": round((statistics.median(values) - base) * 1000, 1)} for label, values in walls.items()]


def _imports(code: str) -> dict[str, tuple[int, int]]:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    found: dict[str, tuple[int, int]] = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, cumulative, name = line[len("import time:"):].split("|")
            found[name.strip()] = (int(own), int(cumulative))
    return found


def plugin_import() -> dict[str, Any]:
    """What `import hermes_otel.plugin` adds on top of what Hermes imported before it loads plugins."""
    rounds = []
    for _ in range(RUNS):
        before = _imports("import hermes_cli.plugins")
        after = _imports("import hermes_cli.plugins, hermes_otel.plugin")
        added = {name: times for name, times in after.items() if name not in before}
        rounds.append((sum(own for own, _ in added.values()) / 1000, added))
    rounds.sort(key=lambda r: r[0])
    ms, added = rounds[len(rounds) // 2]
    by_top: dict[str, float] = {}
    for name, (own, _) in added.items():
        parts = name.split(".")
        top = ".".join(parts[:2]) if parts[0] in ("hermes_otel", "opentelemetry") else parts[0]
        by_top[top] = by_top.get(top, 0.0) + own / 1000
    heaviest = sorted(by_top.items(), key=lambda kv: -kv[1])[:12]
    return {"modules": len(added), "ms": round(ms, 1), "heaviest": [[k, round(v, 1)] for k, v in heaviest],
            "grpc": any(n == "grpc" or n.startswith("grpc.") for n in added)}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Start-up: what the plugin adds to a one-shot `hermes chat -q`", "",
             f"{RUNS} runs per configuration, in turn; budget +{BUDGET_MS:.0f} ms.", "",
             "| configuration | median | min–max | added |", "|---|---|---|---|"]
    for row in report["one_shot"]:
        lines.append(f"| {row['case']} | {row['median_s']:.3f} s | {row['min_s']:.3f}–{row['max_s']:.3f} s "
                     f"| {row['added_ms']:+.0f} ms |")
    imp = report["import"]
    lines += ["", f"`import hermes_otel.plugin` after `hermes_cli.plugins`: {imp['modules']} modules, "
              f"{imp['ms']:.1f} ms (median of {RUNS}); gRPC imported: {imp['grpc']}.", "",
              "| heaviest | ms |", "|---|---|"]
    lines += [f"| {name} | {ms:.1f} |" for name, ms in imp["heaviest"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    report = {"runs": RUNS, "budget_ms": BUDGET_MS, "import": plugin_import(), "one_shot": one_shot_runs()}
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
