"""`make bench` still runs end to end (tiny sizes; the numbers themselves are not asserted: the benchmark is the gate)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = {"BENCH_ROUNDS": "1", "BENCH_CALLS": "4", "BENCH_SOAK_TURNS": "20", "BENCH_HISTORY_ROUNDS": "1",
        "BENCH_LATENCY_TURNS": "4"}


@pytest.mark.timeout(300)
def test_the_benchmark_runs_and_reports_every_section(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    env.update(TINY, BENCH_RESULTS=str(tmp_path))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads((tmp_path / "latest.json").read_text())
    cases = [row["case"] for row in report["per_call"]]
    assert len(cases) == 12 and len(set(cases)) == 12  # llm/tool × 0/1 layer × files, capture on, OTLP
    for row in report["per_call"]:
        assert {"agent_wall_us", "agent_cold_us", "total_cpu_us", "floor_wall_us", "floor_cpu_us",
                "total_vs_floor", "agent_vs_floor"} <= row.keys()
        assert row["floor_cpu_us"] > 0 and row["floor_wall_us"] > 0
    assert [row["emitted"] for row in report["per_call"][:2]] == [
        # chat span; duration, 2 per-attempt token points, the input and output counters; post_api_request
        {"span": 1, "metric": 5, "log": 1},
        {"span": 1, "metric": 2, "log": 3},  # execute_tool; duration + calls; pre/post/transform hooks
    ]
    assert [row["history"] for row in report["history"]] == [10, 100, 1000]
    assert [row["case"] for row in report["history_capture"]] == [
        f"turn (2 llm + 1 tool), {n} msgs, capture on" for n in (10, 100, 1000)]
    assert [m["records_dropped"] for m in report["memory"]] == [0, 0, 0]
    assert [lat["case"] for lat in report["latency"]] == [
        "collector healthy (OTLP loopback)", "collector down (refused)", "collector hanging", "collector slow (5 s)"]
    assert set(report["exit_s"]) == {"collector down (refused)", "collector hanging", "collector slow (5 s)"}
    assert report["throughput"]["events"] > 0
    table = (tmp_path / "latest.md").read_text()
    assert table.count("\n| llm call") == 6 and "| collector down (refused) |" in table


@pytest.mark.timeout(300)
def test_the_spool_benchmark_reports_exit_time_per_fault_and_throughput(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    env.update(BENCH_SPOOL_RUNS="1", BENCH_SPOOL_BATCHES="3", BENCH_SPOOL_BATCH_SPANS="16", BENCH_RESULTS=str(tmp_path))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "spool.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads((tmp_path / "spool.json").read_text())
    assert [row["case"] for row in report["exit"]] == [
        "no plugin", "collector healthy", "collector down (refused)", "collector hanging",
        "collector unanswered (a firewall drops the connection)", "collector slow (5 s)", "collector failing (HTTP 500)"]
    assert report["exit"][0]["ours"] == [] and all(len(row["ours"]) == 1 for row in report["exit"][1:])
    throughput = report["throughput"]
    for key in ("write", "replay_unpaced", "replay_background"):
        assert throughput[key]["batches_per_s"] > 0 and throughput[key]["spans_per_s"] > 0
    assert "| collector hanging |" in (tmp_path / "spool.md").read_text()


@pytest.mark.timeout(300)
def test_the_startup_benchmark_reports_every_configuration_against_the_disabled_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    env.update(BENCH_STARTUP_RUNS="1", BENCH_RESULTS=str(tmp_path))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "startup.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads((tmp_path / "startup.json").read_text())
    rows = {row["case"]: row for row in report["one_shot"]}
    assert list(rows) == ["plugin disabled", "enabled, files", "enabled, OTLP endpoint", "enabled, dead endpoint",
                          "SDK alone, files", "SDK alone, OTLP endpoint"]
    assert all(row["runs"] == 1 and row["median_s"] > 0 for row in rows.values())
    assert rows["plugin disabled"]["added_ms"] == 0
    # The plugin's share over the SDK alone: its run minus the floor's run of the same round (the bench exits when
    # Hermes did not load the floor plugin).
    for case, floor in (("enabled, files", "SDK alone, files"), ("enabled, OTLP endpoint", "SDK alone, OTLP endpoint")):
        wall_ms = rows[case]["median_s"] * 1000 - rows[floor]["median_s"] * 1000
        assert abs(rows[case]["over_floor_ms"] - wall_ms) <= 1
    assert [case for case, row in rows.items() if "over_floor_ms" in row] == ["enabled, files", "enabled, OTLP endpoint"]
    plugin = report["plugin"]
    assert plugin["import_ms"] > 0 and plugin["modules"] > 0 and not plugin["grpc"] and not plugin["protobuf"]
    floor = {row["config"]: row for row in plugin["against_floor"]}
    assert list(floor) == ["files", "OTLP endpoint"]
    assert floor["files"]["plugin_modules"] == plugin["modules"]
    # The floor is the SDK's pipeline alone: it loads part of what the plugin loads (protobuf only for OTLP).
    assert 0 < floor["files"]["floor_modules"] < floor["OTLP endpoint"]["floor_modules"]
    assert all(0 < row["floor_modules"] < row["plugin_modules"] and row["floor_ms"] > 0 for row in floor.values())
    assert "| enabled, dead endpoint |" in (tmp_path / "startup.md").read_text()
    assert "| SDK alone, OTLP endpoint |" in (tmp_path / "startup.md").read_text()


@pytest.mark.timeout(120)
def test_the_bytecode_count_reports_every_case_against_the_floor(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    env.update(BENCH_RESULTS=str(tmp_path))
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "opcodes.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = json.loads((tmp_path / "opcodes.json").read_text())
    assert [row["case"] for row in rows] == [
        "llm call, 0 layer(s)", "tool call, 0 layer(s)", "llm call, 1 layer(s)", "tool call, 1 layer(s)"]
    for row in rows:
        assert row["floor"] > 1000 and row["plugin"] > row["floor"] / 2  # both sides did the call's telemetry
        assert row["ratio"] == round(row["plugin"] / row["floor"], 2)
        assert {"hermes-otel", "OpenTelemetry SDK", "Hermes"} <= row["excess_by_place"].keys()
    assert "| llm call, 0 layer(s) |" in done.stdout


@pytest.mark.timeout(120)
def test_the_instruction_count_measures_every_mode_and_says_when_valgrind_is_missing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    script = str(ROOT / "benchmarks" / "instructions.py")
    for kind in ("llm call", "tool call"):
        for mode in ("on", "off", "floor"):  # what each callgrind child runs, without callgrind
            done = subprocess.run([sys.executable, script, "--child", kind, mode, "3"], env=env, cwd=ROOT,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, f"{kind}/{mode}: " + done.stderr[-4000:]
            assert done.stdout.splitlines()[-1] == "dropped=0", f"{kind}/{mode}: " + done.stdout[-2000:]
    (tmp_path / "bin").mkdir()
    env.pop("VALGRIND", None)
    env.update(PATH=str(tmp_path / "bin"), BENCH_RESULTS=str(tmp_path))
    done = subprocess.run([sys.executable, script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("instructions: skipped, valgrind is not installed")
    assert not (tmp_path / "instructions.json").exists()


_FLOOR_CHECK = """
import json, sys
from floor import blueprint, captured, floor_fn
from run import Plugin, _env, drivers

plugin = Plugin(_env())
hermes, messages = drivers.Hermes(), drivers.history(10)
hermes.start_turn(0, messages)

CALL_IDS = {"gen_ai.tool.call.id", "hermes.tool_call_id", "hermes.api_request.id", "hermes.api_request_id",
            "hermes.api_call_count"}

def attrs(attributes):  # each call has ids of its own
    return {k: v for k, v in attributes.items() if k not in CALL_IDS}

def seen(fn):
    spans, records = captured(plugin, fn, plugin.emitter.drain)
    return ([(s.name, s.kind.name, attrs(s.attributes), [(e.name, attrs(e.attributes)) for e in s.events],
              s.status.status_code.name, s.parent is not None) for s in spans],
            [(r.event_name, str(r.severity_number), r.severity_text, attrs(r.attributes), r.body, bool(r.span_id))
             for r in records])

for fn in (lambda i: hermes.llm_call(messages), hermes.tool_call):
    fn(0)
    floor = floor_fn(plugin, blueprint(plugin, fn, plugin.emitter.drain))
    print(json.dumps([seen(fn), seen(floor)], default=str))
"""


@pytest.mark.timeout(120)
def test_the_floor_hands_the_sdk_what_the_plugin_does() -> None:
    """The ratios are only fair if the floor's telemetry is the plugin's: spans, events, statuses, parents,
    log records with their severity, attributes and span (ids aside: each call has its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    done = subprocess.run([sys.executable, "-c", _FLOOR_CHECK], env=env, cwd=ROOT / "benchmarks",
                          capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-4000:]
    cases = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(cases) == 2
    for plugin, floor in cases:
        assert plugin[0] and plugin[1]  # a span and its records: something to compare
        assert plugin == floor
