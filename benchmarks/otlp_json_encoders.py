"""Our OTLP/JSON encoder against the OpenTelemetry project's (`opentelemetry-exporter-otlp-json-common`).

Per span, per log record and per metrics collection, on telemetry shaped like what the plugin exports (a
turn, its chat attempts and tool calls with their GenAI attributes, observer log records, our metrics),
from the encoder's input to the dict a file line is dumped from. Both encoders get the same SDK objects;
the best of several rounds is reported, so other load on the machine inflates neither side.

    .venv/bin/python benchmarks/otlp_json_encoders.py [--rounds 7] [--json out.json]

Needs the test extra (the reference encoder is not a runtime dependency).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.json.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.json.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from hermes_otel.exporters.file.otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json

RESOURCE = Resource.create({"service.name": "hermes-agent", "service.version": "0.19.0", "hermes.version": "0.19.0",
                            "hermes.otel.version": "0.1.0"})
TURNS = 25  # one batch: 25 turns of 1 turn + 2 chat + 1 tool spans, 8 log records each


def telemetry() -> tuple[list[Any], list[Any], Any]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider(resource=RESOURCE, shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=RESOURCE, shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    meter = MeterProvider(resource=RESOURCE, metric_readers=[reader], shutdown_on_exit=False).get_meter("hermes_otel")
    duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    tokens = meter.create_histogram("gen_ai.client.token.usage", unit="{token}")
    calls = meter.create_counter("hermes.tool.calls", unit="{call}")
    tracer, logger = tracer_provider.get_tracer("hermes_otel", "0.1.0"), logger_provider.get_logger("hermes_otel")
    for turn in range(TURNS):
        ids = {"hermes.turn.id": f"s{turn}:t:{turn:08x}", "gen_ai.conversation.id": f"s{turn}"}
        with tracer.start_as_current_span("invoke_agent hermes", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "hermes", "hermes.task.id": "t",
                "hermes.platform": "cli", "gen_ai.request.model": "gpt-4o", **ids}) as root:
            for attempt in (1, 2):
                with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "gpt-4o", "gen_ai.request.temperature": 0.2,
                        "gen_ai.request.max_tokens": 1024, "gen_ai.request.stream": True,
                        "gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.response.finish_reasons": ("tool_calls",),
                        "gen_ai.usage.input_tokens": 1200 + turn, "gen_ai.usage.output_tokens": 35,
                        "server.address": "api.openai.com", "server.port": 443,
                        "hermes.api_request.id": f"{ids['hermes.turn.id']}:api:{attempt}", "hermes.api.attempt": 1,
                        "hermes.api.mode": "chat_completions", "hermes.provider": "openai", **ids}) as chat:
                    chat.add_event("hermes.middleware.rewrite", {"hermes.middleware.kind": "llm_request",
                                                                 "hermes.middleware.source": "plugin",
                                                                 "hermes.middleware.changed_keys": ("temperature",)})
                duration.record(0.8, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"})
                tokens.record(1200, {"gen_ai.token.type": "input", "gen_ai.request.model": "gpt-4o"})
            with tracer.start_as_current_span("execute_tool terminal", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "terminal",
                    "gen_ai.tool.call.id": f"call_{turn}", "gen_ai.tool.type": "function", "hermes.tool.status": "ok",
                    **ids}) as tool:
                tool.set_status(Status(StatusCode.OK))
                calls.add(1, {"gen_ai.tool.name": "terminal", "hermes.tool.status": "ok"})
            for hook in ("pre_llm_call", "post_api_request", "pre_tool_call", "post_tool_call",
                         "transform_tool_result", "post_api_request", "post_llm_call", "on_session_end"):
                logger.emit(body=None, event_name=f"hermes.observer.{hook}", severity_number=SeverityNumber.INFO,
                            attributes={"hermes.observer.hook": hook,
                                        "hermes.telemetry_schema_version": "hermes.observer.v1",
                                        "hermes.session_id": f"s{turn}", "hermes.turn_id": ids["hermes.turn.id"],
                                        "hermes.duration_ms": 12.5})
            root.set_attribute("hermes.turn.completed", True)
    return list(spans.get_finished_spans()), list(logs.get_finished_logs()), reader.get_metrics_data()


def best_per_item(encode: Callable[[Any], Any], batch: Any, items: int, rounds: int) -> float:
    """Best round's µs per item, over rounds of enough calls to last ~0.2 s."""
    start = time.perf_counter()
    encode(batch)
    calls = max(1, int(0.2 / max(time.perf_counter() - start, 1e-6)))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            encode(batch)
        best = min(best, (time.perf_counter() - start) / calls)
    return best / items * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    spans, logs, metrics = telemetry()
    rows = []
    for what, batch, items, ours, official in (
        ("span", spans, len(spans), encode_spans_json, lambda b: encode_spans(b).to_dict()),
        ("log record", logs, len(logs), encode_logs_json, lambda b: encode_logs(b).to_dict()),
        ("metrics collection", metrics, 1, encode_metrics_json, lambda b: encode_metrics(b).to_dict()),
    ):
        assert ours(batch) == official(batch), f"the encoders disagree on this {what} batch"
        ours_us = best_per_item(ours, batch, items, args.rounds)
        official_us = best_per_item(official, batch, items, args.rounds)
        rows.append({"per": what, "ours_us": round(ours_us, 2), "official_us": round(official_us, 2),
                     "official_over_ours": round(official_us / ours_us, 2)})
    print(f"Python {platform.python_version()} on {platform.machine()}, best of {args.rounds} rounds, "
          f"a batch of {len(spans)} spans / {len(logs)} log records")
    print(f"{'per':<20}{'ours µs':>10}{'official µs':>14}{'official/ours':>15}")
    for row in rows:
        print(f"{row['per']:<20}{row['ours_us']:>10.2f}{row['official_us']:>14.2f}{row['official_over_ours']:>14.2f}×")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
