"""Traces as a person looking at an agent wants them at a glance: one row per turn, one row per session, a trace's
spans on one time axis, and the filters of the dashboard's Traces tab.

Everything here is plain data (str, int, float, None, lists and dicts) ready for JSON: a non-finite or
non-numeric amount is an unknown cost, never a number; a count is a non-negative integer or missing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..cost import pricing as cost
from .decode import STATUS_ERROR, Span
from .traces import Trace

__all__ = ["Filters", "detail", "matches", "sessions", "turn_row"]

REWRITE = "hermes.middleware.rewrite"
_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")


def _amount(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _operation(span: Span) -> str:
    """`chat`, `execute_tool`, `invoke_agent`, ...: the attribute, else the first word of the name."""
    return _text(span["attributes"].get("gen_ai.operation.name")) or span["name"].split(" ", 1)[0]


def _cost(attributes: Mapping[str, Any], amount_key: str, status_key: str) -> dict[str, Any] | None:
    """{"amount": dollars or None, "status": ..., "reason": ...}; None when the span carries no cost at all."""
    amount, status = attributes.get(amount_key), attributes.get(status_key)
    if amount is None and status is None:
        return None
    value = _amount(amount)
    found = {"amount": value, "status": "unknown" if value is None else _text(status) or "estimated",
             "reason": _text(attributes.get(cost.USAGE_COST_REASON))}
    provider = _amount(attributes.get(_PROVIDER_PARTS.get(amount_key, "")))
    if provider is None and attributes.get(cost.USAGE_COST_SOURCE) == cost.PROVIDER and amount_key == cost.USAGE_COST:
        provider = value
    if provider is not None:
        found["provider"] = provider  # the part the provider reported itself; the rest is Hermes's estimate
    return found


_PROVIDER_PARTS = {cost.TURN_COST: cost.TURN_PROVIDER_COST, cost.SUBAGENT_COST: cost.SUBAGENT_PROVIDER_COST,
                   cost.SESSION_COST: cost.SESSION_PROVIDER_COST}


def turn_row(trace: Trace) -> dict[str, Any]:
    """One row of the trace list: start, duration, model(s), tokens, the turn's cost, tool calls, errors,
    rewrites; the session and profile of its root."""
    root = trace.roots[0] if trace.roots else None
    attrs = root["attributes"] if root is not None else {}
    models: list[str] = []
    tokens = [0, 0]
    tools = errors = rewrites = 0
    for span in trace.spans:
        operation = _operation(span)
        if operation == "chat":
            model = _text(span["attributes"].get("gen_ai.request.model"))
            if model and model not in models:
                models.append(model)
            for n, key in enumerate(_TOKENS):
                tokens[n] += _count(span["attributes"].get(key)) or 0
        elif operation == "execute_tool":
            tools += 1
        errors += span["status_code"] == STATUS_ERROR
        rewrites += sum(1 for event in span["events"] if event["name"] == REWRITE)
    return {
        "trace_id": trace.trace_id,
        "name": trace.name,
        "start_ns": trace.start_ns,
        "duration_ns": trace.duration_ns if trace.duration_ns >= 0 else None,
        "spans": len(trace.spans),
        "models": models,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cost": _cost(attrs, cost.TURN_COST, cost.TURN_COST_STATUS),
        "tool_calls": tools,
        "errors": errors,
        "rewrites": rewrites,
        "session": _text(attrs.get("gen_ai.conversation.id")),
        "profile": _text(attrs.get(cost.PROFILE)),
        "ended": root is not None and _operation(root) == "invoke_agent",
    }


class Filters:
    """The trace list's filters: errors only, a model, a session, has rewrites, and text found in a span's name or
    in any attribute value (case-insensitive)."""

    def __init__(self, *, errors: bool = False, model: str = "", session: str = "", rewrites: bool = False,
                 text: str = "") -> None:
        self.errors, self.model, self.session, self.rewrites = errors, model, session, rewrites
        self.text = text.casefold()

    def __bool__(self) -> bool:
        return bool(self.errors or self.model or self.session or self.rewrites or self.text)


def matches(trace: Trace, row: Mapping[str, Any], filters: Filters) -> bool:
    if filters.errors and not row["errors"]:
        return False
    if filters.rewrites and not row["rewrites"]:
        return False
    if filters.model and filters.model not in row["models"]:
        return False
    if filters.session and filters.session != row["session"]:
        return False
    return not filters.text or any(_found(span, filters.text) for span in trace.spans)


def _found(span: Span, needle: str) -> bool:
    if needle in span["name"].casefold():
        return True
    return any(needle in str(value).casefold() for value in span["attributes"].values())


def sessions(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per session and profile: turns, tokens, cost and errors, summed over the turns' own roll-ups (a turn's
    cost is the turn root's total, never summed again from its attempts); newest session first."""
    table: dict[tuple[str | None, str | None], dict[str, Any]] = {}
    for row in rows:
        key = (row["session"], row["profile"])
        entry = table.setdefault(key, {"session": key[0], "profile": key[1], "turns": 0, "input_tokens": 0,
                                       "output_tokens": 0, "cost": 0.0, "cost_status": "estimated",
                                       "unpriced_turns": 0, "errors": 0, "first_ns": row["start_ns"],
                                       "last_ns": row["start_ns"]})
        entry["turns"] += 1
        entry["input_tokens"] += row["input_tokens"]
        entry["output_tokens"] += row["output_tokens"]
        entry["errors"] += row["errors"]
        entry["first_ns"] = min(entry["first_ns"], row["start_ns"])
        entry["last_ns"] = max(entry["last_ns"], row["start_ns"])
        spent = row["cost"]
        if spent is not None and spent["amount"] is not None:
            entry["cost"] += spent["amount"]
            if spent["status"] == "partial":
                entry["cost_status"] = "partial"
        else:
            entry["unpriced_turns"] += 1
    for entry in table.values():
        if entry["unpriced_turns"]:
            entry["cost_status"] = "partial" if entry["unpriced_turns"] < entry["turns"] else "unknown"
        if entry["cost_status"] == "unknown":
            entry["cost"] = None
    return sorted(table.values(), key=lambda e: -e["last_ns"])


def detail(trace: Trace) -> dict[str, Any]:
    """A trace's spans depth-first in start order with their depth, on the trace's time axis: what the waterfall
    draws; each span's attributes and events as they are (values are JSON scalars or lists of them)."""
    spans = []
    for span, depth, _ in trace.walk():
        attrs = span["attributes"]
        spans.append({
            "span_id": span["span_id"],
            "parent_span_id": span["parent_span_id"],
            "depth": depth,
            "name": span["name"],
            "operation": _operation(span),
            "start_ns": span["start_ns"],
            "end_ns": span["end_ns"],
            "error": span["status_code"] == STATUS_ERROR,
            "status_message": span["status_message"],
            "attributes": {key: _plain(value) for key, value in attrs.items()},
            "events": [{"name": e["name"], "time_ns": e["time_ns"],
                        "attributes": {k: _plain(v) for k, v in e["attributes"].items()}} for e in span["events"]],
            "cost": _cost(attrs, cost.USAGE_COST, cost.USAGE_COST_STATUS)
            or _cost(attrs, cost.TURN_COST, cost.TURN_COST_STATUS)
            or _cost(attrs, cost.SUBAGENT_COST, cost.SUBAGENT_COST_STATUS),
        })
    return {"trace_id": trace.trace_id, "start_ns": trace.start_ns, "end_ns": trace.end_ns,
            "summary": turn_row(trace), "spans": spans}


def _plain(value: Any) -> Any:
    """JSON-safe: a non-finite float becomes its text ("inf"), a huge integer its digits."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**53) <= value <= 2**53:
        return str(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
