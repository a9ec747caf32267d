"""The Grafana dashboards: generated from code and committed fresh, decodable with the Grafana schema
library, unique panel ids, declared variables, PromQL that promtool parses, names from the catalog."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard

from docsgen import catalog
from grafana import dashboards as generator
from tests.harness import dashboards as dq
from tests.harness.backends import binary

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_VARIABLES = {"__rate_interval", "__range", "__interval"}


def test_committed_dashboards_are_generated_and_fresh():
    assert set(dq.load()) == set(generator.DASHBOARDS)
    for name in generator.DASHBOARDS:
        committed = (dq.DASHBOARDS / name).read_text(encoding="utf-8")
        assert committed == generator.render(name), f"{name} is stale: run `python -m grafana.dashboards`"


@pytest.mark.parametrize("name", sorted(generator.DASHBOARDS))
def test_dashboard_decodes_with_the_grafana_schema_library(name):
    board = dq.load()[name]
    decoded = Dashboard.from_json(board)
    assert decoded.uid == board["uid"] and decoded.title == board["title"]
    assert len(decoded.panels) == len(board["panels"])
    for panel in dq.panels(board):
        assert panel["type"] in ("row", "timeseries", "table"), panel["type"]


@pytest.mark.parametrize("name", sorted(generator.DASHBOARDS))
def test_panel_ids_are_unique_and_variables_declared(name):
    board = dq.load()[name]
    ids = [p["id"] for p in dq.panels(board)]
    assert len(ids) == len(set(ids))
    declared = {v["name"] for v in board["templating"]["list"]}
    used = set(re.findall(r"\$\{?(\w+)", str(board["panels"])))
    assert used - BUILTIN_VARIABLES <= declared, used - BUILTIN_VARIABLES - declared
    for panel in dq.panels(board):
        if panel["type"] != "row":
            assert panel["targets"] and panel["title"] and panel["datasource"]["uid"].startswith("${")


def test_every_promql_expression_parses(tmp_path):
    queries = dq.prometheus_queries()
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"dashboard:query_{i}", "expr": dq.concrete(q.expr)} for i, q in enumerate(queries)
    ] + [{"record": f"dashboard:variable_{i}", "expr": metric} for i, (metric, _) in enumerate(dq.variable_queries())]}]}
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump(rules))
    check = subprocess.run([str(binary("prometheus/usr/bin/promtool")), "check", "rules", str(path)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules['groups'][0]['rules'])} rules found" in check.stdout


def test_promtool_rejects_a_broken_expression(tmp_path):
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "sum(rate(x[5m])"}]}]}))
    check = subprocess.run([str(binary("prometheus/usr/bin/promtool")), "check", "rules", str(path)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode != 0


def test_metric_names_come_from_the_catalog():
    known = dq.catalog_series() | dq.SPANMETRICS_SERIES
    used = set()
    for query in dq.prometheus_queries():
        names = dq.metric_names(query.expr)
        # Every query reads a metric of ours, except the budget's reference lines.
        assert (names or "$budget" in query.expr) and names <= known, (query.panel, names - known)
        used |= names
    # Every metric we emit appears on a dashboard, except approvals (shown in traces).
    missing = {m.name for m in catalog.METRICS if not dq.prometheus_names(m) & used}
    assert missing == {"hermes.approvals"}


def test_metric_name_extraction_ignores_labels():
    expr = 'sum by (gen_ai_request_model) (rate(gen_ai_client_token_usage_sum{gen_ai_token_type="input"}[5m]))'
    assert dq.metric_names(expr) == {"gen_ai_client_token_usage_sum"}


def test_datasources_are_provisioned():
    provisioned = yaml.safe_load((ROOT / "grafana/provisioning/datasources/datasources.yaml").read_text())
    types = {d["type"]: d for d in provisioned["datasources"]}
    assert set(types) == {"prometheus", "tempo", "jaeger"}
    assert types["prometheus"]["jsonData"]["exemplarTraceIdDestinations"][0]["datasourceUid"] == types["tempo"]["uid"]
    for board in dq.load().values():
        kinds = {v["query"] for v in board["templating"]["list"] if v["type"] == "datasource"}
        assert kinds <= set(types)


def test_traceql_queries_name_documented_span_attributes():
    queries = dq.traceql_queries()
    assert {(q.dashboard, q.panel) for q in queries} >= {("hermes-ops-overview.json", "Top sessions by cost")}
    documented = {a for span in (*catalog.SPANS, *catalog.MIDDLEWARE_SPANS) for a in span.attributes}
    for query in queries:
        names = set(re.findall(r"\bspan\.([a-z_][a-z0-9_.]*[a-z0-9_])", query.expr))
        assert names and names <= documented, (query.panel, names - documented)
    (top,) = [q for q in queries if q.panel == "Top sessions by cost"]
    assert "sum_over_time(span.hermes.usage.cost) by (span.gen_ai.conversation.id)" in top.expr
    assert top.expr.endswith("| topk(10)")


def test_cost_row_and_budget_variable():
    board = dq.load()["hermes-ops-overview.json"]
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows.index("Cost") == rows.index("Models") + 1
    cost = {p["title"]: p for p in dq.panels(board) if p["type"] != "row" and "cost" in p["title"].lower() or "budget" in p["title"].lower()
            or "burn" in p["title"].lower()}
    assert set(cost) == {"Cost per day by model", "Cost per day by profile", "Burn rate",
                         "Cost per day: the provider's figure and the estimate",
                         "Month to date against budget", "Top sessions by cost"}
    assert cost["Cost per day by model"]["interval"] == cost["Cost per day by profile"]["interval"] == "1d"
    assert cost["Month to date against budget"]["timeFrom"] == "now/M"
    assert all(p["fieldConfig"]["defaults"]["unit"] == "currencyUSD" for t, p in cost.items() if t != "Top sessions by cost")
    (budget,) = [v for v in board["templating"]["list"] if v["name"] == "budget"]
    assert budget["type"] == "textbox" and budget["query"] == generator.BUDGET_DEFAULT
