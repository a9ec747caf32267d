"""Endpoint types of NeMo Relay's `[[components.config.opentelemetry.endpoints]]`, for our spans: `full` (every span
unchanged), `gen_ai` (the GenAI-convention view) and `openinference` (plus the OpenInference attributes), as
docs/relay.md describes them; and a resource override per endpoint. The work happens on the export thread, never on
the agent's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ... import semconv as sc

TYPES = ("full", "gen_ai", "openinference")
_GEN_AI_OPERATIONS = frozenset({sc.OP_AGENT, sc.OP_CHAT, sc.OP_TOOL})
_GEN_AI_PREFIXES = ("gen_ai.", "server.")
_GEN_AI_KEEP = frozenset({sc.ERROR_TYPE, sc.HTTP_STATUS})
_SCOPE = "hermes_otel"


def _copy(span: ReadableSpan, resource: Resource, attributes: Mapping[str, Any], events: Sequence[Any]) -> ReadableSpan:
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=resource,
        attributes=dict(attributes),
        events=tuple(events),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def gen_ai_view(span: ReadableSpan) -> dict[str, Any] | None:
    """The attributes of `span` in the gen_ai view, or None when the span is not part of it."""
    scope = span.instrumentation_scope.name if span.instrumentation_scope else ""
    attrs = span.attributes or {}
    if scope != _SCOPE or not (attrs.get(sc.OPERATION) in _GEN_AI_OPERATIONS or span.name.startswith("subagent")):
        return None
    return {k: v for k, v in attrs.items() if k.startswith(_GEN_AI_PREFIXES) or k in _GEN_AI_KEEP}


_OPENINFERENCE_KINDS: dict[object, str] = {sc.OP_AGENT: "AGENT", sc.OP_CHAT: "LLM", sc.OP_TOOL: "TOOL"}


def openinference_attributes(span: ReadableSpan) -> dict[str, Any]:
    attrs: Mapping[str, Any] = span.attributes or {}
    kind = _OPENINFERENCE_KINDS.get(attrs.get(sc.OPERATION))
    if kind is None:
        kind = "AGENT" if span.name.startswith("subagent") else "GUARDRAIL" if span.name == "approval" else "CHAIN"
    extra: dict[str, Any] = {"openinference.span.kind": kind}
    pairs = (
        (sc.CONVERSATION_ID, "session.id"),
        (sc.REQUEST_MODEL, "llm.model_name"),
        (sc.PROVIDER, "llm.provider"),
        (sc.USAGE_INPUT, "llm.token_count.prompt"),
        (sc.USAGE_OUTPUT, "llm.token_count.completion"),
        (sc.TOOL_NAME, "tool.name"),
        ("gen_ai.input.messages", "input.value"),
        ("gen_ai.output.messages", "output.value"),
        ("gen_ai.tool.call.arguments", "input.value"),
        ("gen_ai.tool.call.result", "output.value"),
    )
    for source, target in pairs:
        if source in attrs:
            extra[target] = attrs[source]
            if target in ("input.value", "output.value") and source.endswith("messages"):
                said = _only_text(attrs[source]) if kind == "AGENT" else None  # a turn's one message, as text
                extra[target] = said if said is not None else attrs[source]
                extra[target.replace("value", "mime_type")] = "text/plain" if said is not None else "application/json"
    if sc.USAGE_INPUT in attrs and sc.USAGE_OUTPUT in attrs:
        extra["llm.token_count.total"] = attrs[sc.USAGE_INPUT] + attrs[sc.USAGE_OUTPUT]
    if kind == "LLM":  # the conversation as OpenInference's flattened messages: role cards, tool calls, results
        for source, prefix in (("gen_ai.input.messages", "llm.input_messages"),
                               ("gen_ai.output.messages", "llm.output_messages")):
            if isinstance(text := attrs.get(source), str):
                extra.update(_flattened(text, prefix))
    return extra


def _flattened(text: str, prefix: str) -> dict[str, Any]:
    """Messages in the GenAI conventions' schema (our JSON, valid by construction) as OpenInference attributes."""
    try:
        messages = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, Any] = {}
    for i, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, dict):
            continue
        at = f"{prefix}.{i}.message"
        out[f"{at}.role"] = str(message.get("role", ""))
        texts, calls = [], 0
        for part in message.get("parts") or ():
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "tool_call":
                call = f"{at}.tool_calls.{calls}.tool_call"
                calls += 1
                out[f"{call}.function.name"] = str(part.get("name", ""))
                out[f"{call}.function.arguments"] = _as_text(part.get("arguments"))
                if isinstance(part.get("id"), str):
                    out[f"{call}.id"] = part["id"]
            elif kind == "tool_call_response":
                texts.append(_as_text(part.get("response")))
                if isinstance(part.get("id"), str):
                    out[f"{at}.tool_call_id"] = part["id"]
        if texts:
            out[f"{at}.content"] = "\n".join(texts)
    return out


def _only_text(text: str) -> str | None:
    """The text of a single message made of text parts only (a turn's question or answer), else None."""
    try:
        messages = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(messages, list) and len(messages) == 1 and isinstance(messages[0], dict)):
        return None
    parts = messages[0].get("parts") or []
    if not parts or not all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
        return None
    return "\n".join(str(p.get("content", "")) for p in parts)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class ShapedSpanExporter(SpanExporter):
    """Applies an endpoint type and resource override before handing spans to `inner`."""

    def __init__(self, inner: SpanExporter, endpoint_type: str, resource: Mapping[str, Any] | None = None) -> None:
        if endpoint_type not in TYPES:
            raise ValueError(f"endpoint type must be one of {', '.join(TYPES)}, not {endpoint_type!r}")
        self._inner = inner
        self.endpoint = getattr(inner, "endpoint", None)  # the OTLP endpoint behind it, for flushes (health.py)
        self._type = endpoint_type
        self._resource = Resource(dict(resource)) if resource else None
        self._resources: dict[int, Resource] = {}

    def _resource_for(self, span: ReadableSpan) -> Resource:
        base = span.resource
        cached = self._resources.get(id(base))
        if cached is None:
            cached = base.merge(self._resource) if self._resource is not None else base
            if self._type == "openinference" and "openinference.project.name" not in cached.attributes:
                name = cached.attributes.get("service.name", "default")
                cached = cached.merge(Resource({"openinference.project.name": name}))
            self._resources = {id(base): cached}  # one provider, one resource: a single entry suffices
        return cached

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        shaped = []
        for span in spans:
            resource = self._resource_for(span)
            if self._type == "gen_ai":
                attrs = gen_ai_view(span)
                if attrs is None:
                    continue
                shaped.append(_copy(span, resource, attrs, [e for e in span.events if e.name == "exception"]))
            elif self._type == "openinference":
                attributes = {**(span.attributes or {}), **openinference_attributes(span)}
                shaped.append(_copy(span, resource, attributes, span.events))
            else:
                same = resource is span.resource
                shaped.append(span if same else _copy(span, resource, span.attributes or {}, span.events))
        return self._inner.export(shaped) if shaped else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)
