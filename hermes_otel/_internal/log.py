"""The package logger and the report-once rule.

A fault of ours (or a hostile payload) must be visible but must not flood
Hermes's log: the first occurrence of a key goes out at WARNING, repeats at
DEBUG. `reset()` (called on plugin reload) makes them visible again.

Every record of this logger, and (once a pipeline of ours is built) of the library
loggers that report our exports, passes :mod:`hermes_otel.redaction.masking` first:
no credential and no control character reaches Hermes's logs.
"""

from __future__ import annotations

import logging
import threading

from ..redaction import masking

logger = logging.getLogger("hermes_otel")
# Our own loggers now; the libraries' loggers that report our exports when our pipeline is built
# (telemetry.build, and the CLI), not at import.
masking.install(masking.OUR_LOGGERS)

_seen: set[str] = set()
_seen_for_process: set[str] = set()  # facts about the environment (a dead collector): not reset on reload
_lock = threading.Lock()
_MAX_KEYS = 4096  # bounded: a stream of unique keys cannot grow memory


def once(
    key: str,
    msg: str,
    *args: object,
    level: int = logging.WARNING,
    exc_info: bool = False,
    per_process: bool = False,
) -> None:
    seen = _seen_for_process if per_process else _seen
    with _lock:
        first = key not in seen
        if first and len(seen) < _MAX_KEYS:
            seen.add(key)
    logger.log(level if first else logging.DEBUG, msg, *args, exc_info=exc_info and first)


def reset() -> None:
    with _lock:
        _seen.clear()
