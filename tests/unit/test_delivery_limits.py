"""Issue 46, item 2: nothing thrown away that could be delivered. An endpoint's size limit (an HTTP proxy's body limit
answering 413, a gRPC collector's message limit answering RESOURCE_EXHAUSTED) splits a refused batch by bytes down to
single items, and only an item over the limit on its own is removed; an endpoint that does not take a signal at all
stops getting it instead of filling the spool. Through the real spooling exporter and batch processor, the real spool
and its sender, against real loopback servers.

Before: a spooled request of 44,809 bytes whose largest span was 15,462 bytes was removed as "rejected" by a 32 KiB
limit (7 of 12 spans lost for good after a warning that promised a re-send), and a 64 KiB gRPC limit removed 24 of
24 spans."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.config import OTLPTarget
from hermes_otel.exporters.file.otlp_json import encode_spans_json
from hermes_otel.exporters.health import health
from hermes_otel.exporters.spool.resend import send_all
from hermes_otel.exporters.spool.store import Spool, endpoint_key
from tests.harness.extras import needs_grpc
from tests.harness.fault_servers import FaultServer
from tests.unit.test_spool_store import otlp_traces, wait_until

LIMIT = 32 * 1024


def sized_spans(sizes: list[int]) -> list:
    """One span per size, each carrying an attribute of that many bytes (a captured prompt, a tool result)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("limits")
    for n, size in enumerate(sizes):
        tracer.start_span(f"chat {n}", attributes={"gen_ai.input.messages": "x" * size}).end()
    return list(exporter.get_finished_spans())


def names_taken(server: FaultServer) -> list[str]:
    names = []
    for _, body in server.taken:
        request = ExportTraceServiceRequest.FromString(body)
        names += [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return names


def test_a_body_limit_splits_a_batch_by_bytes_and_removes_only_the_span_over_it(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="hermes_otel")
    batch = sized_spans([15_462, 3_000, 3_000, 2_000, 2_000, 2_000, 6_000, 4_000, 2_000, 1_000, 1_000, 40_000])
    spool = Spool(tmp_path / "spool", 1 << 24, 86400)
    rejected = health.evicted[("traces", "rejected")]
    with FaultServer("limit", limit=LIMIT) as proxy:
        url = f"{proxy.endpoint}/v1/traces"
        exporter = otlp_traces(url, spool, timeout=5.0)
        processor = BatchSpanProcessor(exporter, max_export_batch_size=512, schedule_delay_millis=10)
        for span in batch:
            processor.on_end(span)
        wait_until(lambda: len(spool.entries("traces")) == 1)
        assert not health.any_failing(frozenset({url}))  # it answers: the batch alone is the problem
        report = send_all(spool, {("traces", endpoint_key("http/protobuf", url)): OTLPTarget(url, "http/protobuf",
                                                                                             {}, 5.0, "none")})
        processor.shutdown()
    assert sorted(names_taken(proxy)) == sorted(f"chat {n}" for n in range(11))  # all but the 40 KB one
    assert all(len(body) <= LIMIT for _, body in proxy.taken)
    assert (report.sent, report.items) == (1, 11) and spool.entries() == []
    assert health.evicted[("traces", "rejected")] == rejected + 1
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("refused a traces batch (HTTP 413); it is kept in the spool" in m and "sent again in smaller parts"
               in m for m in said) == 1
    assert sum("refused 1 span(s) of a spooled traces batch one by one (HTTP 413: larger than the endpoint takes); "
               "it was removed and counted in hermes.otel.spool.evicted, the other 11 delivered" in m
               for m in said) == 1
    assert not [m for m in said if "re-sent once it answers" in m]  # no promise that cannot be kept


@needs_grpc
def test_a_grpc_message_limit_splits_a_spooled_batch_until_every_span_is_taken(tmp_path: Path) -> None:
    from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver

    batch = sized_spans([5_000] * 24)
    assert encode_spans(batch).ByteSize() > 64 * 1024
    with OTLPGrpcReceiver(max_message=64 * 1024) as collector:
        spool = Spool(tmp_path / "spool", 1 << 24, 86400)
        key = endpoint_key("grpc", collector.endpoint)
        spool.put("traces", key, [encode_spans_json(batch)])
        rejected = health.evicted[("traces", "rejected")]
        report = send_all(spool, {("traces", key): OTLPTarget(collector.endpoint, "grpc", {}, 2.0, "none")})
        taken = collector.wait_for_spans(lambda s: len(s) == 24)
    assert sorted(s.name for s in taken) == sorted(f"chat {n}" for n in range(24))
    assert (report.sent, report.items, report.rejected) == (1, 24, 0) and spool.entries() == []
    assert health.evicted[("traces", "rejected")] == rejected


@pytest.mark.parametrize("status", [404, 405, 501])
def test_an_endpoint_that_does_not_take_a_signal_stops_getting_it(tmp_path: Path, caplog, status: int) -> None:
    """Phoenix answers plain OTLP metrics and logs with 405, MLflow with 404: before, each batch was spooled "to be
    re-sent once it answers", and the spool grew with what those backends will never take."""
    caplog.set_level(logging.INFO, logger="hermes_otel")
    spool = Spool(tmp_path / "spool", 1 << 24, 86400)
    with FaultServer("status", status=status) as backend:
        url = f"{backend.endpoint}/v1/traces"
        exporter = otlp_traces(url, spool, timeout=5.0)
        dropped = health.dropped_at[url]
        assert exporter.export(sized_spans([10])).name == "FAILURE"
        asked = backend.count("/v1/traces")  # (SDK 1.39 retries a 501 within the export; later ones do not)
        for _ in range(2):
            assert exporter.export(sized_spans([10])).name == "FAILURE"
        assert asked >= 1 and backend.count("/v1/traces") == asked  # not asked again this run
    assert spool.entries() == [] and health.dropped_at[url] == dropped + 3
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [f"hermes-otel: {url} does not take traces (HTTP {status}); traces are not sent there for the "
                    "rest of this run and are counted in hermes.otel.exporter.dropped (a wrong URL path answers the "
                    "same: check the endpoint)"]
    health.not_taken.pop(url)
