"""The GenAI histograms the tracked entities record (semantic-convention names and buckets).

They are recorded where a call's end is made: on the records thread (see :mod:`hermes_otel.emitter`),
with the call's span in the context (so exemplars point at it).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.metrics import Meter

from ..semconv import AGENT_BUCKETS, CALL_COUNT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS

# attribute -> (semantic-convention name, unit, description, bucket boundaries)
_HISTOGRAMS: dict[str, tuple[str, str, str, Any]] = {
    "operation_duration": ("gen_ai.client.operation.duration", "s", "GenAI operation duration", DURATION_BUCKETS),
    "tokens": ("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used", TOKEN_BUCKETS),
    "tool_duration": ("gen_ai.execute_tool.duration", "s", "Tool call duration", DURATION_BUCKETS),
    "agent_duration": ("gen_ai.invoke_agent.duration", "s", "Agent turn duration", AGENT_BUCKETS),
    # Streamed replies only (the conventions: SHOULD NOT be reported otherwise).
    "first_chunk": ("gen_ai.client.operation.time_to_first_chunk", "s",
                    "Time from issuing a streamed request to its first chunk", DURATION_BUCKETS),
    "chunk_gap": ("gen_ai.client.operation.time_per_output_chunk", "s",
                  "Time between consecutive chunks of a streamed reply, after the first", DURATION_BUCKETS),
    # Per turn (its own calls; a subagent's are counted on the subagent's turns), failed ones included.
    "inference_calls": ("gen_ai.invoke_agent.inference_calls", "{inference_call}",
                        "Provider calls (attempts) an agent turn made", CALL_COUNT_BUCKETS),
    "tool_calls": ("gen_ai.invoke_agent.tool_calls", "{tool_call}", "Tool calls an agent turn made",
                   CALL_COUNT_BUCKETS),
}


class Instruments:
    """The histograms."""

    operation_duration: Any
    tokens: Any
    tool_duration: Any
    agent_duration: Any
    first_chunk: Any
    chunk_gap: Any
    inference_calls: Any
    tool_calls: Any

    def __init__(self, meter: Meter) -> None:
        for attr, (name, unit, description, buckets) in _HISTOGRAMS.items():
            setattr(self, attr, meter.create_histogram(name, unit=unit, description=description,
                                                       explicit_bucket_boundaries_advisory=buckets))
