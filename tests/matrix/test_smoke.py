"""The real-Hermes smoke, run by `make test-matrix` on every supported release (each in a venv of its own).

A fresh HERMES_HOME, the sample middleware plugin of `hermes-otel demo`, `hermes-otel enable` (the one
command that works everywhere), one `hermes chat` CLI run with a tool call, exported over OTLP/HTTP to a
real receiver: the span tree must be exactly what that release supports. Also runs in `make test` (on
the reference release).
"""

from __future__ import annotations

import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from hermes_otel.cli.demo import DEMO_PLUGIN
from hermes_otel.cli.enable import SUPPORTED, support
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import BIN, clean_env, hermes_chat, write_home
from tests.harness.otlp_receiver import OTLPReceiver
from tests.harness.trees import tree

pytestmark = pytest.mark.hermes

HERMES = metadata.version("hermes-agent")
HAS_MIDDLEWARE = HERMES != "0.16.0"
SCRIPT = (Reply.tools(ToolCall("terminal", {"command": "echo matrix"}, id="call_m")), Reply.text("matrix ok"))


def hermes_otel(*args: str, env) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hermes-otel"), *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_release_under_test_is_a_supported_one() -> None:
    assert HERMES in SUPPORTED


def test_enable_then_a_cli_run_exports_the_span_tree(tmp_path: Path) -> None:
    with FakeLLMServer(SCRIPT) as server, OTLPReceiver() as receiver:
        home = write_home(tmp_path / "home", server.base_url, enable=False, plugins=("demo_middleware",))
        shutil.copytree(DEMO_PLUGIN, home / "plugins" / "demo_middleware")
        env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)

        enabled = hermes_otel("enable", env=env)
        assert enabled.returncode == 0, enabled.stdout + enabled.stderr
        via_hermes = "ran `hermes plugins enable hermes_otel --no-allow-tool-override`: ✓ Plugin hermes_otel enabled."
        edited = f"added hermes_otel to plugins.enabled in {home / 'config.yaml'}"
        assert (via_hermes if HERMES >= "0.18" else edited) in enabled.stdout, enabled.stdout

        result = hermes_chat("run echo matrix", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.answer == "matrix ok"
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=10)
        logs = receiver.wait_for_logs(lambda r: any(x.event_name.endswith("on_session_end") for x in r))

    if HAS_MIDDLEWARE:  # full telemetry: the sample plugin's execution layer, its rewrite on each chat span
        expected = ["chat fake-model",
                    ["execute_tool terminal", [["tool_execution demo_middleware", ["tool_call terminal"]]]],
                    "chat fake-model"]
    else:  # hooks-only: turn, chat and tool spans from the observer hooks
        expected = ["chat fake-model", "execute_tool terminal", "chat fake-model"]
    assert tree(spans) == [["invoke_agent hermes", expected]]
    chats = [s for s in spans if s.name == "chat fake-model"]
    assert [[name for name, _ in s.events] for s in chats] == (
        [["hermes.middleware.rewrite"]] * 2 if HAS_MIDDLEWARE else [[], []])
    assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in chats)
    tool = next(s for s in spans if s.name == "execute_tool terminal")
    assert (tool.attributes["gen_ai.tool.call.id"], tool.attributes["hermes.tool.status"]) == ("call_m", "ok")
    # Every observer record of the turn carries its trace.
    trace_ids = {s.trace_id for s in spans}
    hooks = [r for r in logs if r.attributes.get("hermes.observer.hook") in ("pre_llm_call", "post_tool_call")]
    assert len(hooks) == 2 and {r.trace_id for r in hooks} == trace_ids

    log = (home / "logs" / "agent.log").read_text() if (home / "logs" / "agent.log").exists() else ""
    mode_lines = [line for line in (result.stderr + log).splitlines() if "hermes-otel hooks:" in line]
    assert len(mode_lines) == (0 if HAS_MIDDLEWARE else 1), mode_lines


def test_doctor_says_which_telemetry_this_hermes_gets(tmp_path: Path) -> None:
    home = write_home(tmp_path / "home", "http://127.0.0.1:9/v1")
    doctor = hermes_otel("doctor", env=clean_env(home))
    line = support(HERMES).text
    assert f"  ok    {line}" in doctor.stdout.splitlines()
    assert ("full telemetry" if HAS_MIDDLEWARE else "hooks-only telemetry") in line
    # Every private name hermes-otel uses for this release is there (hermes_otel/hermes_compat/).
    assert "  ok    every Hermes private name hermes-otel uses was found" in doctor.stdout.splitlines()
