"""Every queue between Hermes and the exporters is bounded, counts what it refuses, loses nothing at shutdown."""

from __future__ import annotations

import logging
import threading

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from hermes_otel._internal import log as _log
from hermes_otel.emitter import Emitter
from hermes_otel.exporters import health as health_module
from hermes_otel.exporters.health import OurBatchLogRecordProcessor, OurBatchSpanProcessor, health


class Stuck(SpanExporter, LogRecordExporter):
    """An exporter that blocks until released (a hanging collector)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, batch):
        self.release.wait(10)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def test_the_record_queue_has_a_hard_limit_and_counts_what_it_refuses(caplog):
    _log.reset()
    emitter = Emitter(limit=4)
    gate = threading.Event()
    ran: list[int] = []
    before = health.dropped["logs"]
    emitter.submit(gate.wait, 10)  # the worker is busy: what follows waits in the queue
    for n in range(1000):
        emitter.submit(ran.append, n)
    assert len(emitter) <= 4
    assert emitter.dropped == health.dropped["logs"] - before >= 995
    gate.set()
    assert emitter.drain(5)
    assert ran == sorted(ran) and len(ran) + emitter.dropped == 1000  # in order; each one ran or was counted
    assert [r.getMessage() for r in caplog.records if "records are waiting" in r.getMessage()] == [
        "hermes-otel: 4 observer records are waiting to be emitted; new ones are dropped and counted until the "
        "queue drains"]
    emitter.shutdown(1)


def test_nothing_submitted_during_or_after_shutdown_is_lost():
    emitter = Emitter(limit=100)
    ran: list[int] = []
    emitter.submit(ran.append, 1)
    assert emitter.shutdown(5)
    emitter.submit(ran.append, 2)  # after shutdown: runs at once, on the caller's thread
    assert ran == [1, 2]


def test_a_full_export_queue_counts_each_drop_and_says_it_once(caplog):
    """The SDK warns once per dropped item; we count by signal and report once (a contract with the SDK's
    message and logger: if the SDK changes them, this test fails)."""
    _log.reset()
    health_module.install_log_filter()
    stuck = Stuck()
    spans = TracerProvider()
    spans.add_span_processor(OurBatchSpanProcessor(stuck, max_queue_size=4, max_export_batch_size=2,
                                                   schedule_delay_millis=1))
    logs = LoggerProvider()
    logs.add_log_record_processor(OurBatchLogRecordProcessor(stuck, max_queue_size=4, max_export_batch_size=2,
                                                             schedule_delay_millis=1))
    before = dict(health.dropped)
    caplog.set_level(logging.WARNING)
    for _ in range(100):
        spans.get_tracer("t").start_span("s").end()
        logs.get_logger("t").emit(body="b")
    dropped = {signal: health.dropped[signal] - before.get(signal, 0) for signal in ("traces", "logs")}
    assert 90 <= dropped["traces"] <= 96 and 90 <= dropped["logs"] <= 96, dropped
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if m.startswith("Queue full")]  # the SDK's per-item warnings are ours now
    assert [m for m in messages if "export queue is full" in m] == [
        f"hermes-otel: the {s} export queue is full (the exporter cannot keep up); new items are dropped and counted "
        "in hermes.otel.exporter.dropped" for s in ("traces", "logs")]
    stuck.release.set()
    spans.shutdown()
    logs.shutdown()


def test_another_pipelines_full_queue_is_its_own(caplog):
    """Issue 25, item 1.5: a host's processor in the same process (queue size 1) drops spans; its warnings reach
    the host's handlers as the SDK emits them, and none of its drops is counted as ours."""
    _log.reset()
    health_module.install_log_filter()  # as when our own pipeline is live
    stuck = Stuck()
    host = TracerProvider()
    host.add_span_processor(BatchSpanProcessor(stuck, max_queue_size=1, max_export_batch_size=1,
                                               schedule_delay_millis=60_000))
    before = health.dropped["traces"]
    caplog.set_level(logging.WARNING, logger="opentelemetry.sdk._shared_internal")
    for _ in range(50):
        host.get_tracer("host").start_span("s").end()
    full = [r for r in caplog.records if r.getMessage() == "Queue full, dropping Span."]
    assert full  # what the SDK says (its own duplicate filter folds repeats), not swallowed by us
    assert health.dropped["traces"] == before
    stuck.release.set()
    host.shutdown()


def test_importing_the_plugin_changes_no_logger_but_its_own():
    """Issue 25, item 1.5: no global side effect at import; the SDK's and other libraries' loggers are touched
    only once a pipeline of ours is built (and then only our exports' and processors' records are ours)."""
    import subprocess
    import sys

    probe = ("import logging\n"
             "import opentelemetry.sdk.trace.export, opentelemetry.sdk._logs.export, opentelemetry.sdk.metrics\n"
             "def filters():\n"
             "    return {n: list(l.filters) for n, l in logging.Logger.manager.loggerDict.items()\n"
             "            if isinstance(l, logging.Logger) and l.filters}\n"
             "before = filters()\n"
             "import hermes_otel, hermes_otel.plugin\n"
             "print(sorted(n for n, f in filters().items() if f != before.get(n)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['hermes_otel', 'hermes_otel.middleware']"
