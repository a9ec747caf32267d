"""Pure attribute mappings: requests, the response shapes Hermes returns, providers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from openai.types.chat import ChatCompletion
from openai.types.completion_usage import CompletionUsage

from hermes_otel import semconv as sc


@pytest.mark.parametrize(
    ("provider", "base_url", "expected"),
    [
        ("anthropic", None, "anthropic"),
        ("openai-codex", None, "openai"),
        ("gemini", None, "gcp.gemini"),
        ("custom", "https://api.openai.com/v1", "openai"),
        ("custom", "https://myres.openai.azure.com/openai", "azure.ai.openai"),
        ("custom", "http://127.0.0.1:8000/v1", "custom"),
        ("openrouter", "https://openrouter.ai/api/v1", "openrouter"),
        (None, None, "unknown"),
    ],
)
def test_provider_name(provider, base_url, expected):
    assert sc.provider_name(provider, base_url) == expected


def test_chat_request_attributes_from_effective_request():
    request = {
        "model": "rewritten-model",
        "messages": [{"role": "user", "content": "secret content never copied"}],
        "temperature": 0.2,
        "top_p": 1,
        "max_completion_tokens": 256,
        "stop": ["END"],
        "seed": 7,
        "stream": True,
        "n": True,  # a bool is not a count
    }
    context = {
        "model": "configured-model",
        "provider": "custom",
        "base_url": "https://api.deepseek.com/v1",
        "session_id": "s1",
        "turn_id": "s1:t:abcd",
        "api_request_id": "s1:t:abcd:api:1",
        "api_mode": "chat_completions",
    }
    assert sc.chat_request_attributes(request, context) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "deepseek",
        "gen_ai.request.model": "rewritten-model",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.top_p": 1.0,
        "gen_ai.request.seed": 7,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.request.stream": True,
        "server.address": "api.deepseek.com",
        "server.port": 443,
        "gen_ai.conversation.id": "s1",
        "hermes.turn.id": "s1:t:abcd",
        "hermes.api_request.id": "s1:t:abcd:api:1",
        "hermes.api.mode": "chat_completions",
        "hermes.provider": "custom",
    }


def test_streaming_namespace_response():
    usage = CompletionUsage(
        prompt_tokens=100,
        completion_tokens=20,
        total_tokens=120,
        prompt_tokens_details={"cached_tokens": 64},
        completion_tokens_details={"reasoning_tokens": 5},
    )
    response = SimpleNamespace(  # what Hermes assembles from a stream: its own id, the provider's model and usage
        id="stream-0b8f6a3e-1d2c-4e5f-8a9b-0c1d2e3f4a5b",
        model="m-2024",
        choices=[SimpleNamespace(index=0, message=SimpleNamespace(role="assistant", content="hi"), finish_reason="stop")],
        usage=usage,
    )
    assert sc.chat_response_attributes(response) == {
        "gen_ai.request.stream": True,
        "hermes.response.id": "stream-0b8f6a3e-1d2c-4e5f-8a9b-0c1d2e3f4a5b",
        "gen_ai.response.model": "m-2024",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 64,
        "gen_ai.usage.reasoning.output_tokens": 5,
    }


def test_a_stream_hermes_0_2x_assembled_keeps_the_provider_s_id():
    """0.20+ name the assembled reply after the provider's chunks when they carry an id: that is the provider's."""
    response = SimpleNamespace(id="chatcmpl-9xYz", model="m", usage=None,
                               choices=[SimpleNamespace(index=0, message=None, finish_reason="stop")])
    assert sc.chat_response_attributes(response) == {
        "gen_ai.request.stream": True, "gen_ai.response.id": "chatcmpl-9xYz", "gen_ai.response.model": "m",
        "gen_ai.response.finish_reasons": ("stop",),
    }


def test_a_broken_off_streams_stub_carries_no_made_up_finish_reason():
    from agent.chat_completion_helpers import PARTIAL_STREAM_STUB_ID

    stub = SimpleNamespace(id=PARTIAL_STREAM_STUB_ID, model="m", usage=None,
                           choices=[SimpleNamespace(index=0, message=None, finish_reason="length")])
    assert sc.chat_response_attributes(stub) == {
        "gen_ai.request.stream": True, "hermes.response.id": PARTIAL_STREAM_STUB_ID,
        "hermes.response.stub": "partial_stream", "gen_ai.response.model": "m",
    }


def test_chat_completion_response():
    response = ChatCompletion.model_validate(
        {
            "id": "cc-9",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-x",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "tool_calls"},
                {"index": 1, "message": {"role": "assistant", "content": "x"}, "finish_reason": "length"},
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        }
    )
    assert sc.chat_response_attributes(response) == {
        "gen_ai.response.id": "cc-9",
        "gen_ai.response.model": "gpt-x",
        "gen_ai.response.finish_reasons": ("tool_calls", "length"),
        "gen_ai.usage.input_tokens": 3,
        "gen_ai.usage.output_tokens": 4,
    }


def test_anthropic_and_responses_shapes():
    anthropic = {
        "id": "msg_1",
        "model": "claude",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 8, "cache_creation_input_tokens": 1},
    }
    assert sc.chat_response_attributes(anthropic) == {
        "gen_ai.response.id": "msg_1",
        "gen_ai.response.model": "claude",
        "gen_ai.response.finish_reasons": ("end_turn",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.usage.cache_read.input_tokens": 8,
        "gen_ai.usage.cache_write.input_tokens": 1,
    }
    responses = SimpleNamespace(
        id="resp_1",
        model="o-x",
        status="completed",
        usage=SimpleNamespace(
            input_tokens=9,
            output_tokens=3,
            input_tokens_details=SimpleNamespace(cached_tokens=2),
            output_tokens_details=SimpleNamespace(reasoning_tokens=1),
        ),
    )
    attrs = sc.chat_response_attributes(responses)
    assert attrs["gen_ai.response.finish_reasons"] == ("completed",)
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 2
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 1


@pytest.mark.parametrize("junk", [None, 42, "text", object(), {"usage": "lots"}, {"choices": "nope"}])
def test_unknown_shapes_yield_what_can_be_read(junk):
    attrs = sc.chat_response_attributes(junk)
    assert isinstance(attrs, dict)
    assert all(not k.startswith("gen_ai.usage") for k in attrs)


def test_non_finite_or_huge_numbers_are_left_out_not_raised():
    """A provider (or a hostile plugin) reporting inf/NaN token counts must not stop the span's end."""
    usage = SimpleNamespace(prompt_tokens=float("inf"), completion_tokens=float("nan"), total_tokens=3,
                            prompt_tokens_details={"cached_tokens": 2.0}, completion_tokens_details=None)
    assert sc.usage_attributes(usage) == {"gen_ai.usage.cache_read.input_tokens": 2}
    request = {"model": "m", "temperature": float("nan"), "top_p": 10**400, "seed": 7.9, "max_tokens": True, "n": 2}
    attrs = sc.chat_request_attributes(request, {})
    assert {k: v for k, v in attrs.items() if k.startswith("gen_ai.request.")} == {
        "gen_ai.request.model": "m", "gen_ai.request.seed": 7, "gen_ai.request.choice.count": 2}


def test_error_attributes():
    class APIStatusError(Exception):
        status_code = 503

    assert sc.error_attributes(APIStatusError("x")) == {"error.type": "APIStatusError", "http.response.status_code": 503}
    assert sc.error_attributes(ValueError("x")) == {"error.type": "ValueError"}
