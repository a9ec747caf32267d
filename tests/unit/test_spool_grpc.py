"""The spool's guarantees (docs/reliability.md) over OTLP/gRPC, each proven as it is for OTLP/HTTP: real gRPC
servers on loopback (tests/harness/otlp_grpc_receiver.py), the SDK's gRPC exporters as the plugin makes them, real
files. The HTTP side of each guarantee is in test_spool_store.py, test_spool_hostile.py and the integration files."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import grpc
import pytest
from opentelemetry._logs import LogRecord as ApiLogRecord

from hermes_otel import config
from hermes_otel.config import OTLPTarget
from hermes_otel.exporters.file.otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json
from hermes_otel.exporters.health import health
from hermes_otel.exporters.spool import delivery
from hermes_otel.exporters.spool.resend import Resender, SendReport, send_all, targets_of
from hermes_otel.exporters.spool.store import Spool, endpoint_key
from tests.harness.fault_servers import FaultServer, refused_endpoint
from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.unit.test_hostile_config import within
from tests.unit.test_spool_store import log_records, metrics_data, spans, spooled_spans, wait_until


def _settings(tmp_path: Path, endpoint: str, **env: str) -> config.Settings:
    return config.load_settings({"HERMES_HOME": str(tmp_path / "home"), "HERMES_OTEL_PLUGINS_TOML": os.devnull,
                                 "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                                 **env}).settings


def _spool(settings: config.Settings) -> Spool:
    return Spool(settings.spool_directory, settings.spool_max_bytes, settings.spool_max_age_s)


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def test_a_dead_grpc_endpoint_s_batches_of_every_signal_are_spooled_then_re_sent_by_the_background_sender(
        tmp_path: Path) -> None:
    """Nothing lost while the spool has room, over gRPC: the live exporters of all three signals spool what a
    refused gRPC endpoint could not take; once a collector answers on that address, the background sender delivers
    every batch of every signal (a gRPC endpoint takes the three under one spool key) and empties the spool."""
    from hermes_otel import telemetry

    endpoint = refused_endpoint()
    settings = _settings(tmp_path, endpoint, OTEL_EXPORTER_OTLP_TIMEOUT="500", OTEL_BSP_SCHEDULE_DELAY="20",
                         OTEL_BLRP_SCHEDULE_DELAY="20")
    live = telemetry.build(settings)
    try:
        for i in range(4):
            live.tracer_provider.get_tracer("dead").start_span(f"s{i}").end()
        logger = live.logger_provider.get_logger("dead")
        for i in range(3):
            logger.emit(ApiLogRecord(event_name=f"hermes.observer.hook{i}"))
        live.meter_provider.get_meter("dead").create_counter("hermes.tool.calls").add(2)
        delivery.begin_exit()
        live.shutdown(2)
    finally:
        delivery.cancel_exit()
    spool = _spool(settings)
    assert {e.signal for e in spool.entries()} == {"traces", "logs", "metrics"}
    assert sum(spooled_spans(spool)) == 4 and health.dropped_at[endpoint] == 0

    sender = Resender()
    with OTLPGrpcReceiver(port=_port(endpoint)) as receiver:
        sender.serve(spool, targets_of(settings))
        try:
            got = receiver.wait_for_spans(lambda s: len(s) == 4)
            wait_until(lambda: spool.entries() == [])
        finally:
            sender.stop(time.monotonic() + 5)
    assert sorted(s.name for s in got) == [f"s{i}" for i in range(4)]
    assert receiver.log_requests >= 1 and receiver.metric_requests >= 1 and spool.entries() == []


@pytest.mark.parametrize("hang", ["a call taken and never answered", "a connection that never speaks HTTP/2"])
def test_shutdown_spools_what_a_hanging_grpc_collector_never_acknowledged(tmp_path: Path, hang: str) -> None:
    """Exit is bounded over gRPC too: at the close deadline the SDK exporter is shut down, which closes its channel
    and so cancels the call in flight, and the batch goes to the spool instead of waiting out the 30 s timeout."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    server = OTLPGrpcReceiver(hang=True) if hang.startswith("a call") else FaultServer("silent")
    with server:
        endpoint = server.endpoint if isinstance(server, OTLPGrpcReceiver) else f"http://127.0.0.1:{server.port}"
        target = OTLPTarget(endpoint, "grpc", {}, 30.0, "none")
        exporter = delivery.SpoolingSpanExporter(*delivery.sdk_exporter("traces", target), endpoint,
                                                 endpoint_key("grpc", endpoint), spool, 1.5, owner=object())
        processor = BatchSpanProcessor(exporter, max_export_batch_size=2, schedule_delay_millis=10)
        for span in spans(2):
            processor.on_end(span)
        if isinstance(server, OTLPGrpcReceiver):
            wait_until(lambda: server.hung == 1)
            assert server.hung == 1  # the collector took the call
        else:
            wait_until(lambda: server.connections() == 1)
            assert server.connections() == 1
        time.sleep(0.2)  # the call is now waiting for an answer
        closing = time.monotonic()
        delivery.close_all(exporter.owner)
        processor.shutdown()
        closed = time.monotonic()
    assert closed - closing < 10  # the deadline is 0.1 s; far below the exporter's 30 s on any machine
    assert spooled_spans(spool) == [2] and health.dropped_at[endpoint] == 0


def _home(tmp_path: Path, monkeypatch, endpoint: str, **env: str) -> tuple[Spool, str]:
    """A HERMES_HOME whose configuration exports every signal to the gRPC `endpoint`: its spool and spool key."""
    for name, value in {"HERMES_HOME": str(tmp_path / "home"), "HERMES_OTEL_PLUGINS_TOML": os.devnull,
                        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                        "OTEL_EXPORTER_OTLP_TIMEOUT": "2000", **env}.items():
        monkeypatch.setenv(name, value)
    settings = config.load_settings().settings
    (key,) = {k for _, k in targets_of(settings)}  # one address for the three signals: one key
    return _spool(settings), key


def test_spool_send_delivers_every_signal_to_a_grpc_endpoint(tmp_path: Path, monkeypatch, capsys) -> None:
    """`hermes-otel spool send` with a gRPC endpoint configured: the batches of the three signals (one spool key)
    are all sent, said, and removed; still down, they are kept and the exit status is 1."""
    from hermes_otel.cli import main as cli

    endpoint = refused_endpoint()
    spool, key = _home(tmp_path, monkeypatch, endpoint)
    spool.put("traces", key, [encode_spans_json(spans(5))])
    spool.put("logs", key, [encode_logs_json(log_records(4))])
    spool.put("metrics", key, [encode_metrics_json(metrics_data())])
    code = within(20, lambda: cli.main(["spool", "send"]))
    out = capsys.readouterr().out
    assert code == 1 and "kept: their endpoint did not take them now" in out and len(spool.entries()) == 3
    with OTLPGrpcReceiver(port=_port(endpoint)) as receiver:
        code = within(20, lambda: cli.main(["spool", "send"]))
        out = capsys.readouterr().out
        got = receiver.wait_for_spans(lambda s: len(s) == 5)
    assert code == 0, out
    assert out.splitlines()[-1] == "hermes-otel spool: sent 3 batches (12 spans, log records and metric points)"
    assert len(got) == 5 and (receiver.log_requests, receiver.metric_requests) == (1, 1)
    assert spool.entries() == []


def test_a_batch_is_re_sent_over_grpc_with_the_headers_and_compression_configured_now(tmp_path: Path) -> None:
    """The headers go as gRPC metadata; gzip is proven by a server whose gRPC core allows no compression: it refuses
    the gzip re-send before any handler (the batch is kept), and takes the same batch uncompressed."""
    with OTLPGrpcReceiver(identity_only=True) as receiver:
        spool = Spool(tmp_path / "spool", 1 << 20, 86400)
        key = endpoint_key("grpc", receiver.endpoint, {"x-tenant": "blue"})
        spool.put("traces", key, [encode_spans_json(spans())])
        (entry,) = spool.entries()
        assert "blue" not in entry.path.read_text() and "x-tenant" not in entry.path.read_text()  # not on disk
        gzip = OTLPTarget(receiver.endpoint, "grpc", {"x-tenant": "blue"}, 2.0, "gzip")
        report = send_all(spool, {("traces", key): gzip})
        assert report.problems == {receiver.endpoint: "gRPC export failed"} and len(spool.entries()) == 1
        assert receiver.spans() == []
        plain = OTLPTarget(receiver.endpoint, "grpc", {"x-tenant": "blue"}, 2.0, "none")
        report = send_all(spool, {("traces", key): plain})
        receiver.wait_for_spans(lambda s: len(s) == 5)
    assert report.sent == 1 and spool.entries() == []
    (metadata,) = receiver.metadata
    assert metadata["x-tenant"] == "blue"


def _send_to_a_collector_refusing_it(tmp_path: Path, empty_ok: bool, count: int = 5) -> tuple[
        OTLPGrpcReceiver, SendReport, Spool, int]:
    """One spooled trace batch sent (as `spool send` does) to a gRPC collector that answers INVALID_ARGUMENT (and
    takes an empty request, or not): the receiver, the report, the spool, and the rejected count before."""
    with OTLPGrpcReceiver(answer=grpc.StatusCode.INVALID_ARGUMENT, empty_ok=empty_ok) as receiver:
        spool = Spool(tmp_path / "spool", 1 << 20, 86400)
        key = endpoint_key("grpc", receiver.endpoint)
        spool.put("traces", key, [encode_spans_json(spans(count))])
        before = health.evicted[("traces", "rejected")]
        report = send_all(spool, {("traces", key): OTLPTarget(receiver.endpoint, "grpc", {}, 2.0, "none")})
        return receiver, report, spool, before


def test_a_grpc_batch_a_live_endpoint_refuses_is_removed_and_counted(tmp_path: Path, caplog) -> None:
    """gRPC answers our exports only SUCCESS or FAILURE (the status is in the SDK's log line, which is not ours to
    read): a span failed twice by an endpoint that takes an empty request each time is refused. It is removed and
    counted (reason = rejected), said once."""
    receiver, report, spool, before = _send_to_a_collector_refusing_it(tmp_path, empty_ok=True, count=1)
    assert (receiver.refused, receiver.empty) == (2, 2)  # "twice", as docs/reliability.md says
    assert report.rejected == 1 and spool.entries() == []
    assert health.evicted[("traces", "rejected")] == before + 1
    assert sum("refused 1 span(s) of a spooled traces batch one by one (gRPC: refused 2 times by an endpoint that "
               "takes other requests)" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING) == 1


def test_a_refused_grpc_batch_is_split_before_anything_is_removed(tmp_path: Path) -> None:
    """Five spans the endpoint refuses one by one: four splits (one refusal each), then each span refused twice."""
    receiver, report, spool, before = _send_to_a_collector_refusing_it(tmp_path, empty_ok=True, count=5)
    assert (receiver.refused, receiver.empty) == (4 + 5 * 2, 4 + 5 * 2)
    assert report.rejected == 1 and spool.entries() == [] and health.evicted[("traces", "rejected")] == before + 5


def test_a_grpc_endpoint_that_refuses_everything_keeps_the_batch(tmp_path: Path) -> None:
    """An endpoint that refuses even an empty request is not refusing this batch (auth, a proxy, a collector
    shutting down): the batch is kept for later, never lost."""
    receiver, report, spool, before = _send_to_a_collector_refusing_it(tmp_path, empty_ok=False)
    assert (receiver.refused, receiver.empty) == (2, 0)  # the batch, then the empty probe
    assert (report.sent, report.rejected, report.failed) == (0, 0, 1) and len(spool.entries()) == 1
    assert health.evicted[("traces", "rejected")] == before


def test_at_exit_a_failed_grpc_attempt_is_spooled_at_the_deadline_not_retried(tmp_path: Path) -> None:
    """At exit, a gRPC status the SDK exporter would retry (UNAVAILABLE, with its backoff of 1 s, 2 s, 4 s ... up to
    its 60 s timeout here) ends the export at the close deadline and the batch is spooled, after one attempt."""
    import threading

    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    with OTLPGrpcReceiver(answer=grpc.StatusCode.UNAVAILABLE) as unavailable:
        endpoint = unavailable.endpoint
        target = OTLPTarget(endpoint, "grpc", {}, 60.0, "none")
        exporter = delivery.SpoolingSpanExporter(*delivery.sdk_exporter("traces", target), endpoint,
                                                 endpoint_key("grpc", endpoint), spool, 1.5, owner=object())
        delivery.close_all(exporter.owner)
        exported = threading.Thread(target=exporter.export, args=(spans(3),), daemon=True)
        exported.start()
        exported.join(20)
        assert not exported.is_alive()
        assert unavailable.refused == 1  # one attempt
    assert spooled_spans(spool) == [3] and health.dropped_at[endpoint] == 0


_HUNG_EXIT = """
import sys, time
from hermes_otel import runtime
from hermes_otel.config import load_settings
settings = load_settings({"HERMES_HOME": sys.argv[1], "HERMES_OTEL_PLUGINS_TOML": "/dev/null",
                          "OTEL_EXPORTER_OTLP_ENDPOINT": sys.argv[2], "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                          "OTEL_EXPORTER_OTLP_TIMEOUT": "60000", "OTEL_BSP_SCHEDULE_DELAY": "20"}).settings
runtime.configure(settings)  # starts the background sender: it sends the spooled batch, which hangs too
tracer = runtime.current_telemetry().tracer_provider.get_tracer("exit")
for i in range(3):
    tracer.start_span(f"s{i}").end()
deadline = time.monotonic() + 20
while int(open(sys.argv[3]).read() or 0) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
print(time.monotonic(), flush=True)  # then the interpreter exits: atexit runs runtime.shutdown
"""


def test_a_process_exits_at_once_with_its_live_export_and_a_re_send_hung_on_a_grpc_collector(tmp_path: Path) -> None:
    """A real process, a gRPC collector that takes every call and never answers (60 s export timeout): the live
    export in flight and the background sender's re-send both hang at exit. The process is out within the bound;
    the live batch is spooled and the batch being re-sent is kept (at-least-once)."""
    import subprocess
    import sys

    from tests.unit.test_spool_store import ROOT

    home = tmp_path / "home"
    calls = tmp_path / "calls"
    calls.write_text("")
    with OTLPGrpcReceiver(hang=True) as receiver:
        receiver.on_hang = lambda n: calls.write_text(str(n))
        settings = _settings(tmp_path, receiver.endpoint)
        spool = _spool(settings)
        spool.put("traces", endpoint_key("grpc", receiver.endpoint), [encode_spans_json(spans(2))])
        done = subprocess.run([sys.executable, "-c", _HUNG_EXIT, str(home), receiver.endpoint, str(calls)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        ended = time.monotonic()
        assert done.returncode == 0, done.stderr[-3000:]
        assert receiver.hung >= 2  # the live export and the re-send: both taken, neither answered
    exit_s = ended - float(done.stdout.split()[-1])
    assert exit_s < 20, exit_s  # the calls would have waited 60 s; measured about 0.15 s
    assert sorted(spooled_spans(spool)) == [2, 3]  # the re-sent batch kept, the live one spooled
