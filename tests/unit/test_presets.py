"""Backend presets (config/presets.py): for each backend, the exact endpoints, protocol, headers, resource and
attribute flavour built from the vendor's own variables, checked against each vendor's documented OTLP shape; the
precedence of explicit settings; what is missing, said without the secret."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from hermes_otel.config import load_settings, presets
from hermes_otel.redaction import masking

NO_FILE = Path(os.devnull)


def settings_for(**env: str):
    result = load_settings(env={"HERMES_HOME": "/tmp/hermes-otel-presets", **env}, path=NO_FILE)
    return result.settings, result.problems


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# backend -> (vendor variables, {signal: URL}, headers, resource attributes, flavour). The URLs and header names are
# those each vendor documents for OTLP (docs/backends.md links them).
EXPECTED = {
    "phoenix": ({"PHOENIX_API_KEY": "px-key", "PHOENIX_PROJECT_NAME": "hermes"},
                {"traces": "http://localhost:6006/v1/traces"}, {"authorization": "Bearer px-key"},
                {"openinference.project.name": "hermes"}, "openinference"),
    "arize": ({"ARIZE_SPACE_ID": "U3BhY2U6MQ==", "ARIZE_API_KEY": "ak-arize", "ARIZE_PROJECT_NAME": "hermes"},
              {"traces": "https://otlp.arize.com/v1/traces"}, {"space_id": "U3BhY2U6MQ==", "api_key": "ak-arize"},
              {"openinference.project.name": "hermes"}, "openinference"),
    "langfuse": ({"LANGFUSE_PUBLIC_KEY": "pk-lf-1", "LANGFUSE_SECRET_KEY": "sk-lf-2"},
                 {"traces": "https://cloud.langfuse.com/api/public/otel/v1/traces"},
                 {"authorization": basic("pk-lf-1", "sk-lf-2"), "x-langfuse-ingestion-version": "4"}, {}, "gen_ai"),
    "langsmith": ({"LANGSMITH_API_KEY": "lsv2_pt_1", "LANGSMITH_PROJECT": "hermes"},
                  {"traces": "https://api.smith.langchain.com/otel/v1/traces"},
                  {"x-api-key": "lsv2_pt_1", "Langsmith-Project": "hermes"}, {}, "gen_ai"),
    "mlflow": ({"MLFLOW_EXPERIMENT_ID": "7"}, {"traces": "http://localhost:5000/v1/traces"},
               {"x-mlflow-experiment-id": "7"}, {}, "gen_ai"),
    "weave": ({"WANDB_API_KEY": "wandb-key-1", "WANDB_ENTITY": "team", "WANDB_PROJECT": "hermes"},
              {"traces": "https://trace.wandb.ai/otel/v1/traces"}, {"wandb-api-key": "wandb-key-1"},
              {"wandb.entity": "team", "wandb.project": "hermes"}, "gen_ai"),
    "opik": ({"OPIK_API_KEY": "opik-key", "OPIK_WORKSPACE": "team", "OPIK_PROJECT_NAME": "hermes"},
             {"traces": "https://www.comet.com/opik/api/v1/private/otel/v1/traces"},
             {"Authorization": "opik-key", "Comet-Workspace": "team", "projectName": "hermes"}, {}, "gen_ai"),
    "honeycomb": ({"HONEYCOMB_API_KEY": "hc-key"},
                  {s: f"https://api.honeycomb.io/v1/{s}" for s in ("traces", "logs", "metrics")},
                  {"x-honeycomb-team": "hc-key"}, {}, "gen_ai"),
    "datadog": ({"DD_AGENT_HOST": "dd-agent"},
                {s: f"http://dd-agent:4318/v1/{s}" for s in ("traces", "logs", "metrics")}, {}, {}, "gen_ai"),
    "grafana-cloud": ({"GRAFANA_CLOUD_OTLP_ENDPOINT": "https://otlp-gateway-prod-eu-west-2.grafana.net/otlp",
                       "GRAFANA_CLOUD_INSTANCE_ID": "123456", "GRAFANA_CLOUD_API_KEY": "glc_token"},
                      {s: f"https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/{s}"
                       for s in ("traces", "logs", "metrics")},
                      {"Authorization": basic("123456", "glc_token")}, {}, "gen_ai"),
    "signoz": ({"SIGNOZ_ENDPOINT": "https://ingest.eu.signoz.cloud:443", "SIGNOZ_INGESTION_KEY": "sz-key"},
               {s: f"https://ingest.eu.signoz.cloud:443/v1/{s}" for s in ("traces", "logs", "metrics")},
               {"signoz-ingestion-key": "sz-key"}, {}, "gen_ai"),
    "uptrace": ({"UPTRACE_DSN": "https://token@api.uptrace.dev?grpc=4317"},
                {s: f"https://api.uptrace.dev/v1/{s}" for s in ("traces", "logs", "metrics")},
                {"uptrace-dsn": "https://token@api.uptrace.dev?grpc=4317"}, {}, "gen_ai"),
    "jaeger": ({}, {"traces": "http://localhost:4318/v1/traces"}, {}, {}, "gen_ai"),
    "tempo": ({}, {"traces": "http://localhost:4318/v1/traces"}, {}, {}, "gen_ai"),
    "collector": ({}, {s: f"http://localhost:4318/v1/{s}" for s in ("traces", "logs", "metrics")}, {}, {}, "gen_ai"),
}


def test_every_preset_is_covered():
    assert set(EXPECTED) == set(presets.NAMES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_request_each_preset_builds(name):
    env, endpoints, headers, resource, flavour = EXPECTED[name]
    settings, problems = settings_for(HERMES_OTEL_BACKEND=name, **env)
    assert problems == ()
    assert settings.backend == name
    assert {s: t.endpoint for s, t in settings.otlp.items()} == endpoints
    assert {t.protocol for t in settings.otlp.values()} == {"http/protobuf"}
    for target in settings.otlp.values():
        assert dict(target.headers) == headers
    # Signals the backend does not ingest stay in the local files.
    # The traces file stays on beside an endpoint (the local record); logs and metrics files only without one.
    assert settings.file_signals == frozenset({"traces"}) | (frozenset({"logs", "metrics"}) - set(endpoints))
    assert {k: v for k, v in settings.resource_attributes.items() if k in resource} == resource
    assert presets.flavour(name) == flavour
    preset = presets.PRESETS[name]
    assert preset.docs.startswith("https://")
    # Every credential is a secret from now on: masked wherever it could be shown; names and ids are not.
    secret = {h.name for h in preset.headers if h.secret}
    for header, value in headers.items():
        shown = masking.mask_text(f"value {value} here")
        assert (value not in shown) == (header in secret), header


def test_explicit_settings_win_key_by_key():
    settings, _ = settings_for(
        HERMES_OTEL_BACKEND="langfuse", LANGFUSE_PUBLIC_KEY="pk", LANGFUSE_SECRET_KEY="sk",
        OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer mine,x-extra=1",
        OTEL_RESOURCE_ATTRIBUTES="service.namespace=team")
    (target,) = settings.otlp.values()
    assert dict(target.headers) == {"x-langfuse-ingestion-version": "4", "authorization": "Bearer mine",
                                    "x-extra": "1"}
    settings, _ = settings_for(HERMES_OTEL_BACKEND="langfuse", LANGFUSE_HOST="http://127.0.0.1:3000",
                               OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:9/custom")
    assert settings.otlp["traces"].endpoint == "http://127.0.0.1:9/custom"
    # A general endpoint is used as usual, for every signal (the preset's headers still go to its signals).
    settings, _ = settings_for(HERMES_OTEL_BACKEND="jaeger", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")
    assert {s: t.endpoint for s, t in settings.otlp.items()} == {
        s: f"http://127.0.0.1:4318/v1/{s}" for s in ("traces", "logs", "metrics")}
    settings, _ = settings_for(HERMES_OTEL_BACKEND="langfuse", LANGFUSE_HOST="http://127.0.0.1:3000/")
    assert settings.otlp["traces"].endpoint == "http://127.0.0.1:3000/api/public/otel/v1/traces"


def test_the_plugins_toml_key(tmp_path):
    doc = tmp_path / "plugins.toml"
    doc.write_text('[[components]]\nkind = "hermes_otel"\n[components.config]\nbackend = "mlflow"\n')
    result = load_settings(env={"HERMES_HOME": str(tmp_path), "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"},
                           path=doc)
    assert result.problems == ()
    assert result.settings.otlp["traces"].endpoint == "http://127.0.0.1:5000/v1/traces"
    assert dict(result.settings.otlp["traces"].headers) == {"x-mlflow-experiment-id": "0"}  # the server requires it


def test_missing_vendor_variables_are_said_without_secrets():
    settings, problems = settings_for(HERMES_OTEL_BACKEND="langfuse", LANGFUSE_PUBLIC_KEY="pk-only")
    assert [str(p) for p in problems] == [
        "backend preset 'langfuse': authorization: expected LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY set, "
        "found unset: the header is not sent"]
    assert all(not p.fatal for p in problems)
    assert dict(settings.otlp["traces"].headers) == {"x-langfuse-ingestion-version": "4"}
    _, problems = settings_for(HERMES_OTEL_BACKEND="grafana-cloud")
    assert [p.key for p in problems] == ["", "Authorization"]
    _, problems = settings_for(HERMES_OTEL_BACKEND="no-such-backend")
    assert [p.source for p in problems] == ["HERMES_OTEL_BACKEND"]


def test_the_schema_names_every_preset_without_loading_their_tables():
    from hermes_otel.config.schema import PRESET_NAMES

    assert PRESET_NAMES == presets.NAMES


def test_a_preset_header_value_with_control_characters_is_refused_by_its_variable():
    """A CRLF pasted into HONEYCOMB_API_KEY would fail every export inside the HTTP client, forever."""
    settings, problems = settings_for(HERMES_OTEL_BACKEND="honeycomb", HONEYCOMB_API_KEY="hcaik_01abc\r\nX-Evil: 1")
    assert [str(p) for p in problems] == [
        "backend preset 'honeycomb': x-honeycomb-team: expected a header value without control characters, found "
        "HONEYCOMB_API_KEY: a value with control characters (value not shown): the header is not sent"]
    assert "x-honeycomb-team" not in settings.otlp["traces"].headers


def test_vendor_credentials_go_only_to_the_vendors_own_endpoint():
    """Langfuse's Basic credentials with a general OTEL_EXPORTER_OTLP_ENDPOINT=http://... (another host): they are
    not sent there, and that is said once (the host only, never the credentials); the preset's other header goes,
    and its clear text is said too. (They used to be sent, with a warning after the fact.)"""
    settings, problems = settings_for(HERMES_OTEL_BACKEND="langfuse", LANGFUSE_PUBLIC_KEY="pk-lf-1",
                                      LANGFUSE_SECRET_KEY="sk-lf-2",
                                      OTEL_EXPORTER_OTLP_ENDPOINT="http://collector.lan:4318")
    assert [str(p) for p in problems] == [
        "backend preset 'langfuse': otlp.traces.endpoint: expected Langfuse's own endpoint for its credentials, "
        "found http://collector.lan:4318: Langfuse's credentials are not sent there (set the endpoint per signal, or "
        "unset the general one)",
        "otlp.traces: headers: expected https for an endpoint that gets headers, found http://collector.lan: the 1 "
        "header(s) (credentials, as a rule) would cross the network in clear text"]
    assert not any("pk-lf-1" in str(p) or "sk-lf-2" in str(p) for p in problems)
    assert (settings.otlp["traces"].endpoint, settings.otlp["traces"].headers) == (
        "http://collector.lan:4318/v1/traces", {"x-langfuse-ingestion-version": "4"})
    assert "authorization" in settings_for(HERMES_OTEL_BACKEND="langfuse", LANGFUSE_PUBLIC_KEY="pk-lf-1",
                                           LANGFUSE_SECRET_KEY="sk-lf-2")[0].otlp["traces"].headers
    # The preset's own endpoint (https), a loopback collector over http: nothing to say.
    assert settings_for(HERMES_OTEL_BACKEND="langfuse", LANGFUSE_PUBLIC_KEY="pk-lf-1",
                        LANGFUSE_SECRET_KEY="sk-lf-2")[1] == ()
    assert settings_for(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318",
                        OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer abc")[1] == ()


def test_the_openinference_flavour_flattens_the_conversation_and_gives_a_turn_as_text():
    """An LLM span's messages (the conventions' schema) as OpenInference's `llm.input_messages.*` /
    `llm.output_messages.*` (role, text, tool calls, the call a result answers); an agent span's single message as
    plain text."""
    import json

    from opentelemetry.sdk.trace import ReadableSpan

    from hermes_otel.exporters.relay.shapes import openinference_attributes

    inputs = [{"role": "user", "parts": [{"type": "text", "content": "list /tmp"}]},
              {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "terminal",
                                               "arguments": {"command": "ls /tmp"}}]},
              {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "a b"}]}]
    outputs = [{"role": "assistant", "parts": [{"type": "text", "content": "two files"}], "finish_reason": "stop"}]
    chat = ReadableSpan(name="chat m", attributes={"gen_ai.operation.name": "chat",
                                                    "gen_ai.input.messages": json.dumps(inputs),
                                                    "gen_ai.output.messages": json.dumps(outputs)})
    attrs = openinference_attributes(chat)
    assert {k: v for k, v in attrs.items() if k.startswith("llm.")} == {
        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "list /tmp",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "terminal",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": '{"command": "ls /tmp"}',
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
        "llm.input_messages.2.message.role": "tool", "llm.input_messages.2.message.content": "a b",
        "llm.input_messages.2.message.tool_call_id": "c1",
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "two files"}
    assert (attrs["input.mime_type"], attrs["openinference.span.kind"]) == ("application/json", "LLM")
    turn = ReadableSpan(name="invoke_agent hermes", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": json.dumps(inputs[:1]),
        "gen_ai.output.messages": json.dumps(outputs)})
    attrs = openinference_attributes(turn)
    assert (attrs["input.value"], attrs["input.mime_type"], attrs["output.value"]) == (
        "list /tmp", "text/plain", "two files")
    assert not any(k.startswith("llm.input_messages") for k in attrs)
