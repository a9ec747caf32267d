"""The fake model server must look exactly like OpenAI to the real client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import openai
import pytest

from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage, demo_script

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def client_for(srv: FakeLLMServer) -> openai.OpenAI:
    # No retries: each retry would silently consume another scripted reply.
    return openai.OpenAI(base_url=srv.base_url, api_key="sk-fake", max_retries=0, timeout=5)


def test_streaming_text_with_usage(server: FakeLLMServer) -> None:
    server.push(Reply(content="Hello, streaming world!", usage=Usage(20, 5, cached_tokens=3, reasoning_tokens=2)))
    chunks = list(
        client_for(server).chat.completions.create(
            model="m-1", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )

    assert {c.id for c in chunks} == {"chatcmpl-fake-1"}
    assert {c.model for c in chunks} == {"m-1"}
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in chunks[1:] if c.choices and c.choices[0].delta.content]
    assert 2 <= len(pieces) <= 3
    assert "".join(pieces) == "Hello, streaming world!"
    assert chunks[-2].choices[0].finish_reason == "stop"

    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (20, 5, 25)
    assert last.usage.prompt_tokens_details.cached_tokens == 3
    assert last.usage.completion_tokens_details.reasoning_tokens == 2


def test_streaming_without_include_usage_has_no_usage_chunk(server: FakeLLMServer) -> None:
    chunks = list(client_for(server).chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


def test_streaming_two_tool_calls(server: FakeLLMServer) -> None:
    server.push(
        Reply.tools(
            ToolCall("terminal", {"command": "echo hi"}),
            ToolCall("read_file", {"path": "/tmp/x", "limit": 10}, id="call_custom"),
        )
    )
    chunks = list(
        client_for(server).chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )

    # Reassemble tool calls the way every OpenAI streaming consumer does.
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += tc.id or ""
                entry["name"] += (tc.function and tc.function.name) or ""
                entry["arguments"] += (tc.function and tc.function.arguments) or ""

    assert [calls[i]["id"] for i in sorted(calls)] == ["call_1", "call_custom"]
    assert [calls[i]["name"] for i in sorted(calls)] == ["terminal", "read_file"]
    assert json.loads(calls[0]["arguments"]) == {"command": "echo hi"}
    assert json.loads(calls[1]["arguments"]) == {"path": "/tmp/x", "limit": 10}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 18


def test_non_streaming_text_and_tool_call(server: FakeLLMServer) -> None:
    server.push(Reply.text("plain answer"), Reply.tools(ToolCall("terminal", {"command": "ls"})))
    client = client_for(server)

    first = client.chat.completions.create(model="m", messages=MESSAGES)
    assert first.id == "chatcmpl-fake-1"
    assert first.object == "chat.completion"
    assert first.choices[0].message.content == "plain answer"
    assert first.choices[0].message.tool_calls is None
    assert first.choices[0].finish_reason == "stop"
    assert first.usage is not None and first.usage.total_tokens == 18

    second = client.chat.completions.create(model="m", messages=MESSAGES)
    assert second.id == "chatcmpl-fake-2"
    assert second.choices[0].finish_reason == "tool_calls"
    assert second.choices[0].message.content is None
    (call,) = second.choices[0].message.tool_calls or []
    assert (call.id, call.type, call.function.name) == ("call_1", "function", "terminal")
    assert json.loads(call.function.arguments) == {"command": "ls"}


def test_http_500_raises_internal_server_error(server: FakeLLMServer) -> None:
    server.push(Reply.error(500, "boom"), Reply.text("recovered"))
    client = client_for(server)

    with pytest.raises(openai.InternalServerError) as excinfo:
        client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert excinfo.value.status_code == 500
    assert "boom" in str(excinfo.value)
    # The error consumed exactly one scripted reply.
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "recovered"


def test_models_list(server: FakeLLMServer) -> None:
    models = client_for(server).models.list()
    assert [(m.id, m.owned_by) for m in models.data] == [("fake-model", "fake")]


def test_request_recording(server: FakeLLMServer) -> None:
    client = client_for(server)
    client.models.list()
    client.chat.completions.create(model="m", messages=MESSAGES, temperature=0.5)

    requests = server.requests
    assert [(r.method, r.path) for r in requests] == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    assert requests[0].body is None
    assert requests[1].headers["authorization"] == "Bearer sk-fake"
    (chat,) = server.chat_requests
    assert chat.body == {"model": "m", "messages": MESSAGES, "temperature": 0.5}


def test_default_reply_when_script_empty() -> None:
    with FakeLLMServer([Reply.text("scripted")], default=Reply.text("fallback")) as srv:
        client = client_for(srv)
        answers = [client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content
                   for _ in range(3)]
    assert answers == ["scripted", "fallback", "fallback"]


def test_unknown_path_is_404(server: FakeLLMServer) -> None:
    with pytest.raises(openai.NotFoundError):
        client_for(server).embeddings.create(model="m", input="x")


def test_delay_and_prompt_stop() -> None:
    srv = FakeLLMServer([Reply(content="slow", delay_s=0.2)]).start()
    client = client_for(srv)
    began = time.monotonic()
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "slow"
    assert time.monotonic() - began >= 0.2

    began = time.monotonic()
    srv.stop()  # with a pooled keep-alive connection still open
    assert time.monotonic() - began < 1


def test_stop_interrupts_a_delayed_reply() -> None:
    srv = FakeLLMServer([Reply(content="never", delay_s=30)]).start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client_for(srv).chat.completions.create(model="m", messages=MESSAGES)
        except openai.APIConnectionError as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    while not srv.chat_requests:  # wait until the reply is sleeping
        time.sleep(0.01)
    began = time.monotonic()
    srv.stop()
    caller.join(timeout=5)
    assert time.monotonic() - began < 1
    assert not caller.is_alive() and len(errors) == 1


def test_demo_script_shape() -> None:
    first, second = demo_script()
    assert first.tool_calls == (ToolCall("terminal", {"command": "echo hello from hermes-otel"}),)
    assert second.content == "The command printed: hello from hermes-otel"
