"""The standard `OTEL_*` environment variables -> flat values and problems.

Every variable we read is checked like a key of the file (type, range, choices); a bad one is
reported once, by name, and ignored (that setting keeps its default), never the whole plugin.
Per-signal forms (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, ...) get the same checks as the general ones.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from .headers import parse_pairs
from .problems import Problem, check, describe, shown, type_name
from .schema import FIELDS, FIELDS_BY_KEY, Field
from .targets import SIGNALS, url_problem

TRUE = ("true", "1", "yes", "on")
FALSE = ("false", "0", "no", "off")
_SIGNAL_KEYS = {"ENDPOINT": "endpoint", "PROTOCOL": "protocol", "HEADERS": "headers", "TIMEOUT": "timeout_millis",
                "COMPRESSION": "compression"}


def signal_var(signal: str, suffix: str) -> str:
    return f"OTEL_EXPORTER_OTLP_{signal.upper()}_{suffix}"


def from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
    """Flat values: schema keys, `enabled`, and per-signal `otlp.<signal>.<key>`."""
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    # As the SDK reads it: only `true` (any case) is true; anything else is false, and said when not `false`.
    disabled = env.get("OTEL_SDK_DISABLED", "").strip()
    if disabled.lower() == "true":
        values["enabled"] = False
    elif disabled and disabled.lower() != "false":
        problems.append(Problem("OTEL_SDK_DISABLED", "", "true | false",
                                f"{shown(disabled)} (read as false, as the OpenTelemetry SDK reads it: telemetry "
                                "stays on)", fatal=False))
    for spec in FIELDS:
        if spec.env:
            _read(env, spec.env, spec, spec.key, values, problems)
    for signal in SIGNALS:
        for suffix, key in _SIGNAL_KEYS.items():
            _read(env, signal_var(signal, suffix), FIELDS_BY_KEY[f"otlp.{key}"], f"otlp.{signal}.{key}", values,
                  problems)
    return values, problems


def _read(env: Mapping[str, str], var: str, spec: Field, store: str, values: dict[str, Any],
          problems: list[Problem]) -> None:
    raw = env.get(var, "").strip()
    if not raw:
        return
    try:
        value = _parse(spec, var, raw, problems)
    except ValueError:
        found = describe(raw, True) if spec.secret else shown(raw)
        problems.append(Problem(var, "", type_name(spec.type), found, fatal=False))
        return
    error = check(spec, value)
    if error is not None:
        problems.append(Problem(var, "", error[0], error[1], fatal=False))
        return
    if spec.key == "otlp.endpoint" and (problem := url_problem(value)):
        from ..redaction.masking import mask_url

        problems.append(Problem(var, "", problem, shown(mask_url(value)), fatal=False))
        return
    if spec.key == "otlp.endpoint":
        from ..redaction.masking import remember_url

        remember_url(value)
    values[store] = value


def _parse(spec: Field, var: str, raw: str, problems: list[Problem]) -> Any:
    if spec.key == "capture_content":
        legacy = {"true": "SPAN_AND_EVENT", "false": "NO_CONTENT"}
        return legacy.get(raw.lower(), raw.upper())
    if spec.type is dict:
        pairs, found = parse_pairs(raw, var, lower=spec.key != "resource_attributes", secret=spec.secret)
        problems.extend(found)
        return pairs
    if spec.type is int:
        return int(raw)
    if spec.type is float:
        return float(raw)
    if spec.type is bool:
        if raw.lower() in TRUE:
            return True
        if raw.lower() in FALSE:
            return False
        raise ValueError(raw)
    return raw.lower() if spec.choices and raw.lower() in spec.choices else raw


class _ReportedByUs(logging.Filter):
    """The SDK's resource detector parses OTEL_RESOURCE_ATTRIBUTES again and logs a bad item raw, value included;
    :func:`from_env` reports it in our words (by position). While we build our resource, a record of the detector's
    logger that quotes an item of the variable is left out: known by its arguments, never by the SDK's words."""

    def __init__(self, items: frozenset[str]) -> None:
        super().__init__()
        self._items = items

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(arg, str) and arg in self._items for arg in args)


@contextlib.contextmanager
def resource_items_reported_by_us() -> Iterator[None]:
    """While our resource is built: the detector's raw line about a bad item is left out (we said it already).
    Only then, so another library's resource detection logs as it always does."""
    logger = logging.getLogger("opentelemetry.sdk.resources")
    quiet = _ReportedByUs(frozenset(os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")))
    logger.filters.insert(0, quiet)  # ahead of the masking filter, which may replace the record's arguments
    try:
        yield
    finally:
        logger.removeFilter(quiet)
