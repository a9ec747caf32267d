"""Issue 17, items 4 and 6 with the real `hermes chat`: a FIFO as a header file and a queue size of 10^20 neither
hang Hermes nor cost the telemetry; each problem is said once in Hermes's log, by key, without the value."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply
from tests.harness.hermes import clean_env, hermes_cli, write_home

pytestmark = pytest.mark.hermes


def _chat(tmp_path: Path, plugins_toml: str, **env: str) -> tuple[Path, str]:
    """One `hermes chat` turn (60 s at most); the HERMES_HOME and Hermes's agent.log."""
    with FakeLLMServer((Reply.text("still here"),)) as server:
        home = write_home(tmp_path / "home", server.base_url)
        toml = home / "plugins.toml"
        toml.write_text(plugins_toml)
        toml.chmod(0o600)
        result = hermes_cli("chat", "-q", "hi", "--provider", "custom", "-m", "fake-model", "-Q", "--yolo",
                            "--source", "tool", env=clean_env(home, **env), timeout=60)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.answer == "still here"
        assert len(server.chat_requests) == 1
    return home, (home / "logs" / "agent.log").read_text()


def test_a_fifo_as_a_header_file_does_not_hang_hermes(tmp_path: Path):
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo, 0o600)
    home, log = _chat(
        tmp_path,
        'version = 1\n[[components]]\nkind = "observability"\n[components.config]\nversion = 4\n'
        '[[components.config.opentelemetry.endpoints]]\nendpoint = "http://127.0.0.1:9"\n'
        f'header_file = {{ x-api-key = "{fifo}" }}\n'
        '[[components.config.atof.sinks]]\ntype = "stream"\nurl = "http://127.0.0.1:9/atof"\n'
        f'header_file = {{ x-api-key = "{fifo}" }}\n',
    )
    assert log.count("hermes-otel configuration:") == 1, log
    # Hermes's own log redaction replaces the word after "x-api-key: ", so each line is checked in two parts.
    for where in ("opentelemetry.endpoints[0]", "atof.sinks[0]"):
        assert f"components[0].config.{where}.header_file.x-api-key: " in log
    assert log.count(f"readable regular file of at most 64 KiB, found {fifo}: a FIFO, not a regular file") == 2
    assert (home / "otel" / "traces.jsonl").read_text().count('"invoke_agent hermes"') == 1  # telemetry on


def test_an_absurd_queue_size_is_ignored_alone_not_the_whole_plugin(tmp_path: Path):
    home, log = _chat(tmp_path, 'version = 1\n', OTEL_BSP_MAX_QUEUE_SIZE="100000000000000000000")
    assert log.count("hermes-otel configuration:") == 1, log
    assert "OTEL_BSP_MAX_QUEUE_SIZE: expected a number <= 1000000, found 100000000000000000000" in log
    assert "disabled after an internal error" not in log
    assert (home / "otel" / "traces.jsonl").read_text().count('"invoke_agent hermes"') == 1  # telemetry on
