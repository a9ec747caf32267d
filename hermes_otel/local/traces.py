"""The local record as traces: every span (:func:`load_spans`), the newest traces read back from the end of the
files, or one trace found by its id (:func:`read_traces`), grouped into span trees (:class:`Trace`).

Memory holds what is asked for, not the files. One reader for `hermes-otel view`, `hermes-otel cost` and the
dashboard's Traces tab.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..redaction.masking import printable
from .decode import HEX_ID, Span
from .files import Counter, batches, trace_files

__all__ = ["LoadedSpans", "Reading", "RequestError", "Trace", "build_trace", "group_traces", "load_spans",
           "read_traces", "select"]

# The newest traces: reading back stops once a line's spans all ended this long before the oldest trace it shows
# began: a batch is written within seconds of its spans' end, so no span of a shown trace can lie further back.
MARGIN_NS = 10 * 60 * 1_000_000_000


class RequestError(Exception):
    """A request the files cannot answer (an ambiguous or malformed trace id); the message is for the user.
    `usage` is true when the request itself is malformed."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


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
    counter = Counter()
    for batch in batches(spans.files, counter):
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
    bytes_read: int = 0


def read_traces(path: Path, *, trace_id: str | None = None, last: int = 5, max_bytes: int | None = None) -> Reading:
    """The traces to show: the one whose id is (or starts with) `trace_id`, else the `last` newest, read from no more
    than `max_bytes` of the newest lines (then `complete` is False)."""
    files = trace_files(Path(path))
    if trace_id is not None:
        return _one_trace(files, trace_id)
    return _newest(files, last, max_bytes)


def _one_trace(files: list[Path], wanted: str) -> Reading:
    wanted = wanted.strip().lower()
    if not 1 <= len(wanted) <= 32 or not HEX_ID.fullmatch(wanted):
        raise RequestError(f"not a trace id: {printable(wanted)[:40]!r} (expected 1 to 32 hexadecimal digits)",
                           usage=True)
    needle = wanted.encode()
    counter = Counter()
    found: dict[str, dict[str, Span]] = {}
    for batch in batches(files, counter, keep=lambda line: needle in line or needle.upper() in line):
        for span in batch:
            if span["trace_id"].startswith(wanted):
                spans = found.setdefault(span["trace_id"], {})
                if len(found) <= 1:  # past one match the id is ambiguous: keep names only, not spans
                    spans.setdefault(span["span_id"], span)
    if len(found) > 1:
        shown = ", ".join(sorted(found)[:5]) + (", …" if len(found) > 5 else "")
        raise RequestError(f"{len(found)} traces start with {wanted!r} ({shown}); give more of the id")
    traces = [build_trace(tid, members) for tid, members in found.items()]
    return Reading(traces, files, counter.lines, counter.bad)


def _newest(files: list[Path], last: int, max_bytes: int | None) -> Reading:
    """Read back from the end until no older line can hold a span of the `last` newest traces."""
    counter = Counter()
    found: dict[str, dict[str, Span]] = {}
    starts: dict[str, int] = {}
    cutoff: int | None = None  # the start of the `last`-th newest trace read so far (recomputed now and then)
    complete = True

    def oldest_shown() -> int | None:
        return min(heapq.nlargest(last, starts.values())) if len(starts) >= last else None

    for n, batch in enumerate(batches(files, counter, newest_first=True)):
        if max_bytes is not None and counter.bytes > max_bytes:
            complete = False
            break
        line_end = max(span["end_ns"] for span in batch)
        if n % 1024 == 0 or cutoff is None:
            cutoff = oldest_shown()
        if cutoff is not None and line_end < cutoff - MARGIN_NS:
            cutoff = oldest_shown()  # exact before deciding
            if cutoff is not None and line_end < cutoff - MARGIN_NS:
                complete = False
                break
        for span in batch:
            tid = span["trace_id"]
            found.setdefault(tid, {}).setdefault(span["span_id"], span)
            starts[tid] = min(starts.get(tid, span["start_ns"]), span["start_ns"])
    traces = select(group_traces(s for members in found.values() for s in members.values()), last=last)
    return Reading(traces, files, counter.lines, counter.bad, complete, counter.bytes)


# -- trees -----------------------------------------------------------------------------------------------------------

MAX_LEVELS = 12  # of tree drawing; a deeper span shows "…" and the innermost levels, so its name keeps room


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

        ``indent`` encodes the tree drawing of the ancestors (at most MAX_LEVELS of them), ``branch`` says
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
            inner = child_indent(indent, branch)
            for index in range(len(kids) - 1, -1, -1):
                stack.append((kids[index], depth + 1, inner, "└" if index == len(kids) - 1 else "├"))


def child_indent(indent: str, branch: str) -> str:
    """The indent of a span's children: its own, plus a bar while siblings follow it (encoded: "|" or " ")."""
    if not branch:
        return indent
    inner = indent + ("|" if branch == "├" else " ")
    return inner if len(inner) <= MAX_LEVELS else "…" + inner[-(MAX_LEVELS - 1):]


def _start_key(span: Span) -> tuple[int, int, str, str]:
    return (span["start_ns"], span["end_ns"], span["name"], span["span_id"])


def group_traces(spans: Iterable[Span]) -> list[Trace]:
    """Group spans into traces ordered by start time (first root's start)."""
    by_trace: dict[str, dict[str, Span]] = {}
    for span in spans:
        # setdefault drops duplicates, e.g. the same line read twice.
        by_trace.setdefault(span["trace_id"], {}).setdefault(span["span_id"], span)
    traces = [build_trace(trace_id, members) for trace_id, members in by_trace.items()]
    traces.sort(key=lambda t: (t.roots[0]["start_ns"] if t.roots else t.start_ns, t.trace_id))
    return traces


def build_trace(trace_id: str, members: dict[str, Span]) -> Trace:
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
