"""Text that is safe to show: in our log lines, in what libraries log on our behalf, in the CLI.

* Credentials never show. The configuration remembers every secret value it resolves (header
  values, URL user info: :func:`hermes_otel.redaction.content.remember`, which captured content is redacted of too)
  and :func:`mask_text` replaces them, plus the credential patterns of :mod:`hermes_otel.redaction.content` and
  `user:password@` anywhere. :class:`MaskingFilter` applies it to
  every record of our logger and of the library loggers that report our exports.
* Data never drives the terminal: :func:`printable` shows control characters (escape sequences,
  bidi overrides) escaped, so a span name cannot retitle, clear or write the clipboard of a terminal.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import traceback
import urllib.parse
from typing import Any

from .content import REDACTED, is_secret_key, redact_text, remember, replace_known

MASK = "****"

# -- printable ---------------------------------------------------------------------------------------------------

# Controls, bidirectional overrides, line separators, and lone surrogates (a UTF-8 log stream cannot take one).
_UNSAFE = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028,
           0x2029, 0xFEFF, *range(0xD800, 0xE000)]


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TABLE = {code: _escape(code) for code in _UNSAFE}
_TABLE_LINES = {code: text for code, text in _TABLE.items() if code not in (0x09, 0x0A)}


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with control characters and lone surrogates shown escaped (`\\x1b`, `\\ud800`); with `lines`,
    newlines and tabs are kept."""
    return text.translate(_TABLE_LINES if lines else _TABLE)


# -- secrets -------------------------------------------------------------------------------------------------------

def remember_url(url: str) -> None:
    """The user info of a URL (`user:password@`, or a token as the user) is a secret."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return
    user, password = parts.username, parts.password
    secrets = [password] if password else []
    if user and (not password or _looks_like_token(user)):  # a user name before a password is not a secret
        secrets.append(user)
    for secret in secrets:
        remember(secret)
        remember(urllib.parse.unquote(secret))


_USERINFO = re.compile(r"(?<![\w/])([A-Za-z0-9._~%!$&'()*+,;=-]+):([^\s@/'\"]+)@(?=[\w.\[\]-])")


def mask_text(text: str) -> str:
    """Known secrets, credential patterns and `user:password@` masked."""
    text = replace_known(text, MASK)
    text = redact_text(text, hermes=False, memo=False)  # Hermes's formatter redacts its log lines itself
    return _USERINFO.sub(r"\1:" + MASK + "@", text)


_QUERY_ITEM = re.compile(r"([^=&;]+)=([^&;]*)")
# Query parameter names whose value is a credential though the name says no more (Hermes's redactor's own list,
# exact names: `session_id` is an id, `session` a session).
_QUERY_SECRETS = frozenset({"session", "sid", "code", "jwt", "key", "auth", "pwd", "sig"})


def mask_url(url: str) -> str:
    """A URL for display: user info replaced, credential-named query values masked."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return mask_text(url)
    netloc = parts.netloc
    if "@" in netloc:  # the user stays when a password follows it; a user alone may be a token
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0] if ":" in userinfo else ""
        netloc = f"{user}:{MASK}@{host}" if user and not _looks_like_token(user) else f"{MASK}@{host}"
    query = _QUERY_ITEM.sub(
        lambda m: f"{m.group(1)}={MASK}" if _secret_param(urllib.parse.unquote(m.group(1))) else m.group(0),
        parts.query,
    )
    return mask_text(urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))).replace(REDACTED, MASK)


def _secret_param(name: str) -> bool:
    return name.lower() in _QUERY_SECRETS or is_secret_key(name)


def _looks_like_token(user: str) -> bool:
    return len(user) >= 16 or redact_text(user, hermes=False) != user


# Loggers the OTLP exporters (HTTP and gRPC) report retries and failures on.
OTLP_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc._log_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
)


# -- logging -----------------------------------------------------------------------------------------------------

# Loggers that report our exports: our own, the OTLP exporters', and the SDK's processors and resource detector.
OUR_LOGGERS = ("hermes_otel", "hermes_otel.middleware")
LOGGERS = (
    *OUR_LOGGERS,
    "opentelemetry.exporter.otlp.proto.common._internal",
    *OTLP_EXPORTER_LOGGERS,
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk._logs._internal.export",
    "opentelemetry.sdk.metrics._internal.export",
    "opentelemetry.sdk.resources",
    "urllib3.connectionpool",
    "urllib3.util.retry",  # the ATOF stream sink's retries log the URL
    "opentelemetry.util.re",  # the SDK's OTEL_*_HEADERS parser quotes a header it cannot parse, value and all
)
# Loggers whose arguments are header items: never shown, whatever they hold (a value refused for its
# characters is not a remembered secret).
_HEADER_LOGGERS = frozenset({"opentelemetry.util.re"})


class MaskingFilter(logging.Filter):
    """Masks a record that would show a credential or a control character; never drops one, never raises.

    A record with nothing to mask passes untouched (its `args`, `exc_info` and everything else as logged). One that
    has something is replaced, for the rest of its way, by a masked copy (Python 3.12+: a filter may return the
    record to use) whose traceback text is masked and whose `exc_info` is kept for handlers that want the exception
    object; on Python 3.11, which cannot replace a record, the record itself gets the masked message and traceback
    text (its `exc_info` kept)."""

    def filter(self, record: logging.LogRecord) -> bool | logging.LogRecord:  # type: ignore[override]  # 3.12+ form
        try:
            changes = _masked(record)
            if changes is None:
                return True
            target = logging.makeLogRecord(record.__dict__) if _REPLACES_RECORDS else record
            for name, value in changes.items():
                setattr(target, name, value)
            return target if _REPLACES_RECORDS else True
        except Exception:  # noqa: BLE001 - a log line must never fail because of us
            return True


_REPLACES_RECORDS = sys.version_info >= (3, 12)


def _masked(record: logging.LogRecord) -> dict[str, Any] | None:
    """The fields of `record` to change (message, traceback text, stack), or None when it shows nothing to mask."""
    if record.name in _HEADER_LOGGERS:  # the template alone: its arguments are header items
        message = str(record.msg).replace("%s", "(header not shown)").replace("%r", "(header not shown)")
        changes: dict[str, Any] = {"msg": message, "args": None}
    else:
        message = record.getMessage()
        shown = printable(mask_text(message), lines=True)
        changes = {} if shown == message else {"msg": shown, "args": None}
    trace_text = record.exc_text
    if record.exc_info and record.exc_info[0] is not None and not trace_text:
        trace_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
    if trace_text:
        shown = printable(mask_text(trace_text), lines=True)
        if shown != trace_text:  # formatters print exc_text when it is set: the masked text, not the traceback
            changes["exc_text"] = shown
    if record.stack_info:
        shown = printable(mask_text(record.stack_info), lines=True)
        if shown != record.stack_info:
            changes["stack_info"] = shown
    return changes or None


_filter = MaskingFilter()


def install(names: tuple[str, ...] = LOGGERS) -> None:
    """Idempotent: one instance of the filter per logger, first in line."""
    for name in names:
        logger = logging.getLogger(name)
        if _filter not in logger.filters:
            logger.filters.insert(0, _filter)


# -- doctor ------------------------------------------------------------------------------------------------------


def masked(settings: Any) -> dict[str, Any]:
    """The effective settings as plain data for `doctor`: header values and URL credentials masked."""
    data: dict[str, Any] = {
        "enabled": settings.enabled,
        "source": settings.source or "(environment and defaults)",
        "service_name": settings.service_name,
        "resource_attributes": dict(settings.resource_attributes),
        "capture_content": settings.capture_content,
        "sampler": f"{settings.sampler_name} ({settings.sampler_arg:g})",
        "file": {"directory": str(settings.file_directory), "signals": sorted(settings.file_signals)},
        "otlp": {},
        "traces_exporter": _destination(settings, "traces"),
        "logs_exporter": _destination(settings, "logs"),
        "metrics_exporter": _destination(settings, "metrics"),
    }
    if "prometheus" in settings.metrics_exporters:
        data["prometheus"] = f"http://{settings.prometheus_host}:{settings.prometheus_port}/metrics"
    data["atof_sinks"] = [
        {"type": "file", "path": os.path.join(s.output_directory, s.filename), "mode": s.mode}
        if hasattr(s, "output_directory")
        else {"type": "stream", "url": mask_url(s.url), "transport": s.transport,
              "headers": {k: MASK for k in (*s.headers, *s.header_env, *s.header_file)}}
        for s in settings.atof_sinks
    ]
    for signal, target in settings.otlp.items():
        data["otlp"][signal] = _target(target)
    if settings.relay_span_endpoints:
        data["relay_endpoints"] = [{"type": e.type, **_target(e.target)} for e in settings.relay_span_endpoints]
    for name, targets in (("relay_logs", settings.relay_log_targets), ("relay_metrics", settings.relay_metric_targets)):
        if targets:
            data[name] = [mask_url(t.endpoint) for t in targets]
    return data


def _destination(settings: Any, signal: str) -> str:
    """Where a signal really goes: `otlp` means an OTLP endpoint, files, both, or nothing."""
    places: list[str] = []
    for name in getattr(settings, f"{signal}_exporters"):
        if name == "otlp":
            places += [where for where, used in (("otlp", signal in settings.otlp),
                                                 ("files", signal in settings.file_signals)) if used]
        else:
            places.append(name)
    return " and ".join(places) or "none"


def _target(target: Any) -> dict[str, Any]:
    return {
        "endpoint": mask_url(target.endpoint),
        "protocol": target.protocol,
        "headers": {k: MASK for k in target.headers},
        "timeout_s": target.timeout_s,
        "compression": target.compression,
    }
