"""Hermes 0.17-0.19's stream diagnostics dict, handed out with a clock in it (tracking/streaming.py keeps the clocks).

Part of the 0.16-0.19 rebinding (capture/legacy/): `agent.stream_diag.stream_diag_init` is rebound, once.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from ..._internal.safety import safely
from ...tracking.streaming import _clocked

MODULE = "agent.stream_diag"
FUNCTION = "stream_diag_init"


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    def stream_diag_init(*args: Any, **kwargs: Any) -> Any:
        diag = original(*args, **kwargs)
        timed = safely(_clocked, diag)
        return diag if timed is None else timed

    stream_diag_init._hermes_otel_original = original  # type: ignore[attr-defined]
    return stream_diag_init


def install() -> bool:
    """Clock Hermes's streams (once); False where this Hermes has no such function."""
    try:
        module = importlib.import_module(MODULE)
    except Exception:  # noqa: BLE001 - another Hermes: no stream timing
        return False
    current = getattr(module, FUNCTION, None)
    if not callable(current):
        return False
    if not hasattr(current, "_hermes_otel_original"):
        setattr(module, FUNCTION, _wrap(current))
    return True


def release() -> None:
    """Hermes's function as it was."""
    module = sys.modules.get(MODULE)
    current = getattr(module, FUNCTION, None)
    original = getattr(current, "_hermes_otel_original", None)
    if original is not None:
        setattr(module, FUNCTION, original)
