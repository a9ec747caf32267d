"""Every Collector config in collector/ is wired correctly and follows the rules (structural check)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from hermes_otel import catalog
from hermes_otel.semconv import DURATION_BUCKETS
from tests.harness import collector as cc

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR = ROOT / "collector"
CONFIGS = {
    "single-node": ("single-node.yaml",),
    "single-node+tail-sampling": ("single-node.yaml", "tail-sampling.yaml"),
    "gateway agent": ("gateway/agent.yaml",),
    "gateway sampler": ("gateway/sampler.yaml",),
    "replay files": ("replay-files.yaml",),
}
# Low-cardinality dimensions the dashboards group by; never ids.
DIMENSIONS = [
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.tool.name",
    "hermes.middleware.kind", "hermes.middleware.plugin", "hermes.middleware.outcome", "error.type",
]


def _load(name: str) -> dict:
    return cc.load(*(COLLECTOR / f for f in CONFIGS[name]))


def test_every_config_file_is_covered():
    files = {p.relative_to(COLLECTOR).as_posix() for p in COLLECTOR.rglob("*.yaml") if p.parent.name != "compose"}
    assert files == {f for files in CONFIGS.values() for f in files}


@pytest.mark.parametrize("name", CONFIGS)
def test_config_is_wired(name):
    assert cc.problems(_load(name)) == []


@pytest.mark.parametrize("name", ["single-node", "single-node+tail-sampling", "gateway sampler"])
def test_spanmetrics_dimensions_and_buckets(name):
    config = _load(name)
    spanmetrics = cc.spanmetrics(config)
    dims = [d["name"] for d in spanmetrics["dimensions"]]
    assert dims == DIMENSIONS
    assert set(dims) <= set(catalog.ATTRIBUTES)  # names we emit, spelled as we emit them
    assert not [d for d in dims if cc.ID_LIKE.search(d)]
    assert [cc.duration_seconds(b) for b in spanmetrics["histogram"]["explicit"]["buckets"]] == list(DURATION_BUCKETS)
    assert spanmetrics["histogram"]["unit"] == "s" and spanmetrics["namespace"] == "traces.span.metrics"
    prometheus = config["exporters"]["prometheus"]
    assert prometheus["resource_to_telemetry_conversion"]["enabled"] is True


@pytest.mark.parametrize("name", ["single-node+tail-sampling", "gateway sampler"])
def test_tail_sampling_keeps_errors_slow_turns_and_a_share(name):
    config = _load(name)
    policies = {p["type"]: p for p in config["processors"]["tail_sampling"]["policies"]}
    assert policies["status_code"]["status_code"]["status_codes"] == ["ERROR"]
    assert policies["latency"]["latency"]["threshold_ms"] > 0
    assert 0 < policies["probabilistic"]["probabilistic"]["sampling_percentage"] < 100
    pipes = config["service"]["pipelines"]
    # Span metrics see every span: the connector sits before sampling.
    assert "spanmetrics" in pipes["traces"]["exporters"] and "tail_sampling" not in pipes["traces"]["processors"]
    assert "tail_sampling" in pipes["traces/sampled"]["processors"]


def test_gateway_routes_by_trace_id():
    lb = _load("gateway agent")["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID" and lb["resolver"]["dns"]["port"] == 4317


def test_replay_reads_the_embedded_default_files():
    from hermes_otel.exporters.file import file_paths

    receivers = _load("replay files")["receivers"]
    names = {Path(p).name for p in file_paths(Path("/x")).values()}
    globs = {r["include"][0].rsplit("/", 1)[1] for r in receivers.values()}
    assert globs == {f"{n}*" for n in names}  # the files and their rotations


def _broken(mutate) -> list[str]:
    config = copy.deepcopy(_load("single-node"))
    mutate(config)
    return cc.problems(config)


def test_the_checker_catches_mistakes():
    pipes = lambda c: c["service"]["pipelines"]  # noqa: E731
    assert "memory_limiter must come first" in " ".join(
        _broken(lambda c: pipes(c)["traces"].update(processors=["batch", "memory_limiter"])))
    assert "cannot connect a traces pipeline to a traces pipeline" in " ".join(
        _broken(lambda c: pipes(c).update(
            {"traces/copy": {"receivers": ["spanmetrics"], "processors": ["memory_limiter"], "exporters": ["debug"]}})))
    assert "'otlp/zipkin' is not declared" in " ".join(
        _broken(lambda c: pipes(c)["traces"]["exporters"].append("otlp/zipkin")))
    assert "does not support traces" in " ".join(
        _broken(lambda c: pipes(c)["traces"]["exporters"].append("prometheus")))
    assert "declared but used by no pipeline" in " ".join(_broken(lambda c: c["exporters"].update(otlphttp={})))
    dims = [d["name"] for d in cc.spanmetrics(_load("single-node"))["dimensions"]] + ["gen_ai.conversation.id"]
    assert [d for d in dims if cc.ID_LIKE.search(d)] == ["gen_ai.conversation.id"]


def test_compose_mounts_exist_and_prometheus_scrapes_the_collector():
    compose_dir = COLLECTOR / "compose"
    compose = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    assert set(compose["services"]) == {"otel-collector", "tempo", "jaeger", "prometheus", "grafana"}
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            assert (compose_dir / volume.split(":")[0]).exists(), volume
    collector = compose["services"]["otel-collector"]
    assert collector["command"] == ["--config=/etc/otelcol/single-node.yaml"]
    prom = yaml.safe_load((compose_dir / "prometheus.yml").read_text())
    targets = [t for job in prom["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    assert "otel-collector:8889" in targets  # the Collector's prometheus exporter endpoint
    assert _load("single-node")["exporters"]["prometheus"]["endpoint"].endswith(":8889")
    provisioning = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/dashboards.yaml").read_text())
    mounts = dict(v.split(":")[:2][::-1] for v in compose["services"]["grafana"]["volumes"])
    assert provisioning["providers"][0]["options"]["path"] in mounts
