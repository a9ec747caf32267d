"""Python bytecodes per call, the plugin against the SDK floor: counted, not timed.

Clocks on a shared 2-core machine move by a third between runs; the bytecodes the interpreter runs for
one warm call do not. With our records thread's work run inline (so that `sys.settrace`, which follows
one thread, sees all of it), each case counts one call's bytecodes with the plugin on, with it off (what
Hermes runs anyway) and for the floor (the same telemetry straight through the SDK, `floor.py`), and
splits the plugin's excess by where it runs. The SDK's exporter threads are not counted (the floor's
are the same). Writes results/opcodes.json.

    .venv/bin/python benchmarks/opcodes.py       (make bench runs it)
"""

from __future__ import annotations

import collections
import json
import sys
from collections.abc import Callable
from typing import Any

from floor import blueprint, floor_fn
from run import RESULTS, Plugin, _env, drivers  # run sets HERMES_HOME before Hermes is imported

from hermes_otel import emitter

CALLS = 20


def _inline(self: Any, fn: Callable[..., Any], *args: Any) -> None:
    emitter._run(fn, args)


def _where(filename: str) -> str:
    for marker, name in (("hermes_otel", "hermes-otel"), ("opentelemetry", "OpenTelemetry SDK"),
                         ("hermes_cli", "Hermes"), ("/agent/", "Hermes"), ("drivers.py", "Hermes")):
        if marker in filename:
            return name  # drivers.py builds hook payloads as Hermes's call sites do
    return "other (stdlib, generated __init__)"


def count(fn: Callable[[int], Any], drain: Callable[[], Any]) -> collections.Counter:
    """Bytecodes per call of `fn`, by where they run."""
    counts: collections.Counter = collections.Counter()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counts[_where(frame.f_code.co_filename)] += 1
        return tracer

    for i in range(50):
        fn(i)
    drain()
    sys.settrace(tracer)
    try:
        for i in range(CALLS):
            fn(1000 + i)
        drain()
    finally:
        sys.settrace(None)
    return collections.Counter({k: v / CALLS for k, v in counts.items()})


def main() -> int:
    emitter.Emitter.submit = emitter.Emitter.submit_end = _inline  # type: ignore[method-assign]
    plugin = Plugin(_env())
    hermes, messages, rows = drivers.Hermes(), drivers.history(10), []
    for layers in (0, 1):
        drivers.install_layers(layers)
        hermes.start_turn(0, messages)
        for kind, fn in (("llm call", lambda i: hermes.llm_call(messages)), ("tool call", hermes.tool_call)):
            floor = floor_fn(plugin, blueprint(plugin, fn, plugin.emitter.drain))
            on = count(fn, plugin.emitter.drain)
            plugin.off()
            off = count(fn, plugin.emitter.drain)
            plugin.on()
            base = count(floor, plugin.emitter.drain)
            excess = {k: on[k] - off[k] - base[k] for k in on.keys() | off.keys() | base.keys()}
            on_total, off_total, floor_total = (sum(c.values()) for c in (on, off, base))
            plugin_total, floor_total = round(on_total - off_total), round(floor_total)
            rows.append({"case": f"{kind}, {layers} layer(s)", "plugin": plugin_total, "floor": floor_total,
                         "ratio": round(plugin_total / floor_total, 2),  # of the counts reported, as the table shows
                         "excess_by_place": {k: round(v) for k, v in sorted(excess.items()) if round(v)}})
        hermes.end_turn(messages)
    drivers.install_layers(0)
    plugin.close()
    (RESULTS / "opcodes.json").write_text(json.dumps(rows, indent=1))
    print("| case | plugin (bytecodes per call) | SDK floor | ratio | the plugin's excess, by where it runs |")
    print("|---|---|---|---|---|")
    for row in rows:
        places = ", ".join(f"{k} {v}" for k, v in row["excess_by_place"].items())
        print(f"| {row['case']} | {row['plugin']} | {row['floor']} | {row['ratio']:.2f}× | {places} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
