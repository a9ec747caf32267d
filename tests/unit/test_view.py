"""Terminal waterfall: loading files, grouping, selection and exact rendering."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode, Tracer, set_span_in_context

from hermes_otel.cli.view import group_traces, load_spans, render, select
from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


class CountingIds(IdGenerator):
    """Predictable ids so rendered output can be compared verbatim."""

    def __init__(self) -> None:
        self._traces = itertools.count(0xA1)
        self._spans = itertools.count(1)

    def generate_trace_id(self) -> int:
        return next(self._traces) << 64

    def generate_span_id(self) -> int:
        return next(self._spans)


def trace_id(n: int) -> str:
    return f"{n << 64:032x}"


def make_provider(writer: RotatingJsonLinesWriter) -> TracerProvider:
    provider = TracerProvider(id_generator=CountingIds())
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    return provider


def record_turn(tracer: Tracer, start: int) -> None:
    """turn → chat → execute_tool (→ middleware) → chat, with fixed timestamps."""
    turn = tracer.start_span("turn", start_time=start)
    ctx = set_span_in_context(turn)
    chat = tracer.start_span(
        "chat gpt-4o",
        context=ctx,
        start_time=start,
        attributes={
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 11,
            "gen_ai.usage.output_tokens": 7,
        },
    )
    chat.end(start + 300 * MS)
    tool = tracer.start_span(
        "execute_tool web_search",
        context=ctx,
        start_time=start + 300 * MS,
        attributes={"gen_ai.tool.name": "web_search", "gen_ai.tool.call.id": "call_1"},
    )
    guard = tracer.start_span(
        "middleware pre_tool_call",
        context=set_span_in_context(tool),
        start_time=start + 310 * MS,
        attributes={"hermes.middleware.plugin": "guard", "hermes.middleware.outcome": "allow"},
    )
    guard.end(start + 320 * MS)
    tool.end(start + 500 * MS)
    retry = tracer.start_span(
        "chat gpt-4o",
        context=ctx,
        start_time=start + 500 * MS,
        attributes={
            "gen_ai.request.model": "gpt-4o",
            "hermes.api.attempt": 2,
            "error.type": "TimeoutError",
        },
    )
    retry.set_status(Status(StatusCode.ERROR, "timed out"))
    retry.end(start + 1000 * MS)
    turn.end(start + 1000 * MS)


@pytest.fixture
def otel_dir(tmp_path: Path) -> Path:
    """Two turns, 5 s apart, written through the real file exporter."""
    directory = tmp_path / "otel"
    writer = RotatingJsonLinesWriter(file_paths(directory)["traces"])
    provider = make_provider(writer)
    tracer = provider.get_tracer("hermes")
    record_turn(tracer, T0)
    record_turn(tracer, T0 + 5000 * MS)
    provider.shutdown()
    return directory


EXPECTED_FIRST = [
    f"trace {trace_id(0xA1)}  turn  1.00 s  5 spans",
    "turn                              1.00 s  ████████████████████████",
    "├─ chat gpt-4o                  300.0 ms  ███████                   "
    "model gpt-4o→gpt-4o-2024-08-06  tokens 11→7",
    "├─ execute_tool web_search      200.0 ms         █████              call call_1",
    "│ └─ middleware pre_tool_call    10.0 ms         █                  "
    "plugin guard  outcome allow",
    "└─ chat gpt-4o                  500.0 ms              ████████████  "
    "✗ ERROR TimeoutError  model gpt-4o  attempt 2",
]


def test_render_exact_waterfall(otel_dir: Path) -> None:
    traces = group_traces(load_spans(otel_dir))
    output = render(traces[:1], width=120)
    assert output.splitlines() == EXPECTED_FIRST


def test_render_ascii_and_truncation(otel_dir: Path) -> None:
    traces = group_traces(load_spans(otel_dir))[:1]
    lines = render(traces, width=80, ascii=True).splitlines()
    assert lines == [
        f"trace {trace_id(0xA1)}  turn  1.00 s  5 spans",
        "turn                              1.00 s  ################",
        "|- chat gpt-4o                  300.0 ms  #####             model gpt-4o->gpt...",
        "|- execute_tool web_search      200.0 ms       ###          call call_1",
        "| `- middleware pre_tool_call    10.0 ms       #            plugin guard  out...",
        "`- chat gpt-4o                  500.0 ms          ########  ERR TimeoutError ...",
    ]
    assert all(len(line) <= 80 for line in lines)

    narrow = render(traces, width=60).splitlines()
    assert narrow[4].startswith("│ └─ middleware pre_too…    10.0 ms")
    assert all(len(line) <= 60 for line in narrow[1:])  # the 32-char id does not fit


def test_render_color_only_adds_escape_codes(otel_dir: Path) -> None:
    traces = group_traces(load_spans(otel_dir))[:1]
    colored = render(traces, width=120, color=True)
    assert "\x1b[31m" in colored  # the failed chat is red
    plain = colored
    for code in ("\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[33m", "\x1b[34m", "\x1b[36m"):
        plain = plain.replace(code, "")
    assert plain.splitlines() == EXPECTED_FIRST


def test_group_traces_builds_tree_in_start_order(otel_dir: Path) -> None:
    traces = group_traces(load_spans(otel_dir))
    assert [t.trace_id for t in traces] == [trace_id(0xA1), trace_id(0xA2)]
    first = traces[0]
    assert first.name == "turn" and len(first.roots) == 1
    assert first.start_ns == T0 and first.duration_ns == 1000 * MS
    kids = first.children[first.roots[0]["span_id"]]
    assert [k["name"] for k in kids] == ["chat gpt-4o", "execute_tool web_search", "chat gpt-4o"]
    assert [(s["name"], depth) for s, depth, _ in first.walk()] == [
        ("turn", 0),
        ("chat gpt-4o", 1),
        ("execute_tool web_search", 1),
        ("middleware pre_tool_call", 2),
        ("chat gpt-4o", 1),
    ]


def test_select_by_trace_id_and_last(otel_dir: Path) -> None:
    traces = group_traces(load_spans(otel_dir))
    second = trace_id(0xA2)
    assert [t.trace_id for t in select(traces, trace_id=second)] == [second]
    assert [t.trace_id for t in select(traces, trace_id=second[:18].upper())] == [second]
    assert select(traces, trace_id="ffff") == []
    assert [t.trace_id for t in select(traces, last=1)] == [second]
    assert len(select(traces, last=5)) == 2
    assert select(traces, last=0) == []
    assert select(traces) == traces

    output = render(select(traces, last=1), width=120)
    assert output.splitlines()[0] == f"trace {second}  turn  1.00 s  5 spans"


def test_garbled_lines_are_skipped_and_counted(otel_dir: Path) -> None:
    path = file_paths(otel_dir)["traces"]
    good = load_spans(otel_dir)
    with path.open("a") as f:
        f.write("\n")  # blank: ignored, not counted
        f.write('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}\n')
        f.write(path.read_text().splitlines()[0][:57])  # truncated by a crash

    loaded = load_spans(otel_dir)
    assert loaded.bad_lines == 2
    assert loaded == good
    assert render(group_traces(loaded)) == render(group_traces(good))


def test_load_reads_rotated_backups_oldest_first(tmp_path: Path) -> None:
    directory = tmp_path / "otel"
    writer = RotatingJsonLinesWriter(file_paths(directory)["traces"], max_bytes=2500, backups=5)
    provider = make_provider(writer)
    for n in range(3):
        record_turn(provider.get_tracer("hermes"), T0 + n * 5000 * MS)
    provider.shutdown()
    assert (directory / "traces.jsonl.1").exists()

    loaded = load_spans(directory)
    assert loaded.files[-1] == directory / "traces.jsonl"
    assert [p.name for p in loaded.files[:-1]] == sorted(  # the highest-numbered backup is the newest
        (p.name for p in loaded.files[:-1]), key=lambda name: int(name.rsplit(".", 1)[1])
    )
    assert len(loaded) == 15 and loaded.bad_lines == 0
    starts = [s["start_ns"] for s in loaded if s["name"] == "turn"]
    assert starts == sorted(starts)
    assert len(group_traces(loaded)) == 3

    single = load_spans(directory / "traces.jsonl")
    assert single.files == [directory / "traces.jsonl"]


def test_load_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_spans(tmp_path / "nope.jsonl")
    assert load_spans(tmp_path) == []  # a directory without traces is just empty


def span(span_id: str, parent: str | None, name: str, start_ms: int, end_ms: int) -> dict:
    return {
        "trace_id": "ab" * 16,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "kind": 1,
        "start_ns": start_ms * MS,
        "end_ns": end_ms * MS,
        "attributes": {},
        "events": [],
        "status_code": 0,
        "status_message": "",
        "resource": {},
    }


def test_orphans_and_cycles_render_as_roots() -> None:
    spans = [
        span("01", "ff", "chat orphan", 0, 40),  # parent never exported
        span("02", "01", "execute_tool t", 10, 20),
        span("03", "04", "loop a", 50, 60),  # parent cycle: unreachable from a root
        span("04", "03", "loop b", 60, 70),
        span("02", "01", "execute_tool t", 10, 20),  # duplicate line
    ]
    (trace,) = group_traces(spans)
    assert len(trace.spans) == 4
    assert [r["name"] for r in trace.roots] == ["chat orphan", "loop a"]
    assert render([trace], width=72).splitlines() == [
        f"trace {'ab' * 16}  chat orphan  70.0 ms  4 spans",
        "chat orphan          40.0 ms  ████████",
        "└─ execute_tool t    10.0 ms    ██",
        "loop a               10.0 ms            ██",
        "└─ loop b            10.0 ms              ██",
    ]


def test_header_shortens_only_the_root_name() -> None:
    (trace,) = group_traces([span("01", None, "invoke_agent " + "x" * 60, 0, 40)])
    header = render([trace], width=72).splitlines()[0]
    assert header == f"trace {'ab' * 16}  invoke_agent x…  40.0 ms  1 span"
    assert len(header) == 72


def test_render_nothing() -> None:
    assert render([]) == ""
