"""Content capture and redaction: bounded, cycle-safe, and never leaking a credential.

Used for every string we export that could carry user data: captured
content (opt-in), error messages and exception text (always). Credentials are
redacted by key name (api_key, authorization, token, secret, password, ...)
and by value pattern (bearer tokens, JWTs, `sk-...` keys, AWS access keys,
private key blocks, `user:password@` in URLs, ...) in every capture mode.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

REDACTED = "<redacted>"

MODES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")

_SECRET_KEY = re.compile(
    r"(api[_-]?key|apikey|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|"
    r"bearer|token|secret|passw(or)?d|passwd|pwd|cookie|set-cookie|credential|private[_-]?key|"
    r"access[_-]?key|session[_-]?key|client[_-]?secret|signature)",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but are not secrets (token counts, ...).
_NOT_SECRET_KEY = re.compile(r"(tokens?_?(count|used|usage)|_tokens$|^tokens$|max_tokens|token_type)", re.IGNORECASE)

_VALUE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", re.S), REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), REDACTED),  # JWT
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),  # OpenAI / Anthropic style
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),  # AWS access key id
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),  # GitHub
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),  # Slack
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),  # Google API key
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s:@]+):([^@\s/]+)@"), r"\1\2:" + REDACTED + "@"),
    (re.compile(r"(?i)\b(api[_-]?key|token|secret|password|passwd)=([^&\s]+)"), r"\1=" + REDACTED),
)


def is_secret_key(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET_KEY.search(key)


def redact_text(text: str, cap: int | None = None) -> str:
    """Value-pattern redaction, then a size cap that says how much was cut."""
    if cap is not None and len(text) > cap * 4:
        text = text[: cap * 4]  # bound the regex work on huge inputs first
    for pattern, replacement in _VALUE_PATTERNS:
        text = pattern.sub(replacement, text)
    if cap is not None and len(text) > cap:
        text = f"{text[:cap]}…[truncated]"
    return text


def sanitize(value: Any, *, cap: int = 4096, depth: int = 6, items: int = 50) -> Any:
    """A JSON-ready, redacted, bounded copy of any value (cycles, bytes, NaN, broken repr included)."""
    return _sanitize(value, cap, depth, items, set())


def _sanitize(value: Any, cap: int, depth: int, items: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return redact_text(value, cap)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if depth <= 0:
        return "<nested too deep>"
    if id(value) in seen:
        return "<cycle>"
    if isinstance(value, dict):
        seen.add(id(value))
        out: dict[str, Any] = {}
        for n, (key, item) in enumerate(value.items()):
            if n >= items:
                out["…"] = f"{len(value) - items} more keys"
                break
            name = key if isinstance(key, str) else _safe_repr(key, 64)
            out[name] = REDACTED if is_secret_key(name) else _sanitize(item, cap, depth - 1, items, seen)
        seen.discard(id(value))
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        seen.add(id(value))
        seq = list(value)[: items + 1] if not isinstance(value, (list, tuple)) else value
        out_list = [_sanitize(item, cap, depth - 1, items, seen) for item in seq[:items]]
        if len(seq) > items:
            out_list.append(f"… {len(value) - items} more items")
        seen.discard(id(value))
        return out_list
    return redact_text(_safe_repr(value, cap), cap)


def _safe_repr(value: Any, cap: int) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - hostile objects: describe, don't fail
        return f"<unrepresentable {type(value).__name__}>"
    return text if len(text) <= cap else f"{text[:cap]}…[truncated]"


def to_json(value: Any, *, cap: int = 4096) -> str:
    """Sanitized JSON text for a span attribute or a log body string, capped."""
    try:
        text = json.dumps(sanitize(value, cap=cap), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = json.dumps(_safe_repr(value, cap))
    return text if len(text) <= cap * 2 else f"{text[: cap * 2]}…[truncated]"


def on_spans(mode: str) -> bool:
    return mode in ("SPAN_ONLY", "SPAN_AND_EVENT")


def in_events(mode: str) -> bool:
    return mode in ("EVENT_ONLY", "SPAN_AND_EVENT")
