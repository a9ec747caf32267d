"""Two losses of issue 16, each forced rather than hoped for: the local files cut short because another endpoint
was failing, and the turn in flight lost when telemetry is turned off mid-turn."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.fault_servers import refused_endpoint
from tests.harness.hermes import clean_env, hermes_chat, run_agent, write_home

pytestmark = [pytest.mark.hermes, pytest.mark.usefixtures("at_the_defaults")]

SLOW_DISK = Path(__file__).resolve().parents[1] / "harness" / "slow_disk"
TURN = ["chat fake-model", "chat fake-model", "execute_tool terminal", "invoke_agent hermes"]


def test_the_files_get_the_whole_turn_while_another_endpoint_is_dead(llm, tmp_path):
    """`file = { enabled = true }` next to a dead OTLP endpoint, on a slow disk (each write to traces.jsonl takes
    0.3 s): the failing endpoint must not cut the files' flush at exit; the file holds the whole turn."""
    home = write_home(tmp_path / "home", llm.base_url)
    (home / "plugins.toml").write_text('[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                                       'file = { enabled = true }\n')
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo files"}, id="call_files")), Reply.text("done files"))
    path = os.pathsep.join(p for p in (str(SLOW_DISK), os.environ.get("PYTHONPATH", "")) if p)
    result = hermes_chat("run echo files", env=clean_env(
        home, OTEL_EXPORTER_OTLP_ENDPOINT=refused_endpoint(), HERMES_OTEL_TEST_SLOW_TRACES_WRITE_S="0.3",
        PYTHONPATH=path))
    assert result.returncode == 0 and result.answer == "done files", result.stderr[-3000:]
    names = [span["name"] for line in (home / "otel" / "traces.jsonl").read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    assert sorted(names) == TURN


@pytest.mark.parametrize("how", ["OTEL_SDK_DISABLED", "plugin disabled"])
def test_turning_telemetry_off_mid_turn_ends_and_exports_the_turn(how, traced, llm, receiver, tmp_path):
    """Telemetry goes off while a turn runs (its first model call and its tool done, the second model call in
    flight): the turn ends (`hermes.turn.end_reason`) and what it had is exported now, not lost."""
    from hermes_cli.plugins import discover_plugins

    asked = len(llm.chat_requests)
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo off"}, id="call_off")),
             Reply(content="late", delay_s=5.0))  # outlasts the reload below, even on a loaded machine
    answers: list[dict] = []
    turn = threading.Thread(target=lambda: answers.append(run_agent(llm.base_url, "run echo off")))
    turn.start()
    deadline = time.monotonic() + 30
    while len(llm.chat_requests) < asked + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(llm.chat_requests) == asked + 2  # the second model call is in flight
    home = Path(os.environ["HERMES_HOME"])
    with pytest.MonkeyPatch.context() as mp:
        try:
            if how == "OTEL_SDK_DISABLED":
                mp.setenv("OTEL_SDK_DISABLED", "true")
            else:
                write_home(home, llm.base_url, enable=False)
            discover_plugins(force=True)
            assert traced.current_tracker() is None
            turn.join(30)
            assert answers and answers[0]["final_response"] == "late"  # Hermes unaffected
            spans = receiver.wait_for_spans(
                lambda s: {"invoke_agent hermes", "execute_tool terminal", "chat fake-model"} <= {x.name for x in s},
                timeout=10)
        finally:
            write_home(home, llm.base_url)
    discover_plugins(force=True)
    (root,) = [s for s in spans if s.name == "invoke_agent hermes"]
    reason = "disabled" if how == "OTEL_SDK_DISABLED" else "plugin_unloaded"
    assert root.attributes["hermes.turn.end_reason"] == reason
    first_chat = [s for s in spans if s.name == "chat fake-model" and s.trace_id == root.trace_id]
    assert first_chat and first_chat[0].attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert {s.trace_id for s in spans if s.name == "execute_tool terminal"} == {root.trace_id}
