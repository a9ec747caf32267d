"""Provider requests and responses in the GenAI semantic conventions' message schema.

The schemas are the semantic conventions' docs/gen-ai JSON schemas: input messages, output messages, system
instructions and tool definitions. Three request shapes are read (OpenAI chat completions, Anthropic messages,
OpenAI Responses) and their responses, from SDK objects, Hermes's namespaces or dicts. The converters are pure and
never raise: what they do not understand is skipped. They keep strings as they are; :func:`to_json` redacts and
bounds everything on the way out, so that what is exported always parses and still fits the schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..redaction import content

Message = dict[str, Any]  # also a part or a tool definition: a JSON object of the schemas

# OpenAI's own roles for the system prompt: `developer` replaces `system` for reasoning models.
_SYSTEM_ROLES = ("system", "developer")
# Content blocks only Anthropic's Messages API has: they tell its requests from chat completions'.
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
# Part types the schemas define with required fields: made only by the converters below, never copied from a
# provider's part of the same name (a chat `file` part has no `modality`), so every part validates as its type.
_SCHEMA_TYPES = frozenset({"text", "reasoning", "tool_call", "tool_call_response", "uri", "blob", "file",
                           "server_tool_call", "server_tool_call_response"})

# Finish reasons as the conventions name them; a reason not listed is kept as the provider gave it.
_OPENAI_FINISH = {"tool_calls": "tool_call", "function_call": "tool_call"}
_ANTHROPIC_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_call", "max_tokens": "length",
                     "refusal": "content_filter", "model_context_window_exceeded": "length"}


# --- reading any shape ---------------------------------------------------------------------------------------------

def _field(obj: Any, name: str) -> Any:
    """A mapping's key or an object's attribute: requests are dicts, responses SDK objects or namespaces."""
    try:
        if isinstance(obj, Mapping):
            return obj.get(name)
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a hostile object (a raising property or `get`): nothing to read
        return None


def _seq(value: Any) -> Sequence[Any]:
    """`value` if it is a list or tuple: strings, mappings and iterators are not lists of messages or parts."""
    return value if isinstance(value, (list, tuple)) else ()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _one(value: Any, kind: str = "text") -> Message | None:
    """A text (or reasoning) part for a non-empty string: an empty one says nothing."""
    return {"type": kind, "content": value} if isinstance(value, str) and value else None


def _text(value: Any, kind: str = "text") -> list[Message]:
    part = _one(value, kind)
    return [part] if part is not None else []


def _arguments(value: Any) -> Any:
    """Tool-call arguments as the object their JSON text holds (as contrib's openai-v2 does), else as they are."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON (a model's broken call), or nested past Python's stack
            return value
    return value


def _tool_call(call_id: Any, name: Any, arguments: Any) -> Message | None:
    if not isinstance(name, str):  # the one field the schema requires
        return None
    return {"type": "tool_call", "id": _str(call_id), "name": name, "arguments": _arguments(arguments)}


def _tool_response(call_id: Any, response: Any) -> Message:
    return {"type": "tool_call_response", "id": _str(call_id), "response": response}


def _generic(part: Any) -> Message | None:
    """A part of a type we do not map, as the schema's generic part: its own type, its fields as they are."""
    kind = _field(part, "type")
    if not isinstance(kind, str) or kind in _SCHEMA_TYPES:
        return None
    if not isinstance(part, Mapping):  # an SDK object: its type says what was there
        return {"type": kind}
    return {key: value for key, value in part.items() if isinstance(key, str)}


def _image_uri(url: Any) -> Message | None:
    return {"type": "uri", "modality": "image", "uri": url} if isinstance(url, str) else None


def _parts(items: Any, convert: Callable[[Any], Message | None]) -> list[Message]:
    """`items` (a string is one text part) converted one by one; what converts to nothing is left out."""
    if isinstance(items, str):
        return _text(items)
    parts = []
    for item in _seq(items):
        part = convert(item)
        if part is not None:
            parts.append(part)
    return parts


# --- OpenAI chat completions -----------------------------------------------------------------------------------------

def _chat_part(part: Any) -> Message | None:
    if isinstance(part, str):  # some clients send a list of plain strings
        return _one(part)
    kind = _field(part, "type")
    if kind == "text":
        return _one(_field(part, "text"))
    if kind == "refusal":  # the model's own words, as output_text is
        return _one(_field(part, "refusal"))
    if kind == "image_url":
        image = _field(part, "image_url")
        return _image_uri(image if isinstance(image, str) else _field(image, "url"))
    return _generic(part)


def _reasoning(message: Any) -> list[Message]:
    """Reasoning as the providers that return it on the message name it (DeepSeek, vLLM: reasoning_content;
    OpenRouter: reasoning): before the text, where the model produced it."""
    return _text(_field(message, "reasoning_content"), "reasoning") or _text(_field(message, "reasoning"), "reasoning")


def _chat_tool_calls(message: Any) -> list[Message]:
    parts = []
    for call in _seq(_field(message, "tool_calls")):
        function = _field(call, "function")
        if function is not None:
            part = _tool_call(_field(call, "id"), _field(function, "name"), _field(function, "arguments"))
        else:  # a custom tool's call: free-form input
            custom = _field(call, "custom")
            part = _tool_call(_field(call, "id"), _field(custom, "name"), _field(custom, "input"))
        if part is not None:
            parts.append(part)
    legacy = _field(message, "function_call")  # before tool_calls: one call, no id
    if legacy is not None:
        part = _tool_call(None, _field(legacy, "name"), _field(legacy, "arguments"))
        if part is not None:
            parts.append(part)
    return parts


def _chat_parts(message: Any) -> list[Message]:
    """An assistant's parts in the order it produced them: reasoning, text, then the calls it asks for."""
    parts = _reasoning(message) + _parts(_field(message, "content"), _chat_part)
    parts += _text(_field(message, "refusal"))
    return parts + _chat_tool_calls(message)


def _chat_message(message: Any) -> Message | None:
    role = _field(message, "role")
    if not isinstance(role, str):
        return None
    if role in ("tool", "function"):  # a result: `function` is the legacy name of the tool role
        return {"role": "tool", "parts": [_tool_response(_field(message, "tool_call_id"), _field(message, "content"))]}
    out: Message = {"role": role}
    name = _field(message, "name")
    if isinstance(name, str) and name:
        out["name"] = name
    out["parts"] = _chat_parts(message)
    return out


# --- Anthropic messages ----------------------------------------------------------------------------------------------

def _anthropic_image(block: Any) -> Message | None:
    source = _field(block, "source")
    kind = _field(source, "type")
    if kind == "base64" and isinstance(data := _field(source, "data"), str):
        part: Message = {"type": "blob", "modality": "image", "content": data}
        if isinstance(mime := _field(source, "media_type"), str):
            part["mime_type"] = mime
        return part
    if kind == "url" and (uri := _image_uri(_field(source, "url"))) is not None:
        return uri
    return _generic(block)


def _anthropic_block(block: Any) -> Message | None:
    kind = _field(block, "type")
    if kind == "text":
        return _one(_field(block, "text"))
    if kind == "tool_use":
        return _tool_call(_field(block, "id"), _field(block, "name"), _field(block, "input"))
    if kind == "tool_result":
        return _tool_response(_field(block, "tool_use_id"), _field(block, "content"))
    if kind == "thinking":  # its signature is opaque: not content
        return _one(_field(block, "thinking"), "reasoning")
    if kind == "image":
        return _anthropic_image(block)
    return _generic(block)


def _anthropic_message(message: Any) -> Message | None:
    """One message with its role as sent: tool results stay in the user message that carries them, as contrib's
    Anthropic instrumentation records them (the conventions' examples are OpenAI's, where results have a role)."""
    role = _field(message, "role")
    if not isinstance(role, str):
        return None
    return {"role": role, "parts": _parts(_field(message, "content"), _anthropic_block)}


def _is_anthropic(request: Mapping[Any, Any], messages: Sequence[Any]) -> bool:
    if "system" in request:  # Anthropic's system prompt is a parameter, never a message
        return True
    return any(isinstance(kind := _field(block, "type"), str) and kind in _ANTHROPIC_BLOCKS
               for message in messages for block in _seq(_field(message, "content")))


# --- OpenAI Responses ------------------------------------------------------------------------------------------------

def _responses_part(part: Any) -> Message | None:
    if isinstance(part, str):
        return _one(part)
    kind = _field(part, "type")
    if kind in ("input_text", "output_text", "text"):
        return _one(_field(part, "text"))
    if kind == "refusal":
        return _one(_field(part, "refusal"))
    if kind == "input_image":
        if (uri := _image_uri(_field(part, "image_url"))) is not None:
            return uri
        if isinstance(file_id := _field(part, "file_id"), str):
            return {"type": "file", "modality": "image", "file_id": file_id}
    return _generic(part)


def _summary(item: Any) -> list[Message]:
    """A reasoning item's readable text: its summaries, then any raw reasoning text (never the encrypted content)."""
    parts = [part for block in _seq(_field(item, "summary")) for part in _text(_field(block, "text"), "reasoning")]
    return parts + [part for block in _seq(_field(item, "content"))
                    if _field(block, "type") == "reasoning_text" for part in _text(_field(block, "text"), "reasoning")]


def _responses_call(item: Any) -> Message | None:
    """A function (or custom tool) call item: `call_id` pairs it with its output, `id` is the item's own."""
    kind = _field(item, "type")
    call_id = _field(item, "call_id")
    if not isinstance(call_id, str):
        call_id = _field(item, "id")
    arguments = _field(item, "arguments" if kind == "function_call" else "input")
    return _tool_call(call_id, _field(item, "name"), arguments)


def _responses_item(item: Any) -> tuple[str, list[Message]] | None:
    """(role, parts) of one input or output item; assistant items of one turn are joined by the caller."""
    kind = _field(item, "type")
    role = _field(item, "role")
    if isinstance(role, str) and kind in (None, "message"):
        return role, _parts(_field(item, "content"), _responses_part)
    if kind in ("function_call", "custom_tool_call"):
        call = _responses_call(item)
        return ("assistant", [call]) if call is not None else None
    if kind == "reasoning":
        return "assistant", _summary(item)
    if kind in ("function_call_output", "custom_tool_call_output"):
        return "tool", [_tool_response(_field(item, "call_id"), _field(item, "output"))]
    return None  # built-in tools' items, item references: not messages of this conversation


def _responses_input(value: Any) -> list[Message]:
    """The input as messages. The API lists a turn's reasoning, text and each call as separate items; they are one
    assistant message here, as chat completions would have it (and as the output is)."""
    if isinstance(value, str):
        return [{"role": "user", "parts": _text(value)}]
    messages: list[Message] = []
    for item in _seq(value):
        converted = _responses_item(item)
        if converted is None:
            continue
        role, parts = converted
        if role == "assistant" and messages and messages[-1]["role"] == "assistant":
            messages[-1]["parts"] += parts
        else:
            messages.append({"role": role, "parts": parts})
    return messages


# --- requests --------------------------------------------------------------------------------------------------------

def input_messages(request: Any) -> tuple[list[Message] | None, list[Message]]:
    """(system instructions, messages) of a request, for gen_ai.system_instructions and gen_ai.input.messages.

    A system prompt sent as a message stays a message (the conventions keep instructions that are part of the
    chat history there); only a prompt the API takes apart from the history (Anthropic's `system`, the Responses
    API's `instructions`) is returned as system instructions.
    """
    try:
        if not isinstance(request, Mapping):
            return None, []
        messages = _seq(request.get("messages"))
        if messages or "system" in request:
            if _is_anthropic(request, messages):
                system = _parts(request.get("system"), _anthropic_block)
                return system or None, [m for m in map(_anthropic_message, messages) if m is not None]
            return None, [m for m in map(_chat_message, messages) if m is not None]
        if "input" in request or "instructions" in request:
            return _text(request.get("instructions")) or None, _responses_input(request.get("input"))
    except Exception:  # noqa: BLE001 - a hostile mapping: telemetry never fails the call it describes
        pass
    return None, []


def _tool_definition(tool: Any) -> Message | None:
    kind = _field(tool, "type")
    function = _field(tool, "function")
    if function is not None and kind in (None, "function"):  # chat completions: the function nested
        tool, kind, schema = function, "function", _field(function, "parameters")
    elif kind == "custom" and (custom := _field(tool, "custom")) is not None:  # chat's free-form tool, nested too
        tool, schema = custom, None
    elif (schema := _field(tool, "input_schema")) is not None or kind is None:  # Anthropic's client tools
        kind = "function"
    else:  # Responses' flat function, or a provider's built-in tool
        schema = _field(tool, "parameters")
    name = _field(tool, "name")
    if name is None and kind != "function":  # a built-in tool has no name but its type, which names it
        name = kind
    if not isinstance(kind, str) or not isinstance(name, str):
        return None
    out: Message = {"type": kind, "name": name}
    if isinstance(description := _field(tool, "description"), str):
        out["description"] = description
    if isinstance(schema, (Mapping, bool)):  # the schema types parameters as a JSON schema
        out["parameters"] = schema
    return out


# More messages than the export budget can hold even empty (`{"role":"user","parts":[]}` is 26 characters of 2 x 4096):
# the ones before them are never converted, so the records thread's work does not grow with the history.
WINDOW = 320
_HISTORIES = ("messages", "input")


def window(request: Any, keep: int = WINDOW) -> tuple[Any, int]:
    """The request with its history cut to its first message (a system prompt) and the last `keep`, and how many
    messages were left out between them."""
    if type(request) is not dict:
        return request, 0
    for key in _HISTORIES:
        history = request.get(key)
        if type(history) is list and len(history) > keep + 1:
            return {**request, key: [history[0], *history[-keep:]]}, len(history) - keep - 1
    return request, 0


def tool_definitions(request: Any) -> list[Message] | None:
    """The request's tools as gen_ai.tool.definitions (chat, Responses and Anthropic shapes); None without tools."""
    try:
        tools = request.get("tools") if isinstance(request, Mapping) else None
        return [d for d in map(_tool_definition, _seq(tools)) if d is not None] or None
    except Exception:  # noqa: BLE001 - a hostile mapping: no definitions rather than a failed call
        return None


# --- responses -------------------------------------------------------------------------------------------------------

def _finish(reason: Any, names: Mapping[str, str]) -> str:
    """The conventions' name of a provider's finish reason. None (or no reason) is "error", as contrib's openai-v2
    records it: a generation that says nothing about how it ended did not end normally."""
    if not isinstance(reason, str) or not reason:
        return "error"
    return names.get(reason, reason)


def _chat_choice(choice: Any) -> Message | None:
    message = _field(choice, "message")
    if message is None:
        return None
    role = _field(message, "role")
    return {"role": role if isinstance(role, str) and role else "assistant", "parts": _chat_parts(message),
            "finish_reason": _finish(_field(choice, "finish_reason"), _OPENAI_FINISH)}


def _anthropic_output(response: Any, blocks: Sequence[Any]) -> Message:
    role = _field(response, "role")
    return {"role": role if isinstance(role, str) and role else "assistant", "parts": _parts(blocks, _anthropic_block),
            "finish_reason": _finish(_field(response, "stop_reason"), _ANTHROPIC_FINISH)}


def _responses_finish(response: Any, parts: Sequence[Message]) -> str:
    """A Responses reason: the API gives a status, not a finish reason. A call asked for wins, as in chat."""
    if any(part["type"] == "tool_call" for part in parts):
        return "tool_call"
    status = _field(response, "status")
    if status in (None, "completed"):  # Hermes's own namespaces may have no status
        return "stop"
    if status == "incomplete":  # cut short: by max_output_tokens unless the details say content_filter
        reason = _field(_field(response, "incomplete_details"), "reason")
        return "content_filter" if reason == "content_filter" else "length"
    if status == "failed":
        return "error"
    return status if isinstance(status, str) else "error"


def _responses_output(response: Any, items: Sequence[Any]) -> Message:
    """Every output item's parts in one assistant message: one generation, however many items it took."""
    parts: list[Message] = []
    for item in items:
        converted = _responses_item(item)
        if converted is not None and converted[0] == "assistant":
            parts += converted[1]
    return {"role": "assistant", "parts": parts, "finish_reason": _responses_finish(response, parts)}


def output_messages(response: Any) -> list[Message]:
    """A response as gen_ai.output.messages: one message per choice (chat completions), or the one message of an
    Anthropic or Responses API response."""
    try:
        choices = _field(response, "choices")
        if isinstance(choices, (list, tuple)):
            return [m for m in map(_chat_choice, choices) if m is not None]
        output = _field(response, "output")
        if isinstance(output, (list, tuple)):
            return [_responses_output(response, output)]
        blocks = _field(response, "content")
        if isinstance(blocks, (list, tuple)):
            return [_anthropic_output(response, blocks)]
    except Exception:  # noqa: BLE001 - a hostile response: no messages rather than a failed call
        pass
    return []


def finish_reasons(messages: Sequence[Any]) -> tuple[str, ...]:
    """gen_ai.response.finish_reasons from output messages: one per message, in their order."""
    return tuple(reason for m in _seq(messages) if isinstance(reason := _field(m, "finish_reason"), str))


# --- export ----------------------------------------------------------------------------------------------------------

# Keys that carry a message's or part's structure: kept whole (only bounded), so that what is shortened still
# validates. Everything else is content: redacted, bounded, shortened.
_STRUCTURE = frozenset({"role", "type", "name", "id", "finish_reason", "modality", "mime_type"})
_STRUCTURE_CAP = 256  # no role, type, tool name or call id is longer; a hostile one is cut here
_MAX_PARTS = 50  # as content.sanitize bounds a list's items
_FLOOR = 16  # content.to_json's smallest string size
_KEEP = 256  # what a kept message's strings may be shortened to when older messages are dropped for room
OMITTED = "hermes.omitted"  # the type of the generic part that says what was left out


def _clean(item: Mapping[Any, Any], cap: int, *, parts: bool = True) -> Message:
    """One message, part or tool definition redacted and bounded on its own (content.sanitize), its structure
    kept: a list of parts stays a list of parts, however many there were."""
    out: Message = {}
    rest: dict[str, Any] = {}
    for key, value in item.items():
        if not isinstance(key, str):
            continue
        if key in _STRUCTURE:
            out[key] = content.sanitize(value, cap=min(cap, _STRUCTURE_CAP))
        elif key == "parts" and parts and isinstance(value, (list, tuple)):
            out[key] = [_clean(p, cap, parts=False) for p in value[:_MAX_PARTS] if isinstance(p, Mapping)]
            if len(value) > _MAX_PARTS:
                out[key].append({"type": OMITTED, "parts": len(value) - _MAX_PARTS})
        else:
            rest[key] = value
    if rest:
        out.update(content.sanitize(rest, cap=cap))  # names credentials by key too (api_key: <redacted>)
    return out


def _shorten(item: Message, size: int) -> Message:
    """`item` (cleaned) with every content string longer than `size` cut there and marked; its structure whole."""
    out: Message = {}
    for key, value in item.items():
        if key in _STRUCTURE:
            out[key] = value
        elif key == "parts" and isinstance(value, list):
            out[key] = [_shorten(p, size) if isinstance(p, dict) else p for p in value]
        else:
            out[key] = content._shortened(value, size)
    return out


def _sizes(cap: int) -> list[int]:
    """The string sizes content.to_json tries, halving from `cap` down to its floor."""
    sizes, size = [], cap
    while size > _FLOOR:
        size //= 2
        sizes.append(size)
    return sizes


def _render(head: Message | None, kept: list[Message], dropped: int, size: int | None,
            parts_dropped: int = 0) -> str:
    """The JSON text of what is kept, strings cut at `size` (None: as cleaned), with one generic part in front of
    the first kept message's parts counting what was left out (in a list of parts or tool definitions: in front
    of the list's items, with the name a generic tool definition needs)."""
    items = [_shorten(m, size) if size is not None else m for m in kept]
    if dropped or parts_dropped:
        at = next((i for i, m in enumerate(items) if m.get("role") not in _SYSTEM_ROLES), 0) if items else None
        if at is not None and isinstance(items[at].get("parts"), list):
            marker: Message = {"type": OMITTED, "messages": dropped}
            if parts_dropped:
                marker["parts"] = parts_dropped
            items[at] = {**items[at], "parts": [marker, *items[at]["parts"]]}
        else:
            items.insert(0, {"type": OMITTED, "name": OMITTED, "items": dropped})
    if head is not None:
        items.insert(0, _shorten(head, size) if size is not None else head)
    return content._dumps(items)


def _longest(item: Any) -> int:
    """The length of the longest content string in a cleaned message (what `_shorten` would cut)."""
    if isinstance(item, str):
        return len(item)
    if isinstance(item, list):
        return max((_longest(value) for value in item), default=0)
    if isinstance(item, dict):
        return max((_longest(value) for key, value in item.items() if key not in _STRUCTURE), default=0)
    return 0


def _skeleton(item: Message) -> Message:
    """A message none of whose content fits: its structure alone (role, finish reason), its parts left out."""
    return {**{key: value for key, value in item.items() if key in _STRUCTURE}, "parts": []}


def _scrub(text: str) -> str:
    """Lone surrogates (half a pair, cut or never whole) as `?`: they are not UTF-8, exporters reject them."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _fit(items: Any, cap: int, omitted: int = 0) -> str:
    limit, sizes = 2 * cap, _sizes(cap)
    floor = sizes[-1] if sizes else None
    keep = min(_KEEP, cap)  # fewer messages, each still readable, rather than many cut to a few characters

    def floor_len(item: Message) -> int:  # its length once every content string is shortened to `keep`
        return len(content._dumps(_shorten(item, keep)))

    seq: Sequence[Any] = _seq(items)
    total = sum(1 for m in seq if isinstance(m, Mapping))
    head, start = None, 0
    if total > 1 and isinstance(seq[0], Mapping) and seq[0].get("role") in _SYSTEM_ROLES:  # alone, it is the last
        head, start = _clean(seq[0], cap), 1
    used = 2 + (floor_len(head) + 1 if head is not None else 0)  # the brackets, the system message and its comma
    room = len(content._dumps({"type": OMITTED, "name": OMITTED, "items": total, "parts": 0})) + 1
    # From the end backwards, as many messages as fit even shortened to the floor: the ones before are dropped
    # unread (never redacted), so the cost follows what is exported, not the length of the history.
    kept: list[Message] = []
    last: Message | None = None
    left = total - start  # mappings not looked at yet
    for index in range(len(seq) - 1, start - 1, -1):
        item = seq[index]
        if not isinstance(item, Mapping):
            continue
        left -= 1
        cleaned = _clean(item, cap)
        if last is None:
            last = cleaned
        need = floor_len(cleaned) + 1
        if not kept and floor is not None and used + need + (room if left else 0) > limit:
            need = len(content._dumps(_shorten(cleaned, floor))) + 1  # the last message, shortened further
        if used + need + (room if left else 0) > limit:
            break
        kept.append(cleaned)
        used += need
    kept.reverse()
    parts_dropped = 0
    if not kept and last is not None and isinstance(last.get("parts"), list):
        kept, parts_dropped = [_skeleton(last)], len(last["parts"])  # not even the last message fits: its role does
    dropped = total - start - len(kept) + omitted
    text = _render(head, kept, dropped, None, parts_dropped)
    if len(text) > limit:  # a size at or over the longest string shortens nothing: not rendered again for it
        longest = max((_longest(m) for m in ([head] if head is not None else []) + kept), default=0)
        sizes = [size for size in sizes if size < longest] or sizes[-1:]
    for size in sizes:  # shortened as content.to_json shortens: halving every content string until it fits
        if len(text) <= limit:
            break
        text = _render(head, kept, dropped, size, parts_dropped)
    if len(text) > limit and head is not None:  # a system message too big even shortened: the last messages win
        text = _render(None, kept, dropped + 1, floor, parts_dropped)
    return text if len(text) <= limit else "[]"


def to_json(items: Any, *, cap: int = 4096, omitted: int = 0) -> str:
    """Messages (or a list of parts or tool definitions) as JSON text for a span attribute or an event: redacted
    message by message, at most `2 * cap` characters (content.to_json's budget), always a JSON list that still
    validates against its schema.

    What does not fit is first shortened string by string (content strings only, each marked `…[truncated]`),
    then dropped message by message: a leading system message and as many of the last messages as fit are kept,
    and one generic part in front of the first kept message counts the dropped ones (`omitted` more were left
    out before: :func:`window`).
    """
    try:
        return _scrub(_fit(items, cap, omitted))
    except Exception:  # noqa: BLE001 - telemetry never fails the call it describes
        return "[]"
