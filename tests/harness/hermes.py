"""Running the real hermes-agent 0.19.0: an isolated HERMES_HOME, the CLI, in-process agents.

Hermes reads HERMES_HOME when its modules are imported (importing
`model_tools` even runs plugin discovery), so in-process use sets it before
the first Hermes import and keeps one home per test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
TEST_PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def install_test_plugins(home: Path) -> None:
    """Copy the third-party middleware plugins of the tests into HERMES_HOME/plugins."""
    import shutil

    for plugin in TEST_PLUGINS.iterdir():
        if (plugin / "plugin.yaml").exists():
            shutil.copytree(plugin, home / "plugins" / plugin.name, dirs_exist_ok=True)


def write_home(home: Path, base_url: str, *, enable: bool = True, plugins: tuple[str, ...] = ()) -> Path:
    """A HERMES_HOME whose model is the fake server; the plugin (and `plugins`) enabled through config.yaml."""
    home.mkdir(parents=True, exist_ok=True)
    lines = [
        "model:",
        "  provider: custom",
        "  default: fake-model",
        f"  base_url: {base_url}",
        "  api_key: sk-fake-test-key",
        "security:",
        "  tirith_enabled: false",
        "auxiliary:",
        "  title_generation:",
        "    enabled: false",
        "approvals:",
        "  mode: manual",  # no auxiliary-model verdicts: they would consume scripted replies
    ]
    if enable or plugins:
        names = (["hermes_otel"] if enable else []) + list(plugins)
        lines += ["plugins:", f"  enabled: [{', '.join(names)}]"]
    (home / "config.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return home


# Off in the tests unless a test is about them: HTTP client spans and Hermes's own log lines as records (both on by
# default) would add to every exact tree and record list.
QUIET_DEFAULTS = {"HERMES_OTEL_HTTP_CLIENT_SPANS": "false", "HERMES_OTEL_HERMES_LOG_LEVEL": "off"}


def at_default(monkeypatch: Any, variable: str) -> None:
    """One of QUIET_DEFAULTS back at the plugin's default, for the in-process plugin (re-registered by Hermes)."""
    from hermes_cli.plugins import discover_plugins

    monkeypatch.delenv(variable)
    discover_plugins(force=True)


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The test process's environment without OTEL_/HERMES_ settings (but QUIET_DEFAULTS), plus `extra`. Nor pytest's
    own variables: Hermes 0.22 behaves as under its own test suite when it sees PYTEST_CURRENT_TEST (its exit then
    waits for a title thread forever)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_", "PYTEST_"))}
    env.update(QUIET_DEFAULTS)
    env.update(HERMES_HOME=str(home), NO_COLOR="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


@dataclass
class ChatResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    exit_s: float | None = None  # from the answer (the last line on stdout) to the end of the process

    @property
    def answer(self) -> str:
        lines = [line for line in self.stdout.strip().splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""


def hermes_cli(*args: str, env: Mapping[str, str], timeout: float = 120) -> ChatResult:
    started = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "hermes"), *args],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return ChatResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


CHAT_ARGS = ("--provider", "custom", "-m", "fake-model", "--max-turns", "4", "-Q", "--yolo", "--source", "tool")


def hermes_chat(prompt: str, *, env: Mapping[str, str], toolsets: str = "terminal", timeout: float = 120) -> ChatResult:
    return hermes_cli("chat", "-q", prompt, "-t", toolsets, *CHAT_ARGS, env=env, timeout=timeout)


def chat_through_plugins(home: Path, plugins: tuple[str, ...], timeout: float = 300) -> tuple[ChatResult, list]:
    """One `hermes chat` that runs `echo lines` in the terminal and answers "lines ok", with the test plugins
    `plugins` enabled beside hermes_otel, exporting to an OTLP receiver: the result and the spans of its turn."""
    from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
    from tests.harness.otlp_receiver import OTLPReceiver

    script = (Reply.tools(ToolCall("terminal", {"command": "echo lines"}, id="call_l")), Reply.text("lines ok"))
    with FakeLLMServer(script) as server, OTLPReceiver() as receiver:
        write_home(home, server.base_url, plugins=plugins)
        install_test_plugins(home)
        env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        # Offline here, 0.22's `hermes chat -q` waits ~30 s after its answer before it exits (with or without us).
        result = hermes_chat("run echo lines", env=env, timeout=timeout)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.answer == "lines ok"
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    return result, spans


def start_chat(prompt: str, *, env: Mapping[str, str], toolsets: str = "terminal") -> subprocess.Popen:
    """`hermes chat -q` started, not waited for (to run several at once, or to kill it)."""
    return subprocess.Popen([str(BIN / "hermes"), "chat", "-q", prompt, "-t", toolsets, *CHAT_ARGS], env=dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def hermes_chat_timed(prompt: str, *, env: Mapping[str, str], toolsets: str = "terminal",
                      timeout: float = 120) -> ChatResult:
    """`hermes chat -q`, also timing its way out: from the answer (its last line on stdout) to the process's end."""
    import threading

    started = time.monotonic()
    proc = start_chat(prompt, env=env, toolsets=toolsets)
    lines: list[tuple[float, str]] = []
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    reader.start()
    for line in proc.stdout:
        lines.append((time.monotonic(), line))
    proc.wait(timeout)
    ended = time.monotonic()
    reader.join(timeout)
    printed = [t for t, line in lines if line.strip()]
    return ChatResult(proc.returncode, "".join(line for _, line in lines), "".join(errors), ended - started,
                      ended - printed[-1] if printed else None)


def run_agent(base_url: str, prompt: str, **overrides: Any) -> dict:
    """One in-process turn of a real AIAgent (HERMES_HOME must already be set)."""
    from run_agent import AIAgent

    kwargs: dict[str, Any] = dict(
        base_url=base_url,
        api_key="sk-fake-test-key",
        provider="custom",
        model="fake-model",
        enabled_toolsets=["terminal"],
        quiet_mode=True,
        skip_context_files=True,
        skip_memory=True,
        max_iterations=4,
        platform="cli",
    )
    kwargs.update(overrides)
    agent = AIAgent(**kwargs)
    return agent.run_conversation(prompt)


def parallel_reads(directory: Path, ids: tuple[str, str]) -> Any:
    """A model reply with two read_file calls on independent paths: Hermes runs them as a concurrent batch."""
    from hermes_otel.testing.fake_llm import Reply, ToolCall

    calls = []
    for n, call_id in enumerate(ids):
        path = directory / f"file{n}.txt"
        path.write_text(f"content {n}")
        calls.append(ToolCall("read_file", {"path": str(path)}, id=call_id))
    return Reply.tools(*calls)
