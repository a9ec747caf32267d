"""One real `hermes chat` (a tool call, then the answer, both reporting cache use) writing the local files: the
GenAI conventions' names it emitted, for tests/integration/test_semconv_release.py and the 0.2x lane."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage
from tests.harness.hermes import clean_env, hermes_chat, write_home

CACHED = Usage(prompt_tokens=40, completion_tokens=5, cached_tokens=30, cache_write_tokens=8)
SCRIPT = (Reply(tool_calls=(ToolCall("terminal", {"command": "echo semconv"}, id="call_sc"),), usage=CACHED),
          Reply(content="semconv ok", usage=CACHED))
# The metrics of that run by default: the latest conventions' names only.
LATEST_METRICS = {
    "gen_ai.client.inference.duration", "gen_ai.client.inference.operation.input_tokens",
    "gen_ai.client.inference.operation.output_tokens", "gen_ai.client.inference.usage.input_tokens",
    "gen_ai.client.inference.usage.output_tokens", "gen_ai.client.inference.usage.cache_read.input_tokens",
    "gen_ai.client.inference.usage.cache_write.input_tokens", "gen_ai.client.inference.usage.reasoning.output_tokens",
    "gen_ai.client.inference.time_to_first_chunk", "gen_ai.client.inference.time_per_output_chunk",
    "gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration", "gen_ai.invoke_agent.inference_calls",
    "gen_ai.invoke_agent.tool_calls"}


def run_chat(home: Path, **env: str) -> tuple[set[str], list[dict]]:
    """The run's GenAI metric names and its two chat spans' attributes (OTLP JSON values), with span capture on."""
    with FakeLLMServer(SCRIPT) as server:
        write_home(home, server.base_url)
        result = hermes_chat("run echo semconv", env=clean_env(
            home, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY", **env))
    assert result.returncode == 0 and result.answer == "semconv ok", result.stderr[-3000:]
    otel = home / "otel"
    names = {m["name"] for line in (otel / "metrics.jsonl").read_text().splitlines()
             for rm in json.loads(line)["resourceMetrics"] for sm in rm["scopeMetrics"] for m in sm["metrics"]}
    chats = [{a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}
             for line in (otel / "traces.jsonl").read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]
             if span["name"].startswith("chat ")]
    assert len(chats) == 2
    return {n for n in names if n.startswith("gen_ai.")}, chats


def check_chats(latest: list[dict], dup: list[dict]) -> None:
    """The chat spans' names of each release: cache_write, and v1.41.0's cache_creation beside it under gen_ai/dup.
    The output messages keep their finish_reason in both (deprecated by the latest, still allowed; Phoenix needs
    it)."""
    for chats, v1_41 in ((latest, False), (dup, True)):
        for chat, reason in zip(chats, ("tool_call", "stop"), strict=True):  # the output schema's names
            assert chat["gen_ai.usage.cache_write.input_tokens"] == "8"  # OTLP JSON's int64 is a string
            assert chat.get("gen_ai.usage.cache_creation.input_tokens") == ("8" if v1_41 else None)
            assert [m["finish_reason"] for m in json.loads(chat["gen_ai.output.messages"])] == [reason]
