"""The GenAI semantic conventions' message schemas, as far as a backend relies on them (docs/gen-ai/gen-ai-{input,
output}-messages.json, gen-ai-system-instructions.json, gen-ai-tool-definitions.json): a checker for tests."""

from __future__ import annotations

from typing import Any


def _opt_str(part: dict, key: str) -> None:
    assert part.get(key) is None or isinstance(part[key], str), (key, part)


def check_part(part: Any) -> None:
    assert isinstance(part, dict) and isinstance(part.get("type"), str), part
    kind = part["type"]
    if kind in ("text", "reasoning"):
        assert isinstance(part.get("content"), str), part
    elif kind == "tool_call":
        assert isinstance(part.get("name"), str), part
        _opt_str(part, "id")
    elif kind == "tool_call_response":
        assert "response" in part, part
        _opt_str(part, "id")
    elif kind in ("uri", "blob", "file"):
        assert isinstance(part.get("modality"), str), part
        assert isinstance(part.get({"uri": "uri", "blob": "content", "file": "file_id"}[kind]), str), part
        _opt_str(part, "mime_type")
    # any other type is the schema's generic part: a string type is all it needs


def check_messages(messages: Any, *, output: bool = False) -> None:
    assert isinstance(messages, list), messages
    for message in messages:
        assert isinstance(message, dict) and isinstance(message.get("role"), str), message
        assert isinstance(message.get("parts"), list), message
        _opt_str(message, "name")
        if output:  # deprecated by the latest conventions, still allowed; we send it (Phoenix needs it)
            assert isinstance(message.get("finish_reason"), str), message
        for part in message["parts"]:
            check_part(part)


def check_instructions(parts: Any) -> None:
    assert isinstance(parts, list)
    for part in parts:
        check_part(part)


def check_definitions(definitions: Any) -> None:
    assert isinstance(definitions, list)
    for definition in definitions:
        assert isinstance(definition, dict), definition
        assert isinstance(definition.get("type"), str) and isinstance(definition.get("name"), str), definition
        _opt_str(definition, "description")
        assert isinstance(definition.get("parameters"), (dict, bool, type(None))), definition


def openinference_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The messages a backend holds as OpenInference's flattened attributes (`llm.input_messages.0.message.role`,
    ...), as Phoenix shows them: role, text, tool calls (name, parsed arguments) and the tool call a result answers."""
    import json

    messages = []
    i = 0
    while f"{prefix}.{i}.message.role" in attrs:
        at = f"{prefix}.{i}.message"
        calls = []
        j = 0
        while f"{at}.tool_calls.{j}.tool_call.function.name" in attrs:
            call = f"{at}.tool_calls.{j}.tool_call"
            calls.append((attrs[f"{call}.function.name"], json.loads(attrs[f"{call}.function.arguments"])))
            j += 1
        messages.append({"role": attrs[f"{at}.role"], "content": attrs.get(f"{at}.content"), "tool_calls": calls,
                         "tool_call_id": attrs.get(f"{at}.tool_call_id")})
        i += 1
    return messages
