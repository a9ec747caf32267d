"""The presets against the real backends that install from PyPI here: a real Hermes 0.19.0 turn (a tool call, then
the answer), content capture on, sent with nothing but `HERMES_OTEL_BACKEND` and the vendor's own variables, and read
back through each backend's own API: Arize Phoenix (REST spans: OpenInference kinds, parentage, tokens, the model
call's input and output) and MLflow's tracking server (its trace search and span store: span types, parentage,
token usage, the model call's inputs and outputs)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage
from tests.harness.backends import MLflow, Phoenix, wait_until
from tests.harness.genai_schema import check_messages, openinference_messages
from tests.harness.hermes import write_home

pytestmark = pytest.mark.hermes

PROJECT = "hermes-preset"
FIRST, FINAL = Usage(40, 12), Usage(90, 5)
NAMES = ["invoke_agent hermes", "chat fake-model", "execute_tool terminal", "chat fake-model"]


@contextlib.contextmanager
def a_turn_through(llm: FakeLLMServer, **env: str) -> Iterator[dict]:
    """One real turn with the plugin configured by `env` only (the preset and the vendor's variables)."""
    from hermes_cli.plugins import discover_plugins
    from run_agent import AIAgent

    from hermes_otel import runtime

    home = Path(os.environ["HERMES_HOME"])
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
                           "OTEL_BSP_SCHEDULE_DELAY": "50", **env}.items():
            mp.setenv(key, value)
        write_home(home, llm.base_url)
        discover_plugins(force=True)
        try:
            llm.push(Reply(tool_calls=(ToolCall("terminal", {"command": "echo preset"}, id="call_T"),), usage=FIRST),
                     Reply(content="preset done", usage=FINAL))
            agent = AIAgent(base_url=llm.base_url, api_key="sk-fake-test-key", provider="custom", model="fake-model",
                            enabled_toolsets=["terminal"], quiet_mode=True, skip_context_files=True,
                            skip_memory=True, max_iterations=4, platform="cli")
            result = agent.run_conversation("run the preset")
            assert result["final_response"] == "preset done"
            runtime.flush(5)
            yield {"session": agent.session_id}
        finally:
            mp.undo()
            discover_plugins(force=True)


def test_phoenix_preset_shows_the_turn_through_phoenixs_api(llm):
    phoenix = Phoenix()
    try:
        phoenix.start()
        with a_turn_through(llm, HERMES_OTEL_BACKEND="phoenix", PHOENIX_COLLECTOR_ENDPOINT=phoenix.url,
                            PHOENIX_PROJECT_NAME=PROJECT) as turn:
            spans = wait_until(lambda: (s := phoenix.spans(PROJECT)) and len(s) >= 4 and s, 30, "the turn in Phoenix")
    finally:
        phoenix.stop()
    spans = sorted(spans, key=lambda s: s["start_time"])
    assert [s["name"] for s in spans] == NAMES
    root, first, tool, final = spans
    assert root["parent_id"] is None
    assert {s["parent_id"] for s in (first, tool, final)} == {root["context"]["span_id"]}
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    assert [s["span_kind"] for s in spans] == ["AGENT", "LLM", "TOOL", "LLM"]
    assert root["attributes"]["session.id"] == turn["session"]
    for chat, usage in ((first, FIRST), (final, FINAL)):
        a = chat["attributes"]
        assert (a["llm.token_count.prompt"], a["llm.token_count.completion"], a["llm.token_count.total"]) == (
            usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens + usage.completion_tokens)
        assert a["llm.model_name"] == "fake-model"
    # The model calls as conversations (content capture on), as Phoenix shows them: role cards, the tool call,
    # its result, the answer.
    sent = openinference_messages(final["attributes"], "llm.input_messages")
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("You are Hermes")
    assert sent[-3:] == [
        {"role": "user", "content": "run the preset", "tool_calls": [], "tool_call_id": None},
        {"role": "assistant", "content": None, "tool_calls": [("terminal", {"command": "echo preset"})],
         "tool_call_id": None},
        {"role": "tool", "content": sent[-1]["content"], "tool_calls": [], "tool_call_id": "call_T"}]
    assert json.loads(sent[-1]["content"])["output"] == "preset"
    assert openinference_messages(final["attributes"], "llm.output_messages") == [
        {"role": "assistant", "content": "preset done", "tool_calls": [], "tool_call_id": None}]
    assert openinference_messages(first["attributes"], "llm.output_messages") == [
        {"role": "assistant", "content": None, "tool_calls": [("terminal", {"command": "echo preset"})],
         "tool_call_id": None}]
    assert final["attributes"]["llm.finish_reason"] == "stop"  # Phoenix's own reading of our messages
    # The turn's question and answer, as text on the agent span (Phoenix's spans table shows them).
    assert (root["attributes"]["input.value"], root["attributes"]["output.value"]) == ("run the preset", "preset done")


def test_mlflow_preset_shows_the_turn_through_mlflows_api(llm):
    server = MLflow()
    try:
        server.start()
        with a_turn_through(llm, HERMES_OTEL_BACKEND="mlflow", MLFLOW_TRACKING_URI=server.url) as turn:
            (info,) = wait_until(lambda: server.traces("0"), 30, "the turn in MLflow")
            spans = wait_until(lambda: (s := server.spans(info["trace_id"])) and len(s) >= 4 and s, 30,
                               "every span in MLflow")
            total = FIRST.prompt_tokens + FINAL.prompt_tokens + FIRST.completion_tokens + FINAL.completion_tokens
            # MLflow sums the trace's usage over the spans it has: once all are in, the turn's.
            (info,) = wait_until(lambda: [t for t in server.traces("0") if json.loads(
                t["trace_metadata"]["mlflow.trace.tokenUsage"])["total_tokens"] == total], 30, "the turn's usage")
    finally:
        server.stop()
    assert json.loads(info["trace_metadata"]["mlflow.trace.tokenUsage"]) == {
        "input_tokens": FIRST.prompt_tokens + FINAL.prompt_tokens,
        "output_tokens": FIRST.completion_tokens + FINAL.completion_tokens,
        "total_tokens": total, "cache_read_input_tokens": 0}
    assert info["trace_metadata"]["mlflow.trace.session"] == turn["session"]  # from gen_ai.conversation.id
    assert info["tags"]["service.name"] == "hermes-agent"
    spans = sorted(spans, key=lambda s: s["start_time_unix_nano"])
    assert [s["name"] for s in spans] == NAMES
    root, first, tool, final = spans
    assert root["parent_span_id"] is None
    assert {s["parent_span_id"] for s in (first, tool, final)} == {root["span_id"]}
    attrs = [{k: json.loads(v) if k.startswith("mlflow.") else v for k, v in s["attributes"].items()} for s in spans]
    assert [a["mlflow.spanType"] for a in attrs] == ["AGENT", "CHAT_MODEL", "TOOL", "CHAT_MODEL"]
    for a, usage in ((attrs[1], FIRST), (attrs[3], FINAL)):
        assert a["mlflow.chat.tokenUsage"] == {"input_tokens": usage.prompt_tokens,
                                               "output_tokens": usage.completion_tokens,
                                               "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                                               "cache_read_input_tokens": 0}
        assert a["mlflow.llm.model"] == "fake-model"
    # The model calls' inputs and outputs (content capture on), as MLflow stores them: the conventions' messages.
    inputs = attrs[3]["mlflow.spanInputs"]
    check_messages(inputs)
    assert inputs[-3:] == [
        {"role": "user", "parts": [{"type": "text", "content": "run the preset"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_T", "name": "terminal",
                                         "arguments": {"command": "echo preset"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_T",
                                    "response": inputs[-1]["parts"][0]["response"]}]}]
    assert attrs[3]["mlflow.spanOutputs"] == [
        {"role": "assistant", "parts": [{"type": "text", "content": "preset done"}], "finish_reason": "stop"}]
    assert attrs[1]["mlflow.spanOutputs"] == [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_T", "name": "terminal",
                                         "arguments": {"command": "echo preset"}}], "finish_reason": "tool_call"}]
    assert "terminal" in {tool["name"] for tool in attrs[3]["mlflow.chat.tools"]}


# -- what a person sees: each backend's own UI in a real headless Chromium ------------------------------------------

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def _browser():
    """Playwright's Chromium launcher with Debian's chromium (`make backends` installs it), or skip."""
    import shutil

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium browser: `make backends` installs Debian's chromium")
    return sync_playwright, chromium


def _shoot(page, name: str, tmp: Path, clip: dict[str, int]) -> None:
    """docs/images/<name> with HERMES_OTEL_SCREENSHOTS=1 (how the docs' pictures are made), else a temporary file."""
    target = IMAGES if os.environ.get("HERMES_OTEL_SCREENSHOTS") == "1" else tmp
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / name), clip=clip)


def test_phoenix_shows_the_model_call_as_role_cards(llm, tmp_path):
    """The final model call's span in Phoenix's own UI: the system prompt, the user's message, the assistant's tool
    call, the tool's result (naming the call it answers) and the answer, each a card."""
    sync_playwright, chromium = _browser()
    phoenix = Phoenix()
    try:
        phoenix.start()
        with a_turn_through(llm, HERMES_OTEL_BACKEND="phoenix", PHOENIX_COLLECTOR_ENDPOINT=phoenix.url,
                            PHOENIX_PROJECT_NAME=PROJECT):
            wait_until(lambda: (s := phoenix.spans(PROJECT)) and len(s) >= 4 and s, 30, "the turn in Phoenix")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{phoenix.url}/projects")
            page.get_by_text(PROJECT).first.click()
            page.get_by_text("invoke_agent hermes", exact=True).first.click()
            chats = page.get_by_text("chat fake-model", exact=True)
            chats.first.wait_for()
            chats.nth(chats.count() - 1).click()
            page.get_by_text("Tool Result: call_T").wait_for(timeout=15_000)
            shown = page.inner_text("body")
            for text in ("system", "run the preset", 'terminal({"command": "echo preset"})', "preset done"):
                assert text in shown, text
            _shoot(page, "phoenix-llm-span.png", tmp_path, {"x": 350, "y": 0, "width": 1050, "height": 1000})
            browser.close()
    finally:
        phoenix.stop()


def test_mlflow_shows_the_model_call_as_a_chat(llm, tmp_path):
    """The final model call's span in MLflow's own trace view: System, User, the Assistant's tool call with its
    arguments, the tool's result, and the Assistant's answer."""
    sync_playwright, chromium = _browser()
    server = MLflow()
    try:
        server.start()
        with a_turn_through(llm, HERMES_OTEL_BACKEND="mlflow", MLFLOW_TRACKING_URI=server.url):
            (info,) = wait_until(lambda: server.traces("0"), 30, "the turn in MLflow")
            wait_until(lambda: (s := server.spans(info["trace_id"])) and len(s) >= 4 and s, 30, "every span")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{server.url}/#/experiments/0/traces?selectedEvaluationId={info['trace_id']}")
            chats = page.get_by_text("chat fake-model", exact=True)
            chats.first.wait_for(timeout=30_000)
            chats.nth(chats.count() - 1).click()
            page.get_by_text("Tool calls").wait_for(timeout=15_000)
            shown = page.inner_text("body")
            for text in ("System", "User", "run the preset", "echo preset", "preset done"):
                assert text in shown, text
            _shoot(page, "mlflow-chat-span.png", tmp_path, {"x": 0, "y": 0, "width": 980, "height": 860})
            browser.close()
    finally:
        server.stop()
