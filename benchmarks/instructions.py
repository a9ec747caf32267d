"""Machine instructions per call, the plugin against the SDK floor: counted under valgrind, every thread included.

The timed CPU ratios of `run.py` and `compare.py` move by a third between runs on a shared machine, and
`opcodes.py` counts bytecodes, which weigh a builtin call like an addition and leave out the exporter
threads. This counts what the CPU executes. Each case runs in a child process under callgrind, every thread
counted (our records thread, the SDK's batch processors and exporters, flushed before exit), with the plugin
on, off (what Hermes runs anyway) and for the floor (`floor.py`); for the embedded files exporter and for
OTLP/HTTP to a receiver on loopback (in a process of its own, not counted). A child with no calls cancels the
start-up: one call costs (instructions with CALLS calls - instructions with none) / CALLS. Batches are
exported when full and at the flush, not on a timer, so that they fall the same way in every run. Run it
on a machine doing nothing else: under load an OTLP export can time out inside a child and be sent again,
and that is counted too. Writes results/instructions.json.

    .venv/bin/python benchmarks/instructions.py    (make bench runs it with the valgrind it unpacks in .cache;
                                                    here: $VALGRIND, else valgrind on PATH)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from receiver import ReceiverProcess

CALLS = int(os.environ.get("BENCH_INSTRUCTION_CALLS", "1000"))
KINDS = ("llm call", "tool call")
MODES = ("on", "off", "floor")
DAY_MS = "86400000"
QUEUE = str(16 * (CALLS + 400))  # more than a child's spans or records between two flushes
BUDGET = 1.0  # total CPU per call against the plain SDK emitting the same telemetry (issue 25)
VALGRIND = os.environ.get("VALGRIND") or "valgrind"
RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).parent / "results")


def child(kind: str, mode: str, calls: int, endpoint: str) -> None:
    """One measured process: the same set-up in every mode, then `calls` calls of `kind` in `mode`."""
    from floor import blueprint, floor_fn
    from run import Plugin, _env, drivers  # run sets HERMES_HOME before Hermes is imported

    # Exports only when a batch is full and at the flush, never on a timer: under valgrind a call takes ~50x
    # longer, and timed batches would fall differently in every run (the floor's as much as the plugin's).
    # Valgrind runs one thread at a time, so an exporter thread can wait a long slice while the calls fill its
    # queue; room for every item keeps each mode exporting all it made (the floor, emitting on the calling
    # thread, dropped 440-952 records behind a busy receiver with the default 2,048).
    plugin = Plugin(_env(endpoint or None, OTEL_BSP_SCHEDULE_DELAY=DAY_MS, OTEL_METRIC_EXPORT_INTERVAL=DAY_MS,
                         OTEL_BSP_MAX_QUEUE_SIZE=QUEUE))
    hermes, messages = drivers.Hermes(), drivers.history(10)
    hermes.start_turn(0, messages)
    fn = (lambda i: hermes.llm_call(messages)) if kind == "llm call" else hermes.tool_call
    floor = floor_fn(plugin, blueprint(plugin, fn, plugin.emitter.drain))
    for i in range(200):  # warm, on: the caches every mode finds filled
        fn(i)
    if mode == "off":
        plugin.off()
    target = floor if mode == "floor" else fn
    for i in range(200):
        target(i)
    plugin.emitter.drain()
    plugin.flush()
    for i in range(calls):
        target(1000 + i)
    plugin.emitter.drain()
    plugin.flush()  # what the calls handed to the exporters is exported inside the count
    from hermes_otel.exporters.health import health

    # Every way an item can be lost is counted here (our batch queues full, an export that failed without the
    # spool, the records queue full): the parent shows the sum, and a ratio bought with drops fails the run.
    print(f"dropped={sum(health.dropped.values()) + plugin.emitter.dropped}", flush=True)


def instructions(endpoint: str, kind: str, mode: str, calls: int) -> tuple[int, int]:
    """Instructions executed by a child process (all its threads), as callgrind counts them, and the items
    it dropped."""
    result = subprocess.run(
        [VALGRIND, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--child", kind, mode, str(calls), endpoint],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=False)
    found = re.search(r"Collected : (\d+)", result.stderr)
    if result.returncode != 0 or found is None:
        where = f"{endpoint or 'files'}, {kind}, {mode}, {calls} calls"
        raise RuntimeError(f"callgrind run ({where}) failed:\n{result.stderr[-2000:]}")
    dropped = re.search(r"^dropped=(\d+)$", result.stdout, re.MULTILINE)
    if dropped is None:
        raise RuntimeError(f"callgrind child ({endpoint or 'files'}, {kind}, {mode}) did not report its drops")
    return int(found.group(1)), int(dropped.group(1))


def main() -> int:
    if shutil.which(VALGRIND) is None:
        print("instructions: skipped, valgrind is not installed (Debian: apt-get install valgrind)")
        return 0
    with ReceiverProcess() as receiver:
        exporters = {"files": "", "OTLP loopback": receiver.endpoint}
        runs = [(exporter, kind, mode, calls) for exporter in exporters for kind in KINDS for mode in MODES
                for calls in (0, CALLS)]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            measured = pool.map(lambda run: instructions(exporters[run[0]], *run[1:]), runs)
            counts = dict(zip(runs, measured, strict=True))
    rows = []
    for exporter in exporters:
        for kind in KINDS:
            per_call = {mode: (counts[exporter, kind, mode, CALLS][0] - counts[exporter, kind, mode, 0][0]) / CALLS
                        for mode in MODES}
            plugin, floor = round(per_call["on"] - per_call["off"]), round(per_call["floor"])
            dropped = sum(counts[exporter, kind, mode, n][1] for mode in MODES for n in (0, CALLS))
            rows.append({"case": f"{kind}, {exporter}", "plugin": plugin, "floor": floor,
                         "ratio": round(plugin / floor, 3), "hermes_alone": round(per_call["off"]),
                         "dropped": dropped})
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "instructions.json").write_text(json.dumps({"calls": CALLS, "budget": BUDGET, "rows": rows},
                                                          indent=1))
    print(f"| case | plugin (instructions per call, all threads) | SDK floor | ratio (budget {BUDGET:.2f}×) "
          "| items dropped |")
    print("|---|---|---|---|---|")
    for row in rows:
        verdict = "met" if row["ratio"] <= BUDGET else "over"
        print(f"| {row['case']} | {row['plugin']:,} | {row['floor']:,} | {row['ratio']:.3f}× ({verdict}) "
              f"| {row['dropped']} |")
    if any(row["dropped"] for row in rows):
        where = ", ".join(f"{exporter}, {kind}, {mode}, {n} calls: {counts[exporter, kind, mode, n][1]}"
                          for exporter, kind, mode, n in runs if counts[exporter, kind, mode, n][1])
        print(f"instructions: items were dropped ({where}), so these counts are not the same telemetry",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
        sys.exit(0)
    sys.exit(main())
