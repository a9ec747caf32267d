"""Security properties that need no Hermes run (docs/threat-model.md points here).

Header values (literal, from `header_env`, from `header_file`) never reach a log line or `doctor`;
config files holding secrets are warned about when others can read them; what we write is private;
nothing from configuration is evaluated; the ATOF stream sink never follows a redirect.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel.cli import main as cli
from hermes_otel.exporters.health import health
from hermes_otel.exporters.relay import atof
from hermes_otel.redaction import masking

PACKAGE = Path(__file__).resolve().parents[2] / "hermes_otel"
SECRETS = {
    "env": "Bearer env-secret-value-0001",
    "file": "file-secret-value-0002",
    "literal": "literal-secret-value-0003",
    "otel_headers": "otel-headers-secret-0004",
    "password": "url-password-0005",
    "query": "query-token-0006",
}


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _secret_config(tmp_path: Path, monkeypatch) -> Path:
    port = _closed_port()
    header_file = tmp_path / "token.txt"
    header_file.write_text(SECRETS["file"] + "\n")
    header_file.chmod(0o600)
    monkeypatch.setenv("HDR_SECRET", SECRETS["env"])
    toml = tmp_path / "plugins.toml"
    toml.write_text(f"""
version = 1
[[components]]
kind = "observability"
[components.config]
version = 4
[[components.config.opentelemetry.endpoints]]
endpoint = "http://127.0.0.1:{port}"
headers = {{ authorization = "{SECRETS['literal']}" }}
header_env = {{ x-env = "HDR_SECRET" }}
header_file = {{ x-file = "{header_file}" }}
[[components.config.atof.sinks]]
type = "stream"
url = "http://127.0.0.1:{port}/atof?token={SECRETS['query']}"
headers = {{ authorization = "{SECRETS['literal']}" }}
header_env = {{ x-env = "HDR_SECRET" }}
header_file = {{ x-file = "{header_file}" }}
""")
    toml.chmod(0o600)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://user:{SECRETS['password']}@127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization=Bearer%20{SECRETS['otel_headers']}")
    return toml


def test_header_values_never_reach_logs_or_doctor(tmp_path, monkeypatch, capsys, caplog):
    _secret_config(tmp_path, monkeypatch)
    caplog.set_level(logging.DEBUG)
    result = config.load_settings()
    assert result.problems == ()
    # The values were resolved (they are what we send to the collector) ...
    target = result.settings.relay_span_endpoints[0].target
    assert target.headers["x-env"] == SECRETS["env"] and target.headers["x-file"] == SECRETS["file"]
    # ... then a pipeline is built, exports fail against a closed port, and doctor runs.
    live = telemetry.build(result.settings)
    with live.tracer_provider.get_tracer("t").start_as_current_span("s"):
        pass
    live.force_flush(3)
    live.shutdown(2)
    assert cli.main(["doctor"]) in (0, 1)
    out = capsys.readouterr()
    shown = out.out + out.err + "\n".join(r.getMessage() for r in caplog.records)
    for name, secret in SECRETS.items():
        assert secret not in shown, name
    assert '"x-env": "****"' in out.out and '"authorization": "****"' in out.out
    assert "user:****@127.0.0.1" in out.out


def test_a_rejected_header_table_is_described_by_its_keys_only(tmp_path, monkeypatch, capsys):
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config.otlp]\n'
                    f'headers = {{ authorization = "{SECRETS["literal"]}", retries = 3 }}\n')
    toml.chmod(0o600)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    message = config.load_settings().message()
    assert message == (f"hermes-otel configuration: {toml}: components[0].config.otlp.headers: expected a table of "
                       "strings, found table {keys: authorization, retries} (ignoring this file; telemetry continues "
                       "with environment and default settings; see `hermes-otel config keys`)")
    cli.main(["doctor"])
    assert SECRETS["literal"] not in capsys.readouterr().out


def test_config_holding_secrets_is_warned_about_when_others_can_read_it(tmp_path, monkeypatch, capsys):
    toml = _secret_config(tmp_path, monkeypatch)
    expected = f"{toml}: expected a file only its owner can read (chmod 600): it holds header values or credentials"
    assert not any(str(p).startswith(expected) for p in config.load_settings().problems)
    for mode in (0o640, 0o604, 0o644):
        toml.chmod(mode)
        problems = [str(p) for p in config.load_settings().problems if str(p).startswith(expected)]
        assert problems == [f"{expected}, found mode {mode:o}"]
        assert cli.main(["config", "validate", str(toml)]) == 0  # a warning, not an error
        assert f"warning: {expected}, found mode {mode:o}" in capsys.readouterr().out
    plain = tmp_path / "plain.toml"
    plain.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nservice_name = "x"\n')
    plain.chmod(0o644)
    assert config.read_component(plain)[1] == []  # nothing secret in it: no warning


def test_header_file_readable_by_others_is_warned_once(tmp_path, caplog):
    secret = tmp_path / "token"
    secret.write_text("s3cr3t-token-value")
    secret.chmod(0o644)
    caplog.set_level(logging.DEBUG, logger="hermes_otel")
    sink = atof.StreamSinkConfig(url="http://127.0.0.1:1/x", header_file={"authorization": str(secret)})
    assert sink.resolved_headers() == {"authorization": "s3cr3t-token-value"}
    sink.resolved_headers()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [f"hermes-otel: ATOF sink 'stream': header_file.authorization: expected a file only its owner "
                        f"can read (chmod 600), found {secret} with mode 644"]
    assert "s3cr3t-token-value" not in caplog.text


def test_files_we_write_are_private(tmp_path):
    old = os.umask(0)  # the most permissive umask: our modes must not depend on it
    try:
        sink = atof.FileSink(atof.FileSinkConfig(output_directory=str(tmp_path / "new" / "atof")))
        sink.write([{"kind": "mark"}])
        sink.close()
        assert (tmp_path / "new" / "atof").stat().st_mode & 0o777 == 0o700
        assert sink.path.stat().st_mode & 0o777 == 0o600
        loose = tmp_path / "loose"
        loose.mkdir()
        (loose / "events.jsonl").write_text("")
        (loose / "events.jsonl").chmod(0o644)
        again = atof.FileSink(atof.FileSinkConfig(output_directory=str(loose), filename="events.jsonl"))
        again.close()
        assert (loose / "events.jsonl").stat().st_mode & 0o777 == 0o600  # tightened, not left readable
    finally:
        os.umask(old)
    # The OTLP-JSON files: tests/unit/test_file_exporters.py::test_creates_private_dir_and_file and
    # ::test_tightens_existing_loose_dir_and_file.


PAYLOADS = ("__import__('pathlib').Path('{m}').touch()", "{{{{ cycler.__init__.__globals__.os.system('touch {m}') }}}}",
            "$(touch {m})", "`touch {m}`", "${{jndi:ldap://127.0.0.1/{m}}}")


def test_nothing_from_configuration_is_evaluated(tmp_path, monkeypatch):
    marker = tmp_path / "evaluated"
    values = [p.format(m=marker) for p in PAYLOADS]
    toml = tmp_path / "plugins.toml"
    esc = [v.replace("\\", "\\\\").replace('"', '\\"') for v in values]
    toml.write_text(
        'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
        f'service_name = "{esc[0]}"\n'
        f'resource_attributes = {{ a = "{esc[1]}", b = "{esc[2]}" }}\n'
        f'[components.config.file]\ndirectory = "{tmp_path / "otel"}"\n'
    )
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"c={esc[3]},d={esc[4]}")
    settings = config.load_settings(path=toml).settings
    assert settings.service_name == values[0]  # kept as text
    live = telemetry.build(settings)
    with live.tracer_provider.get_tracer("t").start_as_current_span("s"):
        pass
    assert live.shutdown(5)
    assert not marker.exists()
    exported = (tmp_path / "otel").glob("*")
    assert any(values[0] in f.read_text() for f in exported)


def test_the_package_has_no_code_evaluation_primitives():
    banned = re.compile(r"(?<![\w.])(eval|exec|compile)\(|\bpickle\b|\bmarshal\b|yaml\.load\(|\bos\.system\(|shell=True")
    offenders = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if banned.search(line) and not line.strip().startswith("#")
    ]
    assert offenders == []


class _Redirector:
    """`origin` answers every POST with a 307 to `other` (another host:port); `other` counts what reaches it."""

    def __init__(self) -> None:
        self.origin_hits = 0
        self.other_hits = 0
        this = self

        class Other(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                this.other_hits += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._other = ThreadingHTTPServer(("127.0.0.1", 0), Other)
        target = f"http://127.0.0.1:{self._other.server_address[1]}/steal"

        class Origin(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                this.origin_hits += 1
                self.send_response(307)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._origin = ThreadingHTTPServer(("127.0.0.1", 0), Origin)
        self.url = f"http://127.0.0.1:{self._origin.server_address[1]}/atof"
        for server in (self._other, self._origin):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        for server in (self._other, self._origin):
            server.shutdown()
            server.server_close()


def test_atof_stream_sink_never_follows_a_redirect(caplog):
    redirector = _Redirector()
    try:
        sink = atof.StreamSink(atof.StreamSinkConfig(url=redirector.url, headers={"authorization": "Bearer x-1234567"}))
        sink.write([{"kind": "mark", "name": "n"}])
        deadline = time.monotonic() + 10
        while health.dropped_at[redirector.url] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        sink.close()
    finally:
        redirector.close()
    assert redirector.origin_hits == 1  # a 3xx is not retried either
    assert redirector.other_hits == 0  # the events and the Authorization header stayed with their host
    assert health.dropped_at[redirector.url] == 1  # counted as dropped


@pytest.mark.parametrize("url", ["http://u:pw-9999@h:1/v1/traces?api_key=abc123", "http://h:99999999/x?token=abc123"])
def test_masked_urls(url):
    shown = masking.mask_url(url)
    assert "pw-9999" not in shown and "abc123" not in shown


def test_every_test_the_threat_model_names_exists():
    text = (PACKAGE.parent / "docs" / "threat-model.md").read_text()
    root = PACKAGE.parent
    refs, last = [], None
    for match in re.finditer(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`", text):
        path, name = match.group(1) or last, match.group(2)
        if path is None:
            continue
        last = path
        refs.append((path, name))
    assert len(refs) >= 20
    for path, name in refs:
        source = (root / path).read_text()
        assert name is None or re.search(rf"^def {name}\(", source, re.M), (path, name)
