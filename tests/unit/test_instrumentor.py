"""`HermesInstrumentor` as a contrib instrumentor (issue 25, item 1.8): explicit providers, idempotent, suppression
honoured, the entry point; real `hermes_cli.middleware` runners, in-memory exporters."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel import HermesInstrumentor
from hermes_otel.capture.legacy.patches import PATCHES

middleware = pytest.importorskip("hermes_cli.middleware")


@pytest.fixture(autouse=True)
def patches_as_they_were():
    """Another test of this process (the plugin, loaded) may have patched Hermes: put its patches back after."""
    was = (PATCHES.active, PATCHES._tracker, PATCHES._on_unloaded)  # noqa: SLF001 - our own class
    PATCHES.uninstrument()
    yield
    PATCHES.uninstrument()
    if was[0]:
        PATCHES.instrument(was[1], was[2])


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = HermesInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    yield exporter
    instrumentor.uninstrument()
    provider.shutdown()
    assert not PATCHES.active


def test_it_traces_a_provider_call_and_a_tool_call_on_the_providers_passed(spans):
    request = {"model": "m1", "messages": []}
    response = {"id": "r1", "model": "m1", "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    assert middleware.run_llm_execution_middleware(request, lambda r: response, api_request_id="a1") is response
    assert middleware.run_tool_execution_middleware("terminal", {"command": "ls"}, lambda a: "out",
                                                    tool_call_id="c1") == "out"
    got = {s.name: s for s in spans.get_finished_spans()}
    assert sorted(got) == ["chat m1", "execute_tool terminal"]
    assert got["chat m1"].attributes["gen_ai.usage.input_tokens"] == 3
    assert got["execute_tool terminal"].attributes["gen_ai.tool.call.id"] == "c1"
    assert got["chat m1"].instrumentation_scope.name == "hermes_otel"


def test_instrument_is_idempotent_and_uninstrument_restores_the_runners():
    original = middleware.run_llm_execution_middleware
    instrumentor = HermesInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider())
    wrapped = middleware.run_llm_execution_middleware
    instrumentor.instrument(tracer_provider=TracerProvider())  # a second call changes nothing
    assert middleware.run_llm_execution_middleware is wrapped and wrapped is not original
    instrumentor.uninstrument()
    assert middleware.run_llm_execution_middleware is original and not PATCHES.active


def test_suppressed_instrumentation_passes_calls_through_untraced(spans):
    with suppress_instrumentation():
        assert middleware.run_llm_execution_middleware({"model": "m1"}, lambda r: "ok") == "ok"
        assert middleware.run_tool_execution_middleware("terminal", {}, lambda a: "out") == "out"
    assert spans.get_finished_spans() == ()


def test_it_is_registered_as_an_opentelemetry_instrumentor():
    (entry,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "hermes"]
    assert entry.load() is HermesInstrumentor


def test_beside_the_plugins_wrappers_the_instrumentor_neither_redirects_nor_undoes_them():
    """One owner for the wrappers (issue 39): an application's instrumentor beside a loaded plugin stands down,
    reports itself not the owner, and its uninstrument() leaves the plugin's wrappers and tracker in place."""
    plugin_tracker = object()
    PATCHES.instrument(lambda: plugin_tracker, owner="plugin")
    runner = middleware.run_llm_execution_middleware
    instrumentor = HermesInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider())
    try:
        assert PATCHES.owner == "plugin" and PATCHES._tracker() is plugin_tracker  # noqa: SLF001 - not redirected
        assert middleware.run_llm_execution_middleware is runner
    finally:
        instrumentor.uninstrument()
    assert PATCHES.active and PATCHES.owner == "plugin" and hasattr(middleware.run_llm_execution_middleware,
                                                                    "__wrapped__")


def test_a_plugin_loaded_after_the_instrumentor_leaves_its_wrappers_alone():
    instrumentor = HermesInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider())
    try:
        owned = PATCHES._tracker  # noqa: SLF001 - our own class
        assert PATCHES.instrument(lambda: None, owner="plugin") is False
        assert PATCHES.owner == "instrumentor" and PATCHES._tracker is owned  # noqa: SLF001
    finally:
        instrumentor.uninstrument()
    assert not PATCHES.active
