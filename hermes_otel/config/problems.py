"""Problems with the configuration, phrased for a human, and the value checks that find them.

A problem names the source (a file or a variable), the key, what was expected and what was
found; it never shows a credential: secret keys and tables are described by shape only, and
every text passes the same masking as our log lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..redaction.masking import mask_text, printable
from .schema import Field, exporter_list


def unknown_key(key: str, known: Iterable[str]) -> str:
    """'an unknown key', with the nearest known key when one is close (`protocl` -> `protocol`)."""
    import difflib

    near = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f"an unknown key (did you mean {printable(near[0])}?)" if near else "an unknown key"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the configuration."""

    source: str  # file path or environment variable name
    key: str  # dotted key path inside the source ("" for the whole file)
    expected: str
    found: str
    fatal: bool = True  # fatal problems make us ignore the whole file
    ignored: bool = False  # rated `ignore` by the document's [policy]: not logged, but `validate` and `doctor` say it

    def __str__(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        return printable(f"{where}: expected {self.expected}, found {self.found}")


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "a table of strings",
               list: "an array of strings"}
_KINDS = {str: "string", bool: "boolean", int: "integer", float: "float", dict: "table", list: "array"}


def number(limit: float) -> str:
    """A bound as people write it: 1000000, 0.5."""
    return str(int(limit)) if float(limit).is_integer() else f"{limit:g}"


def type_name(t: Any) -> str:
    return _TYPE_NAMES.get(t, getattr(t, "__name__", str(t)))


def describe(value: Any, secret: bool = False) -> str:
    """A short description of a value for a problem report (logged, and shown by `doctor`).

    A table shows its keys only (header tables hold credentials); a secret value shows its kind only;
    any other text is masked and cut."""
    kind = _KINDS.get(type(value), type(value).__name__)
    if isinstance(value, dict):
        keys = sorted(printable(str(k))[:40] for k in list(value)[:20])
        more = ", …" if len(value) > 20 else ""
        return f"{kind} {{keys: {', '.join(keys)}{more}}}"
    if secret:
        return f"{kind} (value not shown: this key holds credentials)"
    if isinstance(value, list):
        text = mask_text(_short_repr(value))
    else:
        text = mask_text(repr(value)[:200])
    return f"{kind} {text[:60] + '…' if len(text) > 60 else text}"


def shown(value: Any) -> str:
    """A scalar as written (masked, cut)."""
    text = mask_text(repr(value)[:200])
    return text[:60] + "…" if len(text) > 60 else text


def _short_repr(items: list) -> str:
    shown = [repr(v)[:80] if not isinstance(v, (dict, list)) else _KINDS[type(v)] for v in items[:5]]
    return "[" + ", ".join(shown) + (", …]" if len(items) > 5 else "]")


def is_type(value: Any, t: type) -> bool:
    """`value` fits type marker `t` (bool is not an int; an int is a float; tables/arrays hold strings)."""
    if t is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if t is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    if t is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, t)


def check(spec: Field, value: Any) -> tuple[str, str, str] | None:
    """(expected, found, rule) when `value` does not fit `spec`; rule is "type" or "value"."""
    if not is_type(value, spec.type):
        return type_name(spec.type), describe(value, spec.secret), "type"
    if isinstance(value, float) and not math.isfinite(value):
        return "a finite number", repr(value), "value"
    if spec.several and spec.choices:
        items = exporter_list(value)
        if not items or any(item not in spec.choices for item in items) or ("none" in items and len(items) > 1):
            return f"{' | '.join(spec.choices)} (several comma-separated, `none` alone)", shown(value), "value"
    elif spec.choices and value not in spec.choices:
        return " | ".join(spec.choices), describe(value, True) if spec.secret else shown(value), "value"
    if spec.minimum is not None and value < spec.minimum:
        return f"a number >= {number(spec.minimum)}", repr(value), "value"
    if spec.maximum is not None and value > spec.maximum:
        return f"a number <= {number(spec.maximum)}", repr(value), "value"
    return None
