"""Issue 17: fuzz targets for the configuration loader and the viewer's reader, bounded (a fixed number of
examples, derandomized, so `make test` runs them in seconds and the same way every time).

Properties: nothing raises, whatever the document, the environment or the file; every problem is one printable
line; no literal header value is ever shown; what the viewer prints from data has no control character."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_otel import config
from hermes_otel.cli.view import decode_line, group_traces, load_spans, render
from hermes_otel.config import relay, schema

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SECRET = "fuzz-secret-value-7731"

# Keys the loader knows, so that the fuzzer reaches deep into the validation, plus anything.
KNOWN = sorted({f.key.split(".")[-1] for f in schema.FIELDS} | {f.key for f in schema.FIELDS} | schema.SECTIONS
               | {f.key for _, fields in relay.TABLES for f in fields}
               | {"kind", "enabled", "config", "version", "policy", "components", "atof", "sinks", "opentelemetry",
                  "endpoints", "logs", "metrics", "unknown_field", "unsupported_value", "unknown_component"})
keys = st.one_of(st.sampled_from(KNOWN), st.text(max_size=8))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20),
    st.sampled_from(["hermes_otel", "observability", "file", "stream", "grpc", "http_binary", "gen_ai", "warn",
                     "ignore", "error", "http://127.0.0.1:9", "http://u:p@h:99999999", "/dev/zero", "NO_CONTENT",
                     "prometheus", "\x1b[2J", "RELAY_TOKEN"]),
)
trees = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(keys, inner, max_size=5)), max_leaves=25)


def mostly(good: st.SearchStrategy) -> st.SearchStrategy:
    """`good` nine times in ten, else anything: deep enough to reach every check, odd enough to test it."""
    return st.integers(0, 9).flatmap(lambda n: trees if n == 0 else good)


def plausible(spec) -> st.SearchStrategy:
    """A value of the field's type (often right, sometimes out of range), or anything."""
    typed = {str: st.sampled_from(list(spec.choices or ()) + ["", "x", "http://127.0.0.1:9", "/tmp/x"]),
             int: st.integers(-5, 10**20), float: st.floats(), bool: st.booleans(),
             dict: st.dictionaries(st.sampled_from(["authorization", "x-a", "bad key", ""]),
                                   st.one_of(st.text(max_size=8), st.just("RELAY_TOKEN"), trees), max_size=3),
             list: st.lists(st.one_of(st.text(max_size=8), st.just("http://127.0.0.1:9"), trees), max_size=3)}
    return mostly(typed.get(spec.type, trees))


def table(fields, extra: dict | None = None, required: dict | None = None) -> st.SearchStrategy:
    """A table of the given schema fields (each maybe present, maybe wrong), plus unknown keys sometimes."""
    optional = {spec.key.split(".")[-1]: plausible(spec) for spec in fields}
    optional.update(extra or {})
    for key in required or {}:
        optional.pop(key, None)
    return st.builds(lambda known, unknown: {**unknown, **known},
                     st.fixed_dictionaries(required or {}, optional=optional), st.dictionaries(keys, trees, max_size=1))


flag = mostly(st.booleans())
sink = mostly(st.one_of(table(relay.SINK_FIELDS["stream"], required={"type": st.sampled_from(["stream", "ws"]),
                                                                      "url": plausible(relay.SINK_FIELDS["stream"][1])}),
                        table(relay.SINK_FIELDS["file"], required={"type": st.just("file")})))
observability = table((), {"version": mostly(st.just(4)), "enable_full_payloads": flag}, required={
    "atof": mostly(table((), {"enabled": flag}, required={"sinks": mostly(st.lists(sink, min_size=1, max_size=3))})),
    "opentelemetry": mostly(table((), {"enabled": flag, "logs": mostly(table(relay.LOGS_FIELDS)),
                                       "metrics": mostly(table(relay.METRICS_FIELDS))}, required={
        "endpoints": mostly(st.lists(mostly(table(relay.ENDPOINT_FIELDS, required={
            "endpoint": plausible(relay.ENDPOINT_FIELDS[1])})), min_size=1, max_size=3))})),
})
ours = table([f for f in schema.FIELDS if "." not in f.key], {
    section: mostly(table([f for f in schema.FIELDS if f.key.startswith(section + ".")])) for section in schema.SECTIONS})
components = st.one_of(
    st.fixed_dictionaries({"kind": st.just("hermes_otel")}, optional={"enabled": flag, "config": mostly(ours)}),
    st.fixed_dictionaries({"kind": st.just("observability")}, optional={"enabled": flag,
                                                                          "config": mostly(observability)}),
    st.fixed_dictionaries({"kind": st.one_of(st.sampled_from(["pricing", "x"]), trees)},
                          optional={"enabled": trees, "config": trees}),
)
documents = st.fixed_dictionaries(
    {"version": st.one_of(st.just(1), trees)},
    optional={"policy": st.one_of(st.dictionaries(keys, st.sampled_from(["ignore", "warn", "error", "loud"])), trees),
              "components": mostly(st.lists(components, min_size=1, max_size=3))},
)


def _secret_headers(doc: dict) -> dict:
    """Put a literal header value into every headers table the fuzzer made."""
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("headers"), dict):
                node["headers"] = {"authorization": SECRET, **{str(k): SECRET for k in node["headers"]}}
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return doc


@FUZZ
@given(documents)
def test_the_config_loader_never_raises_and_never_shows_a_header_value(doc):
    doc = _secret_headers(doc)
    values, problems = config.validate_document(doc, "fuzz.toml", {"RELAY_TOKEN": "t"})
    for problem in problems:
        text = str(problem)
        assert "\n" not in text and "\x1b" not in text
        assert SECRET not in text
    if not any(p.fatal for p in problems):
        settings_ = config._build(values, {}, "fuzz.toml")
        assert 1 <= settings_.bsp_max_queue_size <= schema.MAX_ITEMS
        assert settings_.bsp_max_export_batch_size <= settings_.bsp_max_queue_size


env_names = st.sampled_from(sorted({f.env for f in schema.FIELDS if f.env} | {
    "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"}))
env_values = st.one_of(st.text(max_size=30), st.sampled_from(
    ["1e20", "100000000000000000000", "-1", "0", "inf", "nan", "true", "maybe", "a=b,c", "%zz=%", "http://h:0",
     "http://[::1", "grpc", "authorization=%0aBearer"]))


@FUZZ
@given(st.dictionaries(env_names, env_values, max_size=6))
def test_the_environment_never_raises_and_every_value_is_bounded(env):
    result = config.load_settings(env, Path(os.devnull))
    s = result.settings
    assert all(1 <= t.timeout_s * 1000 <= schema.MAX_MILLIS for t in s.otlp.values())
    assert 1 <= s.bsp_schedule_delay_ms <= schema.MAX_MILLIS and 100 <= s.metric_export_interval_ms <= schema.MAX_MILLIS
    assert 0 <= s.sampler_arg <= 1
    for problem in result.problems:
        assert "\n" not in str(problem)


@FUZZ
@given(st.binary(max_size=2000))
def test_any_file_is_a_problem_not_a_crash(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "plugins.toml"
    path.write_bytes(data)
    values, problems = config.read_component(path, {})
    assert isinstance(values, dict) and all("\n" not in str(p) for p in problems)


# -- the viewer's reader ---------------------------------------------------------------------------------------------

VALID = json.loads(
    '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"s"}}]},'
    '"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331",'
    '"parentSpanId":"","name":"invoke_agent hermes","kind":1,"startTimeUnixNano":"1700000000000000000",'
    '"endTimeUnixNano":"1700000001000000000","attributes":[{"key":"gen_ai.tool.call.id","value":'
    '{"stringValue":"call_1"}}],"events":[{"name":"exception","timeUnixNano":"1700000000500000000",'
    '"attributes":[{"key":"exception.type","value":{"stringValue":"E"}}]}],"status":{"code":2}}]}]}]}'
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(string.printable + "\x1b\x07\u202e",
                                                                           max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=15,
)
SPAN_KEYS = ["traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano",
             "attributes", "events", "status"]


@st.composite
def lines(draw) -> str:
    """A valid line with some of its span's fields replaced, or any text."""
    if draw(st.booleans()):
        return draw(st.text(max_size=200))
    doc = json.loads(json.dumps(VALID))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in draw(st.lists(st.sampled_from(SPAN_KEYS), max_size=4, unique=True)):
        span[key] = draw(json_values)
    text = json.dumps(doc, allow_nan=True)
    return text if draw(st.booleans()) else text[: draw(st.integers(0, len(text)))]


@FUZZ
@given(st.lists(lines(), min_size=1, max_size=6))
def test_the_viewer_reader_never_raises_and_prints_no_control_character(tmp_path_factory, file_lines):
    path = tmp_path_factory.mktemp("view") / "traces.jsonl"
    path.write_text("\n".join(line.replace("\n", " ") for line in file_lines) + "\n")
    loaded = load_spans(path)
    assert loaded.bad_lines + sum(1 for line in file_lines if line.strip()) >= loaded.bad_lines
    for line in file_lines:
        try:
            decode_line(line)
        except Exception:  # noqa: BLE001 - refusing is fine; what matters is that load_spans counted it
            pass
    for ascii_ in (False, True):
        out = render(group_traces(loaded), width=80, ascii=ascii_)
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e\r"), repr(out)
