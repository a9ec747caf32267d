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


# attribute -> (semantic-convention name, unit, description, bucket boundaries)
_HISTOGRAMS: dict[str, tuple[str, str, str, Any]] = {
    "operation_duration": ("gen_ai.client.operation.duration", "s", "GenAI operation duration", DURATION_BUCKETS),
    "tokens": ("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used", TOKEN_BUCKETS),
    "tool_duration": ("gen_ai.execute_tool.duration", "s", "Tool call duration", DURATION_BUCKETS),
    "agent_duration": ("gen_ai.invoke_agent.duration", "s", "Agent turn duration", AGENT_BUCKETS),
}


class Instruments:
    """The histograms (their `record`), recorded at once or through `submit`."""

    operation_duration: Any
    tokens: Any
    tool_duration: Any
    agent_duration: Any

    def __init__(self, meter: Meter, submit: Callable[..., None] | None = None) -> None:
        for attr, (name, unit, description, buckets) in _HISTOGRAMS.items():
            histogram = meter.create_histogram(name, unit=unit, description=description,
                                               explicit_bucket_boundaries_advisory=buckets)
            setattr(self, attr, histogram if submit is None else Recorder(histogram, submit))
