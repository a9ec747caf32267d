"""Issue 47, item 3: what is redacted once is not redacted again. Each chat span carries the history before it, so
every tool result used to be redacted again for every later model call of the session (60-66 ms of the records
thread per chat span with 3.5 KiB tool results at an 8 KiB budget, benchmarks/history.py; 4.3-6.9 ms now)."""

from __future__ import annotations

import json

from hermes_otel.redaction import content
from hermes_otel.tracking import calls

SECRET = "sk-proj-" + "Q7f" * 16
RESULT = "DATABASE_URL=postgres://app:hunter2hunter2@db.internal/app\nOPENAI_API_KEY=" + SECRET + "\n" + "row ok\n" * 60


def _redacted(monkeypatch) -> list[str]:
    """The texts redacted from now on (the real redaction, counted)."""
    seen: list[str] = []
    real = content._redact

    def counted(text, cap, hermes):
        seen.append(text)
        return real(text, cap, hermes)

    monkeypatch.setattr(content, "_redact", counted)
    return seen


def _history(results: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "read the env files"}]
    for n in range(results):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{n}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": f"file {n}\n{RESULT}"}]
    return messages


def test_a_tool_result_redacted_for_one_chat_span_is_not_redacted_again_for_the_next(monkeypatch):
    redacted = _redacted(monkeypatch)
    first = calls.content_attributes({"model": "m", "messages": _history(3)}, None)
    assert sum(text.startswith("file ") for text in redacted) == 3
    redacted.clear()
    second = calls.content_attributes({"model": "m", "messages": _history(4)}, None)
    assert [text.split("\n")[0] for text in redacted if text.startswith("file ")] == ["file 3"]  # the new one only
    for attrs in (first, second):
        text = attrs["gen_ai.input.messages"]
        assert SECRET not in text and "hunter2hunter2" not in text
    before = json.loads(first["gen_ai.input.messages"])
    assert json.loads(second["gen_ai.input.messages"])[: len(before)] == before  # the same, from the memory


def test_a_secret_learned_later_is_redacted_from_a_text_redacted_before():
    key = "tenant-key-" + "x7" * 20
    text = "config dump\n" + "value: ok\n" * 40 + f"collector key {key}\n"
    assert key in content.redact_text(text)  # nothing says it is secret yet
    content.remember(key)  # the configuration resolved it (a header value)
    assert key not in content.redact_text(text)
