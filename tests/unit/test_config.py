"""plugins.toml + environment -> Settings: precedence, validation, one clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_otel.config import Problem, find_config_file, load_settings, parse_headers, read_component
from hermes_otel.redaction.masking import masked


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plugins.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)  # as documented for files holding header values (tests/unit/test_security.py checks the warning)
    return path


OURS = 'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'


def test_defaults_write_files_under_hermes_home(tmp_path):
    result = load_settings({"HERMES_HOME": str(tmp_path)})
    s = result.settings
    assert result.problems == () and result.path is None
    assert s.enabled and s.service_name == "hermes-agent"
    assert s.otlp == {}
    assert s.file_signals == frozenset({"traces", "logs", "metrics"})
    assert s.file_directory == tmp_path / "otel"
    assert s.capture_content == "NO_CONTENT"
    assert (s.sampler_name, s.bsp_max_queue_size, s.metric_export_interval_ms) == ("parentbased_always_on", 2048, 60000)


def test_config_file_discovery_order(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    (tmp_path / "plugins.toml").write_text("")
    env = {"HERMES_HOME": str(tmp_path)}
    assert find_config_file(env) == tmp_path / "plugins.toml"
    assert find_config_file({**env, "HERMES_NEMO_RELAY_PLUGINS_TOML": str(b)}) == b
    assert find_config_file({**env, "HERMES_NEMO_RELAY_PLUGINS_TOML": str(b), "HERMES_OTEL_PLUGINS_TOML": str(a)}) == a
    assert find_config_file({"HERMES_HOME": str(tmp_path / "empty")}) is None


def test_file_values_apply_and_env_overrides_them(tmp_path):
    path = write(
        tmp_path,
        OURS + 'service_name = "from-file"\nresource_attributes = { team = "ml" }\n'
        'otlp = { endpoint = "http://collector:4318", headers = { "x-token" = "abc" }, timeout_millis = 5000 }\n'
        "batch = { max_queue_size = 100, max_export_batch_size = 500 }\n",
    )
    s = load_settings({"HERMES_HOME": str(tmp_path)}, path).settings
    assert s.service_name == "from-file"
    assert s.resource_attributes == {"team": "ml"}
    assert s.otlp["traces"].endpoint == "http://collector:4318/v1/traces"
    assert s.otlp["metrics"].endpoint == "http://collector:4318/v1/metrics"
    assert s.otlp["logs"].headers == {"x-token": "abc"}
    assert s.otlp["logs"].timeout_s == 5.0
    assert s.file_signals == frozenset({"traces"})  # an endpoint keeps the local record (the traces file) on
    assert (s.bsp_max_queue_size, s.bsp_max_export_batch_size) == (100, 100)  # batch never exceeds the queue
    assert s.source == str(path)

    env = {
        "HERMES_HOME": str(tmp_path),
        "OTEL_SERVICE_NAME": "from-env",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318/",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces-only:9999/custom",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20xyz",
        "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": "250",
    }
    s = load_settings(env, path).settings
    assert s.service_name == "from-env"
    assert s.otlp["traces"].endpoint == "http://traces-only:9999/custom"  # per-signal endpoint used as-is
    assert s.otlp["logs"].endpoint == "http://other:4318/v1/logs"
    assert (s.otlp["metrics"].endpoint, s.otlp["metrics"].protocol) == ("http://other:4318/", "grpc")
    assert s.otlp["traces"].headers == {"authorization": "Bearer xyz"}
    assert s.otlp["logs"].timeout_s == 0.25
    assert s.otlp["traces"].timeout_s == 5.0


def test_sdk_disabled_always_wins(tmp_path):
    path = write(tmp_path, OURS + 'service_name = "x"\n')
    assert load_settings({"OTEL_SDK_DISABLED": "true"}, path).settings.enabled is False
    disabled = write(tmp_path, 'version = 1\n[[components]]\nkind = "hermes_otel"\nenabled = false\n')
    assert load_settings({}, disabled).settings.enabled is False


def test_capture_mode_from_env_including_legacy_values():
    assert load_settings({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"}).settings.capture_content == "SPAN_ONLY"
    assert load_settings({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}).settings.capture_content == "SPAN_AND_EVENT"
    bad = load_settings({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "everything"})
    assert bad.settings.capture_content == "NO_CONTENT"
    assert [str(p) for p in bad.problems] == [
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: expected NO_CONTENT | SPAN_ONLY | EVENT_ONLY | "
        "SPAN_AND_EVENT, found 'EVERYTHING'"
    ]


def test_bad_env_number_keeps_default_and_says_so():
    result = load_settings({"OTEL_BSP_MAX_QUEUE_SIZE": "lots"})
    assert result.settings.bsp_max_queue_size == 2048
    assert result.problems == (Problem("OTEL_BSP_MAX_QUEUE_SIZE", "", "an integer", "'lots'", fatal=False),)


def test_type_error_rejects_the_file_with_one_message(tmp_path):
    path = write(tmp_path, OURS + 'service_name = "kept?"\nfile = { max_bytes = "big" }\n')
    result = load_settings({"HERMES_HOME": str(tmp_path)}, path)
    assert result.file_rejected
    assert result.settings.service_name == "hermes-agent"  # the whole file is ignored
    assert result.settings.source is None
    assert result.message() == (
        f"hermes-otel configuration: {path}: components[0].config.file.max_bytes: expected an integer, "
        "found string 'big' (ignoring this file; telemetry continues with environment and default settings; "
        "see `hermes-otel config keys`)"
    )


def test_syntax_error_names_the_file(tmp_path):
    path = write(tmp_path, "version = = 1\n")
    (problem,) = load_settings({}, path).problems
    assert problem.source == str(path) and problem.key == "" and problem.expected == "valid TOML"
    assert problem.found.startswith("a syntax error (")


def test_missing_explicit_file_is_reported(tmp_path):
    missing = tmp_path / "nope.toml"
    result = load_settings({"HERMES_OTEL_PLUGINS_TOML": str(missing)})
    assert [str(p) for p in result.problems] == [f"{missing}: expected a readable TOML file (a regular file of at most 1 MiB), found no such file"]


@pytest.mark.parametrize(
    ("policy", "fatal", "reported"),
    [("ignore", False, False), ("warn", False, True), ("error", True, True)],
)
def test_unknown_fields_follow_policy(tmp_path, policy, fatal, reported):
    path = write(
        tmp_path,
        f'version = 1\n[policy]\nunknown_field = "{policy}"\n[[components]]\nkind = "hermes_otel"\n'
        '[components.config]\nservice_name = "svc"\nsevice_nmae = "typo"\n',
    )
    result = load_settings({}, path)
    expected = [Problem(str(path), "components[0].config.sevice_nmae", "a documented key (see `hermes-otel config keys`)",
                        "an unknown key (did you mean service_name?)", fatal, ignored=not reported)]
    assert list(result.problems) == expected  # `ignore` still lists it (for `config validate`), marked ignored
    assert (result.message() is None) == (not reported)  # ... but it is not logged
    assert result.settings.service_name == ("hermes-agent" if fatal else "svc")


def test_unknown_component_policy_and_relay_kinds_are_known(tmp_path):
    path = write(
        tmp_path,
        'version = 1\n[policy]\nunknown_component = "warn"\n'
        '[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
        '[[components]]\nkind = "mystery"\n',
    )
    values, problems = read_component(path)
    assert values == {
        "atof.full_payloads": False,
        "atof.sinks": (),
        "relay.component": {"kind": "observability", "enabled": True, "config": {"version": 4}},
    }
    assert problems == [Problem(str(path), "components[1].kind", "a known component kind", "'mystery'", False)]


def test_unsupported_value_policy(tmp_path):
    text = 'version = 1\n[policy]\nunsupported_value = "{}"\n[[components]]\nkind = "hermes_otel"\n[components.config]\notlp = {{ protocol = "carrier-pigeon" }}\n'
    warn = load_settings({}, write(tmp_path, text.format("warn")))
    assert not warn.file_rejected and warn.settings.otlp == {}
    assert str(warn.problems[0]).endswith("otlp.protocol: expected http/protobuf | grpc, found 'carrier-pigeon'")
    assert load_settings({}, write(tmp_path, text.format("error"))).file_rejected


def test_bad_policy_value(tmp_path):
    path = write(tmp_path, 'version = 1\n[policy]\nunknown_field = "loud"\n')
    assert [str(p) for p in load_settings({}, path).problems] == [
        f"{path}: policy.unknown_field: expected ignore | warn | error, found 'loud'"
    ]


def test_headers_parsing_and_masking():
    assert parse_headers("a=1, B=x%3Dy ,bad, =v") == {"a": "1", "b": "x=y"}
    s = load_settings(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pw@host:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=secret"}
    ).settings
    shown = masked(s)
    assert shown["otlp"]["traces"]["endpoint"] == "https://user:****@host:4318/v1/traces"
    assert shown["otlp"]["traces"]["headers"] == {"api-key": "****"}
    assert "secret" not in repr(shown) and "pw@" not in repr(shown)


def test_observer_hook_exclusions(tmp_path):
    path = write(tmp_path, OURS + 'observer_exclude_hooks = ["pre_tool_call", "post_api_request"]\n')
    assert load_settings({}, path).settings.observer_exclude_hooks == frozenset({"pre_tool_call", "post_api_request"})
    bad = write(tmp_path, OURS + "observer_exclude_hooks = [1]\n")
    assert [str(p) for p in load_settings({}, bad).problems] == [
        f"{bad}: components[0].config.observer_exclude_hooks: expected an array of strings, found array [1]"
    ]


RELAY = """version = 1
[policy]
unknown_field = "warn"
unsupported_value = "warn"

[[components]]
kind = "observability"
enabled = true
[components.config]
version = 4
enable_full_payloads = true
[components.config.atof]
enabled = true
[[components.config.atof.sinks]]
type = "file"
output_directory = "/tmp/atof"
filename = "events.jsonl"
mode = "overwrite"
[[components.config.atof.sinks]]
type = "stream"
url = "http://collector:8080/atof"
transport = "ndjson"
headers = { "x-team" = "ml" }
header_env = { "authorization" = "ATOF_TOKEN" }
timeout_millis = 500
field_name_policy = "replace_dots"
[[components.config.atof.sinks]]
type = "stream"
url = "ws://collector:8081"
transport = "websocket"
[components.config.atif]
enabled = true
"""


def test_relay_observability_component_drives_atof(tmp_path):
    from hermes_otel.exporters.relay.atof import FileSinkConfig, StreamSinkConfig

    path = write(tmp_path, RELAY)
    result = load_settings({"ATOF_TOKEN": "t0ken-value"}, path)
    s = result.settings
    assert s.atof_full_payloads is True
    assert s.atof_sinks == (
        FileSinkConfig(output_directory="/tmp/atof", filename="events.jsonl", mode="overwrite"),
        StreamSinkConfig(url="http://collector:8080/atof", transport="ndjson", headers={"x-team": "ml"},
                         header_env={"authorization": "ATOF_TOKEN"}, timeout_millis=500, field_name_policy="replace_dots"),
    )
    assert [str(p) for p in result.problems] == [
        f"{path}: components[0].config.atif: expected a key hermes-otel honours here (version, enable_full_payloads, "
        "atof, opentelemetry), found a key it does not honour",
        f"{path}: components[0].config.atof.sinks[2].transport: expected http_post | ndjson, found 'websocket'",
    ]
    assert not result.file_rejected
    shown = masked(s)["atof_sinks"]
    assert shown[1] == {"type": "stream", "url": "http://collector:8080/atof", "transport": "ndjson",
                        "headers": {"x-team": "****", "authorization": "****"}}


def test_relay_opentelemetry_endpoints(tmp_path, monkeypatch):
    from hermes_otel.config import OTLPTarget, RelayEndpoint

    path = write(
        tmp_path,
        """version = 1
[policy]
unsupported_value = "warn"
[[components]]
kind = "observability"
[components.config]
version = 4
[components.config.opentelemetry]
enabled = true
[[components.config.opentelemetry.endpoints]]
type = "openinference"
endpoint = "http://otel-collector:6006"
service_name = "support-bot"
header_env = { "api-key" = "PHOENIX_KEY" }
max_queue_size = 100
[[components.config.opentelemetry.endpoints]]
type = "gen_ai"
endpoint = "http://10.0.0.5:4317"
transport = "grpc"
[[components.config.opentelemetry.endpoints]]
type = "everything"
endpoint = "http://x:4318"
[components.config.opentelemetry.logs]
enabled = true
endpoints = ["http://otel-collector:4318"]
[components.config.opentelemetry.metrics]
endpoints = ["http://otel-collector:4318/v1/metrics"]
export_interval_millis = 5000
temporality = "delta"
""",
    )
    result = load_settings({"PHOENIX_KEY": "from-env"}, path)  # header_env reads the environment given
    s = result.settings
    assert s.relay_span_endpoints == (
        RelayEndpoint("openinference", OTLPTarget("http://otel-collector:6006/v1/traces", "http/protobuf",
                                                  {"api-key": "from-env"}, 3.0, "none"),
                      {"service.name": "support-bot"}, 100, 512, 1000),
        # plain HTTP to a non-loopback collector is allowed: an in-cluster collector is normal
        RelayEndpoint("gen_ai", OTLPTarget("http://10.0.0.5:4317", "grpc", {}, 3.0, "none")),
    )
    assert s.relay_log_targets == (OTLPTarget("http://otel-collector:4318/v1/logs", "http/protobuf", {}, 3.0, "none"),)
    assert s.relay_metric_targets == (OTLPTarget("http://otel-collector:4318/v1/metrics", "http/protobuf", {}, 3.0, "none"),)
    assert s.relay_metric_interval_ms == 5000
    assert [str(p) for p in result.problems] == [
        f"{path}: components[0].config.opentelemetry.endpoints[2].type: expected full | gen_ai | openinference, found 'everything'",
        f"{path}: components[0].config.opentelemetry.metrics.temporality: expected cumulative, found 'delta'",
    ]
    assert not result.file_rejected  # rated "warn" here: the rest of the file applies


def test_edge_values_are_reported_not_raised(tmp_path):
    assert [str(p) for p in load_settings({"OTEL_TRACES_SAMPLER_ARG": "1.5"}).problems] == [
        "OTEL_TRACES_SAMPLER_ARG: expected a number <= 1, found 1.5"
    ]
    assert load_settings({"OTEL_TRACES_SAMPLER_ARG": "nan"}).settings.sampler_arg == 1.0
    assert load_settings({"HERMES_HOME": "~no-such-user-here/x"}).settings.file_directory.name == "otel"
    path = write(
        tmp_path,
        'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
        '[[components.config.atof.sinks]]\ntype = "file"\noutput_directory = "/tmp/a"\ncolour = "blue"\n',
    )
    result = load_settings({}, path)  # an unknown sink key is reported and dropped; the sink still works
    assert result.settings.atof_sinks[0].output_directory == "/tmp/a"
    assert [p.key for p in result.problems] == ["components[0].config.atof.sinks[0].colour"]


def test_settings_take_their_defaults_and_values_from_the_schema():
    """One config schema: every schema field names the Settings attribute it fills, whose default is the schema's."""
    import dataclasses

    from hermes_otel.config import Settings
    from hermes_otel.config.schema import FIELDS

    attrs = {f.name: f for f in dataclasses.fields(Settings)}
    filled = [spec for spec in FIELDS if spec.attr]
    assert len({spec.attr for spec in filled}) == len(filled)  # one field per attribute
    defaults = Settings()
    for spec in filled:
        assert spec.attr in attrs, spec.key
        assert getattr(defaults, spec.attr) == spec.setting(spec.default), spec.key
    assert defaults.flush_timeout_s == 1.5 and defaults.observer_exclude_hooks == frozenset({"pre_api_request"})
    assert (defaults.spool_enabled, defaults.spool_max_bytes, defaults.spool_max_age_s) == (True, 100 << 20, 604800.0)
    # The values too: a file value arrives converted in the attribute its field names.
    built = load_settings({"OTEL_BSP_SCHEDULE_DELAY": "70", "OTEL_TRACES_SAMPLER_ARG": "0"}).settings
    assert (built.bsp_schedule_delay_ms, built.sampler_arg) == (70, 0.0) and isinstance(built.sampler_arg, float)
    # Attributes no single key fills are the derived ones, listed here so a new one is a decision.
    derived = set(attrs) - {spec.attr for spec in filled}
    assert derived == {"enabled", "otlp", "file_signals", "file_directory", "spool_directory", "atof_sinks",
                       "atof_full_payloads",
                       "relay_span_endpoints", "relay_log_targets", "relay_metric_targets",
                       "relay_metric_interval_ms", "relay_component", "source"}
