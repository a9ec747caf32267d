"""Observer-hook registration: one generic callback per hook Hermes knows.

Each callback reads the live bridge at call time (so a reload swaps it
without re-registering), never raises, and returns None: observers must not
inject context, block a tool or change a result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from .. import hermes_compat
from .._internal.safety import report, safely
from .bridge import HOOKS

_SESSION_END = frozenset({"on_session_finalize", "on_session_reset"})


def hook_names() -> list[str]:
    """The hooks we subscribe to (bridge.HOOKS, in that order) that this Hermes defines (its VALID_HOOKS)."""
    valid = hermes_compat.valid_hooks()
    if valid is None:  # no Hermes to ask (an application, the validator's probe): all of ours
        return list(HOOKS)
    return [name for name in HOOKS if name in valid]


def _callback(name: str, current_bridge: Callable[[], Any], flush: Callable[[], Any]) -> Callable[..., None]:
    def on_hook(**payload: Any) -> None:
        bridge = current_bridge()
        if bridge is not None:
            try:
                bridge.on_hook(name, payload)
            except Exception as exc:  # noqa: BLE001 - never into Hermes
                report(bridge.on_hook, exc)
        if name in _SESSION_END:
            # The real end of a session (CLI exit, gateway /new or expiry): start a
            # bounded flush in the background. The gateway fires this on its event
            # loop, so we never wait here; process exit has its own bounded flush.
            threading.Thread(target=safely, args=(flush,), name="hermes-otel-session-flush",
                             daemon=True).start()
        return None

    on_hook.__name__ = on_hook.__qualname__ = f"hermes_otel_{name}"
    return on_hook


def callbacks(current_bridge: Callable[[], Any], flush: Callable[[], Any],
              names: Iterable[str] | None = None) -> dict[str, Callable[..., None]]:
    """One callback per hook, each handing its payload to `current_bridge()` (the live bridge, looked up per call:
    a reload swaps it without re-registering) and, at a session's end, starting `flush` in the background."""
    return {name: _callback(name, current_bridge, flush) for name in (hook_names() if names is None else names)}
