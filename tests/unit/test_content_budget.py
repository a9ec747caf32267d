"""Issue 48: the whole conversation on request. The captured-content budget per attribute (`capture_max_chars`,
0 for no limit), capped by the standard attribute-length variables, and the SDK's span limits that never cut the
budget's JSON mid-document."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel.tracking import calls

LIMITS = ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")


@pytest.fixture
def settings(tmp_path, monkeypatch):
    for name in LIMITS:
        monkeypatch.delenv(name, raising=False)
    base = config.load_settings({"HERMES_HOME": str(tmp_path)}, Path(os.devnull)).settings
    return dataclasses.replace(base, capture_content="SPAN_ONLY")


def test_the_default_budget_holds_a_typical_turn_whole_and_the_sdk_does_not_cut_it(settings):
    assert telemetry.content_budget(settings) == 512 * 1024
    assert telemetry.span_limits(settings).max_attribute_length == 512 * 1024
    off = dataclasses.replace(settings, capture_content="NO_CONTENT")
    assert telemetry.span_limits(off).max_attribute_length == telemetry.ATTRIBUTE_LENGTH_LIMIT  # no content: 16 KiB


def test_no_limit(settings):
    unlimited = dataclasses.replace(settings, capture_max_chars=0)
    assert telemetry.content_budget(unlimited) == telemetry.NO_LIMIT
    assert telemetry.span_limits(unlimited).max_attribute_length is None
    text = "x" * 3_000_000
    inputs = calls.content_attributes({"messages": [{"role": "user", "content": text}]}, None,
                                      telemetry.content_budget(unlimited) // 2)["gen_ai.input.messages"]
    assert json.loads(inputs)[0]["parts"][0]["content"] == text


@pytest.mark.parametrize("variable", LIMITS)
def test_the_standard_variables_cap_the_budget(settings, monkeypatch, variable):
    monkeypatch.setenv(variable, "8000")
    assert telemetry.content_budget(settings) == 8000
    assert telemetry.span_limits(settings).max_span_attribute_length == 8000  # the SDK reads it itself
    history = [{"role": "user", "content": "y" * 20_000}, {"role": "assistant", "content": "ok"}]
    text = calls.content_attributes({"messages": history}, None, 8000 // 2)["gen_ai.input.messages"]
    assert len(text) <= 8000 and json.loads(text)[-1]["parts"][0]["content"] == "ok"


def test_the_budget_is_a_plugins_toml_key(tmp_path):
    toml = tmp_path / "plugins.toml"
    toml.write_text('[[components]]\nkind = "hermes_otel"\n[components.config]\ncapture_max_chars = 65536\n')
    assert config.load_settings({"HERMES_HOME": str(tmp_path)}, toml).settings.capture_max_chars == 65536
