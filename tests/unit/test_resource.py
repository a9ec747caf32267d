"""The resource and the instrumentation scope, by the book (issue 25, item 1.2): `OTEL_SERVICE_NAME` >
`OTEL_RESOURCE_ATTRIBUTES` > plugins.toml > our default, and the schema URL of the conventions we emit."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_otel import telemetry
from hermes_otel.config import load_settings
from hermes_otel.semconv import SCHEMA_URL

TOML = '''version = 1
[[components]]
kind = "hermes_otel"
[components.config]
service_name = "from-toml"
'''


@pytest.mark.parametrize(("env", "toml", "expected"), [
    ({}, False, "hermes-agent"),
    ({}, True, "from-toml"),
    ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes,team=ml"}, False, "from-attributes"),
    ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes"}, True, "from-attributes"),
    ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes", "OTEL_SERVICE_NAME": "from-name"}, True,
     "from-name"),
])
def test_service_name_precedence(tmp_path: Path, monkeypatch, env, toml, expected) -> None:
    for key in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "plugins.toml"
    path.write_text(TOML if toml else "version = 1\n")
    path.chmod(0o600)
    settings = load_settings(env={**env, "HERMES_HOME": str(tmp_path)}, path=path).settings
    resource = telemetry.build_resource(settings)
    assert resource.attributes["service.name"] == expected
    assert resource.schema_url == SCHEMA_URL
    if "team=ml" in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        assert resource.attributes["team"] == "ml"


def test_resource_attributes_merge_per_key_defaults_file_environment_service_name(tmp_path: Path, monkeypatch) -> None:
    """defaults < plugins.toml < OTEL_RESOURCE_ATTRIBUTES < OTEL_SERVICE_NAME, key by key: a variable that names one
    key leaves the file's other keys in place."""
    env = {"OTEL_RESOURCE_ATTRIBUTES": "region=eu,team=platform", "OTEL_SERVICE_NAME": "from-name"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "plugins.toml"
    path.write_text(TOML + 'resource_attributes = { team = "ml", "deployment.environment.name" = "prod" }\n')
    path.chmod(0o600)
    settings = load_settings(env={**env, "HERMES_HOME": str(tmp_path)}, path=path).settings
    attributes = telemetry.build_resource(settings).attributes
    assert {k: attributes[k] for k in ("service.name", "team", "region", "deployment.environment.name")} == {
        "service.name": "from-name", "team": "platform", "region": "eu", "deployment.environment.name": "prod"}
    assert attributes["hermes.otel.version"]  # ours stay under all of them


def test_every_tracer_meter_and_logger_carries_the_schema_url(tmp_path: Path) -> None:
    settings = load_settings(env={"HERMES_HOME": str(tmp_path), "OTEL_TRACES_EXPORTER": "none"},
                             path=tmp_path / "absent.toml").settings
    built = telemetry.build(settings)
    try:
        assert built.tracer._instrumentation_scope.schema_url == SCHEMA_URL  # noqa: SLF001 - the SDK's own record
        assert built.meter._instrumentation_scope.schema_url == SCHEMA_URL  # noqa: SLF001
        assert built.logger._instrumentation_scope.schema_url == SCHEMA_URL  # noqa: SLF001
    finally:
        built.shutdown(1.0)


def test_the_schema_url_is_the_newest_of_the_registry_our_names_are_checked_against() -> None:
    from opentelemetry.semconv.schemas import Schemas

    newest = max(Schemas, key=lambda s: tuple(int(p) for p in s.value.rsplit("/", 1)[1].split(".")))
    assert SCHEMA_URL == newest.value
