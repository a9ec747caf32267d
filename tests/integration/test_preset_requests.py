"""Each backend preset's real export, received on loopback: the path, the headers, the protocol and the attribute
flavour of the request it sends (its vendor's endpoint variable pointed at a local OTLP receiver), and no secret in
any log line or in `hermes-otel doctor`."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind, set_span_in_context

from hermes_otel import telemetry
from hermes_otel.cli import main as cli
from hermes_otel.config import load_settings, presets
from tests.harness.otlp_receiver import OTLPReceiver
from tests.unit.test_presets import EXPECTED

LIVE = sorted(name for name, preset in presets.PRESETS.items() if preset.endpoint_env and name != "datadog")


def _env(name: str, base: str, home: Path) -> dict[str, str]:
    preset = presets.PRESETS[name]
    env = {"HERMES_HOME": str(home), "HERMES_OTEL_BACKEND": name, **EXPECTED[name][0]}
    env[preset.endpoint_env[0]] = base
    return env


def _secrets(name: str) -> list[str]:
    preset = presets.PRESETS[name]
    env = EXPECTED[name][0]
    return [env[var] for header in preset.headers if header.secret for var in header.env if var in env]


def test_datadog_is_the_agent_and_has_no_variable_for_a_port():
    assert presets.PRESETS["datadog"].endpoint_template == "http://{}:4318"


@pytest.mark.parametrize("name", LIVE)
def test_each_preset_sends_what_its_backend_reads(name, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with OTLPReceiver() as receiver:
        base = receiver.endpoint.rstrip("/")
        result = load_settings(env=_env(name, base, tmp_path), path=Path(os.devnull))
        assert result.problems == ()
        live = telemetry.build(result.settings)
        try:
            tracer = live.tracer
            root = tracer.start_span("invoke_agent hermes", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "s1"})
            chat = tracer.start_span("chat fake-model", context=set_span_in_context(root), kind=SpanKind.CLIENT,
                                     attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model",
                                                 "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 7})
            chat.end()
            root.end()
            assert live.force_flush(5)
            spans = receiver.wait_for_spans(lambda s: len(s) >= 2, timeout=10)
        finally:
            live.shutdown(2)
        preset = presets.PRESETS[name]
        _, endpoints, headers, resource, flavour = EXPECTED[name]
        path = preset.path + "/v1/traces"
        assert set(receiver.paths) <= {preset.path + f"/v1/{s}" for s in preset.signals}
        assert path in receiver.paths
        sent = receiver.headers[receiver.paths.index(path)]
        assert sent["content-type"] == "application/x-protobuf"
        assert {k.lower(): v for k, v in headers.items()} == {k: sent[k] for k in map(str.lower, headers)}
        chat = next(s for s in spans if s.name == "chat fake-model")
        assert {k: chat.resource[k] for k in resource} == resource
        if flavour == "openinference":
            assert (chat.attributes["openinference.span.kind"], chat.attributes["llm.model_name"],
                    chat.attributes["llm.token_count.total"]) == ("LLM", "fake-model", 18)
            assert chat.resource["openinference.project.name"] == resource.get(
                "openinference.project.name", "hermes-agent")
        else:
            assert not any(k.startswith(("openinference.", "llm.")) for k in chat.attributes)
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in _secrets(name):
        assert secret not in logged


@pytest.mark.parametrize("name", ["langfuse", "phoenix", "weave"])
def test_doctor_reports_the_preset_without_its_secrets(name, tmp_path, monkeypatch, capsys):
    for key in [k for k in os.environ if k.startswith(("OTEL_", "HERMES_"))]:
        monkeypatch.delenv(key)
    for key, value in _env(name, "http://127.0.0.1:9", tmp_path).items():
        monkeypatch.setenv(key, value)
    cli.main(["doctor"])
    out = capsys.readouterr().out
    preset = presets.PRESETS[name]
    (line,) = [line for line in out.splitlines() if "backend preset" in line]
    assert line.strip().startswith(f"ok    backend preset {name} ({preset.title}): traces -> http://127.0.0.1:9")
    assert f"attributes: {preset.flavour}; docs: {preset.docs}" in line
    for secret in _secrets(name):
        assert secret not in out
