"""Compare what a real run emitted with the catalog that docs/telemetry.md is generated from."""

from __future__ import annotations

from collections.abc import Sequence

from docsgen import catalog
from hermes_otel.capture import http_client

HOST_HTTP_SCOPE = "opentelemetry.instrumentation.httpx"  # a host's own (contrib) instrumentation, in some tests
_SDK_RESOURCE = {"telemetry.sdk.name", "telemetry.sdk.language", "telemetry.sdk.version"}


def _doc_for(span) -> catalog.SpanDoc:
    if getattr(span, "scope_name", "") == http_client.SCOPE:
        return catalog.HTTP_CLIENT_SPAN
    if span.attributes.get("hermes.middleware.terminal"):
        return catalog.MIDDLEWARE_SPANS[1]
    if "hermes.middleware.outcome" in span.attributes:
        return catalog.MIDDLEWARE_SPANS[0]
    if "hermes.subagent.id" in span.attributes or "hermes.subagent.role" in span.attributes:
        return catalog.SPANS[4]  # a subagent: `invoke_agent hermes` with its role
    operation = span.name.split(" ")[0]
    return {
        "invoke_agent": catalog.SPANS[0], "chat": catalog.SPANS[1], "execute_tool": catalog.SPANS[2],
        "approval": catalog.SPANS[3],
    }[operation]


def assert_documented(spans: Sequence, metrics: Sequence = (), logs: Sequence = ()) -> None:
    from hermes_otel.capture import logs as hermes_logs
    from hermes_otel.capture.bridge import HOOK_ATTR, KNOWN_HOOKS, SCHEMA_ATTR, STRING_KEYS

    strings = {f"hermes.{k}" for k in STRING_KEYS} | {HOOK_ATTR, SCHEMA_ATTR}
    for record in logs:
        if record.scope_name == hermes_logs.SCOPE:  # one of Hermes's own log lines
            assert not record.event_name and set(record.attributes) <= set(catalog.HERMES_LOG_ATTRIBUTES), record
            continue
        if record.event_name == catalog.DETAILS_EVENT:  # a chat span's details: its attributes and content
            assert set(record.attributes) <= set(catalog.SPANS[1].attributes), record.attributes
            continue
        assert record.event_name.startswith("hermes.observer.")
        hook = record.event_name.removeprefix("hermes.observer.")
        assert hook in KNOWN_HOOKS
        extra = set(catalog.LOG_ATTRIBUTES.get(hook, ()))
        for key, value in record.attributes.items():
            numeric = key.startswith("hermes.") and isinstance(value, (bool, int, float))
            assert key in strings or key in extra or numeric, key
    for span in spans:
        if getattr(span, "scope_name", "") == HOST_HTTP_SCOPE:  # not ours: the contrib instrumentation's own names
            assert span.kind == "CLIENT", span
            continue
        doc = _doc_for(span)
        assert set(span.attributes) <= set(doc.attributes), (span.name, set(span.attributes) - set(doc.attributes))
        for name, attrs in span.events:
            assert name in catalog.EVENTS, name
            assert set(attrs) <= set(catalog.EVENTS[name][1]) or name == "exception", (name, attrs)
        for link in span.links:
            assert set(link[2]) <= set(catalog.ATTRIBUTES)
        assert set(span.resource) - _SDK_RESOURCE <= set(catalog.RESOURCE)
    docs = {m.name: m for m in catalog.METRICS}
    for metric in metrics:
        assert metric.name in docs, metric.name
        assert metric.unit == docs[metric.name].unit, metric.name
        for point in metric.points:
            assert set(point["attributes"]) <= set(docs[metric.name].attributes), (metric.name, point["attributes"])
