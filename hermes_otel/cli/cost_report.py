"""`hermes-otel cost`: what the recorded runs cost, from the embedded OTLP-JSON trace files and the spool.

Every priced (or unpriceable) chat attempt is one input: its `hermes.usage.cost` and token counts. Each is
attributed through its trace: the session, turn and profile of the trace's root turn (a subagent's attempts
count for the session and turn that delegated them, as Hermes counts them), the role of the nearest subagent
above it, the model it was priced at, and the UTC day it started. The files are streamed; only what the report
needs is kept. Their content is untrusted: a value of the wrong type is treated as missing. By default the
spool's traces (what an OTLP endpoint has not taken yet) are read too; a span found in both counts once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..cost import pricing as cost
from ..local.files import Counter, batches, trace_files
from ..redaction.masking import printable

BY = ("session", "turn", "model", "profile", "subagent", "day", "purpose")
SCHEMA = "hermes-otel.cost.v1"
MAIN = "(main)"  # the subagent key of attempts made by no subagent
UNKNOWN = "(unknown)"
MAIN_PURPOSE = "main"  # the purpose key of the main loop's attempts
_TOKENS = (("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens"),
           ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
           ("cache_write_tokens", "gen_ai.usage.cache_write.input_tokens"),
           ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"))
_V1_41 = {"gen_ai.usage.cache_write.input_tokens": "gen_ai.usage.cache_creation.input_tokens"}  # files written before
_DURATION = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
NOT_FINITE = "not_finite"  # the reason of an attempt whose recorded amount is infinite or NaN
_REASONS = {**cost.REASONS, NOT_FINITE: "its recorded amount is not a finite number"}


@dataclass(frozen=True)
class Attempt:
    """One chat attempt as the report counts it."""

    start_ns: int
    amount: Decimal | None  # None: could not be priced
    reason: str | None
    provider: bool  # the amount is what the provider reported (else Hermes's estimate)
    tokens: tuple[int, ...]
    keys: dict[str, str]  # by -> key


@dataclass
class Row:
    key: str
    amount: Decimal = Decimal(0)
    attempts: int = 0
    priced: int = 0
    provider_amount: Decimal = Decimal(0)  # the part of `amount` the providers reported
    reported: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=lambda: [0] * len(_TOKENS))
    first_ns: int = 0
    last_ns: int = 0

    def add(self, attempt: Attempt) -> None:
        self.attempts += 1
        if attempt.amount is None:
            reason = attempt.reason or UNKNOWN
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
        else:
            self.amount += attempt.amount
            self.priced += 1
            if attempt.provider:
                self.provider_amount += attempt.amount
                self.reported += 1
        self.tokens = [a + b for a, b in zip(self.tokens, attempt.tokens, strict=True)]
        self.first_ns = min(self.first_ns or attempt.start_ns, attempt.start_ns)
        self.last_ns = max(self.last_ns, attempt.start_ns)

    @property
    def unpriced(self) -> int:
        return self.attempts - self.priced

    @property
    def status(self) -> str:
        if self.unpriced:
            return "partial" if self.priced else "unknown"
        return "actual" if self.reported == self.priced and self.priced else "estimated"

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key, "cost_usd": float(self.amount), "provider_cost_usd": float(self.provider_amount),
            "status": self.status, "attempts": self.attempts,
            "priced": self.priced, "unpriced": self.unpriced, "unpriced_reasons": dict(sorted(self.reasons.items())),
            **{name: value for (name, _), value in zip(_TOKENS, self.tokens, strict=True)},
            "first_seen": _iso(self.first_ns), "last_seen": _iso(self.last_ns),
        }


@dataclass
class Report:
    by: str
    since_ns: int | None
    rows: list[Row]
    total: Row
    files: list[Path]
    bad_lines: int = 0

    def as_json(self) -> dict[str, Any]:
        total = self.total.as_json()
        del total["key"]
        return {"schema": SCHEMA, "by": self.by, "since": _iso(self.since_ns) if self.since_ns else None,
                "currency": "USD", "files": [str(f) for f in self.files], "skipped_lines": self.bad_lines,
                "rows": [row.as_json() for row in self.rows], "total": total}


# -- reading ---------------------------------------------------------------------------------------------------


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> float | None:
    """A finite amount, else None: an infinite or NaN price (`1e400` from a model server) is unknown, never summed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _kept(span: dict) -> bool:
    """Chat attempts with a cost status, turns and subagents: all the report reads."""
    name = span["name"]
    attributes = span["attributes"]
    if name.startswith("chat") and attributes.get(cost.USAGE_COST_STATUS) is not None:
        return True
    return name.startswith(("invoke_agent", "subagent"))


def _slim(span: dict) -> dict:
    return {k: span[k] for k in ("trace_id", "span_id", "parent_span_id", "name", "start_ns", "attributes")}


def read_spans(paths: Path | Iterable[Path]) -> tuple[list[dict], list[Path], int]:
    """The spans the report needs from traces files or directories (each span once), and the lines it had to
    skip."""
    files = [f for path in ([paths] if isinstance(paths, Path) else paths) for f in _files(Path(path))]
    counter = Counter()
    spans: dict[tuple[str, str], dict] = {}
    for batch in batches(files, counter):
        spans.update(((s["trace_id"], s["span_id"]), _slim(s)) for s in batch if _kept(s))
    return list(spans.values()), files, counter.bad


def _files(path: Path) -> list[Path]:
    try:
        return trace_files(path)
    except FileNotFoundError:  # a spool directory drained (and removed) since it was found
        return []


def attempts(spans: Iterable[dict]) -> Iterator[Attempt]:
    """Each chat attempt with a cost status, attributed through its trace."""
    by_id: dict[tuple[str, str], dict] = {}
    for span in spans:
        by_id.setdefault((span["trace_id"], span["span_id"]), span)
    roots: dict[str, dict] = {}  # trace -> its root turn (the top-level turn: a trace is one user turn)
    for span in by_id.values():
        if span["name"].startswith("invoke_agent") and span["parent_span_id"] is None:
            roots.setdefault(span["trace_id"], span)
    role = _Roles(by_id)
    for span in sorted(by_id.values(), key=lambda s: (s["start_ns"], s["span_id"])):
        attrs = span["attributes"]
        if not span["name"].startswith("chat") or attrs.get(cost.USAGE_COST_STATUS) is None:
            continue
        root = roots.get(span["trace_id"])
        top = root["attributes"] if root is not None else {}
        recorded = attrs.get(cost.USAGE_COST)
        amount = _number(recorded)
        yield Attempt(
            start_ns=span["start_ns"],
            amount=Decimal(repr(amount)) if amount is not None else None,
            reason=NOT_FINITE if amount is None and isinstance(recorded, float) else _str(
                attrs.get(cost.USAGE_COST_REASON)),
            provider=attrs.get(cost.USAGE_COST_SOURCE) == cost.PROVIDER,
            tokens=tuple(_count(attrs.get(key, attrs.get(_V1_41.get(key)))) for _, key in _TOKENS),
            keys={
                "session": _str(top.get("gen_ai.conversation.id")) or _str(attrs.get("gen_ai.conversation.id"))
                or UNKNOWN,
                "turn": _str(top.get("hermes.turn.id")) or _str(attrs.get("hermes.turn.id")) or UNKNOWN,
                "model": _str(attrs.get("gen_ai.request.model")) or UNKNOWN,
                "profile": _str(top.get(cost.PROFILE)) or UNKNOWN,
                "subagent": role(span),
                "day": dt.datetime.fromtimestamp(span["start_ns"] / 1e9, dt.UTC).date().isoformat(),
                # an auxiliary call's Hermes task (titles, compression, ...); the main loop's calls carry none
                "purpose": _str(attrs.get("hermes.llm.purpose")) or MAIN_PURPOSE,
            },
        )


def _is_subagent(span: dict) -> bool:
    """A subagent's span: `invoke_agent hermes` with its attributes (named `subagent {role}` by earlier versions)."""
    attrs = span["attributes"]
    return "hermes.subagent.id" in attrs or "hermes.subagent.role" in attrs or span["name"].startswith("subagent")


class _Roles:
    """The role of the nearest subagent span above a span (chat -> its turn -> the subagent), else MAIN.

    Each span's answer is kept, so the walks up all parent chains together visit each span once: linear in the
    spans, however deep the chains."""

    def __init__(self, by_id: dict[tuple[str, str], dict]) -> None:
        self._by_id = by_id
        self._known: dict[tuple[str, str], str] = {}

    def __call__(self, span: dict) -> str:
        walked: list[tuple[str, str]] = []
        seen: set[tuple[str, str]] = set()
        current, role = span, MAIN
        while True:
            key = (current["trace_id"], current["span_id"])
            if key in self._known:
                role = self._known[key]
                break
            if key in seen:  # a parent cycle
                break
            seen.add(key)
            walked.append(key)
            parent_id = current["parent_span_id"]
            parent = self._by_id.get((current["trace_id"], parent_id)) if parent_id is not None else None
            if parent is None:
                break
            if _is_subagent(parent):
                role = _str(parent["attributes"].get("hermes.subagent.role")) or UNKNOWN
                break
            current = parent
        for key in walked:  # none of them is a subagent below the one found: they share its role
            self._known[key] = role
        return role


def report(paths: Path | Iterable[Path], by: str = "session", since_ns: int | None = None) -> Report:
    spans, files, bad = read_spans(paths)
    rows: dict[str, Row] = {}
    total = Row("total")
    for attempt in attempts(spans):
        if since_ns is not None and attempt.start_ns < since_ns:
            continue
        key = attempt.keys[by]
        rows.setdefault(key, Row(key)).add(attempt)
        total.add(attempt)
    ordered = sorted(rows.values(), key=lambda r: r.key) if by == "day" else sorted(
        rows.values(), key=lambda r: (-r.amount, -r.attempts, r.key))
    return Report(by, since_ns, ordered, total, files, bad)


# -- options and output ----------------------------------------------------------------------------------------


def parse_since(text: str, now: dt.datetime | None = None) -> int:
    """`30m`, `24h`, `7d`, `2w` (back from now), or an ISO date/time (UTC unless it says otherwise) -> ns."""
    now = now or dt.datetime.now(dt.UTC)
    value = text.strip()
    match = _DURATION.fullmatch(value)
    if match:
        try:
            when = now - dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])
        except (OverflowError, ValueError):
            raise argparse.ArgumentTypeError(
                f"{printable(text)[:40]!r} reaches back before the year 1; give a shorter duration") from None
    else:
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a duration (30m, 24h, 7d, 2w) or an ISO date or time (2026-12-01, 2026-12-01T09:00Z), "
                f"found {printable(text)[:40]!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    try:
        return int(when.timestamp() * 1e9)
    except (OverflowError, ValueError):  # an aware time at the very edge of the calendar
        raise argparse.ArgumentTypeError(f"{printable(text)[:40]!r} is out of range") from None


def _iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def render_table(result: Report) -> str:
    total = result.total
    reported = bool(total.reported)  # a column for the providers' own figures, when some reported one

    def cells(row: Row, key: str, first_seen: str) -> list[str]:
        provider = [cost.format_usd(float(row.provider_amount))] if reported else []
        return [key, cost.format_usd(float(row.amount)), *provider, row.status, str(row.attempts), str(row.unpriced),
                str(row.tokens[0]), str(row.tokens[1]), first_seen]

    header = [result.by, "cost", *(["by provider"] if reported else []), "status", "attempts", "unpriced", "input",
              "output", "first seen (UTC)"]
    lines = [cells(r, printable(r.key), _iso(r.first_ns)) for r in result.rows]
    footer = cells(total, "total", "")
    widths = [max(len(row[i]) for row in (header, *lines, footer)) for i in range(len(header))]
    right = {1, 2, 4, 5, 6, 7} if reported else {1, 3, 4, 5, 6}

    def line(cells) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                                   strict=True))).rstrip()

    out = [line(header), line(["-" * w for w in widths]), *(line(row) for row in lines),
           line(["-" * w for w in widths]), line(footer)]
    if reported:
        out.append(f"\n{cost.format_usd(float(total.provider_amount))} of the total is what the providers reported for "
                   f"{total.reported} attempt(s); the rest is Hermes's estimate.")
    if total.reasons:
        why = ", ".join(f"{n} {_REASONS.get(r, r)}" for r, n in sorted(total.reasons.items()))
        out.append(f"\n{total.unpriced} attempt(s) could not be priced: {printable(why)}.")
    return "\n".join(out) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="a traces.jsonl file or its directory (default: the configured "
                        "file.directory, $HERMES_HOME/otel, and the spool's traces)")
    parser.add_argument("--by", choices=BY, default="session", help="group by (default: session)")
    parser.add_argument("--since", type=parse_since, default=None, metavar="WHEN",
                        help="only attempts from then on: 30m, 24h, 7d, 2w, or an ISO date/time (UTC)")
    parser.add_argument("--json", action="store_true", help=f"machine-readable output (schema {SCHEMA})")


def run(args: argparse.Namespace, default_sources: Callable[[], list[Path]]) -> int:
    """`default_sources`: the files directory first, then the spool's traces directory."""
    sources = [Path(args.path).expanduser()] if args.path else default_sources()
    shown = printable(str(sources[0]))
    paths = [p for p in sources if p.exists()]
    if not paths:
        print(f"hermes-otel cost: {shown} does not exist (no run has written telemetry there yet)", file=sys.stderr)
        return 1
    try:
        result = report(paths, args.by, args.since)
    except OSError as exc:
        print(f"hermes-otel cost: cannot read {shown} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    if result.bad_lines:
        print(f"hermes-otel cost: skipped {result.bad_lines} unreadable line(s) in {shown}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(result.as_json(), indent=2) + "\n")
        return 0
    if not result.total.attempts:
        print(f"hermes-otel cost: no priced attempts in {shown}"
              + (" since then" if args.since else "") + " (telemetry from hermes-otel with cost support)",
              file=sys.stderr)
        return 1
    sys.stdout.write(render_table(result))
    return 0
