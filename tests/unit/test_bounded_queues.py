"""Full export queues: the builder waits for room (a burst is kept); a stuck exporter costs it one
short wait, then drops are counted; other threads never wait."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

from hermes_otel import telemetry
from hermes_otel.deferred import Backlog
from hermes_otel.exporters.health import health
from hermes_otel.telemetry import BoundedLogProcessor


class Exporter(LogRecordExporter):
    """Takes `delay_s` per batch, or blocks until `release` is set."""

    def __init__(self, delay_s: float = 0.0, blocked: bool = False) -> None:
        self.delay_s = delay_s
        self.release = threading.Event()
        if not blocked:
            self.release.set()
        self.bodies: list = []

    def export(self, batch):
        self.release.wait(10)
        time.sleep(self.delay_s)
        self.bodies += [getattr(r, "log_record", r).body for r in batch]
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        self.release.set()


def pipeline(exporter: Exporter):
    processor = BoundedLogProcessor(exporter, schedule_delay_millis=5, max_export_batch_size=2, max_queue_size=4)
    provider = LoggerProvider()
    provider.add_log_record_processor(processor)
    return provider, processor, provider.get_logger("t")


def emit(logger, body: int) -> None:
    logger.emit(body=body)


@pytest.fixture
def backlog():
    backlog = Backlog(interval_s=60)  # built only when drained here
    yield backlog
    backlog.shutdown()


def test_the_builder_waits_for_a_slow_exporter_and_keeps_a_burst(backlog):
    exporter = Exporter(delay_s=0.002)
    provider, _, logger = pipeline(exporter)
    dropped = health.dropped["logs"]
    for i in range(60):  # 15 times the queue
        backlog.defer(emit, logger, i)
    backlog.drain()
    provider.force_flush(10_000)
    assert sorted(exporter.bodies) == list(range(60))
    assert health.dropped["logs"] == dropped
    provider.shutdown()


def test_a_stuck_exporter_costs_the_builder_one_wait_then_drops_are_counted(backlog, monkeypatch):
    monkeypatch.setattr(telemetry, "ROOM_WAIT_S", 0.05)
    exporter = Exporter(blocked=True)
    provider, processor, logger = pipeline(exporter)
    dropped = health.dropped["logs"]
    waits = []
    real = telemetry._room_within
    monkeypatch.setattr(telemetry, "_room_within", lambda *a: waits.append(real(*a)) or waits[-1])
    for i in range(20):
        backlog.defer(emit, logger, i)
    backlog.drain()
    # At most one wait that found room (the worker had not yet taken its first batch), then one in
    # vain, then none for NO_WAIT_S.
    assert waits in ([False], [True, False])
    assert processor._wait_from > time.monotonic() + telemetry.NO_WAIT_S - 1
    # The worker holds one batch (2) in the blocked export; the queue holds 4; the rest is dropped.
    assert health.dropped["logs"] - dropped == 20 - 6
    exporter.release.set()
    provider.force_flush(10_000)
    assert sorted(exporter.bodies) == list(range(6))
    provider.shutdown()


def test_other_threads_never_wait(monkeypatch):
    exporter = Exporter(blocked=True)
    provider, processor, logger = pipeline(exporter)
    waits = []
    monkeypatch.setattr(telemetry, "_room_within", lambda *a: waits.append(a) or True)
    dropped = health.dropped["logs"]
    for i in range(20):
        emit(logger, i)  # on this thread, as with a tracer we cannot defer
    assert waits == []
    exporter.release.set()
    provider.force_flush(10_000)
    kept = len(exporter.bodies)  # the queue's 4, and 2 more if the worker took a batch meanwhile
    assert kept in (4, 6) and health.dropped["logs"] - dropped == 20 - kept
    provider.shutdown()
