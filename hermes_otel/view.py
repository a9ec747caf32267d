"""Terminal waterfall of the traces written by the JSON-lines file exporter.

``load_spans`` reads the files, ``group_traces`` builds span trees,
``select`` picks traces and ``render`` draws them; the CLI wires these up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exporters.otlp_json import DECODE_ERRORS, decode_spans_json

__all__ = ["LoadedSpans", "Trace", "group_traces", "load_spans", "render", "select"]

Span = dict[str, Any]

_TRACES_FILE = "traces.jsonl"
_STATUS_ERROR = 2


class LoadedSpans(list[Span]):
    """The decoded spans, plus how many lines had to be skipped."""

    def __init__(self) -> None:
        super().__init__()
        self.bad_lines = 0
        self.files: list[Path] = []


def load_spans(path: Path) -> LoadedSpans:
    """Read spans from a traces file, or from a directory's ``traces.jsonl``
    and its rotated backups (oldest first).

    Lines that are not a valid request (typically a last line truncated by a
    crash or a full disk) are skipped and counted in ``bad_lines``.
    """
    spans = LoadedSpans()
    spans.files = _trace_files(Path(path))
    for file in spans.files:
        # errors="replace": a line cut mid-character just fails to parse below.
        with file.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    spans.extend(decode_spans_json(json.loads(line)))
                except DECODE_ERRORS:  # json.JSONDecodeError is a ValueError
                    spans.bad_lines += 1
    return spans


def _trace_files(path: Path) -> list[Path]:
    if not path.is_dir():
        if not path.exists():
            raise FileNotFoundError(path)
        return [path]
    backup = re.compile(re.escape(_TRACES_FILE) + r"\.(\d+)")
    numbered = [
        (int(match.group(1)), child)
        for child in path.iterdir()
        if (match := backup.fullmatch(child.name)) and child.is_file()
    ]
    files = [child for _, child in sorted(numbered, reverse=True)]  # .N is the oldest
    current = path / _TRACES_FILE
    return files + [current] if current.is_file() else files


@dataclass
class Trace:
    """One trace's spans as a forest: roots plus a parent → children map.

    Spans whose parent is not in the data (not exported yet, or rotated away)
    are treated as roots.
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

    def walk(self) -> Iterator[tuple[Span, int, tuple[bool, ...]]]:
        """Yield ``(span, depth, last_flags)`` depth-first in start order.

        ``last_flags[i]`` says whether the ancestor at depth ``i + 1`` (or the
        span itself, for the final entry) is the last of its siblings.
        """
        return self._walk_from(self.roots)

    def _walk_from(self, roots: Sequence[Span]) -> Iterator[tuple[Span, int, tuple[bool, ...]]]:
        seen: set[str] = set()
        stack: list[tuple[Span, int, tuple[bool, ...]]] = [
            (root, 0, ()) for root in reversed(roots)
        ]
        while stack:
            span, depth, flags = stack.pop()
            if span["span_id"] in seen:  # guards against parent cycles
                continue
            seen.add(span["span_id"])
            yield span, depth, flags
            kids = self.children.get(span["span_id"], [])
            for index in range(len(kids) - 1, -1, -1):
                stack.append((kids[index], depth + 1, flags + (index == len(kids) - 1,)))


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
    """Filter by trace id (exact, or a unique-enough prefix) and keep the
    ``last`` most recent traces."""
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


_UNICODE = _Glyphs("├─ ", "└─ ", "│ ", "█", "✗ ERROR", "→", "…")
_ASCII = _Glyphs("|- ", "`- ", "| ", "#", "ERR", "->", "...")

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


def render(
    traces: Sequence[Trace],
    *,
    width: int = 100,
    color: bool = False,
    ascii: bool = False,
) -> str:
    """Draw each trace as a header line plus one waterfall line per span.

    Columns: tree and name, duration, a bar on the trace's time axis, then
    error marker and key attributes. Lines fit in ``width`` (at least 40)
    except a header whose trace id alone does not.
    """
    glyphs = _ASCII if ascii else _UNICODE
    width = max(width, 40)
    bar_width = max(10, width // 5)
    rows = [list(trace.walk()) for trace in traces]
    longest = max((len(_label(s, f, glyphs)) for r in rows for s, _, f in r), default=0)
    label_width = min(max(longest, 12), width * 2 // 5)
    tail_width = width - label_width - _DURATION_WIDTH - bar_width - 3 * len(_GAP)

    blocks: list[str] = []
    for trace, trace_rows in zip(traces, rows):
        lines = [_header(trace, width, color, glyphs)]
        for span, _, flags in trace_rows:
            label = _fit(_label(span, flags, glyphs), label_width, glyphs).ljust(label_width)
            duration = _duration(span["end_ns"] - span["start_ns"]).rjust(_DURATION_WIDTH)
            bar = _bar(trace, span, bar_width, glyphs)
            tail = _fit(_tail(span, glyphs), tail_width, glyphs)
            if color:
                label, duration, bar, tail = _paint(span, label, duration, bar, tail, glyphs)
            lines.append(_GAP.join((label, duration, bar, tail)).rstrip())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _header(trace: Trace, width: int, color: bool, glyphs: _Glyphs) -> str:
    count = len(trace.spans)
    duration = _duration(trace.duration_ns)
    suffix = f"  {duration}  {count} span{'' if count == 1 else 's'}"
    prefix = f"trace {trace.trace_id}  "
    # Only the root name gives way; the id and the numbers are always shown.
    room = max(width - len(prefix) - len(suffix), 4)
    text = prefix + _fit(trace.name, room, glyphs) + suffix
    return f"{_BOLD}{text}{_RESET}" if color else text


def _label(span: Span, flags: tuple[bool, ...], glyphs: _Glyphs) -> str:
    if not flags:
        return span["name"]
    prefix = "".join("  " if last else glyphs.pipe for last in flags[:-1])
    return prefix + (glyphs.last if flags[-1] else glyphs.branch) + span["name"]


def _duration(ns: int) -> str:
    ms = ns / 1e6
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _bar(trace: Trace, span: Span, width: int, glyphs: _Glyphs) -> str:
    total = trace.duration_ns
    if total <= 0:
        first, last = 0, 1
    else:
        # Both edges come from the time axis (not start + rounded length), so a
        # span that starts where its sibling ends starts in the same cell.
        first = min(width - 1, round((span["start_ns"] - trace.start_ns) * width / total))
        last = round((span["end_ns"] - trace.start_ns) * width / total)
        last = min(width, max(first + 1, last))
    return " " * first + glyphs.bar * (last - first) + " " * (width - last)


def _tail(span: Span, glyphs: _Glyphs) -> str:
    # Most telling first, since the tail is what gets truncated.
    attrs = span["attributes"]
    error_type = attrs.get("error.type")
    parts: list[str] = []
    if span["status_code"] == _STATUS_ERROR:
        parts.append(f"{glyphs.error} {error_type}" if error_type else glyphs.error)
    elif error_type:
        parts.append(f"error {error_type}")
    parts.extend(_key_attributes(attrs, span["name"], glyphs.arrow))
    return _GAP.join(parts)


def _key_attributes(attrs: Mapping[str, Any], name: str, arrow: str) -> list[str]:
    parts: list[str] = []
    request, response = attrs.get("gen_ai.request.model"), attrs.get("gen_ai.response.model")
    if request and response and request != response:
        parts.append(f"model {request}{arrow}{response}")
    elif request or response:
        parts.append(f"model {request or response}")
    tool = attrs.get("gen_ai.tool.name")
    if tool and not name.endswith(str(tool)):  # "execute_tool <name>" already says it
        parts.append(f"tool {tool}")
    if call_id := attrs.get("gen_ai.tool.call.id"):
        parts.append(f"call {call_id}")
    tokens_in = attrs.get("gen_ai.usage.input_tokens")
    tokens_out = attrs.get("gen_ai.usage.output_tokens")
    if tokens_in is not None or tokens_out is not None:
        parts.append(f"tokens {_or_unknown(tokens_in)}{arrow}{_or_unknown(tokens_out)}")
    if plugin := attrs.get("hermes.middleware.plugin"):
        parts.append(f"plugin {plugin}")
    if outcome := attrs.get("hermes.middleware.outcome"):
        parts.append(f"outcome {outcome}")
    attempt = attrs.get("hermes.api.attempt")
    if isinstance(attempt, int) and attempt > 1:
        parts.append(f"attempt {attempt}")
    return parts


def _or_unknown(value: Any) -> str:
    return "?" if value is None else str(value)


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
