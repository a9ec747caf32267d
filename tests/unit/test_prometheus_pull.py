"""OTEL_METRICS_EXPORTER=prometheus: a real pull endpoint; without the extra, a clear message and push."""

from __future__ import annotations

import logging
import socket
import sys
import urllib.request

import pytest

from hermes_otel import telemetry
from hermes_otel._internal import log as _log
from hermes_otel.config import load_settings
from hermes_otel.exporters import prometheus


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(tmp_path, **env):
    env = {"HERMES_HOME": str(tmp_path), **env}
    result = load_settings(env=env, path=tmp_path / "absent.toml")
    assert [p for p in result.problems if p.source != str(tmp_path / "absent.toml")] == []
    return result.settings


@pytest.fixture
def pull(tmp_path):
    port = _free_port()
    settings = _settings(
        tmp_path, OTEL_METRICS_EXPORTER="prometheus", OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
        OTEL_EXPORTER_PROMETHEUS_PORT=str(port),
    )
    built = telemetry.build(settings)
    yield built, f"http://127.0.0.1:{port}/metrics"
    built.shutdown(2)
    prometheus.stop()


def test_settings_from_the_standard_variables(tmp_path):
    s = _settings(tmp_path, OTEL_METRICS_EXPORTER="Prometheus", OTEL_EXPORTER_PROMETHEUS_PORT="9999")
    assert (s.metrics_exporters, s.prometheus_host, s.prometheus_port, s.metrics_enabled) == (
        ("prometheus",), "localhost", 9999, True)
    assert _settings(tmp_path).metrics_exporters == ("otlp",)
    assert _settings(tmp_path, OTEL_METRICS_EXPORTER="none").metrics_enabled is False
    bad = load_settings(env={"OTEL_METRICS_EXPORTER": "statsd"}, path=tmp_path / "absent.toml")
    assert any(p.source == "OTEL_METRICS_EXPORTER" and "prometheus" in p.expected for p in bad.problems)
    assert bad.settings.metrics_exporters == ("otlp",)


def test_metrics_are_served_with_prometheus_names(pull, tmp_path):
    built, url = pull
    meter = built.meter
    meter.create_histogram("gen_ai.client.operation.duration", unit="s").record(0.25, {"gen_ai.operation.name": "chat"})
    meter.create_counter("hermes.tool.calls", unit="{call}").add(2, {"gen_ai.tool.name": "terminal"})
    built.force_flush(2)  # our flush at session end must not duplicate series in the next scrape
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    samples = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == len(set(samples))
    assert 'gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="chat"' in text
    assert 'hermes_tool_calls_total{gen_ai_tool_name="terminal"' in text
    assert 'hermes_otel_exporter_dropped_total{hermes_otel_signal="traces"' in text
    assert not (tmp_path / "otel" / "metrics.jsonl").exists()  # pulled, not pushed


def test_missing_extra_is_reported_once_and_metrics_are_pushed(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.prometheus", None)  # import fails
    monkeypatch.setattr(_log, "_seen_for_process", set())  # said once per process: whatever ran before, now
    settings = _settings(tmp_path, OTEL_METRICS_EXPORTER="prometheus", OTEL_EXPORTER_PROMETHEUS_PORT="1")
    with caplog.at_level(logging.DEBUG, logger="hermes_otel"):
        for _ in range(2):
            built = telemetry.build(settings)
            built.meter.create_counter("hermes.tool.calls").add(1)
            built.shutdown(2)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and "prometheus" in r.getMessage()]
    assert len(errors) == 1 and "hermes-otel[prometheus]" in errors[0].getMessage()
    assert "hermes.tool.calls" in (tmp_path / "otel" / "metrics.jsonl").read_text()
