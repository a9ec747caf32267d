"""The spool, its re-sender and the spooling wrapper of each OTLP exporter, with the SDK's own telemetry objects
(explicit providers, in-memory exporters), real files and real loopback receivers."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry._logs import LogRecord as ApiLogRecord
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind

from hermes_otel.cli import view
from hermes_otel.config import OTLPTarget
from hermes_otel.exporters.file.otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json
from hermes_otel.exporters.health import health
from hermes_otel.exporters.session import NOT_TAKEN, REFUSED
from hermes_otel.exporters.spool import delivery
from hermes_otel.exporters.spool.decode import pieces
from hermes_otel.exporters.spool.resend import send_all
from hermes_otel.exporters.spool.store import Requests, Spool, endpoint_key
from tests.harness.extras import needs_grpc
from tests.harness.fault_servers import FaultServer, refused_endpoint
from tests.harness.otlp_receiver import OTLPReceiver


def to_request(signal: str, requests, *, paced: bool = True):
    """One batch of all of `requests`: (batch, items, bad lines), one piece without a size limit."""
    return next(pieces(signal, requests, paced=paced, limit=None))

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = Resource({"service.name": "spool-test", "service.instance.id": "i-1"})


def spans(count: int = 5) -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("spool.test", "1.0")
    with tracer.start_as_current_span("invoke_agent hermes", attributes={"hermes.turn.id": "t-1"}) as root:
        for i in range(count - 1):
            with tracer.start_as_current_span(f"chat {i}", kind=SpanKind.CLIENT, links=[Link(root.get_span_context())],
                                              attributes={"i": i, "tags": ["a", "b"], "ok": True, "x": 0.5}) as s:
                s.add_event("hermes.middleware.rewrite", {"hermes.middleware.index": i})
    return list(exporter.get_finished_spans())


def log_records(count: int = 4) -> list:
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tracer = TracerProvider(resource=RESOURCE).get_tracer("t")
    logger = provider.get_logger("spool.test")
    with tracer.start_as_current_span("turn"):
        for i in range(count):
            logger.emit(ApiLogRecord(event_name=f"hermes.observer.hook{i}", body={"k": i}, attributes={"n": i}))
    return list(exporter.get_finished_logs())


def metrics_data():
    reader = InMemoryMetricReader()
    provider = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter = provider.get_meter("spool.test")
    meter.create_counter("hermes.tool.calls").add(3, {"gen_ai.tool.name": "terminal"})
    meter.create_histogram("gen_ai.client.operation.duration", unit="s").record(0.25, {"gen_ai.operation.name": "chat"})
    meter.create_up_down_counter("u").add(-2)
    return reader.get_metrics_data()


def target(endpoint: str, protocol: str = "http/protobuf") -> OTLPTarget:
    return OTLPTarget(endpoint, protocol, {}, 2.0, "none")


# -- the file format -------------------------------------------------------------------------------------------


def test_a_batch_is_one_private_file_of_otlp_json_lines_that_view_reads(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    batch = spans()
    size = spool.put("traces", "0" * 16, [encode_spans_json(batch)])
    (entry,) = spool.entries()
    assert entry.signal == "traces" and entry.key == "0" * 16 and entry.size == size
    assert stat.S_IMODE(os.stat(tmp_path / "spool").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "spool" / "traces").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(entry.path).st_mode) == 0o600
    assert [p.name for p in (tmp_path / "spool" / "traces").iterdir()] == [entry.path.name]  # no temporary left
    assert json.loads(entry.path.read_text()) == encode_spans_json(batch)  # the embedded default's encoding
    loaded = view.load_spans(tmp_path / "spool" / "traces")  # a spool directory reads like the files
    assert sorted(s["name"] for s in loaded) == sorted(s.name for s in batch) and loaded.bad_lines == 0


def test_a_torn_line_is_skipped_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "batch.jsonl"
    good = json.dumps(encode_spans_json(spans()))
    path.write_text(good + "\n" + good[: len(good) // 2])  # a crash (or a damaged disk) tore the last line
    for _ in range(2):
        reader = Requests(path)
        requests, bad = list(reader), reader.bad
        assert requests == [json.loads(good)] and bad == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) <= 1 and all("skipped 1 unreadable line(s)" in w for w in warnings)


# -- decoding back into what the SDK exporters take ----------------------------------------------------------------


def test_a_spooled_batch_decodes_back_to_objects_the_sdk_exporter_sends_exactly_as_the_originals() -> None:
    batch, records, data = spans(), log_records(), metrics_data()
    for signal, obj, encode, original in (("traces", encode_spans_json(batch), encode_spans, batch),
                                          ("logs", encode_logs_json(records), encode_logs, records),
                                          ("metrics", encode_metrics_json(data), encode_metrics, data)):
        decoded, items, bad = to_request(signal, [json.loads(json.dumps(obj))])
        expected = encode(original)
        assert encode(decoded) == expected and bad == 0, signal  # field for field, ids and all
        assert encode(decoded).SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)
    assert to_request("traces", [encode_spans_json(batch)])[1] == 5
    assert to_request("logs", [encode_logs_json(records)])[1] == 4
    assert to_request("metrics", [encode_metrics_json(data)])[1] == 3  # points


def test_two_lines_of_one_file_are_one_batch() -> None:
    first, second = spans(3), spans(2)
    decoded, items, _ = to_request("traces", [encode_spans_json(first), encode_spans_json(second)])
    assert items == 5 and encode_spans(decoded) == encode_spans(first + second)


# -- sending ----------------------------------------------------------------------------------------------------


def _spooled(tmp_path: Path, endpoint: str, protocol: str = "http/protobuf") -> tuple[Spool, dict, list]:
    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    batch = spans()
    spool.put("traces", endpoint_key(protocol, endpoint), [encode_spans_json(batch)])
    targets = {("traces", endpoint_key(protocol, endpoint)): target(endpoint, protocol)}
    return spool, targets, batch


def test_a_batch_is_removed_only_once_the_endpoint_acknowledged_it(tmp_path: Path) -> None:
    base = refused_endpoint()
    url = f"{base}/v1/traces"
    spool, targets, batch = _spooled(tmp_path, url)
    report = send_all(spool, targets)
    assert (report.sent, report.failed) == (0, 1) and len(spool.entries()) == 1  # down: kept
    replayed = health.replayed["traces"]
    with OTLPReceiver(port=int(base.rsplit(":", 1)[1])) as receiver:
        report = send_all(spool, targets)
        assert (report.sent, report.items) == (1, 5)
        got = receiver.wait_for_spans(lambda s: len(s) == 5)
    assert sorted(s.span_id for s in got) == sorted(f"{s.context.span_id:016x}" for s in batch)
    assert receiver.headers[-1]["content-type"] == "application/x-protobuf"
    assert spool.entries() == [] and health.replayed["traces"] == replayed + 1


@needs_grpc
def test_a_grpc_endpoint_gets_the_batch_over_grpc(tmp_path: Path) -> None:
    from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver

    with OTLPGrpcReceiver() as receiver:
        spool, targets, batch = _spooled(tmp_path, receiver.endpoint, "grpc")
        report = send_all(spool, targets)
        got = receiver.wait_for_spans(lambda s: len(s) == 5)
    assert report.sent == 1 and spool.entries() == []
    assert sorted(s.span_id for s in got) == sorted(f"{s.context.span_id:016x}" for s in batch)
    assert {s.trace_id for s in got} == {f"{batch[0].context.trace_id:032x}"}


@needs_grpc
def test_one_grpc_endpoint_re_sends_the_batches_of_every_signal(tmp_path: Path, monkeypatch) -> None:
    """A gRPC endpoint takes the three signals at one address, so their batches share one spool key: each signal's
    batches are sent to it (the targets once kept one signal per key, leaving the others spooled for good)."""
    from hermes_otel import config
    from hermes_otel.exporters.spool.resend import targets_of
    from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver

    with OTLPGrpcReceiver() as receiver:
        monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", os.devnull)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        settings = config.load_settings().settings
        spool = Spool(tmp_path / "spool", 1 << 20, 86400)
        key = endpoint_key("grpc", receiver.endpoint)
        spool.put("traces", key, [encode_spans_json(spans())])
        spool.put("logs", key, [encode_logs_json(log_records())])
        report = send_all(spool, targets_of(settings))
        receiver.wait_for_spans(lambda s: len(s) == 5)
    assert (report.sent, report.items, report.no_target) == (2, 9, 0) and spool.entries() == []


# What docs/reliability.md promises (issue 30): a batch is removed only after a 2xx, or when the endpoint refuses the
# batch itself as malformed; every other answer keeps it for later.
KEPT_HTTP = (301, 307, 401, 403, 408, 409, 429, 500, 502, 503, 504)
REMOVED_HTTP = (400, 413, 422)
NOT_TAKEN_HTTP = (404, 405, 501)
KEPT_GRPC = ("UNAVAILABLE", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "INTERNAL",
             "UNIMPLEMENTED", "ABORTED", "DATA_LOSS")


@pytest.mark.parametrize("status", KEPT_HTTP)
def test_a_batch_answered_with_any_other_http_error_is_kept(tmp_path: Path, status: int) -> None:
    with FaultServer("status", status=status) as server:
        spool, targets, _ = _spooled(tmp_path, f"{server.endpoint}/v1/traces")
        before = health.evicted[("traces", "rejected")]
        report = send_all(spool, targets)
        # it reached the endpoint, which answered `status` (429, 502, 503, 504: the SDK exporter retried it)
        assert server.count("/v1/traces") >= 1
    assert (report.sent, report.rejected, report.failed) == (0, 0, 1)
    assert report.problems == {f"{server.endpoint}/v1/traces": f"HTTP {status}"}
    assert len(spool.entries()) == 1 and health.evicted[("traces", "rejected")] == before


@pytest.mark.parametrize("status", REMOVED_HTTP)
def test_a_batch_the_endpoint_refuses_is_split_down_to_the_items_it_refuses_alone(tmp_path: Path, caplog,
                                                                                   status: int) -> None:
    with FaultServer("status", status=status) as server:
        url = f"{server.endpoint}/v1/traces"
        spool, targets, _ = _spooled(tmp_path, url)
        before = health.evicted[("traces", "rejected")]
        report = send_all(spool, targets)
        assert server.count("/v1/traces") == 9  # 5 spans: 4 splits, then each span alone
    assert report.rejected == 1 and spool.entries() == []
    assert health.evicted[("traces", "rejected")] == before + 5
    why = "HTTP 413: larger than the endpoint takes" if status == 413 else f"HTTP {status}"
    assert sum(f"refused 5 span(s) of a spooled traces batch one by one ({why})" in r.getMessage()
               for r in caplog.records) == 1


@pytest.mark.parametrize("status", NOT_TAKEN_HTTP)
def test_a_spooled_batch_for_an_endpoint_that_does_not_take_its_signal_is_removed(tmp_path: Path, status: int) -> None:
    with FaultServer("status", status=status) as server:
        url = f"{server.endpoint}/v1/traces"
        spool, targets, _ = _spooled(tmp_path, url)
        before = health.evicted[("traces", "not_taken")]
        report = send_all(spool, targets)
    assert report.rejected == 1 and spool.entries() == [] and health.evicted[("traces", "not_taken")] == before + 1
    assert health.not_taken.pop(url) == f"HTTP {status}"


@needs_grpc
@pytest.mark.parametrize("code", KEPT_GRPC)
def test_a_batch_answered_with_any_other_grpc_error_is_kept(tmp_path: Path, code: str) -> None:
    import grpc

    from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver

    with OTLPGrpcReceiver(answer=grpc.StatusCode[code]) as receiver:
        spool, targets, _ = _spooled(tmp_path, receiver.endpoint, "grpc")
        report = send_all(spool, targets)
        assert receiver.refused >= 1  # the SDK exporter retries its retryable codes within its timeout
    assert (report.sent, report.rejected, report.failed) == (0, 0, 1)
    assert report.problems == {receiver.endpoint: "gRPC export failed"} and len(spool.entries()) == 1


def test_the_reliability_page_names_exactly_the_statuses_that_remove_a_batch() -> None:
    page = " ".join((ROOT / "docs" / "reliability.md").read_text().split())
    removed = ", ".join(str(s) for s in sorted(REFUSED))
    from hermes_otel.exporters.spool.resend import REFUSALS

    assert REFUSALS == 2 and f"only an item refused on its own (HTTP {removed}; over gRPC, failed twice by an " \
        "endpoint that takes an empty request each time) is removed" in page
    assert REFUSED == frozenset(REMOVED_HTTP) and NOT_TAKEN == frozenset(NOT_TAKEN_HTTP)
    not_taken = ", ".join(str(s) for s in NOT_TAKEN_HTTP)
    assert f"does not take the signal at all (HTTP {not_taken}:" in page
    kept = ", ".join(str(s) for s in KEPT_HTTP)
    assert f"HTTP {kept}" in page and ", ".join(f"`{c}`" for c in KEPT_GRPC) in page


def test_a_batch_another_process_holds_is_left_to_it(tmp_path: Path) -> None:
    """A real second process holds the lock of a batch (it is sending it): we neither send nor evict it."""
    with OTLPReceiver() as receiver:
        url = f"{receiver.endpoint}/v1/traces"
        spool, targets, _ = _spooled(tmp_path, url)
        (entry,) = spool.entries()
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDONLY)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()", str(entry.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            report = send_all(spool, targets)
            assert (report.sent, report.busy) == (0, 1)
            assert spool.evict(entry, "size") is False and spool.entries() == [entry]
        finally:
            holder.communicate("", timeout=10)
        assert send_all(spool, targets).sent == 1 and receiver.request_count == 1
    with spool.claim(entry) as fd:
        assert fd is None  # gone: sent and removed


# -- caps -----------------------------------------------------------------------------------------------------------


def test_caps_evict_the_oldest_first_and_count_them(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", 1 << 30, 3600)
    for _ in range(4):
        spool.put("logs", "0" * 16, [encode_logs_json(log_records())])
    entries = spool.entries()
    assert [e.created_ns for e in entries] == sorted(e.created_ns for e in entries)
    old = entries[0]
    os.utime(old.path, (time.time() - 7200, time.time() - 7200))  # two hours old, the cap is one
    size, age = health.evicted[("logs", "size")], health.evicted[("logs", "age")]
    spool.max_bytes = 2 * entries[-1].size + 10  # room for two
    assert spool.enforce_caps() == {"age": 1, "size": 1}
    assert [e.path for e in spool.entries()] == [e.path for e in entries[2:]]  # the two newest kept
    assert (health.evicted[("logs", "size")], health.evicted[("logs", "age")]) == (size + 1, age + 1)
    assert spool.bytes_by_signal() == {"traces": 0, "logs": sum(e.size for e in entries[2:]), "metrics": 0}


# -- the spooling exporter -------------------------------------------------------------------------------------------


def otlp_traces(url: str, spool: Spool | None, timeout: float = 30.0) -> delivery.SpoolingSpanExporter:
    """The SDK's OTLP/HTTP span exporter behind its spool, as telemetry.py makes it (its own pipeline: `owner`)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from hermes_otel.exporters.session import ExporterSession

    session = ExporterSession({})
    inner = OTLPSpanExporter(endpoint=url, timeout=timeout, session=session)
    return delivery.SpoolingSpanExporter(inner, session, url, endpoint_key("http/protobuf", url), spool, 1.5,
                                         owner=object())


def spooled_spans(spool: Spool) -> list[int]:
    return sorted(len(s) for e in spool.entries("traces") for r in Requests(e.path)
                  for rs in r["resourceSpans"] for s in [[x for ss in rs["scopeSpans"] for x in ss["spans"]]])


def wait_until(check, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_shutdown_spools_what_a_hanging_collector_never_acknowledged(tmp_path: Path) -> None:
    """The batch in flight (the collector read it, never answered) and the ones still queued in the SDK's batch
    processor go to the spool within the shutdown bound, not the exporter's 30 s timeout; nothing is dropped."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    batch = spans(9)
    with FaultServer("blackhole") as hole:
        url = f"{hole.endpoint}/v1/traces"
        exporter = otlp_traces(url, spool)
        processor = BatchSpanProcessor(exporter, max_export_batch_size=2, schedule_delay_millis=10)
        for span in batch[:2]:
            processor.on_end(span)
        wait_until(lambda: hole.count() == 1)
        for span in batch[2:]:
            processor.on_end(span)  # queued behind the export in flight
        assert hole.count() == 1
        closing = time.monotonic()
        delivery.close_all(exporter.owner)
        processor.shutdown()
        closed = time.monotonic()
    assert closed - closing < 10  # the deadline is 0.1 s; far below the exporter's 30 s on any machine
    assert sum(spooled_spans(spool)) == 9 and spooled_spans(spool)[-1] == 2  # the in-flight pair among them
    assert health.dropped_at[url] == 0
    assert not health.any_failing(frozenset({url}))  # cut by us at the deadline: not reported as a failure


@pytest.mark.parametrize("route", ["TCP connect", "TLS handshake", "HTTP proxy", "CONNECT through an HTTPS proxy"])
def test_shutdown_cuts_a_connection_that_never_answered_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              route: str) -> None:
    """A collector behind a firewall that drops the connection, one whose TLS handshake hangs, or an environment
    proxy that takes the connection and never answers: shutting down cuts the request as it does one waiting for
    an answer, and the batch goes to the spool."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                 "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    with FaultServer("unanswered" if route == "TCP connect" else "silent") as silent:
        url = {"TCP connect": f"http://127.0.0.1:{silent.port}/v1/traces",
               "TLS handshake": f"https://127.0.0.1:{silent.port}/v1/traces",
               "HTTP proxy": "http://collector.example:4318/v1/traces",
               "CONNECT through an HTTPS proxy": "https://collector.example:4318/v1/traces"}[route]
        if route not in ("TCP connect", "TLS handshake"):
            monkeypatch.setenv("HTTP_PROXY" if url.startswith("http:") else "HTTPS_PROXY",
                               f"http://127.0.0.1:{silent.port}")
        exporter = otlp_traces(url, spool)
        processor = BatchSpanProcessor(exporter, max_export_batch_size=2, schedule_delay_millis=10)
        for span in spans(2):
            processor.on_end(span)
        if route != "TCP connect":
            wait_until(lambda: silent.connections() == 1)
        time.sleep(0.3)  # the client is now waiting on the silent socket (or its SYN)
        closing = time.monotonic()
        delivery.close_all(exporter.owner)
        processor.shutdown()
        closed = time.monotonic()
    assert closed - closing < 10  # the deadline is 0.1 s; far below the exporter's 30 s on any machine
    assert spooled_spans(spool) == [2]


class SlowDisk(Spool):
    """A spool on a slow disk: each write takes 50 ms."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.writing = threading.Event()

    def put(self, *args, **kwargs) -> int:
        self.writing.set()
        time.sleep(0.05)
        return super().put(*args, **kwargs)


def test_shutdown_waits_for_the_batch_being_spooled(tmp_path: Path) -> None:
    """Process exit follows shutdown: a failed batch being written to the spool at that moment must be written
    whole first, not cut off (a lost batch and a stray temporary file)."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    spool = SlowDisk(tmp_path / "spool", 1 << 20, 86400)
    url = f"{refused_endpoint()}/v1/traces"
    exporter = otlp_traces(url, spool, timeout=0.2)
    processor = BatchSpanProcessor(exporter, schedule_delay_millis=10)
    for span in spans(3):
        processor.on_end(span)
    assert spool.writing.wait(10)  # the export failed; the processor's thread is writing the batch
    delivery.close_all(exporter.owner)
    processor.shutdown()
    assert [e.path.name.startswith(".") for e in spool.entries("traces")] == [False]
    assert health.dropped_at[url] == 0


def test_without_the_spool_what_cannot_be_delivered_is_dropped_and_counted(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    url = f"{refused_endpoint()}/v1/traces"
    exporter = otlp_traces(url, None, timeout=0.2)
    assert exporter.export(spans(3)) == SpanExportResult.FAILURE  # the SDK's export result means something again
    assert health.dropped_at[url] == 3
    exporter.shutdown()


def test_a_failing_endpoint_is_waited_for_once_then_its_batches_are_spooled_at_once(tmp_path: Path) -> None:
    """One queue (the batch processor's): while the endpoint fails, its thread does not wait for it again, batch after
    batch; the re-sender's probe says when it answers. Nothing is dropped."""
    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    with FaultServer("blackhole") as hole:
        url = f"{hole.endpoint}/v1/traces"
        exporter = otlp_traces(url, spool, timeout=0.3)
        exporter.export(spans(1))  # waits out the exporter's timeout, fails, is spooled
        asked = hole.count()
        started = time.monotonic()
        for _ in range(5):
            exporter.export(spans(2))
        assert time.monotonic() - started < 0.3 * 5  # not one timeout per batch
        assert hole.count() == asked  # not sent: the endpoint is known to fail
        exporter.shutdown()
    assert spooled_spans(spool) == [1, 2, 2, 2, 2, 2] and health.dropped_at[url] == 0


def test_a_redirect_is_not_an_acknowledgement(tmp_path: Path) -> None:
    """The SDK exporter takes any status below 400 for success, and follows no redirect (nor do we: the headers may
    hold credentials): a 3xx means the collector never took the batch, so it is spooled, not lost."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    with FaultServer("status", status=307) as server:
        url = f"{server.endpoint}/v1/traces"
        exporter = otlp_traces(url, spool, timeout=1.0)
        assert exporter.export(spans(2)) == SpanExportResult.FAILURE
        assert server.count("/v1/traces") == 1
        exporter.shutdown()
    assert spooled_spans(spool) == [2] and health.dropped_at[url] == 0


def test_a_spool_that_is_a_symbolic_link_is_refused_once_and_the_batches_counted(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "spool").symlink_to(elsewhere)
    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    url = f"{refused_endpoint()}/v1/traces"
    exporter = otlp_traces(url, spool, timeout=0.2)
    for _ in range(2):
        exporter.export(spans(2))
    exporter.shutdown()
    assert health.dropped_at[url] == 4 and list(elsewhere.iterdir()) == []
    refused = [r.getMessage() for r in caplog.records
               if r.levelno >= logging.WARNING and "not writing" in r.getMessage()]
    assert len(refused) == 1 and "set spool = false" in refused[0] and "symbolic link" in refused[0]


def test_a_spooling_exporter_starts_no_thread(tmp_path: Path) -> None:
    """One queue and one thread per signal: the SDK batch processor's (a daemon); the exporter adds none."""
    before = set(threading.enumerate())
    exporter = otlp_traces(f"{refused_endpoint()}/v1/traces", Spool(tmp_path / "spool", 1 << 20, 86400), 0.2)
    exporter.export(spans(1))
    assert set(threading.enumerate()) - before == set()
    exporter.shutdown()


_WRITE_LIMIT = """
import json, resource, sys, time
from hermes_otel import telemetry
from hermes_otel.config import load_settings
from hermes_otel.exporters.spool import delivery
from hermes_otel.exporters.health import health
settings = load_settings({"HERMES_HOME": sys.argv[1], "OTEL_EXPORTER_OTLP_ENDPOINT": sys.argv[2],
                          "OTEL_EXPORTER_OTLP_TIMEOUT": "100", "OTEL_BSP_SCHEDULE_DELAY": "20"}).settings
live = telemetry.build(settings)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))  # a real write limit: no batch fits on this "disk"
tracer = live.tracer_provider.get_tracer("limit")
for n in range(3):
    for i in range(10):
        tracer.start_span(f"s{i}").end()
    live.tracer_provider.force_flush()
    time.sleep(0.2)
deadline = time.monotonic() + 10
while health.dropped["traces"] < 30 and time.monotonic() < deadline:
    time.sleep(0.01)
delivery.begin_exit()
live.shutdown(2)
print(json.dumps(dict(health.dropped)))
"""


def test_a_write_limit_on_the_spool_costs_counted_drops_and_one_message(tmp_path: Path) -> None:
    """`ulimit -f` (RLIMIT_FSIZE) in a real process: every batch that cannot be spooled is counted, said once."""
    done = subprocess.run([sys.executable, "-c", _WRITE_LIMIT, str(tmp_path), refused_endpoint()], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    dropped = json.loads(done.stdout)
    assert dropped["traces"] == 30  # every span, counted
    assert done.stderr.count("hermes-otel: cannot write to the spool") == 1, done.stderr
    assert "File too large" in done.stderr
    left = [p for p in (tmp_path / "otel" / "spool").rglob("*") if not p.is_dir()]
    assert left == [], [(p.name, p.stat().st_size) for p in left]  # no file, not even a temporary one


def test_every_exporter_keeps_its_own_budget_the_files_never_wait_behind_an_endpoint(tmp_path: Path) -> None:
    """Spool off and a collector that hangs: its exporters wait their whole flush budget at shutdown, but the files
    of all three signals are written first, whole, whatever the endpoint does."""
    from hermes_otel import telemetry
    from hermes_otel.config import load_settings

    toml = tmp_path / "plugins.toml"
    toml.write_text('[[components]]\nkind = "hermes_otel"\n[components.config]\nspool = false\n'
                    'file = { enabled = true }\n')
    with FaultServer("blackhole") as hole:
        settings = load_settings({"HERMES_HOME": str(tmp_path), "HERMES_OTEL_PLUGINS_TOML": str(toml),
                                  "OTEL_EXPORTER_OTLP_ENDPOINT": hole.endpoint}).settings
        live = telemetry.build(settings)
        tracer = live.tracer_provider.get_tracer("budget")
        for i in range(20):
            tracer.start_span(f"s{i}").end()
        logger = live.logger_provider.get_logger("budget")
        for i in range(7):
            logger.emit(ApiLogRecord(event_name=f"hermes.observer.hook{i}"))
        live.meter_provider.get_meter("budget").create_counter("hermes.tool.calls").add(5)
        live.shutdown(settings.flush_timeout_s)
    otel = tmp_path / "otel"
    spans_written = [s["name"] for line in (otel / "traces.jsonl").read_text().splitlines()
                     for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert sorted(spans_written) == sorted(f"s{i}" for i in range(20))
    records = [r for line in (otel / "logs.jsonl").read_text().splitlines()
               for rl in json.loads(line)["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]
    assert len(records) == 7
    last = json.loads((otel / "metrics.jsonl").read_text().splitlines()[-1])
    names = {m["name"] for rm in last["resourceMetrics"] for sm in rm["scopeMetrics"] for m in sm["metrics"]}
    assert "hermes.tool.calls" in names


def test_a_batch_is_re_sent_with_the_headers_and_compression_configured_now(tmp_path: Path) -> None:
    with OTLPReceiver() as receiver:
        url = f"{receiver.endpoint}/v1/traces"
        spool = Spool(tmp_path / "spool", 1 << 20, 86400)
        key = endpoint_key("http/protobuf", url, {"x-tenant": "blue"})  # the endpoint and its identity
        spool.put("traces", key, [encode_spans_json(spans())])
        (entry,) = spool.entries()
        assert "blue" not in entry.path.read_text() and "x-tenant" not in entry.path.read_text()  # not on disk
        configured = OTLPTarget(url, "http/protobuf", {"x-tenant": "blue"}, 2.0, "gzip")
        report = send_all(spool, {("traces", key): configured})
        receiver.wait_for_spans(lambda s: len(s) == 5)
    assert report.sent == 1
    (headers,) = receiver.headers
    assert headers["x-tenant"] == "blue" and headers["content-encoding"] == "gzip"


def test_doctor_says_what_the_spool_holds_and_what_it_cannot_do(tmp_path: Path) -> None:
    from hermes_otel.cli.spool import doctor_lines
    from hermes_otel.config import load_settings

    url = f"{refused_endpoint()}"
    env = {"HERMES_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": url}
    settings = load_settings(env).settings
    assert doctor_lines(settings) == [("ok", f"spool {tmp_path}/otel/spool: empty (caps 100.0 MiB, 7 days)")]
    spool = Spool(settings.spool_directory, settings.spool_max_bytes, settings.spool_max_age_s)
    spool.put("traces", endpoint_key("http/protobuf", f"{url}/v1/traces"), [encode_spans_json(spans())])
    spool.put("logs", "f" * 16, [encode_logs_json(log_records())])  # for an endpoint not configured now
    (level, text), (orphan_level, orphan) = doctor_lines(settings)
    assert level == "warn" and text.startswith(f"spool {tmp_path}/otel/spool: 2 batches (")
    assert "wait to be re-sent, the oldest 0 s old (traces 1, logs 1)" in text
    assert orphan_level == "warn" and orphan.startswith("1 spooled batch for an endpoint not configured now")
    toml = tmp_path / "plugins.toml"
    toml.write_text('[[components]]\nkind = "hermes_otel"\n[components.config]\nspool = false\n')
    off = load_settings({**env, "HERMES_OTEL_PLUGINS_TOML": str(toml)}).settings
    assert [level for level, _ in doctor_lines(off)] == ["note", "warn"]  # off, and what is left is not sent
    blocked = tmp_path / "blocked"
    (blocked / "otel").mkdir(parents=True)
    (blocked / "otel" / "spool").write_text("")  # a file where the spool directory should be
    (level, text), = doctor_lines(load_settings({**env, "HERMES_HOME": str(blocked)}).settings)
    assert level == "fail" and "is not a directory" in text and "will be dropped" in text


def test_at_exit_a_failed_attempt_is_spooled_at_once_not_retried(tmp_path: Path, monkeypatch) -> None:
    """The first contact with a dead collector is often the exit's own export (a one-shot `hermes chat -q`): with the
    spool on, its failed attempt is spooled at once instead of sleeping the SDK's retry backoff until the close
    deadline (which is set far away here, so only the change can end the export)."""
    monkeypatch.setattr(delivery, "SPOOL_WAIT_S", 60.0)
    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    with FaultServer("status", status=503) as unavailable:
        url = f"{unavailable.endpoint}/v1/traces"
        exporter = otlp_traces(url, spool, timeout=60)
        delivery.close_all(exporter.owner)
        exported = threading.Thread(target=exporter.export, args=(spans(3),), daemon=True)
        exported.start()
        exported.join(20)  # the SDK's backoff alone is 1 s, 2 s, 4 s ... up to the 60 s timeout
        assert not exported.is_alive()
        assert unavailable.count() == 1  # one attempt
    assert spooled_spans(spool) == [3]
    assert health.dropped_at[url] == 0


# -- a full disk (issue 40, item 11) ------------------------------------------------------------------------------


class _Disk:
    """os.statvfs of a disk of `total` bytes with `free` of them free (the spool's own files counted in)."""

    def __init__(self, total: int, free: int) -> None:
        self.total, self.free = total, free

    def statvfs(self, _path) -> os.statvfs_result:
        return os.statvfs_result((4096, 4096, self.total // 4096, self.free // 4096, self.free // 4096,
                                  0, 0, 0, 0, 255))


def test_the_spool_leaves_a_free_space_floor_to_the_local_record(tmp_path: Path, monkeypatch) -> None:
    """A 100 MiB disk: the spool keeps its last tenth (10 MiB) free, evicting its oldest batches to do so ("disk",
    counted), and refuses a batch (ENOSPC: dropped and counted by the caller) when evicting cannot make the room."""
    import errno

    from hermes_otel.exporters.spool import store

    spool = Spool(tmp_path / "spool", 1 << 30, 86400)
    data = encode_spans_json(spans())
    first = spool.put("traces", "0" * 16, [data])
    disk = _Disk(100 << 20, (10 << 20) + first - 1)  # the next batch would cut into the floor
    monkeypatch.setattr(store.os, "statvfs", disk.statvfs)
    before = health.evicted[("traces", "disk")]
    spool.put("traces", "0" * 16, [data])  # room made: the oldest batch evicted
    assert len(spool.entries()) == 1 and health.evicted[("traces", "disk")] == before + 1
    spool.entries()[0].path.unlink()  # nothing of the spool's left to give back
    disk.free = (10 << 20) - 1  # and the disk already below the floor (the local record's growth)
    with pytest.raises(OSError) as full:
        spool.put("traces", "0" * 16, [data])
    assert full.value.errno == errno.ENOSPC and spool.entries() == []
    assert store.free_floor(100 << 20) == 10 << 20 and store.free_floor(10 << 30) == store.FREE_FLOOR_BYTES


def test_the_background_sender_enforces_the_caps_with_nothing_new_written(tmp_path: Path) -> None:
    """A process that only re-sends (its endpoint down, nothing new spooled) still keeps the spool inside its age
    cap: the sender enforces the caps itself, not only a write."""
    from hermes_otel.exporters.spool.resend import Resender

    spool = Spool(tmp_path / "spool", 1 << 30, 3600)
    target = OTLPTarget(f"{refused_endpoint()}/v1/logs", "http/protobuf", {}, 0.5, "none")
    key = endpoint_key(target.protocol, target.endpoint, target.headers)
    spool.put("logs", key, [encode_logs_json(log_records())])
    (old,) = spool.entries()
    os.utime(old.path, (time.time() - 7200, time.time() - 7200))  # two hours old, the cap is one
    before = health.evicted[("logs", "age")]
    sender = Resender()
    sender.serve(spool, {("logs", key): target})
    try:
        deadline = time.monotonic() + 5
        while health.evicted[("logs", "age")] == before and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sender.stop(time.monotonic() + 2)
    assert spool.entries() == [] and health.evicted[("logs", "age")] == before + 1


@pytest.mark.parametrize("fault, expected", [("refused", "connection refused"), ("unresolvable", "name not resolved"),
                                             ("tls", "certificate verify failed"), ("blackhole", "timed out"),
                                             ("status", "HTTP 503")])
def test_why_a_request_failed_comes_from_what_the_session_saw_not_from_log_text(fault: str, expected: str) -> None:
    """The reason said once for a failing endpoint: from the exception types along the chain or the status our
    session received, told to `on_failure` at once (before the SDK's retry backoff), and kept per thread."""
    import contextlib

    import requests

    from hermes_otel.exporters.session import ExporterSession

    told: list[str] = []
    session = ExporterSession({})
    session.on_failure = told.append
    server = FaultServer(fault) if fault in ("tls", "blackhole", "status") else contextlib.nullcontext()
    with server as running:
        url = {"refused": refused_endpoint(), "unresolvable": "http://collector.invalid:4318"}.get(
            fault, running.endpoint if running is not None else "")
        if fault == "tls":
            url = url.replace("http://", "https://")
        try:
            session.post(f"{url}/v1/traces", data=b"x", timeout=0.5)
        except requests.RequestException:
            pass
    assert told == [expected] and session.last_failure() == expected
    assert session.last_status() == (503 if fault == "status" else None)


def test_the_re_sender_sends_through_a_client_of_its_own(tmp_path: Path) -> None:
    """The SDK's HTTP exporter takes no lock: while a live exporter is open for the same endpoint, signal and
    settings, a re-send goes through the re-sender's own SDK exporter (one per endpoint and signal), never the live
    one's from another thread, and a batch re-sent is received."""
    from hermes_otel.config import OTLPTarget
    from hermes_otel.exporters.spool.resend import Exporters, send_all
    from hermes_otel.exporters.spool.sdk import sdk_exporter
    from tests.harness.otlp_receiver import OTLPReceiver

    with OTLPReceiver() as receiver:
        target = OTLPTarget(f"{receiver.endpoint}/v1/traces", "http/protobuf", {}, 2.0, "none")
        spool = Spool(tmp_path / "spool", 1 << 20, 86400)
        key = endpoint_key(target.protocol, target.endpoint, target.headers)
        live = delivery.SpoolingSpanExporter(*sdk_exporter("traces", target), target.endpoint, key, spool, 1.5,
                                             owner=object())
        exporters = Exporters()
        own = exporters.get("traces", target)
        assert own[0] is not live.inner and own[1] is not live.session and exporters.get("traces", target) is own
        spool.put("traces", key, [encode_spans_json(spans(2))])
        assert send_all(spool, {("traces", key): target}).sent == 1
        receiver.wait_for_spans(lambda got: len(got) == 2)
        live.interrupt()
        exporters.close()
