"""A spec-exact middleware runner: the seed contract on its own, each layer a span.

For hosts other than Hermes, and for plugin authors who want to test their
middleware without running an agent::

    runner = MiddlewareRunner(tracer_provider.get_tracer("my-tests"))
    runner.register("llm_execution", my_plugin.time_llm, plugin="my_plugin")
    result = runner.apply_request("llm_request", request, session_id="s1")
    response = runner.run_execution("llm_execution", result.payload, call_provider,
                                    original_request=result.original_payload)

Semantics (the seed; where Hermes 0.19.0 differs it is noted):

* request middleware runs in registration order; each callback gets the
  current effective payload and may return a full replacement
  (`{"request": {...}}` / `{"args": {...}}`) with trace fields
  `source`/`reason`/`name` (Hermes 0.19.0 hands every callback the same
  incoming payload and keeps the last replacement);
* execution middleware nests in registration order; `next_call` is
  single-use; a callback that raises before `next_call` is skipped (the chain
  continues with the same payload); one that raises after a successful
  `next_call` keeps the downstream result; a downstream error propagates
  (unwrapped) and is never turned into a successful None;
* a failure is logged once at WARNING naming the fields that were passed;
  identical repeats go to DEBUG; :meth:`reset` (reload) starts over (Hermes
  0.19.0 warns every time; see :mod:`.log_hygiene`).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from . import contract
from .layers import LayerTracer, RequestPass, current_pass, request_proxy

logger = logging.getLogger("hermes_otel.middleware")


@dataclass
class RequestResult:
    payload: Any
    original_payload: Any
    changed: bool = False
    trace: list[dict[str, str]] = field(default_factory=list)
    events: list = field(default_factory=list)  # RequestEvent: rewrites and failures, in order


class _DownstreamExecutionError(Exception):
    """Carries a downstream error through a layer (same shape as Hermes's private wrapper)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


class MiddlewareRunner:
    def __init__(self, tracer: trace.Tracer | None = None, meter=None) -> None:
        self._callbacks: dict[str, list[tuple[Callable[..., Any], str]]] = {k: [] for k in contract.KINDS}
        self._layers = LayerTracer(tracer, meter) if tracer is not None else None
        self._reported: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    # -- registration ----------------------------------------------------------

    def register(self, kind: str, callback: Callable[..., Any], *, plugin: str = "unknown") -> None:
        if kind not in self._callbacks:
            raise ValueError(f"unknown middleware kind {kind!r}; expected one of {', '.join(contract.KINDS)}")
        if not callable(callback):
            raise TypeError(f"middleware callback for {kind!r} must be callable, got {type(callback).__name__}")
        self._callbacks[kind].append((callback, plugin))

    def reset(self) -> None:
        """Reload: forget callbacks and what was reported."""
        for callbacks in self._callbacks.values():
            callbacks.clear()
        with self._lock:
            self._reported.clear()

    # -- request middleware ------------------------------------------------------

    def apply_request(self, kind: str, payload: dict, **context: Any) -> RequestResult:
        if kind not in contract.REQUEST_KINDS:
            raise ValueError(f"{kind!r} is not a request middleware kind")
        key = contract.PAYLOAD_KEY[kind]
        original = copy.deepcopy(payload)
        current = copy.deepcopy(original)
        trace_entries: list[dict[str, str]] = []
        active = RequestPass(kind)
        token = current_pass.set(active)
        try:
            for callback, plugin in self._callbacks[kind]:
                traced = request_proxy(kind, callback, plugin, lambda: self._layers)
                call_kwargs = self._payload(context, **{key: current, f"original_{key}": original})
                try:
                    result = traced(**call_kwargs)
                except Exception as exc:  # noqa: BLE001 - fail-open by contract
                    self._report(kind, callback, exc, call_kwargs)
                    continue
                replacement = contract.replacement(kind, result)
                if replacement is not None:
                    current = copy.deepcopy(replacement)
                    trace_entries.append(contract.trace_entry(result))
        finally:
            current_pass.reset(token)
        return RequestResult(current, original, bool(trace_entries), trace_entries, active.events)

    # -- execution middleware --------------------------------------------------

    def run_execution(self, kind: str, payload: Any, next_call: Callable[[Any], Any], **context: Any) -> Any:
        if kind not in contract.EXECUTION_KINDS:
            raise ValueError(f"{kind!r} is not an execution middleware kind")
        entries = list(self._callbacks[kind])
        if not entries:
            return next_call(payload)
        key = contract.PAYLOAD_KEY[kind]
        context.setdefault(f"original_{key}", payload)
        callbacks = [cb for cb, _ in entries]
        terminal = next_call
        if self._layers is not None:
            plugins = {id(cb): plugin for cb, plugin in entries}
            callbacks, terminal = self._layers.chain(
                kind, callbacks, next_call, context, plugin_of=lambda cb: plugins.get(id(cb), "unknown")
            )
        originals = [cb for cb, _ in entries]

        def call_at(index: int, current: Any) -> Any:
            if index >= len(callbacks):
                return terminal(current)
            state = {"called": False, "succeeded": False, "result": None}

            def next_call_once(next_payload: Any = None) -> Any:
                if state["called"]:
                    raise RuntimeError(
                        f"Middleware {kind!r} callback {contract.callback_name(originals[index])} called "
                        "next_call() more than once; downstream execution is single-use"
                    )
                state["called"] = True
                try:
                    state["result"] = call_at(index + 1, current if next_payload is None else next_payload)
                except Exception as exc:
                    raise _DownstreamExecutionError(exc) from exc
                state["succeeded"] = True
                return state["result"]

            call_kwargs = self._payload(context, **{key: current, "next_call": next_call_once})
            try:
                return callbacks[index](**call_kwargs)
            except _DownstreamExecutionError as exc:
                raise exc.original from None
            except Exception as exc:  # noqa: BLE001 - the seed's fail-open rules
                self._report(kind, originals[index], exc, call_kwargs)
                if state["succeeded"]:
                    return state["result"]
                if state["called"]:
                    raise  # a downstream failure the layer transformed
                return call_at(index + 1, current)

        return call_at(0, payload)

    # -- helpers ------------------------------------------------------------------

    @staticmethod
    def _payload(context: dict[str, Any], **values: Any) -> dict[str, Any]:
        kwargs = dict(context)
        kwargs.setdefault("telemetry_schema_version", contract.OBSERVER_SCHEMA_VERSION)
        kwargs.setdefault("middleware_schema_version", contract.MIDDLEWARE_SCHEMA_VERSION)
        kwargs.update(values)
        return kwargs

    def _report(self, kind: str, callback: Any, exc: BaseException, passed: dict[str, Any]) -> None:
        name = contract.callback_name(callback)
        signature = (kind, name, type(exc).__name__, str(exc)[:500])
        with self._lock:
            first = signature not in self._reported
            self._reported.add(signature)
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "Middleware %r callback %s raised %s: %s (middleware passes: %s)%s",
            kind,
            name,
            type(exc).__name__,
            exc,
            ", ".join(sorted(passed)),
            "; identical repeats are logged at DEBUG" if first else "",
        )
