"""The GenAI histograms the tracked entities record (semantic-convention names and buckets).

They are recorded where a call's end is made: on the records thread (see :mod:`hermes_otel.emitter`),
with the call's span in the context (so exemplars point at it).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.metrics import Meter

from ..semconv import AGENT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS

# attribute -> (semantic-convention name, unit, description, bucket boundaries)
_HISTOGRAMS: dict[str, tuple[str, str, str, Any]] = {
    "operation_duration": ("gen_ai.client.operation.duration", "s", "GenAI operation duration", DURATION_BUCKETS),
    "tokens": ("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used", TOKEN_BUCKETS),
    "tool_duration": ("gen_ai.execute_tool.duration", "s", "Tool call duration", DURATION_BUCKETS),
    "agent_duration": ("gen_ai.invoke_agent.duration", "s", "Agent turn duration", AGENT_BUCKETS),
}


class Instruments:
    """The histograms."""

    operation_duration: Any
    tokens: Any
    tool_duration: Any
    agent_duration: Any

    def __init__(self, meter: Meter) -> None:
        for attr, (name, unit, description, buckets) in _HISTOGRAMS.items():
            setattr(self, attr, meter.create_histogram(name, unit=unit, description=description,
                                                       explicit_bucket_boundaries_advisory=buckets))
