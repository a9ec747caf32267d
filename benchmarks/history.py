"""What one model call's captured content costs the records thread as the conversation grows: the chat span's
`gen_ai.input.messages` (and system instructions) built from a history of 10, 100 and 1000 messages, half of them
tool results of about 3.5 KiB with secrets and trigger words in them, at an 8 KiB budget, the default (512 Ki
characters) and with no limit.
Each call is measured after the one before it, as a session runs: a message redacted for an earlier call is not
redacted again (`redaction/content.py`), so the cost follows what is new and what is exported.

Writes benchmarks/results/history.json and prints µs per chat span. Run by `make bench`.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_otel.tracking import calls  # noqa: E402

RESULT = ("output of `cat /etc/app.env`\n" + "DB_HOST=db.internal mysql -h db -u app --password=hunter2x " * 8
          + "\n" + "row {n}: ok, token usage 12, retries 0, latency 31 ms, cache hit\n" * 40)
LENGTHS = (10, 100, 1000)
BUDGETS = {"8 KiB": 4096, "default (512 Ki)": 256 * 1024, "no limit": 1 << 29}  # content cap: half the budget
RUNS = 30


def history(length: int) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You are Hermes. " * 300}]
    for n in range(length):
        if n % 2 == 0:
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": f"c{n}", "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "cat /etc/app.env"}'}}]})
        else:
            messages.append({"role": "tool", "tool_call_id": f"c{n - 1}", "content": RESULT.format(n=n)})
    return messages


def per_call_us(length: int, cap: int) -> float:
    """Median µs of one chat span's content, each call's history one tool round longer than the one before."""
    messages = history(length)
    calls.content_attributes({"model": "m", "messages": messages}, None, cap=cap)  # the session so far
    times = []
    for n in range(RUNS):
        messages = [*messages, {"role": "tool", "tool_call_id": f"x{n}", "content": RESULT.format(n=length + n)}]
        started = time.perf_counter()
        calls.content_attributes({"model": "m", "messages": messages}, None, cap=cap)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    rows = [{"budget": name, "messages": length, "us_per_chat_span": round(per_call_us(length, cap), 1)}
            for name, cap in BUDGETS.items() for length in LENGTHS]
    out = Path(__file__).resolve().parent / "results" / "history.json"
    out.write_text(json.dumps(rows, indent=1) + "\n")
    for row in rows:
        print(f"{row['budget']:16s} {row['messages']:5d} messages: {row['us_per_chat_span']:9.1f} µs per chat span")


if __name__ == "__main__":
    main()
