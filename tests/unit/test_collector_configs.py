"""Every Collector config in collector/ runs on our Collector distribution, and follows our rules.

`otelcol-hermes validate` (the real Collector, built by `make backends`) checks each file and
each combination of files the docs show; the rest of this module checks what the Collector
cannot know: span-metric dimensions spelled as we emit them and never ids, the semantic-
convention buckets, the sampling policies, the files the replay reads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from docsgen import catalog
from hermes_otel.semconv import DURATION_BUCKETS
from tests.harness import collector as cc
from tests.harness import otelcol

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR = ROOT / "collector"
CONFIGS = {
    "single-node": ("single-node.yaml",),
    "single-node+tail-sampling": ("single-node.yaml", "tail-sampling.yaml"),
    "gateway agent": ("gateway/agent.yaml",),
    "gateway agent (static)": ("gateway/agent.yaml", "gateway/agent-static.yaml"),
    "gateway sampler": ("gateway/sampler.yaml",),
    "replay files": ("replay-files.yaml",),
}
# What the configs read without a default (the docs show each with its variables).
VALIDATE_ENV = {"SAMPLERS": "[127.0.0.1:4417, 127.0.0.1:4517]", "HERMES_OTEL_DIR": "/tmp/hermes-otel-validate"}
# Low-cardinality dimensions the dashboards group by; never ids.
DIMENSIONS = [
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.tool.name",
    "hermes.middleware.kind", "hermes.middleware.plugin", "hermes.middleware.outcome", "error.type",
]
_COMMAND = re.compile(r"otelcol-hermes(?: validate)?((?:\s+--config[ =]\S+)+)")


def _load(name: str) -> dict:
    return cc.load(*(COLLECTOR / f for f in CONFIGS[name]))


def _shipped() -> set[str]:
    return {p.relative_to(COLLECTOR).as_posix() for p in COLLECTOR.rglob("*.yaml")
            if p.parent.name != "compose" and "distribution" not in p.parts}


def documented_combinations() -> set[tuple[str, ...]]:
    """Every `otelcol-hermes --config A [--config B]` shown in the README, docs/ and the configs' own comments."""
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(COLLECTOR.rglob("*.yaml"))]
    found = set()
    for source in sources:
        for match in _COMMAND.finditer(source.read_text(encoding="utf-8")):
            files = re.findall(r"--config[ =](\S+)", match.group(1))
            found.add(tuple(f.rstrip(".,;:").strip("`'\"").removeprefix("collector/") for f in files))
    return found


def test_every_config_file_is_covered():
    assert _shipped() == {f for files in CONFIGS.values() for f in files}
    assert set(documented_combinations()) == set(CONFIGS.values())  # the docs show each, and nothing else


@pytest.mark.parametrize("name", CONFIGS)
def test_the_collector_accepts_the_config(name, request):
    otelcol.go_binary(otelcol.OTELCOL, request)
    result = otelcol.validate(*CONFIGS[name], env=VALIDATE_ENV)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("path", sorted(_shipped()))
def test_a_misspelt_key_in_any_file_fails_validation(path, request, tmp_path):
    """The validation above is not vacuous: one misspelt key in a component of any file is refused."""
    otelcol.go_binary(otelcol.OTELCOL, request)
    combination = next(files for files in CONFIGS.values() if path in files)
    config = yaml.safe_load((COLLECTOR / path).read_text(encoding="utf-8"))
    section = next(s for s in ("receivers", "processors", "exporters", "connectors", "extensions") if config.get(s))
    component = next(iter(config[section]))
    config[section][component] = {**(config[section][component] or {}), "endpiont": "127.0.0.1:1"}
    broken = tmp_path / Path(path).name
    broken.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = otelcol.validate(*(str(broken) if f == path else f for f in combination), env=VALIDATE_ENV)
    assert result.returncode != 0 and "endpiont" in result.stderr, (path, result.stderr[-1000:])


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
    assert "span_metrics" in pipes["traces"]["exporters"] and "tail_sampling" not in pipes["traces"]["processors"]
    assert "tail_sampling" in pipes["traces/sampled"]["processors"]


def test_gateway_routes_by_trace_id():
    lb = _load("gateway agent")["exporters"]["load_balancing"]
    assert lb["routing_key"] == "traceID" and lb["resolver"]["dns"]["port"] == "4317"
    assert lb["sending_queue"]["storage"] == "file_storage"  # spans wait on disk, not in memory
    static = _load("gateway agent (static)")["exporters"]["load_balancing"]["resolver"]
    assert static["dns"]["enabled"] is False and "static" in static


def test_replay_reads_the_embedded_default_files():
    from hermes_otel.exporters.file.exporter import file_paths

    receivers = _load("replay files")["receivers"]
    names = {Path(p).name for p in file_paths(Path("/x")).values()}
    globs = {r["include"][0].rsplit("/", 1)[1] for r in receivers.values()}
    assert globs == {f"{n}*" for n in names}  # the files and their rotations


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


# -- issue 27, item 14: the replay command runs beside the documented single-node Collector -------------------------

_LISTEN = re.compile(r"\$\{env:(OTELCOL_[A-Z_]+):-(?:[^}]*:)?(\d+)\}")


def _default_ports(name: str) -> dict[str, int]:
    """The ports a shipped config listens on when none of its variables is set (its own OTELCOL_* defaults)."""
    return {var: int(port) for var, port in _LISTEN.findall((COLLECTOR / name).read_text())}


def test_the_replay_command_of_its_comment_listens_on_no_port_of_the_single_node_collector():
    comment = [line[2:] for line in (COLLECTOR / "replay-files.yaml").read_text().splitlines() if line.startswith("#")]
    (command,) = [line.strip() for line in comment if "otelcol-hermes" in line]
    assert "OTELCOL_" not in command  # as a user copies it: the defaults must not collide
    replay, single = _default_ports("replay-files.yaml"), _default_ports("single-node.yaml")
    assert set(replay) == {"OTELCOL_HEALTH", "OTELCOL_TELEMETRY_PORT"}
    assert not set(replay.values()) & set(single.values()), (replay, single)
    text = " ".join(comment)
    assert "It keeps tailing the files" in text and "Ctrl-C" in text
