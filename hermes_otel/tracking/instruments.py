"""The GenAI histograms the tracked entities record (semantic-convention names and buckets).

A measurement is handed to `submit` (the records thread, see :mod:`hermes_otel.emitter`), which records
it through the SDK with the same value, attributes and context (so exemplars point at the call's span).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.metrics import Histogram, Meter

from ..semconv import AGENT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS


class Recorder:
    """A histogram's `record`, handed over to `submit`."""

    __slots__ = ("_record", "_submit")

    def __init__(self, histogram: Histogram, submit: Callable[..., None]) -> None:
        self._record, self._submit = histogram.record, submit

    def record(self, amount: float, attributes: Any = None, context: Any = None) -> None:
        self._submit(self._record, amount, attributes, context)


class Instruments:
    """The histograms (their `record`), recorded at once or through `submit`."""

    operation_duration: Any
    tokens: Any
    tool_duration: Any
    agent_duration: Any

    def __init__(self, meter: Meter, submit: Callable[..., None] | None = None) -> None:
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
        if submit is not None:
            for name in ("operation_duration", "tokens", "tool_duration", "agent_duration"):
                setattr(self, name, Recorder(getattr(self, name), submit))
