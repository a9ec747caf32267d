"""`hermes-otel cost` on trace files written by our own file exporter: every `--by`, `--since`, the table, the JSON."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import set_span_in_context

from hermes_otel.cli import cost_report
from hermes_otel.cli import main as cli
from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths

DAY1 = dt.datetime(2026, 11, 30, 23, 0, tzinfo=dt.UTC)
DAY2 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
MS = 1_000_000


def ns(when: dt.datetime, plus_ms: int = 0) -> int:
    return int(when.timestamp()) * 10**9 + plus_ms * MS


def priced(amount, model, **extra):
    attrs = {"gen_ai.request.model": model, "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}
    if amount is None:
        attrs.update({"hermes.usage.cost_status": "unknown", "hermes.usage.cost_reason": "no_price"})
    else:
        attrs.update({"hermes.usage.cost": amount, "hermes.usage.cost_status": "estimated"})
    attrs.update(extra)
    return attrs


def turn(tracer, when, session, turn_id, profile, chats, parent=None):
    root = tracer.start_span("invoke_agent hermes", context=parent, start_time=ns(when), attributes={
        "gen_ai.conversation.id": session, "hermes.turn.id": turn_id, "hermes.profile": profile})
    inside = set_span_in_context(root)
    for n, attrs in enumerate(chats):
        span = tracer.start_span("chat " + attrs.get("gen_ai.request.model", ""), context=inside,
                                 start_time=ns(when, 10 * n + 1),
                                 attributes={"gen_ai.conversation.id": session, **attrs})
        span.end(ns(when, 10 * n + 5))
    return root, inside


@pytest.fixture
def recorded(tmp_path):
    """Three traces over two UTC days, two sessions, two profiles, a subagent, an unpriced and a failed attempt."""
    writer = RotatingJsonLinesWriter(file_paths(tmp_path)["traces"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    tracer = provider.get_tracer("test")
    root, inside = turn(tracer, DAY1, "s1", "s1:1", "alpha", [priced(0.25, "m1"), priced(None, "m2")])
    sub = tracer.start_span("subagent leaf", context=inside, start_time=ns(DAY1, 50),
                            attributes={"hermes.subagent.role": "leaf"})
    child, _ = turn(tracer, DAY1, "c1", "c1:1", "alpha", [priced(0.125, "m1")], parent=set_span_in_context(sub))
    child.end(ns(DAY1, 90))
    sub.end(ns(DAY1, 95))
    root.end(ns(DAY1, 100))
    second, _ = turn(tracer, DAY2, "s1", "s1:2", "alpha", [priced(0.5, "m2")])
    second.end(ns(DAY2, 100))
    third, inside = turn(tracer, DAY2, "s2", "s2:1", "beta", [priced(1.0, "m1"), {"gen_ai.request.model": "m1"}])
    third.end(ns(DAY2, 100))
    provider.shutdown()
    writer.close()
    return tmp_path


def table(result):
    return {r.key: (float(r.amount), r.attempts, r.unpriced) for r in result.rows}


def test_every_by_view(recorded):
    report = cost_report.report
    assert [r.key for r in report(recorded, "session").rows] == ["s2", "s1"]  # most expensive first
    assert table(report(recorded, "session")) == {"s2": (1.0, 1, 0), "s1": (0.875, 4, 1)}  # the child counts for s1
    assert table(report(recorded, "turn")) == {"s2:1": (1.0, 1, 0), "s1:2": (0.5, 1, 0), "s1:1": (0.375, 3, 1)}
    assert table(report(recorded, "model")) == {"m1": (1.375, 3, 0), "m2": (0.5, 2, 1)}
    assert table(report(recorded, "profile")) == {"beta": (1.0, 1, 0), "alpha": (0.875, 4, 1)}
    assert table(report(recorded, "subagent")) == {"(main)": (1.75, 4, 1), "leaf": (0.125, 1, 0)}
    by_day = report(recorded, "day")
    assert [r.key for r in by_day.rows] == ["2026-11-30", "2026-12-01"]  # days in order
    assert table(by_day) == {"2026-11-30": (0.375, 3, 1), "2026-12-01": (1.5, 2, 0)}
    assert (float(by_day.total.amount), by_day.total.attempts, by_day.total.reasons) == (1.875, 5, {"no_price": 1})


def test_since(recorded):
    since = cost_report.parse_since("2026-12-01")
    assert table(cost_report.report(recorded, "session", since)) == {"s2": (1.0, 1, 0), "s1": (0.5, 1, 0)}
    assert cost_report.report(recorded, "session", cost_report.parse_since("2026-12-02")).rows == []


def test_parse_since():
    now = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
    assert cost_report.parse_since("90m", now) == ns(now) - 90 * 60 * 10**9
    assert cost_report.parse_since("24h", now) == ns(dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC))
    assert cost_report.parse_since("7d", now) == ns(dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC))
    assert cost_report.parse_since("2w", now) == ns(dt.datetime(2026, 11, 19, 12, 0, tzinfo=dt.UTC))
    assert cost_report.parse_since("2026-12-01T09:00Z") == ns(DAY2)
    assert cost_report.parse_since("2026-12-01T10:00+01:00") == ns(DAY2)
    assert cost_report.parse_since("2026-12-01T09:00") == ns(DAY2)  # no zone: UTC
    for bad in ("yesterday", "7x", "", "2026-13-01"):
        with pytest.raises(Exception, match="expected a duration"):
            cost_report.parse_since(bad)


def test_table(recorded, capsys):
    assert cli.main(["cost", str(recorded), "--by", "model"]) == 0
    assert capsys.readouterr().out == (
        "model   cost  status     attempts  unpriced  input  output  first seen (UTC)\n"
        "-----  -----  ---------  --------  --------  -----  ------  --------------------\n"
        "m1     $1.38  estimated         3         0    300      30  2026-11-30T23:00:00Z\n"
        "m2      $0.5  partial           2         1    200      20  2026-11-30T23:00:00Z\n"
        "-----  -----  ---------  --------  --------  -----  ------  --------------------\n"
        "total  $1.88  partial           5         1    500      50\n"
        "\n"
        "1 attempt(s) could not be priced: 1 Hermes has no price for this model and provider.\n"
    )


def test_json_schema(recorded, capsys):
    assert cli.main(["cost", str(recorded), "--by", "subagent", "--json", "--since", "2026-11-01"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"schema", "by", "since", "currency", "files", "skipped_lines", "rows", "total"}
    assert (data["schema"], data["by"], data["since"], data["currency"], data["skipped_lines"]) == (
        "hermes-otel.cost.v1", "subagent", "2026-11-01T00:00:00Z", "USD", 0)
    assert data["files"] == [str(recorded / "traces.jsonl")]
    main, leaf = data["rows"]
    assert main == {
        "key": "(main)", "cost_usd": 1.75, "provider_cost_usd": 0.0, "status": "partial", "attempts": 4, "priced": 3,
        "unpriced": 1,
        "unpriced_reasons": {"no_price": 1}, "input_tokens": 400, "output_tokens": 40, "cache_read_tokens": 0,
        "cache_write_tokens": 0, "reasoning_tokens": 0, "first_seen": "2026-11-30T23:00:00Z",
        "last_seen": "2026-12-01T09:00:00Z",
    }
    assert (leaf["key"], leaf["cost_usd"], leaf["status"]) == ("leaf", 0.125, "estimated")
    assert data["total"]["cost_usd"] == 1.875 and "key" not in data["total"]


def test_missing_directory_and_nothing_priced(tmp_path, capsys):
    assert cli.main(["cost", str(tmp_path / "nope")]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "traces.jsonl").write_text("not json\n")
    assert cli.main(["cost", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "skipped 1 unreadable line(s)" in err and "no priced attempts" in err
    assert cli.main(["cost", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []


def test_by_default_the_files_and_the_spool_each_span_once(recorded, tmp_path, monkeypatch, capsys):
    """Without a path: the files directory and the spool's traces (what an endpoint has not taken yet; with the
    files on, the same spans are in both)."""
    home = tmp_path / "home"
    files, spool = home / "otel", home / "otel" / "spool" / "traces"
    spool.mkdir(parents=True)
    lines = (recorded / "traces.jsonl").read_text().splitlines(keepends=True)
    (files / "traces.jsonl").write_text("".join(lines[:-1]))  # the last batch never reached the files ...
    (spool / "0001-batch.jsonl").write_text("".join(lines[-3:]))  # ... but waits in the spool, with two already there
    monkeypatch.setenv("HERMES_HOME", str(home))
    for name in [n for n in os.environ if n.startswith(("OTEL_", "HERMES_OTEL_"))]:
        monkeypatch.delenv(name)
    assert cli.main(["cost", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == [str(files / "traces.jsonl"), str(spool / "0001-batch.jsonl")]
    assert {r["key"]: r["attempts"] for r in out["rows"]} == {"s2": 1, "s1": 4}
    assert out["total"]["attempts"] == 5
    assert table(cost_report.report(recorded, "session")) == table(cost_report.report([files, spool], "session"))
    (files / "traces.jsonl").unlink()
    files_only = cost_report.report(files, "session")
    assert files_only.total.attempts == 0 and files_only.files == []  # spool/ is not a traces file
    assert cli.main(["cost", "--json"]) == 0  # the spool alone: s2's root and its two chats
    assert {r["key"]: r["attempts"] for r in json.loads(capsys.readouterr().out)["rows"]} == {"s2": 1}


def test_bad_since_is_a_usage_error(recorded, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["cost", str(recorded), "--since", "soon"])
    assert exit_.value.code == 2
    assert "expected a duration" in capsys.readouterr().err


def test_hostile_values_are_missing_not_errors(tmp_path, capsys):
    writer = RotatingJsonLinesWriter(file_paths(tmp_path)["traces"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    tracer = provider.get_tracer("test")
    root, _ = turn(tracer, DAY1, "s\x1b[31m", "t", "p", [
        {"gen_ai.request.model": "m\x07", "hermes.usage.cost": "lots", "hermes.usage.cost_status": "estimated",
         "gen_ai.usage.input_tokens": -5},
        {"hermes.usage.cost": True, "hermes.usage.cost_status": 7},
    ])
    root.end(ns(DAY1, 100))
    provider.shutdown()
    writer.close()
    assert table(cost_report.report(tmp_path, "model")) == {"m\x07": (0.0, 1, 1), "(unknown)": (0.0, 1, 1)}
    assert cli.main(["cost", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out


def test_view_shows_cost_next_to_tokens_and_the_turn_total(tmp_path):
    from hermes_otel.cli import view

    writer = RotatingJsonLinesWriter(file_paths(tmp_path)["traces"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    tracer = provider.get_tracer("test")
    root, inside = turn(tracer, DAY1, "s1", "s1:1", "alpha", [priced(0.002566, "m1"), priced(None, "m2")])
    root.set_attributes({"hermes.turn.cost": 0.002566, "hermes.turn.cost_status": "partial"})
    sub = tracer.start_span("subagent leaf", context=inside, start_time=ns(DAY1, 50),
                            attributes={"hermes.subagent.cost": 1234.5, "hermes.subagent.cost_status": "estimated"})
    sub.end(ns(DAY1, 60))
    root.end(ns(DAY1, 100))
    provider.shutdown()
    writer.close()
    out = view.render(view.group_traces(view.load_spans(tmp_path)), width=160, ascii=True)
    lines = out.splitlines()
    assert lines[1].endswith("total $0.002566 (partial)")
    assert lines[2].endswith("model m1  tokens 100->10  cost $0.002566")
    assert lines[3].endswith("model m2  tokens 100->10  cost unknown (no price)")
    assert lines[4].endswith("total $1,234.50")


def test_format_usd():
    from hermes_otel.cost.pricing import format_usd

    assert [format_usd(x) for x in (0, 0.000078, 0.00068, 0.5, 1, 1234.567, 0.0000004, -0.25)] == [
        "$0", "$0.000078", "$0.00068", "$0.5", "$1.00", "$1,234.57", "<$0.000001", "-$0.25"]


def test_demo_says_what_the_turn_cost_or_why_it_is_unknown(recorded, tmp_path):
    from hermes_otel.cli import demo, view

    priced = view.group_traces(view.load_spans(recorded))
    for trace in priced:
        for root in trace.roots:
            root["attributes"]["hermes.turn.cost"] = 0.5
    assert demo._cost_note(priced).startswith("Cost: $1.50 for the turn, each model call priced by Hermes's own")
    unpriced = view.group_traces(view.load_spans(recorded))
    assert demo._cost_note(unpriced) == ("Cost: unknown (Hermes has no price for this model and provider). "
                                         "See docs/cost.md: What did it cost?")
    for trace in unpriced:
        for span in trace.spans:
            span["attributes"].pop("hermes.usage.cost_reason", None)
    assert demo._cost_note(unpriced) == ("Cost: unknown (no call reported its usage). "
                                         "See docs/cost.md: What did it cost?")


def test_by_purpose_counts_auxiliary_calls_beside_the_main_loop(tmp_path):
    """Auxiliary calls (`hermes.llm.purpose`) count for their session and turn like any attempt, and `--by purpose`
    splits them from the main loop's."""
    writer = RotatingJsonLinesWriter(file_paths(tmp_path)["traces"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    tracer = provider.get_tracer("test")
    root, _ = turn(tracer, DAY1, "s1", "s1:1", "alpha", [
        priced(0.25, "m1"), priced(0.0625, "m1", **{"hermes.llm.purpose": "approval"}),
        priced(0.5, "m1"), priced(0.125, "m2", **{"hermes.llm.purpose": "title_generation"}),
        priced(None, "m2", **{"hermes.llm.purpose": "compression"})])
    root.end(ns(DAY1, 100))
    provider.shutdown()
    writer.close()
    assert table(cost_report.report(tmp_path, "purpose")) == {
        "main": (0.75, 2, 0), "title_generation": (0.125, 1, 0), "approval": (0.0625, 1, 0),
        "compression": (0.0, 1, 1)}
    assert table(cost_report.report(tmp_path, "session")) == {"s1": (0.9375, 5, 1)}
