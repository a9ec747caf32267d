"""How tracked entities are keyed: by Hermes's own ids only, never by task id or tool name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def text(value: Any) -> str:
    """An id usable as a key: hostile payloads may carry lists, None or objects there."""
    return value if isinstance(value, str) else ""


def tool_key(payload: Mapping[str, Any]) -> str:
    """Tool calls are keyed by (turn, call id): ids can repeat across sessions (e.g. Codex derives them
    from the tool name and arguments), turns cannot."""
    call_id = payload.get("tool_call_id")
    if not (isinstance(call_id, str) and call_id):
        return ""
    return f"{text(payload.get('turn_id'))}\x1f{call_id}"
