"""Native hand-off to NeMo Relay's runtime (`nemo-relay` installed, `relay_handoff = true`).

We activate Relay's plugin host with the document's `observability`
component, keep the activation object alive (Relay exports nothing once it
is collected), and replay our spans through Relay's Python API — scopes,
LLM calls, tool calls and marks — on a worker thread, so Relay's own ATOF,
ATIF and OTLP exporters run on the same work. The replay never touches the
agent's thread beyond a snapshot, and any failure is reported once at WARNING.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from ... import semconv as sc
from ..._internal import log as _log
from ..._internal.bounded import BoundedMap
from .atof import _payload, category, plain, scope_name
from .worker import QueueWorker

_SCOPE_TYPES = {"agent": "Agent", "function": "Function", "guardrail": "Guardrail", "custom": "Custom"}


def activate(observability: Mapping[str, Any]):
    """Relay's activation for our document's observability component, or None (reported once)."""
    try:
        import nemo_relay.plugin as relay_plugin
    except ImportError:
        _log.once("relay-missing", "hermes-otel: relay_handoff is on but the nemo-relay package is not installed; "
                  "using hermes-otel's own exporters", per_process=True)
        return None
    try:
        return _run_coroutine(lambda: relay_plugin.initialize({"version": 1, "components": [dict(observability)]}))
    except Exception as exc:  # noqa: BLE001 - Relay's errors must not stop the agent
        _log.once("relay-activate", "hermes-otel: NeMo Relay activation failed (%s: %s); using hermes-otel's own "
                  "exporters", type(exc).__name__, exc, per_process=True)
        return None


def _run_coroutine(make, timeout_s: float = 10.0):
    """Run Relay's async `initialize` to completion on a thread of its own.

    register() may be called from inside a running event loop (the gateway),
    where asyncio.run is not allowed; a private thread with its own loop is.
    """
    import asyncio
    import inspect

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            result = make()
            outcome["value"] = asyncio.run(result) if inspect.iscoroutine(result) else result
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="hermes-otel-relay-init", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if "error" in outcome:
        raise outcome["error"]
    if "value" not in outcome:
        raise TimeoutError(f"NeMo Relay did not initialise within {timeout_s:.0f}s")
    return outcome["value"]


class RelayForwarder(SpanProcessor):
    """Replays span starts/ends into Relay's runtime (worker thread, bounded)."""

    def __init__(self, activation: Any) -> None:
        import nemo_relay

        self._relay = nemo_relay
        self.activation = activation  # owned: Relay stops exporting if this is collected
        self._handles: BoundedMap[int, Any] = BoundedMap(8192)
        self._worker = QueueWorker("hermes-otel-relay", self._replay_all, signal="relay")

    def on_start(self, span: ReadableSpan, parent_context: Any = None) -> None:
        self._worker.submit(("start", span.name, span.context.span_id,
                             span.parent.span_id if span.parent else None, dict(span.attributes or {}), (),
                             span.start_time, None))

    def on_end(self, span: ReadableSpan) -> None:
        self._worker.submit(("end", span.name, span.context.span_id, None, dict(span.attributes or {}),
                             tuple((e.name, dict(e.attributes or {}), e.timestamp) for e in span.events),
                             span.start_time, span.end_time))

    def _replay_all(self, batch) -> None:
        for item in batch:
            try:
                self._replay(*item)
            except Exception as exc:  # noqa: BLE001 - reported once; the stream goes on
                _log.once(f"relay-replay:{type(exc).__name__}", "hermes-otel: NeMo Relay hand-off failed for a span "
                          "(%s: %s)", type(exc).__name__, exc, per_process=True)

    def _replay(self, phase: str, name: str, span_id: int, parent_id: int | None, attrs: dict, events: tuple,
                start_ns: int | None, end_ns: int | None) -> None:
        """One span start or end as Relay calls, at the span's own times. A model or tool call is started at its
        span's end, with its request: its captured content is set only then (on our records thread)."""
        relay = self._relay
        started, ended = _time(start_ns), _time(end_ns)
        cat = category(name, attrs)
        metadata = {k: v for k, v in attrs.items() if k in (sc.CONVERSATION_ID, sc.TURN_ID, sc.API_REQUEST_ID)} or None
        if phase == "start":
            # Relay nests only under scopes: a span under an LLM or tool call hangs from that call's scope.
            parent_entry = self._handles.get(parent_id) if parent_id else None
            parent = parent_entry[2] if parent_entry else None
            if cat in ("llm", "tool"):
                handle = None
            else:
                scope_type = getattr(relay.ScopeType, _SCOPE_TYPES.get(cat, "Custom"))
                handle = relay.scope.push(scope_name(name, cat, attrs), scope_type, handle=parent,
                                          metadata=metadata, timestamp=started)
            self._handles.put(span_id, (cat, handle, parent if cat in ("llm", "tool") else handle))
            return
        entry = self._handles.pop(span_id)
        if entry is None:
            return
        cat, handle, scope_handle = entry
        if cat == "llm":
            request = relay.LLMRequest({}, _payload(attrs.get("gen_ai.input.messages")) or {})
            handle = relay.llm.call(scope_name(name, cat, attrs), request, handle=scope_handle,
                                    model_name=attrs.get(sc.REQUEST_MODEL), metadata=metadata, timestamp=started)
        elif cat == "tool":
            handle = relay.tools.call(scope_name(name, cat, attrs),
                                      _payload(attrs.get("gen_ai.tool.call.arguments")) or {}, handle=scope_handle,
                                      tool_call_id=attrs.get(sc.TOOL_CALL_ID), metadata=metadata, timestamp=started)
        for event_name, event_attrs, at in events:
            relay.scope.event(event_name, handle=scope_handle, metadata=plain(event_attrs), timestamp=_time(at))
        if cat == "llm":
            relay.llm.call_end(handle, _payload(attrs.get("gen_ai.output.messages")) or {}, metadata=metadata,
                               timestamp=ended)
        elif cat == "tool":
            result = _payload(attrs.get("gen_ai.tool.call.result"))
            relay.tools.call_end(handle, relay.ToolExecutionResult(result if result is not None else ""),
                                 timestamp=ended)
        else:
            relay.scope.pop(handle, metadata=metadata, timestamp=ended)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        done = self._worker.wait_idle(timeout_millis / 1000)
        try:
            self._relay.subscribers.flush()
        except Exception:  # noqa: BLE001 - best effort
            pass
        return done

    def shutdown(self) -> None:
        self.force_flush(2000)
        self._worker.stop()


def _time(ns: int | None) -> datetime.datetime | None:
    return None if ns is None else datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC)
