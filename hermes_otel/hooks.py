"""Observer-hook callbacks: Hermes payloads -> tracker calls.

Each callback reads the live tracker at call time (so a reload swaps it
without re-registering), never raises, and returns None (observers must not
inject context or change results).
"""

from __future__ import annotations

from typing import Any, Callable

from . import runtime
from .safety import safely


def _on_turn_start(**payload: Any) -> None:
    tracker = runtime.current_tracker()
    if tracker is not None:
        safely(tracker.turn, payload.get("turn_id"), payload.get("session_id"), payload)


def _on_turn_end(**payload: Any) -> None:
    tracker = runtime.current_tracker()
    if tracker is not None:
        safely(tracker.end_turn, payload.get("turn_id"), payload)


def _on_post_tool_call(**payload: Any) -> None:
    tracker = runtime.current_tracker()
    if tracker is not None:
        safely(tracker.tool_outcome, payload)


def _on_session_finalize(**payload: Any) -> None:
    # The real end of a session (CLI exit, gateway expiry): a bounded flush so
    # nothing waits in a queue if the process is about to go.
    safely(runtime.flush)


HOOKS: dict[str, Callable[..., None]] = {
    "pre_llm_call": _on_turn_start,
    "on_session_end": _on_turn_end,
    "post_tool_call": _on_post_tool_call,
    "on_session_finalize": _on_session_finalize,
    "on_session_reset": _on_session_finalize,
}
