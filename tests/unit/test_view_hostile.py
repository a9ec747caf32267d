"""Issue 17, items 8, 9, 10, and issue 19's span events: `hermes-otel view` on hostile, broken and big files.

Data cannot drive the terminal; a bad line is skipped and counted, never fatal; deep trees render in linear time
and memory; `--last` reads the end of the files only; bad arguments are said; span events show under their span.
Files are written by the real file exporter, or as OTLP/JSON lines (the format the files hold) where the test
needs thousands of spans or lines no exporter writes."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from hermes_otel.cli import main as cli
from hermes_otel.cli.view import group_traces, load_spans, render
from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
SEC = 1000 * MS


def otlp_line(spans: list[dict]) -> str:
    """One ExportTraceServiceRequest line, as the file exporter writes it."""
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]},
                      separators=(",", ":"))


def raw_span(trace: int, span: int, parent: int | None, name: str, start: int, end: int, **extra) -> dict:
    out = {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": name, "kind": 1,
           "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "status": {}}
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    out.update(extra)
    return out


def view(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["view", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- item 8: escape injection ------------------------------------------------------------------------------------

HOSTILE = {
    "title": "\x1b]0;pwned\x07",
    "clear": "\x1b[2J\x1b[H",
    "clipboard": "\x1b]52;c;ZXZpbCBjb21tYW5k\x07",
    "c1 csi": "\x9b31m",
    "bidi": "abc\u202edcba",
}


def test_data_cannot_drive_the_terminal(tmp_path, capsys):
    directory = tmp_path / "otel"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(
        RotatingJsonLinesWriter(file_paths(directory)["traces"]))))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent " + HOSTILE["title"]) as root:
        root.add_event("note " + HOSTILE["clear"], {"k" + HOSTILE["bidi"]: HOSTILE["c1 csi"]})
        with tracer.start_as_current_span("execute_tool " + HOSTILE["clear"],
                                          attributes={"gen_ai.tool.call.id": HOSTILE["clipboard"],
                                                      "gen_ai.request.model": HOSTILE["c1 csi"],
                                                      "error.type": HOSTILE["bidi"]}):
            pass
    provider.shutdown()
    for color in ("never", "always"):
        code, out, err = view(capsys, str(directory), "--color", color, "--width", "200")
        assert code == 0, err
        for known in ("\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[33m", "\x1b[34m", "\x1b[36m"):
            out = out.replace(known, "")  # our own colours, in --color always
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e"), repr(out)
        assert "invoke_agent \\x1b]0;pwned\\x07" in out
        assert "call \\x1b]52;c;ZXZpbCBjb21tYW5k\\x07" in out
        assert "note \\x1b[2J\\x1b[H" in out  # an event name
        assert "error abc\\u202edcba" in out  # an attribute value


# -- item 9: bad lines, deep trees, big files ----------------------------------------------------------------------


def test_bad_lines_are_skipped_and_counted_never_fatal(tmp_path, capsys):
    good = otlp_line([raw_span(0xA1, 1, None, "invoke_agent hermes", T0, T0 + SEC)])
    bad = [
        good.replace(f'"startTimeUnixNano":"{T0}"', '"startTimeUnixNano":Infinity'),
        good.replace(f'"endTimeUnixNano":"{T0 + SEC}"', '"endTimeUnixNano":1e400'),
        '{"resourceSpans":' + "[" * 100_000 + "]" * 100_000 + "}",  # deeply nested
        otlp_line([raw_span(0xA2, 1, None, "x", T0, T0, attributes=[{"key": "k", "value": {"kvlistValue": {
            "values": [{"key": "k", "value": {"kvlistValue": {"values": []}}}]}}}])]).replace('"traceId"', '"tr"'),
        good[: len(good) // 2],  # cut by a crash
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}',
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join([bad[0], bad[1], good, *bad[2:]]) + "\n")
    code, out, err = view(capsys, str(path), "--ascii")
    assert code == 0
    assert out.splitlines()[0] == f"trace {0xA1 << 0:032x}  invoke_agent hermes  1.00 s  1 span"
    assert err.splitlines() == [
        f"hermes-otel view: skipped 6 unreadable line(s) of 7 in {path} (not OTLP/JSON trace requests)"
    ]
    assert load_spans(path).bad_lines == 6


def _chain(depth: int) -> list[dict]:
    return [raw_span(0xC1, n + 1, n or None, f"layer {n}", T0 + n * MS, T0 + (2 * depth - n) * MS)
            for n in range(depth)]


def _flat(count: int) -> list[dict]:
    return [raw_span(0xC1, 1, None, "root", T0, T0 + 2 * count * MS)] + [
        raw_span(0xC1, n + 2, 1, f"child {n}", T0 + n * MS, T0 + (n + 1) * MS) for n in range(count - 1)]


def _peak_render(tmp_path: Path, spans: list[dict], name: str) -> tuple[int, list[str]]:
    path = tmp_path / name
    path.write_text("\n".join(otlp_line(spans[i:i + 500]) for i in range(0, len(spans), 500)) + "\n")
    loaded = load_spans(path)
    tracemalloc.start()
    try:
        lines = render(group_traces(loaded), width=100, ascii=True).splitlines()
        return tracemalloc.get_traced_memory()[1], lines
    finally:
        tracemalloc.stop()


def test_a_deep_parent_chain_costs_what_a_flat_trace_costs(tmp_path):
    """20,000 spans each the child of the last: the tree drawing is capped, so time and memory stay linear."""
    deep_peak, deep = _peak_render(tmp_path, _chain(20_000), "deep.jsonl")
    flat_peak, flat = _peak_render(tmp_path, _flat(20_000), "flat.jsonl")
    assert len(deep) == len(flat) == 20_001
    assert all(len(line) <= 100 for line in deep[1:])
    assert deep[3].startswith("  `- layer 2 ")
    assert deep[-1].startswith("... ") and "layer 19999" in deep[-1]  # deeper than the drawing: "..." then the name
    assert deep_peak < 2 * flat_peak, (deep_peak, flat_peak)


def _many_traces(path: Path, count: int, spans_per_trace: int = 5) -> None:
    with path.open("w") as f:
        for t in range(count):
            start = T0 + t * SEC
            root = raw_span(0x100 + t, 1, None, f"turn {t}", start, start + 900 * MS)
            kids = [raw_span(0x100 + t, k + 2, 1, f"chat {t}.{k}", start + k * MS, start + (k + 1) * MS)
                    for k in range(spans_per_trace - 1)]
            f.write(otlp_line(kids) + "\n")  # children end first and are written first
            f.write(otlp_line([root]) + "\n")


def test_last_reads_only_the_end_of_the_files(tmp_path, capsys):
    from hermes_otel.cli.view import read_traces

    path = tmp_path / "traces.jsonl"
    _many_traces(path, 5000)
    reading = read_traces(path, last=3)
    assert [t.name for t in reading.traces] == ["turn 4997", "turn 4998", "turn 4999"]
    assert [len(t.spans) for t in reading.traces] == [5, 5, 5]
    # Ten minutes of margin at one trace a second: about 600 traces back, of the 5000 in the file.
    assert reading.lines_read < 1300 and not reading.complete
    code, out, err = view(capsys, str(path), "--last", "3", "--ascii")
    assert [line.split("  ")[1] for line in out.splitlines() if line.startswith("trace ")] == [
        "turn 4997", "turn 4998", "turn 4999"]


def test_last_across_rotated_files_and_a_long_turn(tmp_path):
    """A turn that began long before the newest ones still counts by its start; rotated files are read back."""
    from hermes_otel.cli.view import read_traces

    directory = tmp_path / "otel"
    directory.mkdir()
    _many_traces(directory / "traces.jsonl.1", 50)
    long_turn = raw_span(0xFFFF, 1, None, "long turn", T0 + 40 * SEC, T0 + 100 * SEC)
    (directory / "traces.jsonl").write_text(otlp_line([long_turn]) + "\n")
    reading = read_traces(directory, last=2)
    assert [t.name for t in reading.traces] == ["turn 48", "turn 49"]  # started later than the long turn
    assert reading.complete  # short files: read to the start


# -- item 10: arguments and results said plainly --------------------------------------------------------------------


@pytest.fixture
def eight_traces(tmp_path) -> Path:
    path = tmp_path / "traces.jsonl"
    _many_traces(path, 8, spans_per_trace=1)
    return path


def test_no_arguments_shows_the_newest_traces_not_all(eight_traces, capsys):
    code, out, err = view(capsys, str(eight_traces), "--ascii")
    assert code == 0
    assert [line.split("  ")[1] for line in out.splitlines() if line.startswith("trace ")] == [
        f"turn {n}" for n in range(3, 8)]
    assert err == ""  # the file was short enough to read whole: nothing more to say


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_last_must_be_a_positive_integer(eight_traces, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["view", str(eight_traces), "--last", value])
    assert exit_.value.code == 2
    assert f"argument --last: expected a positive integer, found '{value}'" in capsys.readouterr().err


def test_a_trace_id_that_is_not_hex_is_said(eight_traces, capsys):
    assert view(capsys, str(eight_traces), "--trace", "zzzz") == (
        2, "", "hermes-otel view: not a trace id: 'zzzz' (expected 1 to 32 hexadecimal digits)\n")


def test_an_ambiguous_prefix_is_said_with_the_candidates(tmp_path, capsys):
    path = tmp_path / "traces.jsonl"
    ids = [0xE1 << 120, 0xE2 << 120, 0xF3 << 120]
    path.write_text("".join(otlp_line([raw_span(t, 1, None, "turn", T0, T0 + SEC)]) + "\n" for t in ids))
    code, out, err = view(capsys, str(path), "--trace", "e")
    assert (code, out) == (1, "")
    assert err == (f"hermes-otel view: 2 traces start with 'e' ({ids[0]:032x}, {ids[1]:032x}); give more of the id\n")
    code, out, _ = view(capsys, str(path), "--trace", "E2", "--ascii")
    assert code == 0 and out.splitlines()[0].startswith(f"trace {ids[1]:032x}  turn")
    assert view(capsys, str(path), "--trace", "abc") == (1, "", f"hermes-otel view: no trace starts with 'abc' in {path}\n")


# -- issue 19: span events under their span ------------------------------------------------------------------------


def test_span_events_show_under_their_span(tmp_path, capsys):
    directory = tmp_path / "otel"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(
        RotatingJsonLinesWriter(file_paths(directory)["traces"]))))
    tracer = provider.get_tracer("t")
    turn = tracer.start_span("invoke_agent hermes", start_time=T0)
    chat = tracer.start_span("chat fake-model", context=set_span_in_context(turn), start_time=T0)
    chat.add_event("hermes.middleware.rewrite", {"hermes.middleware.kind": "llm_request", "hermes.middleware.source":
                   "alpha", "hermes.middleware.reason": "pinned seed", "hermes.middleware.changed_keys": ["seed"]},
                   timestamp=T0 + 2 * MS)
    chat.add_event("hermes.middleware.failure", {"hermes.middleware.plugin": "mw_beta", "error.type": "ValueError"},
                   timestamp=T0 + 3 * MS)
    layer = tracer.start_span("llm_execution mw_beta", context=set_span_in_context(chat), start_time=T0 + 5 * MS,
                              attributes={"hermes.middleware.outcome": "fail_open"})
    layer.add_event("exception", {"exception.type": "RuntimeError", "exception.message": "mw_beta layer is broken"},
                    timestamp=T0 + 6 * MS)
    layer.set_status(Status(StatusCode.ERROR))
    layer.end(T0 + 6 * MS)
    chat.end(T0 + 300 * MS)
    turn.end(T0 + 400 * MS)
    provider.shutdown()
    code, out, _ = view(capsys, str(directory), "--ascii", "--width", "132")
    assert code == 0
    assert out.splitlines() == [
        f"trace {turn.get_span_context().trace_id:032x}  invoke_agent hermes  400.0 ms  3 spans",
        "invoke_agent hermes             400.0 ms  ##########################",
        "`- chat fake-model              300.0 ms  ####################",
        "  * hermes.middleware.rewrite    +2.0 ms  +                           source alpha  reason pinned seed  "
        "changed seed",
        "  * hermes.middleware.failure    +3.0 ms  +                           plugin mw_beta  error ValueError",
        "  `- llm_execution mw_beta        1.0 ms  #                           ERR  outcome fail_open",
        "    * exception                  +1.0 ms  +                           ERR RuntimeError: mw_beta layer is broken",
    ]
