"""Where Hermes's internals differ, the public contract still gives the call spans."""

from __future__ import annotations

import logging

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import run_agent
from tests.harness.trees import tree

pytestmark = pytest.mark.hermes


def test_fallback_to_registered_middleware(traced, llm, receiver, monkeypatch, caplog):
    from hermes_cli.plugins import discover_plugins, get_plugin_manager

    from hermes_otel import plugin
    from hermes_otel.capture.legacy.patches import PATCHES, HermesPatches

    PATCHES.uninstrument()
    monkeypatch.setattr(HermesPatches, "available", staticmethod(lambda: False))
    monkeypatch.setattr(plugin, "_last_mode", None)
    caplog.set_level(logging.INFO, logger="hermes_otel")
    try:
        discover_plugins(force=True)
        assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("hermes-otel ")] == [
            "hermes-otel middleware: tracing through Hermes's middleware contract (a middleware of ours around each "
            "call, a span per layer)"
        ]
        assert len(get_plugin_manager()._middleware["llm_execution"]) == 1
        llm.push(Reply.tools(ToolCall("terminal", {"command": "echo fb"}, id="call_F")), Reply.text("fallback ok"))
        assert run_agent(llm.base_url, "go")["final_response"] == "fallback ok"
        traced.flush(5)
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)
        # Ours is the only layer here: the call's span is the whole chain, as in the instrumented mode (no
        # provider_call / tool_call span of its own).
        assert tree(spans) == [["invoke_agent hermes", ["chat fake-model", "execute_tool terminal",
                                                        "chat fake-model"]]]
    finally:
        monkeypatch.undo()
        discover_plugins(force=True)  # back to instrumented for the other tests
    assert PATCHES.active
