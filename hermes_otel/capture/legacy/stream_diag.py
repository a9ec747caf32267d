"""Hermes 0.17-0.19's stream diagnostics dict, handed out with a clock in it (tracking/streaming.py keeps the clocks).

Part of the 0.16-0.19 rebinding (capture/legacy/): `agent.stream_diag.stream_diag_init` is rebound, once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import hermes_compat
from ..._internal.safety import safely
from ...tracking.streaming import _clocked

TARGET = hermes_compat.STREAM_DIAG


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    def stream_diag_init(*args: Any, **kwargs: Any) -> Any:
        diag = original(*args, **kwargs)
        timed = safely(_clocked, diag)
        return diag if timed is None else timed

    stream_diag_init._hermes_otel_original = original  # type: ignore[attr-defined]
    return stream_diag_init


def install() -> bool:
    """Clock Hermes's streams (once); False where this Hermes has no such function."""
    held = TARGET.holder()
    if held is None:  # another Hermes: no stream timing
        return False
    module, name = held
    current = getattr(module, name)
    if not hasattr(current, "_hermes_otel_original"):
        setattr(module, name, _wrap(current))
    return True


def release() -> None:
    """Hermes's function as it was."""
    held = TARGET.holder(load=False)
    if held is None:
        return
    module, name = held
    original = getattr(getattr(module, name), "_hermes_otel_original", None)
    if original is not None:
        setattr(module, name, original)
