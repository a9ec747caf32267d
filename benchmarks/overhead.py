"""Added time per LLM call and per tool call through real Hermes 0.19.0's runner and hook dispatch.

Alternates rounds with the plugin live and with it off (wrappers pass straight
through when no tracker is live) in one process, and reports medians of the
per-call difference. Run with `make bench`; writes benchmarks/results/latest.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HOME = Path(tempfile.mkdtemp(prefix="hermes-otel-bench-"))
os.environ["HERMES_HOME"] = str(HOME)  # before any Hermes import

from hermes_cli import middleware as hermes_middleware  # noqa: E402
from hermes_cli.plugins import PluginContext, PluginManifest, get_plugin_manager  # noqa: E402

from hermes_otel import runtime  # noqa: E402
from hermes_otel.config import load_settings  # noqa: E402
from hermes_otel.hooks import callbacks  # noqa: E402
from hermes_otel.instrumentation.hermes import HermesInstrumentor  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
CALLS = int(os.environ.get("BENCH_CALLS", "400"))
RESULTS = Path(__file__).parent / "results"


def _request(history: int) -> dict:
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"message {i} " * 20} for i in range(history)]
    return {"model": "bench-model", "messages": messages, "max_tokens": 256, "temperature": 0.1, "stream": True}


class _Response:  # the attributes Hermes's streamed response carries
    id = "chatcmpl-bench"
    model = "bench-model"
    choices = [type("C", (), {"finish_reason": "stop"})()]
    usage = {"prompt_tokens": 100, "completion_tokens": 20}


def _llm_call(request: dict, i: int) -> None:
    hermes_middleware.run_llm_execution_middleware(
        request, lambda r: _Response, original_request=request, task_id="t", turn_id="s:t:bench",
        api_request_id=f"s:t:bench:api:{i}", session_id="s", platform="cli", model="bench-model",
        provider="custom", base_url="http://127.0.0.1:1/v1", api_mode="chat_completions", api_call_count=i,
        middleware_trace=[],
    )


def _tool_call(i: int) -> None:
    call_id = f"call_{i}"
    hermes_middleware.run_tool_execution_middleware(
        "terminal", {"command": "true"}, lambda a: '{"output": ""}', original_args={"command": "true"},
        task_id="t", session_id="s", tool_call_id=call_id, turn_id="s:t:bench", api_request_id="s:t:bench:api:1",
    )
    get_plugin_manager().invoke_hook(
        "post_tool_call", tool_name="terminal", args={"command": "true"}, result="", task_id="t", session_id="s",
        tool_call_id=call_id, turn_id="s:t:bench", api_request_id="s:t:bench:api:1", duration_ms=1, status="ok",
    )


def _per_call(fn, calls: int) -> float:
    started = time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.perf_counter() - started) / calls * 1e6


def measure(name: str, fn, live_tracker) -> dict:
    """Alternate rounds: plugin live, then off (no tracker, no bridge: every wrapper and hook passes through)."""
    on, off = [], []
    live_bridge = runtime._state.bridge
    for _ in range(ROUNDS):
        runtime._state.tracker, runtime._state.bridge = live_tracker, live_bridge
        on.append(_per_call(fn, CALLS))
        live_tracker.end_turn("s:t:bench", {"completed": True})
        runtime._state.tracker, runtime._state.bridge = None, None
        off.append(_per_call(fn, CALLS))
    runtime._state.tracker, runtime._state.bridge = live_tracker, live_bridge
    added = [a - b for a, b in zip(on, off)]
    return {
        "case": name,
        "with_plugin_us": round(statistics.median(on), 2),
        "without_us": round(statistics.median(off), 2),
        "added_us": round(statistics.median(added), 2),
    }


def setup(layers: int):
    manager = get_plugin_manager()
    manager._hooks.clear()
    manager._middleware.clear()
    ctx = PluginContext(PluginManifest(name="hermes_otel", source="bench", key="hermes_otel"), manager)
    for hook, callback in callbacks().items():
        ctx.register_hook(hook, callback)
    third = PluginContext(PluginManifest(name="bench_layer", source="bench", key="bench_layer"), manager)
    for _ in range(layers):
        third.register_middleware("llm_execution", lambda **kw: kw["next_call"](kw["request"]))
        third.register_middleware("tool_execution", lambda **kw: kw["next_call"](kw["args"]))


def main() -> int:
    env = dict(os.environ)
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    tracker = runtime.configure(load_settings(env).settings)  # embedded default: files under HERMES_HOME
    HermesInstrumentor(runtime.current_tracker).instrument()
    rows = []
    for layers in (0, 1):
        setup(layers)
        for history in (10, 1000):
            request = _request(history)
            rows.append({**measure(f"llm call, {layers} layer(s), {history} msgs", lambda i: _llm_call(request, i), tracker),
                         "layers": layers, "history": history})
        rows.append({**measure(f"tool call + post_tool_call, {layers} layer(s)", _tool_call, tracker), "layers": layers})
    runtime.shutdown()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps({"rounds": ROUNDS, "calls": CALLS, "rows": rows}, indent=2))
    width = max(len(r["case"]) for r in rows)
    print(f"{'case':<{width}}  {'with':>9}  {'without':>9}  {'added':>9}   (µs per call, medians of {ROUNDS} rounds)")
    for r in rows:
        print(f"{r['case']:<{width}}  {r['with_plugin_us']:>9.1f}  {r['without_us']:>9.1f}  {r['added_us']:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
