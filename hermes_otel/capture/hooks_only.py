"""Chat spans from observer hooks: for a Hermes without middleware (0.16.0), and for auxiliary model calls where
Hermes reports them (0.21+: `pre/post_auxiliary_call`, see :func:`auxiliary_callbacks`).

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


class _Open:
    """Calls opened by one hook and ended by another, by key (bounded: the oldest is ended when more are open)."""

    def __init__(self) -> None:
        self._calls: OrderedDict[Any, Call] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, tracker: Tracker, key: Any, call: Call) -> None:
        with self._lock:
            stale = self._calls.pop(key, None)
            self._calls[key] = call
            evicted = [self._calls.popitem(last=False)[1] for _ in range(len(self._calls) - _MAX_OPEN)]
        for old in ([stale] if stale is not None else []) + evicted:
            tracker.finish_chat(old)

    def take(self, key: Any) -> Call | None:
        with self._lock:
            return self._calls.pop(key, None)


def _named(callbacks: dict[str, Callable[..., None]], prefix: str) -> dict[str, Callable[..., None]]:
    for name, callback in callbacks.items():
        callback.__name__ = callback.__qualname__ = f"{prefix}{name}"
    return callbacks


def chat_callbacks(tracker: TrackerSource) -> dict[str, Callable[..., None]]:
    """`pre_api_request` / `post_api_request` / `api_request_error` callbacks that open and end chat spans."""
    attempts = _Open()

    def take(payload: Mapping[str, Any]) -> Call | None:
        key = payload.get("api_request_id")
        return attempts.take(key) if isinstance(key, str) else None

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
            attempts.put(live, key, live.start_chat(body if isinstance(body, Mapping) else None, payload))
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

    return _named({"pre_api_request": pre_api_request, "post_api_request": post_api_request,
                   "api_request_error": api_request_error}, "hermes_otel_chat_")


def auxiliary_callbacks(tracker: TrackerSource) -> dict[str, Callable[..., None]]:
    """`pre_auxiliary_call` / `post_auxiliary_call` callbacks (Hermes 0.21+): a `chat` span for each attempt of an
    auxiliary model call (titles, compression, vision...), in its turn's trace (the session's last turn when the
    call comes after it, as a title does), priced and rolled up like the main loop's. A streamed auxiliary call
    passes untraced: Hermes reports it when the stream is handed back, before it is read."""
    attempts = _Open()

    def key(payload: Mapping[str, Any]) -> tuple[Any, Any]:
        return payload.get("api_request_id"), payload.get("retry_count")

    def pre_auxiliary_call(**payload: Any) -> None:
        live = tracker()
        if live is None or payload.get("streaming") or not isinstance(payload.get("api_request_id"), str):
            return None
        try:
            attempts.put(live, key(payload), live.start_auxiliary(payload))
        except Exception as exc:  # noqa: BLE001 - never into Hermes
            report(pre_auxiliary_call, exc)
        return None

    def post_auxiliary_call(**payload: Any) -> None:
        live, call = tracker(), attempts.take(key(payload))
        if live is not None and call is not None:
            try:
                error = _reported_error({"error": {"type": payload.get("error_type"), "message": payload["error"]}}) \
                    if payload.get("error") else None
                live.finish_chat(call, None if error else _response(payload), error)
            except Exception as exc:  # noqa: BLE001
                report(post_auxiliary_call, exc)
        return None

    return _named({"pre_auxiliary_call": pre_auxiliary_call, "post_auxiliary_call": post_auxiliary_call},
                  "hermes_otel_")
