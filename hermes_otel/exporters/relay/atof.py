"""A NeMo Relay-style forwarding exporter: the same work as ATOF events (atof_version 0.1).

A span processor on our tracer provider turns each span's start and end into
ATOF `scope` events (sharing a UUIDv7), and each span event (middleware
rewrites, failures, exceptions) into a `mark`. The agent's thread only
snapshots the span and enqueues it; events are built, encoded and written or
streamed on a worker thread, with bounded memory: past the queue limit events
are dropped and counted (`health.dropped["atof"]`), never waited for.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode
from urllib3.util.retry import Retry

from ... import semconv as sc
from ..._internal import log as _log
from ..._internal.bounded import BoundedMap
from ...config.relay import FileSinkConfig, StreamSinkConfig  # the sink configs live with the Relay schema
from .. import deadline
from ..health import LIVE_RETRY_S, health
from ..private import open_file as open_private
from .worker import QueueWorker

ATOF_VERSION = "0.1"

# Hermes ids (span attribute -> ATOF metadata key).
_METADATA = (
    (sc.CONVERSATION_ID, "session_id"),
    (sc.TURN_ID, "turn_id"),
    (sc.TASK_ID, "task_id"),
    (sc.API_REQUEST_ID, "api_request_id"),
    (sc.API_ATTEMPT, "api_attempt"),
    (sc.TOOL_CALL_ID, "tool_call_id"),
    (sc.API_MODE, "api_mode"),
    (sc.HERMES_PROVIDER, "provider"),
    (sc.PLATFORM, "platform"),
    (sc.MIDDLEWARE_KIND, "middleware_kind"),
    (sc.MIDDLEWARE_PLUGIN, "middleware_plugin"),
    (sc.MIDDLEWARE_OUTCOME, "middleware_outcome"),
)


# -- mapping (pure) ------------------------------------------------------------------


def category(name: str, attrs: Mapping[str, Any]) -> str:
    operation = attrs.get(sc.OPERATION)
    if operation == sc.OP_AGENT or name.startswith("subagent"):
        return "agent"
    if operation == sc.OP_CHAT:
        return "llm"
    if operation == sc.OP_TOOL:
        return "tool"
    if sc.MIDDLEWARE_KIND in attrs:
        return "function"
    if name == "approval":
        return "guardrail"
    return "custom"


def scope_name(name: str, cat: str, attrs: Mapping[str, Any]) -> str:
    if cat == "llm":
        return str(attrs.get(sc.PROVIDER) or name)
    if cat == "tool":
        return str(attrs.get(sc.TOOL_NAME) or name)
    if cat == "agent" and attrs.get(sc.OPERATION) == sc.OP_AGENT:
        return sc.AGENT
    return name


def profile(cat: str, attrs: Mapping[str, Any]) -> dict | None:
    if cat == "llm":
        return {"model_name": attrs.get(sc.REQUEST_MODEL)}
    if cat == "tool":
        return {"tool_call_id": attrs.get(sc.TOOL_CALL_ID)}
    return None


def timestamp(ns: int) -> str:
    """RFC 3339 with nanoseconds, UTC (`2026-12-02T08:58:29.279741723+00:00`)."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}+00:00"


def uuid7(ms: int, entropy: int) -> str:
    """A UUIDv7 whose 74 random bits come from `entropy` (the span id), so it is stable per span."""
    value = (ms & 0xFFFFFFFFFFFF) << 80 | 0x7 << 76 | (entropy >> 62 & 0xFFF) << 64 | 0b10 << 62 | entropy & (2**62 - 1)
    return str(uuid.UUID(int=value))


def plain(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as JSON-ready values (a tuple becomes a list)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def _mark(name: str, attrs: Mapping[str, Any], parent: str | None, root: str | None, ns: int, entropy: Any,
          data: Any = None) -> dict[str, Any]:
    return {
        "atof_version": ATOF_VERSION,
        "category": None,
        "category_profile": None,
        "data": data,
        "data_schema": None,
        "kind": "mark",
        "metadata": plain(attrs) or None,
        "name": name,
        "parent_uuid": parent,
        "propagation_root_uuid": root,
        "timestamp": timestamp(ns),
        "uuid": uuid7(ns // 1_000_000, hash(entropy) & (2**74 - 1)),
    }


def _payload(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass
class _Snapshot:
    """What the agent's thread captures of a span: cheap, immutable."""

    phase: str  # "start" | "end"
    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    time_ns: int
    attributes: dict[str, Any]
    status: str = "OK"
    events: Sequence[Any] = ()
    body: Any = None


class EventBuilder:
    """Snapshots -> ATOF dicts; owns the span-id -> UUID map (one worker thread uses it)."""

    def __init__(self, limit: int = 8192) -> None:
        self._uuids: BoundedMap[int, str] = BoundedMap(limit)
        self._roots: BoundedMap[int, str] = BoundedMap(limit)  # trace id -> root uuid

    def _uuid(self, span_id: int, ms: int = 0) -> str:
        known = self._uuids.get(span_id)
        if known is None:
            known = uuid7(ms, span_id)
            self._uuids.put(span_id, known)
        return known

    def events(self, snap: _Snapshot) -> list[dict[str, Any]]:
        if snap.phase == "mark":  # an observer-only happening (a hook with no span of its own)
            parent = self._uuids.get(snap.parent_id) if snap.parent_id else None
            return [_mark(snap.name, snap.attributes, parent, self._roots.get(snap.trace_id) or parent, snap.time_ns,
                          (snap.name, snap.time_ns), snap.body)]
        attrs = snap.attributes
        cat = category(snap.name, attrs)
        own = self._uuid(snap.span_id, snap.time_ns // 1_000_000)
        parent = self._uuid(snap.parent_id) if snap.parent_id else None
        if snap.trace_id not in self._roots:
            self._roots.put(snap.trace_id, own)
        root = self._roots.get(snap.trace_id) or own
        metadata = {key: attrs[attr] for attr, key in _METADATA if attr in attrs}
        if snap.phase == "end":
            metadata["otel.status_code"] = snap.status
            if sc.ERROR_TYPE in attrs:
                metadata["error_type"] = attrs[sc.ERROR_TYPE]
        event = {
            "atof_version": ATOF_VERSION,
            "attributes": ["streaming"] if attrs.get(sc.REQUEST_STREAM) is True else [],
            "category": cat,
            "category_profile": profile(cat, attrs),
            "data": self._data(cat, snap),
            "data_schema": None,
            "kind": "scope",
            "metadata": metadata or None,
            "name": scope_name(snap.name, cat, attrs),
            "parent_uuid": parent,
            "propagation_root_uuid": root,
            "scope_category": snap.phase,
            "timestamp": timestamp(snap.time_ns),
            "uuid": own,
        }
        return [event] + [  # the span's events: marks, in order, after the scope ends
            _mark(e.name, e.attributes or {}, own, root, e.timestamp, (snap.span_id, e.timestamp)) for e in snap.events
        ]

    def _data(self, cat: str, snap: _Snapshot) -> Any:
        """Content only where capture (or enable_full_payloads) put it on the span, already redacted."""
        attrs, start = snap.attributes, snap.phase == "start"
        if cat == "tool":
            return _payload(attrs.get("gen_ai.tool.call.arguments" if start else "gen_ai.tool.call.result"))
        if cat == "agent" and attrs.get(sc.OPERATION) == sc.OP_AGENT:
            return _payload(attrs.get("gen_ai.input.messages" if start else "gen_ai.output.messages"))
        return None


# -- sinks -----------------------------------------------------------------------------


def rename_fields(event: Any, policy: str) -> Any:
    """`replace_dots`: `otel.status_code` -> `otel_status_code` in every object key."""
    if policy != "replace_dots":
        return event
    if isinstance(event, dict):
        return {str(k).replace(".", "_"): rename_fields(v, policy) for k, v in event.items()}
    if isinstance(event, list):
        return [rename_fields(v, policy) for v in event]
    return event


class FileSink:
    def __init__(self, config: FileSinkConfig) -> None:
        self.path = Path(config.output_directory).expanduser() / config.filename
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if config.mode == "overwrite" else os.O_APPEND)
        self._fd, _ = open_private(self.path, flags)  # events may hold content: ours, 0600, or refused

    def write(self, events: list[dict]) -> None:
        data = "".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in events)
        os.write(self._fd, data.encode("utf-8"))

    def close(self) -> None:
        os.close(self._fd)


class _RetryUntilTheDeadline(Retry):
    """urllib3's retries, whose waits (backoff, a `Retry-After`) end at the request's deadline: the deadline shuts
    sockets, and a sleep holds none."""

    def sleep(self, response: Any = None) -> None:
        wait = self.get_backoff_time()
        if self.respect_retry_after_header and response is not None:
            wait = self.get_retry_after(response) or wait
        remaining = deadline.left()
        time.sleep(min(wait, remaining) if remaining is not None else wait)


class StreamSink:
    """Batches POSTed to an HTTP endpoint from the ATOF worker (never the agent's thread), on a `requests.Session`
    with urllib3's `Retry` (backoff, retried statuses, no redirects: headers may hold credentials). Each batch,
    retries included, ends at `timeout_millis` whatever the endpoint does (a drip, a stall after its headers, a
    connect nobody answers: :mod:`..deadline`); what it could not send is counted as dropped."""

    BATCH = 500
    signal = "atof"  # as the owner of its exports (deadline.until): health.py's log filter names it
    RETRY = _RetryUntilTheDeadline(total=2, backoff_factor=0.2, status_forcelist=(429, 500, 502, 503, 504),
                                   allowed_methods=frozenset({"POST"}), redirect=0, raise_on_status=False)

    def __init__(self, config: StreamSinkConfig) -> None:
        self._config = config
        self._session = requests.Session()
        self._session.mount("http://", deadline.Adapter(max_retries=self.RETRY))
        self._session.mount("https://", deadline.Adapter(max_retries=self.RETRY))
        self._session.headers.update({
            "Content-Type": "application/x-ndjson" if config.transport == "ndjson" else "application/json",
            **config.resolved_headers(),
        })
        self.sent = 0

    def write(self, events: list[dict]) -> None:
        for start in range(0, len(events), self.BATCH):
            self._send(events[start:start + self.BATCH])

    def _send(self, batch: list[dict]) -> None:
        reason = self._post(batch)
        if reason is None:
            self.sent += len(batch)
            health.success(self._config.url)
            return
        if reason:  # (empty: not sent on purpose, or cut by our shutdown: no failure of the endpoint's)
            health.failure("atof", self._config.url, reason)
        health.drop("atof", self._config.url, len(batch))

    def _post(self, batch: list[dict]) -> str | None:
        """Why `batch` was not delivered (None: it was)."""
        # Shut down; or failing: tried again once every few seconds, not per batch (the file sinks on this worker
        # keep up).
        if deadline.is_cut(self) or health.failed_within(self._config.url, LIVE_RETRY_S):
            return ""
        policy = self._config.field_name_policy
        events = [rename_fields(e, policy) for e in batch]
        if self._config.transport == "ndjson":
            body = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode()
        else:
            body = json.dumps(events, separators=(",", ":")).encode()
        timeout_s = self._config.timeout_millis / 1000
        at = time.monotonic() + timeout_s
        try:
            with deadline.until(at, self):
                response = self._session.post(self._config.url, data=body, allow_redirects=False, timeout=timeout_s)
        except (requests.RequestException, OSError, ValueError) as exc:
            if deadline.is_cut(self):
                return ""
            return "no answer within the timeout" if time.monotonic() >= at else type(exc).__name__
        return None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"

    def interrupt(self) -> None:
        """Shutdown: the POST in flight ends now, and no other starts (their events are counted as dropped)."""
        deadline.cut(self)

    def close(self) -> None:
        self._session.close()


# -- the processor -------------------------------------------------------------------------


class AtofSpanProcessor(SpanProcessor):
    """Span start/end -> ATOF events, built and written on a worker thread."""

    def __init__(self, sinks: Sequence[FileSink | StreamSink]) -> None:
        self._sinks = list(sinks)
        self._builder = EventBuilder()
        # The worker is the only writer to the sinks, so it also closes them.
        self._worker = QueueWorker("hermes-otel-atof", self._write, signal="atof", on_exit=self._close_sinks)

    # agent's thread: snapshot and enqueue only
    def on_start(self, span: ReadableSpan, parent_context: Any = None) -> None:
        self._worker.submit(_snapshot("start", span, span.start_time or time.time_ns()))

    def on_end(self, span: ReadableSpan) -> None:
        self._worker.submit(_snapshot("end", span, span.end_time or time.time_ns()))

    # worker thread
    def _write(self, batch: Sequence[_Snapshot]) -> None:
        events: list[dict] = []
        for snap in batch:
            try:
                events.extend(self._builder.events(snap))
            except Exception as exc:  # noqa: BLE001 - one odd span must not stop the stream
                _log.once(f"atof-build:{type(exc).__name__}", "hermes-otel: ATOF event not built (%s: %s)",
                          type(exc).__name__, exc)
        for sink in self._sinks:
            try:
                sink.write(events)
            except Exception as exc:  # noqa: BLE001 - a broken sink is reported, others go on
                health.dropped["atof"] += len(events)
                _log.once(f"atof-sink:{id(sink)}", "hermes-otel: ATOF sink failed (%s: %s)", type(exc).__name__, exc)

    def log_processor(self) -> AtofLogProcessor:
        """Marks for observer-only happenings, from the observer log stream, on the same worker."""
        return AtofLogProcessor(self._worker)

    def _close_sinks(self) -> None:
        for sink in self._sinks:
            sink.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._worker.wait_idle(timeout_millis / 1000)  # idle: every event written or POSTed (or counted)

    def shutdown(self) -> None:
        self.force_flush(2000)
        for sink in self._sinks:
            if isinstance(sink, StreamSink):
                sink.interrupt()
        self._worker.stop()


def _snapshot(phase: str, span: ReadableSpan, at: int) -> _Snapshot:
    ctx = span.context
    status = "ERROR" if span.status.status_code is StatusCode.ERROR else "OK"
    return _Snapshot(
        phase, span.name, ctx.trace_id, ctx.span_id, span.parent.span_id if span.parent is not None else None, at,
        dict(span.attributes or {}), status, tuple(span.events) if phase == "end" else (),
    )


# Hooks whose happening is already a scope (start or end of a span) in the ATOF stream.
OBSERVER_EVENTS = "hermes.observer."  # the observer records; any other event is not a mark
SPAN_BACKED_HOOKS = frozenset({
    "hermes.observer.pre_llm_call", "hermes.observer.on_session_end", "hermes.observer.post_tool_call",
    "hermes.observer.api_request_error", "hermes.observer.pre_approval_request",
    "hermes.observer.post_approval_response", "hermes.observer.subagent_start", "hermes.observer.subagent_stop",
})


class AtofLogProcessor(LogRecordProcessor):
    """Observer log records of hooks without a span of their own -> ATOF marks."""

    def __init__(self, worker: QueueWorker) -> None:
        self._worker = worker

    def on_emit(self, log_record: Any) -> None:
        record = log_record.log_record
        name = record.event_name
        if not name or not name.startswith(OBSERVER_EVENTS) or name in SPAN_BACKED_HOOKS:
            return  # (the GenAI details event describes a span ATOF already has)
        self._worker.submit(_Snapshot(
            "mark", name, record.trace_id or 0, 0, record.span_id or None, record.timestamp or time.time_ns(),
            dict(record.attributes or {}), body=record.body,
        ))

    def shutdown(self) -> None:
        pass  # the span processor owns the worker

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._worker.wait_idle(timeout_millis / 1000)
