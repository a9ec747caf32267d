"""The design we chose against the one it replaced, side by side, in one run on this machine.

The replaced design (spans recorded on the agent's thread and built by the SDK later, on a builder
thread) is taken from git at BENCH_BASELINE (default: its last commit) into a temporary directory;
each side runs `run.per_call_rows` of its own tree in a subprocess of its own, the two sides
alternating, and the medians over the alternations are reported per case (µs). Needs git history
(any clone of the repository has it).

    .venv/bin/python benchmarks/compare.py        (make bench runs it after run.py)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = os.environ.get("BENCH_BASELINE", "944f1da")  # the deferred builder, before the native-span rewrite
ALTERNATIONS = int(os.environ.get("BENCH_COMPARE_ROUNDS", "3"))
KEYS = ("agent_wall_us", "agent_cold_us", "total_cpu_us", "floor_wall_us", "floor_cpu_us")
RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).parent / "results")


def side(tree: str) -> None:
    """In a subprocess: the per-call rows of the tree at `tree`, as JSON on stdout."""
    sys.path[:0] = [tree, str(Path(tree) / "benchmarks")]
    import run  # noqa: PLC0415 - the tree's own benchmark, imported from the tree under test

    if not hasattr(run, "settle"):  # an older tree: its rounds stopped the clock at the end of a flush
        from quiet import settle  # noqa: PLC0415 - ours, so that both sides are clocked to quiet

        class Settled(run.Round):
            def __init__(self, plugin, fn, calls: int, pace_s: float = 0.0) -> None:
                cpu = time.process_time()
                super().__init__(plugin, fn, calls, pace_s)
                settle()
                self.process = (time.process_time() - cpu) / calls

        run.Round = Settled
    if hasattr(run, "capture_one"):  # an older tree: its telemetry replayed through our floor, as ours is
        from floor import blueprint, floor_fn  # noqa: PLC0415

        run.capture_one = lambda plugin, fn: blueprint(
            plugin, fn, (plugin.emitter if hasattr(plugin, "emitter") else plugin.backlog).drain)
        run.floor_fn = floor_fn
    rows = []
    with run.ReceiverProcess() as receiver:
        for label, env in (("embedded files", run._env()), ("OTLP loopback", run._env(receiver.endpoint))):
            plugin = run.Plugin(env)
            rows += run.per_call_rows(plugin, label)
            plugin.close()
    print("ROWS " + json.dumps(rows))


def _baseline_tree() -> str:
    directory = tempfile.mkdtemp(prefix="hermes-otel-baseline-")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE, "hermes_otel", "benchmarks"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", directory], input=archive, check=True)
    return directory


def _run_side(tree: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.setdefault("BENCH_ROUNDS", "3")
    out = subprocess.run([sys.executable, __file__, "--side", tree], capture_output=True, text=True, env=env,
                         timeout=3600)
    line = next((x for x in out.stdout.splitlines() if x.startswith("ROWS ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(f"benchmark of {tree} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(line[5:])


def main() -> int:
    trees = {"replaced (deferred builder)": _baseline_tree(), "chosen (native SDK spans)": str(ROOT)}
    runs: dict[str, list[list[dict]]] = {name: [] for name in trees}
    for _ in range(ALTERNATIONS):
        for name, tree in trees.items():
            runs[name].append(_run_side(tree))
    cases = [row["case"] for row in runs[next(iter(trees))][0]]
    table = {name: {case: {key: round(statistics.median(r[case_i][key] for r in rows), 1) for key in KEYS}
                    for case_i, case in enumerate(cases)} for name, rows in runs.items()}
    lines = [f"µs per call, medians of {ALTERNATIONS} alternations (baseline {BASELINE}, {os.cpu_count()} cpus)", "",
             "| case | design | agent's thread, warm | cold | CPU in total | SDK floor, thread | SDK floor, CPU "
             "| total ÷ floor |", "|---|---|---|---|---|---|---|---|"]
    for case in cases:
        for name in trees:
            m = table[name][case]
            lines.append(f"| {case} | {name} | {m['agent_wall_us']:.0f} | {m['agent_cold_us']:.0f} | "
                         f"{m['total_cpu_us']:.0f} | {m['floor_wall_us']:.0f} | {m['floor_cpu_us']:.0f} | "
                         f"{m['total_cpu_us'] / m['floor_cpu_us']:.2f}× |")
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "compare.json").write_text(json.dumps({"baseline": BASELINE, "table": table}, indent=2))
    (RESULTS / "compare.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--side"]:
        side(sys.argv[2])
    else:
        sys.exit(main())
