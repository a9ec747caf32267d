"""Span lifecycle for turns, provider attempts and tool calls.

The tracker correlates by Hermes's own ids only (`turn_id`, `api_request_id`,
`tool_call_id`), never by task id or tool name, so parallel tools and
concurrent sessions cannot cross. State is bounded: the oldest open turn is
ended (with `hermes.turn.end_reason=evicted`) when the cap is reached.

Every public method fails open: the wrappers and hooks that call it rely on
it never raising (see :func:`hermes_otel.safety.guard`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Meter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from . import content
from . import semconv as sc
from .cost import CostLedger
from .deferred import DeferredSpan, DeferredTracer, Inline, immediate, start_lazy
from .middleware.contract import LLM_REQUEST, TOOL_REQUEST
from .middleware.layers import LayerTracer, RequestEvent
from .semconv import AGENT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS


@dataclass
class Turn:
    span: Span
    context: otel_context.Context
    session_id: str
    started: float = field(default_factory=time.monotonic)
    attempts: dict[str, int] = field(default_factory=dict)  # api_request_id -> attempts so far


@dataclass
class Call:
    """An open chat or tool span plus what its end needs."""

    span: Span
    started: float
    metric_attrs: dict[str, Any]
    turn_id: str = ""
    call_id: str = ""
    end_ns: int | None = None  # set when the call returned but its outcome hook has not arrived
    outcome_seen: bool = False
    ended: bool = False
    described: tuple | None = None  # a chat's (request, context, attempt): its attributes, computed lazily


class Tracker:
    def __init__(
        self,
        tracer: trace.Tracer,
        meter: Meter | None = None,
        *,
        max_turns: int = 1024,
        turn_ttl_s: float = 6 * 3600.0,
        session_ttl_s: float = 24 * 3600.0,
        capture_on_spans: bool = False,
        costs: CostLedger | None = None,
    ) -> None:
        self.capture_on_spans = capture_on_spans
        self.costs = costs  # cost: prices chat attempts, rolls them up (hermes_otel/cost.py)
        self._tracer = tracer
        self._lock = threading.RLock()  # re-entrant: ending an evicted span may come back into the tracker
        self._turns: OrderedDict[str, Turn] = OrderedDict()
        self._last_root: OrderedDict[str, trace.SpanContext] = OrderedDict()  # session -> previous turn root
        self._tools: OrderedDict[str, Call] = OrderedDict()  # tool_call_id -> open execute_tool span
        self._max_turns = max_turns
        self._metrics = _Instruments(meter) if meter is not None else None
        self.layers = LayerTracer(tracer, meter)
        self._backlog = tracer.backlog if isinstance(tracer, DeferredTracer) else Inline()
        # Request-middleware effects waiting for the span of the call they
        # affected: ("llm_request", api_request_id) / ("tool_request", tool_call_id).
        self._pending: OrderedDict[tuple[str, str], list[RequestEvent]] = OrderedDict()
        self._failed_chats: OrderedDict[str, Call] = OrderedDict()  # api_request_id -> failed attempt awaiting api_request_error
        self._approvals: OrderedDict[str, Call] = OrderedDict()  # tool_call_id or turn_id -> open approval wait
        self._subagents: OrderedDict[str, Call] = OrderedDict()  # child session id -> open subagent span
        self._denied: OrderedDict[str, str] = OrderedDict()  # tool key -> approval choice that blocked it
        self._ended: OrderedDict[str, trace.SpanContext] = OrderedDict()  # recently ended turn -> its root
        self._sessions: OrderedDict[str, float] = OrderedDict()  # session id -> last activity (monotonic)
        self._turn_ttl_s = turn_ttl_s
        self._session_ttl_s = session_ttl_s
        self._next_sweep = time.monotonic() + 60.0

    # -- request middleware ----------------------------------------------------

    def request_pass_done(self, kind: str, context: Mapping[str, Any], events: list[RequestEvent]) -> None:
        key = context.get("api_request_id") if kind == LLM_REQUEST else _tool_key(context)
        if not isinstance(key, str) or not key:
            return
        with self._lock:
            self._pending[(kind, key)] = events  # a retry's new pass replaces the last one
            while len(self._pending) > self._max_turns:
                self._pending.popitem(last=False)

    def _attach_request_events(self, span: Span, kind: str, key: Any) -> None:
        # Unlocked emptiness check: a pass recorded for this call ran before it, on the caller's thread.
        if not self._pending or not isinstance(key, str) or not key:
            return
        with self._lock:
            events = self._pending.pop((kind, key), None)
        for event in events or ():
            span.add_event(event.name, event.attributes)

    # -- turns ---------------------------------------------------------------

    def turn(self, turn_id: Any, session_id: Any, payload: Mapping[str, Any]) -> Turn | None:
        """The open turn for `turn_id`, started now if this is its first sign of life."""
        if not isinstance(turn_id, str) or not turn_id:
            return None
        existing = self._turns.get(turn_id)  # the common case, one dict read: no lock needed
        if existing is not None:
            return existing
        with self._lock:
            existing = self._turns.get(turn_id)
            if existing is not None:
                return existing
            ended = self._ended.get(turn_id)
            if ended is not None:
                # A late event of a finished turn (an abandoned tool worker, ...): parent it in the
                # turn's trace, but never reopen the turn.
                root = trace.NonRecordingSpan(ended)
                return Turn(root, trace.set_span_in_context(root), _s(session_id))
            session = session_id if isinstance(session_id, str) else ""
            previous = self._last_root.get(session) if session else None
            links = [Link(previous, {"hermes.link.type": "previous_turn"})] if previous else None
            subagent = self._subagents.get(session) if session else None
            # A subagent's turns nest under the parent's subagent span; any other turn starts a trace.
            parent = trace.set_span_in_context(subagent.span) if subagent is not None else otel_context.Context()
            span = self._tracer.start_span(
                f"{sc.OP_AGENT} {sc.AGENT}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=sc.turn_attributes(session, turn_id, payload),
                links=links,
            )
            if session:
                self._touch_session(session)
            turn = Turn(span, trace.set_span_in_context(span), session)
            self._turns[turn_id] = turn
            if session:
                self._last_root[session] = span.get_span_context()
                self._last_root.move_to_end(session)
                while len(self._last_root) > self._max_turns:
                    self._last_root.popitem(last=False)
            evicted = self._turns.popitem(last=False)[1] if len(self._turns) > self._max_turns else None
        if evicted is not None:
            evicted.span.set_attribute(sc.TURN_END_REASON, "evicted")
            evicted.span.end()
        if time.monotonic() >= self._next_sweep:
            self.sweep()
        return turn

    def sweep(self, now: float | None = None) -> None:
        """End turns open longer than the turn TTL; forget sessions idle longer than the session TTL."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._next_sweep = now + 60.0
            stale = [tid for tid, t in self._turns.items() if now - t.started > self._turn_ttl_s]
            idle = [sid for sid, seen in self._sessions.items() if now - seen > self._session_ttl_s]
        for turn_id in stale:
            self.end_turn(turn_id, {}, reason="ttl")
        for session in idle:
            self.close_session(session)

    def session_started(self, session_id: Any) -> None:
        if isinstance(session_id, str) and session_id:
            with self._lock:
                self._touch_session(session_id)

    def _touch_session(self, session_id: str) -> None:
        self._sessions[session_id] = time.monotonic()
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > self._max_turns:
            self._sessions.popitem(last=False)

    def close_session(self, session_id: Any) -> None:
        """`on_session_finalize` / `on_session_reset` / TTL: the session's state goes; open turns end."""
        if not isinstance(session_id, str) or not session_id:
            return
        with self._lock:
            self._sessions.pop(session_id, None)
            self._last_root.pop(session_id, None)
            open_turns = [tid for tid, t in self._turns.items() if t.session_id == session_id]
        for turn_id in open_turns:
            self.end_turn(turn_id, {}, reason="session_closed")

    def end_turn(self, turn_id: Any, payload: Mapping[str, Any], reason: str | None = None) -> None:
        if not isinstance(turn_id, str):
            return
        with self._lock:
            turn = self._turns.pop(turn_id, None)
            leftovers = [c for c in self._tools.values() if c.turn_id == turn_id] if self._tools else ()
            failed = [c for c in self._failed_chats.values() if c.turn_id == turn_id] if self._failed_chats else ()
            waits = [k for k, c in self._approvals.items() if c.turn_id == turn_id] if self._approvals else ()
            approvals = [self._approvals.pop(k) for k in waits]
            if turn is not None:
                self._ended[turn_id] = turn.span.get_span_context()
                while len(self._ended) > self._max_turns:
                    self._ended.popitem(last=False)
        for call in leftovers:
            self._end_tool(call)
        for call in failed:
            self._end_failed_chat(call)
        for call in approvals:  # a decision that never came (e.g. the notification failed)
            call.span.set_attribute(sc.APPROVAL_CHOICE, "undecided")
            call.span.end()
        if turn is None:
            return
        span = turn.span
        if reason is not None:
            span.set_attribute(sc.TURN_END_REASON, reason)
        completed = payload.get("completed")
        interrupted = payload.get("interrupted")
        if isinstance(completed, bool):
            span.set_attribute(sc.TURN_COMPLETED, completed)
        if isinstance(interrupted, bool):
            span.set_attribute(sc.TURN_INTERRUPTED, interrupted)
        if interrupted is True:
            span.set_status(Status(StatusCode.ERROR, "interrupted"))
        elif completed is False:
            span.set_status(Status(StatusCode.ERROR, "incomplete"))
        if self._metrics is None and self.costs is None:
            span.end()
        else:
            self._backlog.defer_always(self._turn_done, span, time.time_ns(), time.monotonic() - turn.started, turn_id)

    def _turn_done(self, span: Span, end_ns: int, duration: float, turn_id: str = "") -> None:
        """A turn's end and duration metric (on the builder when deferred)."""
        if self.costs is not None:  # cost: the turn's total, read after its attempts were priced
            span.set_attributes(self.costs.turn_attributes(turn_id))
        span.end(end_time=end_ns)
        if self._metrics is not None:
            self._metrics.agent_duration_now(duration, _AGENT_LABELS, trace.set_span_in_context(span))

    def end_all(self, reason: str) -> None:
        """End every open span (session finalize / shutdown): nothing is leaked."""
        with self._lock:
            turns, self._turns = list(self._turns.values()), OrderedDict()
            tools, self._tools = list(self._tools.values()), OrderedDict()
            others = [*self._failed_chats.values(), *self._approvals.values(), *self._subagents.values()]
            self._failed_chats, self._approvals, self._subagents = OrderedDict(), OrderedDict(), OrderedDict()
        for call in (*tools, *others):
            call.span.end(end_time=call.end_ns)
        for turn in turns:
            turn.span.set_attribute(sc.TURN_END_REASON, reason)
            turn.span.end()

    def open_turns(self) -> int:
        return len(self._turns)

    def adopt(self, other: "Tracker") -> None:
        """Take over another tracker's open state (configuration reload)."""
        names = ("_turns", "_last_root", "_tools", "_pending", "_failed_chats", "_approvals", "_subagents", "_sessions",
                 "_denied", "_ended")
        with other._lock:
            taken = {name: getattr(other, name) for name in names}
            for name in names:
                setattr(other, name, OrderedDict())
        with self._lock:
            for name, value in taken.items():
                getattr(self, name).update(value)
        if self.costs is not None and other.costs is not None:  # cost: totals survive a reload
            self.costs.adopt(other.costs)

    # -- provider attempts -----------------------------------------------------

    def start_chat(self, request: Any, context: Mapping[str, Any]) -> Call:
        turn = self.turn(context.get("turn_id"), context.get("session_id"), context)
        api_request_id = context.get("api_request_id")
        attempt = previous = None
        if isinstance(api_request_id, str) and api_request_id:
            with self._lock:
                previous = self._failed_chats.get(api_request_id) if self._failed_chats else None
                if turn is not None:
                    attempt = turn.attempts.get(api_request_id, 0) + 1
                    turn.attempts[api_request_id] = attempt
            if previous is not None:
                self._end_failed_chat(previous)
        # Attributes are read later (on the builder): keep this attempt's request as it is now. `context`
        # is this call's own kwargs dict.
        described = (dict(request) if type(request) is dict else request, context, attempt)
        span = start_lazy(self._tracer, _describe_chat, described, context=turn.context if turn is not None else None,
                          kind=SpanKind.CLIENT, parent=turn.span.get_span_context() if turn is not None else None)
        self._attach_request_events(span, LLM_REQUEST, api_request_id)
        return Call(span, time.monotonic(), {}, turn_id=_s(context.get("turn_id")), call_id=_s(api_request_id),
                    described=described)

    def finish_chat(self, call: Call, response: Any = None, error: BaseException | None = None) -> None:
        end_ns, duration = time.time_ns(), time.monotonic() - call.started
        if error is None:
            self._backlog.defer_always(self._chat_done, call, response, end_ns, duration)
            return
        span = call.span
        _record_error(span, error)
        call.metric_attrs = {**_chat_metric_attributes(call), sc.ERROR_TYPE: type(error).__name__}
        if self._metrics is not None:
            self._metrics.operation_duration.record(duration, call.metric_attrs, trace.set_span_in_context(span))
        if call.call_id:
            # api_request_error (status code, retryable, reason) follows: end the span then.
            call.end_ns = end_ns
            with self._lock:
                self._failed_chats[call.call_id] = call
                while len(self._failed_chats) > self._max_turns:
                    self._end_failed_chat(self._failed_chats.popitem(last=False)[1], locked=True)
            return
        span.end(end_time=end_ns)

    def _chat_done(self, call: Call, response: Any, end_ns: int, duration: float) -> None:
        """A successful attempt's response attributes, end and metrics (on the builder when deferred)."""
        span = call.span
        attrs = sc.chat_response_attributes(response)
        span.set_attributes(attrs)
        if self.costs is not None and call.described:  # cost: on a chat attempt's usage, price it and roll it up
            self.costs.record(span, call.described[0], call.described[1], response)
        span.end(end_time=end_ns)
        if self._metrics is None:
            return
        labels = _chat_metric_attributes(call)
        if sc.RESPONSE_MODEL in attrs:
            labels[sc.RESPONSE_MODEL] = attrs[sc.RESPONSE_MODEL]
        context = trace.set_span_in_context(span)  # exemplars point at the attempt
        for token_type, key in (("input", sc.USAGE_INPUT), ("output", sc.USAGE_OUTPUT)):
            if key in attrs:
                self._metrics.tokens_now(attrs[key], {**labels, "gen_ai.token.type": token_type}, context)
        self._metrics.operation_duration_now(duration, labels, context)

    def api_error(self, payload: Mapping[str, Any]) -> None:
        """`api_request_error`: Hermes's account of a failed attempt, on that attempt's span."""
        api_request_id = payload.get("api_request_id")
        with self._lock:
            call = self._failed_chats.get(api_request_id) if isinstance(api_request_id, str) else None
        if call is None:
            return
        call.span.set_attributes(sc.api_error_attributes(payload))
        self._end_failed_chat(call)

    def _end_failed_chat(self, call: Call, locked: bool = False) -> None:
        if not locked:
            with self._lock:
                if self._failed_chats.get(call.call_id) is call:
                    del self._failed_chats[call.call_id]
        call.span.end(end_time=call.end_ns)

    # -- approvals and subagents -------------------------------------------------

    def approval_requested(self, payload: Mapping[str, Any]) -> None:
        key = _tool_key(payload) or _s(payload.get("turn_id"))
        if not key:
            return
        with self._lock:
            tool = self._find_tool(payload)
            turn = self._turns.get(_s(payload.get("turn_id")))
        parent = trace.set_span_in_context(tool.span) if tool else (turn.context if turn else None)
        span = self._tracer.start_span(
            "approval", context=parent, kind=SpanKind.INTERNAL, attributes=sc.approval_attributes(payload)
        )
        with self._lock:
            self._approvals[key] = Call(span, time.monotonic(), {}, turn_id=_s(payload.get("turn_id")))
            while len(self._approvals) > self._max_turns:
                self._approvals.popitem(last=False)[1].span.end()

    def approval_decided(self, payload: Mapping[str, Any]) -> str | None:
        key = _tool_key(payload) or _s(payload.get("turn_id"))
        with self._lock:
            call = self._approvals.pop(key, None) if key else None
        choice = payload.get("choice")
        denied = isinstance(choice, str) and choice in ("deny", "timeout", "smart_deny")
        tool_key = _tool_key(payload)
        if denied and tool_key:
            with self._lock:
                self._denied[tool_key] = choice
                while len(self._denied) > self._max_turns:
                    self._denied.popitem(last=False)
        if call is not None:
            call.span.set_attributes(sc.approval_attributes(payload))
            if denied:
                call.span.set_status(Status(StatusCode.ERROR, f"approval {choice}"))
            call.span.end()
        return choice if isinstance(choice, str) else None

    def subagent_started(self, payload: Mapping[str, Any]) -> None:
        child = payload.get("child_session_id")
        if not isinstance(child, str) or not child:
            return
        if self.costs is not None:  # cost: the child's attempts roll up into this subagent and the parent's turn
            self.costs.subagent_started(payload)
        parent_turn = payload.get("parent_turn_id")
        with self._lock:
            # The parent's open delegate_task call in that turn, else the parent's turn root.
            tool = next(
                (c for c in reversed(self._tools.values())
                 if c.turn_id == parent_turn and c.metric_attrs.get(sc.TOOL_NAME) == "delegate_task"),
                None,
            )
            turn = self._turns.get(parent_turn) if isinstance(parent_turn, str) else None
        parent = trace.set_span_in_context(tool.span) if tool else (turn.context if turn else None)
        attrs = sc.subagent_attributes(payload)
        span = self._tracer.start_span(
            f"subagent {attrs.get(sc.SUBAGENT_ROLE, '')}".strip(), context=parent, kind=SpanKind.INTERNAL,
            attributes=attrs,
        )
        with self._lock:
            self._subagents[child] = Call(span, time.monotonic(), {})
            while len(self._subagents) > self._max_turns:
                self._subagents.popitem(last=False)[1].span.end()

    def subagent_stopped(self, payload: Mapping[str, Any]) -> None:
        child = payload.get("child_session_id")
        with self._lock:
            call = self._subagents.pop(child, None) if isinstance(child, str) else None
        if call is None:
            return
        call.span.set_attributes(sc.subagent_attributes(payload))
        status = payload.get("child_status")
        if isinstance(status, str) and status not in ("completed", "ok", "success"):
            call.span.set_status(Status(StatusCode.ERROR, status))
        if self.costs is None:
            call.span.end()
        else:  # cost: the subagent's total, read after its attempts were priced
            self._backlog.defer_always(self._subagent_done, call.span, child, time.time_ns())

    def _subagent_done(self, span: Span, child: str, end_ns: int) -> None:
        span.set_attributes(self.costs.subagent_attributes(child))
        span.end(end_time=end_ns)

    def _find_tool(self, payload: Mapping[str, Any], key: str | None = None) -> Call | None:
        """The open tool call of a payload; by (turn, id), else by id alone."""
        if key is None:
            key = _tool_key(payload)
        if not key:
            return None
        call = self._tools.get(key)  # one dict read: atomic, no lock needed
        if call is None and not _s(payload.get("turn_id")):
            suffix = key  # "\x1f" + call id: the key without a turn
            with self._lock:
                call = next((c for c in reversed(self._tools.values()) if c.call_id.endswith(suffix)), None)
        return call

    def span_for(self, payload: Mapping[str, Any]) -> Span | None:
        """The span an observer payload belongs to (for log correlation): tool, then turn."""
        if self._tools:
            call = self._find_tool(payload)
            if call is not None:
                return call.span
        turn_id = payload.get("turn_id")
        turn = self._turns.get(turn_id) if isinstance(turn_id, str) else None
        return turn.span if turn is not None else None

    # -- tool calls ----------------------------------------------------------

    def start_tool(self, tool_name: Any, context: Mapping[str, Any], args: Any = None) -> Call:
        # Content is read now (a tool may change its arguments); the rest later, from `context`,
        # this call's own kwargs dict.
        arguments = content.to_json(args) if self.capture_on_spans and args is not None else None
        turn = self.turn(context.get("turn_id"), context.get("session_id"), context)
        span = start_lazy(self._tracer, _describe_tool, (tool_name, context, arguments),
                          context=turn.context if turn is not None else None, kind=SpanKind.INTERNAL,
                          parent=turn.span.get_span_context() if turn is not None else None)
        labels = {sc.OPERATION: sc.OP_TOOL}
        if isinstance(tool_name, str) and tool_name:
            labels[sc.TOOL_NAME] = tool_name
        call_id = _tool_key(context)
        call = Call(span, time.monotonic(), labels, turn_id=_s(context.get("turn_id")), call_id=call_id)
        self._attach_request_events(span, TOOL_REQUEST, call_id)
        if call_id:
            with self._lock:
                self._tools[call_id] = call
                evicted = ([self._tools.popitem(last=False)[1] for _ in range(len(self._tools) - self._max_turns)]
                           if len(self._tools) > self._max_turns else ())
            for old in evicted:
                old.end_ns = old.end_ns or time.time_ns()
                self._end_tool(old)
        return call

    def tool_outcome(self, payload: Mapping[str, Any]) -> Span | None:
        """`post_tool_call`: Hermes's verdict on the call (ok | error | blocked | cancelled).

        It may arrive after the execution chain returned (the span then waits,
        with its end time already fixed) or for a call that never ran (blocked
        before execution: a span is made for it so the block is visible).
        Returns the span of the open call it found (the payload's span), if any.
        """
        key = _tool_key(payload)
        with self._lock:
            call = self._find_tool(payload, key)
            denied_by = self._denied.pop(key, None) if key and self._denied else None
        if call is not None:
            found = call.span
            if call.ended:
                return found  # already ended (late duplicate): nothing to add
        else:
            found = None
            if _s(payload.get("turn_id")) in self._ended:
                return None  # a late verdict for a finished turn: the log record keeps it
            call = self._instant_tool(payload)
        status = payload.get("status")
        if denied_by is not None:
            # Hermes reports a denied command as a tool error; it is a block, by approval.
            payload = {**payload, "status": "blocked", "error_type": "approval_denied",
                       "error_message": f"blocked: approval {denied_by}"}
            status = "blocked"
        if isinstance(status, str) and status:
            call.span.set_attribute(sc.TOOL_STATUS, status)
            if status != "ok":
                error_type = payload.get("error_type")
                call.span.set_attribute(sc.ERROR_TYPE, error_type if isinstance(error_type, str) and error_type else status)
                call.metric_attrs[sc.ERROR_TYPE] = status
                message = payload.get("error_message")
                text = content.redact_text(message, 256) if isinstance(message, str) else status
                call.span.set_status(Status(StatusCode.ERROR, text))
        call.outcome_seen = True
        if call.end_ns is not None:
            self._end_tool(call)
        return found

    def _instant_tool(self, payload: Mapping[str, Any]) -> Call:
        duration_ms = payload.get("duration_ms")
        now = time.time_ns()
        start = now - int(duration_ms * 1e6) if isinstance(duration_ms, (int, float)) and duration_ms > 0 else now
        attrs = sc.tool_attributes(payload.get("tool_name"), payload)
        turn = self.turn(payload.get("turn_id"), payload.get("session_id"), payload)
        span = self._tracer.start_span(
            f"{sc.OP_TOOL} {attrs.get(sc.TOOL_NAME, '')}".strip(),
            context=turn.context if turn is not None else None,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=start,
        )
        self._attach_request_events(span, TOOL_REQUEST, _tool_key(payload))
        metric_attrs = {k: attrs[k] for k in (sc.OPERATION, sc.TOOL_NAME) if k in attrs}
        return Call(span, time.monotonic(), metric_attrs, end_ns=now)

    def finish_tool(self, call: Call, context: Mapping[str, Any], error: BaseException | None = None) -> None:
        if error is not None:
            _record_error(call.span, error)
            call.metric_attrs[sc.ERROR_TYPE] = type(error).__name__
        call.end_ns = time.time_ns()
        with self._lock:
            pending = bool(call.call_id) and self._tools.get(call.call_id) is call and not call.outcome_seen
        if not pending:
            self._end_tool(call)

    def _end_tool(self, call: Call) -> None:
        with self._lock:
            if call.call_id and self._tools.get(call.call_id) is call:
                del self._tools[call.call_id]
            if call.ended:
                return
            call.ended = True
        if call.end_ns is None:  # ended with its turn, never finished
            call.end_ns = time.time_ns()
        if self._metrics is None:
            call.span.end(end_time=call.end_ns)
            return
        # From the wall-clock end back to the monotonic start: read the clocks now, not on the builder.
        duration = max(call.end_ns / 1e9 - time.time() + time.monotonic() - call.started, 0.0)
        self._backlog.defer_always(self._tool_done, call, duration)

    def _tool_done(self, call: Call, duration: float) -> None:
        """A tool span's end and duration metric (on the builder when deferred)."""
        span = call.span
        span.end(end_time=call.end_ns)
        self._metrics.tool_duration_now(duration, call.metric_attrs, trace.set_span_in_context(span))


def _describe_chat(request: Any, context: Mapping[str, Any], attempt: int | None) -> tuple[str, dict[str, Any]]:
    """A provider attempt's span name and start attributes."""
    attrs = sc.chat_request_attributes(request, context)
    if attempt is not None:
        attrs[sc.API_ATTEMPT] = attempt
    return f"{sc.OP_CHAT} {attrs.get(sc.REQUEST_MODEL, '')}".strip(), attrs


def _describe_tool(tool_name: Any, context: Mapping[str, Any], arguments: str | None) -> tuple[str, dict[str, Any]]:
    """A tool call's span name and start attributes."""
    attrs = sc.tool_attributes(tool_name, context)
    if arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = arguments
    return f"{sc.OP_TOOL} {attrs.get(sc.TOOL_NAME, '')}".strip(), attrs


_AGENT_LABELS = {sc.OPERATION: sc.OP_AGENT, sc.AGENT_NAME: sc.AGENT}
_CHAT_METRIC_KEYS = (sc.OPERATION, sc.PROVIDER, sc.REQUEST_MODEL, sc.SERVER_ADDRESS)


def _chat_metric_attributes(call: Call) -> dict[str, Any]:
    span = call.span
    attrs = span.start_attributes if isinstance(span, DeferredSpan) and span.describe is not None else None
    if not attrs:  # inline, unsampled, or not built yet: describe again
        attrs = _describe_chat(*call.described)[1] if call.described else {}
    return {k: attrs[k] for k in _CHAT_METRIC_KEYS if k in attrs}


def _tool_key(payload: Mapping[str, Any]) -> str:
    """Tool calls are keyed by (turn, call id): ids can repeat across sessions (e.g. Codex derives them
    from the tool name and arguments), turns cannot."""
    call_id = payload.get("tool_call_id")
    if not (isinstance(call_id, str) and call_id):
        return ""
    turn_id = payload.get("turn_id")
    return f"{turn_id if isinstance(turn_id, str) else ''}\x1f{call_id}"


def _s(value: Any) -> str:
    """An id usable as a key: hostile payloads may carry lists, None or objects there."""
    return value if isinstance(value, str) else ""


_record_error = sc.record_error


class _Instruments:
    def __init__(self, meter: Meter) -> None:
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            unit="s",
            description="Tool call duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.agent_duration = meter.create_histogram(
            "gen_ai.invoke_agent.duration",
            unit="s",
            description="Agent turn duration",
            explicit_bucket_boundaries_advisory=AGENT_BUCKETS,
        )
        # Recorders for code that already runs on the builder (no second hand-off).
        self.tokens_now = immediate(self.tokens)
        self.operation_duration_now = immediate(self.operation_duration)
        self.tool_duration_now = immediate(self.tool_duration)
        self.agent_duration_now = immediate(self.agent_duration)
