"""The way out of one OTLP exporter (docs/reliability.md, "What is spooled" and "Exit"): the SDK exporter; a batch
it does not deliver goes to the spool (:mod:`.store`), or with `spool = false` is dropped and counted. While an
endpoint fails, batches skip the network (tried again every :data:`LIVE_RETRY_S`). Every export ends at its timeout
(:mod:`..deadline`); at shutdown :func:`close_all` gives each exporter a deadline (:data:`SPOOL_WAIT_S` with the
spool), then shuts the SDK exporter down and cuts the request in flight, so a hanging collector never holds the
process. What is delivered, failed and why comes from the SDK's result and our session (:mod:`..session`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..._internal import log as _log
from .. import deadline
from ..file.otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json
from ..health import LIVE_RETRY_S, current, health
from ..private import UnsafePath
from ..session import NOT_TAKEN, REFUSED
from .sdk import sdk_exporter, send_once
from .store import Spool, item_count

if TYPE_CHECKING:
    from ..session import ExporterSession

SPOOL_WAIT_S = 0.1  # at shutdown, the wait for an export in flight before its batch is spooled
DROPPED_METRIC = "hermes.otel.exporter.dropped"

_exit_at: float | None = None  # monotonic deadline of the process's exit, once it began
_open: weakref.WeakSet[_Spooling] = weakref.WeakSet()  # every spooling exporter not shut down


def begin_exit(wait_s: float = SPOOL_WAIT_S) -> float:
    """Process exit starts: every spooling exporter stops waiting for the network `wait_s` from now, all together.
    Returns the deadline (monotonic)."""
    global _exit_at
    at = time.monotonic() + wait_s
    if _exit_at is None or at < _exit_at:
        _exit_at = at
    return _exit_at


def cancel_exit() -> None:
    """A new configuration after a shutdown (tests, an embedding host): not exiting after all."""
    global _exit_at
    _exit_at = None


def close_all(owner: Any) -> None:
    """A pipeline shuts down: from now on each of its spooling exporters (made for the settings `owner`) waits for
    the network only until its deadline, all at once, so no exporter waits behind another's endpoint."""
    closing = [e for e in list(_open) if e.owner is owner]
    if not closing:
        return
    now = time.monotonic()
    deadlines = sorted(((e.close_deadline(now), id(e), e) for e in closing), key=lambda d: d[:2])
    for exporter in closing:
        exporter.exit_pending = True

    def interrupt() -> None:
        for at, _, exporter in deadlines:
            time.sleep(max(at - time.monotonic(), 0))
            exporter.interrupt()

    threading.Thread(target=interrupt, name="hermes-otel-close", daemon=True).start()


class _Spooling:
    """What the three signal exporters share: deliver through the SDK exporter, or spool, or count."""

    signal: str
    delivered: Any  # the SDK export results that mean delivered and not
    failed: Any
    encode: Callable[[Any], dict[str, Any]]  # a batch as one OTLP/JSON request (the spool's lines)

    def __init__(self, inner: Any, session: ExporterSession | None, endpoint: str, key: str, spool: Spool | None,
                 budget_s: float, owner: Any = None, timeout_s: float = 10.0) -> None:
        self.inner, self.session, self.endpoint, self.key, self.spool = inner, session, endpoint, key, spool
        self.budget_s, self.owner = budget_s, owner
        self.endpoints = frozenset({endpoint})
        self.closing = False
        self.exit_pending = False  # the pipeline is shutting down (close_all)
        self.timeout_s = timeout_s
        if session is not None:
            session.on_failure = self.attempt_failed
        if spool is not None:
            health.spooled_to[endpoint] = str(spool.directory)
        else:
            health.spooled_to.pop(endpoint, None)
        _open.add(self)

    def export(self, *args: Any, **kwargs: Any) -> Any:
        """On the processor's thread: send the batch (the first argument) through the SDK exporter, with the rest
        as given (the metric reader's timeout), and spool (or count) it when it was not delivered."""
        batch = args[0]
        if self.endpoint in health.not_taken:  # it does not take this signal: nothing to spool for it
            self._dropped(batch)
            return self.failed
        failing = health.any_failing(self.endpoints)
        exiting = _exit_at is not None and time.monotonic() >= _exit_at
        if self.closing or (self.spool is not None and exiting) or failing and (
                getattr(current, "flushing", False) or health.failed_within(self.endpoint, LIVE_RETRY_S)):
            self._undelivered(batch)
            return self.failed
        answer = send_once(self.inner, self.session, self, self.timeout_s, *args, **kwargs)
        if isinstance(answer, tuple) and answer[0] == self.delivered and answer[1]:
            health.success(self.endpoint)
            from .resend import resender

            resender.wake(self.key)  # the endpoint answers: what waits in the spool can go now
            return self.delivered
        status = self.session.last_status() if self.session is not None else None
        if status in NOT_TAKEN:
            health.not_taking(self.signal, self.endpoint, f"HTTP {status}")
            self._dropped(batch)
            return self.failed
        if status in REFUSED:
            health.refused(self.signal, self.endpoint, f"HTTP {status}")
        elif answer is not None and not self.closing:  # (None: cut at the deadline, which is no failure of theirs)
            why = (f"{type(answer).__name__}: {answer}" if isinstance(answer, Exception)
                   else answer[2] or "the export failed")
            health.failure(self.signal, self.endpoint, why)
        self._undelivered(batch)
        return self.failed

    def attempt_failed(self, why: str) -> None:
        """Our session saw a request fail (before the SDK's retry backoff): one health report (none for what
        closing caused). At exit with a spool, a failed attempt is not retried: the batch is spooled now, to be
        re-sent next run. (A re-send through the same session is the re-sender's to judge.)"""
        if self.closing or getattr(current, "export", None) is not self:
            return
        health.failure(self.signal, self.endpoint, why)
        if self.exit_pending and self.spool is not None:
            self.interrupt()

    def close_deadline(self, now: float) -> float:
        if health.any_failing(self.endpoints):
            return now  # it would only sleep out its retry backoff
        if self.spool is None:
            return now + self.budget_s
        return now + SPOOL_WAIT_S if _exit_at is None else min(now + SPOOL_WAIT_S, _exit_at)

    def interrupt(self, *args: Any, **kwargs: Any) -> None:
        """The deadline passed, or the processor drained its queue through us (shutdown, bounded by
        :func:`close_all`'s deadline): no more network; the export in flight ends at once and its batch is spooled."""
        if self.closing:
            return
        self.closing = True
        _open.discard(self)
        try:
            self.inner.shutdown()  # ends the retry sleep; the session (HTTP) or the channel (gRPC: its call) is closed
        except Exception:  # noqa: BLE001 - closing is best-effort
            pass
        deadline.cut(self)  # the HTTP request in flight ends now: its batch is spooled

    shutdown = interrupt

    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        return True  # nothing is held here: the processor's flush is the export itself

    def _undelivered(self, batch: Any) -> None:
        """Spool a batch, or count it as dropped when there is no spool or it cannot be written."""
        spool = self.spool
        if spool is not None:
            try:
                spool.put(self.signal, self.key, [self.encode(batch)])
                if (self.closing or self.exit_pending) and not health.any_failing(self.endpoints):
                    # cut while it answers (slowly): said at the end of the shutdown (a failing one was said)
                    health.left_at_exit[(self.signal, self.endpoint)] += self._count(batch)
                return
            except UnsafePath:
                pass  # said once for the directory by the check itself
            except OSError as exc:
                _log.once(f"spool-write:{spool.directory}", "hermes-otel: cannot write to the spool %s (%s); telemetry "
                          "that cannot be delivered is dropped and counted in %s (Hermes is unaffected; repeats are "
                          "logged at DEBUG)", spool.directory, exc.strerror or exc, DROPPED_METRIC, per_process=True)
            except Exception as exc:  # noqa: BLE001 - a batch that cannot be encoded is dropped, said once
                _log.once(f"spool-encode:{self.signal}", "hermes-otel: cannot encode a %s batch for the spool (%r); "
                          "it is dropped and counted", self.signal, exc, per_process=True)
        self._dropped(batch)

    def _dropped(self, batch: Any) -> None:
        health.drop(self.signal, self.endpoint, self._count(batch))

    def _count(self, batch: Any) -> int:
        try:
            return item_count(self.signal, batch)
        except Exception:  # noqa: BLE001 - counting must not raise into an SDK thread
            return 1


class SpoolingSpanExporter(_Spooling, SpanExporter):
    signal, encode = "traces", staticmethod(encode_spans_json)
    delivered, failed = SpanExportResult.SUCCESS, SpanExportResult.FAILURE


class SpoolingLogExporter(_Spooling, LogRecordExporter):
    signal, encode = "logs", staticmethod(encode_logs_json)
    delivered, failed = LogRecordExportResult.SUCCESS, LogRecordExportResult.FAILURE


class SpoolingMetricExporter(_Spooling, MetricExporter):
    """It presents the temporality and aggregation of :func:`metric_preferences` (the metric reader asks us)."""

    signal, encode = "metrics", staticmethod(encode_metrics_json)
    delivered, failed = MetricExportResult.SUCCESS, MetricExportResult.FAILURE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _Spooling.__init__(self, *args, **kwargs)
        temporality, aggregation = metric_preferences()
        MetricExporter.__init__(self, preferred_temporality=temporality, preferred_aggregation=aggregation)


def spooling_exporter(signal: str, target: Any, settings: Any) -> Any:
    """The SDK OTLP exporter for `target` behind its spool, for the pipeline of `settings`."""
    from .store import endpoint_key, spool_for

    cls = {"traces": SpoolingSpanExporter, "logs": SpoolingLogExporter, "metrics": SpoolingMetricExporter}[signal]
    return cls(*sdk_exporter(signal, target), target.endpoint,
               endpoint_key(target.protocol, target.endpoint, target.headers), spool_for(settings),
               settings.flush_timeout_s, settings, target.timeout_s)


def metric_preferences(environ: Mapping[str, str] | None = None) -> tuple[dict[type, Any], dict[type, Any]]:
    """The temporality and histogram aggregation the SDK's OTLP metric exporter picks from
    OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE / _DEFAULT_HISTOGRAM_AGGREGATION, chosen here: the metric
    reader asks the wrapper, and the SDK exporter has no public getter to ask."""
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    )
    from opentelemetry.sdk.metrics.export import AggregationTemporality
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, ExponentialBucketHistogramAggregation

    env = os.environ if environ is None else environ
    preference = env.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "CUMULATIVE").strip().upper()
    delta = {"DELTA": (Counter, Histogram, ObservableCounter), "LOWMEMORY": (Counter, Histogram)}.get(preference, ())
    kinds = (Counter, UpDownCounter, Histogram, ObservableCounter, ObservableUpDownCounter, ObservableGauge)
    temporality: dict[type, Any] = {
        kind: AggregationTemporality.DELTA if kind in delta else AggregationTemporality.CUMULATIVE for kind in kinds}
    histogram = env.get("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "").strip().upper()
    aggregation = (ExponentialBucketHistogramAggregation() if histogram == "BASE2_EXPONENTIAL_BUCKET_HISTOGRAM"
                   else ExplicitBucketHistogramAggregation())
    return temporality, {Histogram: aggregation}
