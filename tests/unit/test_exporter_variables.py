"""OTEL_TRACES_EXPORTER, OTEL_LOGS_EXPORTER, OTEL_METRICS_EXPORTER and OTEL_BLRP_*, as the specification reads them.

Each case builds our real providers from the variables and looks at what reached the files, stderr and the
endpoints: `none` sends a signal nowhere, `console` prints it, an exporter we do not have is said by name.
"""

from __future__ import annotations

import json

import pytest

from hermes_otel import telemetry
from hermes_otel.config import load_settings

ENDPOINT = "http://127.0.0.1:9"  # never dialled: each case shuts down before a send could matter


def _load(tmp_path, **env):
    return load_settings(env={"HERMES_HOME": str(tmp_path), **env})  # no plugins.toml there


def _settings(tmp_path, **env):
    result = _load(tmp_path, **env)
    assert [str(p) for p in result.problems] == []
    return result.settings


def _run(settings) -> None:
    """One span, one log record and one metric point through our providers, then shut down (flushed)."""
    built = telemetry.build(settings)
    with built.tracer.start_as_current_span("the span"):
        built.logger.emit(body="the record")
    built.meter.create_counter("the.counter").add(1)
    built.shutdown(2)


def _lines(tmp_path, signal: str) -> list[dict]:
    path = tmp_path / "otel" / f"{signal}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_by_default_every_signal_reaches_its_file(tmp_path):
    _run(_settings(tmp_path))
    assert [len(_lines(tmp_path, s)) > 0 for s in ("traces", "logs", "metrics")] == [True, True, True]


@pytest.mark.parametrize("signal", ["traces", "logs", "metrics"])
def test_none_sends_that_signal_nowhere_and_leaves_the_others(tmp_path, signal):
    settings = _settings(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=ENDPOINT, **{f"OTEL_{signal.upper()}_EXPORTER": "none"})
    others = {"traces", "logs", "metrics"} - {signal}
    assert set(settings.otlp) == others
    assert signal not in settings.file_signals
    assert getattr(settings, f"{signal}_exporters") == ()
    files_only = _settings(tmp_path, **{f"OTEL_{signal.upper()}_EXPORTER": "none"})
    _run(files_only)
    assert _lines(tmp_path, signal) == []
    assert all(_lines(tmp_path, other) for other in others)


def test_all_three_none_build_no_exporter_at_all(tmp_path):
    settings = _settings(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=ENDPOINT, OTEL_TRACES_EXPORTER="none",
                         OTEL_LOGS_EXPORTER="none", OTEL_METRICS_EXPORTER="none")
    assert (settings.otlp, settings.file_signals, settings.logs_enabled, settings.metrics_enabled) == (
        {}, frozenset(), False, False)
    built = telemetry.build(settings)
    assert built.endpoints == frozenset()
    built.shutdown(1)
    assert not (tmp_path / "otel").exists() or list((tmp_path / "otel").glob("*.jsonl")) == []


def test_console_prints_each_signal_on_stderr_and_nothing_on_stdout(tmp_path, capfd):
    _run(_settings(tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_LOGS_EXPORTER="console",
                   OTEL_METRICS_EXPORTER="console"))
    out, err = capfd.readouterr()
    assert out == ""
    assert '"name": "the span"' in err
    assert '"body": "the record"' in err
    assert '"name": "the.counter"' in err
    assert [_lines(tmp_path, s) for s in ("traces", "logs", "metrics")] == [[], [], []]  # console only: no files


def test_otlp_and_console_together(tmp_path, capfd):
    settings = _settings(tmp_path, OTEL_TRACES_EXPORTER="otlp, Console")
    assert settings.traces_exporters == ("otlp", "console")
    _run(settings)
    assert '"name": "the span"' in capfd.readouterr().err
    assert _lines(tmp_path, "traces")


@pytest.mark.parametrize(("variable", "value"), [
    ("OTEL_TRACES_EXPORTER", "zipkin"),
    ("OTEL_LOGS_EXPORTER", "otlp,jaeger"),
    ("OTEL_METRICS_EXPORTER", "none,otlp"),
    ("OTEL_TRACES_EXPORTER", ","),
])
def test_an_exporter_we_do_not_have_is_reported_by_name_and_otlp_kept(tmp_path, variable, value):
    result = _load(tmp_path, **{variable: value})
    assert [(p.source, p.fatal) for p in result.problems] == [(variable, False)]
    assert repr(value) in str(result.problems[0])
    signal = variable.split("_")[1].lower()
    assert getattr(result.settings, f"{signal}_exporters") == ("otlp",)


def test_console_key_is_the_console_trace_exporter(tmp_path):
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nconsole = true\n')
    toml.chmod(0o600)
    result = load_settings(env={"HERMES_HOME": str(tmp_path)}, path=toml)
    assert result.settings.traces_exporters == ("otlp", "console")


def test_log_batches_follow_otel_blrp_and_spans_otel_bsp(tmp_path):
    # One OTLP-JSON line per export: spans one by one (OTEL_BSP_*), log records all in one batch (OTEL_BLRP_*).
    settings = _settings(tmp_path, OTEL_BSP_MAX_EXPORT_BATCH_SIZE="1", OTEL_BLRP_MAX_EXPORT_BATCH_SIZE="512",
                         OTEL_BLRP_SCHEDULE_DELAY="86400000", OTEL_BSP_SCHEDULE_DELAY="86400000")
    assert (settings.bsp_max_export_batch_size, settings.blrp_max_export_batch_size) == (1, 512)
    built = telemetry.build(settings)
    for n in range(3):
        with built.tracer.start_as_current_span(f"span {n}"):
            built.logger.emit(body=f"record {n}")
    built.shutdown(2)
    assert len(_lines(tmp_path, "traces")) == 3
    assert len(_lines(tmp_path, "logs")) == 1


def test_log_batches_keep_their_own_defaults_when_otel_blrp_is_silent(tmp_path):
    """OTEL_BSP_* are the span processor's: the specification gives OTEL_BLRP_* defaults of their own."""
    settings = _settings(tmp_path, OTEL_BSP_MAX_QUEUE_SIZE="64", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="8")
    assert (settings.blrp_max_queue_size, settings.blrp_max_export_batch_size) == (2048, 512)
    clamped = _settings(tmp_path, OTEL_BLRP_MAX_QUEUE_SIZE="4", OTEL_BLRP_MAX_EXPORT_BATCH_SIZE="100")
    assert (clamped.blrp_max_queue_size, clamped.blrp_max_export_batch_size) == (4, 4)  # never more than the queue


def test_a_bad_otel_blrp_value_is_reported_once_by_name(tmp_path):
    result = _load(tmp_path, OTEL_BLRP_MAX_QUEUE_SIZE="lots")
    assert [p.source for p in result.problems] == ["OTEL_BLRP_MAX_QUEUE_SIZE"]
    assert result.settings.blrp_max_queue_size == 2048  # that setting's default
