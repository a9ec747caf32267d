"""Terminal waterfall of the traces written by the JSON-lines file exporter.

:func:`read_traces` streams the files: the newest traces are read from the end of the files (only as far back as
they reach), one trace is found by scanning for its id; memory holds what is shown, not the files.
:func:`load_spans` reads everything (the demo's few spans). :func:`group_traces` builds span trees, :func:`select`
picks traces and :func:`render` draws them with their span events. Whatever comes from the files is untrusted:
a line that is not a valid export request is skipped and counted, and every name and value is printed with
control characters escaped, so data cannot drive the terminal.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..cost import pricing as cost
from ..redaction.masking import printable

__all__ = [
    "LoadedSpans",
    "Reading",
    "Trace",
    "ViewError",
    "group_traces",
    "load_spans",
    "read_traces",
    "render",
    "select",
]

Span = dict[str, Any]

_TRACES_FILE = "traces.jsonl"
_STATUS_ERROR = 2
MAX_LINE = 64 * 1024 * 1024  # a longer line is skipped (counted as bad), never held whole
_BLOCK = 1024 * 1024
# `--last` stops reading back once a line's spans all ended this long before the oldest trace it shows began:
# a batch is written within seconds of its spans' end, so no span of a shown trace can lie further back.
MARGIN_NS = 10 * 60 * 1_000_000_000
_HEX_ID = re.compile(r"[0-9a-fA-F]+")


class ViewError(Exception):
    """A request the files cannot answer (an ambiguous or malformed trace id); the message is for the user.
    `usage` is true when the request itself is malformed."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


# -- decoding: one OTLP/JSON line, strictly, with bounds -----------------------------------------------------------

_KINDS = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
          "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_STATUSES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_MAX_DEPTH = 8  # of attribute values (arrays, kvlists)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _list(value: Any) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("expected an array")
    return value


def _dict(value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected an object")
    return value


def _hex(value: Any, size: int) -> str:
    if not isinstance(value, str) or len(value) != size or not _HEX_ID.fullmatch(value):
        raise ValueError("expected a hex id")
    return value.lower()


def _nanos(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError("expected a time in nanoseconds")
    number = int(value)
    if not 0 <= number < 2**64:
        raise ValueError("time out of range")
    return number


def _enum(value: Any, names: Mapping[str, int]) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("expected an enum")


def _value(value: Any, depth: int = 0) -> Any:
    value = _dict(value)
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if depth >= _MAX_DEPTH:
        return "…"
    if "arrayValue" in value:
        return [_value(v, depth + 1) for v in _list(_dict(value["arrayValue"]).get("values"))]
    if "kvlistValue" in value:
        return _attributes(_dict(value["kvlistValue"]).get("values"), depth + 1)
    if "bytesValue" in value:
        return f"<{len(str(value['bytesValue'])) * 3 // 4} bytes>"
    return None


def _attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    out = {}
    for item in _list(items):
        item = _dict(item)
        out[str(item["key"])] = _value(item.get("value"), depth)
    return out


def _span(span: Any, resource: dict[str, Any]) -> Span:
    span = _dict(span)
    parent = span.get("parentSpanId") or None
    status = _dict(span.get("status"))
    return {
        "trace_id": _hex(span.get("traceId"), 32),
        "span_id": _hex(span.get("spanId"), 16),
        "parent_span_id": _hex(parent, 16) if parent is not None else None,
        "name": str(span.get("name", "")),
        "kind": _enum(span.get("kind", 0), _KINDS),
        "start_ns": _nanos(span.get("startTimeUnixNano", 0)),
        "end_ns": _nanos(span.get("endTimeUnixNano", 0)),
        "attributes": _attributes(span.get("attributes")),
        "events": [
            {"name": str(_dict(e).get("name", "")), "time_ns": _nanos(_dict(e).get("timeUnixNano", 0)),
             "attributes": _attributes(_dict(e).get("attributes"))}
            for e in _list(span.get("events"))
        ],
        "status_code": _enum(status.get("code", 0), _STATUSES),
        "status_message": str(status.get("message", "")),
        "resource": resource,
    }


def decode_line(line: bytes | str) -> list[Span]:
    """The spans of one `ExportTraceServiceRequest` line; raises on anything else (the caller counts it)."""
    request = _dict(json.loads(line, parse_constant=_no_constant))
    spans: list[Span] = []
    for resource_spans in _list(request.get("resourceSpans")):
        resource_spans = _dict(resource_spans)
        resource = _attributes(_dict(resource_spans.get("resource")).get("attributes"))
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            spans.extend(_span(s, resource) for s in _list(_dict(scope_spans).get("spans")))
    return spans


# -- reading: files, forwards and backwards ------------------------------------------------------------------------


def trace_files(path: Path) -> list[Path]:
    """A traces file, or a directory's ``traces.jsonl`` and its rotated backups, oldest first (or, for a directory
    without them, such as ``otel/spool/traces``, its ``*.jsonl`` files in name order)."""
    path = Path(path)
    if not path.is_dir():
        if not path.exists():
            raise FileNotFoundError(path)
        return [path]
    backup = re.compile(re.escape(_TRACES_FILE) + r"\.(\d+)")
    numbered = [
        (_mtime(child), int(match.group(1)), child)
        for child in path.iterdir()
        if (match := backup.fullmatch(child.name)) and child.is_file()
    ]
    # Oldest first by last write: backups are numbered upwards (the highest is the newest), but files of
    # older versions numbered the other way (.1 the newest); the time of the last write orders both.
    files = [child for _, _, child in sorted(numbered)]
    current = path / _TRACES_FILE
    files = files + [current] if current.is_file() else files
    if not files:
        files = sorted(c for c in path.iterdir() if c.suffix == ".jsonl" and not c.name.startswith(".") and c.is_file())
    return files


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@dataclass
class _Counter:
    lines: int = 0  # non-blank lines read
    bad: int = 0


def _forward(file: BinaryIO, counter: _Counter) -> Iterator[bytes]:
    while True:
        line = file.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            counter.bad += 1
            while (rest := file.readline(_BLOCK)) and not rest.endswith(b"\n"):
                pass
            continue
        if line.strip():
            counter.lines += 1
            yield line


def _backward(file: BinaryIO, counter: _Counter) -> Iterator[bytes]:
    """The lines of a file, last first, reading blocks from the end (a line longer than MAX_LINE is skipped)."""
    file.seek(0, 2)
    position, tail, skipping = file.tell(), b"", False
    while position > 0:
        size = min(_BLOCK, position)
        position -= size
        file.seek(position)
        chunk = file.read(size)
        if skipping:
            newline = chunk.rfind(b"\n")
            if newline < 0:
                continue  # still inside the overlong line
            chunk, skipping = chunk[: newline + 1], False
        parts = (chunk + tail).split(b"\n")
        tail = parts[0]
        for line in reversed(parts[1:]):
            if line.strip():
                counter.lines += 1
                yield line
        if len(tail) > MAX_LINE:
            counter.bad += 1
            tail, skipping = b"", True
    if tail.strip() and not skipping:
        counter.lines += 1
        yield tail


def _decoded(lines: Iterable[bytes], counter: _Counter) -> Iterator[list[Span]]:
    for line in lines:
        try:
            spans = decode_line(line)
        except Exception:  # noqa: BLE001 - any malformed line (deep, huge numbers, Infinity, wrong types): skip it
            counter.bad += 1
            continue
        if spans:
            yield spans


class LoadedSpans(list[Span]):
    """The decoded spans, plus how many lines had to be skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.bad_lines = 0
        self.files: list[Path] = []


def load_spans(path: Path) -> LoadedSpans:
    """Every span of a traces file, or of a directory's ``traces.jsonl`` and its backups (oldest first).

    Lines that are not a valid request (typically a last line truncated by a crash) are skipped and counted
    in ``bad_lines``."""
    spans = LoadedSpans()
    spans.files = trace_files(Path(path))
    counter = _Counter()
    for file in spans.files:
        with file.open("rb") as handle:
            for batch in _decoded(_forward(handle, counter), counter):
                spans.extend(batch)
    spans.bad_lines = counter.bad
    return spans


@dataclass
class Reading:
    """What :func:`read_traces` found: the traces to show, and what it had to skip."""

    traces: list[Trace]
    files: list[Path]
    lines_read: int = 0
    bad_lines: int = 0
    complete: bool = True  # False when --last stopped before the start of the files


def read_traces(path: Path, *, trace_id: str | None = None, last: int = 5) -> Reading:
    """The traces to show: the one whose id is (or starts with) `trace_id`, else the `last` newest."""
    files = trace_files(Path(path))
    if trace_id is not None:
        return _one_trace(files, trace_id)
    return _newest(files, last)


def _one_trace(files: list[Path], wanted: str) -> Reading:
    wanted = wanted.strip().lower()
    if not 1 <= len(wanted) <= 32 or not _HEX_ID.fullmatch(wanted):
        raise ViewError(f"not a trace id: {printable(wanted)[:40]!r} (expected 1 to 32 hexadecimal digits)", usage=True)
    needle = wanted.encode()
    counter = _Counter()
    found: dict[str, dict[str, Span]] = {}
    for file in files:
        with file.open("rb") as handle:
            lines = (line for line in _forward(handle, counter) if needle in line or needle.upper() in line)
            for batch in _decoded(lines, counter):
                for span in batch:
                    if span["trace_id"].startswith(wanted):
                        spans = found.setdefault(span["trace_id"], {})
                        if len(found) <= 1:  # past one match the id is ambiguous: keep names only, not spans
                            spans.setdefault(span["span_id"], span)
    if len(found) > 1:
        shown = ", ".join(sorted(found)[:5]) + (", …" if len(found) > 5 else "")
        raise ViewError(f"{len(found)} traces start with {wanted!r} ({shown}); give more of the id")
    traces = [_build_trace(tid, members) for tid, members in found.items()]
    return Reading(traces, files, counter.lines, counter.bad)


def _newest(files: list[Path], last: int) -> Reading:
    """Read back from the end until no older line can hold a span of the `last` newest traces."""
    counter = _Counter()
    found: dict[str, dict[str, Span]] = {}
    starts: dict[str, int] = {}
    cutoff: int | None = None  # the start of the `last`-th newest trace read so far (recomputed now and then)
    complete = True

    def oldest_shown() -> int | None:
        return min(heapq.nlargest(last, starts.values())) if len(starts) >= last else None

    reading = True
    for file in reversed(files):
        if not reading:
            break
        with file.open("rb") as handle:
            for n, batch in enumerate(_decoded(_backward(handle, counter), counter)):
                line_end = max(span["end_ns"] for span in batch)
                if n % 1024 == 0 or cutoff is None:
                    cutoff = oldest_shown()
                if cutoff is not None and line_end < cutoff - MARGIN_NS:
                    cutoff = oldest_shown()  # exact before deciding
                    if cutoff is not None and line_end < cutoff - MARGIN_NS:
                        reading, complete = False, False
                        break
                for span in batch:
                    tid = span["trace_id"]
                    found.setdefault(tid, {}).setdefault(span["span_id"], span)
                    starts[tid] = min(starts.get(tid, span["start_ns"]), span["start_ns"])
    traces = select(group_traces(s for members in found.values() for s in members.values()), last=last)
    return Reading(traces, files, counter.lines, counter.bad, complete)


# -- trees -----------------------------------------------------------------------------------------------------------

_MAX_LEVELS = 12  # of tree drawing; a deeper span shows "…" and the innermost levels, so its name keeps room


@dataclass
class Trace:
    """One trace's spans as a forest: roots plus a parent → children map.

    Spans whose parent is not in the data (not exported yet, or rotated away) are treated as roots.
    """

    trace_id: str
    spans: list[Span]
    roots: list[Span]
    children: dict[str, list[Span]] = field(default_factory=dict)
    start_ns: int = 0
    end_ns: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def name(self) -> str:
        return self.roots[0]["name"] if self.roots else ""

    def walk(self) -> Iterator[tuple[Span, int, tuple[str, str]]]:
        """Yield ``(span, depth, (indent, branch))`` depth-first in start order, in linear time.

        ``indent`` encodes the tree drawing of the ancestors (at most _MAX_LEVELS of them), ``branch`` says
        whether the span is a middle child ("├"), the last one ("└") or a root ("")."""
        return self._walk_from(self.roots)

    def _walk_from(self, roots: Sequence[Span]) -> Iterator[tuple[Span, int, tuple[str, str]]]:
        seen: set[str] = set()
        stack: list[tuple[Span, int, str, str]] = [(root, 0, "", "") for root in reversed(roots)]
        while stack:
            span, depth, indent, branch = stack.pop()
            if span["span_id"] in seen:  # guards against parent cycles
                continue
            seen.add(span["span_id"])
            yield span, depth, (indent, branch)
            kids = self.children.get(span["span_id"], [])
            if not kids:
                continue
            inner = _child_indent(indent, branch)
            for index in range(len(kids) - 1, -1, -1):
                stack.append((kids[index], depth + 1, inner, "└" if index == len(kids) - 1 else "├"))


def _child_indent(indent: str, branch: str) -> str:
    """The indent of a span's children: its own, plus a bar while siblings follow it (encoded: "|" or " ")."""
    if not branch:
        return indent
    inner = indent + ("|" if branch == "├" else " ")
    return inner if len(inner) <= _MAX_LEVELS else "…" + inner[-(_MAX_LEVELS - 1):]


def _start_key(span: Span) -> tuple[int, int, str, str]:
    return (span["start_ns"], span["end_ns"], span["name"], span["span_id"])


def group_traces(spans: Iterable[Span]) -> list[Trace]:
    """Group spans into traces ordered by start time (first root's start)."""
    by_trace: dict[str, dict[str, Span]] = {}
    for span in spans:
        # setdefault drops duplicates, e.g. the same line read twice.
        by_trace.setdefault(span["trace_id"], {}).setdefault(span["span_id"], span)
    traces = [_build_trace(trace_id, members) for trace_id, members in by_trace.items()]
    traces.sort(key=lambda t: (t.roots[0]["start_ns"] if t.roots else t.start_ns, t.trace_id))
    return traces


def _build_trace(trace_id: str, members: dict[str, Span]) -> Trace:
    ordered = sorted(members.values(), key=_start_key)
    roots: list[Span] = []
    children: dict[str, list[Span]] = {}
    for span in ordered:
        parent = span["parent_span_id"]
        if parent is None or parent not in members or parent == span["span_id"]:
            roots.append(span)
        else:
            children.setdefault(parent, []).append(span)
    trace = Trace(
        trace_id=trace_id,
        spans=ordered,
        roots=roots,
        children=children,
        start_ns=min(s["start_ns"] for s in ordered),
        end_ns=max(s["end_ns"] for s in ordered),
    )
    # Spans caught in a parent cycle are unreachable from any root: promote
    # the earliest of each cycle to a root rather than drop them.
    reached = {span["span_id"] for span, _, _ in trace.walk()}
    for span in ordered:
        if span["span_id"] not in reached:
            roots.append(span)
            reached.update(s["span_id"] for s, _, _ in trace._walk_from([span]))
    roots.sort(key=_start_key)
    return trace


def select(
    traces: Sequence[Trace],
    trace_id: str | None = None,
    last: int | None = None,
) -> list[Trace]:
    """Filter by trace id (exact, or a unique-enough prefix) and keep the ``last`` most recent traces."""
    chosen = list(traces)
    if trace_id:
        wanted = trace_id.lower()
        exact = [t for t in chosen if t.trace_id == wanted]
        chosen = exact or [t for t in chosen if t.trace_id.startswith(wanted)]
    if last is not None:
        chosen = chosen[-last:] if last > 0 else []
    return chosen


# --- rendering -------------------------------------------------------------


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
    (an event: a mark), then error marker and key attributes. Lines fit in ``width`` (at least 40) except a
    header whose trace id alone does not. Every text from the data is shown with control characters escaped.
    """
    glyphs = _ASCII if ascii else _UNICODE
    width = max(width, 40)
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
    tokens_in = attrs.get("gen_ai.usage.input_tokens")
    tokens_out = attrs.get("gen_ai.usage.output_tokens")
    if tokens_in is not None or tokens_out is not None:
        parts.append(f"tokens {_or_unknown(tokens_in)}{arrow}{_or_unknown(tokens_out)}")
    if spent := cost.describe(attrs):  # an attempt's cost next to its tokens; a turn's or subagent's total
        parts.append(_text(spent))
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
