"""Issue 17, item 14: `hermes-otel doctor | head -3` and `config validate FILE | head -0` end quietly, without a
BrokenPipeError traceback, whatever the command prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "hermes_otel.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HERMES_"))}
    env["HERMES_HOME"] = str(tmp_path)
    return env


@pytest.mark.parametrize("command", [["doctor"], ["config", "validate", "{toml}"], ["config", "keys"], ["view", "{otel}"]])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, command):
    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nsevice_nmae = 1\n')
    otel = tmp_path / "otel"
    otel.mkdir()
    (otel / "traces.jsonl").write_text(
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c",'
        '"spanId":"b7ad6b7169203331","name":"invoke_agent hermes","startTimeUnixNano":"1","endTimeUnixNano":"2"}]}]}]}\n')
    args = [a.format(toml=toml, otel=otel) for a in command]
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path))
    proc.stdout.close()  # the reader is gone before the command writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141
    assert err == ""


def test_head_after_doctor_prints_no_traceback(tmp_path):
    result = subprocess.run(f"{' '.join(CLI)} doctor | head -3", shell=True, capture_output=True, text=True,
                            env=_env(tmp_path), timeout=60)
    assert len(result.stdout.splitlines()) == 3
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr
