"""The GenAI histograms the tracked entities record (semantic-convention names and buckets)."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from ..semconv import AGENT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS


class Instruments:
    def __init__(self, meter: Meter) -> None:
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.tool_duration = meter.create_histogram(
            "gen_ai.execute_tool.duration", unit="s", description="Tool call duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.agent_duration = meter.create_histogram(
            "gen_ai.invoke_agent.duration", unit="s", description="Agent turn duration",
            explicit_bucket_boundaries_advisory=AGENT_BUCKETS,
        )
