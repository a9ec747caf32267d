"""The seed's logging rule for middleware failures, applied to Hermes 0.19.0's warnings.

Hermes 0.19.0 warns on every middleware failure, every call, so one
mis-declared callback floods the log. The seed says: report a failure
signature once at WARNING, naming the fields middleware actually passes,
send identical repeats to DEBUG, and start over on plugin reload. This
filter does that to Hermes's own records (nothing is dropped; repeats are
downgraded). Hermes's log is Hermes's: off by default, `middleware_log_dedupe = true` opts in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from .. import hermes_compat

# Loggers Hermes reports middleware failures on (chain runner, request middleware), and how the message starts.
HERMES_LOGGERS = hermes_compat.MIDDLEWARE_LOGGERS
_PREFIX = hermes_compat.MIDDLEWARE_FAILURE_PREFIX

_passed: dict[str, tuple[str, ...]] = {}  # kind -> field names of the last failing call


def remember_fields(kind: str, fields: Iterable[str]) -> None:
    """Called by our layer wrappers when a callback raised: what it was given."""
    _passed[kind] = tuple(sorted(fields))


def fields_for(kind: str) -> tuple[str, ...]:
    return _passed.get(kind, ())


class MiddlewareWarningFilter(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.enabled = True
        self._seen: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        # Runs inside Hermes's own `except` blocks: it must never raise.
        try:
            return self._filter(record)
        except Exception:  # noqa: BLE001 - e.g. an exception whose __str__ fails
            return True

    def _filter(self, record: logging.LogRecord) -> bool:
        if not self.enabled or record.levelno != logging.WARNING:
            return True
        if not isinstance(record.msg, str) or not record.msg.startswith(_PREFIX):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) != 3:
            return True
        kind, callback, error = args
        signature = (str(kind), str(callback), type(error).__name__, str(error)[:500])
        with self._lock:
            first = signature not in self._seen
            if first and len(self._seen) < 4096:
                self._seen.add(signature)
        if not first:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return True
        fields = fields_for(str(kind))
        record.msg += " (middleware passes: %s; identical repeats are logged at DEBUG)"
        record.args = (*args, ", ".join(fields) if fields else "unknown")
        return True


warning_filter = MiddlewareWarningFilter()


def install(enabled: bool = True) -> None:
    """Idempotent; a reload resets what has been reported."""
    warning_filter.enabled = enabled
    warning_filter.reset()
    for name in HERMES_LOGGERS:
        logger = logging.getLogger(name)
        if warning_filter not in logger.filters:
            logger.addFilter(warning_filter)
