"""OTLP over gRPC without the `[grpc]` extra (Hermes 0.2x's environment brings only the HTTP exporter): one clear
message that names the extra, every signal written to files instead, and a doctor that says so and does not crash.
grpc is made unimportable here, so this runs with the extra installed as well."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel._internal import log as _log
from hermes_otel._internal.extras import grpc_missing
from hermes_otel.cli import main as cli
from tests.harness.threads import threads_finish


@pytest.fixture
def without_grpc(monkeypatch):
    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` fails, as where the extra is not installed
    monkeypatch.setattr(_log, "_seen_for_process", set())  # the message is once per process: this test's first
    assert grpc_missing() is not None


def _settings(tmp_path: Path, **env: str) -> config.Settings:
    env = {"HERMES_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", **env}
    result = config.load_settings(env, tmp_path / "absent.toml")
    return result.settings


def test_grpc_without_the_extra_is_said_once_and_every_signal_goes_to_files(tmp_path, without_grpc, caplog):
    settings = _settings(tmp_path)
    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    with threads_finish():
        for _ in range(2):  # a reload says nothing new
            live = telemetry.build(settings)
            with live.tracer_provider.get_tracer("t").start_as_current_span("turn"):
                live.logger.emit(body="record")
            live.meter.create_counter("hermes.tool.calls").add(1)
            live.shutdown(3)
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in said] == [
        "hermes-otel: OTLP over gRPC needs the optional package opentelemetry-exporter-otlp-proto-grpc, not installed "
        "(hermes-otel's `grpc` extra, `hermes-otel[grpc]`; or use the protocol http/protobuf; import of grpc halted; None in "
        f"sys.modules); writing what was meant for OTLP/gRPC to files under {tmp_path / 'otel'} instead"]
    assert said[0].levelno == logging.ERROR
    files = {signal: (tmp_path / "otel" / f"{signal}.jsonl").read_text() for signal in ("traces", "logs", "metrics")}
    assert [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"]
            for line in files["traces"].splitlines()] == ["turn", "turn"]
    assert files["logs"].count('"record"') == 2
    assert "hermes.tool.calls" in files["metrics"]


def test_a_relay_grpc_endpoint_without_the_extra_is_said_once_and_the_rest_runs(tmp_path, without_grpc, caplog):
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
                    '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://127.0.0.1:4317"\n'
                    'transport = "grpc"\n')
    toml.chmod(0o600)
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, toml)
    assert [p for p in result.problems if "grpc" in str(p)] == []
    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    with threads_finish():
        live = telemetry.build(result.settings)
        with live.tracer_provider.get_tracer("t").start_as_current_span("turn"):
            pass
        live.shutdown(3)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and said[0].endswith("NeMo Relay's gRPC endpoints get no spans"), said
    assert "`hermes-otel[grpc]`" in said[0]


def test_doctor_says_grpc_needs_the_extra_and_where_the_telemetry_goes(tmp_path, without_grpc, monkeypatch, capsys):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert cli.main(["doctor"]) == 1
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    for signal in ("traces", "logs", "metrics"):
        assert (f"FAIL  {signal} endpoint http://127.0.0.1:4317 (grpc): OTLP over gRPC needs the optional package "
                "opentelemetry-exporter-otlp-proto-grpc, not installed (hermes-otel's `grpc` extra, `hermes-otel[grpc]`; or use the "
                "protocol http/protobuf; import of grpc halted; None in sys.modules): "
                f"{signal} will be written to files under {tmp_path / 'otel'} instead") in lines
