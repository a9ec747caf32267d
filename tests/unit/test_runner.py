"""The spec-exact runner: the seed's rules, each layer a span (explicit provider, in-memory exporter)."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.middleware.runner import MiddlewareRunner


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("t"), exporter
    provider.shutdown()


def outcomes(exporter):
    return [(s.name, s.attributes.get("hermes.middleware.outcome")) for s in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)]


def test_request_middleware_composes_and_traces(spans):
    tracer, _ = spans
    runner = MiddlewareRunner(tracer)
    runner.register("llm_request", lambda **kw: {"request": {**kw["request"], "seed": 1}, "source": "a", "reason": "seed"}, plugin="a")
    runner.register("llm_request", lambda **kw: {"request": {**kw["request"], "top_p": 0.5}}, plugin="b")
    runner.register("llm_request", lambda **kw: None, plugin="c")
    original = {"model": "m", "messages": []}
    result = runner.apply_request("llm_request", original, session_id="s")
    assert result.payload == {"model": "m", "messages": [], "seed": 1, "top_p": 0.5}  # each saw the current payload
    assert result.original_payload == original and result.original_payload is not original
    assert result.trace == [{"source": "a", "reason": "seed"}, {"source": "plugin"}]
    assert result.changed
    callback = "test_runner.test_request_middleware_composes_and_traces.<locals>.<lambda>"
    assert [(e.name, e.attributes) for e in result.events] == [
        ("hermes.middleware.rewrite", {
            "hermes.middleware.kind": "llm_request", "hermes.middleware.plugin": "a",
            "hermes.middleware.callback": callback, "hermes.middleware.index": 0,
            "hermes.middleware.changed_keys": ("seed",),
            "hermes.middleware.source": "a", "hermes.middleware.reason": "seed"}),
        ("hermes.middleware.rewrite", {  # no trace fields: Hermes's default source, no reason
            "hermes.middleware.kind": "llm_request", "hermes.middleware.plugin": "b",
            "hermes.middleware.callback": callback, "hermes.middleware.index": 1,
            "hermes.middleware.changed_keys": ("top_p",), "hermes.middleware.source": "plugin"}),
    ]


def test_failures_are_reported_once_with_the_fields_passed(spans, caplog):
    tracer, _ = spans
    runner = MiddlewareRunner(tracer)

    def needs_a_field(*, request, missing_field, **_):
        return None

    runner.register("llm_request", needs_a_field, plugin="p")
    caplog.set_level(logging.DEBUG, logger="hermes_otel.middleware")
    for _ in range(3):
        assert runner.apply_request("llm_request", {"model": "m"}, session_id="s").payload == {"model": "m"}
    levels = [r.levelname for r in caplog.records]
    assert levels == ["WARNING", "DEBUG", "DEBUG"]
    first = caplog.records[0].getMessage()
    assert "needs_a_field raised TypeError" in first
    assert "(middleware passes: middleware_schema_version, original_request, request, session_id, telemetry_schema_version)" in first
    runner.reset()
    runner.register("llm_request", needs_a_field, plugin="p")
    caplog.clear()
    runner.apply_request("llm_request", {"model": "m"})
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # reload starts over


def test_execution_chain_outcomes_and_spans(spans):
    tracer, exporter = spans
    runner = MiddlewareRunner(tracer)
    calls = []

    def ok(**kw):
        return kw["next_call"]({**kw["request"], "tagged": True})

    def broken(**kw):
        raise RuntimeError("before next_call")

    def after(**kw):
        kw["next_call"](kw["request"])
        raise ValueError("after a successful next_call")

    runner.register("llm_execution", ok, plugin="ok")
    runner.register("llm_execution", broken, plugin="broken")
    runner.register("llm_execution", after, plugin="after")

    def provider(request):
        calls.append(request)
        return {"id": "r1"}

    with tracer.start_as_current_span("chat m"):
        assert runner.run_execution("llm_execution", {"model": "m"}, provider, model="m") == {"id": "r1"}
    assert calls == [{"model": "m", "tagged": True}]  # ran once, with ok's payload
    assert outcomes(exporter) == [
        ("chat m", None),
        ("llm_execution ok", "ok"),
        ("llm_execution broken", "fail_open"),
        ("llm_execution after", "fail_open"),
        ("provider_call m", None),
    ]
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert by_name["llm_execution ok"].attributes["hermes.middleware.payload_changed"] is True
    assert by_name["llm_execution ok"].attributes["hermes.middleware.changed_keys"] == ("tagged",)
    assert by_name["provider_call m"].parent.span_id == by_name["llm_execution after"].context.span_id
    assert by_name["llm_execution after"].parent.span_id == by_name["llm_execution ok"].context.span_id


def test_short_circuit_double_call_and_downstream_errors(spans):
    tracer, exporter = spans
    runner = MiddlewareRunner(tracer)
    runner.register("tool_execution", lambda **kw: "canned", plugin="short")
    assert runner.run_execution("tool_execution", {"a": 1}, lambda args: pytest.fail("must not run"), tool_name="t") == "canned"
    assert outcomes(exporter) == [("tool_execution short", "short_circuit")]

    exporter.clear()
    runner.reset()
    ran = []

    def twice(**kw):
        kw["next_call"](kw["args"])
        return kw["next_call"](kw["args"])  # contract violation: raises, result of the first call is kept

    runner.register("tool_execution", twice, plugin="twice")
    assert runner.run_execution("tool_execution", {}, lambda args: ran.append(1) or "once", tool_name="t") == "once"
    assert ran == [1]

    exporter.clear()
    runner.reset()
    runner.register("tool_execution", lambda **kw: kw["next_call"](kw["args"]), plugin="pass")

    class ToolBroke(Exception):
        pass

    def failing_tool(args):
        raise ToolBroke("disk full")

    with pytest.raises(ToolBroke, match="disk full"):  # the original error, unwrapped, never a None result
        runner.run_execution("tool_execution", {}, failing_tool, tool_name="t")
    assert outcomes(exporter) == [("tool_execution pass", "error"), ("tool_call t", None)]
    layer = next(s for s in exporter.get_finished_spans() if s.name == "tool_execution pass")
    assert layer.attributes["error.type"] == "ToolBroke"


def test_unknown_kind_and_non_callable_are_rejected_clearly():
    runner = MiddlewareRunner()
    with pytest.raises(ValueError, match="unknown middleware kind 'llm_magic'"):
        runner.register("llm_magic", lambda **kw: None)
    with pytest.raises(TypeError, match="must be callable"):
        runner.register("llm_request", "not a function")
    assert runner.run_execution("llm_execution", {"x": 1}, lambda r: r) == {"x": 1}


def test_hermes_warning_filter_never_raises():
    import logging

    from hermes_otel.middleware.log_hygiene import MiddlewareWarningFilter

    class NoStr(Exception):
        def __str__(self):
            raise ValueError("no str for you")

    record = logging.LogRecord("hermes_cli.middleware", logging.WARNING, __file__, 1,
                               "Middleware '%s' callback %s raised: %s", ("llm_execution", "cb", NoStr()), None)
    assert MiddlewareWarningFilter().filter(record) is True  # inside Hermes's except block: must not raise


def test_a_layers_end_goes_to_the_records_thread_stamped_when_the_layer_returned(spans):
    """Through Hermes's chain, a layer's and the real call's span ends (and the layer's duration metric) are
    handed to the records thread: exported later, with the end time of the call and the same spans as inline."""
    import threading
    import time

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from hermes_otel.emitter import Emitter
    from hermes_otel.middleware.layers import LayerTracer

    tracer, exporter = spans
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("t")

    def tag(**kw):
        return kw["next_call"]({**kw["request"], "tagged": True})

    def run(layers):
        stand_ins, terminal = layers.chain("llm_execution", [tag], lambda request: {"id": "r1", **request},
                                           {"model": "m"}, plugin_of=lambda cb: "tagger")
        with tracer.start_as_current_span("chat m") as chat:
            result = stand_ins[0](request={"model": "m"}, next_call=terminal)
        return result, chat, time.time_ns()

    inline_result, _, _ = run(LayerTracer(tracer, meter))
    inline = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    exporter.clear()

    emitter, gate = Emitter(), threading.Event()
    emitter.submit(gate.wait)  # the records thread is busy: what the chain hands it waits
    layers = LayerTracer(tracer, meter, emitter.submit_end)
    result, chat, returned = run(layers)
    assert result == inline_result == {"id": "r1", "model": "m", "tagged": True}
    assert [s.name for s in exporter.get_finished_spans()] == ["chat m"]  # the layer's end is handed over
    time.sleep(0.05)
    gate.set()
    emitter.drain()
    handed = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    assert [(s.name, dict(s.attributes)) for s in handed] == [(s.name, dict(s.attributes)) for s in inline]
    by_name = {s.name: s for s in handed}
    layer, call = by_name["llm_execution tagger"], by_name["provider_call m"]
    assert call.parent.span_id == layer.context.span_id and layer.parent.span_id == chat.get_span_context().span_id
    for span in (layer, call):  # ended when the call returned, not when the records thread got to it
        assert span.start_time <= span.end_time <= returned, span.name
    assert call.end_time <= layer.end_time
    points = [p for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics
              if m.name == "hermes.middleware.duration" for p in m.data.data_points]
    assert sum(p.count for p in points) == 2  # one per run: inline, then handed over
    exemplars = [e for p in points for e in p.exemplars]
    layer_ids = {s.context.span_id for s in (*inline, *handed) if s.name == "llm_execution tagger"}
    assert exemplars and {e.span_id for e in exemplars} <= layer_ids  # recorded in the layer's own context
    emitter.shutdown()
