"""The tracker: Hermes's ids -> the spans of turns, provider attempts, tool calls, approvals and subagents.

It correlates by Hermes's own ids only (`turn_id`, `api_request_id`, `tool_call_id`), never by
task id or tool name, so parallel tools and concurrent sessions cannot cross. Each entity keeps
its state in a bounded map (the oldest open item is ended when the cap is reached), so state stays
bounded. Callers (the instrumentation's wrappers and the observer bridge) catch what it raises.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import Logger
from opentelemetry.metrics import Meter
from opentelemetry.trace import Span

from .._internal.bounded import BoundedMap
from ..cost.pricing import CostLedger
from ..emitter import Emitter, Inline
from ..middleware.layers import LayerTracer, RequestEvent, events_from_trace
from . import streaming
from .calls import Call, Chats, Tools
from .instruments import Instruments
from .keys import text, tool_key
from .turns import Turn, Turns
from .waits import Approvals, Subagents

_SWEEP_EVERY_S = 60.0


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
        details: Logger | None = None,
        emitter: Emitter | Inline | None = None,
        costs: CostLedger | None = None,
        verdicts: bool = True,
        content_cap: int = 4096,
        v1_41: bool = False,
    ) -> None:
        """Spans are the SDK's, started here on the calling thread. `emitter` (the records thread) takes
        what comes after a call, stamped at the call: its span's end with the attributes its response or
        outcome gives, its metric measurements, its price (`costs`). Without one, all of it runs inline.
        `details`: content in events: each provider attempt's inference details event goes out through it.
        `verdicts`: Hermes's hooks report each tool call's outcome, which its span waits for (False when no
        hooks are registered: the span then ends when the call returns). `content_cap`: captured content's
        longest string; a content attribute holds at most twice it (telemetry.content_budget). `v1_41`: the GenAI
        conventions' v1.41.0 names too, beside the latest (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup)."""
        self.capture_on_spans = capture_on_spans
        self.v1_41 = v1_41
        self.costs = costs  # prices chat attempts and rolls them up per turn, subagent and session
        emitter = emitter if emitter is not None else Inline()
        metrics = Instruments(meter, v1_41) if meter is not None else None
        self.layers = LayerTracer(tracer, meter, emitter.submit_end, streaming.terminal_ended)
        # Request-middleware effects waiting for the span of the call they affected:
        # ("llm_request", api_request_id) / ("tool_request", tool key).
        self._pending: BoundedMap[tuple[str, str], list[RequestEvent]] = BoundedMap(max_turns)
        self.rewrites_from_trace = False  # set by the plugin where Hermes's request passes are not watched
        self.turns = Turns(tracer, metrics, max_turns, parent_of=lambda session: self.subagents.span_of(session),
                           emitter=emitter, costs=costs, content_cap=content_cap if capture_on_spans else None)
        self.chats = Chats(tracer, metrics, self.turns, max_turns, self._attach_request_events, emitter, costs,
                           capture_on_spans, details, content_cap, v1_41)
        self.tools = Tools(tracer, metrics, self.turns, max_turns, self._attach_request_events, capture_on_spans,
                           emitter, verdicts, content_cap)
        self.approvals = Approvals(tracer, self.turns, self.tools, max_turns)
        self.subagents = Subagents(tracer, self.turns, self.tools, max_turns, emitter, costs)
        self._turn_ttl_s = turn_ttl_s
        self._session_ttl_s = session_ttl_s
        self._next_sweep = time.monotonic() + _SWEEP_EVERY_S

    # -- request middleware ------------------------------------------------------------------

    def trace_rewrites(self, kind: str, context: Mapping[str, Any]) -> None:
        """Rewrite events from the `middleware_trace` Hermes passes along, where no request pass was watched
        (Hermes 0.20+: `rewrites_from_trace`)."""
        entries = context.get("middleware_trace")
        if not (self.rewrites_from_trace and entries):
            return
        events = events_from_trace(kind, entries)
        call = self.tools.find(context) if kind == "tool_request" else None
        if call is None:
            self.request_pass_done(kind, context, events)
        else:  # 0.22 fires pre_tool_call inside the execution chain: the call's span is open already
            for event in events:
                call.span.add_event(event.name, event.attributes)

    def request_pass_done(self, kind: str, context: Mapping[str, Any], events: list[RequestEvent]) -> None:
        key = text(context.get("api_request_id")) if kind == "llm_request" else tool_key(context)
        if key:
            self._pending.put((kind, key), events)  # a retry's new pass replaces the last one

    def _attach_request_events(self, span: Span, kind: str, key: str) -> None:
        if self._pending and key:  # a pass recorded for this call ran before it, on this thread
            for event in self._pending.pop((kind, key)) or ():
                span.add_event(event.name, event.attributes)

    # -- turns and sessions --------------------------------------------------------------------

    def turn(self, turn_id: Any, session_id: Any, payload: Mapping[str, Any]) -> Turn | None:
        """The open turn for `turn_id`, started now if this is its first sign of life."""
        turn = self.turns.ensure(turn_id, session_id, payload)
        if time.monotonic() >= self._next_sweep:
            self.sweep()
        return turn

    def session_started(self, session_id: Any) -> None:
        if text(session_id):
            self.turns.touch(session_id)

    def end_turn(self, turn_id: Any, payload: Mapping[str, Any], reason: str | None = None) -> None:
        if not isinstance(turn_id, str):
            return
        self.tools.end_turn(turn_id)
        self.chats.end_turn(turn_id)
        self.approvals.end_turn(turn_id)
        self.turns.end(turn_id, payload, reason)

    def close_session(self, session_id: Any) -> None:
        """`on_session_finalize` / `on_session_reset` / TTL: the session's state goes; open turns end."""
        if text(session_id):
            for turn_id in self.turns.forget_session(session_id):
                self.end_turn(turn_id, {}, reason="session_closed")

    def sweep(self, now: float | None = None) -> None:
        """End turns open longer than the turn TTL; forget sessions idle longer than the session TTL."""
        now = time.monotonic() if now is None else now
        self._next_sweep = now + _SWEEP_EVERY_S
        for turn_id in self.turns.stale(now, self._turn_ttl_s):
            self.end_turn(turn_id, {}, reason="ttl")
        for session in self.turns.idle_sessions(now, self._session_ttl_s):
            self.close_session(session)

    def end_all(self, reason: str) -> None:
        """End every open span (shutdown, plugin unloaded): nothing is leaked."""
        for turn_id, _ in self.turns.open.items():
            self.end_turn(turn_id, {}, reason)
        for call in (*self.tools.open.take_all(), *self.chats.failed.take_all(), *self.approvals.open.take_all(),
                     *self.subagents.open.take_all()):  # calls outside any open turn
            call.span.end(end_time=call.end_ns)

    def open_turns(self) -> int:
        return len(self.turns.open)

    def adopt(self, other: Tracker) -> None:
        """Take over another tracker's open state (configuration reload)."""
        self.turns.adopt(other.turns)
        if self.costs is not None and other.costs is not None:  # totals survive a reload
            self.costs.adopt(other.costs)
        self._pending.adopt(other._pending)
        self.chats.failed.adopt(other.chats.failed)
        self.tools.open.adopt(other.tools.open)
        self.tools.denied.adopt(other.tools.denied)
        self.tools.ended.adopt(other.tools.ended)
        self.approvals.open.adopt(other.approvals.open)
        self.subagents.open.adopt(other.subagents.open)

    # -- calls ------------------------------------------------------------------------------

    def start_chat(self, request: Any, context: Mapping[str, Any]) -> Call:
        self.trace_rewrites("llm_request", context)
        return self.chats.start(request, context)

    def start_auxiliary(self, payload: Mapping[str, Any]) -> Call:
        """An auxiliary model call's attempt as Hermes reports it (`pre_auxiliary_call`): a `chat` span in its
        turn's trace, named for its task (`hermes.llm.purpose`)."""
        session, turn_id = text(payload.get("session_id")), text(payload.get("turn_id"))
        parent, turn_id = self.turns.context_of(session, turn_id)
        # Made inside a span of the turn (a smart-approval verdict inside its tool call): under that span, as on
        # 0.19. Hermes hands the hook the caller's context (a copy, on 0.22's hook thread).
        current = trace.get_current_span().get_span_context()
        if current.is_valid and current.trace_id == trace.get_current_span(parent).get_span_context().trace_id:
            parent = otel_context.get_current()
        request = {k: payload[k] for k in ("model", "max_tokens") if payload.get(k) is not None}
        context = {k: payload[k] for k in ("provider", "base_url", "api_mode") if isinstance(payload.get(k), str)}
        context.update(purpose=text(payload.get("aux_task")) or None, session_id=session, turn_id=turn_id)
        return self.chats.start_auxiliary(request, context, parent)

    def finish_chat(self, call: Call, response: Any = None, error: BaseException | None = None) -> None:
        self.chats.finish(call, response, error)

    def api_error(self, payload: Mapping[str, Any]) -> None:
        self.chats.api_error(payload)

    def start_tool(self, tool_name: Any, context: Mapping[str, Any], args: Any = None) -> Call:
        return self.tools.start(tool_name, context, args)

    def finish_tool(self, call: Call, context: Mapping[str, Any], error: BaseException | None = None) -> None:
        self.tools.finish(call, error)

    def tool_outcome(self, payload: Mapping[str, Any]) -> Span | None:
        return self.tools.outcome(payload)

    def hold_tool_result(self, payload: Mapping[str, Any], result: Any) -> bool:
        return self.tools.hold_result(payload, result)

    def approval_requested(self, payload: Mapping[str, Any]) -> None:
        self.approvals.requested(payload)

    def approval_decided(self, payload: Mapping[str, Any]) -> None:
        self.approvals.decided(payload)

    def subagent_started(self, payload: Mapping[str, Any]) -> None:
        self.subagents.started(payload)

    def subagent_stopped(self, payload: Mapping[str, Any]) -> None:
        self.subagents.stopped(payload)

    # -- correlation ----------------------------------------------------------------------------

    def span_for(self, payload: Mapping[str, Any]) -> Span | None:
        """The span an observer record belongs to: its tool call (open, or just ended: Hermes fires
        `transform_tool_result` after the verdict), else its turn (by turn id, else the session's open
        turn), else, for a record fired after its turn ended (a late hook, `on_session_finalize`), that
        turn's root (by turn id, else the session's last turn), else the innermost span open where the
        hook fires."""
        span = self.tools.span_of(payload)
        if span is not None:
            return span
        turn_id = text(payload.get("turn_id"))
        turn = self.turns.open.get(turn_id) or self.turns.of_session(payload.get("session_id"))
        if turn is not None:
            return turn.span
        last = (self.turns.ended.get(turn_id) if turn_id else None) or self.turns.previous.get(
            text(payload.get("session_id")))
        if last is not None:
            return trace.NonRecordingSpan(last)
        current = trace.get_current_span()
        return current if current.get_span_context().is_valid else None
