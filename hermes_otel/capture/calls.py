"""Model and tool calls as spans, through Hermes's public middleware contract.

On Hermes 0.20+ this is how the plugin traces: an `llm_execution` and a `tool_execution` middleware of ours,
registered with `ctx.register_middleware` from `register()` and put first (`hermes_compat.run_first`: the
outermost layer, whenever the other plugins load), opens the attempt's `chat` span or the call's `execute_tool`
span around the rest of the chain. The
other plugins' layers and the real call become spans of their own inside it: see :func:`_trace_layers`.
Nothing of Hermes is rebound. The 0.17-0.19 patches (capture/legacy.py) reuse :func:`traced_llm_call` and
:func:`traced_tool_call` around the runners they wrap.

Values and exceptions pass through untouched; a fault of ours leaves the call untraced, never failed.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context

from .. import hermes_compat
from .._internal import log as _log
from .._internal.safety import report, safely
from .._internal.suppress import is_instrumentation_enabled
from ..middleware import contract
from ..middleware.layers import attribution
from ..tracking import Tracker
from ..tracking import attempt as _attempt

TrackerSource = Callable[[], "Tracker | None"]

# The tool call whose span is open in this context. Hermes 0.17-0.19 run `tool_execution` twice, nested, for
# each call of a concurrent batch (batch path, then registry path); the inner pass must not open a second span.
_ACTIVE_TOOL: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "hermes_otel_active_tool", default=None
)


def _tool_key(tool_name: Any, context: Mapping[str, Any]) -> tuple[str, str]:
    call_id = context.get("tool_call_id")
    return (call_id if isinstance(call_id, str) else "", tool_name if isinstance(tool_name, str) else "")


def traced_llm_call(tracker_source: TrackerSource, wrapped: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """A provider attempt (the whole `llm_execution` chain) inside its `chat` span."""
    tracker = tracker_source()
    if tracker is None or not is_instrumentation_enabled():
        return wrapped(*args, **kwargs)
    try:
        call = tracker.start_chat(args[0] if args else kwargs.get("request"), kwargs)
    except Exception as exc:  # noqa: BLE001 - our fault: the call runs untraced
        report(tracker.start_chat, exc)
        return wrapped(*args, **kwargs)
    response = _call_in_span(call.span, wrapped, args, kwargs, tracker.finish_chat, call, None, attempt=call)
    try:
        tracker.finish_chat(call, response)
    except Exception as exc:  # noqa: BLE001
        report(tracker.finish_chat, exc)
    return response


def traced_tool_call(tracker_source: TrackerSource, wrapped: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """A tool call (the whole `tool_execution` chain) inside its `execute_tool` span, once per call."""
    tracker = tracker_source()
    tool_name = args[0] if args else kwargs.get("tool_name")
    key = _tool_key(tool_name, kwargs)
    if tracker is None or _ACTIVE_TOOL.get() == key or not is_instrumentation_enabled():
        return wrapped(*args, **kwargs)
    try:
        call = tracker.start_tool(tool_name, kwargs, args[1] if len(args) > 1 else kwargs.get("args"))
    except Exception as exc:  # noqa: BLE001 - our fault: the call runs untraced
        report(tracker.start_tool, exc)
        return wrapped(*args, **kwargs)
    marker = _ACTIVE_TOOL.set(key)
    try:
        result = _call_in_span(call.span, wrapped, args, kwargs, tracker.finish_tool, call, kwargs)
    finally:
        _ACTIVE_TOOL.reset(marker)
    try:
        tracker.finish_tool(call, kwargs)
    except Exception as exc:  # noqa: BLE001
        report(tracker.finish_tool, exc)
    return result


def _call_in_span(span: Any, wrapped: Callable[..., Any], args: tuple, kwargs: dict,
                  on_error: Callable[..., Any], *on_error_args: Any, attempt: Any = None) -> Any:
    """The real call with `span` current (and, for a provider `attempt`, marked as the attempt, its requests
    carrying the turn caller's baggage); an exception is recorded by `on_error(*on_error_args, exc)` and re-raised
    untouched."""
    if attempt is None:
        context = trace.set_span_in_context(span)
    else:
        context = _attempt.context_of(span)
        if attempt.turn is not None and attempt.turn.baggage:  # rare: the cost is only paid when there is some
            for name, value in attempt.turn.baggage.items():
                context = baggage.set_baggage(name, value, context)
    token = otel_context.attach(context)
    try:
        return wrapped(*args, **kwargs)
    except BaseException as exc:
        safely(on_error, *on_error_args, exc)
        raise
    finally:
        otel_context.detach(token)


def execution_middleware(tracker: TrackerSource, manager: Any = None) -> dict[str, Callable[..., Any]]:
    """Our `llm_execution` and `tool_execution` middleware: the call's span around the rest of the chain.

    Put first in Hermes's registry, each is the outermost layer. With `manager` (Hermes's plugin manager, for the
    names of the plugins whose layers run inside ours), each also traces the layers after it and the real call."""

    def llm_execution(**kwargs: Any) -> Any:
        next_call = kwargs.pop("next_call")
        request = kwargs.pop("request", None)

        def rest(*_args: Any, **_kwargs: Any) -> Any:
            _trace_layers(tracker, contract.LLM_EXECUTION, llm_execution, next_call, kwargs, manager)
            return next_call(request)

        return traced_llm_call(tracker, rest, (request,), kwargs)

    def tool_execution(**kwargs: Any) -> Any:
        next_call = kwargs.pop("next_call")
        args = kwargs.pop("args", None)
        tool_name = kwargs.pop("tool_name", None)

        def rest(*_args: Any, **_kwargs: Any) -> Any:
            _trace_layers(tracker, contract.TOOL_EXECUTION, tool_execution, next_call,
                          {**kwargs, "tool_name": tool_name}, manager)
            return next_call(args)

        return traced_tool_call(tracker, rest, (tool_name, args), kwargs)

    llm_execution.__name__ = llm_execution.__qualname__ = "hermes_otel_llm_execution"
    tool_execution.__name__ = tool_execution.__qualname__ = "hermes_otel_tool_execution"
    return {contract.LLM_EXECUTION: llm_execution, contract.TOOL_EXECUTION: tool_execution}


def _trace_layers(tracker_source: TrackerSource, kind: str, ours: Callable[..., Any], next_call: Any,
                  context: Mapping[str, Any], manager: Any) -> None:
    """Traced stand-ins for the layers after ours and for the real call, in this run of the chain only.

    Hermes 0.20+ runs a chain over a copy of the registered callbacks made for that run; the stand-ins go into
    that copy (found through the `next_call` Hermes handed our layer), never into Hermes's registry: another
    run, another plugin's unload and Hermes's own failure handling are untouched. Each stand-in returns what its
    callback returned and raises what it raised."""
    tracker = tracker_source()
    if manager is None or tracker is None or not is_instrumentation_enabled():
        return
    chain = hermes_compat.running_chain(next_call)
    if chain is None:
        _log.once("layers:unknown-runner", "hermes-otel: this Hermes's middleware runner is not one we know: "
                  "%s spans cover the whole chain, without a span per layer", kind)
        return
    callbacks = chain.callbacks
    mine = next((i for i, cb in enumerate(callbacks) if cb is ours), None)
    if mine is None:
        return
    if mine:  # put ahead of ours after we registered (hermes_otel puts its layer first at registration)
        again = hermes_compat.run_first(manager, kind, ours)
        _log.once(f"layers:ahead:{kind}", "hermes-otel: %d %s layer(s) ran outside its span in this call and are "
                  "not traced in it (%s: put ahead of hermes-otel's own layer after it loaded); %s", mine, kind,
                  ", ".join(attribution.plugin_of(cb) for cb in callbacks[:mine]),
                  "its layer is first again from the next call" if again else
                  "this Hermes does not let it put its layer first again")
    others = callbacks[mine + 1:]
    if not others:  # ours alone: the call's span is the whole chain (as on 0.19, which runs no chain then)
        return
    for callback in others:  # who registered it, learned once (Hermes names the loaded plugins' modules)
        if not attribution.known(callback):
            attribution.learn_modules(manager)
            attribution.remember(callback, attribution.plugin_of(callback))
    chain.replace_from(mine + 1, *tracker.layers.chain(kind, others, chain.terminal, context))
