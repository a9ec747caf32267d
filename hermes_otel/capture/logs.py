"""Hermes's own log lines as OTel log records, correlated with the span they were logged under.

Hermes logs provider failures, tool errors and plugin problems through the standard `logging` module (to its
`agent.log` and `errors.log`). A handler on the root logger takes the records of Hermes's own loggers (its
top-level packages: `agent`, `tools`, `hermes_cli`, `gateway`, ...) at `logs.hermes_level` and above, and
emits each as an OTel log record with:

* the trace and span ids of the span active where the line was logged, else of the open turn of the session
  Hermes tags the line with (its `session_tag`), else none;
* its text and exception redacted by Hermes's own redactor and ours (Hermes redacts only what it writes to its own
  files), on a copy: the record Hermes's own handlers format is never changed;
* with capture off (the default), no content: a line's arguments that are not numbers or short names (a command,
  a URL, an error's text) are shown as `…`, an exception's message is left out, and a line with no arguments
  (formatted before it was logged, so what is content cannot be told) stays in Hermes's own log only.

Our own logger (`hermes_otel`) and the OpenTelemetry libraries are not Hermes's, so our lines never come back
through here, and a record the SDK logs while emitting one cannot loop (a per-thread guard besides). Our
`hermes.observer.*` records are emitted straight to the SDK, never through `logging`, so nothing is doubled.
The record is made on the logging thread (cheap: text, ids) and handed to the records thread for the SDK.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber

from .. import hermes_compat
from .._internal.safety import report
from ..redaction.content import redact_text
from ..redaction.masking import mask_text, printable

HERMES_LOGGERS = hermes_compat.TOP_LEVEL  # the roots of Hermes's loggers
LOGGER_ATTR = "hermes.log.logger"  # the Hermes logger that wrote the line
SCOPE = "hermes_otel.hermes_logs"
_MAX_TEXT = 8192  # a log line's body, after masking
_SEVERITY = ((logging.CRITICAL, SeverityNumber.FATAL), (logging.ERROR, SeverityNumber.ERROR),
             (logging.WARNING, SeverityNumber.WARN), (logging.INFO, SeverityNumber.INFO),
             (logging.DEBUG, SeverityNumber.DEBUG))

# (OTel logger, emitter, tracker, content captured) of the live telemetry, or None when it is off.
Sink = Callable[[], "tuple[Any, Any, Any, bool] | None"]
ELIDED = "…"  # an argument of a Hermes log line that may be content, with capture off
# An argument shown with capture off: a name (an error type, a model, a provider, a thread), never text with spaces,
# slashes or quotes in it.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,47}")


def severity(levelno: int) -> SeverityNumber:
    for level, number in _SEVERITY:
        if levelno >= level:
            return number
    return SeverityNumber.TRACE


def is_hermes(name: str) -> bool:
    return name.split(".", 1)[0] in HERMES_LOGGERS


class HermesLogBridge(logging.Handler):
    """On the root logger, once per process; `level` follows the live configuration."""

    def __init__(self, sink: Sink) -> None:
        super().__init__(logging.WARNING)
        self._sink = sink
        self._busy = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if not is_hermes(record.name) or getattr(self._busy, "on", False):
            return
        self._busy.on = True
        try:
            sink = self._sink()
            if sink is not None:
                self._bridge(record, *sink)
        except Exception as exc:  # noqa: BLE001 - a log line must never fail because of us
            report(self.emit, exc)
        finally:
            self._busy.on = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        pass  # never print logging's traceback into Hermes's stderr

    def _bridge(self, record: logging.LogRecord, otel_logger: Any, emitter: Any, tracker: Any,
                content: bool) -> None:
        body = _masked(record.getMessage()) if content else _without_content(record)
        if body is None:
            return  # kept in Hermes's own log
        span = _span_of(record, tracker)
        attributes: dict[str, Any] = {LOGGER_ATTR: record.name, "code.function.name": record.funcName,
                                      "code.file.path": record.pathname, "code.line.number": record.lineno}
        if record.exc_info and record.exc_info[0] is not None:
            kind, value, tb = record.exc_info
            attributes["exception.type"] = kind.__name__
            if content:
                attributes["exception.message"] = _masked(str(value))
                attributes["exception.stacktrace"] = _masked("".join(traceback.format_exception(kind, value, tb)))
            else:  # where it was raised (code), not what it said
                attributes["exception.stacktrace"] = _masked("Traceback (most recent call last):\n" + "".join(
                    traceback.format_tb(tb)) + kind.__name__)
        timestamp = int(record.created * 1e9)
        emitter.submit(_emit, otel_logger, timestamp, span, record.levelno, record.levelname, body, attributes)


def _masked(text: str) -> str:
    """Hermes's redactor and ours (value shapes, remembered secrets, user:password@), printable, capped."""
    return printable(mask_text(redact_text(text[:_MAX_TEXT * 2])), lines=True)[:_MAX_TEXT]


class _Elided(dict):  # a `%(name)s` line's arguments: what is not shown reads as ELIDED
    def __missing__(self, key: Any) -> str:
        return ELIDED


def _shown(value: Any) -> bool:
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and _NAME.fullmatch(value) is not None and redact_text(value) == value


def _without_content(record: logging.LogRecord) -> str | None:
    """The line with each argument that may be content shown as ELIDED; None for a line without arguments."""
    args = record.args
    if not args:
        return None
    try:
        if isinstance(args, Mapping):
            text = str(record.msg) % _Elided({k: v for k, v in args.items() if _shown(v)})
        else:
            text = str(record.msg) % tuple(a if _shown(a) else ELIDED for a in args)
    except (TypeError, ValueError, KeyError):  # a `%d` whose argument was elided: the template alone
        text = str(record.msg)
    return _masked(text)


def _span_of(record: logging.LogRecord, tracker: Any) -> Any:
    """The span active where the line was logged; else the open turn of the session Hermes tagged it with."""
    current = trace.get_current_span()
    if current.get_span_context().is_valid:
        return current
    tag = getattr(record, "session_tag", "")
    session = tag.strip()[1:-1] if isinstance(tag, str) and tag.strip().startswith("[") else ""
    if session and tracker is not None:
        turn = tracker.turns.of_session(session)
        if turn is not None:
            return turn.span
    return None


def _emit(otel_logger: Any, timestamp: int, span: Any, levelno: int, levelname: str, body: str,
          attributes: dict[str, Any]) -> None:
    otel_logger.emit(
        timestamp=timestamp,
        observed_timestamp=time.time_ns(),
        context=trace.set_span_in_context(span) if span is not None else None,
        severity_number=severity(levelno),
        severity_text=levelname,
        body=body,
        attributes=attributes,
    )


_bridge: HermesLogBridge | None = None
_lock = threading.Lock()


def install(sink: Sink, level: str) -> None:
    """Put the bridge on the root logger (one bridge per process) at `level` (`off`: it stays, passing nothing)."""
    global _bridge
    with _lock:
        if _bridge is None:
            _bridge = HermesLogBridge(sink)
        _bridge._sink = sink
        root = logging.getLogger()
        if _bridge not in root.handlers:  # first time, or someone reset the root logger's handlers since
            root.addHandler(_bridge)
        _bridge.setLevel(logging.CRITICAL + 1 if level == "off" else logging.getLevelName(level.upper()))
