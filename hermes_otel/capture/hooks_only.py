"""Chat spans from observer hooks, for a Hermes without middleware (0.16.0).

There the provider call cannot be wrapped, so each attempt's `chat` span runs from `pre_api_request`
(fired just before the call) to `post_api_request` (after it succeeded) or `api_request_error` (a failed
attempt). Turn and tool spans, and every observer record, come from the bridge's hooks as everywhere
(a tool span from `post_tool_call`, which carries its duration). These callbacks are registered before
the bridge's, so each hook's record finds the span already opened.

Subscribing to `pre_api_request` makes Hermes copy and sanitise each request for observers (docs:
performance); on a Hermes with middleware these callbacks are not registered.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from .._internal.safety import report
from ..tracking import Call, Tracker

TrackerSource = Callable[[], "Tracker | None"]
_MAX_OPEN = 1024  # open attempts kept; the oldest is ended when more are open (a lost post_api_request)


class HermesReportedError(Exception):
    """A failed provider attempt as Hermes reported it (`api_request_error`); named after its error type."""


_ERROR_CLASSES: dict[str, type[HermesReportedError]] = {}


def _reported_error(payload: Mapping[str, Any]) -> HermesReportedError:
    error = payload.get("error")
    name = error.get("type") if isinstance(error, Mapping) else None
    name = re.sub(r"\W", "_", name)[:64] if isinstance(name, str) and name else "ProviderError"
    cls = _ERROR_CLASSES.get(name)
    if cls is None:
        cls = _ERROR_CLASSES.setdefault(name, type(name, (HermesReportedError,), {}))
    message = error.get("message") if isinstance(error, Mapping) else None
    return cls(message if isinstance(message, str) else "")


def _response(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What `post_api_request` says of the response, in the shape `chat_response_attributes` reads."""
    response: dict[str, Any] = {"model": payload.get("response_model")}
    if isinstance(payload.get("finish_reason"), str):
        response["choices"] = [{"finish_reason": payload["finish_reason"]}]
    if isinstance(payload.get("usage"), Mapping):
        response["usage"] = payload["usage"]
    return response


def chat_callbacks(tracker: TrackerSource) -> dict[str, Callable[..., None]]:
    """`pre_api_request` / `post_api_request` / `api_request_error` callbacks that open and end chat spans."""
    open_calls: OrderedDict[str, Call] = OrderedDict()
    lock = threading.Lock()

    def take(payload: Mapping[str, Any]) -> Call | None:
        key = payload.get("api_request_id")
        with lock:
            return open_calls.pop(key, None) if isinstance(key, str) else None

    def pre_api_request(**payload: Any) -> None:
        live = tracker()
        if live is None:
            return None
        key = payload.get("api_request_id")
        if not (isinstance(key, str) and key):
            return None  # nothing would match its end
        try:
            request = payload.get("request")
            body = request.get("body") if isinstance(request, Mapping) else None
            call = live.start_chat(body if isinstance(body, Mapping) else None, payload)
            with lock:
                stale = open_calls.pop(key, None)
                open_calls[key] = call
                evicted = [open_calls.popitem(last=False)[1] for _ in range(len(open_calls) - _MAX_OPEN)]
            for old in ([stale] if stale is not None else []) + evicted:
                live.finish_chat(old)
        except Exception as exc:  # noqa: BLE001 - never into Hermes
            report(pre_api_request, exc)
        return None

    def post_api_request(**payload: Any) -> None:
        live, call = tracker(), take(payload)
        if live is not None and call is not None:
            try:
                live.finish_chat(call, _response(payload))
            except Exception as exc:  # noqa: BLE001
                report(post_api_request, exc)
        return None

    def api_request_error(**payload: Any) -> None:
        live, call = tracker(), take(payload)
        if live is not None and call is not None:
            try:
                live.finish_chat(call, error=_reported_error(payload))  # the bridge's record then ends it
            except Exception as exc:  # noqa: BLE001
                report(api_request_error, exc)
        return None

    callbacks = {"pre_api_request": pre_api_request, "post_api_request": post_api_request,
                 "api_request_error": api_request_error}
    for name, callback in callbacks.items():
        callback.__name__ = callback.__qualname__ = f"hermes_otel_chat_{name}"
    return callbacks
