"""Issue 17, items 4, 5, 6 and 13: hostile or mistaken configuration gets one clear message (file, key,
expected, found), never a hang, a crash, a whole plugin lost, or a silent "valid"."""

from __future__ import annotations

import logging
import os
import threading
import urllib.parse
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel.cli import main as cli
from tests.harness.otlp_receiver import OTLPReceiver

OURS = 'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
DEVNULL = Path(os.devnull)


def write(tmp_path: Path, text: str, name: str = "plugins.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def within(seconds: float, work):
    """Run `work` on a daemon thread; fail (instead of hanging the suite) when it does not finish in time."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (blocked)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def stream_sink(tmp_path: Path, header_file: str) -> Path:
    return write(tmp_path, 'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
                           '[[components.config.atof.sinks]]\ntype = "stream"\nurl = "http://127.0.0.1:9/atof"\n'
                           f'header_file = {{ authorization = "{header_file}" }}\n')


# -- item 4: header files and plugins.toml that are not regular files ---------------------------------------------


def test_a_header_file_that_is_a_fifo_is_refused_without_blocking(tmp_path, capsys):
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo, 0o600)
    toml = stream_sink(tmp_path, str(fifo))
    result = within(5, lambda: config.load_settings({"HERMES_HOME": str(tmp_path)}, toml))
    assert [str(p) for p in result.problems] == [
        f"{toml}: components[0].config.atof.sinks[0].header_file.authorization: expected a readable regular file of "
        f"at most 64 KiB, found {fifo}: a FIFO, not a regular file"
    ]
    assert result.settings.atof_sinks[0].resolved_headers() == {}  # the sink runs, without that header
    assert within(5, lambda: cli.main(["config", "validate", str(toml)])) == 0
    assert "a FIFO, not a regular file" in capsys.readouterr().out


def test_a_header_file_that_is_dev_zero_is_refused_without_reading_it(tmp_path):
    toml = stream_sink(tmp_path, "/dev/zero")
    result = within(5, lambda: config.load_settings({"HERMES_HOME": str(tmp_path)}, toml))
    assert [p.found for p in result.problems] == ["/dev/zero: a character device, not a regular file"]


def test_a_header_file_over_the_size_cap_is_refused(tmp_path):
    big = tmp_path / "token"
    big.write_text("x" * (64 * 1024 + 1))
    big.chmod(0o600)
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, stream_sink(tmp_path, str(big)))
    assert [p.found for p in result.problems] == [f"{big}: 65537 bytes, more than the 64 KiB allowed"]


def test_a_plugins_toml_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "plugins.toml"
    os.mkfifo(fifo, 0o600)
    env = {"HERMES_HOME": str(tmp_path), "HERMES_OTEL_PLUGINS_TOML": str(fifo)}
    result = within(5, lambda: config.load_settings(env))
    assert [str(p) for p in result.problems] == [
        f"{fifo}: expected a readable TOML file (a regular file of at most 1 MiB), found a FIFO, not a regular file"
    ]
    assert result.settings.enabled and result.settings.file_signals  # defaults: telemetry runs on


# -- item 5: huge, deep and oddly typed documents -----------------------------------------------------------------


def test_a_plugins_toml_over_the_size_cap_is_refused_unread(tmp_path):
    path = write(tmp_path, OURS + "# padding\n" * (200 * 1024))  # 2 MiB of comments: valid TOML, too big
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, path)
    assert [p.found for p in result.problems] == [f"{path.stat().st_size} bytes, more than the 1 MiB allowed"]


@pytest.mark.parametrize("nested", ["x = " + "[" * 5000 + "]" * 5000, "x = " + "{a=" * 5000 + "1" + "}" * 5000])
def test_deeply_nested_toml_is_one_problem_not_a_traceback(tmp_path, nested, capsys, monkeypatch):
    path = write(tmp_path, nested + "\n")
    assert [str(p) for p in config.load_settings({}, path).problems] == [
        f"{path}: expected valid TOML, found tables or arrays nested too deep to read"
    ]
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(path))
    assert cli.main(["config", "validate", str(path)]) == 1
    assert cli.main(["doctor"]) == 1
    assert cli.main(["view"]) == 1  # no traces yet: said plainly, no traceback
    assert "Traceback" not in capsys.readouterr().err


ODD = {
    'kind = { a = 1 }': "components[0].kind: expected a string, found table {keys: a}",
    'kind = "observability"\n[components.config]\nversion = 4\n[[components.config.atof.sinks]]\ntype = []':
        "components[0].config.atof.sinks[0].type: expected file | stream, found array []",
    'kind = "observability"\n[components.config]\nversion = 4\n[[components.config.atof.sinks]]\ntype = "stream"\n'
    'url = "http://127.0.0.1:9/x"\nheader_env = { x = 5 }':
        "components[0].config.atof.sinks[0].header_env: expected a table of strings, found table {keys: x}",
}


@pytest.mark.parametrize("component", list(ODD))
def test_odd_types_are_the_usual_message_in_validate_doctor_and_view(tmp_path, component, capsys, monkeypatch):
    path = write(tmp_path, f"version = 1\n[[components]]\n{component}\n")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(path))
    assert [str(p) for p in config.load_settings().problems] == [f"{path}: {ODD[component]}"]
    assert cli.main(["config", "validate", str(path)]) == 1
    assert cli.main(["doctor"]) == 1
    assert cli.main(["view"]) == 1
    out = capsys.readouterr()
    assert f"error: {path}: {ODD[component]}" in out.out and f"FAIL  config: {path}: {ODD[component]}" in out.out
    assert "Traceback" not in out.err


# -- item 6: extreme environment values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("OTEL_BSP_MAX_QUEUE_SIZE", "1e20", "an integer, found '1e20'"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "100000000000000000000", "a number <= 1000000, found 100000000000000000000"),
        ("OTEL_BSP_SCHEDULE_DELAY", "10000000000000", "a number <= 86400000, found 10000000000000"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "10000000000000", "a number <= 86400000, found 10000000000000"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "-5", "a number >= 1, found -5"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0", "a number >= 1, found 0"),
        ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "carrier-pigeon", "http/protobuf | grpc, found 'carrier-pigeon'"),
        ("OTEL_TRACES_SAMPLER_ARG", "inf", "a finite number, found inf"),
    ],
)
def test_an_extreme_environment_value_is_ignored_alone_and_said_once(tmp_path, var, value, expected):
    with OTLPReceiver() as receiver:
        env = {"HERMES_HOME": str(tmp_path), var: value, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        _extreme(env, var, expected)


def _extreme(env: dict, var: str, expected: str) -> None:
    result = config.load_settings(env, DEVNULL)
    assert [str(p) for p in result.problems] == [f"{var}: expected {expected}"]
    s = result.settings
    assert (s.bsp_max_queue_size, s.bsp_schedule_delay_ms, s.bsp_export_timeout_ms, s.metric_export_interval_ms,
            s.sampler_arg) == (2048, 1000, 10000, 60000, 1.0)
    assert {t.timeout_s for t in s.otlp.values()} == {10.0}
    assert {t.protocol for t in s.otlp.values()} == {"http/protobuf"}
    # The pipeline builds and its worker threads live: nothing else was lost.
    died: list = []
    previous, threading.excepthook = threading.excepthook, lambda args: died.append(args.exc_type)
    try:
        live = telemetry.build(s)
        with live.tracer_provider.get_tracer("t").start_as_current_span("s"):
            pass
        live.shutdown(1)
    finally:
        threading.excepthook = previous
    assert died == []


def test_a_base_endpoint_with_a_query_gets_the_signal_path_before_the_query():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318/otlp/?tenant=a&region=eu"}
    otlp = config.load_settings(env, DEVNULL).settings.otlp
    assert otlp["traces"].endpoint == "https://collector:4318/otlp/v1/traces?tenant=a&region=eu"
    assert otlp["metrics"].endpoint == "https://collector:4318/otlp/v1/metrics?tenant=a&region=eu"


# -- item 13: bad values are said, never accepted silently ----------------------------------------------------------


def test_otel_headers_without_an_equals_sign_are_reported_without_the_value():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
           "OTEL_EXPORTER_OTLP_HEADERS": "authorization Bearer x-SECRET-1"}
    result = config.load_settings(env, DEVNULL)
    assert [str(p) for p in result.problems] == [
        "OTEL_EXPORTER_OTLP_HEADERS: expected comma-separated key=value pairs, found item 1 without '=' "
        "(value not shown)"
    ]
    assert result.settings.otlp["traces"].headers == {}


@pytest.mark.parametrize("value", ["maybe", "1", "yes", "on"])
def test_otel_sdk_disabled_is_read_as_the_sdk_reads_it_and_another_value_is_reported(value):
    """Only `true` disables the SDK (opentelemetry-sdk's own reading): `1`, `yes`, `on` leave it on, and so do we."""
    from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED

    result = config.load_settings({OTEL_SDK_DISABLED: value}, DEVNULL)
    assert result.settings.enabled is True
    assert [str(p) for p in result.problems] == [
        f"OTEL_SDK_DISABLED: expected true | false, found '{value}' (read as false, as the OpenTelemetry SDK reads "
        "it: telemetry stays on)"
    ]


@pytest.mark.parametrize("value", ["true", "TRUE", " True "])
def test_otel_sdk_disabled_true_turns_telemetry_off(value):
    result = config.load_settings({"OTEL_SDK_DISABLED": value}, DEVNULL)
    assert (result.settings.enabled, result.problems) == (False, ())


def test_a_malformed_resource_attribute_is_our_message_not_the_sdks(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "team=ml,oops-no-value,=x")
    result = config.load_settings(dict(os.environ), DEVNULL)
    assert [str(p) for p in result.problems] == [
        "OTEL_RESOURCE_ATTRIBUTES: expected comma-separated key=value pairs, found item 2 without '='",
        "OTEL_RESOURCE_ATTRIBUTES: expected comma-separated key=value pairs, found item 3 without a key",
    ]
    assert result.settings.resource_attributes == {"team": "ml"}
    telemetry.build_resource(result.settings)
    assert "Invalid key value resource attribute pair" not in caplog.text


@pytest.mark.parametrize("items", ["team=ml,bell\x07here", "team=ml,sk-abcdefghijklmnopqrstuvwx", "team=ml,"])
def test_an_item_the_masking_would_change_is_still_left_out(monkeypatch, caplog, items):
    # The masking filter (installed first by build) replaces a record's arguments when it has something to mask:
    # ours goes ahead of it, so it still sees the item (a control character, a token, the empty item after a comma).
    from hermes_otel.redaction import masking

    detector = logging.getLogger("opentelemetry.sdk.resources")
    monkeypatch.setattr(detector, "filters", [])  # as build() leaves it: the masking filter first; restored after
    masking.install(("opentelemetry.sdk.resources",))
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", items)
    result = config.load_settings(dict(os.environ), DEVNULL)
    with caplog.at_level(logging.DEBUG):
        telemetry.build_resource(result.settings)
    assert "resource attribute pair" not in caplog.text


def test_while_our_resource_is_built_only_the_detector_s_lines_quoting_an_item_are_left_out(monkeypatch, caplog):
    # Known by the record's arguments (an item of the variable), not the SDK's words: its other lines still show.
    from hermes_otel.config.env import resource_items_reported_by_us

    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "team=ml,oops-no-value")
    detector = logging.getLogger("opentelemetry.sdk.resources")
    with caplog.at_level(logging.WARNING), resource_items_reported_by_us():
        detector.warning("any words %s: %s", "oops-no-value", "why")
        detector.warning("a detector failed: %s", "its own reason")
    assert [r.getMessage() for r in caplog.records] == ["a detector failed: its own reason"]


RELAY = 'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("[components.config.opentelemetry]\nenabled = \"yes\"\n",
         "components[0].config.opentelemetry.enabled: expected a boolean, found string 'yes'"),
        ("[components.config.opentelemetry]\nendpoints = \"x\"\n",
         "components[0].config.opentelemetry.endpoints: expected an array of tables ([[...endpoints]]), found string 'x'"),
        ("[[components.config.atof.sinks]]\ntype = \"stream\"\nurl = \"http://127.0.0.1:9/x\"\n"
         "headers = { x-a = { b = \"c\" } }\n",
         "components[0].config.atof.sinks[0].headers: expected a table of strings, found table {keys: x-a}"),
    ],
)
def test_relay_values_of_the_wrong_type_are_not_valid(tmp_path, body, problem, capsys):
    path = write(tmp_path, RELAY + body)
    assert cli.main(["config", "validate", str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == f"error: {path}: {problem}"


def test_policy_ignore_still_lists_what_it_ignores(tmp_path, capsys):
    path = write(tmp_path, 'version = 1\n[policy]\nunknown_field = "ignore"\nunsupported_value = "ignore"\n'
                           '[[components]]\nkind = "hermes_otel"\n[components.config]\nsevice_nmae = "typo"\n'
                           'capture_content = "EVERYTHING"\n')
    assert cli.main(["config", "validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ignored: {path}: components[0].config.sevice_nmae: expected a documented key (see `hermes-otel config keys`)"
        ", found an unknown key (did you mean service_name?) ([policy] says ignore)",
        f"ignored: {path}: components[0].config.capture_content: expected NO_CONTENT | SPAN_ONLY | EVENT_ONLY | "
        "SPAN_AND_EVENT, found 'EVERYTHING' ([policy] says ignore)",
        f"{path}: valid; no hermes_otel settings (the defaults apply)",
    ]


def test_validate_says_what_the_file_configures(tmp_path, capsys):
    relay_only = write(tmp_path, RELAY + '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://c:4318"\n'
                                         '[[components.config.atof.sinks]]\ntype = "file"\noutput_directory = "/tmp/x"\n')
    ours = write(tmp_path, OURS + 'service_name = "svc"\notlp = { endpoint = "http://c:4318" }\n', "ours.toml")
    assert cli.main(["config", "validate", str(relay_only)]) == 0
    assert cli.main(["config", "validate", str(ours)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{relay_only}: valid; no hermes_otel settings (the defaults apply); observability component: 1 OpenTelemetry "
        "endpoint, 0 log endpoints, 0 metric endpoints, 1 ATOF sink",
        f"{ours}: valid; hermes_otel component: 2 key(s) set (otlp.endpoint, service_name)",
    ]


def test_enabled_false_is_obeyed_even_when_the_file_is_rejected(tmp_path):
    path = write(tmp_path, 'version = 1\n[[components]]\nkind = "hermes_otel"\nenabled = false\n[components.config]\n'
                           'service_name = 3\n')
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, path)
    assert result.file_rejected and result.settings.enabled is False
    assert result.message() == (
        f"hermes-otel configuration: {path}: components[0].config.service_name: expected a string, found integer 3 "
        "(ignoring this file except its `enabled = false`: telemetry is off; see `hermes-otel config keys`)"
    )


def test_a_header_env_table_alone_is_no_reason_to_chmod(tmp_path):
    path = tmp_path / "plugins.toml"
    path.write_text(RELAY + '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://c:4318"\n'
                            'header_env = { authorization = "RELAY_TOKEN" }\n')
    path.chmod(0o644)
    assert config.load_settings({"RELAY_TOKEN": "t0ken-value"}, path).problems == ()


def test_an_unset_header_env_variable_is_said(tmp_path):
    path = write(tmp_path, RELAY + '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://c:4318"\n'
                                   'header_env = { authorization = "RELAY_TOKEN" }\n')
    assert [str(p) for p in config.load_settings({}, path).problems] == [
        f"{path}: components[0].config.opentelemetry.endpoints[0].header_env.authorization: expected the environment "
        "variable RELAY_TOKEN to be set, found it unset or empty"
    ]


def test_messages_point_at_config_keys_not_at_a_docs_path(tmp_path):
    path = write(tmp_path, OURS + "sevice_nmae = 1\n")
    message = config.load_settings({}, path).message()
    assert "hermes-otel config keys" in message and "docs/configuration.md" not in message


def test_config_keys_lists_every_key_of_the_schema(capsys):
    from hermes_otel.config import relay, schema

    assert cli.main(["config", "keys"]) == 0
    out = capsys.readouterr().out
    for spec in schema.FIELDS:
        assert f"\n  {spec.key}  (" in out
        if spec.env:
            assert f"env {spec.env}" in out
    for _, fields in relay.TABLES:
        for spec in fields:
            assert f"\n  {spec.key}  (" in out
    assert "\n  batch.max_queue_size  (an integer)  default 2048  env OTEL_BSP_MAX_QUEUE_SIZE  range 1..1000000\n" in out


def test_header_values_are_url_decoded_then_trimmed():
    raw = "a=" + urllib.parse.quote(" v1 ") + ",b=x%3Dy"
    assert config.parse_headers(raw) == {"a": "v1", "b": "x=y"}


# -- issue 27, item 3: a configuration file anyone can write is refused --------------------------------------------

NOBODY = 65534


def _as_other_user(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    os.chown(path, NOBODY, NOBODY)


STOLEN_SINK = ('version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
               '[[components.config.atof.sinks]]\ntype = "stream"\nurl = "http://127.0.0.1:9/steal"\n'
               'header_env = {{ x-stolen = "OPENAI_API_KEY" }}\nheader_file = {{ x-file = "{victim}" }}\n')


def test_a_plugins_toml_owned_by_another_user_and_world_writable_is_refused(tmp_path, monkeypatch, capsys):
    victim = tmp_path / "victim-token"
    victim.write_text("VICTIMFILESECRET\n")
    victim.chmod(0o600)
    toml = write(tmp_path, STOLEN_SINK.format(victim=victim))
    toml.chmod(0o666)
    _as_other_user(toml)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-VICTIMENVSECRET0123456789")
    result = config.load_settings()
    assert [str(p) for p in result.problems] == [
        f"{toml}: expected a file only this user can change (owned by this user, not writable by others), found it "
        f"owned by uid {NOBODY}, not by this user (uid 0)"]
    assert result.settings.atof_sinks == ()  # nothing of the file applies
    assert cli.main(["config", "validate", str(toml)]) == 1
    out = capsys.readouterr()
    assert "configuration valid" not in out.out + out.err
    assert "VICTIM" not in out.out + out.err


def test_a_world_writable_plugins_toml_of_our_own_is_refused(tmp_path):
    toml = write(tmp_path, OURS + 'service_name = "x"\n')
    toml.chmod(0o666)
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, toml)
    assert [str(p) for p in result.problems] == [
        f"{toml}: expected a file only this user can change (owned by this user, not writable by others), found it "
        "writable by others (mode 666)"]
    assert result.settings.service_name != "x"


def test_a_header_file_owned_by_another_user_is_refused(tmp_path):
    victim = tmp_path / "victim-token"
    victim.write_text("VICTIMFILESECRET\n")
    victim.chmod(0o600)
    _as_other_user(victim)
    toml = write(tmp_path, STOLEN_SINK.format(victim=victim).replace('header_env = { x-stolen = "OPENAI_API_KEY" }\n',
                                                                       ""))
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, toml)
    assert [str(p) for p in result.problems] == [
        f"{toml}: components[0].config.atof.sinks[0].header_file.x-file: expected a file only this user can change "
        f"(owned by this user, not writable by others), found {victim} owned by uid {NOBODY}, not by this user (uid 0)"]
    assert result.settings.atof_sinks[0].header_file == {"x-file": str(victim)}


# -- issue 27, item 13: port 0 is refused, as documented (1 to 65535) ---------------------------------------------


@pytest.mark.parametrize("var", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_port_0_in_an_endpoint_is_refused(var):
    result = config.load_settings({var: "http://127.0.0.1:0"}, DEVNULL)
    assert [str(p) for p in result.problems] == [
        f"{var}: expected an http:// or https:// URL with a host (and a port from 1 to 65535), found "
        "'http://127.0.0.1:0'"]
    assert "traces" not in result.settings.otlp


def test_port_0_in_a_relay_endpoint_is_refused(tmp_path):
    toml = write(tmp_path, 'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
                           '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://127.0.0.1:0"\n')
    result = config.load_settings({"HERMES_HOME": str(tmp_path)}, toml)
    assert [p.expected for p in result.problems] == [
        "an http:// or https:// URL with a host (and a port from 1 to 65535)"]


# -- issue 27, item 14: a truthful CLI ---------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "key", "near"), [
    ('otlp = { protocl = "grpc" }\n', "otlp.protocl", "otlp.protocol"),
    ('servce_name = "x"\n', "servce_name", "service_name"),
])
def test_an_unknown_key_suggests_the_near_one(tmp_path, body, key, near):
    toml = write(tmp_path, OURS + body)
    (problem,) = config.read_component(toml)[1]
    assert str(problem) == (f"{toml}: components[0].config.{key}: expected a documented key (see `hermes-otel config "
                            f"keys`), found an unknown key (did you mean {near}?)")


def test_an_unknown_relay_key_suggests_the_near_one(tmp_path):
    toml = write(tmp_path, 'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
                           '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://a:1"\n'
                           'timeout_milis = 5\n')
    (problem,) = config.read_component(toml)[1]
    assert problem.key == "components[0].config.opentelemetry.endpoints[0].timeout_milis"
    assert problem.found == "an unknown key (did you mean timeout_millis?)"


def test_a_key_like_no_other_gets_no_suggestion(tmp_path):
    toml = write(tmp_path, OURS + 'zzzzqqq = 1\n')
    (problem,) = config.read_component(toml)[1]
    assert problem.found == "an unknown key"


def test_config_validate_defaults_to_the_file_it_would_load(tmp_path, monkeypatch, capsys):
    toml = write(tmp_path, OURS + 'service_name = "x"\n', name="mine.toml")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    assert cli.main(["config", "validate"]) == 0
    assert capsys.readouterr().out == f"{toml}: valid; hermes_otel component: 1 key(s) set (service_name)\n"
    monkeypatch.delenv("HERMES_OTEL_PLUGINS_TOML")
    assert cli.main(["config", "validate"]) == 0
    assert capsys.readouterr().out == (
        f"hermes-otel config validate: no plugins.toml to validate (HERMES_OTEL_PLUGINS_TOML and "
        f"HERMES_NEMO_RELAY_PLUGINS_TOML are unset and {tmp_path / 'home' / 'plugins.toml'} does not exist): "
        "hermes-otel runs on the environment and defaults\n")


HELP = {
    ("enable",): "Add hermes_otel to Hermes's plugin allow-list (plugins.enabled of $HERMES_HOME/config.yaml)",
    ("disable",): "Move hermes_otel from plugins.enabled to plugins.disabled of $HERMES_HOME/config.yaml",
    ("doctor",): "Check the installation, the enablement in Hermes, the configuration",
    ("spool", "status"): "Per signal: the batches, bytes and oldest age waiting in the spool",
    ("spool", "send"): "Send every spooled batch now, oldest first",
    ("config", "validate"): "Validate a plugins.toml",
}


@pytest.mark.parametrize("command", list(HELP))
def test_every_command_has_help_text(command, capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main([*command, "--help"])
    assert exited.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert HELP[command] in shown
