"""A long outage through the real pipeline: `python -m tests.harness.spool_soak HOME TURNS` prints a JSON report.

Our providers, batch processors, spooling exporters and spool, built from settings as the plugin builds them,
export every turn (a root, two model calls and a tool call, four observer records, the duration and token metrics) to an
endpoint that refuses; the spool is capped at 1 MiB. A few batches "from an earlier process", eight days old,
wait in the spool at the start. Reports the resident memory and the spool's size on disk as the turns go by.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _refused() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _disk(spool: Path) -> tuple[int, int]:
    sizes = []
    for path in spool.rglob("*.jsonl"):
        try:
            sizes.append(path.stat().st_size)
        except FileNotFoundError:  # evicted or re-sent by the sender thread since the listing
            pass
    return sum(sizes), max(sizes, default=0)


def main(home: Path, turns: int) -> dict:
    from opentelemetry._logs import LogRecord as ApiLogRecord

    from hermes_otel import telemetry
    from hermes_otel.config import load_settings
    from hermes_otel.exporters.health import health
    from hermes_otel.exporters.spool import delivery

    toml = home / "plugins.toml"
    toml.write_text('[[components]]\nkind = "hermes_otel"\n[components.config]\nspool_max_mb = 1\n')
    env = {"HERMES_HOME": str(home), "HERMES_OTEL_PLUGINS_TOML": str(toml), "OTEL_EXPORTER_OTLP_ENDPOINT": _refused(),
           "OTEL_EXPORTER_OTLP_TIMEOUT": "200", "OTEL_METRIC_EXPORT_INTERVAL": "1000"}
    settings = load_settings(env).settings
    old = settings.spool_directory / "traces"
    old.mkdir(parents=True, mode=0o700)
    eight_days_ago = time.time() - 8 * 86400
    for n in range(3):  # batches an earlier process spooled a week ago
        path = old / f"{int(eight_days_ago * 1e9) + n:019d}-1-{n}-{'0' * 16}.jsonl"
        path.write_text('{"resourceSpans":[]}\n')
        os.utime(path, (eight_days_ago, eight_days_ago))

    t = telemetry.build(settings)
    tracer = t.tracer_provider.get_tracer("soak")
    logger = t.logger_provider.get_logger("soak")
    meter = t.meter_provider.get_meter("soak")
    duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    tokens = meter.create_histogram("gen_ai.client.token.usage", unit="{token}")
    samples, sizes = [], []
    started = time.monotonic()
    for turn in range(1, turns + 1):
        with tracer.start_as_current_span("invoke_agent hermes", attributes={"hermes.turn.id": f"t{turn}"}):
            for call in range(2):
                with tracer.start_as_current_span("chat fake-model", attributes={"gen_ai.request.model": "fake"}):
                    duration.record(0.01, {"gen_ai.operation.name": "chat"})
                    tokens.record(11, {"gen_ai.token.type": "input"})
                if call == 0:
                    with tracer.start_as_current_span("execute_tool terminal"):
                        pass
            for hook in ("pre_llm_call", "pre_tool_call", "post_tool_call", "on_session_end"):
                logger.emit(ApiLogRecord(event_name=f"hermes.observer.{hook}", body=None,
                                         attributes={"hermes.turn.id": f"t{turn}"}))
        if turn % 100 == 0:  # as sessions end: their telemetry is handed on
            t.tracer_provider.force_flush(10_000)
            t.logger_provider.force_flush(10_000)
            sizes.append(_disk(settings.spool_directory))
        if turn % 1000 == 0:
            samples.append({"turn": turn, "rss_mb": round(_rss_mb(), 1)})
    delivery.begin_exit()
    t.shutdown(5)
    total, largest = _disk(settings.spool_directory)
    return {
        "turns": turns, "seconds": round(time.monotonic() - started, 1), "rss": samples,
        "max_bytes": settings.spool_max_bytes, "disk_max": max(s for s, _ in sizes), "largest_file": max(
            [m for _, m in sizes] + [largest]), "disk_end": total,
        "old_left": sorted(p.name for p in old.iterdir() if p.name.startswith(f"{int(eight_days_ago * 1e9)}"[:10])),
        "spooled": dict(health.spooled), "evicted": {f"{s}/{r}": n for (s, r), n in health.evicted.items()},
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), int(sys.argv[2]))))
