"""The GenAI instruments the tracked entities record (semantic-convention names and buckets).

They are recorded where a call's end is made: on the records thread (see :mod:`hermes_otel.emitter`),
with the call's span in the context (so exemplars point at it). The names are the latest GenAI conventions'
(open-telemetry/semantic-conventions-genai); with `v1_41` (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup`) the
v1.41.0 names that the latest ones replaced are recorded too, for dashboards that still read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.metrics import Meter

from .. import semconv as sc
from ..semconv import AGENT_BUCKETS, CALL_COUNT_BUCKETS, DURATION_BUCKETS, TOKEN_BUCKETS

# attribute -> (semantic-convention name, unit, description, bucket boundaries)
HISTOGRAMS: dict[str, tuple[str, str, str, Any]] = {
    "inference_duration": ("gen_ai.client.inference.duration", "s", "Duration of each provider attempt",
                           DURATION_BUCKETS),
    "input_tokens": ("gen_ai.client.inference.operation.input_tokens", "{token}",
                     "Input tokens of each provider attempt", TOKEN_BUCKETS),
    "output_tokens": ("gen_ai.client.inference.operation.output_tokens", "{token}",
                      "Output tokens of each provider attempt", TOKEN_BUCKETS),
    "tool_duration": ("gen_ai.execute_tool.duration", "s", "Tool call duration", DURATION_BUCKETS),
    "agent_duration": ("gen_ai.invoke_agent.duration", "s", "Agent turn duration", AGENT_BUCKETS),
    # Streamed replies only (the conventions: SHOULD NOT be reported otherwise).
    "first_chunk": ("gen_ai.client.inference.time_to_first_chunk", "s",
                    "Time from issuing a streamed request to its first chunk", DURATION_BUCKETS),
    "chunk_gap": ("gen_ai.client.inference.time_per_output_chunk", "s",
                  "Time between consecutive chunks of a streamed reply, after the first", DURATION_BUCKETS),
    # Per turn (its own calls; a subagent's are counted on the subagent's turns), failed ones included.
    "inference_calls": ("gen_ai.invoke_agent.inference_calls", "{inference_call}",
                        "Provider calls (attempts) an agent turn made", CALL_COUNT_BUCKETS),
    "tool_calls": ("gen_ai.invoke_agent.tool_calls", "{tool_call}", "Tool calls an agent turn made",
                   CALL_COUNT_BUCKETS),
}
# The usage counters, by the span attribute each counts, under `gen_ai.token.modality` "unknown" (Hermes reports
# totals, not modalities). Every attempt adds its input and output tokens (0 when its provider reported none, or
# it failed: the conventions count every inference operation); the cache and reasoning counts when its provider
# reported them (a count not reported is not known to be 0).
ALWAYS_COUNTED = (sc.USAGE_INPUT, sc.USAGE_OUTPUT)
USAGE_COUNTERS: dict[str, tuple[str, str]] = {
    sc.USAGE_INPUT: ("gen_ai.client.inference.usage.input_tokens", "Input tokens, cached ones included"),
    sc.USAGE_OUTPUT: ("gen_ai.client.inference.usage.output_tokens", "Output tokens, reasoning ones included"),
    sc.USAGE_CACHE_READ: ("gen_ai.client.inference.usage.cache_read.input_tokens",
                          "Input tokens served from the provider's cache"),
    sc.USAGE_CACHE_WRITE: ("gen_ai.client.inference.usage.cache_write.input_tokens",
                           "Input tokens written to the provider's cache"),
    sc.USAGE_REASONING: ("gen_ai.client.inference.usage.reasoning.output_tokens", "Reasoning output tokens"),
}
# v1.41.0's names of what the latest conventions renamed or replaced (recorded with `v1_41` only).
V1_41_HISTOGRAMS: dict[str, tuple[str, str, str, Any]] = {
    "operation_duration": ("gen_ai.client.operation.duration", "s", "GenAI operation duration", DURATION_BUCKETS),
    "tokens": ("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used", TOKEN_BUCKETS),
    "first_chunk_v1_41": ("gen_ai.client.operation.time_to_first_chunk", "s",
                          "Time from issuing a streamed request to its first chunk", DURATION_BUCKETS),
    "chunk_gap_v1_41": ("gen_ai.client.operation.time_per_output_chunk", "s",
                        "Time between consecutive chunks of a streamed reply, after the first", DURATION_BUCKETS),
}
MODALITY = "gen_ai.token.modality"
TOKEN_TYPE = "gen_ai.token.type"  # v1.41.0's gen_ai.client.token.usage only


class Instruments:
    """The histograms and counters, and what one inference operation records in them."""

    inference_duration: Any
    input_tokens: Any
    output_tokens: Any
    tool_duration: Any
    agent_duration: Any
    first_chunk: Any
    chunk_gap: Any
    inference_calls: Any
    tool_calls: Any
    operation_duration: Any  # v1.41.0's, with `v1_41` only
    tokens: Any
    first_chunk_v1_41: Any
    chunk_gap_v1_41: Any

    def __init__(self, meter: Meter, v1_41: bool = False) -> None:
        self.v1_41 = v1_41
        for attr, (name, unit, description, buckets) in {**HISTOGRAMS, **(V1_41_HISTOGRAMS if v1_41 else {})}.items():
            setattr(self, attr, meter.create_histogram(name, unit=unit, description=description,
                                                       explicit_bucket_boundaries_advisory=buckets))
        self._usage = tuple((key, meter.create_counter(name, unit="{token}", description=description))
                            for key, (name, description) in USAGE_COUNTERS.items())

    def inference(self, duration: float, usage: Mapping[str, Any], labels: Mapping[str, Any],
                  error_type: str | None, context: Context | None) -> None:
        """One provider attempt: its duration and tokens. A failed one records too (its input and output tokens 0),
        as the conventions ask, with `error.type` where they have it (the duration and the per-attempt
        histograms)."""
        errored = labels if error_type is None else {**labels, sc.ERROR_TYPE: error_type}
        self.inference_duration.record(duration, errored, context)
        self.input_tokens.record(usage.get(sc.USAGE_INPUT, 0), errored, context)
        self.output_tokens.record(usage.get(sc.USAGE_OUTPUT, 0), errored, context)
        counted = {**labels, MODALITY: "unknown"}
        for key, counter in self._usage:
            if key in usage or key in ALWAYS_COUNTED:
                counter.add(usage.get(key, 0), counted, context)
        if self.v1_41:
            self.operation_duration.record(duration, errored, context)
            for token_type, key in (("input", sc.USAGE_INPUT), ("output", sc.USAGE_OUTPUT)):
                if key in usage:  # v1.41.0: what the provider reported only
                    self.tokens.record(usage[key], {**labels, TOKEN_TYPE: token_type}, context)

    def stream(self, first: float, gaps: list[float], labels: Mapping[str, Any], context: Context | None) -> None:
        """A streamed reply's time to its first chunk and the gaps between its later chunks."""
        pairs = [(self.first_chunk, self.chunk_gap)]
        if self.v1_41:
            pairs.append((self.first_chunk_v1_41, self.chunk_gap_v1_41))
        for first_chunk, chunk_gap in pairs:
            first_chunk.record(first, labels, context)
            for gap in gaps:
                chunk_gap.record(gap, labels, context)
