"""Header values from the configuration: literal, `header_env`, `header_file`, `OTEL_*_HEADERS`.

Values are cleaned as most clients do (surrounding blanks and ONE trailing newline, common in
mounted secrets, are dropped), then checked: a value with control characters would be rejected by
the HTTP client with an error that quotes it, so it is refused here, by key, never shown. Every
accepted value is remembered by :mod:`hermes_otel.redaction.masking`, so no log line can show it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from ..redaction.masking import printable, remember
from .files import MAX_HEADER_FILE_BYTES, TRUSTED, Unreadable, Untrusted, read_regular, size_text
from .problems import Problem

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field name
_CONTROL = re.compile("[" + "".join(map(chr, (*range(9), *range(10, 32), 127))) + "]")  # C0 controls but tab, DEL
NOT_SHOWN = "(value not shown)"


def clean(value: str) -> str:
    if value.endswith("\r\n"):
        value = value[:-2]
    elif value.endswith("\n"):
        value = value[:-1]
    return value.strip(" \t")


def check_value(value: str) -> str | None:
    """None when `value` may be sent as a header value, else what is wrong with it (without it)."""
    if _CONTROL.search(value):
        return f"a value with control characters {NOT_SHOWN}"
    return None


def check_name(name: str) -> str | None:
    return None if _TOKEN.fullmatch(name) else f"{printable(repr(name))[:60]} (not a header name)"


def resolve(
    literal: Mapping[str, str],
    header_env: Mapping[str, str],
    header_file: Mapping[str, str],
    env: Mapping[str, str],
    *,
    source: str,
    where: str,
) -> tuple[dict[str, str], list[Problem]]:
    """Headers from a table's `headers`, `header_env` and `header_file` (later ones win), and their problems."""
    headers: dict[str, str] = {}
    problems: list[Problem] = []

    def key(table: str, name: str) -> str:
        return f"{where}.{table}.{name}" if where else f"{table}.{name}"

    def accept(table: str, name: str, value: str, found_prefix: str = "") -> None:
        bad_name = check_name(name)
        if bad_name:
            problems.append(Problem(source, key(table, name), "a header name (letters, digits and -)", bad_name,
                                    fatal=False))
            return
        value = clean(value)
        bad = check_value(value)
        if bad:
            problems.append(Problem(source, key(table, name), "a header value without control characters",
                                    found_prefix + bad,
                                    fatal=False))
            return
        remember(value)
        headers[name.lower()] = value

    for name, value in literal.items():
        accept("headers", name, value)
    for name, var in header_env.items():
        found = env.get(var)
        if not found:
            problems.append(Problem(source, key("header_env", name),
                                    f"the environment variable {printable(var)} to be set", "it unset or empty",
                                    fatal=False))
            continue
        accept("header_env", name, found, f"{printable(var)} holding ")
    for name, path in header_file.items():
        try:
            data = read_regular(Path(path).expanduser(), MAX_HEADER_FILE_BYTES, trusted=True)
            text = data.decode("utf-8")
        except Untrusted as exc:
            problems.append(Problem(source, key("header_file", name), TRUSTED, f"{printable(path)} {exc}", fatal=False))
            continue
        except Unreadable as exc:
            problems.append(Problem(source, key("header_file", name), "a readable regular file of at most "
                                    f"{size_text(MAX_HEADER_FILE_BYTES)}", f"{printable(path)}: {exc}", fatal=False))
            continue
        except (UnicodeDecodeError, RuntimeError):
            problems.append(Problem(source, key("header_file", name), "a UTF-8 text file",
                                    f"{printable(path)}: not UTF-8 text", fatal=False))
            continue
        mode = _mode(path)
        if mode & 0o077:
            problems.append(Problem(source, key("header_file", name), "a file only its owner can read (chmod 600)",
                                    f"{printable(path)} with mode {mode:o}", fatal=False))
        accept("header_file", name, text, f"{printable(path)} holding ")
    return headers, problems


def parse_pairs(raw: str, source: str, *, lower: bool, secret: bool) -> tuple[dict[str, str], list[Problem]]:
    """`k1=v1,k2=v2` (W3C baggage-like, percent-encoded) as OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES
    define it; header names are case-insensitive, attribute keys are not. Bad items are reported by
    position (and by key, when there is one), never by value."""
    pairs: dict[str, str] = {}
    problems: list[Problem] = []
    for n, item in enumerate(raw.split(","), 1):
        if not item.strip():
            continue
        if "=" not in item:
            problems.append(Problem(source, "", "comma-separated key=value pairs",
                                    f"item {n} without '=' {NOT_SHOWN if secret else ''}".rstrip(), fatal=False))
            continue
        key, raw = item.split("=", 1)
        name = urllib.parse.unquote(key.strip())
        value = clean(urllib.parse.unquote(raw))
        if secret:  # refused or not: the SDK re-reads the variable and may quote it
            remember(raw.strip())
            remember(value)
        if not name:
            problems.append(Problem(source, "", "comma-separated key=value pairs", f"item {n} without a key",
                                    fatal=False))
            continue
        bad_name = check_name(name) if secret else None
        if bad_name:
            problems.append(Problem(source, "", "header names (letters, digits and -)", f"item {n}: {bad_name}",
                                    fatal=False))
            continue
        bad = check_value(value)
        if bad:
            what = "a header" if secret else "an attribute"
            problems.append(Problem(source, printable(name), f"{what} value without control characters", bad,
                                    fatal=False))
            continue
        pairs[name.lower() if lower else name] = value
    return pairs, problems


def _mode(path: str) -> int:
    try:
        return Path(path).expanduser().stat().st_mode & 0o777
    except OSError:
        return 0
