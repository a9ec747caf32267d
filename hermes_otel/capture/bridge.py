"""Observer bridge: every `hermes.observer.v1` hook payload -> spans, one log record, metrics.

Spans are the derived view; the log stream loses nothing: each hook call
becomes exactly one OTLP log record named `hermes.observer.<hook>`,
correlated to the span it belongs to, with the schema version, the ids and
safe scalars as attributes. The body carries content only when capture is on
(EVENT_ONLY / SPAN_AND_EVENT), redacted and size-capped. Nothing here
serialises the conversation history: a turn's cost does not grow with it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from types import NoneType
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.trace import Span

from .. import semconv as sc
from .._internal import log as _log
from .._internal.safety import report, safely
from ..emitter import Emitter, Inline
from ..middleware.contract import OBSERVER_SCHEMA_VERSION
from ..redaction import content
from ..tracking import Tracker, messages, streaming

SCHEMA_ATTR = "hermes.telemetry_schema_version"
HOOK_ATTR = "hermes.observer.hook"
EVENT_PREFIX = "hermes.observer."

# The observer hooks we subscribe to, where the running Hermes defines them (0.19's 23, then 0.2x's): plugin.yaml's
# `provides_hooks` lists exactly these (tests/unit/test_manifest.py). Left out on purpose: a hook whose return
# value steers Hermes (`transform_api_error_classification`) and one fired per streamed delta of every room member
# (`on_room_member_activity`). Others reaching the bridge are exported best-effort and warned about once.
HOOKS = (
    "pre_tool_call", "post_tool_call", "transform_terminal_output", "transform_tool_result",
    "transform_llm_output", "pre_llm_call", "post_llm_call", "pre_verify", "pre_api_request",
    "post_api_request", "api_request_error", "on_session_start", "on_session_end", "on_session_finalize",
    "on_session_reset", "subagent_start", "subagent_stop", "pre_gateway_dispatch", "pre_approval_request",
    "post_approval_response", "kanban_task_claimed", "kanban_task_completed", "kanban_task_blocked",
    # Hermes 0.20+
    "pre_auxiliary_call", "post_auxiliary_call", "on_stream_start", "on_stream_delta", "on_stream_end",
    "on_interim_message", "pre_command", "pre_transcription", "on_skill_lifecycle", "agent_loop_stopped",
    "post_gateway_admission", "gateway_platform_event", "on_human_input_request", "on_human_input_resolved",
    "on_kanban_dispatch_tick", "on_kanban_task_updated", "on_kanban_worker_exited", "on_kanban_worker_spawned",
    "on_kanban_worker_stale_claim",
)
KNOWN_HOOKS = frozenset(HOOKS)
# Hooks that feed span timing and are not one record per call: one per streamed chunk would be a record per token.
UNRECORDED_HOOKS = frozenset({"on_stream_delta"})

# Payload keys exported as `hermes.<key>` string attributes (ids and short enum-like values).
STRING_KEYS = (
    "session_id", "task_id", "turn_id", "api_request_id", "tool_call_id", "parent_session_id",
    "parent_turn_id", "parent_subagent_id", "child_session_id", "child_subagent_id", "platform", "model",
    "provider", "api_mode", "tool_name", "status", "error_type", "finish_reason", "response_model", "surface",
    "pattern_key", "choice", "decided_by", "reason", "child_role", "child_status", "board", "assignee",
    "profile_name", "aux_task", "task", "kind",
)
_MAX_STRING = 256

# Payload keys that hold content: exported (sanitized) in the log body only under capture.
CONTENT_KEYS = (
    "user_message", "assistant_response", "assistant_message", "args", "result", "error_message", "error",
    "command", "description", "child_goal", "child_summary", "summary", "output", "response",
)


_STRING_ATTRS = {key: f"hermes.{key}" for key in STRING_KEYS}
# Keys looked at for numbers and flags: any but the strings above (handled with them), content (a
# number there is content too) and the fields Hermes fills with containers (history, requests, traces).
_NOT_NUMBERS = frozenset({"telemetry_schema_version", *STRING_KEYS, *CONTENT_KEYS, "conversation_history",
                          "request_messages", "middleware_trace", "request", "usage"})

# The records that end a turn (`on_session_end`) or the session: they carry the session's cost so far.
SESSION_COST_HOOKS = frozenset({"on_session_end", "on_session_finalize", "on_session_reset"})


def _attributes(hook: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """Ids, enum-like strings and numeric/bool scalars; never content."""
    schema = payload.get("telemetry_schema_version")
    attrs: dict[str, Any] = {
        HOOK_ATTR: hook[:_MAX_STRING],
        SCHEMA_ATTR: schema[:_MAX_STRING] if isinstance(schema, str) else "unknown",
    }
    strings, numbers = _plan(tuple(payload))
    for key, name in strings:
        value = payload[key]
        if type(value) is str:
            if value:
                attrs[name] = value[:_MAX_STRING]
        elif isinstance(value, str):  # a subclass (an enum ...): its plain value
            if value:
                attrs[name] = str.__str__(value)[:_MAX_STRING]
        else:
            _add_number(attrs, name, value)  # a number in an id or enum field is still a number
    for key, name in numbers:
        value = payload[key]
        kind = type(value)
        if kind is int:  # the common cases inline; the rest (subclasses, non-numbers) in _add_number
            if -(2**63) <= value < 2**63:
                attrs[name] = value
        elif kind is float:
            if math.isfinite(value):
                attrs[name] = value
        elif kind is not NoneType:
            _add_number(attrs, name, value)
    return attrs


Plan = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
_PLANS: dict[tuple[Any, ...], Plan] = {}


def _plan(keys: tuple[Any, ...]) -> Plan:
    """A payload's (key, attribute name) pairs to read as strings and as numbers, made once per set of keys.

    Hermes calls each hook with the same keyword arguments every time: classifying them once per
    shape leaves only the values to read (a bounded memo: beyond it, plans are made per call)."""
    plan = _PLANS.get(keys)
    if plan is None:
        plan = (tuple((key, _STRING_ATTRS[key]) for key in keys if key in _STRING_ATTRS),
                tuple((key, f"hermes.{key}") for key in keys if key not in _NOT_NUMBERS))
        if len(_PLANS) < 256:
            _PLANS[keys] = plan
    return plan


def _add_number(attrs: dict[str, Any], name: str, value: Any) -> None:
    """`name` for a bool, an int that fits 64 bits or a finite float (subclasses included)."""
    kind = type(value)
    if kind is bool:
        pass
    elif kind is int or (kind not in _NOT_NUMERIC and isinstance(value, int)):
        if not -(2**63) <= value < 2**63:
            return
    elif kind is float or (kind not in _NOT_NUMERIC and isinstance(value, float)):
        if not math.isfinite(value):
            return
    else:
        return
    attrs[name] = value


_NOT_NUMERIC = frozenset({str, NoneType, dict, list, tuple})


class ObserverBridge:
    def __init__(
        self, tracker: Tracker, logger, meter=None, capture: str = "NO_CONTENT", emitter: Emitter | Inline | None = None
    ) -> None:
        self._tracker = tracker
        self._logger = logger
        self._capture = capture
        self._metrics = _Instruments(meter) if meter is not None else None
        self._emitter = emitter if emitter is not None else Inline()
        self._content_in_events = content.in_events(capture)

    def on_hook(self, hook: str, payload: Mapping[str, Any]) -> None:
        timestamp = time.time_ns()  # when Hermes called the hook, before any work of ours
        schema = payload.get("telemetry_schema_version")
        if not (type(schema) is str and schema == OBSERVER_SCHEMA_VERSION):  # hostile objects may fail __eq__
            _log.once(
                f"schema:{content.redact_text(_short(schema), 80)}",
                "hermes-otel: observer payload with schema %s (expected %r); exported best-effort",
                content.redact_text(_short(schema), 80),
                OBSERVER_SCHEMA_VERSION,
            )
        if hook not in KNOWN_HOOKS:
            _log.once(f"hook:{hook}", "hermes-otel: unknown observer hook %r; exported best-effort", hook)
        handler = _SPAN_HANDLERS.get(hook)
        if hook in UNRECORDED_HOOKS:
            if handler is not None:
                safely(handler, self, payload)
            return
        try:
            span = self._tracker.span_for(payload) if handler is None else handler(self, payload)
        except Exception as exc:  # noqa: BLE001 - fail open: the record is still emitted
            report(handler or self._tracker.span_for, exc)
            span = safely(self._tracker.span_for, payload) if handler is not None else None
        body = None
        if self._content_in_events:
            # Content is copied now (the objects behind it may change once the hook returns) and redacted on
            # the records thread: the redaction is most of what capture costs.
            body = {k: content.hold(payload[k]) for k in CONTENT_KEYS if k in payload}
        # `payload` is this call's own kwargs dict and attributes read only its immutable
        # scalars, so the record (and the counter it feeds) can be made later, off the agent's thread.
        self._emitter.submit(self._emit_record, hook, payload, span, timestamp, body)

    def _emit_record(self, hook: str, payload: Mapping[str, Any], span, timestamp: int, body) -> None:
        context = trace.set_span_in_context(span) if span is not None else None
        if body:
            body = {key: content.sanitize(held) for key, held in body.items()}
        attributes = _attributes(hook, payload)
        costs = getattr(self._tracker, "costs", None)
        if costs is not None and hook in SESSION_COST_HOOKS:  # cost: the session's total so far, on its end records
            attributes.update(costs.session_attributes(payload.get("session_id")))
        self._logger.emit(
            timestamp=timestamp,
            observed_timestamp=timestamp,
            context=context,
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            body=body or None,
            attributes=attributes,
            event_name=EVENT_PREFIX + hook,
        )
        count = _COUNTERS.get(hook)
        if count is not None and self._metrics is not None:
            count(self._metrics, payload, context)  # exemplars point at the record's span

    # -- span-side handlers: each returns the span the hook's record belongs to --------

    def _turn_start(self, payload: Mapping[str, Any]) -> None:
        turn = self._tracker.turn(payload.get("turn_id"), payload.get("session_id"), payload)
        if turn is not None and self._tracker.capture_on_spans and "user_message" in payload:
            turn.span.set_attribute("gen_ai.input.messages", _messages("user", payload.get("user_message")))

    def _turn_output(self, payload: Mapping[str, Any]) -> None:
        if not (self._tracker.capture_on_spans and "assistant_response" in payload):
            return
        span = self._tracker.span_for({"turn_id": payload.get("turn_id")})
        if span is not None:
            span.set_attribute("gen_ai.output.messages", _messages("assistant", payload.get("assistant_response")))

    def _turn_end(self, payload: Mapping[str, Any]) -> None:
        self._tracker.end_turn(payload.get("turn_id"), payload)

    def _pre_tool(self, payload: Mapping[str, Any]) -> None:
        self._tracker.trace_rewrites("tool_request", payload)  # for the call's span, which starts next

    def _post_tool(self, payload: Mapping[str, Any]) -> Span | None:
        if self._tracker.capture_on_spans and "result" in payload and not self._tracker.hold_tool_result(
                payload, payload.get("result")):  # no open call to redact it with at its end: here
            span = self._tracker.span_for({"tool_call_id": payload.get("tool_call_id")})
            if span is not None:
                span.set_attribute(sc.TOOL_CALL_RESULT, content.to_value(payload.get("result")))
        # The verdict looks the call up anyway: its span is the record's (else the turn's).
        span = self._tracker.tool_outcome(payload)
        return span if span is not None else self._tracker.span_for(payload)

    def _api_error(self, payload: Mapping[str, Any]) -> None:
        self._tracker.api_error(payload)

    def _approval_request(self, payload: Mapping[str, Any]) -> None:
        self._tracker.approval_requested(payload)

    def _approval_response(self, payload: Mapping[str, Any]) -> None:
        self._tracker.approval_decided(payload)

    def _session_start(self, payload: Mapping[str, Any]) -> None:
        self._tracker.session_started(payload.get("session_id"))

    def _session_close(self, payload: Mapping[str, Any]) -> None:
        self._tracker.close_session(payload.get("session_id"))

    def _subagent_start(self, payload: Mapping[str, Any]) -> None:
        self._tracker.subagent_started(payload)

    def _subagent_stop(self, payload: Mapping[str, Any]) -> None:
        self._tracker.subagent_stopped(payload)


Handler = Callable[[ObserverBridge, Mapping[str, Any]], "Span | None"]


def _located(action: Callable[[ObserverBridge, Mapping[str, Any]], None]) -> Handler:
    """A span-side action whose record belongs to the span the payload points at before it runs
    (the action may end that span), else after (the action may have started it). Each step fails
    open on its own: a payload that breaks the span view still gets its action, and its record."""

    def handler(bridge: ObserverBridge, payload: Mapping[str, Any]) -> Span | None:
        span_for = bridge._tracker.span_for
        span = safely(span_for, payload)
        try:
            action(bridge, payload)
        except Exception as exc:  # noqa: BLE001
            report(action, exc)
        return span if span is not None else safely(span_for, payload)

    handler.__qualname__ = action.__qualname__
    return handler


_SPAN_HANDLERS: dict[str, Handler] = {
    "pre_llm_call": _located(ObserverBridge._turn_start),
    "post_llm_call": _located(ObserverBridge._turn_output),
    "on_session_end": _located(ObserverBridge._turn_end),
    "pre_tool_call": _located(ObserverBridge._pre_tool),
    "post_tool_call": ObserverBridge._post_tool,
    "api_request_error": _located(ObserverBridge._api_error),
    "pre_approval_request": _located(ObserverBridge._approval_request),
    "post_approval_response": _located(ObserverBridge._approval_response),
    "on_session_start": _located(ObserverBridge._session_start),
    "on_session_finalize": _located(ObserverBridge._session_close),
    "on_session_reset": _located(ObserverBridge._session_close),
    "subagent_start": _located(ObserverBridge._subagent_start),
    "subagent_stop": _located(ObserverBridge._subagent_stop),
    "on_stream_delta": lambda _bridge, _payload: streaming.delta(),  # timing only: never a record per delta
}


# -- counters, counted with the hook's record (one unit on the records thread) ---------------


def _count_tool_call(metrics: _Instruments, payload: Mapping[str, Any], context) -> None:
    metrics.tool_calls(1, _labels(payload, (("tool_name", sc.TOOL_NAME), ("status", sc.TOOL_STATUS))), context)


def _count_api_error(metrics: _Instruments, payload: Mapping[str, Any], context) -> None:
    labels = _labels(payload, (("reason", sc.API_ERROR_REASON),))
    status = payload.get("status_code")
    if isinstance(status, int) and not isinstance(status, bool):
        labels[sc.HTTP_STATUS] = status
    metrics.api_errors(1, labels, context)


def _count_approval(metrics: _Instruments, payload: Mapping[str, Any], context) -> None:
    metrics.approvals(1, _labels(payload, (("choice", sc.APPROVAL_CHOICE), ("surface", sc.APPROVAL_SURFACE))), context)


_COUNTERS: dict[str, Callable[[_Instruments, Mapping[str, Any], Any], None]] = {
    "post_tool_call": _count_tool_call,
    "api_request_error": _count_api_error,
    "post_approval_response": _count_approval,
}


def _short(value: Any) -> str:
    return value[:80] if isinstance(value, str) else type(value).__name__


def _labels(payload: Mapping[str, Any], keys: tuple[tuple[str, str], ...]) -> dict[str, str | int]:
    return {name: value[:64] for key, name in keys if isinstance(value := payload.get(key), str) and value}


def _messages(role: str, text: Any) -> str:
    """One message in the conventions' schema, as JSON (redacted, capped); the turn's answer is its final one."""
    said = text if isinstance(text, str) else content.to_json(text)  # a text part's content is a string
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": said}]}
    if role == "assistant":
        message["finish_reason"] = "stop"
    return messages.to_json([message])


class _Instruments:
    """The bridge's counters (their `add`)."""

    def __init__(self, meter) -> None:
        self.tool_calls = meter.create_counter(
            "hermes.tool.calls", unit="{call}", description="Tool calls by tool and Hermes's status"
        ).add
        self.api_errors = meter.create_counter(
            "hermes.api.errors", unit="{error}", description="Failed provider attempts by reason and status code"
        ).add
        self.approvals = meter.create_counter(
            "hermes.approvals", unit="{decision}", description="Approval decisions by choice and surface"
        ).add
