"""Issue 17, item 1: no credential in any log line, in `doctor` or in `config validate`, whatever shape the
configuration gives it. Real exporters, a real loopback receiver, the real logging path (caplog at the root)."""

from __future__ import annotations

import logging
import os
import socket
import sys
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel.cli import main as cli
from tests.harness.extras import needs_grpc
from tests.harness.otlp_receiver import OTLPReceiver
from tests.harness.threads import threads_finish

TOKEN = "Bearer K8S-SECRET-0123456789"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _export_once(settings: config.Settings, name: str = "s") -> None:
    """One span through the real pipeline; flushed and shut down, and its exporter threads done."""
    with threads_finish():
        live = telemetry.build(settings)
        with live.tracer_provider.get_tracer("t").start_as_current_span(name):
            pass
        live.force_flush(3)
        live.shutdown(3)


def _relay_toml(tmp_path: Path, endpoint: str, headers: str) -> Path:
    toml = tmp_path / "plugins.toml"
    toml.write_text(f'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
                    f'[[components.config.opentelemetry.endpoints]]\nendpoint = "{endpoint}"\ntimeout_millis = 500\n'
                    f'{headers}\n')
    toml.chmod(0o600)
    return toml


def _everything_shown(caplog, capsys) -> str:
    out = capsys.readouterr()
    return caplog.text + out.out + out.err


def test_a_mounted_secret_with_a_trailing_newline_is_sent_clean_and_never_logged(tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    env = {"HERMES_HOME": str(tmp_path), "RELAY_TOKEN": TOKEN + "\n"}
    with OTLPReceiver() as receiver:
        toml = _relay_toml(tmp_path, receiver.endpoint, 'header_env = { authorization = "RELAY_TOKEN" }')
        result = config.load_settings(env, toml)
        assert result.problems == ()
        _export_once(result.settings)
        receiver.wait_for_spans(lambda s: len(s) == 1, timeout=5)
        # One trailing newline dropped, as most clients do: the collector gets the token it expects.
        assert {h.get("authorization") for h in receiver.headers} == {TOKEN}
    assert "K8S-SECRET" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_header_value_with_control_characters_is_refused_by_its_key_never_shown(tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    port = _closed_port()
    env = {"HERMES_HOME": str(tmp_path), "RELAY_TOKEN": "Bearer K8S-SECRET-0123456789\ninjected: yes"}
    toml = _relay_toml(tmp_path, f"http://127.0.0.1:{port}", 'header_env = { authorization = "RELAY_TOKEN" }')
    result = config.load_settings(env, toml)
    assert [str(p) for p in result.problems] == [
        f"{toml}: components[0].config.opentelemetry.endpoints[0].header_env.authorization: expected a header value "
        "without control characters, found RELAY_TOKEN holding a value with control characters (value not shown)"
    ]
    assert result.settings.relay_span_endpoints[0].target.headers == {}  # refused, never sent
    _export_once(result.settings)
    assert cli.main(["config", "validate", str(toml)]) == 0  # a warning: the rest of the file applies
    assert "K8S-SECRET" not in _everything_shown(caplog, capsys)


def test_otel_exporter_otlp_headers_with_an_encoded_leading_space_never_reach_a_log(tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    with OTLPReceiver() as receiver:
        env = {"HERMES_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_EXPORTER_OTLP_HEADERS": "authorization=%20Bearer%20LEAKME-0123456789"}
        result = config.load_settings(env, Path(os.devnull))
        assert result.settings.otlp["traces"].headers == {"authorization": "Bearer LEAKME-0123456789"}
        _export_once(result.settings)
        receiver.wait_for_spans(lambda s: len(s) == 1, timeout=5)
        assert receiver.headers[0]["authorization"] == "Bearer LEAKME-0123456789"
    assert "LEAKME" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name != "hermes_otel"]


def test_a_header_file_that_is_a_whole_system_file_never_reaches_a_log_or_doctor(tmp_path, monkeypatch, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    shadow = tmp_path / "shadow"
    lines = ["root:$6$Zq1wEr9T$hashhashhashSECRETROOT:19000:0:99999:7:::", "daemon:*:19000:0:99999:7:::",
             "alice:$6$Pq2wEr0T$hashhashhashSECRETALICE:19000:0:99999:7:::"]
    shadow.write_text("\n".join(lines) + "\n")
    shadow.chmod(0o600)
    port = _closed_port()
    toml = _relay_toml(tmp_path, f"http://127.0.0.1:{port}", f'header_file = {{ authorization = "{shadow}" }}')
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    result = config.load_settings()
    assert [str(p) for p in result.problems] == [
        f"{toml}: components[0].config.opentelemetry.endpoints[0].header_file.authorization: expected a header value "
        f"without control characters, found {shadow} holding a value with control characters (value not shown)"
    ]
    _export_once(result.settings)
    cli.main(["doctor"])
    cli.main(["config", "validate", str(toml)])
    shown = _everything_shown(caplog, capsys)
    assert "SECRET" not in shown and "hashhash" not in shown and "daemon:" not in shown


def test_a_password_in_a_grpc_endpoint_never_reaches_a_log(tmp_path, caplog, capsys, monkeypatch):
    caplog.set_level(logging.DEBUG)
    port = _closed_port()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://collector:S3cr3tPW@127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", os.devnull)
    result = config.load_settings()
    _export_once(result.settings)
    cli.main(["doctor"])
    shown = _everything_shown(caplog, capsys)
    assert "S3cr3tPW" not in shown
    assert f"collector:****@127.0.0.1:{port}" in shown  # doctor says which endpoint, with the password masked


def test_a_header_table_written_as_an_env_string_is_never_shown(tmp_path, monkeypatch, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                    'otlp = { headers = "x-honeycomb-team=hcaik_01SECRETVALUE" }\n')
    toml.chmod(0o600)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    message = config.load_settings().message()
    assert message.startswith(f"hermes-otel configuration: {toml}: components[0].config.otlp.headers: expected a table "
                              "of strings, found string (value not shown: this key holds credentials)")
    logging.getLogger("hermes_otel").error(message)
    assert cli.main(["config", "validate", str(toml)]) == 1
    assert cli.main(["doctor"]) == 1
    assert "hcaik_01SECRETVALUE" not in _everything_shown(caplog, capsys)


def test_whatever_a_library_logs_on_our_behalf_is_masked(caplog):
    """Defence in depth: a remembered secret, a credential pattern or a user:password@ in any message of the
    exporter and SDK loggers is masked, traceback included; control characters are shown escaped."""
    from hermes_otel.redaction.masking import mask_text, remember

    caplog.set_level(logging.DEBUG)
    remember("hcaik_01OTHERSECRET")
    sdk = logging.getLogger("opentelemetry.sdk._shared_internal")
    try:
        raise ValueError("Invalid header value b'hcaik_01OTHERSECRET'")
    except ValueError:
        sdk.exception("Exception while exporting Span to %s", "http://bob:pa55word@collector:4318/v1/traces\x1b[2J")
    logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").error("token=abc123def456 refused")
    text = caplog.text
    assert "hcaik_01OTHERSECRET" not in text and "pa55word" not in text and "abc123def456" not in text
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert "Traceback (most recent call last)" in text and "ValueError: Invalid header value b'****'" in text
    assert mask_text("x http://bob:pa55word@h/ y") == "x http://bob:<redacted>@h/ y"


def test_a_lone_surrogate_in_a_library_message_reaches_a_utf8_log_escaped():
    """A hostile attribute key makes the SDK's encoder log it ("Failed to encode key \\ud800key"); a strict UTF-8
    log stream must still take the line (no "--- Logging error ---"), the surrogate shown escaped."""
    import io

    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    handler = logging.StreamHandler(stream)
    encoder = logging.getLogger("opentelemetry.exporter.otlp.proto.common._internal")
    encoder.addHandler(handler)
    handler.handleError = lambda record: pytest.fail("the log line could not be written")  # type: ignore[method-assign]
    try:
        encoder.error("Failed to encode key %s: %s", "\ud800key", "surrogates not allowed")
    finally:
        encoder.removeHandler(handler)
    assert stream.buffer.getvalue().decode("utf-8") == "Failed to encode key \\ud800key: surrogates not allowed\n"


@pytest.mark.parametrize("value", ["Bearer abc\r\nX-Injected: 1", "tab\tok-but-\x7f", "\x00"])
def test_otel_headers_with_control_characters_are_refused_by_key(value):
    import urllib.parse

    result = config.load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                                   "OTEL_EXPORTER_OTLP_HEADERS": "authorization=" + urllib.parse.quote(value)},
                                  Path(os.devnull))
    assert result.settings.otlp["traces"].headers == {}
    assert [str(p) for p in result.problems] == [
        "OTEL_EXPORTER_OTLP_HEADERS: authorization: expected a header value without control characters, found a value "
        "with control characters (value not shown)"
    ]


def test_the_remembered_secrets_are_bounded_and_the_newest_always_kept():
    from hermes_otel.redaction import content, masking

    for n in range(2000):
        masking.remember(f"filler-secret-{n:05d}")
    masking.remember("the-newest-secret-value")
    assert len(content._secrets) <= content._MAX_SECRETS
    assert masking.mask_text("x the-newest-secret-value y filler-secret-01999") == "x **** y ****"


# -- issue 27, item 1: header values from OTEL_EXPORTER_OTLP_HEADERS never reach a log, refused ones are never sent

@pytest.mark.parametrize("raw", ['x-honeycomb-team="LEAKHONEY1234567890"', "x-honeycomb-team=LEAKHONEY1234567890\x1b",
                                 "x-honeycomb-team=LEAKHONEY1234567890é"])
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_header_the_sdk_finds_malformed_is_never_quoted_in_a_log(tmp_path, monkeypatch, caplog, capsys, raw,
                                                                    protocol):
    """The SDK's own header parser (`opentelemetry.util.re`) warns with the whole item, value included, once per
    exporter it builds: that logger is masked too, whatever the value holds."""
    caplog.set_level(logging.DEBUG)
    port = _closed_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", raw)
    env = {"HERMES_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_TIMEOUT": "500",
           "OTEL_EXPORTER_OTLP_HEADERS": raw}
    result = config.load_settings(env, Path(os.devnull))
    if result.problems:
        logging.getLogger("hermes_otel").warning(result.message())
    _export_once(result.settings)
    assert "LEAKHONEY" not in _everything_shown(caplog, capsys)


@pytest.mark.parametrize(("protocol", "raw", "authorization"), [
    ("http/protobuf", "x-a=LEAKHDR1%0D%0AX-Injected:%20yes,authorization=Bearer LEAKHDR0ok", "Bearer LEAKHDR0ok"),
    # none left: gRPC would fall back to the variable
    pytest.param("grpc", "x-a=LEAKHDR1%0D%0AX-Injected:%20yes", None, marks=needs_grpc),
])
def test_a_refused_environment_header_is_never_sent(tmp_path, monkeypatch, caplog, capsys, protocol, raw,
                                                    authorization):
    """The SDK merges OTEL_EXPORTER_OTLP_HEADERS under the headers it is given (HTTP), or uses it when it is given
    none (gRPC): a value we refused must not come back that way."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", raw)
    http = protocol == "http/protobuf"
    if http:
        receiving = OTLPReceiver()
    else:
        from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver

        receiving = OTLPGrpcReceiver()
    with receiving as receiver:
        env = {"HERMES_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
               "OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_HEADERS": raw}
        result = config.load_settings(env, Path(os.devnull))
        assert [str(p) for p in result.problems] == [
            "OTEL_EXPORTER_OTLP_HEADERS: x-a: expected a header value without control characters, found a value "
            "with control characters (value not shown)"]
        logging.getLogger("hermes_otel").warning(result.message())
        _export_once(result.settings)
        receiver.wait_for_spans(lambda s: len(s) == 1, timeout=5)
        sent = receiver.headers if http else receiver.metadata
        assert {(h.get("authorization"), h.get("x-a"), h.get("x-injected")) for h in sent} == {
            (authorization, None, None)}
    assert "LEAKHDR" not in _everything_shown(caplog, capsys)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name != "hermes_otel"]


class _Keep(logging.Handler):
    """A host's handler that keeps what it is handed (as Sentry, structlog and JSON handlers read it)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _logged_through(logger: logging.Logger, msg: str, *args: object) -> tuple[list, logging.LogRecord]:
    """(the records made, the logger's first; the record the host's handler got), logged with an exception."""
    made: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(lambda *a, **k: made.append(factory(*a, **k)) or made[-1])
    keep = _Keep()
    logger.addHandler(keep)
    try:
        try:
            raise ConnectionError("peer reset")
        except ConnectionError:
            logger.warning(msg, *args, exc_info=True)
    finally:
        logger.removeHandler(keep)
        logging.setLogRecordFactory(factory)
    return made, keep.records[-1]


def test_a_shared_library_loggers_record_with_nothing_to_mask_reaches_the_host_as_logged():
    """urllib3's loggers are everyone's: with the plugin's masking in place, a record holding no credential is the
    host's untouched (its args, its exception object)."""
    from hermes_otel.redaction import masking

    masking.install()
    made, got = _logged_through(logging.getLogger("urllib3.connectionpool"), "Retrying (%r) after %s", 3, "reset")
    assert got is made[0] and got.args == (3, "reset") and got.msg == "Retrying (%r) after %s"
    assert got.exc_info is not None and got.exc_info[0] is ConnectionError


def test_a_shared_library_loggers_record_with_a_credential_is_masked_without_losing_the_exception():
    from hermes_otel.redaction import masking

    masking.install()
    logger = logging.getLogger("urllib3.connectionpool")
    made, got = _logged_through(logger, "Starting new connection to %s", "http://bob:pa55word@collector:4318")
    assert "pa55word" not in got.getMessage()
    assert got.exc_info is not None and got.exc_info[0] is ConnectionError  # the object, for handlers that want it
    if sys.version_info >= (3, 12):  # the host's copy is masked; the record the library made is left as it was
        assert got is not made[0] and made[0].args == ("http://bob:pa55word@collector:4318",)
