"""Issue 27, the CLI's file readers (items 4, 8, 9, 10, 12 and 13's negative durations): `view` and `cost` read the
local record through one reader (`hermes_otel.local`) that reads regular files only, in bounded time, skips a file
that vanished, prices nothing from a non-finite amount, and is linear in the depth of parent chains.

Files are written by the real file exporter, or as OTLP/JSON lines (the format the files hold) where a test needs
shapes no exporter writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import set_span_in_context

from hermes_otel.cli import cost_report
from hermes_otel.cli import main as cli
from hermes_otel.cli.view import group_traces, load_spans, render
from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def otlp_line(spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]},
                      separators=(",", ":"))


def raw_span(trace: int, span: int, parent: int | None, name: str, start: int, end: int, **attrs) -> dict:
    out = {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": name, "kind": 1,
           "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "status": {},
           "attributes": [{"key": k, "value": {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}}
                          for k, v in attrs.items()]}
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(args))
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def no_constants(name: str):
    raise AssertionError(f"{name} in JSON output")


# -- item 4: non-finite prices -------------------------------------------------------------------------------------


@pytest.fixture
def non_finite(tmp_path: Path) -> Path:
    """One turn whose attempts a model server priced at 1e400, -1e400 and NaN, and one at $0.25 (real exporter)."""
    writer = RotatingJsonLinesWriter(file_paths(tmp_path)["traces"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    tracer = provider.get_tracer("test")
    root = tracer.start_span("invoke_agent hermes", start_time=T0, attributes={
        "gen_ai.conversation.id": "s1", "hermes.turn.id": "s1:1"})
    inside = set_span_in_context(root)
    for n, (model, amount) in enumerate((("inf", float("1e400")), ("-inf", -float("1e400")), ("nan", float("nan")),
                                         ("ok", 0.25))):
        span = tracer.start_span(f"chat {model}", context=inside, start_time=T0 + n * MS, attributes={
            "gen_ai.request.model": model, "hermes.usage.cost": amount, "hermes.usage.cost_status": "estimated",
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1})
        span.end(T0 + n * MS + MS // 2)
    root.end(T0 + 10 * MS)
    provider.shutdown()
    writer.close()
    return tmp_path


def test_non_finite_prices_are_unknown_never_arithmetic(non_finite, capsys):
    result = cost_report.report(non_finite, "model")
    assert {r.key: (float(r.amount), r.attempts, r.unpriced, r.status) for r in result.rows} == {
        "ok": (0.25, 1, 0, "estimated"), "-inf": (0.0, 1, 1, "unknown"), "inf": (0.0, 1, 1, "unknown"),
        "nan": (0.0, 1, 1, "unknown")}
    code, out, err = run(capsys, "cost", str(non_finite), "--json")
    assert (code, err) == (0, "")
    document = json.loads(out, parse_constant=no_constants)  # strict JSON: no Infinity, no NaN
    assert document["total"]["cost_usd"] == 0.25
    assert document["total"]["unpriced_reasons"] == {"not_finite": 3}
    code, out, err = run(capsys, "cost", str(non_finite), "--by", "model")
    assert code == 0
    assert out.splitlines()[-1] == ("3 attempt(s) could not be priced: 3 its recorded amount is not a finite "
                                    "number.")
    code, out, err = run(capsys, "view", str(non_finite), "--width", "160", "--ascii")
    assert code == 0
    assert [line.split("tokens 10->1  ")[1] for line in out.splitlines() if "chat" in line] == [
        "cost unknown", "cost unknown", "cost unknown", "cost $0.25"]


# -- item 8: a file that vanishes between listing and opening ------------------------------------------------------


def test_a_file_that_vanishes_between_listing_and_opening_is_skipped(tmp_path, monkeypatch, capsys):
    """A spool directory another process drains: a batch is listed, then deleted before it is opened."""
    spool = tmp_path / "traces"
    spool.mkdir()
    (spool / "a.jsonl").write_text(otlp_line([raw_span(1, 1, None, "invoke_agent hermes", T0, T0 + MS)]) + "\n")
    (spool / "b.jsonl").write_text(otlp_line([raw_span(2, 1, None, "invoke_agent hermes", T0 + MS, T0 + 2 * MS)])
                                   + "\n")
    victim = spool / "a.jsonl"
    is_file = Path.is_file

    def drained_after_listing(self: Path) -> bool:
        answer = is_file(self)
        if self == victim and answer:
            victim.unlink()  # the other process takes it right after we saw it
        return answer

    monkeypatch.setattr(Path, "is_file", drained_after_listing)
    code, out, err = run(capsys, "view", str(spool), "--ascii", "--width", "80")
    assert (code, err) == (0, "")
    assert [line.split()[1] for line in out.splitlines() if line.startswith("trace ")] == [f"{2:032x}"]
    victim.write_text((spool / "b.jsonl").read_text())
    code, out, err = run(capsys, "cost", str(spool))
    assert code == 1 and err == f"hermes-otel cost: no priced attempts in {spool} (telemetry from hermes-otel with " \
                                "cost support)\n"


# -- item 9: cost is linear in parent-chain depth -----------------------------------------------------------------


class CountingSpan(dict):
    """A span dict that counts how often its parent is asked for: the work of walking parent chains."""

    reads = 0

    def __getitem__(self, key):
        if key == "parent_span_id":
            CountingSpan.reads += 1
        return super().__getitem__(key)


def test_cost_is_linear_in_parent_chain_depth():
    depth = 3000
    spans = [CountingSpan(trace_id="t", span_id="0", parent_span_id=None, name="invoke_agent hermes", start_ns=T0,
                          attributes={"gen_ai.conversation.id": "s"})]
    spans += [CountingSpan(trace_id="t", span_id=str(n), parent_span_id=str(n - 1), name="chat m", start_ns=T0 + n,
                           attributes={"hermes.usage.cost": 0.5, "hermes.usage.cost_status": "estimated"})
              for n in range(1, depth + 1)]
    CountingSpan.reads = 0
    found = list(cost_report.attempts(spans))
    assert len(found) == depth and {a.keys["subagent"] for a in found} == {"(main)"}
    assert CountingSpan.reads <= 4 * (depth + 1), CountingSpan.reads  # quadratic: depth * depth / 2


def test_a_subagent_deep_in_a_chain_names_every_attempt_below_it_once():
    chain = [CountingSpan(trace_id="t", span_id="0", parent_span_id=None, name="invoke_agent hermes", start_ns=T0,
                          attributes={}),
             CountingSpan(trace_id="t", span_id="1", parent_span_id="0", name="subagent leaf", start_ns=T0,
                          attributes={"hermes.subagent.role": "leaf"})]
    chain += [CountingSpan(trace_id="t", span_id=str(n), parent_span_id=str(n - 1), name="chat m", start_ns=T0 + n,
                           attributes={"hermes.usage.cost": 0.5, "hermes.usage.cost_status": "estimated"})
              for n in range(2, 50)]
    chain.append(CountingSpan(trace_id="t", span_id="x", parent_span_id="0", name="chat m", start_ns=T0,
                              attributes={"hermes.usage.cost": 0.5, "hermes.usage.cost_status": "estimated"}))
    roles = {a.start_ns - T0: a.keys["subagent"] for a in cost_report.attempts(chain)}
    assert roles == {0: "(main)", **{n: "leaf" for n in range(2, 50)}}


# -- item 10: regular files only, bounded reads --------------------------------------------------------------------


def cli_process(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    code = "import sys; from hermes_otel.cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "HERMES_HOME": "/nonexistent-hermes-home"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.mark.parametrize("args", [("cost", "/dev/zero"), ("view", "--trace", "1", "/dev/zero"),
                                  ("view", "/dev/zero")])
def test_a_device_is_refused_not_read_forever(args):
    done = cli_process(*args)
    command = args[0]
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"hermes-otel {command}: cannot read /dev/zero (not a regular file)\n"


@pytest.mark.parametrize("command", ["cost", "view"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, command):
    fifo = tmp_path / "traces.jsonl"
    os.mkfifo(fifo)
    done = cli_process(command, str(fifo))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"hermes-otel {command}: cannot read {fifo} (not a regular file)\n"


def test_a_fifo_in_a_directory_is_not_opened(tmp_path):
    """The files of a directory: a FIFO named like a rotated file or a spool batch is not read."""
    (tmp_path / "traces.jsonl").write_text(otlp_line([raw_span(1, 1, None, "invoke_agent hermes", T0, T0 + MS)])
                                           + "\n")
    os.mkfifo(tmp_path / "traces.jsonl.1")
    done = cli_process("view", str(tmp_path), "--width", "80")
    assert done.returncode == 0 and done.stdout.startswith(f"trace {1:032x}  invoke_agent hermes"), done


def test_a_file_that_grows_while_read_is_read_to_its_size_at_opening(tmp_path):
    """What is appended after the reader opened a file is left for the next read: no read is endless."""
    from hermes_otel.local.files import Counter, forward, open_file

    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"first\nsecond\n")
    opened = open_file(path)
    assert opened is not None
    handle, size = opened
    with handle, path.open("ab") as writer:
        lines = forward(handle, size, Counter())
        assert next(lines) == b"first\n"
        writer.write(b"x" * 1000 + b"\n")
        writer.flush()
        assert list(lines) == [b"second\n"]


# -- item 12: operator input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (("cost", "--since", "99999999w"), "argument --since: '99999999w' reaches back before the year 1; give a shorter "
                                       "duration"),
    (("view", "--width", "1e21"), "argument --width: expected a whole number of columns from 1 to 1000, found "
                                  "'1e21'"),
    (("view", "--width", "1000000000"), "argument --width: expected a whole number of columns from 1 to 1000, found "
                                        "'1000000000'"),
])
def test_operator_input_gets_one_clear_message(tmp_path, capsys, args, message):
    code, out, err = run(capsys, *args, str(tmp_path))
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == f"hermes-otel {args[0]}: error: {message}"


def test_the_waterfall_is_never_wider_than_its_bound(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_line([raw_span(1, 1, None, "invoke_agent hermes", T0, T0 + MS)]) + "\n")
    lines = render(group_traces(load_spans(path)), width=10**9, ascii=True).splitlines()
    assert max(len(line) for line in lines) <= 1000


# -- item 13: negative durations -----------------------------------------------------------------------------------


def test_a_span_that_ends_before_it_starts_shows_an_unknown_duration(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_line([raw_span(1, 1, None, "invoke_agent hermes", T0, T0 + 5 * MS),
                               raw_span(1, 2, 1, "chat m", T0 + MS, 0)]) + "\n")
    lines = render(group_traces(load_spans(path)), width=80, ascii=True).splitlines()
    assert lines == [
        f"trace {1:032x}  invoke_agent hermes  5.0 ms  2 spans",
        "invoke_agent hermes     5.0 ms  ################",
        "`- chat m                    ?     #",
    ]
