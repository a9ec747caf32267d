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
        [],
        "Observer hooks NOT to subscribe to (their log records are then missing). Subscribing to "
        "`pre_api_request` makes Hermes 0.19.0 serialise every provider request for observers "
        "(measured: ~0.4 ms per call at 10 history messages, ~3 ms at 1000): exclude it where that matters.",
    ),
    Field(
        "middleware_log_dedupe",
        bool,
        True,
        "Apply the seed's rule to Hermes's middleware-failure warnings: first occurrence at WARNING "
        "naming the fields middleware passes, identical repeats at DEBUG, reset on plugin reload.",
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
    Field("logs.enabled", bool, True, "Export the observer log stream."),
    Field("metrics.enabled", bool, True, "Export metrics."),
)

FIELDS_BY_KEY = {f.key: f for f in FIELDS}
SECTIONS = frozenset(k.split(".", 1)[0] for k in FIELDS_BY_KEY if "." in k)
