"""Provider requests and responses in the GenAI semantic conventions' message schema (hermes_otel/tracking/messages.py):
each shape converted exactly, hostile input skipped, and `to_json` always a redacted JSON list within its budget that
still validates against the schemas (docs/gen-ai/gen-ai-{input,output}-messages.json, gen-ai-system-instructions.json,
gen-ai-tool-definitions.json of the semantic conventions)."""

from __future__ import annotations

import json
import random
import string
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_otel.redaction import content
from hermes_otel.tracking.messages import finish_reasons, input_messages, output_messages, to_json, tool_definitions
from tests.harness.genai_schema import check_definitions, check_instructions, check_messages

CAP = 4096
SECRET = "sk-proj-" + "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=40))


def converted(request: Any) -> tuple[list | None, list]:
    system, messages = input_messages(request)
    if system is not None:
        check_instructions(system)
    check_messages(messages)
    return system, messages


def outputs(response: Any) -> list:
    result = output_messages(response)
    check_messages(result, output=True)
    return result


def text(value: str, kind: str = "text") -> dict:
    return {"type": kind, "content": value}


def call(call_id: str | None, name: str, arguments: Any) -> dict:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def result(call_id: str | None, response: Any) -> dict:
    return {"type": "tool_call_response", "id": call_id, "response": response}


# --- requests: OpenAI chat completions -------------------------------------------------------------------------------

def test_a_chat_completions_turn_with_tools_and_reasoning():
    request = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are Hermes."},
            {"role": "user", "content": "What is in /tmp/a.txt and /tmp/b.txt?", "name": "ana"},
            {"role": "assistant", "content": "Reading both.", "reasoning_content": "Two files: two reads.",
             "tool_calls": [
                 {"id": "call_1", "type": "function",
                  "function": {"name": "read_file", "arguments": '{"path": "/tmp/a.txt"}'}},
                 {"id": "call_2", "type": "function",
                  "function": {"name": "read_file", "arguments": '{"path": "/tmp/b.txt", "lines": [1, 2]}'}},
             ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "alpha"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "beta"}]},
            {"role": "assistant", "content": "a.txt says alpha, b.txt says beta.", "reasoning": "Both read."},
            {"role": "user", "content": "thanks"},
        ],
    }
    assert converted(request) == (None, [
        {"role": "system", "parts": [text("You are Hermes.")]},
        {"role": "user", "name": "ana", "parts": [text("What is in /tmp/a.txt and /tmp/b.txt?")]},
        {"role": "assistant", "parts": [
            text("Two files: two reads.", "reasoning"),
            text("Reading both."),
            call("call_1", "read_file", {"path": "/tmp/a.txt"}),
            call("call_2", "read_file", {"path": "/tmp/b.txt", "lines": [1, 2]}),
        ]},
        {"role": "tool", "parts": [result("call_1", "alpha")]},
        {"role": "tool", "parts": [result("call_2", [{"type": "text", "text": "beta"}])]},
        {"role": "assistant", "parts": [text("Both read.", "reasoning"), text("a.txt says alpha, b.txt says beta.")]},
        {"role": "user", "parts": [text("thanks")]},
    ])


def test_chat_content_parts_and_legacy_shapes():
    audio = {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}}
    request = {"messages": [
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}},
            audio,
            {"type": "file", "file": {"filename": "a.pdf"}},  # no FilePart without a modality: left out
            "plain",
            {"type": "text", "text": ""},
            {"no": "type"},
        ]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
        {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": "not json {"}},
        {"role": "function", "name": "lookup", "content": "found"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_9", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin"}}]},
    ]}
    assert converted(request) == (None, [
        {"role": "developer", "parts": [text("Be brief.")]},
        {"role": "user", "parts": [
            text("look"), {"type": "uri", "modality": "image", "uri": "https://example.com/cat.png"}, audio,
            text("plain"),
        ]},
        {"role": "assistant", "parts": [text("I can't.")]},
        {"role": "assistant", "parts": [call(None, "lookup", "not json {")]},
        {"role": "tool", "parts": [result(None, "found")]},
        {"role": "assistant", "parts": [call("call_9", "apply_patch", "*** Begin")]},
    ])


def test_sdk_message_objects_in_the_history_are_read_like_dicts():
    openai = pytest.importorskip("openai")
    del openai
    from openai.types.chat import ChatCompletionMessage

    message = ChatCompletionMessage.model_validate({
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]})
    assert converted({"messages": [{"role": "user", "content": "go"}, message]})[1] == [
        {"role": "user", "parts": [text("go")]},
        {"role": "assistant", "parts": [call("call_1", "f", {"a": 1})]},
    ]


# --- requests: Anthropic messages ------------------------------------------------------------------------------------

def test_an_anthropic_request_with_system_tool_use_and_tool_result():
    request = {
        "model": "claude-sonnet-4",
        "system": [{"type": "text", "text": "You are Hermes.", "cache_control": {"type": "ephemeral"}},
                   {"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Use the tool.", "signature": "EqQBCgIYAhIM"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "rainy"}]},
                {"type": "text", "text": "and tomorrow?"},
            ]},
        ],
    }
    assert converted(request) == (
        [text("You are Hermes."), text("Be brief.")],
        [
            {"role": "user", "parts": [text("Weather in Paris?")]},
            {"role": "assistant", "parts": [
                text("Use the tool.", "reasoning"), text("Checking."), call("toolu_1", "get_weather", {"city": "Paris"}),
            ]},
            {"role": "user", "parts": [  # Anthropic sends results in a user message: its role is kept
                result("toolu_1", [{"type": "text", "text": "rainy"}]), text("and tomorrow?"),
            ]},
        ],
    )


def test_anthropic_is_told_by_its_blocks_without_a_system_prompt_and_images_are_parts():
    document = {"type": "document", "source": {"type": "text", "data": "notes"}}
    request = {"messages": [
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
            document,
        ]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}}]},
    ]}
    assert converted(request) == (None, [
        {"role": "user", "parts": [
            {"type": "blob", "modality": "image", "content": "iVBORw0KGgo=", "mime_type": "image/png"},
            {"type": "uri", "modality": "image", "uri": "https://example.com/a.jpg"},
            document,
        ]},
        {"role": "assistant", "parts": [call("toolu_2", "noop", {})]},
    ])
    assert converted({"system": "Short.", "messages": []}) == ([text("Short.")], [])


# --- requests: OpenAI Responses --------------------------------------------------------------------------------------

def test_a_responses_request_with_instructions_calls_and_outputs():
    request = {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "list files"},
                                         {"type": "input_image", "image_url": "https://example.com/s.png"},
                                         {"type": "input_image", "file_id": "file-1"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Run ls."}],
             "encrypted_content": "gAAAA"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Running ls."}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
             "arguments": '{"command": ["ls"]}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
            {"type": "item_reference", "id": "msg_0"},
            {"role": "user", "content": "thanks"},
        ],
    }
    assert converted(request) == (
        [text("You are Codex.")],
        [
            {"role": "user", "parts": [
                text("list files"), {"type": "uri", "modality": "image", "uri": "https://example.com/s.png"},
                {"type": "file", "modality": "image", "file_id": "file-1"},
            ]},
            {"role": "assistant", "parts": [  # one turn's items, one message
                text("Run ls.", "reasoning"), text("Running ls."), call("call_1", "shell", {"command": ["ls"]}),
            ]},
            {"role": "tool", "parts": [result("call_1", "a.txt\nb.txt")]},
            {"role": "user", "parts": [text("thanks")]},
        ],
    )
    assert converted({"input": "hello"}) == (None, [{"role": "user", "parts": [text("hello")]}])


# --- responses -------------------------------------------------------------------------------------------------------

CHAT_COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Reading.", "reasoning_content": "Need the file.",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}]}},
        {"index": 1, "finish_reason": "length", "message": {"role": "assistant", "content": "Once upon"}},
    ],
}
CHAT_OUTPUT = [
    {"role": "assistant", "parts": [text("Need the file.", "reasoning"), text("Reading."),
                                    call("call_1", "read_file", {"path": "a.txt"})], "finish_reason": "tool_call"},
    {"role": "assistant", "parts": [text("Once upon")], "finish_reason": "length"},
]


def _namespace(value: Any) -> Any:
    """A dict as Hermes's streaming path builds its response: nested SimpleNamespaces."""
    if isinstance(value, dict):
        return SimpleNamespace(**{key: _namespace(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_namespace(item) for item in value]
    return value


def test_a_chat_completion_as_dict_namespace_and_sdk_object():
    assert outputs(CHAT_COMPLETION) == CHAT_OUTPUT
    assert outputs(_namespace(CHAT_COMPLETION)) == CHAT_OUTPUT
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletion

    assert outputs(ChatCompletion.model_validate(CHAT_COMPLETION)) == CHAT_OUTPUT  # extra fields kept by the SDK
    assert finish_reasons(CHAT_OUTPUT) == ("tool_call", "length")


def test_an_anthropic_message():
    message = SimpleNamespace(
        id="msg_1", type="message", role="assistant", model="claude-sonnet-4", stop_reason="tool_use",
        content=[SimpleNamespace(type="thinking", thinking="Use it.", signature="sig"),
                 SimpleNamespace(type="text", text="Checking."),
                 SimpleNamespace(type="tool_use", id="toolu_1", name="get_weather", input={"city": "Paris"}),
                 SimpleNamespace(type="server_tool_use", id="srvtoolu_1", name="web_search", input={})])
    assert outputs(message) == [{"role": "assistant", "parts": [
        text("Use it.", "reasoning"), text("Checking."), call("toolu_1", "get_weather", {"city": "Paris"}),
        {"type": "server_tool_use"},
    ], "finish_reason": "tool_call"}]


RESPONSE = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "completed",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Here.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": '{"cmd": "ls"}',
         "status": "completed"},
    ],
}


def test_a_responses_api_response_is_one_assistant_message():
    expected = [{"role": "assistant", "parts": [text("Plan.", "reasoning"), text("Here."),
                                                call("call_1", "shell", {"cmd": "ls"})], "finish_reason": "tool_call"}]
    assert outputs(RESPONSE) == expected
    assert outputs(_namespace(RESPONSE)) == expected
    pytest.importorskip("openai")
    from openai.types.responses import Response

    assert outputs(Response.model_validate(RESPONSE)) == expected


@pytest.mark.parametrize(("status", "details", "reason"), [
    ("completed", None, "stop"),
    (None, None, "stop"),
    ("incomplete", {"reason": "max_output_tokens"}, "length"),
    ("incomplete", {"reason": "content_filter"}, "content_filter"),
    ("failed", None, "error"),
    ("cancelled", None, "cancelled"),
])
def test_responses_finish_reasons(status, details, reason):
    response = {"status": status, "incomplete_details": details,
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]}
    assert outputs(response) == [{"role": "assistant", "parts": [text("x")], "finish_reason": reason}]


@pytest.mark.parametrize(("given", "expected"), [
    ("stop", "stop"), ("length", "length"), ("tool_calls", "tool_call"), ("function_call", "tool_call"),
    ("content_filter", "content_filter"), ("something_new", "something_new"), (None, "error"), ("", "error"),
])
def test_chat_finish_reasons(given, expected):
    response = {"choices": [{"finish_reason": given, "message": {"role": "assistant", "content": "x"}}]}
    assert finish_reasons(outputs(response)) == (expected,)


@pytest.mark.parametrize(("given", "expected"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("tool_use", "tool_call"), ("max_tokens", "length"),
    ("refusal", "content_filter"), ("pause_turn", "pause_turn"), (None, "error"),
])
def test_anthropic_finish_reasons(given, expected):
    response = {"role": "assistant", "content": [{"type": "text", "text": "x"}], "stop_reason": given}
    assert outputs(response) == [{"role": "assistant", "parts": [text("x")], "finish_reason": expected}]


def test_finish_reasons_skip_what_is_not_an_output_message():
    assert finish_reasons([{"finish_reason": "stop"}, {"role": "user"}, 3, None]) == ("stop",)
    assert finish_reasons(None) == ()  # type: ignore[arg-type]


# --- tool definitions ------------------------------------------------------------------------------------------------

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_tool_definitions_of_the_three_shapes():
    chat = {"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
                                                       "parameters": WEATHER_SCHEMA}},
                      {"type": "function", "function": {"name": "ping"}},
                      {"type": "custom", "custom": {"name": "apply_patch", "format": {"type": "text"}}}]}
    responses = {"tools": [{"type": "function", "name": "get_weather", "description": "Weather now.",
                            "parameters": WEATHER_SCHEMA, "strict": True},
                           {"type": "web_search"},
                           {"type": "custom", "name": "apply_patch", "description": "Edit files."}]}
    anthropic = {"tools": [{"name": "get_weather", "description": "Weather now.", "input_schema": WEATHER_SCHEMA},
                           {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}
    full = {"type": "function", "name": "get_weather", "description": "Weather now.", "parameters": WEATHER_SCHEMA}
    for request, expected in (
        (chat, [full, {"type": "function", "name": "ping"}, {"type": "custom", "name": "apply_patch"}]),
        (responses, [full, {"type": "web_search", "name": "web_search"},
                     {"type": "custom", "name": "apply_patch", "description": "Edit files."}]),
        (anthropic, [full, {"type": "web_search_20250305", "name": "web_search"}]),
    ):
        definitions = tool_definitions(request)
        check_definitions(definitions)
        assert definitions == expected


def test_no_tools_is_none():
    assert tool_definitions({"messages": []}) is None
    assert tool_definitions({"tools": []}) is None
    assert tool_definitions({"tools": [1, None, {"function": {"name": 3}}]}) is None
    assert tool_definitions(None) is None


# --- hostile input ---------------------------------------------------------------------------------------------------

class Raising:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(name)


class RaisingMapping(dict):
    def get(self, *args: Any) -> Any:
        raise RuntimeError("no")

    def __contains__(self, key: object) -> bool:
        raise RuntimeError("no")


def _cyclic() -> dict:
    message: dict = {"role": "tool", "tool_call_id": "c", "content": []}
    message["content"].append(message)
    return message


@pytest.mark.parametrize("request_", [
    None, 3, "text", [1, 2, 3], {"messages": [1, 2, None, "x", [], Raising()]}, {1: "a", (2,): "b"},
    {"messages": {"role": "user"}}, {"input": [1, {"type": 5}, {"role": 7}]}, RaisingMapping(messages=[]),
    {"messages": [{"role": "user", "content": [1, None, {"type": ["unhashable"]}]}]},
    {"system": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "name": None}]}]},
])
def test_hostile_requests_never_raise(request_):
    system, messages = converted(request_)
    assert system is None
    assert all(m["parts"] == [] for m in messages)


def test_cycles_huge_strings_and_broken_arguments_pass_through_and_export():
    huge = "y" * 10_000_000
    request = {"messages": [
        {1: "non-str key", "role": "user", "content": huge},
        {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{broken"}},
                                             {"id": "d", "function": {"name": "g", "arguments": "[" * 100_000}}]},
        _cyclic(),
    ]}
    _, messages = converted(request)
    assert messages[0]["parts"][0]["content"] is huge  # kept as it is: to_json bounds it
    assert messages[1]["parts"] == [call("c", "f", "{broken"), call("d", "g", "[" * 100_000)]
    assert messages[2]["parts"][0]["response"][0] is request["messages"][2]
    text_ = to_json(messages)
    assert len(text_) <= 2 * CAP
    check_messages(json.loads(text_))
    assert "<cycle>" in text_


def test_hostile_responses_never_raise():
    for response in (None, 1, "x", [], {"choices": [None, 1, {"message": None}]}, Raising(),
                     {"output": [1, {"type": "function_call"}]}, {"content": [None, {"type": 1}]}):
        check_messages(output_messages(response), output=True)


# --- to_json ---------------------------------------------------------------------------------------------------------

def _history() -> list[dict]:
    """A long Hermes session in chat-completions shape: a 5 KB system prompt, then 59 more messages."""
    history = [{"role": "system", "content": f"You are Hermes. Your key is {SECRET}. " + "Rules. " * 700}]
    for i in range(1, 60):
        if i % 3 == 1:
            history.append({"role": "user", "content": f"step {i}: look at the logs " + "please " * 40})
        elif i % 3 == 2:
            history.append({"role": "assistant", "content": f"Reading {i}.", "reasoning_content": "plan " * 50,
                            "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {
                                "name": "read_file",
                                "arguments": json.dumps({"path": f"/var/log/{i}.log", "offset": i, "limit": 200,
                                                         "api_key": SECRET})}}]})
        else:
            history.append({"role": "tool", "tool_call_id": f"call_{i - 1}", "content": "line\n" * 300})
    history[-1] = {"role": "user", "content": f"{SECRET} is my key, last question " + "q" * 500}
    return history


def test_a_long_history_keeps_its_system_message_and_last_messages_and_counts_the_rest():
    _, messages = converted({"messages": _history()})
    assert len(messages) == 60
    text_ = to_json(messages, cap=CAP)
    assert len(text_) <= 2 * CAP
    parsed = json.loads(text_)
    check_messages(parsed)
    assert SECRET not in text_ and SECRET[8:20] not in text_
    assert "<redacted>" in text_
    assert parsed[0]["role"] == "system" and parsed[0]["parts"][0]["content"].startswith("You are Hermes.")
    assert parsed[0]["parts"][0]["content"].endswith("…[truncated]")
    omitted = parsed[1]["parts"][0]
    assert omitted == {"type": "hermes.omitted", "messages": 60 - len(parsed)}
    assert omitted["messages"] > 0
    assert [part["type"] for m in parsed for part in m["parts"]].count("hermes.omitted") == 1
    # the kept ones are exactly the last ones, in order, with their structure whole
    tail = messages[len(messages) - len(parsed) + 1:]
    assert [m["role"] for m in parsed[1:]] == [m["role"] for m in tail]
    assert [[p["type"] for p in m["parts"]] for m in parsed[1:]] == (
        [["hermes.omitted", *[p["type"] for p in tail[0]["parts"]]]] + [[p["type"] for p in m["parts"]] for m in tail[1:]])
    assert parsed[-1]["parts"][0]["content"].startswith("<redacted> is my")


def test_what_fits_is_only_redacted():
    messages = [
        {"role": "user", "parts": [text(f"my key {SECRET}")]},
        {"role": "assistant", "parts": [call("c1", "login", {"api_key": "hunter2", "user": "ana"})],
         "finish_reason": "tool_call"},
    ]
    assert json.loads(to_json(messages)) == [
        {"role": "user", "parts": [text("my key <redacted>")]},
        {"role": "assistant", "parts": [call("c1", "login", {"api_key": "<redacted>", "user": "ana"})],
         "finish_reason": "tool_call"},
    ]


def test_one_huge_text_message_is_shortened_with_the_marker():
    text_ = to_json([{"role": "user", "parts": [text("z" * 100_000)]}])
    assert len(text_) <= 2 * CAP
    parsed = json.loads(text_)
    check_messages(parsed)
    assert parsed == [{"role": "user", "parts": [text("z" * 4096 + "…[truncated]")]}]


def test_output_messages_keep_their_finish_reason_and_structure_when_shortened():
    messages = [{"role": "assistant", "finish_reason": "tool_call", "parts": [
        text("r" * 9000, "reasoning"),
        call("call_abcdefghijklmnopqrstuvwxyz", "a_tool_with_a_rather_long_name", {"code": "x" * 9000}),
    ]}]
    parsed = json.loads(to_json(messages, cap=1024))
    check_messages(parsed, output=True)
    assert parsed[0]["finish_reason"] == "tool_call"
    assert parsed[0]["parts"][1]["name"] == "a_tool_with_a_rather_long_name"
    assert parsed[0]["parts"][1]["id"] == "call_abcdefghijklmnopqrstuvwxyz"
    assert parsed[0]["parts"][1]["arguments"]["code"].endswith("…[truncated]")


def test_a_message_too_big_even_shortened_keeps_its_role_and_finish_reason():
    parts = [call(f"call_{i}", f"tool_{i}", {f"key_{k}": "v" for k in range(40)}) for i in range(50)]
    parsed = json.loads(to_json([{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}], cap=512))
    check_messages(parsed, output=True)
    assert parsed == [{"role": "assistant", "finish_reason": "tool_call",
                       "parts": [{"type": "hermes.omitted", "messages": 0, "parts": 50}]}]


def test_parts_and_tool_definitions_lists_stay_valid():
    instructions = [text(f"rule {i} " * 200) for i in range(200)]
    parsed = json.loads(to_json(instructions, cap=1024))
    check_instructions(parsed)
    assert parsed[0] == {"type": "hermes.omitted", "name": "hermes.omitted", "items": 200 - len(parsed) + 1}
    definitions = [{"type": "function", "name": f"tool_{i}", "description": "d" * 300, "parameters": WEATHER_SCHEMA}
                   for i in range(100)]
    parsed = json.loads(to_json(definitions, cap=1024))
    check_definitions(parsed)
    assert parsed[-1]["name"] == "tool_99"
    assert parsed[0]["items"] == 100 - len(parsed) + 1


def test_surrogates_never_reach_the_text():
    text_ = to_json([{"role": "user", "parts": [text("a\ud83d" + "😀" * 5000)]}], cap=64)
    text_.encode("utf-8")  # no lone surrogate
    check_messages(json.loads(text_))


@pytest.mark.parametrize("value", [None, "text", 5, {"role": "user"}, [1, "x", None], [], (), [{}]])
def test_not_a_list_of_dicts_is_still_a_list(value):
    assert isinstance(json.loads(to_json(value)), list)


def test_dropped_messages_are_never_redacted(monkeypatch):
    calls = []
    real = content.sanitize
    monkeypatch.setattr(content, "sanitize", lambda value, **kw: calls.append(1) or real(value, **kw))
    history = [{"role": "user", "parts": [text(f"message {i} " + "x" * 200)]} for i in range(20_000)]
    parsed = json.loads(to_json(history))
    assert parsed[0]["parts"][0] == {"type": "hermes.omitted", "messages": 20_000 - len(parsed)}
    assert len(calls) < 10 * len(parsed) + 50  # a few per kept message, none per dropped one


def test_a_tiny_cap_still_gives_a_list():
    assert json.loads(to_json(_history(), cap=8)) == []
    parsed = json.loads(to_json(input_messages({"messages": _history()})[1], cap=200))
    check_messages(parsed)
    assert len(to_json(input_messages({"messages": _history()})[1], cap=200)) <= 400


# any message the converters could make, of any size
_strings = st.text(max_size=3000)
_parts_st = st.one_of(
    st.builds(text, _strings),
    st.builds(lambda s: text(s, "reasoning"), _strings),
    st.builds(call, st.none() | st.text(max_size=40), st.text(max_size=40),
              st.recursive(st.none() | st.integers() | _strings,
                           lambda c: st.lists(c, max_size=8) | st.dictionaries(st.text(max_size=10), c, max_size=8),
                           max_leaves=30)),
    st.builds(result, st.none() | st.text(max_size=40), _strings | st.lists(_strings, max_size=5)),
    st.fixed_dictionaries({"type": st.sampled_from(["input_audio", "document", "x.custom"])}, optional={"data": _strings}),
)
_messages_st = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]),
                           "parts": st.lists(_parts_st, max_size=6)},
                          optional={"finish_reason": st.sampled_from(["stop", "tool_call"]),
                                    "name": st.text(max_size=20)}),
    max_size=40)


@settings(max_examples=150, deadline=None)
@given(_messages_st, st.sampled_from([256, 1024, 4096]))
def test_any_messages_export_as_valid_schema_json_within_the_budget(messages, cap):
    text_ = to_json(messages, cap=cap)
    assert len(text_) <= 2 * cap
    text_.encode("utf-8")
    parsed = json.loads(text_)
    check_messages(parsed)
    omitted = [p for m in parsed for p in m["parts"] if p["type"] == "hermes.omitted" and "messages" in p]
    dropped = omitted[0]["messages"] if omitted else 0
    assert len(omitted) <= 1
    assert len(parsed) + dropped == len(messages) or parsed == []
    if parsed and messages and messages[-1]["parts"]:
        assert parsed[-1]["role"] == messages[-1]["role"]
        assert parsed[-1].get("finish_reason") == messages[-1].get("finish_reason")


def test_a_long_history_is_converted_only_as_far_as_the_budget_could_hold_and_counted_exactly():
    """window(): the system prompt and the last WINDOW messages are all that is converted (the records thread's work
    does not grow with the history); what is exported still counts every message left out, exactly."""
    from hermes_otel.tracking.messages import WINDOW, window

    history = [{"role": "system", "content": "be brief"}] + [
        {"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(5000)]
    request, omitted = window({"model": "m", "messages": history})
    assert (len(request["messages"]), omitted) == (WINDOW + 1, 5000 - WINDOW)
    assert request["messages"][0] is history[0] and request["messages"][-1] is history[-1]
    assert window({"messages": history[:WINDOW + 1]}) == ({"messages": history[:WINDOW + 1]}, 0)
    system, messages = input_messages(request)
    exported = json.loads(to_json(messages, cap=CAP, omitted=omitted))
    check_messages(exported)
    assert exported[0] == {"role": "system", "parts": [{"type": "text", "content": "be brief"}]}
    marker = exported[1]["parts"][0]
    assert marker["type"] == "hermes.omitted" and marker["messages"] + len(exported) - 1 == 5000
    assert exported[-1]["parts"] == [{"type": "text", "content": "m4999"}]


def test_an_over_budget_history_keeps_its_newest_messages_each_still_readable():
    """Messages of 1,000 characters each, far over the budget: the newest ones are kept, in order, and each text is
    shortened to no less than 256 characters: fewer messages, each readable, rather than one more message and every
    text cut below that (which kept the counts right and passed the other long-history tests)."""
    from hermes_otel.tracking import messages as conversion

    history = [{"role": "user" if n % 2 else "assistant", "parts": [text(f"{n:04d} " + "w" * 995)]} for n in range(40)]
    kept = json.loads(to_json(history, cap=CAP))
    assert kept[0]["parts"][0] == {"type": "hermes.omitted", "messages": 40 - len(kept)}
    texts = [p["content"] for m in kept for p in m["parts"] if p["type"] == "text"]
    assert [t[:4] for t in texts] == [f"{n:04d}" for n in range(40 - len(kept), 40)]  # the newest, in order
    assert len(texts) >= 6 and all(len(t) >= conversion._KEEP for t in texts), [len(t) for t in texts]
