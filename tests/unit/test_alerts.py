"""The cost-budget alerting rules (grafana/alerts): promtool checks them and runs their unit tests; their metric is
one the package emits; the compose stack's Prometheus loads them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.harness import dashboards as dq
from tests.harness.backends import binary

ALERTS = Path(__file__).resolve().parents[2] / "grafana" / "alerts"
RULES = ALERTS / "hermes-cost-budget.rules.yml"


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary("prometheus/usr/bin/promtool")), *args], capture_output=True, text=True,
                          timeout=60, cwd=ALERTS)


def test_promtool_checks_the_rules_and_runs_their_tests():
    check = promtool("check", "rules", RULES.name)
    assert check.returncode == 0 and "SUCCESS: 4 rules found" in check.stdout, check.stdout + check.stderr
    tests = promtool("test", "rules", "hermes-cost-budget.test.yml")
    assert tests.returncode == 0 and "SUCCESS" in tests.stdout, tests.stdout + tests.stderr


def test_the_rule_tests_can_fail(tmp_path):
    """With another budget, the same tests fail: they test the thresholds, not just the syntax."""
    for source in ALERTS.iterdir():
        (tmp_path / source.name).write_text(source.read_text().replace("expr: vector(100)", "expr: vector(200)"))
    run = subprocess.run([str(binary("prometheus/usr/bin/promtool")), "test", "rules", "hermes-cost-budget.test.yml"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode != 0 and "alertname: HermesCostBudget80Percent" in run.stdout + run.stderr


def test_rules_read_our_metric_and_the_budget_is_set_in_one_place():
    (group,) = yaml.safe_load(RULES.read_text())["groups"]
    rules = group["rules"]
    assert rules[0] == {"record": "hermes:cost_budget_usd:monthly", "expr": "vector(100)"}
    alerts = {r["alert"]: r for r in rules if "alert" in r}
    assert set(alerts) == {"HermesCostBudget80Percent", "HermesCostBudgetExceeded"}
    assert alerts["HermesCostBudget80Percent"]["labels"] == {"severity": "warning"}
    assert alerts["HermesCostBudgetExceeded"]["labels"] == {"severity": "critical"}
    names = set().union(*(dq.metric_names(r["expr"]) for r in rules))
    ours = {n for n in names if not n.startswith("hermes:")}
    assert ours == {"hermes_usage_cost_total"} and ours <= dq.catalog_series()


def test_the_compose_prometheus_loads_them():
    compose_dir = ALERTS.parents[1] / "collector" / "compose"
    compose = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    mounts = dict(v.split(":")[:2][::-1] for v in compose["services"]["prometheus"]["volumes"])
    assert (compose_dir / mounts["/etc/prometheus/rules"]).resolve() == ALERTS
    prom = yaml.safe_load((compose_dir / "prometheus.yml").read_text())
    assert prom["rule_files"] == ["/etc/prometheus/rules/*.rules.yml"]
