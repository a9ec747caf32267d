"""The schema of our `plugins.toml` component, as data.

One table of fields drives three things: validation of the TOML document,
the defaults of :class:`hermes_otel.config.Settings`, and the generated
configuration reference in docs/ (so the docs cannot drift from the code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COMPONENT_KIND = "hermes_otel"

# Component kinds NeMo Relay defines. We recognise them so that a document
# written for Relay is not reported as "unknown", but we only honour our own
# kind here; the Relay `observability` component is read by the ATOF layer.
RELAY_COMPONENT_KINDS = frozenset(
    {"adaptive", "nemo_guardrails", "observability", "pii_redaction", "pricing", "resource_metrics"}
)

POLICY_VALUES = ("ignore", "warn", "error")
CAPTURE_MODES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
PROTOCOLS = ("http/protobuf", "grpc")
COMPRESSIONS = ("none", "gzip")
METRICS_EXPORTERS = ("otlp", "prometheus", "none")
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


@dataclass(frozen=True)
class Field:
    """One key of `[components.config]` (dotted for sub-tables)."""

    key: str
    type: type | tuple[type, ...]
    default: Any
    doc: str
    env: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    secret: bool = False


FIELDS: tuple[Field, ...] = (
    Field("service_name", str, "hermes-agent", "`service.name` of the resource.", env="OTEL_SERVICE_NAME"),
    Field(
        "resource_attributes",
        dict,
        {},
        "Extra resource attributes (string values).",
        env="OTEL_RESOURCE_ATTRIBUTES",
    ),
    Field(
        "capture_content",
        str,
        "NO_CONTENT",
        "Message/tool content capture mode. Credentials are redacted in every mode.",
        env="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        choices=CAPTURE_MODES,
    ),
    Field("console", bool, False, "Also print spans to stderr (debugging only)."),
    Field(
        "relay_handoff",
        bool,
        False,
        "When the `nemo-relay` package is installed, activate NeMo Relay's runtime with the document's "
        "`observability` component and replay our spans into it, so Relay's own ATOF, ATIF and OTLP exporters "
        "run; our ATOF sinks and Relay endpoints then stand down (Relay owns that component).",
    ),
    Field(
        "observer_exclude_hooks",
        list,
        ["pre_api_request"],
        "Observer hooks NOT to subscribe to (their log records are then missing). By default "
        "`pre_api_request`: subscribing to it makes Hermes 0.19.0 copy and sanitise the whole request for "
        "observers on every provider call, a cost that grows with the conversation (measured: ~0.4 ms per "
        "call at 10 history messages, ~3 ms at 1000). The `chat` span carries the same ids and request "
        "parameters; set `[]` to log every hook.",
    ),
    Field(
        "middleware_log_dedupe",
        bool,
        True,
        "Apply the seed's rule to Hermes's middleware-failure warnings: first occurrence at WARNING "
        "naming the fields middleware passes, identical repeats at DEBUG, reset on plugin reload.",
    ),
    Field(
        "background_build",
        bool,
        True,
        "Build spans, log records and metric points on a background thread from values captured on the "
        "agent's thread (same ids, timestamps and attributes), so an agent call pays microseconds. "
        "`false` builds them inline through the SDK.",
    ),
    Field(
        "flush_timeout_millis",
        int,
        1500,
        "Upper bound for the flush at session finalize and at process exit (with interpreter teardown, exit "
        "stays within 2 s even when a collector hangs).",
        minimum=0,
    ),
    Field(
        "otlp.endpoint",
        str,
        "",
        "OTLP base endpoint (e.g. `http://127.0.0.1:4318`); empty means the embedded file default.",
        env="OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    Field(
        "otlp.protocol",
        str,
        "http/protobuf",
        "OTLP transport.",
        env="OTEL_EXPORTER_OTLP_PROTOCOL",
        choices=PROTOCOLS,
    ),
    Field(
        "otlp.headers", dict, {}, "Headers sent with every export.", env="OTEL_EXPORTER_OTLP_HEADERS", secret=True
    ),
    Field(
        "otlp.timeout_millis", int, 10000, "Per-export timeout.", env="OTEL_EXPORTER_OTLP_TIMEOUT", minimum=1
    ),
    Field(
        "otlp.compression",
        str,
        "none",
        "Payload compression.",
        env="OTEL_EXPORTER_OTLP_COMPRESSION",
        choices=COMPRESSIONS,
    ),
    Field(
        "file.enabled",
        bool,
        None,
        "Write OTLP-JSON-lines files; default: on exactly when no OTLP endpoint is configured.",
    ),
    Field("file.directory", str, "", "Directory of the files; default `$HERMES_HOME/otel`."),
    Field("file.max_bytes", int, 20 * 1024 * 1024, "Size at which a file is rotated.", minimum=1024),
    Field("file.backups", int, 3, "Rotated files kept per signal.", minimum=0),
    Field("batch.max_queue_size", int, 2048, "Span queue bound.", env="OTEL_BSP_MAX_QUEUE_SIZE", minimum=1),
    Field(
        "batch.max_export_batch_size",
        int,
        512,
        "Spans per export.",
        env="OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        minimum=1,
    ),
    Field(
        "batch.scheduled_delay_millis",
        int,
        1000,
        "Delay between exports.",
        env="OTEL_BSP_SCHEDULE_DELAY",
        minimum=1,
    ),
    Field(
        "batch.export_timeout_millis",
        int,
        10000,
        "Timeout of one batch export.",
        env="OTEL_BSP_EXPORT_TIMEOUT",
        minimum=1,
    ),
    Field(
        "sampler.name",
        str,
        "parentbased_always_on",
        "Trace sampler.",
        env="OTEL_TRACES_SAMPLER",
        choices=SAMPLERS,
    ),
    Field(
        "sampler.arg", float, 1.0, "Sampler ratio for `*traceidratio`.", env="OTEL_TRACES_SAMPLER_ARG",
        minimum=0, maximum=1,
    ),
    Field(
        "metrics.export_interval_millis",
        int,
        60000,
        "Metric export interval.",
        env="OTEL_METRIC_EXPORT_INTERVAL",
        minimum=100,
    ),
    Field(
        "metrics.exporter",
        str,
        "otlp",
        "How metrics leave the process: `otlp` pushes them (OTLP, or the embedded file default); `prometheus` "
        "serves them for a Prometheus to scrape at `http://{prometheus.host}:{prometheus.port}/metrics` (needs "
        "the `prometheus` extra: `pip install 'hermes-otel[prometheus]'`; without it, reported once and `otlp` "
        "is used); `none` turns metrics off.",
        env="OTEL_METRICS_EXPORTER",
        choices=METRICS_EXPORTERS,
    ),
    Field(
        "prometheus.host",
        str,
        "localhost",
        "Address the Prometheus pull endpoint listens on (`metrics.exporter = \"prometheus\"`).",
        env="OTEL_EXPORTER_PROMETHEUS_HOST",
    ),
    Field(
        "prometheus.port",
        int,
        9464,
        "Port of the Prometheus pull endpoint.",
        env="OTEL_EXPORTER_PROMETHEUS_PORT",
        minimum=1,
        maximum=65535,
    ),
    Field("logs.enabled", bool, True, "Export the observer log stream."),
    Field("metrics.enabled", bool, True, "Export metrics."),
)

FIELDS_BY_KEY = {f.key: f for f in FIELDS}
SECTIONS = frozenset(k.split(".", 1)[0] for k in FIELDS_BY_KEY if "." in k)
