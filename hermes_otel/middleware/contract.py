"""The Hermes middleware contract's vocabulary (seed spec, `hermes.middleware.v1`).

Shared by the span-per-layer instrumentation of Hermes and by our own
spec-exact chain runner, so both describe layers with the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OBSERVER_SCHEMA_VERSION = "hermes.observer.v1"
MIDDLEWARE_SCHEMA_VERSION = "hermes.middleware.v1"

LLM_REQUEST = "llm_request"
TOOL_REQUEST = "tool_request"
LLM_EXECUTION = "llm_execution"
TOOL_EXECUTION = "tool_execution"
REQUEST_KINDS = (LLM_REQUEST, TOOL_REQUEST)
EXECUTION_KINDS = (LLM_EXECUTION, TOOL_EXECUTION)
KINDS = (*REQUEST_KINDS, *EXECUTION_KINDS)

# The payload each kind carries, and what request middleware returns it under.
PAYLOAD_KEY = {LLM_REQUEST: "request", LLM_EXECUTION: "request", TOOL_REQUEST: "args", TOOL_EXECUTION: "args"}

# Outcomes of one execution layer.
OK = "ok"  # called next_call once and returned
FAIL_OPEN = "fail_open"  # raised; the chain went on without it (or kept the downstream result)
SHORT_CIRCUIT = "short_circuit"  # returned without calling next_call
ERROR = "error"  # a downstream error passed through it, or it transformed one
OUTCOMES = (OK, FAIL_OPEN, SHORT_CIRCUIT, ERROR)

TRACE_FIELDS = ("source", "reason", "name")


def trace_entry(result: Mapping[str, Any]) -> dict[str, str]:
    """The `middleware_trace` entry of one request-middleware result (seed rule).

    `source`, `reason` and `name` are kept when they are non-empty strings;
    an entry with none of them gets `source="plugin"`.
    """
    entry = {k: v for k in TRACE_FIELDS if isinstance(v := result.get(k), str) and v}
    return entry or {"source": "plugin"}


def replacement(kind: str, result: Any) -> dict | None:
    """The replacement payload a request-middleware result carries, or None."""
    if not isinstance(result, dict):
        return None
    payload = result.get(PAYLOAD_KEY[kind])
    return payload if isinstance(payload, dict) else None


def changed_keys(before: Any, after: Any) -> tuple[str, ...]:
    """Top-level keys whose values differ, sorted.

    Identity is checked first, so the usual case (a middleware that replaces
    one key and reuses the rest, e.g. the messages list) costs nothing per
    message; only values that were rebuilt are compared by equality.
    """
    if before is after:
        return ()
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return ("*",)
    keys = []
    for key in before.keys() | after.keys():
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old is new:
            continue
        try:
            same = old == new
        except Exception:  # noqa: BLE001 - an exotic __eq__ must not break telemetry
            same = False
        if same is not True:
            keys.append(str(key))
    return tuple(sorted(keys))


_MISSING = object()


def callback_name(callback: Any) -> str:
    """Qualified name of a middleware callback (module.qualname), for attributes and logs."""
    target = getattr(callback, "__wrapped__", callback)
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    return f"{module}.{name}" if module else str(name)
