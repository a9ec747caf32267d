"""Issue 27: fuzz targets for the readers of `hermes-otel view` and `hermes-otel cost` (the shared local-record
reader), bounded and derandomized as in test_fuzz.py.

Properties: nothing raises but a malformed request (RequestError); `cost --json` is strict JSON whatever the
recorded amounts; nothing printed from data holds a control character."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from hermes_otel.cli import cost_report
from hermes_otel.cli.view import read_traces, render
from hermes_otel.local.traces import RequestError
from tests.unit.test_fuzz import FUZZ, VALID, json_values, lines

CONTROL = "\x1b\x07\x9b\u202e\r"
amounts = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**400),
                    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "x"]), json_values)


@st.composite
def priced_lines(draw) -> str:
    """A chat attempt with a cost of any shape (double, int, string, anything), or any line of test_fuzz."""
    if draw(st.booleans()):
        return draw(lines())
    doc = json.loads(json.dumps(VALID))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["name"] = draw(st.sampled_from(["chat m", "invoke_agent hermes", "subagent x", "chat \x1b[2J"]))
    amount = draw(amounts)
    value = ({"doubleValue": amount} if isinstance(amount, float | str) else
             {"intValue": str(amount)} if isinstance(amount, int) and not isinstance(amount, bool) else amount)
    span["attributes"] = [{"key": "hermes.usage.cost", "value": value},
                          {"key": "hermes.usage.cost_status", "value": {"stringValue": draw(
                              st.sampled_from(["estimated", "unknown", "partial"]))}},
                          {"key": "gen_ai.request.model", "value": {"stringValue": draw(st.text(max_size=5))}}]
    if draw(st.booleans()):
        span["parentSpanId"] = draw(st.sampled_from(["b7ad6b7169203331", "00f067aa0ba902b7", ""]))
    return json.dumps(doc, allow_nan=True)


@FUZZ
@given(st.lists(priced_lines(), min_size=1, max_size=6), st.sampled_from(cost_report.BY))
def test_the_cost_reader_never_raises_and_its_json_is_strict(tmp_path_factory, file_lines, by):
    path = tmp_path_factory.mktemp("cost") / "traces.jsonl"
    path.write_text("\n".join(line.replace("\n", " ") for line in file_lines) + "\n")
    result = cost_report.report(path, by)
    json.dumps(result.as_json(), allow_nan=False)  # raises on Infinity or NaN
    table = cost_report.render_table(result)
    assert not any(ch in table for ch in CONTROL), repr(table)


@FUZZ
@given(st.lists(priced_lines(), min_size=1, max_size=6), st.integers(1, 4),
       st.one_of(st.none(), st.text(max_size=34), st.sampled_from(["0af7", "0AF7651916CD43DD8448EB211C80319C"])))
def test_the_view_reader_never_raises_but_on_a_bad_id(tmp_path_factory, file_lines, last, trace_id):
    path = tmp_path_factory.mktemp("view") / "traces.jsonl"
    path.write_text("\n".join(line.replace("\n", " ") for line in file_lines) + "\n")
    try:
        reading = read_traces(path, trace_id=trace_id, last=last)
    except RequestError as exc:
        assert trace_id is not None and "\n" not in str(exc)
        return
    assert len(reading.traces) <= (1 if trace_id is not None else last)
    out = render(reading.traces, width=80)
    assert not any(ch in out for ch in CONTROL), repr(out)
