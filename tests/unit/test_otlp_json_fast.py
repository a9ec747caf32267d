"""The direct OTLP/JSON span and log encoders match the protobuf-based reference.

Every test encodes one batch both ways and compares the dicts and their JSON
text (so key order matches too, byte for byte as written to the files).

Run this file directly for a rough timing of both paths:
``.venv/bin/python tests/unit/test_otlp_json_fast.py``.
"""

from __future__ import annotations

import base64
import enum
import inspect
import json
import logging
import math
import os
import random
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any
from unittest import mock

import pytest
from opentelemetry._logs import LogRecord as APILogRecord
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider, LogRecordLimits, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from hermes_otel.exporters.file.otlp_json import encode_logs_json, encode_spans_json

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})  # bytes ids in spans, links, logs, exemplars
_OPAQUE_KEYS = frozenset({"attributes", "body", "filteredAttributes"})  # AnyValue subtrees never hold ids


def _to_otlp_json(message: Any) -> dict[str, Any]:
    """A protobuf message as OTLP/JSON: lowerCamelCase names, integer enums, hex ids."""
    from google.protobuf.json_format import MessageToDict

    obj = MessageToDict(message, preserving_proto_field_name=False, use_integers_for_enums=True)
    _ids_to_hex(obj)
    return obj


def _ids_to_hex(node: Any) -> None:
    """Rewrite base64 id fields as hex, in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            elif key not in _OPAQUE_KEYS and isinstance(value, (dict, list)):
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)


def _encode_spans_json_reference(spans):
    """The official protobuf encoder's request as OTLP/JSON: what the fast encoder must equal (slow)."""
    return _to_otlp_json(encode_spans(spans))


def _encode_logs_json_reference(batch):
    return _to_otlp_json(encode_logs(batch))

# The limits tests drop log attributes on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Log record attributes were dropped")


def _reference_encodes_none() -> bool:
    """Whether the installed exporter encodes a None value as an empty AnyValue, as ours does (1.43 and later);
    before, it left a log's None body and attribute values out and dropped a span attribute holding one."""
    from opentelemetry.exporter.otlp.proto.common._internal import _encode_value

    try:
        return _encode_value(None) is not None
    except Exception:  # noqa: BLE001 - an older exporter: None is an invalid type there
        return False


# For the tests whose batches hold None values (log bodies and attributes, hand-built span attributes).
needs_current_reference = pytest.mark.skipif(
    not _reference_encodes_none(), reason="the installed exporter (before 1.43) encodes None values otherwise")

RESOURCE = Resource.create(
    {
        "service.name": "hermes-test",
        "service.version": "1.2.3",
        "process.pid": 4242,
        "host.cores": 8,
        "sample.ratio": 0.25,
        "deployment.flags": ("a", "b"),
        "enabled": True,
    },
    schema_url="https://opentelemetry.io/schemas/1.26.0",
)

# One value of every attribute type a span accepts, sequences of each, and the
# edge values that encode specially (zero, empty, non-finite, int64 bounds).
ALL_ATTRIBUTE_TYPES: dict[str, Any] = {
    "str": "gpt-4o",
    "str.empty": "",
    "str.unicode": "héllo ✓ 日本 🚀",
    "str.escapes": 'quote" back\\slash\nnewline\ttab\x00nul',
    "int": 11,
    "int.zero": 0,
    "int.negative": -7,
    "int.max": 2**63 - 1,
    "int.min": -(2**63),
    "float": 0.5,
    "float.zero": 0.0,
    "float.negzero": -0.0,
    "float.whole": 3.0,
    "float.big": 1e300,
    "float.tiny": 5e-324,
    "float.nan": math.nan,
    "float.inf": math.inf,
    "float.neginf": -math.inf,
    "bool.true": True,
    "bool.false": False,
    "bytes": b"\x00\x01binary\xff",
    "bytes.empty": b"",
    "seq.str": ["a", "", "ü"],
    "seq.int": [1, 0, -(2**63)],
    "seq.float": [0.5, 0.0, math.inf],
    "seq.bool": [True, False],
    "seq.bytes": [b"x", b""],
    "seq.empty": [],
}


def assert_same(fast: dict[str, Any], reference: dict[str, Any]) -> None:
    assert fast == reference
    # Equal dicts can still print differently: key order and int/str/float types.
    assert json.dumps(fast, separators=(",", ":")) == json.dumps(reference, separators=(",", ":"))


def check_spans(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    fast = encode_spans_json(spans)
    assert_same(fast, _encode_spans_json_reference(spans))
    return fast


def check_logs(batch: Sequence[Any]) -> dict[str, Any]:
    fast = encode_logs_json(batch)
    assert_same(fast, _encode_logs_json_reference(batch))
    return fast


def tracer_provider(memory: InMemorySpanExporter, resource: Resource = RESOURCE, **kwargs: Any) -> TracerProvider:
    provider = TracerProvider(resource=resource, shutdown_on_exit=False, **kwargs)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider


def logger_provider(memory: InMemoryLogRecordExporter, resource: Resource = RESOURCE, **kwargs: Any) -> LoggerProvider:
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False, **kwargs)
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    return provider


def remote_context(trace_state: TraceState | None = None) -> SpanContext:
    return SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=trace_state or TraceState(),
    )


def varied_spans() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, span_limits=SpanLimits(max_span_attributes=40, max_event_attributes=2))
    agent = provider.get_tracer(
        "hermes_otel", "0.1.0", schema_url="https://opentelemetry.io/schemas/1.26.0", attributes={"scope.attr": "x"}
    )
    http = provider.get_tracer("httpx-instrumentation", "0.66b2", schema_url="https://example.com/schema")

    with agent.start_as_current_span("turn", kind=SpanKind.SERVER) as turn:
        turn.set_attributes(ALL_ATTRIBUTE_TYPES)
        turn.add_event("started")
        turn.add_event("retry", {"attempt": 2, "reason": "rate limit", "delays": [0.5, 1.0]}, timestamp=1234)
        turn.add_event("over-limit", {"a": 1, "b": 2, "c": 3})  # max_event_attributes=2 drops one
        with agent.start_as_current_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            links=[
                Link(remote_context(), {"link.kind": "follows", "link.n": 1}),
                Link(turn.get_span_context()),
            ],
        ) as chat:
            chat.set_attribute("gen_ai.usage.input_tokens", 11)
            chat.set_status(Status(StatusCode.ERROR, "boom"))
            with http.start_as_current_span("POST", kind=SpanKind.PRODUCER) as post:
                post.set_status(Status(StatusCode.OK))
            with http.start_as_current_span("consume", kind=SpanKind.CONSUMER) as consume:
                consume.set_status(Status(StatusCode.ERROR))  # no description
        with agent.start_as_current_span("internal", kind=SpanKind.INTERNAL) as internal:
            internal.set_status(Status(StatusCode.ERROR, ""))

    # A child of a remote parent carrying trace state.
    parent = NonRecordingSpan(remote_context(TraceState([("vendor", "v1"), ("other", "xy")])))
    with agent.start_as_current_span("remote child", context=set_span_in_context(parent)):
        pass

    # Dropped attributes through SpanLimits.
    limited = tracer_provider(memory, span_limits=SpanLimits(max_span_attributes=2, max_events=1, max_links=1))
    with limited.get_tracer("limited").start_as_current_span(
        "limited", links=[Link(remote_context()), Link(remote_context())]
    ) as span:
        span.set_attributes({"k1": 1, "k2": 2, "k3": 3, "k4": 4})
        span.add_event("one")
        span.add_event("two")

    # A tracer with no version or schema url, and one with an empty name.
    with provider.get_tracer("bare").start_as_current_span(""):
        pass
    with provider.get_tracer("").start_as_current_span("unnamed scope"):
        pass
    return list(memory.get_finished_spans())


def test_empty_batches_encode_to_empty_objects() -> None:
    assert check_spans([]) == {}
    assert check_logs([]) == {}


def test_varied_spans_match_reference() -> None:
    spans = varied_spans()
    encoded = check_spans(spans)

    # Sanity-check that the batch really exercises what it claims to.
    resource_spans = encoded["resourceSpans"]
    assert len(resource_spans) == 1
    assert resource_spans[0]["schemaUrl"] == "https://opentelemetry.io/schemas/1.26.0"
    scopes = [scope_spans["scope"] for scope_spans in resource_spans[0]["scopeSpans"]]
    assert {"name": "httpx-instrumentation", "version": "0.66b2"} in scopes
    assert {
        "name": "hermes_otel",
        "version": "0.1.0",
        "attributes": [{"key": "scope.attr", "value": {"stringValue": "x"}}],
    } in scopes
    assert {} in scopes  # get_tracer("") encodes an empty scope
    all_spans = {span.get("name", ""): span for scope in resource_spans[0]["scopeSpans"] for span in scope["spans"]}
    assert all_spans["limited"]["droppedAttributesCount"] == 2
    assert all_spans["limited"]["droppedEventsCount"] == 1
    assert all_spans["limited"]["droppedLinksCount"] == 1
    assert all_spans["remote child"]["flags"] == 0x300
    assert all_spans["remote child"]["traceState"] == "vendor=v1,other=xy"
    assert all_spans["chat gpt-4o"]["status"] == {"message": "boom", "code": 2}
    assert all_spans["turn"]["events"][2]["droppedAttributesCount"] == 1
    # Every value the SDK kept (SDK 1.39 drops a bytes value that is not UTF-8; later releases keep it as bytes).
    kept = next(span for span in spans if span.name == "turn").attributes
    assert len(all_spans["turn"]["attributes"]) == len(kept) >= len(ALL_ATTRIBUTE_TYPES) - 1


@pytest.mark.parametrize("size", [1, 2, 5])
def test_each_span_alone_and_in_small_batches(size: int) -> None:
    spans = varied_spans()
    for start in range(0, len(spans), size):
        check_spans(spans[start : start + size])


def test_grouping_by_resource_and_scope_keeps_first_seen_order() -> None:
    memory = InMemorySpanExporter()
    other = Resource.create({"service.name": "other"})
    same_as_default = Resource.create(dict(RESOURCE.attributes), schema_url=RESOURCE.schema_url)
    providers = [
        tracer_provider(memory),
        tracer_provider(memory, resource=other),
        tracer_provider(memory, resource=same_as_default),  # equal, not identical
        tracer_provider(memory, resource=Resource.get_empty()),
    ]
    scopes = [("a", None, None), ("b", "1", None), ("a", "1", "s"), ("a", None, None)]
    for round_ in range(3):
        for provider_index, provider in enumerate(providers):
            for name, version, schema_url in scopes[round_:] + scopes[:round_]:
                tracer = provider.get_tracer(name, version, schema_url=schema_url)
                with tracer.start_as_current_span(f"s{round_}.{provider_index}.{name}"):
                    pass
    spans = memory.get_finished_spans()
    encoded = check_spans(spans)
    assert len(encoded["resourceSpans"]) == 3  # RESOURCE and same_as_default merge
    check_spans(list(reversed(spans)))


class _Str(str):
    def __str__(self) -> str:
        return "not what protobuf stores"


def test_hand_built_spans_with_unset_fields_match_reference() -> None:
    context = SpanContext(trace_id=1, span_id=2, is_remote=False)
    spans = [
        ReadableSpan(name="no times", context=context),
        ReadableSpan(
            name="no status",
            context=context,
            parent=SpanContext(trace_id=1, span_id=3, is_remote=False),
            status=None,  # type: ignore[arg-type]
            start_time=0,
            end_time=5,
            events=(Event("e", {"k": "v"}, timestamp=0),),
            instrumentation_scope=InstrumentationScope("scope", "", "", None),
        ),
        ReadableSpan(name="", context=context, resource=Resource({}, schema_url="")),
        # Keys the SDK would have refused; protobuf takes None and "" as unset, bytes as UTF-8.
        ReadableSpan(name="raw keys", context=context, attributes={"": 1, None: 2, b"k": 3, 4: 5, b"\xff": 6}),
        ReadableSpan(name="subclasses", context=context, attributes={"enum": SpanKind.CLIENT, "strsub": _Str("s")}),
    ]
    check_spans(spans)


def test_limits_of_zero_drop_everything_and_still_count_it() -> None:
    memory = InMemorySpanExporter()
    provider = tracer_provider(memory, span_limits=SpanLimits(max_span_attributes=0, max_events=0, max_links=0))
    with provider.get_tracer("t").start_as_current_span("nothing kept", links=[Link(remote_context())]) as span:
        span.set_attributes({"a": 1, "b": 2})
        span.add_event("e")
    encoded = check_spans(memory.get_finished_spans())
    span_json = encoded["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert "attributes" not in span_json and "events" not in span_json and "links" not in span_json
    assert span_json["droppedEventsCount"] == 1 and span_json["droppedLinksCount"] == 1


class _RedactingSpan(ReadableSpan):
    """A ReadableSpan whose public properties differ from what it stores."""

    @property
    def attributes(self) -> Any:
        return {key: "redacted" for key in super().attributes}

    @property
    def events(self) -> Any:
        return ()


def test_span_subclasses_are_read_through_their_public_properties() -> None:
    context = SpanContext(trace_id=1, span_id=2, is_remote=False)
    span = _RedactingSpan(name="s", context=context, attributes={"secret": "x"}, events=(Event("e"),))
    encoded = check_spans([span])
    span_json = encoded["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span_json["attributes"] == [{"key": "secret", "value": {"stringValue": "redacted"}}]
    assert "events" not in span_json


def test_attributes_the_reference_rejects_are_dropped_the_same_way(caplog: pytest.LogCaptureFixture) -> None:
    memory = InMemorySpanExporter()
    provider = tracer_provider(memory)
    with provider.get_tracer("t").start_as_current_span("bad values") as span:
        span.set_attributes(
            {
                "int.too.big": 2**63,
                "int.too.small": -(2**63) - 1,
                "seq.too.big": [1, 2**64],
                "surrogate": "bad \ud800 text",
                "seq.surrogate": ["ok", "\udfff"],
                "ok": "kept",
            }
        )
        span.add_event("e", {"\ud800key": 1, "fine": 2})
    spans = memory.get_finished_spans()

    logger_name = "opentelemetry.exporter.otlp.proto.common._internal"
    with caplog.at_level(logging.ERROR, logger=logger_name):
        fast = encode_spans_json(spans)
    fast_messages = [record.getMessage() for record in caplog.records]
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger=logger_name):
        reference = _encode_spans_json_reference(spans)
    reference_messages = [record.getMessage() for record in caplog.records]

    assert_same(fast, reference)
    attributes = fast["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    assert attributes == [{"key": "ok", "value": {"stringValue": "kept"}}]
    assert len(fast_messages) == len(reference_messages) == 6
    assert [m.split(":")[0] for m in fast_messages] == [m.split(":")[0] for m in reference_messages]


def varied_log_records() -> list[Any]:
    memory = InMemoryLogRecordExporter()
    provider = logger_provider(memory)
    logger = provider.get_logger("hermes_otel", "0.1.0", schema_url="https://opentelemetry.io/schemas/1.26.0")
    other = provider.get_logger("other", attributes={"scope.attr": 1})

    logger.emit(body="plain text", severity_number=SeverityNumber.INFO, severity_text="INFO")
    logger.emit(
        body={"role": "assistant", "tokens": 11, "nested": {"list": [1, "two", 3.0, None, True]}, "none": None},
        severity_number=SeverityNumber.WARN,
        attributes={"k": "v", "n": 1, "seq": (1, 2)},
        event_name="gen_ai.choice",
        timestamp=1_700_000_000_000_000_000,
    )
    logger.emit(body=["a", 1, 0.5, False, b"raw", [], {}])
    logger.emit(body=None, severity_number=SeverityNumber.ERROR, severity_text="")
    logger.emit(body="", attributes=ALL_ATTRIBUTE_TYPES)
    other.emit(body=0)
    other.emit(body=math.nan, attributes={"dict": {"a": {"b": [1, {"c": None}]}}, "empty.dict": {}, "none": None})
    other.emit(body=b"\x00\xff", event_name="")

    # Inside a span: trace and span ids plus sampled flags.
    tracer = tracer_provider(InMemorySpanExporter()).get_tracer("t")
    with tracer.start_as_current_span("in span") as span:
        context = set_span_in_context(span)
        logger.emit(body="in span", context=context, severity_number=SeverityNumber.DEBUG)
        other.emit(body={"x": 1}, context=context, event_name="event.in.span")
    # Not sampled: flags 0, ids still set.
    unsampled = NonRecordingSpan(
        SpanContext(trace_id=5, span_id=6, is_remote=True, trace_flags=TraceFlags(TraceFlags.DEFAULT))
    )
    logger.emit(body="unsampled", context=set_span_in_context(unsampled))

    # Dropped attributes through LogRecordLimits, on a second resource.
    limited = Resource.create({"service.name": "limited"})
    if "log_record_limits" in inspect.signature(LoggerProvider).parameters:
        provider = logger_provider(memory, resource=limited,
                                   log_record_limits=LogRecordLimits(max_log_record_attributes=1))
        provider.get_logger("limited").emit(body="limited", attributes={"a": 1, "b": 2, "c": 3})
    else:  # SDK before 1.45: the limits come from the environment only, read as each record is made
        with mock.patch.dict(os.environ, {"OTEL_ATTRIBUTE_COUNT_LIMIT": "1"}):
            logger_provider(memory, resource=limited).get_logger("limited").emit(
                body="limited", attributes={"a": 1, "b": 2, "c": 3})
    logger.emit(body="back on the first resource")
    return list(memory.get_finished_logs())


@needs_current_reference
def test_varied_log_records_match_reference() -> None:
    batch = varied_log_records()
    encoded = check_logs(batch)

    assert len(encoded["resourceLogs"]) == 2
    records = [r for scope in encoded["resourceLogs"][0]["scopeLogs"] for r in scope["logRecords"]]
    # flags carries the W3C trace flags: sampled (1), plus random-trace-id (2) from this SDK's id generator.
    assert any("traceId" in r and r.get("flags", 0) & 1 for r in records)
    assert any("traceId" in r and "flags" not in r for r in records)  # unsampled
    assert any(r.get("eventName") == "gen_ai.choice" for r in records)
    assert any(r["body"] == {} for r in records)
    limited = encoded["resourceLogs"][1]["scopeLogs"][0]["logRecords"][0]
    assert limited["droppedAttributesCount"] == 2


@needs_current_reference
@pytest.mark.parametrize("size", [1, 3])
def test_each_log_record_alone_and_in_small_batches(size: int) -> None:
    batch = varied_log_records()
    for start in range(0, len(batch), size):
        check_logs(batch[start : start + size])


def test_log_bodies_the_reference_rejects_raise_as_well() -> None:
    memory = InMemoryLogRecordExporter()
    logger = logger_provider(memory).get_logger("t")
    logger.emit(body={"big": 2**64})
    batch = memory.get_finished_logs()
    with pytest.raises(ValueError):
        _encode_logs_json_reference(batch)
    with pytest.raises(ValueError):
        encode_logs_json(batch)


# --- randomized differential check -------------------------------------------
#
# Hand-built SDK objects reach values the SDK's own validation filters out
# (non-str keys, nested mappings in span attributes, subclasses, surrogates,
# out-of-range ints and timestamps). Whether a batch encodes or raises, both
# encoders must agree: same output, or the same exception type.


class _IntEnum(enum.IntEnum):
    A = 3


class _Float(float):
    pass


class _Bytes(bytes):
    pass


def _random_value(rnd: random.Random, depth: int = 0) -> Any:
    options: list[Callable[[], Any]] = [
        lambda: None,
        lambda: rnd.random() < 0.5,
        lambda: rnd.randrange(-100, 100),
        lambda: rnd.randrange(-(2**64), 2**64),
        lambda: rnd.choice([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf]),
        lambda: rnd.choice(["", "abc", "é\u2028", "\ud800"]),
        lambda: rnd.choice([b"", b"\x00\xff", _Bytes(b"b"), bytearray(b"z")]),
        lambda: rnd.choice([_IntEnum.A, _Str("s"), _Float(2.5)]),
        lambda: object(),
    ]
    if depth < 3:
        options += [
            lambda: [_random_value(rnd, depth + 1) for _ in range(rnd.randrange(3))],
            lambda: tuple(_random_value(rnd, depth + 1) for _ in range(rnd.randrange(3))),
            lambda: {
                rnd.choice(["k", 1, None, "", "\ud800"]): _random_value(rnd, depth + 1) for _ in range(rnd.randrange(3))
            },
        ]
    return rnd.choice(options)()


def _random_attributes(rnd: random.Random) -> dict[Any, Any]:
    keys = ["a", "b", "", None, b"k", 1, "é", "\udc80", _Str("x")]
    return {rnd.choice(keys): _random_value(rnd) for _ in range(rnd.randrange(5))}


def _pick(rnd: random.Random, good: list[Any], bad: list[Any]) -> Any:
    return rnd.choice(bad) if rnd.random() < 0.05 else rnd.choice(good)


def _outcome(encode: Callable[[Any], dict[str, Any]], batch: Any) -> Any:
    try:
        return json.dumps(encode(batch))
    except Exception as error:  # noqa: BLE001
        return type(error)


def _reference_outcome(encode: Callable[[Any], dict[str, Any]], batch: Any) -> Any:
    """The reference's outcome as protobuf 7.34 and later give it: a bool in an integer field is a TypeError there,
    as in our encoder; protobuf before 7.34 (all that SDK 1.39 allows) still takes it with a DeprecationWarning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DeprecationWarning)
        outcome = _outcome(encode, batch)
    if any("Expected an int, got a boolean" in str(w.message) for w in caught):
        return TypeError
    return outcome


@needs_current_reference
def test_random_batches_match_reference_including_failures() -> None:
    logging.disable(logging.CRITICAL)  # dropped attributes are logged
    try:
        rnd = random.Random(20240611)
        resources = [Resource({"r": 1}), Resource({"r": 1}), Resource({"r": 2}, "u"), Resource({})]
        scopes = [None, InstrumentationScope("a"), InstrumentationScope("a", "1", "s", {"x": 1}), InstrumentationScope("")]
        outcomes = []
        for _ in range(300):
            spans = []
            for _ in range(rnd.randrange(1, 4)):
                context = SpanContext(
                    rnd.randrange(1, 2**128),
                    rnd.randrange(1, 2**64),
                    False,
                    trace_state=TraceState([("k", "v")]) if rnd.random() < 0.3 else None,
                )
                spans.append(
                    ReadableSpan(
                        name=_pick(rnd, ["", "n", "é", None, _Str("sub"), b"by"], ["\ud800", 5]),
                        context=context,
                        parent=rnd.choice([None, SpanContext(1, rnd.randrange(0, 9), rnd.random() < 0.5)]),
                        resource=rnd.choice(resources),
                        attributes=_random_attributes(rnd),
                        events=tuple(
                            Event(rnd.choice(["e", ""]), _random_attributes(rnd), rnd.choice([None, 0, 5]))
                            for _ in range(rnd.randrange(2))
                        ),
                        links=tuple(
                            Link(SpanContext(3, 4, rnd.random() < 0.5), _random_attributes(rnd))
                            for _ in range(rnd.randrange(2))
                        ),
                        kind=rnd.choice(list(SpanKind)),
                        status=rnd.choice([None, Status(), Status(StatusCode.OK), Status(StatusCode.ERROR, "x")]),
                        start_time=_pick(rnd, [None, 0, 10], [-1, 2**64, 1.5, True]),
                        end_time=rnd.choice([None, 0, 20]),
                        instrumentation_scope=rnd.choice(scopes),
                    )
                )
            outcomes.append(_outcome(encode_spans_json, spans))
            assert outcomes[-1] == _reference_outcome(_encode_spans_json_reference, spans)

            logs = []
            for _ in range(rnd.randrange(1, 4)):
                record = APILogRecord(  # ids and flags set directly: a deprecated form, still supported
                    timestamp=_pick(rnd, [None, 0, 7], [-5, 2.0]),
                    observed_timestamp=9,
                    trace_id=rnd.choice([0, 5]),
                    span_id=rnd.choice([0, 6]),
                    trace_flags=TraceFlags(rnd.choice([0, 1])),
                    severity_text=_pick(rnd, [None, "", "W"], ["\udc00", b"\xff", 3]),
                    severity_number=rnd.choice([None, SeverityNumber.UNSPECIFIED, SeverityNumber.WARN]),
                    body=_random_value(rnd),
                    attributes=_random_attributes(rnd),
                    event_name=rnd.choice([None, "", "ev", b"ev", _Str("ev")]),
                )
                logs.append(ReadableLogRecord(record, rnd.choice(resources), rnd.choice(scopes)))
            outcomes.append(_outcome(encode_logs_json, logs))
            assert outcomes[-1] == _reference_outcome(_encode_logs_json_reference, logs)
    finally:
        logging.disable(logging.NOTSET)
    # Both kinds of outcome were exercised.
    assert sum(isinstance(o, str) for o in outcomes) > 100
    assert sum(isinstance(o, type) for o in outcomes) > 50


# --- timing, run by hand ------------------------------------------------------


def _agent_like_spans(count: int) -> list[ReadableSpan]:
    """Spans shaped like the agent's: LLM calls with a dozen attributes, tool calls."""
    memory = InMemorySpanExporter()
    tracer = tracer_provider(memory).get_tracer("hermes_otel", "0.1.0")
    while len(memory.get_finished_spans()) < count:
        with tracer.start_as_current_span("invoke_agent hermes", kind=SpanKind.INTERNAL) as turn:
            turn.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "hermes"})
            with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as chat:
                chat.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "gpt-4o",
                        "gen_ai.response.model": "gpt-4o-2024-08-06",
                        "gen_ai.response.id": "chatcmpl-abc123",
                        "gen_ai.request.temperature": 0.2,
                        "gen_ai.request.max_tokens": 4096,
                        "gen_ai.usage.input_tokens": 1234,
                        "gen_ai.usage.output_tokens": 56,
                        "gen_ai.response.finish_reasons": ("tool_calls",),
                        "server.address": "api.openai.com",
                        "server.port": 443,
                    }
                )
                chat.add_event("gen_ai.content.prompt", {"gen_ai.prompt": "x" * 200})
            with tracer.start_as_current_span("execute_tool terminal") as tool:
                tool.set_attributes({"gen_ai.tool.name": "terminal", "gen_ai.tool.call.id": "call_1"})
                tool.set_status(Status(StatusCode.ERROR, "exit 1"))
    return list(memory.get_finished_spans())[:count]


def _agent_like_logs(count: int) -> list[Any]:
    memory = InMemoryLogRecordExporter()
    logger = logger_provider(memory).get_logger("hermes_otel", "0.1.0")
    span = tracer_provider(InMemorySpanExporter()).get_tracer("t").start_span("s")
    context = set_span_in_context(span)
    for i in range(count):
        logger.emit(
            body={"role": "assistant", "content": "y" * 200, "tool_calls": [{"id": f"call_{i}", "name": "terminal"}]},
            severity_number=SeverityNumber.INFO,
            event_name="gen_ai.choice",
            attributes={"gen_ai.provider.name": "openai", "index": i},
            context=context,
        )
    return list(memory.get_finished_logs())


def _per_item_us(encoders: dict[str, Callable[[Any], Any]], batch: Sequence[Any], rounds: int = 20) -> dict[str, float]:
    """Best-of-``rounds`` time per item; the encoders take turns so load spikes hit all alike."""
    best = dict.fromkeys(encoders, math.inf)
    for _ in range(rounds):
        for name, encode in encoders.items():
            start = time.perf_counter()
            encode(batch)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / len(batch) * 1e6 for name, seconds in best.items()}


def _timing(batch_size: int = 512) -> None:
    for label, batch, fast, reference in (
        ("span", _agent_like_spans(batch_size), encode_spans_json, _encode_spans_json_reference),
        ("log record", _agent_like_logs(batch_size), encode_logs_json, _encode_logs_json_reference),
    ):
        assert fast(batch) == reference(batch)
        encoded = fast(batch)
        us = _per_item_us(
            {
                "reference": reference,
                "direct": fast,
                "dumps": lambda _batch, encoded=encoded: json.dumps(encoded, separators=(",", ":")),
            },
            batch,
        )
        print(
            f"{label:>10}: protobuf+MessageToDict {us['reference']:6.1f} us, direct {us['direct']:5.1f} us "
            f"({us['reference'] / us['direct']:4.1f}x faster); json.dumps of the result {us['dumps']:5.1f} us "
            f"[per item, batch of {len(batch)}]"
        )


if __name__ == "__main__":
    _timing()


# -- metrics: the direct encoder equals the official protobuf encoder's JSON, byte for byte -------------------------


def _metrics_reference(data):
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

    return _to_otlp_json(encode_metrics(data))


def _metrics(record: Callable[[Any], None], *, exemplars: bool = True):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics._internal.exemplar import AlwaysOffExemplarFilter, AlwaysOnExemplarFilter
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View

    reader = InMemoryMetricReader()
    expo = View(instrument_name="expo*", aggregation=ExponentialBucketHistogramAggregation(max_size=20))
    provider = MeterProvider(resource=RESOURCE, metric_readers=[reader], shutdown_on_exit=False, views=[expo],
                             exemplar_filter=AlwaysOnExemplarFilter() if exemplars else AlwaysOffExemplarFilter())
    record(provider)
    data = reader.get_metrics_data()
    provider.shutdown()
    return data


@pytest.mark.parametrize("exemplars", [True, False])
def test_metrics_match_the_official_encoder_byte_for_byte(exemplars) -> None:
    from hermes_otel.exporters.file.otlp_json import encode_metrics_json

    span = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7, False, TraceFlags(1))

    def record(provider) -> None:
        meter = provider.get_meter("hermes_otel", "1.0", schema_url="https://opentelemetry.io/schemas/1.26.0",
                                   attributes={"scope.attr": "x"})
        other = provider.get_meter("other")
        in_span = set_span_in_context(NonRecordingSpan(span))
        meter.create_counter("ints", unit="{call}", description="whole numbers").add(3, {"a": "b"}, context=in_span)
        meter.create_counter("floats").add(0.25, {"n": 1})
        meter.create_up_down_counter("updown").add(-7)
        hist = meter.create_histogram("hist", unit="s", explicit_bucket_boundaries_advisory=[0, 1, 5])
        hist.record(2, {"k": True}, context=in_span)  # int measurements: sum, min and max are still doubles
        hist.record(0.5)
        meter.create_histogram("one").record(1e300)
        meter.create_gauge("gauge").set(-2.5, {"g": 1.5})
        meter.create_gauge("gauge_int").set(0)
        meter.create_counter("empty")  # no points: no data message
        expo = meter.create_histogram("expo", unit="s")  # exponential: zeros, an offset
        for value in (3, 0, 0.5, 1e6, 0.001):
            expo.record(value, {"e": 1}, context=in_span)
        meter.create_histogram("expo_one").record(1)  # one bucket, offset 0
        other.create_counter("zero").add(0)

    data = _metrics(record, exemplars=exemplars)
    fast = encode_metrics_json(data)
    assert_same(fast, _metrics_reference(data))
    names = [m["name"] for s in fast["resourceMetrics"][0]["scopeMetrics"] for m in s.get("metrics", ())]
    assert "hist" in names and "gauge" in names and "expo" in names

