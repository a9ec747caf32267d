"""Issue 27, item 13: `NO_COLOR` and `TERM=dumb` are honoured on a real terminal (a pseudo-terminal here), and
`--color always` still colours; `view` of a real traces file."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_otel.exporters.file.otlp_json import encode_spans_json
from tests.unit.test_spool_store import spans

ROOT = Path(__file__).resolve().parents[2]
ESC = b"\x1b["


def _view_on_a_terminal(tmp_path: Path, extra_env: dict[str, str], *args: str) -> bytes:
    traces = tmp_path / "traces.jsonl"
    traces.write_text(json.dumps(encode_spans_json(spans(3))) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "FORCE_COLOR")}
    env.update({"PYTHONPATH": str(ROOT), "HERMES_HOME": str(tmp_path / "home"), "TERM": "xterm-256color",
                **extra_env})
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "hermes_otel.cli.main", "view", str(traces), "--width", "100",
                                 *args], env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the program closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert proc.wait(timeout=30) == 0, output
    finally:
        os.close(leader)
    assert b"invoke_agent hermes" in output
    return output


def test_a_terminal_gets_colour_by_default(tmp_path):
    assert ESC in _view_on_a_terminal(tmp_path, {})


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"NO_COLOR": "yes please"}, {"TERM": "dumb"}])
def test_no_color_and_a_dumb_terminal_get_no_escape_sequences(tmp_path, env):
    assert ESC not in _view_on_a_terminal(tmp_path, env)


def test_an_empty_no_color_is_not_set_and_color_always_still_colours(tmp_path):
    assert ESC in _view_on_a_terminal(tmp_path, {"NO_COLOR": ""})
    assert ESC in _view_on_a_terminal(tmp_path, {"NO_COLOR": "1"}, "--color", "always")
