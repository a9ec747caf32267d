"""Re-sending the spool (docs/reliability.md, "Re-sending"): oldest first, one claimed batch at a time, decoded back
into the SDK's objects (:mod:`.decode`) and sent through an SDK exporter made as the live one is; removed once
acknowledged, or refused item by item (:func:`export`, :func:`_deliver`). One background :class:`Resender` per
process (backoff, pacing: :data:`BACKOFF_S`, :data:`MIN_GAP_S`, :data:`BUSY_SHARE`); `hermes-otel spool send` runs
:func:`send_all` unpaced.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._internal import log as _log
from ...redaction.masking import mask_url
from ..health import health, install_log_filter
from ..session import NOT_TAKEN, REFUSED
from .sdk import send_once
from .store import Entry, NotABatch, Requests, Spool, Stray, endpoint_key, item_count

# Our own generator: the sender thread never moves the process-wide `random` state under someone else.
_JITTER = random.Random()

MIN_GAP_S = 0.02  # between two batches of the background sender (so at most 50 batches/s)
BUSY_SHARE = 0.25  # of one core, at most, for the background sender
BACKOFF_S = (1.0, 60.0)  # first and longest wait after a failed send
IDLE_RESCAN_S = 5.0  # how often an idle sender looks for batches spooled by other processes
CAPS_EVERY_S = 60.0  # how often the sender enforces the spool's caps (age)
@dataclass(frozen=True)
class Outcome:
    kind: str  # sent | retry | rejected | not_taken | unreadable | busy | stray
    items: int = 0  # spans, log records or metric points in the batch
    detail: str = ""
    retry_after_s: float | None = None
    bad_lines: int = 0  # lines of the batch that could not be read or converted: skipped


Targets = Mapping[tuple[str, str], Any]  # (signal, endpoint key) -> OTLPTarget: a gRPC endpoint takes all three


def targets_of(settings: Any) -> dict[tuple[str, str], Any]:
    """Every OTLP endpoint a configuration exports to, by signal and spool key."""
    pairs = [*settings.otlp.items(), *(("traces", e.target) for e in settings.relay_span_endpoints),
             *(("logs", t) for t in settings.relay_log_targets),
             *(("metrics", t) for t in settings.relay_metric_targets)]
    return {(signal, endpoint_key(t.protocol, t.endpoint, t.headers)): t for signal, t in pairs}


# -- one batch ---------------------------------------------------------------------------------------------------


def send_entry(spool: Spool, entry: Entry, target: Any, exporters: Exporters, *, paced: bool = True) -> Outcome:
    """Claim one spooled batch, send it, and remove it once acknowledged (or rejected as malformed)."""
    try:
        with spool.claim(entry) as fd:
            if fd is None:
                return Outcome("busy")
            return _send_claimed(spool, entry, fd, target, exporters, paced)
    except NotABatch as exc:  # swapped for a FIFO or a link since the listing: never waited on, never followed
        return Outcome("stray", detail=str(exc))


def _send_claimed(spool: Spool, entry: Entry, fd: int, target: Any, exporters: Exporters, paced: bool) -> Outcome:
    """Send a claimed batch in pieces of at most :data:`PIECE_ITEMS` items (one request each, as the SDK's batch
    processor sends them), read one line at a time: a re-send holds one piece, never the whole batch. A piece the
    endpoint refuses for its content is split (:func:`_deliver`). The batch is removed once every piece was
    delivered or refused item by item; a piece that fails keeps it, and the pieces already acknowledged are sent
    again with it later (at-least-once)."""
    requests = Requests(entry.path, fd)
    delivered = items = bad = 0
    removed: list[tuple[int, str]] = []  # (items, why) of each item an endpoint refused on its own
    from .decode import pieces  # with something to send (most starts find the spool empty)

    for batch, count, skipped in pieces(entry.signal, requests, paced=paced):
        bad += skipped
        if batch is None:
            continue
        before = sum(n for n, _ in removed)
        outcome = _deliver(entry.signal, target, batch, exporters, removed)
        del batch  # the next piece is decoded without this one in memory
        if outcome.kind == "retry":
            return Outcome("retry", items, outcome.detail, outcome.retry_after_s, bad + requests.bad)
        if outcome.kind == "not_taken":  # nor will it ever: removed, said once (health.not_taking)
            spool.remove(entry)
            health.evicted[(entry.signal, "not_taken")] += 1
            health.not_taking(entry.signal, target.endpoint, outcome.detail)
            return Outcome("rejected", 0, outcome.detail)
        taken = count - (sum(n for n, _ in removed) - before)
        delivered, items = delivered + (taken > 0), items + taken
    if bad:  # (a torn line was said by the reader)
        _log.once("spool-bad-lines", "hermes-otel: skipped %d unreadable line(s) of the spooled %s batch %s; "
                  "the rest was sent (repeats are logged at DEBUG)", bad, entry.signal, entry.path.name,
                  per_process=True)
    spool.remove(entry)
    if removed:
        health.evicted[(entry.signal, "rejected")] += len(removed)
        _log.once(f"spool-rejected:{target.endpoint}", "hermes-otel: %s refused %d %s of a spooled %s batch one by "
                  "one (%s); %s removed and counted in hermes.otel.spool.evicted, the other %d delivered (repeats "
                  "are logged at DEBUG)", mask_url(target.endpoint), sum(n for n, _ in removed),
                  _ITEMS[entry.signal], entry.signal, removed[-1][1], "it was" if len(removed) == 1 else "they were",
                  items, per_process=True)
    if delivered:
        health.replayed[entry.signal] += 1
        return Outcome("sent", items, bad_lines=bad + requests.bad)
    if removed:
        return Outcome("rejected", 0, removed[-1][1], bad_lines=bad + requests.bad)
    detail = "no line could be converted" if bad else "no readable request"
    health.evicted[(entry.signal, "unreadable")] += 1
    _log.once("spool-unreadable", "hermes-otel: removed the spooled %s batch %s: it cannot be sent (%s); "
              "counted in hermes.otel.spool.evicted (repeats are logged at DEBUG)", entry.signal,
              entry.path.name, detail, per_process=True)
    return Outcome("unreadable", 0, detail)


_ITEMS = {"traces": "span(s)", "logs": "log record(s)", "metrics": "metric point(s)"}


def _deliver(signal: str, target: Any, batch: Any, exporters: Exporters, removed: list[tuple[int, str]]) -> Outcome:
    """Send one piece. One the endpoint refuses for its content (HTTP 400, 413, 422: too large for a body or message
    limit, or not valid to it; over gRPC, failed while the endpoint takes an empty request) is split in two by bytes
    and each part sent, down to single items: only an item refused on its own is removed (added to `removed`).
    "sent" once every part was delivered or removed; "retry" as soon as one was not (the endpoint fails now)."""
    parts = split(signal, batch)
    outcome = export(signal, target, batch, exporters, alone=parts is None)
    if outcome.kind != "rejected":
        return outcome  # (sent, retry, not_taken)
    if parts is None:
        removed.append((item_count(signal, batch), outcome.detail))
        return Outcome("sent")
    for part in parts:
        outcome = _deliver(signal, target, part, exporters, removed)
        if outcome.kind == "retry":
            return outcome
    return Outcome("sent")


def split(signal: str, batch: Any) -> tuple[Any, Any] | None:
    """`batch` in two parts of about the same encoded size (None: one item, or one metric, which is not split)."""
    from ..file.otlp_json import encode_logs_json, encode_metrics_json, encode_spans_json

    encoders: dict[str, Callable[[Any], Any]] = {"traces": encode_spans_json, "logs": encode_logs_json,
                                                 "metrics": encode_metrics_json}
    encode = encoders[signal]
    if signal == "metrics":
        items: list[Any] = [(rm, sm, m) for rm in batch.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
    else:
        items = list(batch)
    if len(items) < 2:
        return None
    sizes = [len(json.dumps(encode(_metrics([item]) if signal == "metrics" else [item]))) for item in items]
    half = sum(sizes) / 2
    cut = next((n for n, total in enumerate(itertools.accumulate(sizes[:-1]), start=1) if total >= half),
               len(items) - 1)
    first, second = items[:cut], items[cut:]
    return (_metrics(first), _metrics(second)) if signal == "metrics" else (first, second)


def _metrics(items: list[tuple[Any, Any, Any]]) -> Any:
    """(resource metrics, scope metrics, metric) triples as one MetricsData, grouped as they came."""
    from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics, ScopeMetrics

    groups: list[tuple[Any, list[tuple[Any, list[Any]]]]] = []
    for rm, sm, metric in items:
        if not groups or groups[-1][0] is not rm:
            groups.append((rm, []))
        scopes = groups[-1][1]
        if not scopes or scopes[-1][0] is not sm:
            scopes.append((sm, []))
        scopes[-1][1].append(metric)
    return MetricsData([ResourceMetrics(rm.resource, [ScopeMetrics(sm.scope, metrics, sm.schema_url)
                                                      for sm, metrics in scopes], rm.schema_url)
                        for rm, scopes in groups])


class Exporters:
    """The SDK exporters the re-sender sends through, one per endpoint and signal, its own (made as the live ones
    are): the SDK's HTTP exporter takes no lock, so it never shares the live exporter's."""

    def __init__(self) -> None:
        install_log_filter()  # the SDK exporter's warnings inside a re-send stay at DEBUG
        self._made: dict[tuple[Any, ...], Any] = {}  # used by one thread: the sender's, or `spool send`'s

    def get(self, signal: str, target: Any) -> tuple[Any, Any]:
        """The exporter, and its HTTP session (None for gRPC): one per endpoint and signal, as configured."""
        from .sdk import sdk_exporter

        key = (signal, target.endpoint, target.protocol, tuple(sorted(target.headers.items())), target.timeout_s,
               target.compression)
        if key not in self._made:
            self._made[key] = sdk_exporter(signal, target)
        return self._made[key]

    def close(self) -> None:
        made, self._made = list(self._made.values()), {}
        for exporter, _ in made:
            with contextlib.suppress(Exception):  # closing is best-effort
                exporter.shutdown()


class _Resending:  # a re-send's owner: health.py's filter keeps the SDK exporter's warnings in it at DEBUG
    signal = "spool"


_RESENDING = _Resending()
REFUSALS = 2  # a gRPC batch refused this often, each time by an endpoint that took an empty request, is removed


def export(signal: str, target: Any, batch: Any, exporters: Exporters, alone: bool = True) -> Outcome:
    """Send one decoded batch through `target`'s SDK exporter; what the answer means for the spooled batch.

    HTTP: the status our session saw (400, 413, 422: the batch is refused). gRPC answers success or failure only,
    so a batch is refused when the endpoint fails it while taking an empty request of the same signal (a live
    endpoint refusing this batch), :data:`REFUSALS` times in a row for a batch of one item (`alone`), which is then
    removed; anything else keeps it for later."""
    exporter, session = exporters.get(signal, target)
    for _ in range(REFUSALS if session is None and alone else 1):
        delivered, failure = _send(exporter, session, batch, target.timeout_s)
        if delivered:
            return Outcome("sent")
        status = session.last_status() if session is not None else None
        if status is not None:
            kind = "rejected" if status in REFUSED else "not_taken" if status in NOT_TAKEN else "retry"
            why = "HTTP 413: larger than the endpoint takes" if status == 413 else f"HTTP {status}"
            return Outcome(kind, detail=why, retry_after_s=session.last_retry_after())
        if failure is not None or session is not None or not _send(exporter, None, _empty(signal), target.timeout_s)[0]:
            return Outcome("retry", detail=failure or ("no answer" if session is not None else "gRPC export failed"))
    times = REFUSALS if alone else 1
    return Outcome("rejected", detail=f"gRPC: refused {times} time{'s' if times > 1 else ''} by an endpoint that "
                   "takes other requests")


def _send(exporter: Any, session: Any, batch: Any, timeout_s: float) -> tuple[bool, str | None]:
    """(delivered, why not: an exception's name, or what our session saw; None when the exporter said FAILURE)."""
    answer = send_once(exporter, session, _RESENDING, timeout_s, batch)
    if isinstance(answer, Exception):  # an exporter bug keeps the batch for later
        return False, f"{type(answer).__name__}: {answer}"[:200]
    delivered = getattr(answer[0], "name", "") == "SUCCESS" and answer[1]
    return delivered, None if delivered else answer[2]


def _empty(signal: str) -> Any:
    """An empty batch of `signal`: a request any live OTLP endpoint takes."""
    if signal != "metrics":
        return []
    from opentelemetry.sdk.metrics.export import MetricsData

    return MetricsData(resource_metrics=[])


# -- the background sender ---------------------------------------------------------------------------------------


class Resender:
    """The process's background sender of the spool (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._spool: Spool | None = None
        self._targets: dict[tuple[str, str], Any] = {}
        self._thread: threading.Thread | None = None
        self._backoff: dict[str, tuple[float, float]] = {}  # key -> (monotonic time of the next try, last delay)
        self._exporters = Exporters()
        self._strays: set[Any] = set()  # paths of batches that turned out not to be batches we can open

    def serve(self, spool: Spool | None, targets: Targets) -> None:
        """Send `spool` to `targets` from now on (nothing when either is empty); starts the thread if needed."""
        with self._lock:
            self._spool, self._targets = spool, dict(targets)
            if spool is None or not targets:
                self._wake.set()
                return
            self._stopped.clear()
            keys = {key for _, key in self._targets}
            self._backoff = {k: v for k, v in self._backoff.items() if k in keys}
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hermes-otel-resend", daemon=True)
                self._thread.start()
        self._wake.set()

    def wake(self, key: str | None = None) -> None:
        """Look again now (a live export to `key` succeeded: its endpoint answers)."""
        if key is not None and key in self._backoff:
            self._backoff.pop(key, None)
            self._wake.set()

    def stop(self, until: float | None = None) -> None:
        """Stop sending; wait for a send in flight until monotonic time `until` (its batch stays spooled if cut)."""
        with self._lock:
            self._spool, self._targets = None, {}
            self._stopped.set()
            self._backoff.clear()
        self._wake.set()
        if until is not None:
            self._idle.wait(max(until - time.monotonic(), 0))

    def _run(self) -> None:
        while True:
            try:
                self._loop()
            except Exception as exc:  # noqa: BLE001 - the sender must survive anything
                _log.logger.debug("hermes-otel: spool sender: %r", exc)
            finally:
                self._exporters.close()
            with self._lock:  # serve() after a stop() either finds this thread alive or none at all
                if self._stopped.is_set():
                    self._thread = None
                    return

    def _loop(self) -> None:
        queue: deque[Entry] = deque()
        caps_at = 0.0
        while not self._stopped.is_set():
            spool, targets = self._spool, self._targets
            if spool is None or not targets:
                self._wake.wait(IDLE_RESCAN_S)
                self._wake.clear()
                continue
            now = time.monotonic()
            if now >= caps_at:
                _quietly(spool.enforce_caps)
                caps_at = now + CAPS_EVERY_S
            entry = self._next(queue, spool, targets)
            if entry is None:
                waits = [at - now for at, _ in self._backoff.values() if at > now]
                self._wake.wait(min([IDLE_RESCAN_S, *waits]) if waits else IDLE_RESCAN_S)
                self._wake.clear()
                continue
            started = time.monotonic()
            self._idle.clear()
            try:
                outcome = send_entry(spool, entry, targets[entry.signal, entry.key], self._exporters)
            except Exception as exc:  # noqa: BLE001 - the sender must survive anything
                outcome = Outcome("retry", detail=f"{type(exc).__name__}: {exc}")
            finally:
                self._idle.set()
            busy = time.monotonic() - started
            if outcome.kind == "retry":
                self._back_off(entry.key, outcome.retry_after_s)
                queue = deque(e for e in queue if e.key != entry.key)
                continue
            if outcome.kind == "sent":
                self._backoff.pop(entry.key, None)
                health.success(targets[entry.signal, entry.key].endpoint)  # live exports go to the network again
            elif outcome.kind == "stray":  # not a batch we can open: said once, never tried again by this process
                self._strays.add(entry.path)
                _log.once(f"spool-stray:{entry.path}", "hermes-otel: spool: %s",
                          Stray(entry.path, outcome.detail).text(), per_process=True)
                continue
            self._stopped.wait(max(MIN_GAP_S, busy * (1 / BUSY_SHARE - 1)))

    def _next(self, queue: deque[Entry], spool: Spool, targets: Targets) -> Entry | None:
        """The oldest batch this process can send now (re-listing the spool when the last listing is used up)."""
        now = time.monotonic()
        for attempt in range(2):
            while queue:
                entry = queue.popleft()
                if self._sendable(entry, targets, now):
                    return entry
            if attempt == 0:
                entries, strays = _quietly(spool.scan) or ((), ())
                for stray in strays:  # nobody else would say it: a background sender has no terminal
                    _log.once(f"spool-stray:{stray.path}", "hermes-otel: spool: %s", stray.text(), per_process=True)
                queue.extend(e for e in entries if self._sendable(e, targets, now))
        return None

    def _sendable(self, entry: Entry, targets: Targets, now: float) -> bool:
        if (entry.signal, entry.key) not in targets or entry.path in self._strays:
            return False
        retry_at = self._backoff.get(entry.key)
        return retry_at is None or retry_at[0] <= now

    def _back_off(self, key: str, retry_after_s: float | None) -> None:
        last = self._backoff.get(key, (0.0, 0.0))[1]
        delay = min(max(last * 2, BACKOFF_S[0]), BACKOFF_S[1])
        wait = retry_after_s if retry_after_s is not None else delay * _JITTER.uniform(0.8, 1.2)
        self._backoff[key] = (time.monotonic() + wait, delay)


def _quietly(work: Callable[[], Any]) -> Any:
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - a spool we cannot read now is retried later
        _log.logger.debug("hermes-otel: spool: %r", exc)
        return None


resender = Resender()


# -- everything now (`hermes-otel spool send`) ------------------------------------------------------------------


@dataclass
class SendReport:
    sent: int = 0
    items: int = 0
    rejected: int = 0
    unreadable: int = 0
    failed: int = 0  # kept: the endpoint did not take them now
    busy: int = 0  # another process is sending them
    no_target: int = 0  # for an endpoint that is not configured now
    bad_lines: int = 0  # lines of sent batches that could not be read or converted: skipped
    strays: list[Stray] = field(default_factory=list)  # what is not a batch: skipped, never read
    problems: dict[str, str] = field(default_factory=dict)  # endpoint -> why it did not take a batch


def send_all(spool: Spool, targets: Targets, progress: Callable[[SendReport, int], None] | None = None) -> SendReport:
    """Send every spooled batch for a configured endpoint now, oldest first; an endpoint that fails is skipped
    for the rest of the run."""
    entries, strays = spool.scan()
    report = SendReport(strays=strays)
    failing: set[str] = set()
    exporters = Exporters()
    try:
        for entry in entries:
            target = targets.get((entry.signal, entry.key))
            if target is None:
                report.no_target += 1
            elif entry.key in failing:
                report.failed += 1
            else:
                outcome = send_entry(spool, entry, target, exporters, paced=False)
                if outcome.kind == "sent":
                    report.sent += 1
                    report.items += outcome.items
                    report.bad_lines += outcome.bad_lines
                elif outcome.kind == "stray":
                    report.strays.append(Stray(entry.path, outcome.detail))
                elif outcome.kind == "retry":
                    report.failed += 1
                    failing.add(entry.key)
                    report.problems[target.endpoint] = outcome.detail
                else:
                    setattr(report, outcome.kind, getattr(report, outcome.kind) + 1)
            if progress is not None:
                progress(report, len(entries))
    finally:
        exporters.close()
    return report
