"""Fail-open helpers: our faults are reported once and never reach Hermes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from . import log as _log

T = TypeVar("T")


def safely(fn: Callable[..., T], *args: Any) -> T | None:
    """Call `fn`; on any exception log once (with traceback) and return None."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - by design: telemetry must not break the agent
        report(fn, exc)
        return None


def report(fn: Any, exc: BaseException) -> None:
    """Log an internal fault in `fn` once (hot paths catch inline and call this)."""
    name = getattr(fn, "__qualname__", repr(fn))
    _log.once(
        f"internal:{name}:{type(exc).__name__}",
        "hermes-otel: internal error in %s (%s: %s); telemetry for this call is incomplete",
        name,
        type(exc).__name__,
        exc,
        exc_info=True,
    )
