"""Turns (one trace each) and the sessions they belong to."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from .. import semconv as sc
from .._internal import propagation
from .._internal.bounded import BoundedMap
from ..redaction.content import redact_text
from . import messages
from .instruments import Instruments
from .keys import text

DESCRIPTION_CAP = 1024  # characters of a tool's description on its execute_tool span
_AGENT_LABELS = {sc.OPERATION: sc.OP_AGENT, sc.AGENT_NAME: sc.AGENT}
_CARRIER = ("TRACEPARENT", "TRACESTATE", "BAGGAGE")  # environment variables as a context carrier


def caller_context() -> otel_context.Context:
    """Where a new turn's trace belongs: under the active span when there is a valid one (a gateway, a server or
    a job runner that calls the agent); else under the context in the environment (`TRACEPARENT`, `TRACESTATE`,
    `BAGGAGE`: the OpenTelemetry convention for environment variables as carriers), extracted by the configured
    global propagator (`OTEL_PROPAGATORS`; `none` joins nothing), so a CI job or a script that runs `hermes chat`
    joins its own trace with its baggage; else a new trace. The current context (its baggage) goes along in every
    case."""
    current = otel_context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        return current
    carrier = {name.lower(): value for name in _CARRIER if (value := os.environ.get(name))}
    if carrier:
        current = propagation.textmap().extract(carrier, context=current)
        if trace.get_current_span(current).get_span_context().is_valid:
            return current
    return trace.set_span_in_context(trace.INVALID_SPAN, current)


TOOL_DEFINITIONS = "gen_ai.tool.definitions"


@dataclass
class Turn:
    span: Span
    context: otel_context.Context
    session_id: str
    started: float = field(default_factory=time.monotonic)
    attempts: dict[str, int] = field(default_factory=dict)  # api_request_id -> attempts so far
    tool_calls: int = 0  # tool calls started in the turn
    # The latest failed provider attempt not followed by a success: (error type, its end). A turn that
    # Hermes abandons after its retries (it fires no on_session_end then) ends with it.
    failure: tuple[str, int] | None = None
    baggage: Mapping[str, object] = field(default_factory=dict)  # the caller's (its context's, the environment's)
    # Rolled up on the records thread from the turn's attempts, for its root (invoke_agent):
    usage: list[int] | None = None  # [input, output] tokens of the attempts that reported usage
    finish_reasons: tuple[str, ...] = ()  # the last reply's
    tools: Any = None  # the last request's tool list, and what it says of each tool (execute_tool's description)
    tool_descriptions: dict[str, str] = field(default_factory=dict)

    def tally(self, attrs: Mapping[str, Any], request: Any) -> None:
        """One successful attempt's response attributes (and its request's tools) into the turn's roll-up."""
        if sc.USAGE_INPUT in attrs or sc.USAGE_OUTPUT in attrs:
            usage = self.usage = self.usage or [0, 0]
            usage[0] += attrs.get(sc.USAGE_INPUT, 0)
            usage[1] += attrs.get(sc.USAGE_OUTPUT, 0)
        if reasons := attrs.get(sc.RESPONSE_FINISH_REASONS):
            self.finish_reasons = tuple(reasons)
        tools = request.get("tools") if type(request) is dict else None
        if tools is not None and tools is not self.tools:  # Hermes sends the same list each time: read once
            self.tools = tools
            # What the model was told of each tool: free text a plugin or an MCP server wrote, so redacted in every
            # capture mode (once per tool list, on the records thread) and capped.
            self.tool_descriptions = {d["name"]: redact_text(d["description"], DESCRIPTION_CAP)
                                      for d in messages.tool_definitions(request) or () if "description" in d}

    def rolled_up(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        if self.usage is not None:
            attrs[sc.USAGE_INPUT], attrs[sc.USAGE_OUTPUT] = self.usage
        if self.finish_reasons:
            attrs[sc.RESPONSE_FINISH_REASONS] = self.finish_reasons
        return attrs


class Turns:
    def __init__(self, tracer: trace.Tracer, metrics: Instruments | None, limit: int,
                 parent_of: Callable[[str], Span | None], emitter: Any = None, costs: Any = None,
                 content_cap: int | None = None) -> None:
        self._tracer = tracer
        self._content_cap = content_cap  # under span capture: the turn's tool definitions on its root, this capped
        self._metrics = metrics
        self._emitter = emitter
        self._costs = costs
        self._parent_of = parent_of  # a subagent session's span (its turns nest under it)
        self.open: BoundedMap[str, Turn] = BoundedMap(limit, on_evict=lambda t: self._finish(t, {}, "evicted"))
        self.previous: BoundedMap[str, trace.SpanContext] = BoundedMap(limit)  # session -> last turn root
        self.ended: BoundedMap[str, trace.SpanContext] = BoundedMap(limit)  # recently ended turn -> its root
        self.sessions: BoundedMap[str, float] = BoundedMap(limit)  # session -> last activity (monotonic)

    def ensure(self, turn_id: Any, session_id: Any, payload: Mapping[str, Any]) -> Turn | None:
        """The open turn for `turn_id`, started now if this is its first sign of life."""
        if not isinstance(turn_id, str) or not turn_id:
            return None
        existing = self.open.get(turn_id)
        if existing is not None:
            return existing
        ended = self.ended.get(turn_id)
        if ended is not None:
            # A late event of a finished turn (an abandoned tool worker, ...): in the turn's trace, never reopened.
            root = trace.NonRecordingSpan(ended)
            return Turn(root, trace.set_span_in_context(root), text(session_id))
        session = text(session_id)
        previous = self.previous.get(session) if session else None
        links = [Link(previous, {"hermes.link.type": "previous_turn"})] if previous else None
        subagent = self._parent_of(session) if session else None
        # A subagent's turns nest under the parent's subagent span; any other turn joins its caller's trace.
        parent = trace.set_span_in_context(subagent) if subagent is not None else caller_context()
        span = self._tracer.start_span(
            f"{sc.OP_AGENT} {sc.AGENT}", context=parent, kind=SpanKind.INTERNAL,
            attributes=sc.turn_attributes(session, turn_id, payload), links=links,
        )
        turn = Turn(span, trace.set_span_in_context(span, parent), session, baggage=baggage.get_all(parent))
        if session:
            self.touch(session)
            self.previous.put(session, span.get_span_context())
        self.open.put(turn_id, turn)
        return turn

    def touch(self, session_id: str) -> None:
        self.sessions.put(session_id, time.monotonic())

    def of_session(self, session_id: Any) -> Turn | None:
        """The newest open turn of a session (for records that carry only the session id)."""
        session = text(session_id)
        return self.open.find(lambda t: t.session_id == session) if session else None

    def context_of(self, session: str, turn_id: str = "") -> tuple[otel_context.Context, str]:
        """(parent context, turn id) of work a session's turn did outside its spans (an auxiliary model call): the
        turn `turn_id` while open, else the session's open turn, else its last turn (a title is generated after
        the turn ended), else a trace of its own."""
        turn = self.open.get(turn_id) if turn_id else None
        if turn is None and session:
            turn = self.of_session(session)
            turn_id = next((t for t, open_turn in self.open.items() if open_turn is turn), "") if turn else turn_id
        if turn is not None:
            return turn.context, turn_id
        ended = self.ended.get(turn_id) if turn_id else None
        last = ended if ended is not None else (self.previous.get(session) if session else None)
        if last is not None:
            if ended is None:
                turn_id = next((t for t, ctx in self.ended.items() if ctx == last), "")
            return trace.set_span_in_context(trace.NonRecordingSpan(last)), turn_id
        return trace.set_span_in_context(trace.INVALID_SPAN), ""

    def end(self, turn_id: str, payload: Mapping[str, Any], reason: str | None) -> None:
        turn = self.open.pop(turn_id)
        if turn is None:
            return
        self.ended.put(turn_id, turn.span.get_span_context())
        self._finish(turn, payload, reason, turn_id)

    def _finish(self, turn: Turn, payload: Mapping[str, Any], reason: str | None, turn_id: str = "") -> None:
        """End a turn's root: Hermes's verdict when it gave one, else why we ended it. Only a turn Hermes
        reports completed is not an error. The end goes to the records thread, after the turn's attempts
        (their prices make its total), stamped now."""
        end_ns = time.time_ns()
        duration = time.monotonic() - turn.started
        if self._emitter is None:
            self._close(turn, dict(payload), reason, turn_id, end_ns, duration)
        else:
            self._emitter.submit_end(self._close, turn, dict(payload), reason, turn_id, end_ns, duration)

    def _close(self, turn: Turn, payload: Mapping[str, Any], reason: str | None, turn_id: str, end_ns: int,
               duration: float) -> None:
        span = turn.span
        completed, interrupted = payload.get("completed"), payload.get("interrupted")
        if isinstance(completed, bool):
            span.set_attribute(sc.TURN_COMPLETED, completed)
        if isinstance(interrupted, bool):
            span.set_attribute(sc.TURN_INTERRUPTED, interrupted)
        if reason is not None:
            span.set_attribute(sc.TURN_END_REASON, reason)
        if interrupted is True:
            error, message = "interrupted", "interrupted"
        elif completed is True:
            error, message = None, None
        elif turn.failure is not None:
            error, message = turn.failure[0], "the provider call failed and Hermes gave up"
            if reason is not None:  # Hermes gave up then (it fires no on_session_end for that)
                duration -= (end_ns - turn.failure[1]) / 1e9
                end_ns = turn.failure[1]
        else:
            error = "incomplete" if reason is None else reason
            message = "incomplete" if reason is None else f"the turn never finished ({reason})"
        if error is not None:
            span.set_attribute(sc.ERROR_TYPE, error)
            span.set_status(Status(StatusCode.ERROR, message))
        span.set_attributes(turn.rolled_up())  # its attempts' tokens and last finish reasons, tallied before this
        if self._content_cap is not None and turn.tools is not None:  # the tools the agent had (Opt-In)
            span.set_attribute(TOOL_DEFINITIONS, messages.to_json(messages.tool_definitions({"tools": turn.tools}),
                                                                  cap=self._content_cap))
        if self._costs is not None:  # the turn's total, its attempts priced before this runs
            span.set_attributes(self._costs.turn_attributes(turn_id))
        span.end(end_time=end_ns)
        if self._metrics is not None:
            labels = _AGENT_LABELS if error is None else {**_AGENT_LABELS, sc.ERROR_TYPE: error}
            context = trace.set_span_in_context(span)
            self._metrics.agent_duration.record(max(duration, 0.0), labels, context)
            # The turn's own calls, failed attempts included; zero is a measurement too.
            self._metrics.inference_calls.record(sum(turn.attempts.values()), labels, context)
            self._metrics.tool_calls.record(turn.tool_calls, labels, context)

    def stale(self, now: float, ttl_s: float) -> list[str]:
        return [turn_id for turn_id, t in self.open.items() if now - t.started > ttl_s]

    def idle_sessions(self, now: float, ttl_s: float) -> list[str]:
        return [session for session, seen in self.sessions.items() if now - seen > ttl_s]

    def forget_session(self, session_id: str) -> list[str]:
        """The session's state goes; returns its open turns (to end)."""
        self.sessions.pop(session_id)
        self.previous.pop(session_id)
        return [turn_id for turn_id, t in self.open.items() if t.session_id == session_id]

    def adopt(self, other: Turns) -> None:
        self.open.adopt(other.open)
        self.previous.adopt(other.previous)
        self.ended.adopt(other.ended)
        self.sessions.adopt(other.sessions)
