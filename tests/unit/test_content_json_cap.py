"""Captured content stays valid JSON under the size cap (issue 41, item 2): a real turn's request (Hermes's system
prompt alone is over 4 KiB) used to be cut mid-document at 8,192 characters, and backends then showed a raw string."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_otel.redaction.content import to_json

CAP = 4096


def test_a_turn_over_the_cap_is_shortened_message_by_message_and_still_parses():
    messages = [
        {"role": "system", "content": "You are Hermes. " + "Rules. " * 800},  # ~5.6 KiB, as Hermes's own
        {"role": "user", "content": "read both files"},
        {"role": "assistant", "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": f"/tmp/f{i}.txt"})}}
            for i in (1, 2)]},
        *({"role": "tool", "tool_call_id": f"call_{i}", "content": f"file {i}: " + "x" * 3000} for i in (1, 2)),
    ]
    text = to_json(messages, cap=CAP)
    assert len(text) <= 2 * CAP
    parsed = json.loads(text)
    assert [m["role"] for m in parsed] == ["system", "user", "assistant", "tool", "tool"]  # every message kept
    assert parsed[0]["content"].endswith("…[truncated]") and parsed[1]["content"] == "read both files"
    assert [c["id"] for c in parsed[2]["tool_calls"]] == ["call_1", "call_2"]


def test_what_fits_is_unchanged():
    value = {"role": "user", "content": "hello"}
    assert json.loads(to_json(value, cap=CAP)) == value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3000),
    lambda children: st.lists(children, max_size=60) | st.dictionaries(st.text(max_size=20), children, max_size=30),
    max_leaves=200,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_any_value_is_valid_json_within_the_cap(value):
    text = to_json(value, cap=CAP)
    assert len(text) <= 2 * CAP
    json.loads(text)
