"""Hermes's auxiliary model calls: one `chat {model}` span each, priced and rolled up like the main loop's.

Hermes makes model calls outside its main loop (session titles, context compression, smart approvals,
vision, web extraction, session search, MCP sampling, mixture-of-agents slots) through
`agent.auxiliary_client.call_llm` / `async_call_llm` (0.16-0.19). They bypass its middleware and observer
hooks, so they are wrapped here. Most callers bind the function at import (`from agent.auxiliary_client
import call_llm`), so the modules already loaded that hold the original get the wrapper too.

Where a call belongs: under the span current where it is made (a tool call's, or a caller's), else under
the open turn of the session Hermes is accounting for (0.19 publishes it: `agent.aux_accounting`; before
0.19, the one open turn when exactly one is open), else under that session's last turn (a title is generated
after the turn ended), else a trace of its own.
The mixture-of-agents aggregator's call is the main loop's provider call (its response is what the main
`chat` span records), so it is not traced twice; its advisors' calls (`moa_reference`) are traced here.
Streamed calls (`stream=True`) return a raw iterator and pass untraced.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace

from ... import hermes_compat
from ... import semconv as sc
from ..._internal.safety import report, safely
from ...tracking import Tracker, attempt
from ...tracking.calls import Call

FUNCTIONS = tuple(target.name for target in hermes_compat.AUXILIARY_CALLS)
ROUTE = hermes_compat.AUXILIARY_ROUTE.name
# The packages whose modules bind call_llm at import (Hermes's own code only).
_CALLERS = hermes_compat.TOP_LEVEL

# The mixture-of-agents aggregator's call is the main loop's provider call (its `chat` span already has it).
_MAIN_LOOP_TASKS = frozenset({"moa_aggregator"})

TrackerSource = Callable[[], "Tracker | None"]
_ACTIVE: contextvars.ContextVar[Call | None] = contextvars.ContextVar("hermes_otel_auxiliary_call", default=None)


def instrument(tracker_source: TrackerSource) -> bool:
    """Wrap the auxiliary client's entry points (once per process); False when this Hermes has none."""
    module = _module()
    if module is None:
        return False
    route = getattr(module, ROUTE, None)
    if callable(route) and not getattr(route, "_self_hermes_otel", False):
        setattr(module, ROUTE, _ours(wrapt.FunctionWrapper(route, _routed)))
    return _wrap_entry_points(module, tracker_source)


def _ours(wrapper: Any) -> Any:
    """Marked as ours (on the wrapper itself): another plugin's wrapt wrapper is wrapped in turn, not mistaken."""
    wrapper._self_hermes_otel = True
    return wrapper


def _module() -> Any:
    held = hermes_compat.AUXILIARY_ROUTE.holder() or hermes_compat.AUXILIARY_CALLS[0].holder()
    return held[0] if held is not None else None


def _wrap_entry_points(module: Any, tracker_source: TrackerSource) -> bool:
    done = False
    for name, wrapper in zip(FUNCTIONS, (_sync, _async), strict=True):
        original = getattr(module, name, None)
        if not callable(original):
            continue
        if getattr(original, "_self_hermes_otel", False):  # a re-register: the wrapper reads the live tracker
            done = True
            continue
        traced = _ours(wrapt.FunctionWrapper(original, functools.partial(wrapper, tracker_source)))
        setattr(module, name, traced)
        for loaded, held in list(sys.modules.items()):
            if loaded.split(".")[0] in _CALLERS and getattr(held, name, None) is original:
                setattr(held, name, traced)
        done = True
    return done


def _sync(tracker_source: TrackerSource, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    tracker, call = _begin(tracker_source, args, kwargs)
    if tracker is None or call is None:
        return wrapped(*args, **kwargs)
    with _current(tracker, call):
        response = wrapped(*args, **kwargs)
    safely(_finish, tracker, call, response, None)
    return response


async def _async(tracker_source: TrackerSource, wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    tracker, call = _begin(tracker_source, args, kwargs)
    if tracker is None or call is None:
        return await wrapped(*args, **kwargs)
    with _current(tracker, call):
        response = await wrapped(*args, **kwargs)
    safely(_finish, tracker, call, response, None)
    return response


def _begin(tracker_source: TrackerSource, args: tuple, kwargs: dict) -> tuple[Tracker | None, Call | None]:
    tracker = tracker_source()
    return tracker, (_start(tracker, args, kwargs) if tracker is not None else None)


@contextlib.contextmanager
def _current(tracker: Tracker, call: Call) -> Iterator[None]:
    """The call's span current (HTTP client spans nest under it) and its route learnt; an exception is recorded
    on it and re-raised untouched."""
    token, active = otel_context.attach(attempt.context_of(call.span)), _ACTIVE.set(call)
    try:
        yield
    except BaseException as exc:
        safely(_finish, tracker, call, None, exc)
        raise
    finally:
        _ACTIVE.reset(active)
        otel_context.detach(token)


def _start(tracker: Tracker, args: tuple, kwargs: dict) -> Call | None:
    task = args[0] if args else kwargs.get("task")
    if kwargs.get("stream") or task in _MAIN_LOOP_TASKS:
        return None
    try:
        parent, session_id, turn_id = _placement(tracker)
        request = {k: kwargs[k] for k in ("model", "temperature", "max_tokens", "messages")
                   if kwargs.get(k) is not None}
        context = {k: kwargs[k] for k in ("provider", "base_url") if isinstance(kwargs.get(k), str) and kwargs[k]}
        context.update(purpose=task if isinstance(task, str) and task else None, session_id=session_id,
                       turn_id=turn_id)
        return tracker.chats.start_auxiliary(request, context, parent)
    except Exception as exc:  # noqa: BLE001 - our fault: the call runs untraced
        report(_start, exc)
        return None


def _placement(tracker: Tracker) -> tuple[otel_context.Context | None, str, str]:
    """(parent context, session id, turn id) of a call made now, on this thread."""
    turns = tracker.turns
    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        for turn_id, turn in turns.open.items():
            if turn.span.get_span_context().trace_id == current.trace_id:
                return None, turn.session_id, turn_id
        return None, "", ""  # a caller's span: the call joins it
    session = _accounted_session()
    if session is None:  # before 0.19 Hermes does not say which session; the one open turn, if only one
        only = turns.open.items()
        if len(only) == 1:
            turn_id, turn = only[0]
            return turn.context, turn.session_id, turn_id
        session = ""
    parent, turn_id = turns.context_of(session)
    return parent, session, turn_id


@functools.lru_cache(maxsize=1)
def _accounting() -> Any:
    """0.19's `agent.aux_accounting` (None before 0.19)."""
    return hermes_compat.aux_accounting()


def _accounted_session() -> str | None:
    """The session Hermes accounts auxiliary usage to here ("" for none); None on a Hermes that does not say."""
    accounting = _accounting()
    if accounting is None:
        return None
    try:
        published = accounting.get_accounting_context()
    except Exception:  # noqa: BLE001
        return ""
    session = published[1] if isinstance(published, tuple) and len(published) == 2 else None
    return session if isinstance(session, str) else ""


def _routed(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Hermes builds an attempt's request from the route it resolved: the open auxiliary call's span learns it."""
    request = wrapped(*args, **kwargs)
    call = _ACTIVE.get()
    if call is not None:
        safely(_learn_route, call, args, kwargs, request)
    return request


def _learn_route(call: Call, args: tuple, kwargs: dict, request: Any) -> None:
    if call.priced is None or not isinstance(request, dict):
        return
    provider = args[0] if args else kwargs.get("provider")
    base_url = kwargs.get("base_url")
    context = cast(dict, call.priced[1])  # start_auxiliary made it: our own dict
    context.update({k: v for k, v in (("provider", provider), ("base_url", base_url)) if isinstance(v, str) and v})
    attrs = sc.chat_request_attributes(request, context)
    for key in (sc.REQUEST_MODEL, sc.PROVIDER, sc.HERMES_PROVIDER, sc.SERVER_ADDRESS, sc.SERVER_PORT,
                sc.REQUEST_TEMPERATURE, sc.REQUEST_MAX_TOKENS):
        if key in attrs:
            call.span.set_attribute(key, attrs[key])
            if key in call.metric_attrs or key in (sc.REQUEST_MODEL, sc.PROVIDER, sc.SERVER_ADDRESS):
                call.metric_attrs[key] = attrs[key]
    if attrs.get(sc.REQUEST_MODEL):
        call.priced[0]["model"] = attrs[sc.REQUEST_MODEL]
        call.span.update_name(f"{sc.OP_CHAT} {attrs[sc.REQUEST_MODEL]}")


def _finish(tracker: Tracker, call: Call, response: Any, error: BaseException | None) -> None:
    model = getattr(response, "model", None) if response is not None else None
    if isinstance(model, str) and model and call.priced is not None:
        # Hermes prices an auxiliary call at the model its response names (agent.aux_accounting).
        cast(dict, call.priced[1])["model"] = model
        if not call.priced[0].get("model"):
            call.span.update_name(f"chat {model}")
    tracker.chats.finish(call, response, error)
