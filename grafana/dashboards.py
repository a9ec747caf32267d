"""The Grafana dashboards, as code: `python -m grafana.dashboards` writes grafana/dashboards/*.json.

Built with grafana-foundation-sdk (a dev/test dependency, never a runtime one). Every
query is declared once in PANELS-like tables below, so tests can check each one:
PromQL parses (promtool), metric names exist in docsgen.catalog, and a real
Prometheus fed by a real Hermes run answers every query our own metrics feed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import table as gtable
from grafana_foundation_sdk.builders import tempo as gt
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as gm
from grafana_foundation_sdk.models import tempo as gtm

OUT = Path(__file__).resolve().parent / "dashboards"
PROM = gm.DataSourceRef(type_val="prometheus", uid="${datasource}")
TEMPO = gm.DataSourceRef(type_val="tempo", uid="${tempo}")
RATE = "$__rate_interval"
BUDGET_DEFAULT = "100"  # USD a month, the `budget` variable's default


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    exemplar: bool = False


@dataclass(frozen=True)
class PromPanel:
    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"  # or "table"
    interval: str = ""  # the smallest step (e.g. "1d" for per-day bars)
    time_from: str = ""  # the panel's own time range (e.g. "now/M": this month so far)


@dataclass(frozen=True)
class TracePanel:
    title: str
    description: str
    traceql: str
    metrics: bool = False  # a TraceQL metrics query (one value per series over the time range)


def _quantile(q: float, metric: str, by: str, selector: str = "") -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{selector}[{RATE}])))"


def _latency_panel(q: float) -> PromPanel:
    label = f"p{round(q * 100)}"
    model = '{gen_ai_request_model=~"$model"}'
    return PromPanel(
        f"Latency {label} per operation",
        f"{label} of turns (invoke_agent), provider calls (chat, per model) and tool calls (execute_tool).",
        "s",
        (
            Query(_quantile(q, "gen_ai_invoke_agent_duration_seconds", "gen_ai_operation_name"),
                  "{{gen_ai_operation_name}}"),
            Query(_quantile(q, "gen_ai_client_inference_duration_seconds",
                            "gen_ai_operation_name, gen_ai_request_model", model),
                  "{{gen_ai_operation_name}} {{gen_ai_request_model}}"),
            Query(_quantile(q, "gen_ai_execute_tool_duration_seconds", "gen_ai_operation_name"),
                  "{{gen_ai_operation_name}}"),
        ),
    )


def _ratio(metric: str) -> str:
    errors = f'sum(rate({metric}_count{{error_type!=""}}[{RATE}]))'
    return f"({errors} or vector(0)) / sum(rate({metric}_count[{RATE}]))"


COST = "hermes_usage_cost_total"
_MONTH_ELAPSED = "(((day_of_month() - 1) * 86400 + time() % 86400) / (days_in_month() * 86400))"

COST_PANELS: tuple[PromPanel, ...] = (
    PromPanel("Cost per day by model", "USD per day (the provider's figure, else Hermes's estimate), by "
              "the model Hermes priced.", "currencyUSD",
              (Query(f'sum by (gen_ai_request_model) (increase({COST}{{gen_ai_request_model=~"$model"}}[1d]))',
                     "{{gen_ai_request_model}}"),), interval="1d"),
    PromPanel("Cost per day: the provider's figure and the estimate", "USD per day that providers reported in their "
              "responses (hermes.usage.cost_source `provider`, e.g. OpenRouter's usage.cost) and that Hermes's pricing "
              "estimated (its price sources).", "currencyUSD",
              (Query(f"sum by (hermes_usage_cost_source) (increase({COST}[1d]))", "{{hermes_usage_cost_source}}"),),
              interval="1d"),
    PromPanel("Cost per day by profile", "Estimated USD per day by Hermes profile.", "currencyUSD",
              (Query(f"sum by (hermes_profile) (increase({COST}[1d]))", "{{hermes_profile}}"),), interval="1d"),
    PromPanel("Burn rate", "Estimated USD per hour, against the hourly pace that spends the monthly $budget "
              "evenly.", "currencyUSD",
              (Query(f"sum(rate({COST}[{RATE}])) * 3600", "USD/hour"),
               Query("$budget / (days_in_month() * 24)", "budget pace (USD/hour)"))),
    PromPanel("Month to date against budget", "This calendar month so far, the month's projection at this pace, "
              "and the monthly $budget (USD).", "currencyUSD",
              (Query(f"sum(increase({COST}[$__range]))", "month to date", instant=True),
               Query(f"sum(increase({COST}[$__range])) / {_MONTH_ELAPSED}", "projected month", instant=True),
               Query("vector($budget)", "budget", instant=True)),
              kind="table", time_from="now/M"),
)

OVERVIEW_TRACES: dict[str, tuple[TracePanel, ...]] = {
    "Cost": (
        TracePanel("Top sessions by cost", "The 10 sessions whose provider attempts cost most in the time range "
                   "(Tempo TraceQL metrics over chat spans; a subagent's session is its own row). "
                   "`hermes-otel cost --by session` gives the same from the local files.",
                   '{ span.gen_ai.operation.name = "chat" && span.hermes.usage.cost > 0 } '
                   "| sum_over_time(span.hermes.usage.cost) by (span.gen_ai.conversation.id) | topk(10)",
                   metrics=True),
    ),
}

OVERVIEW: dict[str, tuple[PromPanel, ...]] = {
    "Agent": (
        PromPanel("Turns per second", "Agent turns (invoke_agent) finishing per second.", "reqps",
                  (Query(f"sum(rate(gen_ai_invoke_agent_duration_seconds_count[{RATE}]))", "turns/s"),)),
        PromPanel("Error ratio", "Share of provider attempts and tool calls that failed (error.type set).",
                  "percentunit",
                  (Query(_ratio("gen_ai_client_inference_duration_seconds"), "chat"),
                   Query(_ratio("gen_ai_execute_tool_duration_seconds"), "execute_tool"))),
        _latency_panel(0.5),
        _latency_panel(0.95),
        _latency_panel(0.99),
        PromPanel("Calls per turn p95", "p95 of the provider attempts (failed ones included) and tool calls each "
                  "agent turn made (gen_ai.invoke_agent.inference_calls / .tool_calls).", "short",
                  (Query(f"histogram_quantile(0.95, sum by (le) (rate(gen_ai_invoke_agent_inference_calls_bucket"
                         f"[{RATE}])))", "inference calls"),
                   Query(f"histogram_quantile(0.95, sum by (le) (rate(gen_ai_invoke_agent_tool_calls_bucket"
                         f"[{RATE}])))", "tool calls"))),
    ),
    "Models": (
        PromPanel("Tokens by model", "Tokens per second from provider usage, by request model: input (cached ones "
                  "included) and of it what was read from and written to the provider's cache, output and of it "
                  "reasoning (the gen_ai.client.inference.usage counters).", "short",
                  tuple(Query(f"sum by (gen_ai_request_model) (rate(gen_ai_client_inference_usage_{kind}_total"
                              f'{{gen_ai_request_model=~"$model"}}[{RATE}]))', f"{{{{gen_ai_request_model}}}} {label}")
                        for kind, label in (("input_tokens", "input"), ("cache_read_input_tokens", "cache read"),
                                            ("cache_write_input_tokens", "cache write"),
                                            ("output_tokens", "output"),
                                            ("reasoning_output_tokens", "reasoning")))),
        PromPanel("Tokens per provider call p95", "p95 of the input and output tokens of one provider attempt, by "
                  "model (gen_ai.client.inference.operation.input_tokens / .output_tokens).", "short",
                  tuple(Query(_quantile(0.95, f"gen_ai_client_inference_operation_{kind}_tokens",
                                        "gen_ai_request_model", '{gen_ai_request_model=~"$model"}'),
                              f"{kind} {{{{gen_ai_request_model}}}}") for kind in ("input", "output"))),
        PromPanel("Provider calls by model", "Provider attempts per second, by provider and model, failed ones "
                  "by error.type.", "reqps",
                  (Query("sum by (gen_ai_provider_name, gen_ai_request_model, error_type) "
                         f'(rate(gen_ai_client_inference_duration_seconds_count{{gen_ai_request_model=~"$model"}}[{RATE}]))',
                         "{{gen_ai_provider_name}} {{gen_ai_request_model}} {{error_type}}"),)),
        PromPanel("Provider errors by reason", "Failed provider attempts (api_request_error) by Hermes's reason "
                  "and HTTP status.", "short",
                  (Query("sum by (hermes_api_error_reason, http_response_status_code) "
                         f"(increase(hermes_api_errors_total[{RATE}]))",
                         "{{hermes_api_error_reason}} {{http_response_status_code}}"),)),
        PromPanel("Streaming p95: first chunk and per chunk", "Streamed replies only (Hermes streams by default): "
                  "p95 of the time from the request to its first chunk, and between later chunks, by model.", "s",
                  (Query(_quantile(0.95, "gen_ai_client_inference_time_to_first_chunk_seconds", "gen_ai_request_model",
                                   '{gen_ai_request_model=~"$model"}'), "first chunk {{gen_ai_request_model}}"),
                   Query(_quantile(0.95, "gen_ai_client_inference_time_per_output_chunk_seconds",
                                   "gen_ai_request_model", '{gen_ai_request_model=~"$model"}'),
                         "per chunk {{gen_ai_request_model}}"))),
    ),
    "Cost": COST_PANELS,
    "Tools": (
        PromPanel("Tool error ranking", "Tools whose calls failed, were blocked or cancelled, most first (time range).",
                  "short",
                  (Query("topk(10, sum by (gen_ai_tool_name, hermes_tool_status) "
                         '(increase(hermes_tool_calls_total{hermes_tool_status!="ok"}[$__range])))',
                         instant=True),),
                  kind="table"),
        PromPanel("Tool latency p95 by tool", "p95 of execute_tool by tool name.", "s",
                  (Query(_quantile(0.95, "gen_ai_execute_tool_duration_seconds", "gen_ai_tool_name"),
                         "{{gen_ai_tool_name}}"),)),
    ),
    "Middleware": (
        PromPanel("Middleware layer latency p95", "p95 time inside each execution-middleware layer (downstream "
                  "included), by kind and plugin.", "s",
                  (Query(_quantile(0.95, "hermes_middleware_duration_seconds",
                                   "hermes_middleware_kind, hermes_middleware_plugin"),
                         "{{hermes_middleware_kind}} {{hermes_middleware_plugin}}"),)),
        PromPanel("Fail-open counts", "Middleware that raised and was skipped: execution layers "
                  "(outcome fail_open) and request callbacks (failures).", "short",
                  (Query("sum by (hermes_middleware_kind, hermes_middleware_plugin) "
                         '(increase(hermes_middleware_duration_seconds_count{hermes_middleware_outcome="fail_open"}'
                         f"[{RATE}]))", "layer {{hermes_middleware_kind}} {{hermes_middleware_plugin}}"),
                   Query("sum by (hermes_middleware_kind, hermes_middleware_plugin) "
                         f"(increase(hermes_middleware_failures_total[{RATE}]))",
                         "request {{hermes_middleware_kind}} {{hermes_middleware_plugin}}"))),
        PromPanel("Rewrites by source", "Request-middleware payload replacements per second, by kind and source.",
                  "ops",
                  (Query("sum by (hermes_middleware_kind, hermes_middleware_source) "
                         f"(rate(hermes_middleware_rewrites_total[{RATE}]))",
                         "{{hermes_middleware_kind}} {{hermes_middleware_source}}"),)),
    ),
    "Pipeline health": (
        PromPanel("Exporter drops", "Telemetry items hermes-otel's exporters dropped, by signal (0 when healthy).",
                  "short",
                  (Query(f"sum by (hermes_otel_signal) (increase(hermes_otel_exporter_dropped_total[{RATE}]))",
                         "{{hermes_otel_signal}}"),)),
        PromPanel("Spool backlog", "Undelivered telemetry waiting in the spool to be re-sent, by signal (0 when "
                  "the collector keeps up).", "bytes",
                  (Query("sum by (hermes_otel_signal) (hermes_otel_spool_size_bytes)", "{{hermes_otel_signal}}"),)),
        PromPanel("Spool batches", "Batches written to the spool, re-sent from it (acknowledged), and evicted from "
                  "it unsent (over its size or age cap, or rejected), by signal.", "short",
                  (Query(f"sum by (hermes_otel_signal) (increase(hermes_otel_spool_spooled_total[{RATE}]))",
                         "spooled {{hermes_otel_signal}}"),
                   Query(f"sum by (hermes_otel_signal) (increase(hermes_otel_spool_replayed_total[{RATE}]))",
                         "re-sent {{hermes_otel_signal}}"),
                   Query("sum by (hermes_otel_signal, hermes_otel_spool_reason) "
                         f"(increase(hermes_otel_spool_evicted_total[{RATE}]))",
                         "evicted {{hermes_otel_signal}} ({{hermes_otel_spool_reason}})"))),
    ),
    "Span metrics (Collector spanmetrics connector)": (
        PromPanel("Span calls per operation", "Spans per second by gen_ai.operation.name and status, from the "
                  "Collector's spanmetrics connector.", "ops",
                  (Query("sum by (gen_ai_operation_name, status_code) "
                         f"(rate(traces_span_metrics_calls_total[{RATE}]))",
                         "{{gen_ai_operation_name}} {{status_code}}"),)),
        PromPanel("Middleware span latency p95 (exemplars)", "p95 of middleware layer spans by plugin and outcome; "
                  "exemplars link to the traces.", "s",
                  (Query(_quantile(0.95, "traces_span_metrics_duration_seconds",
                                   "hermes_middleware_plugin, hermes_middleware_outcome",
                                   '{hermes_middleware_kind!=""}'),
                         "{{hermes_middleware_plugin}} {{hermes_middleware_outcome}}", exemplar=True),)),
    ),
}

DRILLDOWN_METRICS: tuple[PromPanel, ...] = (
    PromPanel("Operation latency p95 from spans (exemplars)", "Click an exemplar to open the trace in Tempo.", "s",
              (Query(_quantile(0.95, "traces_span_metrics_duration_seconds", "gen_ai_operation_name",
                               '{gen_ai_operation_name!=""}'),
                     "{{gen_ai_operation_name}}", exemplar=True),)),
    PromPanel("Chat latency p95 by model", "From hermes-otel's own gen_ai.client.inference.duration.", "s",
              (Query(_quantile(0.95, "gen_ai_client_inference_duration_seconds", "gen_ai_request_model",
                               '{gen_ai_request_model=~"$model"}'), "{{gen_ai_request_model}}"),)),
)

DRILLDOWN_TRACES: tuple[TracePanel, ...] = (
    TracePanel("Slow turns", "Turns slower than 10 s.",
               '{ span.gen_ai.operation.name = "invoke_agent" && duration > 10s }'),
    TracePanel("Failed provider and tool calls", "chat and execute_tool spans with status error.",
               '{ span.gen_ai.operation.name =~ "chat|execute_tool" && status = error }'),
    TracePanel("Fail-open middleware", "Middleware layers that raised and were skipped.",
               '{ span.hermes.middleware.outcome = "fail_open" }'),
    TracePanel("Turns of one conversation", "Every turn of the session in $conversation (gen_ai.conversation.id).",
               '{ span.gen_ai.conversation.id = "$conversation" && span.gen_ai.operation.name = "invoke_agent" }'),
)


def _ids():
    n = 0
    while True:
        n += 1
        yield n


def _prom_panel(panel: PromPanel, pid: int, width: int):
    builder = gtable.Panel() if panel.kind == "table" else gts.Panel()
    builder = builder.id(pid).title(panel.title).description(panel.description).unit(panel.unit)
    builder = builder.datasource(PROM).height(8).span(width)
    if panel.interval:
        builder = builder.interval(panel.interval)
    if panel.time_from:
        builder = builder.time_from(panel.time_from)
    for ref, query in zip("ABCDEFGH", panel.queries, strict=False):
        target = gp.Dataquery().ref_id(ref).expr(query.expr).datasource(PROM)
        target = target.instant() if query.instant else target.range()
        if query.legend:
            target = target.legend_format(query.legend)
        if query.exemplar:
            target = target.exemplar(True)
        builder = builder.with_target(target)
    return builder


def _variables(board, tempo: bool, budget: bool = False):
    board = board.with_variable(
        gd.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
    ).with_variable(
        gd.QueryVariable("model").label("Request model").datasource(PROM)
        .query("label_values(gen_ai_client_inference_duration_seconds_count, gen_ai_request_model)")
        .include_all(True).all_value(".*").multi(True)
    )
    if tempo:
        board = board.with_variable(gd.DatasourceVariable("tempo").label("Tempo").type("tempo"))
    if tempo and not budget:
        board = board.with_variable(gd.TextBoxVariable("conversation").label("Conversation id"))
    if budget:
        board = board.with_variable(gd.TextBoxVariable("budget").label("Monthly budget (USD)")
                                    .default_value(BUDGET_DEFAULT))
    return board


def _trace_panel(panel: TracePanel, pid: int, width: int):
    target = gt.TempoQuery().ref_id("A").query_type("traceql").query(panel.traceql).datasource(TEMPO)
    target = target.metrics_query_type(gtm.MetricsQueryType.INSTANT) if panel.metrics else target.limit(20)
    return (gtable.Panel().id(pid).title(panel.title).description(panel.description).datasource(TEMPO)
            .height(8).span(width).with_target(target))


def overview() -> dict:
    board = gd.Dashboard("Hermes / Ops overview").uid("hermes-ops-overview").tags(["hermes", "genai", "otel"])
    board = _variables(board.refresh("30s").time("now-6h", "now"), tempo=True, budget=True)
    ids = _ids()
    for row, panels in OVERVIEW.items():
        board = board.with_row(gd.Row(row).id(next(ids)))
        traces = OVERVIEW_TRACES.get(row, ())
        width = 24 // min(len(panels) + len(traces), 3)
        for panel in panels:
            board = board.with_panel(_prom_panel(panel, next(ids), width))
        for panel in traces:
            board = board.with_panel(_trace_panel(panel, next(ids), width))
    return _json(board)


def drilldown() -> dict:
    board = gd.Dashboard("Hermes / Trace drill-down").uid("hermes-trace-drilldown").tags(["hermes", "genai", "otel"])
    board = _variables(board.time("now-1h", "now"), tempo=True)
    ids = _ids()
    board = board.with_row(gd.Row("Latency with exemplars").id(next(ids)))
    for panel in DRILLDOWN_METRICS:
        board = board.with_panel(_prom_panel(panel, next(ids), 12))
    board = board.with_row(gd.Row("Traces (Tempo, TraceQL)").id(next(ids)))
    for panel in DRILLDOWN_TRACES:
        board = board.with_panel(_trace_panel(panel, next(ids), 12))
    return _json(board)


def _json(board) -> dict:
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


DASHBOARDS = {"hermes-ops-overview.json": overview, "hermes-trace-drilldown.json": drilldown}


def render(name: str) -> str:
    return json.dumps(DASHBOARDS[name](), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    for name in DASHBOARDS:
        (out / name).write_text(render(name), encoding="utf-8")
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
