"""Every queue between Hermes and the exporters is bounded, counts what it refuses, loses nothing at shutdown."""

from __future__ import annotations

import functools
import logging
import threading
import time

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
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
    """Our processors count each item the SDK drops at their full queue, by signal, from a tally of the queue (not
    from the SDK's warning, whose words are its own to change: SDK 1.39 says nothing), and we say it once."""
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
    assert health.dropped["traces"] == before
    queue_logger = logging.getLogger("opentelemetry.sdk._shared_internal")  # where the SDK says a queue is full
    # untouched by us: no filter of ours but the masking one (a pipeline built earlier in the process installs it;
    # it passes every record that shows no secret as it is)
    assert not [f for f in queue_logger.filters
                if type(f).__module__.startswith("hermes_otel") and type(f).__name__ != "MaskingFilter"]
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


class Slow(LogRecordExporter):
    """A healthy exporter slower than the records thread: a few ms per batch, and what it received, in order."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def export(self, batch):
        time.sleep(0.003)
        self.bodies += [record.log_record.body for record in batch]
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def test_the_records_thread_waits_for_room_in_a_full_log_queue_instead_of_dropping():
    """The records thread emits far more than the log processor's queue holds, faster than a healthy exporter
    drains it: it waits for the worker's export to take a batch, so every record arrives once, in order."""
    health_module.install_log_filter()
    slow = Slow()
    logs = LoggerProvider()
    logs.add_log_record_processor(OurBatchLogRecordProcessor(slow, max_queue_size=8, max_export_batch_size=4,
                                                             schedule_delay_millis=1, export_timeout_millis=10_000))
    logger = logs.get_logger("t")
    emitter = Emitter()
    before = health.dropped["logs"]
    for n in range(300):
        emitter.submit(functools.partial(logger.emit, body=f"r{n}"))
    assert emitter.drain(30)
    logs.force_flush()
    assert slow.bodies == [f"r{n}" for n in range(300)]
    assert health.dropped["logs"] == before
    emitter.shutdown(1)
    logs.shutdown()


class Gated(Slow):
    """Holds its first export until released (a collector that does not answer yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def export(self, batch):
        self.release.wait(30)
        return super().export(batch)


def _held(*, endpoint: str | None = None, schedule_delay_millis: int = 1, export_timeout_millis: int = 60_000):
    """Our log processor (queue 4, batches of 2) over a `Gated` exporter: (exporter, provider, logger)."""
    gated = Gated()
    if endpoint is not None:
        gated.endpoint = endpoint
    logs = LoggerProvider()
    logs.add_log_record_processor(OurBatchLogRecordProcessor(gated, max_queue_size=4, max_export_batch_size=2,
                                                             schedule_delay_millis=schedule_delay_millis,
                                                             export_timeout_millis=export_timeout_millis))
    return gated, logs, logs.get_logger("t")


def test_a_record_from_any_other_thread_never_waits_for_room():
    """While the records thread waits for room, an agent thread's records (Hermes's own log lines when not
    handed to the records thread) go in at once: the SDK drops its oldest, each drop counted, as before."""
    health_module.install_log_filter()
    gated, logs, logger = _held()
    emitter = Emitter()
    for n in range(20):
        emitter.submit(functools.partial(logger.emit, body=f"r{n}"))
    # r0, r1 are in the held export, r2..r5 fill the queue, the records thread waits with r6 (for up to 60 s).
    for _ in range(500):
        if len(emitter) == 13:
            break
        time.sleep(0.01)
    assert len(emitter) == 13
    before = health.dropped["logs"]
    agent = threading.Thread(target=lambda: [logger.emit(body=f"a{n}") for n in range(50)])
    agent.start()
    agent.join(10)
    assert not agent.is_alive()  # it did not wait
    assert health.dropped["logs"] - before == 50  # r2..r5 and a0..a45: the oldest, dropped and counted
    assert len(emitter) == 13  # the records thread still waits
    gated.release.set()
    assert emitter.drain(30)
    logs.force_flush()
    assert gated.bodies == ["r0", "r1", "a46", "a47", "a48", "a49", *(f"r{n}" for n in range(6, 20))]
    assert health.dropped["logs"] - before == 50
    emitter.shutdown(1)
    logs.shutdown()


def test_the_records_thread_stops_waiting_for_room_when_the_processor_shuts_down():
    gated, logs, logger = _held()
    emitter = Emitter()
    for n in range(20):
        emitter.submit(functools.partial(logger.emit, body=f"r{n}"))
    for _ in range(500):
        if len(emitter) == 13:  # waiting for room with r6, the export held (as above)
            break
        time.sleep(0.01)
    assert len(emitter) == 13
    closing = threading.Thread(target=logs.shutdown)  # it waits for the held export; the records thread does not
    closing.start()
    assert emitter.drain(10)  # the rest went to the shut-down processor, which ignores it
    assert closing.is_alive()
    gated.release.set()
    closing.join(30)
    assert gated.bodies[:2] == ["r0", "r1"] and "r19" not in gated.bodies
    emitter.shutdown(1)


def test_the_records_thread_does_not_wait_for_room_behind_an_endpoint_known_to_be_failing():
    """A failing endpoint's exports spool at once; only the worker's probe of it can hang (up to the export
    timeout, every few seconds): the records thread does not wait behind it, the SDK drops and counts."""
    health_module.install_log_filter()
    gated, logs, logger = _held(endpoint="http://127.0.0.1:9/v1/logs")
    health.failure("logs", gated.endpoint, "connection refused")
    emitter = Emitter()
    before = health.dropped["logs"]
    try:
        for n in range(20):
            emitter.submit(functools.partial(logger.emit, body=f"r{n}"))
        assert emitter.drain(10)
        assert 14 <= health.dropped["logs"] - before <= 16  # 4 in the queue (and 2 in the export once it began)
    finally:
        health.success(gated.endpoint)
        gated.release.set()
        emitter.shutdown(1)
        logs.shutdown()


def test_a_forked_child_starts_with_an_empty_count():
    import os

    gated, logs, logger = _held(schedule_delay_millis=60_000)
    for n in range(4):
        logger.emit(body=f"p{n}")  # the queue is full (the worker sleeps 60 s)
    pid = os.fork()
    if pid == 0:  # the child: the SDK emptied its queue, so the records thread's work does not wait for room
        emitter, done = Emitter(), threading.Event()
        for n in range(3):
            emitter.submit(functools.partial(logger.emit, body=f"c{n}"))
        emitter.submit(done.set)
        os._exit(0 if done.wait(20) else 1)  # a stale count would hold it the export timeout (60 s)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    gated.release.set()
    logs.shutdown()


def test_an_export_that_hangs_past_the_export_timeout_costs_the_records_thread_one_wait():
    """Each wait for room is bounded by the export timeout (1 s here), and one that timed out is not repeated for
    every record until the worker takes the next batch: the rest drop at once, counted."""
    health_module.install_log_filter()
    gated, logs, logger = _held(export_timeout_millis=1000)
    emitter, done = Emitter(), threading.Event()
    before = health.dropped["logs"]
    for n in range(20):
        emitter.submit(functools.partial(logger.emit, body=f"r{n}"))
    emitter.submit(done.set)
    assert done.wait(10)  # 14 waits of 1 s each would take 14 s
    assert 14 <= health.dropped["logs"] - before <= 16
    gated.release.set()
    emitter.shutdown(1)
    logs.shutdown()
