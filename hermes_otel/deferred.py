"""Keep the agent's thread short: record cheaply now, build telemetry in the background.

On the agent's thread a span is a :class:`DeferredSpan`: ids, timestamps and
the attributes and events it was given, with a real `SpanContext` so context
propagation (HTTP-client spans nesting under `chat`, log correlation) works
at once. The SDK work (sampling, attribute limits, span processors, metric
aggregation, log records) happens later on one builder thread, from the
captured values: the span the SDK exports has exactly the ids, parent,
timestamps, attributes, events, links and status the agent's thread saw.

The builder wakes when enough work has queued or on a timer, so in a busy
agent it runs while the agent waits on the network. The queue is bounded;
what cannot be queued is counted and reported once (see :class:`Backlog`).
With a tracer that is not the SDK's we cannot preset ids, and everything
runs inline (:class:`Inline`), as it does in unit tests.
"""

from __future__ import annotations

import collections
import gc
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from . import _log
from ._gil import pause
from .exporters.health import health

_YIELD_EVERY = 8  # items between GIL hand-backs (~0.2-0.4 ms of building)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)


class Inline:
    """Run deferred work at once (tracers we cannot defer for, and tests)."""

    def defer(self, fn: Callable[..., Any], *args: Any) -> None:
        _run(fn, args)

    defer_always = defer

    def drain(self, timeout_s: float | None = None) -> bool:
        return True

    def shutdown(self, timeout_s: float | None = None) -> bool:
        return True


class Backlog:
    """Work handed off by the agent's thread, run in order on one builder thread.

    `defer` is a deque append. The builder wakes when work arrives after a
    quiet spell, lingers `linger_s` so that the agent's burst of calls ends
    first (a model call takes far longer), then builds; it hands the GIL back
    every few items, so an agent thread that needs it waits well under a
    millisecond. It also wakes when `wake_at` items are queued, and every
    `interval_s` as a backstop. `drain` (flush, shutdown) runs what is left
    on the caller's thread under the same lock, so order is kept. Past
    `limit` queued items new work is dropped and counted; the end of a span
    whose start was queued is always kept, so no span is left open.
    """

    def __init__(
        self, *, limit: int = 16384, wake_at: int = 2048, interval_s: float = 0.5, linger_s: float = 0.02
    ) -> None:
        self._items: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._limit = limit
        self._wake_at = wake_at
        self._interval_s = interval_s
        self._linger_s = linger_s
        self._wake = threading.Event()
        self._running = threading.Lock()
        self._stopped = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._loop, name="hermes-otel-builder", daemon=True)
        self._thread.start()

    def defer(self, fn: Callable[..., Any], *args: Any) -> None:
        if len(self._items) >= self._limit:
            self._drop()
        else:
            self.defer_always(fn, *args)

    def defer_always(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._stopped:  # after shutdown: nothing will run later, so run now (fail-open, nothing lost)
            _run(fn, args)
            return
        items = self._items
        items.append((fn, args))
        queued = len(items)
        if queued == 1 or queued == self._wake_at:
            self._wake.set()
        if self._stopped:  # shut down while we appended: the last drain may have missed it
            self.drain(0)

    def drain(self, timeout_s: float | None = None) -> bool:
        """Run everything queued so far; False when the builder did not yield in time."""
        if not self._running.acquire(timeout=-1 if timeout_s is None else max(timeout_s, 0.0)):
            return False
        try:
            self._run_queued(pausing=False)  # the caller waits for this: no pauses
        finally:
            self._running.release()
        return True

    def shutdown(self, timeout_s: float | None = None) -> bool:
        self._stopped = True
        self._wake.set()
        return self.drain(timeout_s)

    def __len__(self) -> int:
        return len(self._items)

    def _loop(self) -> None:
        while not self._stopped:
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if len(self._items) < self._wake_at:
                time.sleep(self._linger_s)
            with self._running:
                self._run_queued(pausing=True)
            collect_young()

    def _run_queued(self, pausing: bool) -> None:
        pop = self._items.popleft
        done = 0
        _building.active = True
        try:
            while True:
                try:
                    fn, args = pop()
                except IndexError:
                    return
                _run(fn, args)
                done += 1
                if pausing and done % _YIELD_EVERY == 0:
                    pause()  # hand the GIL back now and then: an agent thread waiting for it gets in at once
        finally:
            _building.active = False

    def _drop(self) -> None:
        self.dropped += 1
        health.dropped["builder"] += 1  # exported as hermes.otel.exporter.dropped{hermes.otel.signal="builder"}
        _log.once(
            "backlog:full",
            "hermes-otel: telemetry backlog full (%d items); dropping new telemetry until the builder catches up",
            self._limit,
        )


_building = threading.local()


def building() -> bool:
    """Whether this thread is running deferred work (the builder, or a flush draining the backlog):
    it may then wait for an exporter to catch up. The agent's thread never is."""
    return getattr(_building, "active", False)


def collect_young() -> None:
    """Run the young-generation garbage collection the interpreter is about to run anyway, now.

    The builder's SDK objects fill the young generations; the next allocation past
    the threshold, often on the agent's thread in the middle of a call, would then
    pay for a collection (milliseconds once the batch queues are full). Run at the
    end of a builder pass, while the agent waits on its model, it lands here instead.
    Thresholds and `gc.disable()` are the host's and are respected.
    """
    if not gc.isenabled():
        return
    (young, middle, _), (young_limit, middle_limit, _) = gc.get_count(), gc.get_threshold()
    if young_limit and young >= young_limit // 2:
        gc.collect(1 if middle_limit and middle + 1 >= middle_limit else 0)


def _run(fn: Callable[..., Any], args: tuple) -> None:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - a fault in building one item must not stop the rest
        _log.once(
            f"builder:{getattr(fn, '__qualname__', fn)}:{type(exc).__name__}",
            "hermes-otel: internal error building telemetry in %s (%s: %s)",
            getattr(fn, "__qualname__", repr(fn)),
            type(exc).__name__,
            exc,
            exc_info=True,
        )


class _PresetIds(IdGenerator):
    """The SDK tracer's id generator, answering with ids chosen earlier on the agent's thread."""

    def __init__(self, fallback: IdGenerator) -> None:
        self._fallback = fallback
        self._next = threading.local()

    def preset(self, trace_id: int, span_id: int) -> None:
        self._next.ids = (trace_id, span_id)

    def generate_trace_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        return ids[0] if ids else self._fallback.generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._next, "ids", None)
        if ids:
            self._next.ids = None
            return ids[1]
        return self._fallback.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return self._fallback.is_trace_id_random()


def can_defer(tracer: Any) -> bool:
    """Only the SDK tracer lets us choose span ids (and sample) ahead of building."""
    return isinstance(getattr(tracer, "id_generator", None), IdGenerator) and hasattr(tracer, "sampler")


class DeferredTracer(trace.Tracer):
    """A Tracer whose spans are recorded now and built by the SDK tracer later, on the backlog."""

    def __init__(self, tracer: Any, backlog: Backlog) -> None:
        self._tracer = tracer
        self._ids = _PresetIds(tracer.id_generator)
        tracer.id_generator = self._ids  # this tracer object is ours alone (get_tracer returns a new one)
        self._sampler = tracer.sampler
        # The default ParentBased sampler follows a local parent's decision: no need to ask it per child.
        self.follows_local_parent = (
            isinstance(self._sampler, ParentBased)
            and getattr(self._sampler, "_local_parent_sampled", None) is ALWAYS_ON
            and getattr(self._sampler, "_local_parent_not_sampled", None) is ALWAYS_OFF
        )
        # ... and its root sampler ALWAYS_ON samples every root: no need to ask it per turn either.
        self.samples_every_root = (
            isinstance(self._sampler, ParentBased) and getattr(self._sampler, "_root", None) is ALWAYS_ON
        )
        self._random_ids = self._ids.is_trace_id_random()
        self.backlog = backlog

    def start_span(  # type: ignore[override]
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        return self._start(trace.get_current_span(context).get_span_context(), name, context, kind, attributes, links,
                           start_time)

    def _start(self, parent: SpanContext, name: str, context: otel_context.Context | None, kind: SpanKind,
               attributes: Mapping[str, Any] | None = None, links: Sequence[Link] | None = None,
               start_time: int | None = None, describe: tuple | None = None) -> trace.Span:
        # Ids, flags and trace state exactly as the SDK tracer would set them (see its start_span).
        if parent.is_valid and not parent.is_remote and self.follows_local_parent:
            span_context = SpanContext(
                parent.trace_id, random.getrandbits(64) or 1, False, parent.trace_flags, parent.trace_state
            )
            if not parent.trace_flags.sampled:
                return NonRecordingSpan(span_context)
        else:
            if parent.is_valid:
                trace_id, random_id = parent.trace_id, parent.trace_flags.random_trace_id
            else:
                parent = None
                trace_id, random_id = random.getrandbits(128) or 1, self._random_ids
            if parent is None and self.samples_every_root:
                flags, trace_state, recording = _SAMPLED, None, True  # what ALWAYS_ON answers for a root
            else:
                decision = self._sampler.should_sample(context, trace_id, name, kind, attributes, links)
                flags = _SAMPLED if decision.decision.is_sampled() else _NOT_SAMPLED
                trace_state, recording = decision.trace_state, decision.decision.is_recording()
            if random_id:
                flags = TraceFlags(flags | TraceFlags.RANDOM_TRACE_ID)
            span_context = SpanContext(trace_id, random.getrandbits(64) or 1, False, flags, trace_state)
            if not recording:
                return NonRecordingSpan(span_context)
        span = DeferredSpan(
            self, name, span_context, parent, kind, dict(attributes) if attributes else {}, links,
            start_time or time.time_ns(),
        )
        span.describe = describe  # before the span is queued: the builder may take it at once
        self.backlog.defer(self._begin, span)
        return span

    def start_lazy(self, describe: Callable[..., tuple[str, dict]], args: tuple, *, context: otel_context.Context | None,
                   kind: SpanKind, parent: SpanContext | None = None) -> trace.Span:
        """A span whose name and start attributes `describe(*args)` computes later, on the builder thread.

        Deferred only under a local parent whose sampling decision we follow (the sampler would
        otherwise need the attributes now); `args` must be values the caller will not change.
        `parent`, when given, is the span context of `context`'s span (saves looking it up).
        """
        if parent is None:
            parent = trace.get_current_span(context).get_span_context()
        if not (parent.is_valid and not parent.is_remote and self.follows_local_parent):
            name, attributes = describe(*args)
            return self._start(parent, name, context, kind, attributes)
        return self._start(parent, "", context, kind, describe=(describe, args))

    def start_as_current_span(self, name: str, *args: Any, **kwargs: Any):  # type: ignore[override]
        return trace.use_span(self.start_span(name, *args, **kwargs), end_on_exit=True)

    # -- on the builder thread -------------------------------------------------

    def _begin(self, span: "DeferredSpan") -> None:
        if span.describe is not None:
            describe, args = span.describe
            span.name, span.start_attributes = describe(*args)
        parent = trace.set_span_in_context(NonRecordingSpan(span.parent)) if span.parent else otel_context.Context()
        self._ids.preset(span.context.trace_id, span.context.span_id)
        span.built = self._tracer.start_span(
            span.name, context=parent, kind=span.kind, attributes=span.start_attributes, links=span.links,
            start_time=span.start_ns,
        )

    @staticmethod
    def _finish(span: "DeferredSpan") -> None:
        built = span.built
        if built is None:  # its start was dropped
            return
        if span.renamed is not None:
            built.update_name(span.renamed)
        if span.attributes:
            built.set_attributes(span.attributes)
        for name, attributes, timestamp in span.events:
            built.add_event(name, attributes, timestamp)
        for link in span.late_links:
            built.add_link(link.context, link.attributes)
        if span.status is not None:
            built.set_status(span.status)
        built.end(end_time=span.end_ns)
        span.built = None


class DeferredSpan(trace.Span):
    """What the agent's thread records of a span; see the module docstring."""

    __slots__ = ("_tracer", "name", "context", "parent", "kind", "start_attributes", "links", "start_ns",
                 "attributes", "events", "late_links", "status", "renamed", "end_ns", "built", "describe")

    def __init__(self, tracer: DeferredTracer, name: str, context: SpanContext, parent: SpanContext | None,
                 kind: SpanKind, attributes: dict, links: Sequence[Link] | None, start_ns: int) -> None:
        self._tracer = tracer
        self.name = name
        self.context = context
        self.parent = parent
        self.kind = kind
        self.start_attributes = attributes
        self.links = links
        self.start_ns = start_ns
        self.attributes: dict[str, Any] = {}  # set after the start
        self.events: list[tuple[str, Any, int]] = []
        self.late_links: list[Link] = []
        self.status: Status | None = None
        self.renamed: str | None = None
        self.end_ns: int | None = None
        self.built: Any = None
        self.describe: tuple[Callable[..., tuple[str, dict]], tuple] | None = None

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_ns is None

    def set_attribute(self, key: str, value: Any) -> None:
        if self.end_ns is None:
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self.end_ns is None:
            self.attributes.update(attributes)

    def add_event(self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None) -> None:
        if self.end_ns is None:
            self.events.append((name, dict(attributes) if attributes else None, timestamp or time.time_ns()))

    def add_link(self, context: SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        if self.end_ns is None:
            self.late_links.append(Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self.end_ns is None:
            self.renamed = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.end_ns is not None:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        # The SDK's rule: OK is final, UNSET never overrides.
        if self.status is not None and self.status.status_code is StatusCode.OK:
            return
        if status.status_code is not StatusCode.UNSET:
            self.status = status

    def record_exception(self, exception: BaseException, attributes: Mapping[str, Any] | None = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        # Our own code records errors through semconv.record_error (redacted); this keeps the API whole.
        self.add_event("exception", {"exception.type": type(exception).__name__, "exception.escaped": escaped,
                                     **(attributes or {})}, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_ns is not None:
            return
        self.end_ns = end_time or time.time_ns()
        self._tracer.backlog.defer_always(DeferredTracer._finish, self)


def start_lazy(tracer: Any, describe: Callable[..., tuple[str, dict]], args: tuple, *,
               context: otel_context.Context | None, kind: SpanKind, parent: SpanContext | None = None) -> trace.Span:
    """`describe(*args)` -> (name, attributes) later on the builder with our tracer, now with any other."""
    if isinstance(tracer, DeferredTracer):
        return tracer.start_lazy(describe, args, context=context, kind=kind, parent=parent)
    name, attributes = describe(*args)
    return tracer.start_span(name, context=context, kind=kind, attributes=attributes)


class DeferredInstrument:
    """A counter or histogram whose measurements are aggregated on the builder thread."""

    __slots__ = ("_inner", "_backlog", "_record")

    def __init__(self, inner: Any, backlog: Backlog | Inline) -> None:
        self._inner = inner
        self._backlog = backlog
        self._record = getattr(inner, "record", None) or inner.add

    def record(self, amount: float, attributes: Mapping[str, Any] | None = None, context: Any = None) -> None:
        # The current context goes along: exemplars still point at the span that was current.
        self._backlog.defer(self._record, amount, attributes, context or otel_context.get_current())

    add = record


def immediate(instrument: Any) -> Callable[..., None]:
    """`instrument`'s record (or add), run at once: for code that already runs on the builder."""
    if isinstance(instrument, DeferredInstrument):
        return instrument._record
    return getattr(instrument, "record", None) or instrument.add


class DeferredMeter:
    """The few Meter methods we use, handing out deferred instruments."""

    def __init__(self, meter: Any, backlog: Backlog | Inline) -> None:
        self._meter = meter
        self._backlog = backlog

    def create_histogram(self, *args: Any, **kwargs: Any) -> DeferredInstrument:
        return DeferredInstrument(self._meter.create_histogram(*args, **kwargs), self._backlog)

    def create_counter(self, *args: Any, **kwargs: Any) -> DeferredInstrument:
        return DeferredInstrument(self._meter.create_counter(*args, **kwargs), self._backlog)

    def __getattr__(self, name: str) -> Any:  # observable instruments and the rest: as they are
        return getattr(self._meter, name)
