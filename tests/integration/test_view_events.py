"""Issue 19 (item 6, the viewer's part): a real `hermes chat` with two third-party middleware plugins, then
`hermes-otel view` on the embedded default files shows the request rewrites and the failed layer's exception
under their spans, as the README's middleware example promises."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import BIN, clean_env, hermes_chat, install_test_plugins, write_home

pytestmark = pytest.mark.hermes


def test_view_shows_rewrites_and_failures_under_their_spans(tmp_path: Path):
    script = (Reply.tools(ToolCall("terminal", {"command": "echo events"}, id="call_E")), Reply.text("events ok"))
    with FakeLLMServer(script) as server:
        home = write_home(tmp_path / "home", server.base_url, plugins=("mw_alpha", "mw_beta"))
        install_test_plugins(home)
        env = clean_env(home)
        result = hermes_chat("run echo events", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.answer == "events ok"
    shown = subprocess.run([str(BIN / "hermes-otel"), "view", "--ascii", "--width", "200"], env=env,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    lines = [line.rstrip() for line in shown.stdout.splitlines()]
    labels = [re.match(r"^(.*?)\s{2,}\+?\d", line).group(1) for line in lines[1:]]  # the tree column

    def under(span: str) -> list[str]:
        """The event labels right under the first line whose label ends with `span`."""
        start = next(i for i, label in enumerate(labels) if label.endswith(span))
        out = []
        for label in labels[start + 1:]:
            if "* " not in label:
                break
            out.append(label.split("* ", 1)[1])
        return out

    assert under("chat fake-model") == ["hermes.middleware.rewrite", "hermes.middleware.rewrite"]  # alpha, beta
    assert under("execute_tool terminal") == ["hermes.middleware.rewrite", "hermes.middleware.failure"]
    assert under("llm_execution mw_beta") == ["exception"]
    rewrite = next(line for line in lines if "* hermes.middleware.rewrite" in line and "source alpha" in line)
    assert "reason pinned seed" in rewrite and "changed seed" in rewrite
    failure = next(line for line in lines if "* hermes.middleware.failure" in line)
    assert "plugin mw_beta" in failure and "error ValueError" in failure
    exception = next(line for line in lines if "* exception" in line)
    assert "ERR RuntimeError: mw_beta layer is broken" in exception
