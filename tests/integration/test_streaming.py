"""Real Hermes 0.19.0 streaming a reply from the fake server: the chunk timing on the `chat` span and in the GenAI
streaming histograms, and the per-turn call counts."""

from __future__ import annotations

import pytest

from hermes_otel.testing import fake_llm
from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.documented import assert_documented
from tests.harness.hermes import run_agent
from tests.harness.trees import named, only

pytestmark = [pytest.mark.hermes, pytest.mark.usefixtures("at_the_defaults")]

DELAY_S = 0.3  # the fake server waits this long before it answers: the first chunk cannot come sooner


def _points(metrics, name: str) -> list[dict]:
    """The points of the last export of `name` (cumulative: each export repeats the totals)."""
    return [m for m in metrics if m.name == name][-1].points


def test_a_streamed_reply_has_its_time_to_first_chunk_on_the_span_and_in_the_metrics(traced, llm, receiver):
    reply = Reply(content="Hello from a streamed reply", delay_s=DELAY_S)
    llm.push(Reply.tools(ToolCall("terminal", {"command": "echo hi"}, id="call_S")), reply)
    assert run_agent(llm.base_url, "stream to me")["final_response"] == reply.content
    traced.flush(5)
    spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
    first, second = named(spans, "chat fake-model")
    for chat in (first, second):
        assert chat.attributes["gen_ai.request.stream"] is True  # Hermes streamed it (its own response id)
        assert chat.attributes["hermes.response.id"].startswith("stream-")
    ttfc = second.attributes["gen_ai.response.time_to_first_chunk"]
    assert DELAY_S <= ttfc <= (second.end_ns - second.start_ns) / 1e9
    assert first.attributes["gen_ai.response.time_to_first_chunk"] < (first.end_ns - first.start_ns) / 1e9

    traced.current_telemetry().meter_provider.force_flush(5000)
    metrics = receiver.wait_for_metrics(
        lambda m: any(x.name == "gen_ai.client.inference.time_to_first_chunk" for x in m), timeout=10)
    (point,) = _points(metrics, "gen_ai.client.inference.time_to_first_chunk")
    on_spans = sorted(c.attributes["gen_ai.response.time_to_first_chunk"] for c in (first, second))
    assert (point["count"], point["min"], point["max"]) == (2, *on_spans)  # the spans' values, measured once
    assert point["attributes"] == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "custom",
                                   "gen_ai.request.model": "fake-model", "gen_ai.response.model": "fake-model",
                                   "server.address": "127.0.0.1", "server.port": second.attributes["server.port"]}
    (gaps,) = _points(metrics, "gen_ai.client.inference.time_per_output_chunk")
    sent = [len(list(fake_llm._chunks({}, r, [(c.id, c) for c in r.tool_calls], {}, True)))
            for r in (Reply.tools(ToolCall("terminal", {"command": "echo hi"}, id="call_S")), reply)]
    assert gaps["count"] == sum(n - 1 for n in sent)  # one per chunk after each reply's first

    (inference,) = _points(metrics, "gen_ai.invoke_agent.inference_calls")
    (tools,) = _points(metrics, "gen_ai.invoke_agent.tool_calls")
    assert (inference["count"], inference["sum"], tools["count"], tools["sum"]) == (1, 2, 1, 1)
    assert inference["explicit_bounds"] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert only(spans, "invoke_agent hermes").status_code == "UNSET"
    assert_documented(spans, metrics)
