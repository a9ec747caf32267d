"""Terminal waterfall of the local record (the JSON-lines trace files), read by :mod:`hermes_otel.local`.

:func:`render` draws traces with their span events. Whatever comes from the files is untrusted: every name and
value is printed with control characters escaped, so data cannot drive the terminal. The reader's names are
re-exported here (``read_traces``, ``load_spans``, ``group_traces``, ...), as `view` has always offered them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..cost import pricing as cost
from ..local.decode import STATUS_ERROR as _STATUS_ERROR
from ..local.decode import Span, decode_line
from ..local.files import MAX_LINE, trace_files
from ..local.traces import MARGIN_NS, LoadedSpans, Reading, Trace, group_traces, load_spans, read_traces, select
from ..local.traces import RequestError as ViewError
from ..local.traces import child_indent as _child_indent
from ..redaction.masking import printable

__all__ = [
    "MARGIN_NS",
    "MAX_LINE",
    "LoadedSpans",
    "Reading",
    "Trace",
    "ViewError",
    "decode_line",
    "group_traces",
    "load_spans",
    "read_traces",
    "render",
    "select",
    "trace_files",
]

# --- rendering -------------------------------------------------------------

MIN_WIDTH, MAX_WIDTH = 40, 1000


def width(text: str) -> int:
    """`--width`: a whole number of columns up to MAX_WIDTH (a wider waterfall is no longer readable, and a width
    of a billion would need gigabytes); below MIN_WIDTH the waterfall is drawn MIN_WIDTH wide."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_WIDTH:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of columns from 1 to {MAX_WIDTH}, found {printable(text)[:40]!r}")
    return value



@dataclass(frozen=True)
class _Glyphs:
    branch: str
    last: str
    pipe: str
    bar: str
    error: str
    arrow: str
    ellipsis: str
    event: str
    mark: str


_UNICODE = _Glyphs("├─ ", "└─ ", "│ ", "█", "✗ ERROR", "→", "…", "• ", "◆")
_ASCII = _Glyphs("|- ", "`- ", "| ", "#", "ERR", "->", "...", "* ", "+")

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_DIM = "\x1b[2m"
_RED = "\x1b[31m"
_CYAN = "\x1b[36m"
_YELLOW = "\x1b[33m"
_BLUE = "\x1b[34m"

# Keyed by gen_ai.operation.name, the first word of GenAI span names.
_KIND_COLORS = {"chat": _CYAN, "execute_tool": _YELLOW}

_DURATION_WIDTH = 9
_GAP = "  "


@dataclass
class _Row:
    span: Span
    label: str
    event: dict[str, Any] | None = None  # a span event shown under its span


def render(
    traces: Sequence[Trace],
    *,
    width: int = 100,
    color: bool = False,
    ascii: bool = False,
) -> str:
    """Draw each trace as a header line, one waterfall line per span and one per span event, under its span.

    Columns: tree and name, duration (an event: its offset into the span), a bar on the trace's time axis
    (an event: a mark), then error marker and key attributes. Lines fit in ``width`` (40 to 1000) except a
    header whose trace id alone does not. Every text from the data is shown with control characters escaped.
    """
    glyphs = _ASCII if ascii else _UNICODE
    width = min(max(width, MIN_WIDTH), MAX_WIDTH)
    bar_width = max(10, width // 5)
    rows = [_rows(trace, glyphs) for trace in traces]
    longest = max((len(row.label) for trace_rows in rows for row in trace_rows), default=0)
    label_width = min(max(longest, 12), width * 2 // 5)
    tail_width = width - label_width - _DURATION_WIDTH - bar_width - 3 * len(_GAP)

    blocks: list[str] = []
    for trace, trace_rows in zip(traces, rows, strict=True):
        lines = [_header(trace, width, color, glyphs)]
        for row in trace_rows:
            label = _fit(row.label, label_width, glyphs).ljust(label_width)
            if row.event is None:
                span = row.span
                duration = _duration(span["end_ns"] - span["start_ns"]).rjust(_DURATION_WIDTH)
                bar = _bar(trace, span["start_ns"], span["end_ns"], bar_width, glyphs)
                tail = _fit(_tail(span, glyphs), tail_width, glyphs)
                if color:
                    label, duration, bar, tail = _paint(span, label, duration, bar, tail, glyphs)
            else:
                at = row.event["time_ns"]
                duration = ("+" + _duration(max(at - row.span["start_ns"], 0))).rjust(_DURATION_WIDTH)
                bar = _mark(trace, at, bar_width, glyphs)
                tail = _fit(_event_tail(row.event, glyphs), tail_width, glyphs)
                if color:
                    failed = row.event["name"] in ("exception", "hermes.middleware.failure")
                    label, duration = f"{_DIM}{label}{_RESET}", f"{_DIM}{duration}{_RESET}"
                    tail = f"{_RED}{tail}{_RESET}" if failed else tail
            lines.append(_GAP.join((label, duration, bar, tail)).rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _rows(trace: Trace, glyphs: _Glyphs) -> list[_Row]:
    rows = []
    for span, _, (indent, branch) in trace.walk():
        rows.append(_Row(span, _label(span, indent, branch, glyphs)))
        if span["events"]:
            under = _drawn(_child_indent(indent, branch), glyphs)
            for event in sorted(span["events"], key=lambda e: e["time_ns"]):
                rows.append(_Row(span, under + glyphs.event + printable(event["name"]), event))
    return rows


def _drawn(indent: str, glyphs: _Glyphs) -> str:
    """The encoded indent ("|" a bar, " " a gap, "…" cut) as drawn."""
    return "".join(glyphs.pipe if c == "|" else "  " if c == " " else glyphs.ellipsis + " " for c in indent)


def _label(span: Span, indent: str, branch: str, glyphs: _Glyphs) -> str:
    name = printable(span["name"])
    if not branch:
        return name
    return _drawn(indent, glyphs) + (glyphs.last if branch == "└" else glyphs.branch) + name


def _header(trace: Trace, width: int, color: bool, glyphs: _Glyphs) -> str:
    count = len(trace.spans)
    duration = _duration(trace.duration_ns)
    suffix = f"  {duration}  {count} span{'' if count == 1 else 's'}"
    prefix = f"trace {trace.trace_id}  "
    # Only the root name gives way; the id and the numbers are always shown.
    room = max(width - len(prefix) - len(suffix), 4)
    text = prefix + _fit(printable(trace.name), room, glyphs) + suffix
    return f"{_BOLD}{text}{_RESET}" if color else text


def _duration(ns: int) -> str:
    if ns < 0:  # a span that says it ended before it started: its length is unknown
        return "?"
    ms = ns / 1e6
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _bar(trace: Trace, start: int, end: int, width: int, glyphs: _Glyphs) -> str:
    total = trace.duration_ns
    if total <= 0:
        first, last = 0, 1
    else:
        # Both edges come from the time axis (not start + rounded length), so a
        # span that starts where its sibling ends starts in the same cell.
        first = min(width - 1, max(0, round((start - trace.start_ns) * width / total)))
        last = round((end - trace.start_ns) * width / total)
        last = min(width, max(first + 1, last))
    return " " * first + glyphs.bar * (last - first) + " " * (width - last)


def _mark(trace: Trace, at: int, width: int, glyphs: _Glyphs) -> str:
    total = trace.duration_ns
    cell = 0 if total <= 0 else min(width - 1, max(0, int((at - trace.start_ns) * width / total)))
    return " " * cell + glyphs.mark + " " * (width - cell - 1)


def _tail(span: Span, glyphs: _Glyphs) -> str:
    # Most telling first, since the tail is what gets truncated.
    attrs = span["attributes"]
    error_type = attrs.get("error.type")
    parts: list[str] = []
    if span["status_code"] == _STATUS_ERROR:
        parts.append(f"{glyphs.error} {_text(error_type)}" if error_type else glyphs.error)
    elif error_type:
        parts.append(f"error {_text(error_type)}")
    parts.extend(_key_attributes(attrs, span["name"], glyphs.arrow))
    return _GAP.join(parts)


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return printable(str(value))


def _key_attributes(attrs: Mapping[str, Any], name: str, arrow: str) -> list[str]:
    parts: list[str] = []
    request, response = attrs.get("gen_ai.request.model"), attrs.get("gen_ai.response.model")
    if request and response and request != response:
        parts.append(f"model {_text(request)}{arrow}{_text(response)}")
    elif request or response:
        parts.append(f"model {_text(request or response)}")
    tool = attrs.get("gen_ai.tool.name")
    if tool and not name.endswith(str(tool)):  # "execute_tool <name>" already says it
        parts.append(f"tool {_text(tool)}")
    if call_id := attrs.get("gen_ai.tool.call.id"):
        parts.append(f"call {_text(call_id)}")
    spent = cost.describe(attrs)  # an attempt's cost next to its tokens; a turn's or subagent's total before them
    tokens_in = attrs.get("gen_ai.usage.input_tokens")
    tokens_out = attrs.get("gen_ai.usage.output_tokens")
    tokens = (f"tokens {_or_unknown(tokens_in)}{arrow}{_or_unknown(tokens_out)}"
              if tokens_in is not None or tokens_out is not None else None)  # a turn's: its attempts' total
    order = (spent, tokens) if spent and spent.startswith("total") else (tokens, spent)
    parts.extend(_text(part) for part in order if part)
    if plugin := attrs.get("hermes.middleware.plugin"):
        parts.append(f"plugin {_text(plugin)}")
    if outcome := attrs.get("hermes.middleware.outcome"):
        parts.append(f"outcome {_text(outcome)}")
    attempt = attrs.get("hermes.api.attempt")
    if isinstance(attempt, int) and attempt > 1:
        parts.append(f"attempt {attempt}")
    return parts


_EVENT_KEYS = (  # (attribute, label) shown for span events, in this order
    ("hermes.middleware.source", "source"),
    ("hermes.middleware.reason", "reason"),
    ("hermes.middleware.name", "name"),
    ("hermes.middleware.plugin", "plugin"),
    ("hermes.middleware.changed_keys", "changed"),
    ("error.type", "error"),
)


def _event_tail(event: Mapping[str, Any], glyphs: _Glyphs) -> str:
    attrs = event["attributes"]
    if event["name"] == "exception":
        kind, message = attrs.get("exception.type", ""), attrs.get("exception.message", "")
        return f"{glyphs.error} {_text(kind)}" + (f": {_text(message)}" if message else "")
    parts = [f"{label} {_text(attrs[key])}" for key, label in _EVENT_KEYS if attrs.get(key) not in (None, "", [])]
    if not parts:  # an event of someone else's: its first attributes as they are
        parts = [f"{printable(str(key))}={_text(value)}" for key, value in list(attrs.items())[:3]]
    return _GAP.join(parts)


def _or_unknown(value: Any) -> str:
    return "?" if value is None else _text(value)


def _fit(text: str, width: int, glyphs: _Glyphs) -> str:
    if len(text) <= width:
        return text
    if width <= len(glyphs.ellipsis):
        return text[: max(width, 0)]
    return text[: width - len(glyphs.ellipsis)] + glyphs.ellipsis


def _paint(
    span: Span, label: str, duration: str, bar: str, tail: str, glyphs: _Glyphs
) -> tuple[str, str, str, str]:
    """Colour already-padded columns, so ANSI codes never skew the layout."""
    failed = span["status_code"] == _STATUS_ERROR
    hue = _RED if failed else _KIND_COLORS.get(span["name"].split(" ", 1)[0], _BLUE)
    if failed and tail.startswith(glyphs.error):
        tail = f"{_RED}{glyphs.error}{_RESET}{tail[len(glyphs.error):]}"
    return label, f"{_DIM}{duration}{_RESET}", f"{hue}{bar}{_RESET}", tail



# --- following ------------------------------------------------------------


def follow(path: Path, *, width: int, color: bool = False, ascii: bool = False, out: TextIO | None = None,
           interval: float = 0.5) -> int:
    """`hermes-otel view --follow`: the waterfall of each turn as it ends, until Ctrl-C (exit 130, no traceback).

    Follows `traces.jsonl` of a directory (or a traces file) across rotation; starts at its end."""
    from ..local.follow import Follower

    out = out or sys.stdout
    try:
        if not path.is_dir():
            trace_files(path)  # a FIFO or a device is refused here, as by every reader
    except OSError as exc:
        print(f"hermes-otel view: cannot read {printable(str(path))} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    follower = Follower(path)
    print(f"hermes-otel view: following {printable(str(follower.path))}; each turn is shown as it ends "
          "(Ctrl-C to stop)", file=sys.stderr)
    bad = 0
    try:
        while True:
            for trace in follower.poll():
                out.write(render([trace], width=width, color=color, ascii=ascii) + "\n")
                out.flush()
            if follower.bad_lines > bad:
                print(f"hermes-otel view: skipped {follower.bad_lines - bad} unreadable line(s)", file=sys.stderr)
                bad = follower.bad_lines
            time.sleep(interval)
    except KeyboardInterrupt:
        return 130
    finally:
        follower.close()
