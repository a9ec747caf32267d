"""OTLP over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) from a real Hermes run to a real gRPC receiver."""

from __future__ import annotations

import time

import pytest

from hermes_otel.testing.fake_llm import Reply, ToolCall
from tests.harness.hermes import run_agent
from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.harness.trees import tree

pytestmark = pytest.mark.hermes


def test_grpc_export(llm, monkeypatch):
    from hermes_cli.plugins import discover_plugins

    from hermes_otel import runtime

    with OTLPGrpcReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        discover_plugins(force=True)
        assert runtime.current_telemetry().settings.otlp["traces"].protocol == "grpc"
        llm.push(Reply.tools(ToolCall("terminal", {"command": "echo grpc"}, id="call_G")), Reply.text("over grpc"))
        assert run_agent(llm.base_url, "go")["final_response"] == "over grpc"
        assert runtime.flush(5)
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s))
        assert tree(spans) == [["invoke_agent hermes", ["chat fake-model", "execute_tool terminal", "chat fake-model"]]]
        deadline = time.monotonic() + 10  # metrics and logs are handed to their own send threads at the flush
        while not (receiver.log_requests and receiver.metric_requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert receiver.log_requests >= 1 and receiver.metric_requests >= 1
