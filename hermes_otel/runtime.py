"""Process-wide state that must survive Hermes re-registering the plugin.

`discover_plugins(force=True)` clears Hermes's hooks and middleware and calls
`register()` again. This module (never re-executed: it is imported, not
loaded from a path) keeps one live :class:`Telemetry` and one
:class:`Tracker`: an identical configuration reuses them (no new processors
or threads); a changed one builds new providers and retires the old ones,
which keep exporting the spans still open on them and are shut down at exit.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
from dataclasses import dataclass

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from . import telemetry
from ._internal import log as _log
from ._internal.safety import safely
from .capture import logs as hermes_logs
from .capture.bridge import ObserverBridge
from .config import Settings
from .cost.pricing import CostLedger
from .exporters.health import health
from .redaction import content
from .tracking import Tracker
from .version import __version__

_MAX_RETIRED = 2


@dataclass
class _State:
    telemetry: telemetry.Telemetry | None = None
    tracker: Tracker | None = None
    bridge: ObserverBridge | None = None
    shared: tuple | None = None  # providers handed to us by the host application
    hermes_logs: tuple | None = None  # (OTel logger, emitter, tracker, content) for Hermes's own log lines


_state = _State()
_retired: list[telemetry.Telemetry] = []
_lock = threading.RLock()
_atexit_registered = False


def _spooling():
    """The delivery and re-send modules, or None: they are imported with the first OTLP endpoint (telemetry.py),
    so a files-only run never loads them, and without them there is no spooling exporter or sender to look after."""
    return sys.modules.get(f"{__package__}.exporters.spool")


def current_tracker() -> Tracker | None:
    """The live tracker, or None when telemetry is off (the wrappers then pass through)."""
    return _state.tracker


def current_bridge() -> ObserverBridge | None:
    return _state.bridge


def current_telemetry() -> telemetry.Telemetry | None:
    return _state.telemetry


def http_tracer_provider() -> TracerProvider | None:
    """The provider of HTTP client spans (capture/http_client.py): None while telemetry or the setting is off."""
    live = _state.telemetry
    if live is None or _state.tracker is None or not live.settings.http_client_spans:
        return None
    return live.tracer_provider


def hermes_log_sink() -> tuple | None:
    """Where Hermes's own log lines go (capture/logs.py): None while telemetry or the log stream is off."""
    return _state.hermes_logs if _state.tracker is not None else None


def use_providers(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    logger_provider: LoggerProvider,
) -> None:
    """Share the host application's providers instead of building our own.

    Call before Hermes loads plugins. We then neither add processors nor shut
    these providers down (the host owns them); plugins.toml exporter settings
    are ignored, content and sampling settings still apply to what we emit.
    """
    with _lock:
        _state.shared = (tracer_provider, meter_provider, logger_provider)
        _state.telemetry = None  # rebuilt by the next configure()


def configure(settings: Settings) -> Tracker | None:
    """Make `settings` live; idempotent for an unchanged configuration."""
    global _atexit_registered
    with _lock:
        if not settings.enabled:
            tracker, old = _state.tracker, _state.telemetry
            _state.telemetry, _state.tracker, _state.bridge = None, None, None
            _stop_resending()
            _end_and_export(tracker, old, "disabled")  # what is open ends and is exported now
            return None
        live = _state.telemetry
        if live is not None and live.settings == settings:
            return _state.tracker
        if _state.shared is not None:
            tp, mp, lp = _state.shared
            # The host's pipeline: everything inline (its processors see what an inline SDK call shows them).
            new = telemetry.Telemetry(settings, tp, mp, lp, owned=False)
            safely(telemetry.observe_drops, mp)
        else:
            new = telemetry.build(settings)  # imports the spool's modules when there is an OTLP endpoint
            spooling = _spooling()
            if spooling is not None:
                spooling.delivery.cancel_exit()  # configured again after a shutdown: not exiting after all
                safely(spooling.resender.serve, spooling.spool_for(settings), spooling.targets_of(settings))
        _retire(live)
        _state.telemetry = new
        _state.tracker = _replace_tracker(_state.tracker, new)
        _state.bridge = ObserverBridge(_state.tracker, new.logger, new.meter, settings.capture_content, new.emitter)
        _state.hermes_logs = (new.logger_provider.get_logger(hermes_logs.SCOPE, __version__), new.emitter,
                              _state.tracker, settings.capture_content != "NO_CONTENT") \
            if settings.logs_enabled else None
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
        return _state.tracker


def stop_tracing() -> None:
    """Our plugin is no longer loaded (a reload dropped it): end what is open, trace nothing more."""
    with _lock:
        tracker, old = _state.tracker, _state.telemetry
        _state.telemetry, _state.tracker, _state.bridge = None, None, None
        _stop_resending()
    _end_and_export(tracker, old, "plugin_unloaded")


def _stop_resending(exit_at: float | None = None) -> None:
    spooling = _spooling()
    if spooling is not None:
        safely(spooling.resender.stop, exit_at)


def _end_and_export(tracker: Tracker | None, old: telemetry.Telemetry | None, reason: str) -> None:
    """Telemetry goes off while turns may be open: end them and export what is open now, in the background
    (bounded); the providers are shut down at exit."""
    if tracker is not None:
        safely(tracker.end_all, reason)
    if old is None:
        return
    with _lock:
        _retire(old)
    threading.Thread(target=safely, args=(old.force_flush, old.settings.flush_timeout_s),
                     name="hermes-otel-retired-flush", daemon=True).start()


def _replace_tracker(old: Tracker | None, new: telemetry.Telemetry) -> Tracker:
    capture = content.on_spans(new.settings.capture_content) or new.settings.atof_full_payloads
    details = new.logger if content.in_events(new.settings.capture_content) else None
    tracker = Tracker(new.tracer, new.meter, capture_on_spans=capture, details=details, emitter=new.emitter,
                      costs=CostLedger(new.meter), content_cap=telemetry.content_budget(new.settings) // 2,
                      v1_41=new.settings.semconv_v1_41)
    if old is not None:
        # Open turns stay on the old tracker's spans; hand them over so the
        # new tracker parents their remaining calls and ends them.
        tracker.adopt(old)
    return tracker


def _retire(old: telemetry.Telemetry | None) -> None:
    if old is None:
        return
    _retired.append(old)
    while len(_retired) > _MAX_RETIRED:
        oldest = _retired.pop(0)
        oldest.shutdown(oldest.settings.flush_timeout_s)


def flush(timeout_s: float | None = None) -> bool:
    """Bounded flush of the live providers (session finalize)."""
    live = _state.telemetry
    if live is None:
        return True
    return live.force_flush(live.settings.flush_timeout_s if timeout_s is None else timeout_s)


def shutdown() -> None:
    """End what is open and shut everything down (process exit).

    OTLP exporters wait at most 100 ms for the network, all together, then spool what is unacknowledged
    (exporters/delivery.py); the local files get the flush budget."""
    started = time.monotonic()  # the budget covers ending open spans too
    spooling = _spooling()
    exit_at = spooling.delivery.begin_exit() if spooling is not None else None
    _stop_resending()  # no new re-sends; one in flight may finish by exit_at (below)
    with _lock:
        live, tracker = _state.telemetry, _state.tracker
        retired = list(_retired)
        _retired.clear()
        _state.telemetry, _state.tracker, _state.bridge = None, None, None
    if tracker is not None:
        tracker.end_all("shutdown")
    budget = live.settings.flush_timeout_s if live is not None else 1.5
    deadline = started + budget
    for item in [live, *retired]:  # one shared budget, not one per provider set
        if (
            item is not None
            and not item.shutdown(max(deadline - time.monotonic(), 0.001))
            and not health.any_failing(item.endpoints)
        ):
            _log.once(
                "shutdown-timeout",
                "hermes-otel: export did not finish within %.1fs at exit; unsent telemetry was dropped",
                budget,
            )
    _stop_resending(exit_at)  # a re-send in flight may finish within the same 100 ms
