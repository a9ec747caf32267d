"""Content held on the agent's thread and redacted later is exactly what redacting it at once gives."""

from __future__ import annotations

import pytest

from hermes_otel.redaction import content

SECRET = "sk-proj-" + "A1b2C3d4" * 6


class Loud(str):
    def __str__(self) -> str:  # a subclass's own methods never run on the records thread
        raise AssertionError("ran")


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def _cyclic() -> dict:
    node: dict = {"name": "loop", "api_key": SECRET}
    node["self"] = node
    return node


def _deep(levels: int) -> list:
    value: list = [SECRET]
    for _ in range(levels):
        value = [value]
    return value


CASES = {
    "text with a key": f"use {SECRET} please",
    "messages": [{"role": "user", "content": f"token {SECRET}"}, {"role": "assistant", "content": "ok"}],
    "secret key names": {"Authorization": "Bearer abc", "nested": {"PASSWORD": "hunter2", "x": 1}},
    "many items": list(range(120)),
    "many keys": {f"k{i}": i for i in range(75)},
    "too deep": _deep(9),
    "cycle": _cyclic(),
    "scalars": [None, True, 2**70, float("nan"), 1.5, b"raw", bytearray(b"xy")],
    "a str subclass": Loud(f"x {SECRET}"),
    "a hostile repr": BadRepr(),
    "a set": {"a", "b"},
    "a long text": "word " * 5000 + SECRET,
    "non-string keys": {1: "one", (2, 3): "pair"},
}


@pytest.mark.parametrize("value", list(CASES.values()), ids=list(CASES))
def test_held_then_redacted_equals_redacted_at_once(value):
    assert content.sanitize(content.hold(value)) == content.sanitize(value)
    assert content.to_json(content.hold(value)) == content.to_json(value)


def test_hold_runs_no_redaction_and_copies_the_containers():
    messages = [{"role": "user", "content": f"token {SECRET}"}]
    held = content.hold(messages)
    assert held.value == [{"role": "user", "content": f"token {SECRET}"}]  # not yet redacted
    messages[0]["content"] = "changed after the hook returned"
    messages.append({"role": "user", "content": "later"})
    assert SECRET not in content.to_json(held)
    assert content.sanitize(held) == [{"role": "user", "content": f"token {content.REDACTED}"}]


def test_a_tool_result_is_encoded_once_as_the_conventions_type_it():
    """Issue 48: Phoenix and MLflow showed a tool result escaped and double-encoded (`"{\\"output\\": …}"`): the
    attribute held Hermes's JSON string encoded again. A JSON object or array in a string is its structure (redacted
    by key too), other text is itself, a structure is JSON; each redacted and capped."""
    import json

    from hermes_otel.redaction.content import hold, to_value

    hermes_result = json.dumps({"output": "acc-hi", "exit_code": 0, "api_key": "abc123abc123", "error": None})
    assert json.loads(to_value(hold(hermes_result))) == {"output": "acc-hi", "exit_code": 0, "api_key": "<redacted>",
                                                        "error": None}
    assert to_value(hold("plain output\nline 2")) == "plain output\nline 2"
    assert to_value(hold('{"not": json')) == '{"not": json'  # not JSON: the text
    assert json.loads(to_value(hold({"command": "ls", "token": "t0k3n-t0k3n"}))) == {"command": "ls",
                                                                                    "token": "<redacted>"}
    assert to_value(hold("x" * 20_000), cap=4096).endswith("…[truncated]")
    assert json.loads(to_value(hold(json.dumps(["a" * 9000] * 4)), cap=4096))  # still valid JSON when cut
