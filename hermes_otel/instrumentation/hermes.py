"""Instrumentation of Hermes's execution-middleware runners (wrapt).

Hermes's call sites import `run_llm_execution_middleware` and
`run_tool_execution_middleware` from `hermes_cli.middleware` at call time, so
wrapping those module attributes puts a `chat` / `execute_tool` span around
the WHOLE chain (every layer and the real call) without registering a
middleware of our own — our wrapper is not a layer and changes nothing.

Where Hermes lacks these functions (other versions), :func:`fallback_middleware`
gives the same call spans through the public contract instead.
"""

from __future__ import annotations

import contextvars
import importlib
from typing import Any, Callable

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from ..safety import safely
from ..tracker import Tracker

MODULE = "hermes_cli.middleware"
LLM_RUNNER = "run_llm_execution_middleware"
TOOL_RUNNER = "run_tool_execution_middleware"
_MARK = "_self_hermes_otel"  # wrapt keeps `_self_*` attributes on the proxy itself

# The tool call whose span is open in this context. Hermes runs
# `tool_execution` twice, nested, for each call of a concurrent batch (batch
# path, then registry path); the inner pass must not open a second span.
_ACTIVE_TOOL: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "hermes_otel_active_tool", default=None
)

TrackerSource = Callable[[], "Tracker | None"]


def _tool_key(tool_name: Any, context: dict) -> tuple[str, str]:
    call_id = context.get("tool_call_id")
    return (call_id if isinstance(call_id, str) else "", tool_name if isinstance(tool_name, str) else "")


class HermesInstrumentor:
    """Idempotent `instrument()` / `uninstrument()` of Hermes's middleware runners."""

    def __init__(self, tracker: TrackerSource) -> None:
        self._tracker = tracker

    @staticmethod
    def available() -> bool:
        try:
            module = importlib.import_module(MODULE)
        except Exception:  # noqa: BLE001 - any import failure means "not this Hermes"
            return False
        return callable(getattr(module, LLM_RUNNER, None)) and callable(getattr(module, TOOL_RUNNER, None))

    @staticmethod
    def is_instrumented() -> bool:
        module = importlib.import_module(MODULE)
        return bool(getattr(getattr(module, LLM_RUNNER), _MARK, False))

    def instrument(self) -> bool:
        """Wrap the runners once per process; returns False when Hermes lacks them."""
        if not self.available():
            return False
        if self.is_instrumented():
            return True
        for name, wrapper in ((LLM_RUNNER, self._wrap_llm), (TOOL_RUNNER, self._wrap_tool)):
            wrapt.wrap_function_wrapper(MODULE, name, wrapper)
            setattr(getattr(importlib.import_module(MODULE), name), _MARK, True)
        return True

    @staticmethod
    def uninstrument() -> None:
        if not HermesInstrumentor.available():
            return
        module = importlib.import_module(MODULE)
        for name in (LLM_RUNNER, TOOL_RUNNER):
            current = getattr(module, name)
            if getattr(current, _MARK, False):
                setattr(module, name, current.__wrapped__)

    # -- wrappers (run on the agent's and the tool workers' threads) ---------

    def _wrap_llm(self, wrapped, instance, args, kwargs):
        tracker = self._tracker()
        request = args[0] if args else kwargs.get("request")
        call = safely(tracker.start_chat, request, kwargs) if tracker is not None else None
        if call is None:
            return wrapped(*args, **kwargs)
        token = otel_context.attach(trace.set_span_in_context(call.span))
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            safely(tracker.finish_chat, call, None, exc)
            raise
        finally:
            otel_context.detach(token)
        safely(tracker.finish_chat, call, response)
        return response

    def _wrap_tool(self, wrapped, instance, args, kwargs):
        tracker = self._tracker()
        tool_name = args[0] if args else kwargs.get("tool_name")
        key = _tool_key(tool_name, kwargs)
        if tracker is None or _ACTIVE_TOOL.get() == key:
            return wrapped(*args, **kwargs)
        call = safely(tracker.start_tool, tool_name, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        marker = _ACTIVE_TOOL.set(key)
        token = otel_context.attach(trace.set_span_in_context(call.span))
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            safely(tracker.finish_tool, call, kwargs, exc)
            raise
        finally:
            otel_context.detach(token)
            _ACTIVE_TOOL.reset(marker)
        safely(tracker.finish_tool, call, kwargs)
        return result


def fallback_middleware(tracker: TrackerSource) -> dict[str, Callable[..., Any]]:
    """Execution middleware that opens the call spans through the public contract.

    Used only when the runners cannot be wrapped. Registered first, it is the
    outermost layer, so its span still covers the rest of the chain.
    """
    instrumentor = HermesInstrumentor(tracker)

    def llm_execution(**kwargs: Any) -> Any:
        next_call = kwargs.pop("next_call")
        request = kwargs.pop("request", None)
        return instrumentor._wrap_llm(lambda *a, **k: next_call(request), None, (request,), kwargs)

    def tool_execution(**kwargs: Any) -> Any:
        next_call = kwargs.pop("next_call")
        args = kwargs.pop("args", None)
        tool_name = kwargs.pop("tool_name", None)
        return instrumentor._wrap_tool(lambda *a, **k: next_call(args), None, (tool_name,), kwargs)

    return {"llm_execution": llm_execution, "tool_execution": tool_execution}
