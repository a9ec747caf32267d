"""Auxiliary model calls on the release under test (`make test-matrix` runs every supported one): Hermes's own
title generator, run in a fresh process with the plugin loaded by Hermes, makes one auxiliary call through
`agent.auxiliary_client.call_llm` (a name it bound at import); it must be one `chat {model}` span with
`hermes.llm.purpose=title_generation` and the call's tokens. No turn is open: it is a trace of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, Usage
from tests.harness.hermes import clean_env, write_home
from tests.harness.otlp_receiver import OTLPReceiver

pytestmark = pytest.mark.hermes

TITLE = Usage(31, 4)
SCRIPT = """
import json, sys
import model_tools  # Hermes discovers and registers its plugins (ours among them)
from agent.title_generator import generate_title
from hermes_otel import runtime
runtime_main = {"model": "fake-model", "provider": "custom", "base_url": sys.argv[1], "api_key": "sk-fake-test-key",
                "api_mode": "chat_completions"}
print(json.dumps(generate_title("name this chat", "it is named", main_runtime=runtime_main)))
runtime.flush(5)
"""


def test_a_title_is_one_auxiliary_chat_span(tmp_path: Path) -> None:
    with FakeLLMServer([Reply(content="A Named Chat", usage=TITLE)]) as server, OTLPReceiver() as receiver:
        home = write_home(tmp_path / "home", server.base_url)
        config = home / "config.yaml"
        config.write_text(config.read_text().replace("enabled: false", "enabled: true"))  # titles on
        env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="50")
        run = subprocess.run([sys.executable, "-c", SCRIPT, server.base_url], env=env, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.strip().splitlines()[-1] == '"A Named Chat"'
        spans = receiver.wait_for_spans(lambda s: any(x.name.startswith("chat") for x in s), timeout=15)
    (span,) = spans
    a = span.attributes
    assert (span.name, span.kind, span.parent_span_id) == ("chat fake-model", "CLIENT", None)
    assert a["hermes.llm.purpose"] == "title_generation"
    assert (a["gen_ai.operation.name"], a["gen_ai.request.model"], a["gen_ai.response.model"]) == (
        "chat", "fake-model", "fake-model")
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (TITLE.prompt_tokens,
                                                                                  TITLE.completion_tokens)
    assert (a["server.address"], a["server.port"]) == ("127.0.0.1", server.port)
    # Priced like a main-loop attempt: here from Hermes's cache only, which holds no prices for this endpoint.
    assert (a["hermes.usage.cost_status"], a["hermes.usage.cost_reason"]) == ("unknown", "not_cached")
