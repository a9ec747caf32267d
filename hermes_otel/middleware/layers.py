"""One span per execution-middleware layer, and rewrite events for request middleware.

Used in two places with the same semantics: around Hermes's own chain
runner (see :mod:`hermes_otel.capture.legacy.patches`) and inside our
spec-exact runner (:mod:`hermes_otel.middleware.runner`).

A traced layer is the plugin's callback behind a transparent wrapper that
watches its `next_call`: the layer's span is current while the callback
runs, so the next layer (and finally the real provider/tool call, the
innermost span) nest inside it, and a layer's self time is visible. The
wrapper returns exactly what the callback returned and re-raises exactly
what it raised; it never calls anything twice.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from .. import hermes_compat
from .. import semconv as sc
from .._internal.safety import safely
from ..semconv import DURATION_BUCKETS
from . import contract, log_hygiene

# Attribute and event names (semconv.py; documented in the telemetry reference).
KIND = sc.MIDDLEWARE_KIND
PLUGIN = sc.MIDDLEWARE_PLUGIN
CALLBACK = sc.MIDDLEWARE_CALLBACK
INDEX = sc.MIDDLEWARE_INDEX
OUTCOME = sc.MIDDLEWARE_OUTCOME
PAYLOAD_CHANGED = sc.MIDDLEWARE_PAYLOAD_CHANGED
CHANGED_KEYS = sc.MIDDLEWARE_CHANGED_KEYS
SOURCE = sc.MIDDLEWARE_SOURCE
REASON = sc.MIDDLEWARE_REASON
NAME = sc.MIDDLEWARE_NAME
TERMINAL = sc.MIDDLEWARE_TERMINAL
REWRITE_EVENT = sc.MIDDLEWARE_REWRITE_EVENT
FAILURE_EVENT = sc.MIDDLEWARE_FAILURE_EVENT

UNKNOWN_PLUGIN = "unknown"


class Attribution:
    """Which plugin registered a callback (recorded at registration, bounded)."""

    def __init__(self, limit: int = 4096) -> None:
        self._by_id: dict[int, tuple[Any, str]] = {}
        self._modules: dict[str, str] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def remember(self, callback: Any, plugin: str) -> None:
        with self._lock:
            if len(self._by_id) >= self._limit:
                self._by_id.pop(next(iter(self._by_id)))
            self._by_id[id(callback)] = (callback, plugin)

    def known(self, callback: Any) -> bool:
        entry = self._by_id.get(id(callback))
        return entry is not None and entry[0] is callback

    def plugin_of(self, callback: Any) -> str:
        entry = self._by_id.get(id(callback))
        if entry is not None and entry[0] is callback:
            return entry[1]
        module = getattr(callback, "__module__", None) or ""
        for prefix, plugin in self._modules.items():
            if module == prefix or module.startswith(prefix + "."):
                return plugin
        return module or UNKNOWN_PLUGIN

    def learn_modules(self, manager: Any) -> None:
        """Module -> plugin names of loaded plugins, for callbacks registered before we were watching."""
        for loaded in hermes_compat.loaded_plugins(manager):
            module = getattr(getattr(loaded, "module", None), "__name__", None)
            name = getattr(getattr(loaded, "manifest", None), "name", None)
            if module and name:
                self._modules[module] = name


attribution = Attribution()


@dataclass
class Instruments:
    duration: Any
    failures: Any
    rewrites: Any

    @classmethod
    def create(cls, meter) -> Instruments:
        return cls(
            duration=meter.create_histogram(
                "hermes.middleware.duration",
                unit="s",
                description="Time spent in one execution-middleware layer, downstream included",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            failures=meter.create_counter(
                "hermes.middleware.failures", unit="{failure}", description="Middleware callbacks that raised"
            ),
            rewrites=meter.create_counter(
                "hermes.middleware.rewrites", unit="{rewrite}", description="Request-middleware payload replacements"
            ),
        )


@dataclass
class _LayerState:
    incoming: Any
    called: bool = False
    succeeded: bool = False
    payload: Any = None  # what the layer passed to next_call (None: unchanged)
    downstream_error: BaseException | None = None


def _is_downstream_wrapper(exc: BaseException) -> bool:
    return hermes_compat.is_downstream_error(exc)


def unwrap(exc: BaseException) -> BaseException:
    return exc.original if _is_downstream_wrapper(exc) else exc  # type: ignore[attr-defined]


def classify(state: _LayerState, exc: BaseException | None) -> str:
    """The seed's outcome of one layer, from what it did with next_call."""
    if exc is None:
        return contract.OK if state.called else contract.SHORT_CIRCUIT
    if _is_downstream_wrapper(exc) or (state.downstream_error is not None and exc is state.downstream_error):
        return contract.ERROR  # a downstream error passed through
    if not state.called or state.succeeded:
        return contract.FAIL_OPEN  # skipped by the runner, or the downstream result was kept
    return contract.ERROR  # downstream failed and the layer raised something else: transformed


class LayerTracer:
    """Span-per-layer wrappers bound to one tracer and meter.

    Spans start on the calling thread; a span's end (stamped there) and its metric go to `submit`
    (the records thread) when the call went well, and are made at once when it raised."""

    def __init__(self, tracer: trace.Tracer, meter=None, submit: Callable[..., None] | None = None,
                 terminal_ended: Callable[[Span, Any], None] | None = None) -> None:
        self._tracer = tracer
        self._terminal_ended = terminal_ended  # (the real call's span, its attempt's context): what the tracker does
        self._metrics = Instruments.create(meter) if meter is not None else None
        self._submit = submit if submit is not None else _now
        # (kind, index, callback, plugin) -> its traced stand-in: Hermes hands over the same callbacks on
        # every call, and a stand-in keeps no per-call state.
        self._wrappers: dict[tuple[str, int, Any, str], Callable[..., Any]] = {}

    # -- execution layers ------------------------------------------------------

    def chain(
        self,
        kind: str,
        callbacks: Sequence[Callable[..., Any]],
        terminal_call: Callable[[Any], Any],
        context: Mapping[str, Any],
        plugin_of: Callable[[Any], str] = attribution.plugin_of,
    ) -> tuple[list[Callable[..., Any]], Callable[[Any], Any]]:
        """Traced stand-ins for a chain's callbacks and its terminal call."""
        layers = [self._cached_layer(kind, index, callback, plugin_of(callback))
                  for index, callback in enumerate(callbacks)]
        return layers, self._terminal(kind, len(callbacks), terminal_call, context)

    def _cached_layer(self, kind: str, index: int, callback: Callable[..., Any], plugin: str) -> Callable[..., Any]:
        key = (kind, index, callback, plugin)
        try:
            layer = self._wrappers.get(key)
        except TypeError:  # an unhashable callable: a stand-in for this call only
            return self._layer(kind, index, callback, plugin)
        if layer is None:
            if len(self._wrappers) >= _MAX_WRAPPERS:
                self._wrappers.clear()
            layer = self._wrappers[key] = self._layer(kind, index, callback, plugin)
        return layer

    def _layer(self, kind: str, index: int, callback: Callable[..., Any], plugin: str):
        payload_key = contract.PAYLOAD_KEY[kind]
        name = contract.callback_name(callback)
        attrs = {KIND: kind, PLUGIN: plugin, CALLBACK: name, INDEX: index}

        @functools.wraps(callback)  # Hermes names the callback in its logs: keep the name
        def layer(**kwargs: Any) -> Any:
            span = safely(self._start, f"{kind} {plugin}", attrs)
            if span is None:
                return callback(**kwargs)
            started = time.perf_counter()
            state = _LayerState(kwargs.get(payload_key))
            downstream = kwargs.get("next_call")
            if callable(downstream):
                kwargs["next_call"] = _watch(downstream, state)
            context = trace.set_span_in_context(span)  # the layer's measurements are recorded in it (exemplars)
            token = otel_context.attach(context)
            try:
                result = callback(**kwargs)
            except BaseException as exc:
                log_hygiene.remember_fields(kind, kwargs)
                safely(self._end_layer, span, kind, plugin, state, exc, started, context)
                raise
            finally:
                otel_context.detach(token)
            safely(self._end_layer, span, kind, plugin, state, None, started, context)
            return result

        return layer

    def _terminal(self, kind: str, depth: int, terminal_call: Callable[[Any], Any], context: Mapping[str, Any]):
        attempt = None
        if kind == contract.LLM_EXECUTION:
            name = f"provider_call {context.get('model') or ''}".strip()
            attempt = otel_context.get_current()  # the chain runs in the attempt's `chat` span
        else:
            name = f"tool_call {context.get('tool_name') or ''}".strip()
        attrs = {KIND: kind, INDEX: depth, TERMINAL: True}

        def terminal(payload: Any) -> Any:
            span = safely(self._start, name, attrs)
            if span is None:
                return terminal_call(payload)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                result = terminal_call(payload)
            except BaseException as exc:
                safely(_record_error, span, exc)
                safely(span.end)  # a fault of ours must not turn the finished real call into an error
                raise
            finally:
                otel_context.detach(token)
                if self._terminal_ended is not None and attempt is not None:
                    safely(self._terminal_ended, span, attempt)
            safely(self._submit, span.end, time.time_ns())
            return result

        return terminal

    def _start(self, name: str, attrs: Mapping[str, Any]) -> Span:
        return self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attrs)

    def _end_layer(self, span: Span, kind: str, plugin: str, state: _LayerState, exc: BaseException | None,
                   started: float, context: otel_context.Context) -> None:
        outcome = classify(state, exc)
        changed = state.payload is not None and state.payload is not state.incoming
        attrs: dict[str, Any] = {OUTCOME: outcome, PAYLOAD_CHANGED: changed}
        if changed:  # read now: the payloads may change once the layer returned
            attrs[CHANGED_KEYS] = contract.changed_keys(state.incoming, state.payload)
        labels = {KIND: kind, PLUGIN: plugin, OUTCOME: outcome}
        duration = time.perf_counter() - started
        if exc is None:
            self._submit(self._close_layer, span, attrs, time.time_ns(), duration, labels, context)
        else:
            _record_error(span, unwrap(exc))
            self._close_layer(span, attrs, None, duration, labels, context)

    def _close_layer(self, span: Span, attrs: dict[str, Any], end_ns: int | None, duration: float,
                     labels: dict[str, Any], context: Any) -> None:
        span.set_attributes(attrs)
        span.end(end_time=end_ns)
        if self._metrics is not None:
            self._metrics.duration.record(duration, labels, context)
            if labels[OUTCOME] == contract.FAIL_OPEN:
                self._metrics.failures.add(1, {KIND: labels[KIND], PLUGIN: labels[PLUGIN]}, context)

    # -- request middleware ------------------------------------------------------

    def count_rewrite(self, kind: str, source: str) -> None:
        if self._metrics is not None:
            self._metrics.rewrites.add(1, {KIND: kind, SOURCE: source})

    def count_failure(self, kind: str, plugin: str) -> None:
        if self._metrics is not None:
            self._metrics.failures.add(1, {KIND: kind, PLUGIN: plugin})


_MAX_WRAPPERS = 256


def _now(fn: Callable[..., Any], *args: Any) -> None:
    fn(*args)


def _watch(downstream: Callable[..., Any], state: _LayerState) -> Callable[..., Any]:
    """A next_call that records how the layer used it and otherwise is the original."""

    def next_call(*args: Any, **kwargs: Any) -> Any:
        state.called = True
        if args and args[0] is not None:
            state.payload = args[0]
        try:
            result = downstream(*args, **kwargs)
        except BaseException as exc:
            state.downstream_error = exc
            raise
        state.succeeded = True
        return result

    return next_call


_record_error = sc.record_error


# -- request middleware: collected per pass, attached to the call's span -------


@dataclass
class RequestEvent:
    name: str  # REWRITE_EVENT or FAILURE_EVENT
    attributes: dict[str, Any]
    timestamp_ns: int = field(default_factory=time.time_ns)


@dataclass
class RequestPass:
    """What one `apply_*_request_middleware` call did, in order."""

    kind: str
    next_index: int = 0
    events: list[RequestEvent] = field(default_factory=list)


current_pass: contextvars.ContextVar[RequestPass | None] = contextvars.ContextVar(
    "hermes_otel_request_pass", default=None)


def request_proxy(kind: str, callback: Callable[..., Any], plugin: str, layers: Callable[[], LayerTracer | None]):
    """A transparent stand-in for a request-middleware callback that records its effect."""
    name = contract.callback_name(callback)

    @functools.wraps(callback)
    def proxy(**kwargs: Any) -> Any:
        active = current_pass.get()
        if active is None or active.kind != kind:
            return callback(**kwargs)
        index = active.next_index
        active.next_index += 1
        base = {KIND: kind, PLUGIN: plugin, CALLBACK: name, INDEX: index}
        try:
            result = callback(**kwargs)
        except Exception as exc:
            log_hygiene.remember_fields(kind, kwargs)
            safely(_failed, active, base, exc, layers)
            raise
        safely(_rewritten, active, base, kwargs.get(contract.PAYLOAD_KEY[kind]), result, layers)
        return result

    proxy._hermes_otel_request_proxy = True  # type: ignore[attr-defined]
    return proxy


def _failed(active: RequestPass, base: dict, exc: BaseException, layers) -> None:
    active.events.append(RequestEvent(FAILURE_EVENT, {**base, **sc.error_attributes(exc)}))
    tracer = layers()
    if tracer is not None:
        tracer.count_failure(base[KIND], base[PLUGIN])


def _rewritten(active: RequestPass, base: dict, before: Any, result: Any, layers) -> None:
    payload = contract.replacement(base[KIND], result)
    if payload is None:
        return
    entry = contract.trace_entry(result)
    attrs = {**base, CHANGED_KEYS: contract.changed_keys(before, payload)}
    for key, attr in (("source", SOURCE), ("reason", REASON), ("name", NAME)):
        if key in entry:
            attrs[attr] = entry[key]
    active.events.append(RequestEvent(REWRITE_EVENT, attrs))
    tracer = layers()
    if tracer is not None:
        tracer.count_rewrite(base[KIND], entry.get("source", ""))


def events_from_trace(kind: str, trace: Any) -> list[RequestEvent]:
    """Rewrite events from Hermes's `middleware_trace` (where no request pass was watched: Hermes 0.20+), one per
    entry in order. Which plugin made an entry is not in it, nor which keys it changed (Hermes hands over deep
    copies: comparing them would cost with the conversation's length on the agent's thread)."""
    if not isinstance(trace, list):
        return []
    entries = [entry for entry in trace if isinstance(entry, Mapping)]
    events = []
    for index, entry in enumerate(entries):
        attrs: dict[str, Any] = {KIND: kind, INDEX: index}
        for key, attr in (("source", SOURCE), ("reason", REASON), ("name", NAME)):
            value = entry.get(key)
            if isinstance(value, str) and value:
                attrs[attr] = value
        attrs.setdefault(SOURCE, "plugin")
        events.append(RequestEvent(REWRITE_EVENT, attrs))
    return events
