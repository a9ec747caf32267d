"""Approval waits and subagents: spans between two hooks, under the tool or turn they belong to."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import semconv as sc
from .._internal.bounded import BoundedMap
from .calls import DENIED, Call, Tools
from .keys import text, tool_key
from .turns import Turns


class Approvals:
    def __init__(self, tracer: trace.Tracer, turns: Turns, tools: Tools, limit: int) -> None:
        self._tracer = tracer
        self._turns = turns
        self._tools = tools
        self.open: BoundedMap[str, Call] = BoundedMap(limit, on_evict=lambda c: c.span.end())

    def requested(self, payload: Mapping[str, Any]) -> None:
        key = tool_key(payload) or text(payload.get("turn_id"))
        if not key:
            return
        tool = self._tools.find(payload)
        turn = self._turns.open.get(text(payload.get("turn_id")))
        parent = trace.set_span_in_context(tool.span) if tool else (turn.context if turn else None)
        span = self._tracer.start_span("approval", context=parent, kind=SpanKind.INTERNAL,
                                       attributes=sc.approval_attributes(payload))
        self.open.put(key, Call(span, {}, turn_id=text(payload.get("turn_id")), key=key))

    def decided(self, payload: Mapping[str, Any]) -> None:
        key = tool_key(payload) or text(payload.get("turn_id"))
        call = self.open.pop(key) if key else None
        choice = payload.get("choice")
        denied = choice if isinstance(choice, str) and choice in DENIED else None
        if denied:
            self._tools.deny(payload, denied)
        if call is not None:
            call.span.set_attributes(sc.approval_attributes(payload))
            if denied:
                call.span.set_status(Status(StatusCode.ERROR, f"approval {choice}"))
            call.span.end()

    def end_turn(self, turn_id: str) -> None:
        for call in self.open.pop_where(lambda c: c.turn_id == turn_id):
            call.span.set_attribute(sc.APPROVAL_CHOICE, "undecided")  # the decision never came
            call.span.end()


class Subagents:
    def __init__(self, tracer: trace.Tracer, turns: Turns, tools: Tools, limit: int, emitter: Any = None,
                 costs: Any = None) -> None:
        self._tracer = tracer
        self._emitter = emitter
        self._costs = costs
        self._turns = turns
        self._tools = tools
        self.open: BoundedMap[str, Call] = BoundedMap(limit, on_evict=lambda c: c.span.end())  # child session ->

    def span_of(self, child_session: str) -> Span | None:
        call = self.open.get(child_session)
        return call.span if call is not None else None

    def started(self, payload: Mapping[str, Any]) -> None:
        child = text(payload.get("child_session_id"))
        if not child:
            return
        if self._costs is not None:  # the child's attempts roll up into this subagent and the parent's turn
            self._costs.subagent_started(payload)
        parent_turn = text(payload.get("parent_turn_id"))
        # The parent's open delegate_task call in that turn, else the parent's turn root.
        tool = self._tools.open.find(
            lambda c: c.turn_id == parent_turn and c.metric_attrs.get(sc.TOOL_NAME) == "delegate_task")
        turn = self._turns.open.get(parent_turn) if parent_turn else None
        parent = trace.set_span_in_context(tool.span) if tool else (turn.context if turn else None)
        attrs = sc.subagent_attributes(payload)
        # Named as the GenAI conventions name an agent invocation; `hermes.subagent.role` tells its role.
        span = self._tracer.start_span(f"{sc.OP_AGENT} {sc.AGENT}", context=parent, kind=SpanKind.INTERNAL,
                                       attributes=attrs)
        self.open.put(child, Call(span, {}))

    def stopped(self, payload: Mapping[str, Any]) -> None:
        child = text(payload.get("child_session_id"))
        call = self.open.pop(child)
        if call is None:
            return
        call.span.set_attributes(sc.subagent_attributes(payload))
        status = payload.get("child_status")
        if isinstance(status, str) and status not in ("completed", "ok", "success"):
            call.span.set_status(Status(StatusCode.ERROR, status))
        if self._emitter is None:
            self._close(call.span, child, time.time_ns())
        else:  # after the child's attempts were priced (its total), stamped now
            self._emitter.submit_end(self._close, call.span, child, time.time_ns())

    def _close(self, span: Span, child: str, end_ns: int) -> None:
        if self._costs is not None:
            span.set_attributes(self._costs.subagent_attributes(child))
        span.end(end_time=end_ns)
