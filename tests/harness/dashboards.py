"""The committed Grafana dashboards as data: their Prometheus queries and variables, made concrete."""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from docsgen import catalog

DASHBOARDS = Path(__file__).resolve().parents[2] / "grafana" / "dashboards"
SPANMETRICS_SERIES = {
    "traces_span_metrics_calls_total",
    *(f"traces_span_metrics_duration_seconds_{s}" for s in ("bucket", "sum", "count")),
}
# Grafana's built-in and our dashboard variables, as a live check evaluates them.
CONCRETE = {"$__rate_interval": "5m", "$__range": "10m", "$__interval": "1m", "$model": ".*", "$budget": "100"}


@dataclass(frozen=True)
class PromQuery:
    dashboard: str
    panel: str
    expr: str

    @property
    def spanmetrics_fed(self) -> bool:
        return "traces_span_metrics_" in self.expr


def load() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(DASHBOARDS.glob("*.json"))}


def panels(board: dict) -> list[dict]:
    out = []
    for panel in board.get("panels", []):
        out.append(panel)
        out += panel.get("panels", [])  # collapsed rows keep theirs inside
    return out


def prometheus_queries() -> list[PromQuery]:
    return [
        PromQuery(name, panel["title"], target["expr"])
        for name, board in load().items()
        for panel in panels(board)
        for target in panel.get("targets", [])
        if target.get("datasource", panel.get("datasource", {})).get("type") == "prometheus"
    ]


def traceql_queries() -> list[PromQuery]:
    """The Tempo (TraceQL) queries of every dashboard, as (dashboard, panel, query)."""
    return [
        PromQuery(name, panel["title"], target["query"])
        for name, board in load().items()
        for panel in panels(board)
        for target in panel.get("targets", [])
        if target.get("datasource", panel.get("datasource", {})).get("type") == "tempo"
    ]


def concrete(expr: str) -> str:
    for variable, value in CONCRETE.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (label names in selectors and `by (...)` removed)."""
    bare = re.sub(r"\$\w+", "", expr)  # dashboard variables
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\b(by|without)\s*\([^)]*\)", "", bare)
    bare = re.sub(r'"[^"]*"', "", bare)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?=\s*[\[{)]|\s*$)", bare))
    return {w for w in words if w not in {"le", "by", "vector", "or", "and"}}


def prometheus_names(metric: catalog.MetricDoc) -> set[str]:
    """How the OpenTelemetry Prometheus exporter (and the Collector's) names a catalog metric."""
    base = metric.name.replace(".", "_") + {"s": "_seconds", "By": "_bytes"}.get(metric.unit, "")
    if metric.instrument == "histogram":
        return {f"{base}_{s}" for s in ("bucket", "sum", "count")}
    return {base} if metric.instrument == "gauge" else {f"{base}_total"}


def catalog_series() -> set[str]:
    return set().union(*(prometheus_names(m) for m in catalog.METRICS))


def variable_queries() -> list[tuple[str, str]]:
    """(metric, label) of every `label_values(metric, label)` query variable."""
    out = []
    for board in load().values():
        for var in board.get("templating", {}).get("list", []):
            if var["type"] == "query":
                metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", var["query"]).groups()
                out.append((metric, label))
    return out


def model_variable_values(prom) -> list[str]:
    from tests.harness.backends import get_json

    values = set()
    for metric, label in variable_queries():
        query = urllib.parse.urlencode({"match[]": metric})
        values |= set(get_json(f"{prom.url}/api/v1/label/{label}/values?{query}")["data"])
    return sorted(values)
