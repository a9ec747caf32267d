"""Issue 17, items 11 and 12: `hermes-otel doctor` tells the truth. It probes every endpoint the runtime will use
(OTLP, NeMo Relay's observability endpoints, ATOF stream sinks) with a real, empty export and says what answered;
it runs the runtime's own checks and says what will happen, which the runtime is then seen to do.
Real loopback receivers (tests/harness), a real unrelated web server, real ports."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel.cli import main as cli
from tests.harness.extras import needs_grpc
from tests.harness.http_sink import HttpSink
from tests.harness.otlp_receiver import OTLPReceiver

HTTP_OK = "an OTLP/HTTP receiver accepted an empty export: HTTP 200 (application/x-protobuf)"


class WebServer:
    """Not a collector: answers every request with a web page."""

    def __init__(self) -> None:
        class Page(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = b"<html>hello</html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> WebServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(autouse=True)
def _fresh_report_once_keys():
    """The runtime checks below report some facts once per process (a missing extra); later tests may expect to
    see them first, so what these tests made is forgotten again."""
    from hermes_otel._internal import log as _log

    before = set(_log._seen_for_process)
    yield
    _log._seen_for_process.intersection_update(before)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A HERMES_HOME with the plugin enabled, no plugins.toml and no OTEL_* variables."""
    for var in [k for k in os.environ if k.startswith(("OTEL_", "HERMES_"))]:
        monkeypatch.delenv(var)
    (tmp_path / "config.yaml").write_text("plugins:\n  enabled: [hermes_otel]\n")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    return tmp_path


def doctor(capsys) -> tuple[int, list[str]]:
    code = cli.main(["doctor"])
    lines = capsys.readouterr().out.splitlines()
    return code, [line.strip() for line in lines[: lines.index("effective settings (secrets masked):")]]


def test_an_otlp_http_receiver_is_probed_with_an_empty_export(home, monkeypatch, capsys):
    with OTLPReceiver() as receiver:
        endpoint = receiver.endpoint
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        code, lines = doctor(capsys)
        assert sorted(receiver.paths) == ["/v1/logs", "/v1/metrics", "/v1/traces"]  # one empty export each
        assert receiver.spans() == [] and receiver.errors == []
    assert code == 0, lines
    for signal in ("traces", "logs", "metrics"):
        assert f"ok    {signal} endpoint {endpoint}/v1/{signal} (http/protobuf): {HTTP_OK}" in lines


@needs_grpc
def test_an_otlp_grpc_receiver_is_probed_with_an_empty_export(home, monkeypatch, capsys):
    from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver

    with OTLPGrpcReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        code, lines = doctor(capsys)
        assert (receiver.log_requests, receiver.metric_requests, receiver.spans()) == (1, 1, [])
    assert code == 0, lines
    for signal in ("traces", "logs", "metrics"):
        assert (f"ok    {signal} endpoint {receiver.endpoint} (grpc): an OTLP/gRPC receiver accepted an empty {signal} "
                "export (status OK)") in lines


def test_an_unrelated_web_server_is_not_called_a_collector(home, monkeypatch, capsys):
    with WebServer() as web:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", web.url + "/v1/traces")
        code, lines = doctor(capsys)
    assert code == 1
    assert (f"FAIL  traces endpoint {web.url}/v1/traces (http/protobuf): HTTP 200 (text/html) to an empty export: not "
            "an OTLP/HTTP receiver (it answers protobuf): traces will be dropped") in lines


@needs_grpc
def test_grpc_pointed_at_a_web_server_says_so(home, monkeypatch, capsys):
    with WebServer() as web:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", web.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
        code, lines = doctor(capsys)
    assert code == 1
    assert [line for line in lines if line.startswith("FAIL  traces endpoint")] == [
        f"FAIL  traces endpoint {web.url} (grpc): an HTTP/1 server answered, not gRPC (is this the OTLP/HTTP port, "
        "4318?): traces will be dropped"
    ]


def test_relay_endpoints_and_atof_stream_urls_are_probed(home, monkeypatch, capsys):
    dead = f"http://127.0.0.1:{_closed_port()}"
    with OTLPReceiver() as receiver, HttpSink() as sink:
        endpoint = receiver.endpoint
        toml = home / "plugins.toml"
        toml.write_text(
            'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
            f'[[components.config.opentelemetry.endpoints]]\ntype = "gen_ai"\nendpoint = "{endpoint}"\n'
            f'[[components.config.opentelemetry.endpoints]]\nendpoint = "{dead}"\n'
            f'[components.config.opentelemetry.logs]\nendpoints = ["{dead}"]\n'
            f'[[components.config.atof.sinks]]\ntype = "stream"\nurl = "{sink.url}"\n'
            f'[[components.config.atof.sinks]]\ntype = "stream"\nname = "gone"\nurl = "{dead}/atof"\n'
            'transport = "ndjson"\n'
        )
        code, lines = doctor(capsys)
        assert [body for _, body in sink.requests] == [b"[]"]  # an empty batch
    assert code == 1
    refused = "not reachable (Connection refused)"
    waits = f"wait in the spool {home / 'otel' / 'spool'} (100.0 MiB, 7 days at most) and are re-sent once it takes them"
    assert [line for line in lines if "observability" in line or "ATOF" in line] == [
        f"ok    observability endpoint (gen_ai) {endpoint}/v1/traces (http/protobuf): {HTTP_OK}",
        f"FAIL  observability endpoint (full) {dead}/v1/traces (http/protobuf): {refused}: spans {waits}",
        f"FAIL  observability logs endpoint {dead}/v1/logs: {refused}: logs {waits}",
        f"ok    ATOF stream sink 'stream' {sink.url} (http_post): accepted an empty batch: HTTP 200 (no content type)",
        f"FAIL  ATOF stream sink 'gone' {dead}/atof (ndjson): {refused}: its events will be dropped",
    ]


# -- item 12: the runtime's own checks, and what the runtime then does ----------------------------------------------


def _metrics_land_in_files(settings: config.Settings) -> bool:
    live = telemetry.build(settings)
    live.meter_provider.get_meter("t").create_counter("doctor.check").add(1)
    live.meter_provider.force_flush(5000)
    live.shutdown(2)
    path = settings.file_directory / "metrics.jsonl"
    return path.exists() and "doctor.check" in path.read_text()


def test_prometheus_without_the_extra_is_said_and_metrics_are_pushed(home, monkeypatch, capsys):
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.prometheus", None)  # the extra is not installed
    code, lines = doctor(capsys)
    assert ("warn  metrics.exporter = prometheus needs the prometheus extra (`hermes-otel[prometheus]`), "
            "which is not installed: metrics will be pushed (OTLP or files) instead") in lines
    assert _metrics_land_in_files(config.load_settings().settings)  # ... and so they are


def test_a_taken_prometheus_port_is_said_and_metrics_are_pushed(home, monkeypatch, capsys):
    from hermes_otel.exporters import prometheus

    prometheus.stop()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
        monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
        monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", str(port))
        code, lines = doctor(capsys)
        assert (f"warn  Prometheus endpoint 127.0.0.1:{port} cannot be served (Address already in use; a running "
                "Hermes may hold it): a new Hermes process would find it taken and metrics will be pushed (OTLP or "
                "files) instead") in lines
        assert _metrics_land_in_files(config.load_settings().settings)


def test_relay_handoff_without_nemo_relay_is_said_and_our_exporters_run(home, monkeypatch, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setitem(sys.modules, "nemo_relay", None)  # the package is not installed
    monkeypatch.setitem(sys.modules, "nemo_relay.plugin", None)
    (home / "plugins.toml").write_text(
        'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nrelay_handoff = true\n'
        '[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
        f'[[components.config.atof.sinks]]\ntype = "file"\noutput_directory = "{home / "atof"}"\n'
    )
    code, lines = doctor(capsys)
    assert ("warn  relay_handoff = true but the nemo-relay package is not installed: hermes-otel's own ATOF sinks and "
            "observability endpoints run instead") in lines
    assert f"ok    ATOF file sink 'file' directory {home / 'atof'} will be created (0700)" in lines
    live = telemetry.build(config.load_settings().settings)  # ... and so they do
    with live.tracer_provider.get_tracer("t").start_as_current_span("handoff"):
        pass
    live.shutdown(3)
    assert '"name":"handoff"' in (home / "atof" / "hermes-otel-atof.jsonl").read_text().replace(" ", "")


def test_control_characters_from_configuration_are_shown_escaped(home, capsys):
    (home / "plugins.toml").write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                                       '"\\u001b]0;pwned\\u0007\\u001b[2J" = 1\n')
    cli.main(["doctor"])
    cli.main(["config", "validate", str(home / "plugins.toml")])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "components[0].config.\\x1b]0;pwned\\x07\\x1b[2J: expected a documented key" in out


# -- issue 27, item 11: the CLI reads what it needs from Hermes without side effects -----------------------------

ROOT = Path(__file__).resolve().parents[2]


def _run_cli(args: list[str], env: dict[str, str], timeout: float = 60):
    import subprocess

    return subprocess.run([sys.executable, "-m", "hermes_otel.cli.main", *args], env=env, cwd=env["HOME"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [["--version"], ["doctor"], ["spool"], ["spool", "send"], ["config", "keys"],
                                  ["view"], ["cost"]])
@pytest.mark.parametrize("hermes_home", ["unset", "mistyped"])
def test_no_subcommand_creates_a_hermes_home(tmp_path, args, hermes_home):
    """Importing Hermes's agent modules creates a whole ~/.hermes skeleton (SOUL.md, skills/, sessions/ ...)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "OTEL_"))}
    env.update(HOME=str(tmp_path / "user"), PYTHONPATH=str(ROOT))
    (tmp_path / "user").mkdir()
    if hermes_home == "mistyped":
        env["HERMES_HOME"] = str(tmp_path / "user" / ".hermse")
    _run_cli(args, env)
    assert sorted(p.name for p in (tmp_path / "user").iterdir()) == []


def test_doctor_reports_a_hermes_config_that_is_a_fifo_instead_of_hanging(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / "config.yaml", 0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "OTEL_"))}
    env.update(HOME=str(tmp_path), HERMES_HOME=str(home), PYTHONPATH=str(ROOT))
    done = _run_cli(["doctor"], env, timeout=30)
    assert f"  FAIL  cannot read {home / 'config.yaml'}: a FIFO, not a regular file" in done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr


def test_doctor_reports_an_unreadable_hermes_config(tmp_path):
    home = tmp_path / "home"
    (home / "config.yaml").mkdir(parents=True)  # a directory: unreadable as a file, whoever runs it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "OTEL_"))}
    env.update(HOME=str(tmp_path), HERMES_HOME=str(home), PYTHONPATH=str(ROOT))
    done = _run_cli(["doctor"], env, timeout=30)
    assert f"  FAIL  cannot read {home / 'config.yaml'}: a directory, not a regular file" in done.stdout.splitlines()


# -- issue 27, item 14: a truthful doctor --------------------------------------------------------------------------


def test_with_the_spool_on_a_dead_collector_is_said_to_keep_traces_in_the_spool_not_to_drop_them(home, monkeypatch,
                                                                                                 capsys):
    dead = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead)
    code, lines = doctor(capsys)
    assert code == 1
    spool = home / "otel" / "spool"
    assert [line for line in lines if line.startswith("FAIL  traces endpoint")] == [
        f"FAIL  traces endpoint {dead}/v1/traces (http/protobuf): not reachable (Connection refused): traces wait "
        f"in the spool {spool} (100.0 MiB, 7 days at most) and are re-sent once it takes them"]
    assert not [line for line in lines if "dropped" in line]


def test_with_the_spool_off_a_dead_collector_drops(home, monkeypatch, capsys):
    dead = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", dead)
    toml = home / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nspool = false\n')
    toml.chmod(0o600)
    code, lines = doctor(capsys)
    assert (f"FAIL  traces endpoint {dead}/v1/traces (http/protobuf): not reachable (Connection refused): traces "
            "will be dropped") in lines


@pytest.mark.parametrize(("env", "file", "shown"), [
    ({}, "", "files"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "", "otlp"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "file = { enabled = true }", "otlp and files"),
    ({"OTEL_METRICS_EXPORTER": "none"}, "", "none"),
])
def test_doctor_shows_where_metrics_really_go(home, monkeypatch, env, file, shown):
    from hermes_otel.redaction import masking

    for var, value in env.items():
        monkeypatch.setenv(var, value)
    toml = home / "plugins.toml"
    toml.write_text(f'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n{file}\n')
    toml.chmod(0o600)
    assert masking.masked(config.load_settings().settings)["metrics_exporter"] == shown


def test_doctor_names_a_propagator_that_cannot_be_used_and_the_rest_go_on(home, monkeypatch, capsys):
    monkeypatch.setenv("OTEL_PROPAGATORS", "tracecontext,b3,baggage")
    code, lines = doctor(capsys)
    assert code == 0, lines
    assert [line for line in lines if "OTEL_PROPAGATORS" in line] == [
        "warn  OTEL_PROPAGATORS names the propagator 'b3', which cannot be used (no such propagator is installed "
        "(misspelled, or its package is missing)): it is left out, the others and all telemetry go on"]
    monkeypatch.setenv("OTEL_PROPAGATORS", "tracecontext,baggage")
    assert not [line for line in doctor(capsys)[1] if "OTEL_PROPAGATORS" in line]
