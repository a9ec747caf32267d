"""Provider attempts (`chat`) and tool calls (`execute_tool`): their spans, ends and metrics.

Spans are the SDK's own, started and ended here, where the call happens: ids from the tracer's
id generator, the sampler asked once with the real parent, processors' `on_start` on this
thread, metric points stamped now.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import Logger, SeverityNumber
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import semconv as sc
from .._internal.bounded import BoundedMap
from ..redaction import content
from . import messages, streaming
from .instruments import Instruments
from .keys import text, tool_key
from .turns import TOOL_DEFINITIONS, Turn, Turns

_CHAT_METRIC_KEYS = (sc.OPERATION, sc.PROVIDER, sc.REQUEST_MODEL, sc.SERVER_ADDRESS, sc.SERVER_PORT)
DENIED = ("deny", "timeout", "smart_deny")

# Request-middleware effects, attached to the span of the call they affected.
AttachEvents = Callable[[Span, str, str], None]


# Content under capture, in the conventions' message schema (tracking/messages.py).
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_DETAILS_PREFIXES = ("gen_ai.", "server.", "error.type")  # the inference span's attributes the event repeats
INPUT, OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
_HISTORY_KEYS = ("messages", "input")  # the request's lists the caller appends to after the call (not its tools:
# the same list each time, which Turn.tally reads once by identity)


def _held(request: Any) -> Any:
    """The request as the attempt sent it, for its content to be built later on the records thread: a copy of the
    dict and of its lists (pointers only: no message is read or copied here, whatever the history's length)."""
    if type(request) is not dict:
        return request
    held = dict(request)
    for key in _HISTORY_KEYS:
        if type(value := held.get(key)) is list:
            held[key] = list(value)
    return held


def content_attributes(request: Any, response: Any, cap: int = 4096) -> dict[str, str]:
    """An attempt's content attributes (input, system instructions, tool definitions, output), each valid JSON in
    the conventions' schema, redacted and capped message by message. The output messages keep their
    `finish_reason`: the latest conventions deprecate it (for `gen_ai.response.finish_reasons`) but still allow it,
    and Phoenix shows no reply without it."""
    request, omitted = messages.window(request)
    system, inputs = messages.input_messages(request)
    attrs = {INPUT: messages.to_json(inputs, cap=cap, omitted=omitted)}
    if system:
        attrs[SYSTEM_INSTRUCTIONS] = messages.to_json(system, cap=cap)
    if tools := messages.tool_definitions(request):
        attrs[TOOL_DEFINITIONS] = messages.to_json(tools, cap=cap)
    if response is not None and (outputs := messages.output_messages(response)):
        attrs[OUTPUT] = messages.to_json(outputs, cap=cap)
    return attrs


@dataclass(slots=True)
class Call:
    """An open chat or tool span plus what its end needs."""

    span: Span
    metric_attrs: dict[str, Any]
    turn: Turn | None = None
    priced: tuple[Any, Mapping[str, Any]] | None = None  # a chat's (request, context): what pricing reads
    turn_id: str = ""
    key: str = ""  # api_request_id of a chat, (turn, call id) of a tool
    started: float = field(default_factory=time.monotonic)
    end_ns: int | None = None  # set when the call returned but its outcome has not arrived
    outcome_seen: bool = False
    ended: bool = False
    # A tool call's captured content, held as it was (content.hold) and redacted on the records thread at its end.
    held: dict[str, Any] | None = None


class Chats:
    """Provider attempts: one `chat` span per attempt; a failed one waits for Hermes's `api_request_error`."""

    def __init__(self, tracer: trace.Tracer, metrics: Instruments | None, turns: Turns, limit: int,
                 attach_events: AttachEvents, emitter: Any, costs: Any = None, capture: bool = False,
                 details: Logger | None = None, cap: int = 4096, v1_41: bool = False) -> None:
        self._tracer = tracer
        self._cap = cap
        self._v1_41 = v1_41
        self._capture = capture  # content on spans: the call's messages in, its message out (redacted, capped)
        self._details = details  # content in events: one inference details event per attempt, through this logger
        self._holds = capture or details is not None  # the request is kept for its content
        self._metrics = metrics
        self._turns = turns
        self._attach_events = attach_events
        self._emitter = emitter
        self._costs = costs
        self.failed: BoundedMap[str, Call] = BoundedMap(limit, on_evict=self._end_failed)

    def start(self, request: Any, context: Mapping[str, Any]) -> Call:
        turn = self._turns.ensure(context.get("turn_id"), context.get("session_id"), context)
        api_request_id = text(context.get("api_request_id"))
        attrs = sc.chat_request_attributes(request, context)
        if api_request_id:
            previous = self.failed.pop(api_request_id)
            if previous is not None:  # its api_request_error never came: the retry ends it
                self._end_failed(previous)
            if turn is not None:
                attempt = turn.attempts.get(api_request_id, 0) + 1
                turn.attempts[api_request_id] = attempt
                attrs[sc.API_ATTEMPT] = attempt
        span = self._tracer.start_span(
            f"{sc.OP_CHAT} {attrs.get(sc.REQUEST_MODEL, '')}".strip(),
            context=turn.context if turn is not None else None, kind=SpanKind.CLIENT, attributes=attrs,
        )
        self._attach_events(span, "llm_request", api_request_id)
        labels = {k: attrs[k] for k in _CHAT_METRIC_KEYS if k in attrs}
        # `context` is this call's own kwargs dict; a dict request is copied (a retry may change it), and under
        # capture its history list too (Hermes appends to it): the content is built from it on the records thread.
        request = _held(request) if self._holds else dict(request) if type(request) is dict else request
        return Call(span, labels, turn=turn, turn_id=text(context.get("turn_id")), key=api_request_id,
                    priced=(request, context))

    def start_auxiliary(self, request: Mapping[str, Any], context: Mapping[str, Any],
                        parent: otel_context.Context | None) -> Call:
        """An auxiliary model call (a Hermes task outside the main loop): a `chat` span under `parent`.

        No turn on the Call: its outcome must not mark (or clear) the turn's failed main attempt; it is
        priced and rolled up through `context` (`session_id`, `turn_id`) like any attempt."""
        attrs = sc.chat_request_attributes(request, context)
        attrs[sc.LLM_PURPOSE] = text(context.get("purpose")) or "auxiliary"
        span = self._tracer.start_span(f"{sc.OP_CHAT} {attrs.get(sc.REQUEST_MODEL, '')}".strip(), context=parent,
                                       kind=SpanKind.CLIENT, attributes=attrs)
        labels = {k: attrs[k] for k in (*_CHAT_METRIC_KEYS, sc.LLM_PURPOSE) if k in attrs}
        return Call(span, labels, turn_id=text(context.get("turn_id")), priced=(_held(dict(request)), dict(context)))

    def finish(self, call: Call, response: Any = None, error: BaseException | None = None) -> None:
        span, duration = call.span, time.monotonic() - call.started
        if error is not None:
            call.end_ns = time.time_ns()
            sc.record_error(span, error)
            if self._metrics is not None:  # measured now, recorded off the agent's thread; exemplar: the attempt
                self._emitter.submit(self._metrics.inference, duration, {}, call.metric_attrs, type(error).__name__,
                                     trace.set_span_in_context(span))
            if call.turn is not None:
                call.turn.failure = (type(error).__name__, call.end_ns)
            if streaming.CLOCKS:  # a stream that broke: no reply, no chunk timing
                streaming.take(span)
            if call.key:  # api_request_error (status code, retryable, reason) follows: end the span then
                self.failed.put(call.key, call)
            else:
                self._end_failed(call)
            return
        if call.turn is not None:
            call.turn.failure = None
        # The response's attributes, its price, the end and the metrics: on the records thread, stamped now.
        self._emitter.submit_end(self._done, call, response, time.time_ns(), duration)

    def _done(self, call: Call, response: Any, end_ns: int, duration: float) -> None:
        span, context = call.span, trace.set_span_in_context(call.span)
        attrs = sc.chat_response_attributes(response)
        if streaming.CLOCKS:  # a stream's chunk timing may be waiting for this span (nothing to do otherwise)
            self._stream_timing(call, attrs, context, duration)
        captured = content_attributes(call.priced[0], response, self._cap) if self._holds and call.priced else None
        if captured and self._capture:  # built here, off the agent's thread
            attrs.update(captured)
        if call.turn is not None:
            call.turn.tally(attrs, call.priced[0] if call.priced is not None else None)
        if self._costs is not None and call.priced is not None:  # the price goes on with the response's attributes
            self._costs.record(span, call.priced[0], call.priced[1], response, attrs)
        if self._v1_41 and sc.USAGE_CACHE_WRITE in attrs:
            attrs[sc.USAGE_CACHE_CREATION] = attrs[sc.USAGE_CACHE_WRITE]
        span.set_attributes(attrs)
        span.end(end_time=end_ns)
        if captured and self._details is not None:
            self._emit_details(self._details, span, context, end_ns, captured)
        if self._metrics is None:
            return
        labels = call.metric_attrs
        if sc.RESPONSE_MODEL in attrs:
            labels = {**labels, sc.RESPONSE_MODEL: attrs[sc.RESPONSE_MODEL]}
        self._metrics.inference(duration, attrs, labels, None, context)

    @staticmethod
    def _emit_details(logger: Logger, span: Span, context: otel_context.Context, end_ns: int,
                      captured: dict[str, str]) -> None:
        """`gen_ai.client.inference.operation.details`: the attempt's span attributes (its conventions' ones) and
        its content, structured (an event's attributes may be), at DEBUG as the conventions ask, in its context."""
        attrs: dict[str, Any] = {k: v for k, v in (getattr(span, "attributes", None) or {}).items()
                                 if k.startswith(_DETAILS_PREFIXES)}
        attrs.update((k, json.loads(v)) for k, v in captured.items())
        logger.emit(timestamp=end_ns, observed_timestamp=end_ns, context=context, body=None,
                    severity_number=SeverityNumber.DEBUG, severity_text="DEBUG", event_name=DETAILS_EVENT,
                    attributes=attrs)

    def _stream_timing(self, call: Call, attrs: dict[str, Any], context: otel_context.Context,
                       duration: float) -> None:
        """A streamed reply: its time to the first chunk on the span and, with the gaps between later chunks, in
        the streaming histograms (labelled as the call's duration)."""
        clock = streaming.take(call.span)
        if clock is None or clock.first is None:
            return
        first = min(clock.first, duration)  # never past the attempt's end (0.20+ hears of a delta a little late)
        attrs[sc.RESPONSE_TIME_TO_FIRST_CHUNK] = first
        if self._metrics is None:
            return
        labels = call.metric_attrs
        if sc.RESPONSE_MODEL in attrs:
            labels = {**labels, sc.RESPONSE_MODEL: attrs[sc.RESPONSE_MODEL]}
        self._metrics.stream(first, list(clock.gaps), labels, context)  # a copy: an abandoned stream may append

    def api_error(self, payload: Mapping[str, Any]) -> None:
        """`api_request_error`: Hermes's account of a failed attempt, on that attempt's span."""
        call = self.failed.pop(text(payload.get("api_request_id")))
        if call is not None:
            call.span.set_attributes(sc.api_error_attributes(payload))
            self._end_failed(call)

    def end_turn(self, turn_id: str) -> None:
        for call in self.failed.pop_where(lambda c: c.turn_id == turn_id):
            self._end_failed(call)

    def _end_failed(self, call: Call) -> None:
        if self._holds and call.priced is not None:  # its content first, on the records thread
            self._emitter.submit_end(self._failed_done, call)
        else:
            call.span.end(end_time=call.end_ns)

    def _failed_done(self, call: Call) -> None:
        """A failed attempt's end under capture: what it sent (there is no reply), and its details event."""
        end_ns = call.end_ns or time.time_ns()
        captured = content_attributes(call.priced[0], None, self._cap) if call.priced is not None else {}
        if self._capture:
            call.span.set_attributes(captured)
        call.span.end(end_time=end_ns)
        if self._details is not None:
            self._emit_details(self._details, call.span, trace.set_span_in_context(call.span), end_ns, captured)


class Tools:
    """Tool calls: one `execute_tool` span per call, ended by Hermes's verdict (`post_tool_call`)."""

    def __init__(self, tracer: trace.Tracer, metrics: Instruments | None, turns: Turns, limit: int,
                 attach_events: AttachEvents, capture: bool, emitter: Any, verdicts: bool = True,
                 cap: int = 4096) -> None:
        self._tracer = tracer
        self._cap = cap
        self._verdicts = verdicts
        self._metrics = metrics
        self._emitter = emitter
        self._turns = turns
        self._attach_events = attach_events
        self._capture = capture
        self.open: BoundedMap[str, Call] = BoundedMap(limit, on_evict=self._end)
        self._ending = threading.Lock()  # the chain's return and Hermes's verdict may race to end a call
        self.denied: BoundedMap[str, str] = BoundedMap(limit)  # tool key -> the approval choice that blocked it
        # Recently ended calls: hooks Hermes fires after the verdict (transform_tool_result) still belong to them.
        self.ended: BoundedMap[str, trace.SpanContext] = BoundedMap(limit)

    def start(self, tool_name: Any, context: Mapping[str, Any], args: Any = None) -> Call:
        turn = self._turns.ensure(context.get("turn_id"), context.get("session_id"), context)
        attrs = sc.tool_attributes(tool_name, context)
        span = self._tracer.start_span(
            f"{sc.OP_TOOL} {attrs.get(sc.TOOL_NAME, '')}".strip(),
            context=turn.context if turn is not None else None, kind=SpanKind.INTERNAL, attributes=attrs,
        )
        key = tool_key(context)
        self._attach_events(span, "tool_request", key)
        call = Call(span, {k: attrs[k] for k in (sc.OPERATION, sc.TOOL_NAME) if k in attrs}, turn=turn,
                    turn_id=text(context.get("turn_id")), key=key)
        if self._capture and args is not None:  # redacted at the call's end, on the records thread
            call.held = {sc.TOOL_CALL_ARGUMENTS: content.hold(args, cap=self._cap)}
        if turn is not None:
            turn.tool_calls += 1
        if key:
            self.open.put(key, call)
        return call

    def finish(self, call: Call, error: BaseException | None = None) -> None:
        """The execution chain returned (or raised); the span ends with Hermes's verdict, or now when it came."""
        if error is not None:
            sc.record_error(call.span, error)
            call.metric_attrs[sc.ERROR_TYPE] = type(error).__name__
        call.end_ns = time.time_ns()
        if not (self._verdicts and call.key and self.open.get(call.key) is call and not call.outcome_seen):
            self._end(call)

    def find(self, payload: Mapping[str, Any], key: str | None = None) -> Call | None:
        """The open tool call of a payload; by (turn, id), else by id alone."""
        key = tool_key(payload) if key is None else key
        if not key:
            return None
        call = self.open.get(key)
        if call is None and not text(payload.get("turn_id")):
            call = self.open.find(lambda c: c.key.endswith(key))  # key is "\x1f" + call id here
        return call

    def hold_result(self, payload: Mapping[str, Any], result: Any) -> bool:
        """A tool's result (capture on), kept with its open call to be redacted at the call's end, off the agent's
        thread; False where no open call has it."""
        call = self.find(payload)
        if call is None or call.ended:
            return False
        call.held = {**(call.held or {}), sc.TOOL_CALL_RESULT: content.hold(result, cap=self._cap)}
        return True

    def outcome(self, payload: Mapping[str, Any]) -> Span | None:
        """`post_tool_call`: Hermes's verdict on the call (ok | error | blocked | cancelled).

        It may arrive after the execution chain returned (the span then waits, with its end time
        already fixed) or for a call that never ran (blocked before execution: a span is made for
        it so the block is visible). Returns the span of the open call it found, if any.
        """
        key = tool_key(payload)
        call = self.find(payload, key)
        denied_by = self.denied.pop(key) if key and self.denied else None
        if call is not None:
            found = call.span
            if call.ended:
                return found  # a late duplicate: nothing to add
        else:
            found = None
            if text(payload.get("turn_id")) in self._turns.ended:
                return None  # a late verdict for a finished turn: the log record keeps it
            call = self._instant(payload)
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
                call.span.set_attribute(sc.ERROR_TYPE, error_type if isinstance(error_type, str) and error_type
                                        else status)
                call.metric_attrs[sc.ERROR_TYPE] = status
                message = payload.get("error_message")
                call.span.set_status(Status(StatusCode.ERROR, content.redact_text(message, 256)
                                            if isinstance(message, str) else status))
        call.outcome_seen = True
        if call.end_ns is not None:
            self._end(call)
        return found

    def deny(self, payload: Mapping[str, Any], choice: str) -> None:
        key = tool_key(payload)
        if key and choice in DENIED:
            self.denied.put(key, choice)

    def end_turn(self, turn_id: str) -> None:
        for call in self.open.pop_where(lambda c: c.turn_id == turn_id):
            self._end(call)

    def _instant(self, payload: Mapping[str, Any]) -> Call:
        duration_ms = payload.get("duration_ms")
        now = time.time_ns()
        start = now - int(duration_ms * 1e6) if isinstance(duration_ms, (int, float)) and duration_ms > 0 else now
        attrs = sc.tool_attributes(payload.get("tool_name"), payload)
        turn = self._turns.ensure(payload.get("turn_id"), payload.get("session_id"), payload)
        span = self._tracer.start_span(
            f"{sc.OP_TOOL} {attrs.get(sc.TOOL_NAME, '')}".strip(),
            context=turn.context if turn is not None else None, kind=SpanKind.INTERNAL, attributes=attrs,
            start_time=start,
        )
        self._attach_events(span, "tool_request", tool_key(payload))
        return Call(span, {k: attrs[k] for k in (sc.OPERATION, sc.TOOL_NAME) if k in attrs}, end_ns=now)

    def span_of(self, payload: Mapping[str, Any]) -> Span | None:
        """The span of a payload's tool call, open or recently ended."""
        key = tool_key(payload)
        call = self.find(payload, key) if self.open else None
        if call is not None:
            return call.span
        ended = self.ended.get(key) if self.ended else None
        return trace.NonRecordingSpan(ended) if ended is not None else None

    def _end(self, call: Call) -> None:
        if call.key:
            self.open.pop_if(call.key, call)
            self.ended.put(call.key, call.span.get_span_context())
        with self._ending:
            if call.ended:
                return
            call.ended = True
        if call.end_ns is None:  # ended with its turn, never finished
            call.end_ns = time.time_ns()
        # From the wall-clock end back to the monotonic start.
        duration = max(call.end_ns / 1e9 - time.time() + time.monotonic() - call.started, 0.0)
        self._emitter.submit_end(self._close, call, duration)

    def _close(self, call: Call, duration: float) -> None:
        turn, name = call.turn, call.metric_attrs.get(sc.TOOL_NAME, "")
        if turn is not None and (about := turn.tool_descriptions.get(name)):  # the schema the model was given
            call.span.set_attribute(sc.TOOL_DESCRIPTION, about)
        for name, held in (call.held or {}).items():  # arguments and result, redacted here (once) and capped
            call.span.set_attribute(name, content.to_value(held, cap=self._cap))
        call.span.end(end_time=call.end_ns)
        if self._metrics is not None:
            self._metrics.tool_duration.record(duration, call.metric_attrs, trace.set_span_in_context(call.span))
