"""The schema of our `plugins.toml` component, as data.

One table of fields drives validation of the document, the values and
defaults of :class:`hermes_otel.config.Settings` (each field names the
attribute it fills), `hermes-otel config keys` and the generated
configuration reference (so neither the code nor the docs can drift).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

COMPONENT_KIND = "hermes_otel"

# Component kinds NeMo Relay defines. We recognise them so that a document
# written for Relay is not reported as "unknown", but we only honour our own
# kind and `observability` (config/relay.py).
RELAY_COMPONENT_KINDS = frozenset(
    {"adaptive", "nemo_guardrails", "observability", "pii_redaction", "pricing", "resource_metrics"}
)

POLICY_VALUES = ("ignore", "warn", "error")
CAPTURE_MODES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
PROTOCOLS = ("http/protobuf", "grpc")
COMPRESSIONS = ("none", "gzip")
EXPORTERS = ("otlp", "console", "none")  # OTEL_TRACES_EXPORTER, OTEL_LOGS_EXPORTER
METRICS_EXPORTERS = ("otlp", "prometheus", "console", "none")  # OTEL_METRICS_EXPORTER
HERMES_LOG_LEVELS = ("off", "debug", "info", "warning", "error", "critical")
SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)

# Upper bounds keep absurd values (10^13 ms, 10^20 items) from killing worker threads or the whole plugin.
MAX_MILLIS = 86_400_000  # one day
MAX_ITEMS = 1_000_000

# Where to look keys up, in messages (pip users have no docs/ directory).
KEYS_HINT = "see `hermes-otel config keys`"


@dataclass(frozen=True)
class Field:
    """One key of a configuration table (dotted for sub-tables of `[components.config]`).

    `type` is str, int, float, bool, dict (a table of strings) or list (an array of strings).
    `attr` names the :class:`Settings` attribute the value fills, converted by `convert`.
    """

    key: str
    type: type
    default: Any
    doc: str
    env: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    secret: bool = False
    several: bool = False  # a comma-separated list of `choices` (the OTEL_*_EXPORTER form); `none` only alone
    attr: str | None = None
    convert: Callable[[Any], Any] | None = None

    def setting(self, value: Any) -> Any:
        """The Settings attribute value for a (validated) raw value."""
        return self.convert(value) if self.convert else value


def exporter_list(value: str) -> tuple[str, ...]:
    """`otlp, console` -> ("otlp", "console"): the value of an OTEL_*_EXPORTER variable, in order, once each."""
    return tuple(dict.fromkeys(item.strip().lower() for item in value.split(",") if item.strip()))


# OTEL_SEMCONV_STABILITY_OPT_IN's value that also asks for the GenAI conventions' v1.41.0 names (the contrib's
# `<domain>/dup` form of a migration); `gen_ai_latest_experimental`, the contrib's value for the latest, is our default.
GEN_AI_DUP = "gen_ai/dup"


def _v1_41_too(value: str) -> bool:
    return GEN_AI_DUP in exporter_list(value)


def _millis_to_s(value: int) -> float:
    return value / 1000.0


def _mib_to_bytes(value: int) -> int:
    return value * 1024 * 1024


def _days_to_s(value: float) -> float:
    return float(value) * 86400.0


# The backend presets' names (config/presets.py holds their tables, loaded only when one is chosen; a test holds the
# two to the same names).
PRESET_NAMES = ("phoenix", "arize", "langfuse", "langsmith", "mlflow", "weave", "opik", "honeycomb", "datadog",
                "grafana-cloud", "signoz", "uptrace", "jaeger", "tempo", "collector")

FIELDS: tuple[Field, ...] = (
    Field("backend", str, "",
          "A backend preset: the endpoint, protocol, auth headers (from the vendor's own environment variables), "
          "resource attributes and attribute flavour of that backend (see the backends page). Explicit `otlp.*` "
          "settings and `OTEL_EXPORTER_OTLP_*` variables win, key by key.", env="HERMES_OTEL_BACKEND",
          choices=PRESET_NAMES, attr="backend"),
    Field("service_name", str, "hermes-agent", "`service.name` of the resource.", env="OTEL_SERVICE_NAME",
          attr="service_name"),
    Field("resource_attributes", dict, {}, "Extra resource attributes (string values).",
          env="OTEL_RESOURCE_ATTRIBUTES", attr="resource_attributes", convert=dict),
    Field("capture_content", str, "NO_CONTENT",
          "Message/tool content capture mode. Credentials are redacted in every mode.",
          env="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", choices=CAPTURE_MODES, attr="capture_content"),
    Field("capture_max_chars", int, 524288,
          "Under span capture, the largest captured-content attribute (a model call's messages, system instructions "
          "or tool definitions; a tool's arguments or result), in characters: what does not fit is shortened string "
          "by string, then the oldest messages are left out, always valid JSON. `0`: no limit. "
          "`OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT` / `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`, when set, cap it.",
          minimum=0, maximum=2**31, attr="capture_max_chars"),
    Field("semconv_stability_opt_in", str, "",
          "Which GenAI conventions' names are emitted, as the OpenTelemetry contrib instrumentations read this "
          "comma-separated list (its other domains' values are theirs). Unset or `gen_ai_latest_experimental`: the "
          "latest GenAI conventions (open-telemetry/semantic-conventions-genai): the default, because the "
          "dashboards shipped here read them and the conventions have replaced v1.41.0's model-call and token "
          "metrics (the contrib instrumentations default to older names only until their users opt in). "
          "`gen_ai/dup`: those and, beside them, the v1.41.0 names they replaced "
          "(`gen_ai.client.operation.duration` for model calls, `gen_ai.client.token.usage`, "
          "`gen_ai.client.operation.time_to_first_chunk` and `.time_per_output_chunk`, "
          "`gen_ai.usage.cache_creation.input_tokens`), for dashboards built on v1.41.0.",
          env="OTEL_SEMCONV_STABILITY_OPT_IN", attr="semconv_v1_41", convert=_v1_41_too),
    Field("console", bool, False, "Also print spans to stderr (debugging only); the same as adding `console` to "
          "`traces.exporter`.", attr="console"),
    Field("traces.exporter", str, "otlp",
          "Where spans go, as `OTEL_TRACES_EXPORTER` says it (comma-separated): `otlp` (the OTLP endpoint when one "
          "is set, and the local traces file), `console` (stderr), `none` (nowhere: no endpoint, no file; NeMo Relay "
          "endpoints and ATOF sinks, configured on their own, still get them). Another exporter name (`zipkin`, "
          "`jaeger`) is reported once and `otlp` is used.", env="OTEL_TRACES_EXPORTER", choices=EXPORTERS,
          several=True, attr="traces_exporters", convert=exporter_list),
    Field("logs.exporter", str, "otlp",
          "Where the observer's log records go, as `OTEL_LOGS_EXPORTER` says it: `otlp` (the endpoint, else the "
          "logs file), `console` (stderr), `none` (nowhere; the same as `logs.enabled = false`).",
          env="OTEL_LOGS_EXPORTER", choices=EXPORTERS, several=True, attr="logs_exporters", convert=exporter_list),
    Field(
        "relay_handoff",
        bool,
        False,
        "When the `nemo-relay` package is installed, activate NeMo Relay's runtime with the document's "
        "`observability` component and replay our spans into it, so Relay's own ATOF, ATIF and OTLP exporters "
        "run; our ATOF sinks and Relay endpoints then stand down (Relay owns that component).",
        attr="relay_handoff",
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
        attr="observer_exclude_hooks",
        convert=frozenset,
    ),
    Field(
        "middleware_log_dedupe",
        bool,
        False,
        "Opt in to the seed's rule on Hermes 0.17-0.19's middleware-failure warnings (Hermes's own log lines): "
        "first occurrence at WARNING naming the fields middleware passes, identical repeats at DEBUG, reset on "
        "plugin reload. Off by default: the plugin leaves Hermes's log as Hermes writes it.",
        attr="middleware_log_dedupe",
    ),
    Field(
        "background_build",
        bool,
        True,
        "Hand observer log records, metric measurements and span ends (each stamped at the call) to a background "
        "thread of ours, which passes them to the SDK unchanged (a record is complete when its hook fires). Spans "
        "always start inline, in the SDK. `false` makes all of it inline.",
        attr="background_build",
    ),
    Field(
        "flush_timeout_millis",
        int,
        1500,
        "Upper bound for the flush at session finalize and at process exit: the budget of the local exporters "
        "(files, console), whatever an endpoint does. OTLP exporters wait at most 100 ms at exit and spool the rest; "
        "with `spool = false` they wait up to this budget (not at all for an endpoint already failing).",
        minimum=0,
        maximum=MAX_MILLIS,
        attr="flush_timeout_s",
        convert=_millis_to_s,
    ),
    Field(
        "spool",
        bool,
        True,
        "Keep what the OTLP exporters cannot deliver (the endpoint down, hanging, slow or failing, or still "
        "unacknowledged at exit) in a spool under `$HERMES_HOME/otel/spool/<signal>/` (OTLP-JSON, one batch per "
        "file, 0600 in a 0700 directory), and re-send it in the background, oldest first, once the endpoint "
        "answers, from this or any later process on the same `$HERMES_HOME` (at-least-once: a batch is sent again "
        "only when its acknowledgement was lost). With the spool, process exit waits at most 100 ms for "
        "in-flight exports. `false`: undeliverable telemetry is dropped and counted, and exit waits up to "
        "`flush_timeout_millis` for a collector that is not known to be failing.",
        attr="spool_enabled",
    ),
    Field("spool_max_mb", int, 100, "Size cap of the spool, all signals together (MiB); beyond it the oldest "
          "batches are evicted and counted (`hermes.otel.spool.evicted`).", minimum=1, maximum=1024 * 1024,
          attr="spool_max_bytes", convert=_mib_to_bytes),
    Field("spool_max_age", float, 7, "Age cap of a spooled batch, in days (fractions allowed: 0.5 is 12 hours); "
          "older batches are evicted and counted.", minimum=0.0001, maximum=3650, attr="spool_max_age_s",
          convert=_days_to_s),
    Field(
        "otlp.endpoint",
        str,
        "",
        "OTLP base endpoint (e.g. `http://localhost:4318`); empty means the embedded file default.",
        env="OTEL_EXPORTER_OTLP_ENDPOINT",
    ),
    Field("otlp.protocol", str, "http/protobuf", "OTLP transport.", env="OTEL_EXPORTER_OTLP_PROTOCOL",
          choices=PROTOCOLS),
    Field("otlp.headers", dict, {}, "Headers sent with every export.", env="OTEL_EXPORTER_OTLP_HEADERS",
          secret=True),
    Field("otlp.timeout_millis", int, 10000, "Per-export timeout.", env="OTEL_EXPORTER_OTLP_TIMEOUT", minimum=1,
          maximum=MAX_MILLIS),
    Field("otlp.compression", str, "none", "Payload compression.", env="OTEL_EXPORTER_OTLP_COMPRESSION",
          choices=COMPRESSIONS),
    Field("file.enabled", bool, None,
          "Write OTLP-JSON-lines files; default: the traces file always (the local record `view`, `cost` and the "
          "dashboard's Traces tab read, bounded by rotation), the logs and metrics files when that signal has no "
          "OTLP endpoint. `false`: no files at all; `true`: every signal's file."),
    Field("file.directory", str, "",
          "Directory of the files; default `$HERMES_HOME/otel`. It must be ours: one owned by another user, or a "
          "symbolic link, is refused (no files are written, and that is said once)."),
    Field("file.max_bytes", int, 20 * 1024 * 1024, "Size at which a file is rotated.", minimum=1024,
          maximum=2**40, attr="file_max_bytes"),
    Field("file.backups", int, 3, "Rotated files kept per signal.", minimum=0, maximum=1000, attr="file_backups"),
    Field("batch.max_queue_size", int, 2048, "Span queue bound.", env="OTEL_BSP_MAX_QUEUE_SIZE", minimum=1,
          maximum=MAX_ITEMS, attr="bsp_max_queue_size"),
    Field("batch.max_export_batch_size", int, 512, "Spans per export (never more than the queue bound).",
          env="OTEL_BSP_MAX_EXPORT_BATCH_SIZE", minimum=1, maximum=MAX_ITEMS, attr="bsp_max_export_batch_size"),
    Field("batch.scheduled_delay_millis", int, 1000, "Delay between exports (1000, where the specification "
          "says 5000: a one-shot `hermes chat -q` should not wait 5 s for its spans).", env="OTEL_BSP_SCHEDULE_DELAY",
          minimum=1, maximum=MAX_MILLIS, attr="bsp_schedule_delay_ms"),
    Field("batch.export_timeout_millis", int, 10000, "Timeout of one batch export (10000, where the specification "
          "says 30000: an exit waits on it).", env="OTEL_BSP_EXPORT_TIMEOUT", minimum=1, maximum=MAX_MILLIS,
          attr="bsp_export_timeout_ms"),
    Field("logs.batch.max_queue_size", int, None, "Log record queue bound; default: the file's "
          "`batch.max_queue_size`, else 2048 (the specification's; never `OTEL_BSP_MAX_QUEUE_SIZE`).",
          env="OTEL_BLRP_MAX_QUEUE_SIZE", minimum=1, maximum=MAX_ITEMS, attr="blrp_max_queue_size"),
    Field("logs.batch.max_export_batch_size", int, None, "Log records per export (never more than their queue "
          "bound); default: the file's `batch.max_export_batch_size`, else 512.",
          env="OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", minimum=1, maximum=MAX_ITEMS, attr="blrp_max_export_batch_size"),
    Field("logs.batch.scheduled_delay_millis", int, None, "Delay between log exports; default: the file's "
          "`batch.scheduled_delay_millis`, else 1000.", env="OTEL_BLRP_SCHEDULE_DELAY", minimum=1, maximum=MAX_MILLIS,
          attr="blrp_schedule_delay_ms"),
    Field("logs.batch.export_timeout_millis", int, None, "Timeout of one log export; default: the file's "
          "`batch.export_timeout_millis`, else 30000.", env="OTEL_BLRP_EXPORT_TIMEOUT", minimum=1, maximum=MAX_MILLIS,
          attr="blrp_export_timeout_ms"),
    Field("sampler.name", str, "parentbased_always_on", "Trace sampler.", env="OTEL_TRACES_SAMPLER",
          choices=SAMPLERS, attr="sampler_name"),
    Field("sampler.arg", float, 1.0, "Sampler ratio for `*traceidratio`.", env="OTEL_TRACES_SAMPLER_ARG",
          minimum=0, maximum=1, attr="sampler_arg", convert=float),
    Field("metrics.export_interval_millis", int, 60000, "Metric export interval.", env="OTEL_METRIC_EXPORT_INTERVAL",
          minimum=100, maximum=MAX_MILLIS, attr="metric_export_interval_ms"),
    Field(
        "metrics.exporter",
        str,
        "otlp",
        "How metrics leave the process: `otlp` pushes them (OTLP, or the embedded file default); `prometheus` "
        "serves them for a Prometheus to scrape at `http://{prometheus.host}:{prometheus.port}/metrics` (needs "
        "the `prometheus` extra, `hermes-otel[prometheus]`; without it, reported once and `otlp` "
        "is used); `console` prints them to stderr; `none` turns metrics off. Several, comma-separated, as "
        "`OTEL_METRICS_EXPORTER` allows (`otlp,prometheus`).",
        env="OTEL_METRICS_EXPORTER",
        choices=METRICS_EXPORTERS,
        several=True,
        attr="metrics_exporters",
        convert=exporter_list,
    ),
    Field("prometheus.host", str, "localhost",
          "Address the Prometheus pull endpoint listens on (`metrics.exporter = \"prometheus\"`).",
          env="OTEL_EXPORTER_PROMETHEUS_HOST", attr="prometheus_host"),
    Field("prometheus.port", int, 9464, "Port of the Prometheus pull endpoint.", env="OTEL_EXPORTER_PROMETHEUS_PORT",
          minimum=1, maximum=65535, attr="prometheus_port"),
    Field("collector.health_check", str, "",
          "URL of your Collector's `health_check` extension (e.g. `http://otel-collector:13133/`): `hermes-otel "
          "doctor` asks it whether the Collector is ready. Empty: the doctor tries port 13133 on the OTLP endpoint's "
          "host and says what it found.", env="HERMES_OTEL_COLLECTOR_HEALTH_CHECK", attr="collector_health_check"),
    Field("http.client_spans", bool, True,
          "An HTTP client span (stable HTTP conventions) for each request Hermes's model client sends with httpx "
          "for a model call we trace, with W3C `traceparent` injected: an instrumented model server (LiteLLM "
          "proxy, vLLM, NIM) continues the trace. Any other request (a tool's downloads, MCP, Hermes's metadata "
          "probes, the host's own) gets neither. Stands down when the application instrumented httpx itself "
          "(never two spans for one request).",
          env="HERMES_OTEL_HTTP_CLIENT_SPANS", attr="http_client_spans"),
    Field("logs.enabled", bool, True, "Export the observer log stream.", attr="logs_enabled"),
    Field("logs.hermes_level", str, "warning",
          "Hermes's own log lines (its loggers: `agent.*`, `tools.*`, `hermes_cli.*`, `gateway.*`, ...) at this "
          "level and above become OTel log records carrying the trace and span ids of the span active where they "
          "were logged, redacted by Hermes's redactor and ours, without content unless capture is on (see the "
          "telemetry reference). `off` turns the bridge off. Hermes's own logging level still decides "
          "which lines exist (its `agent.log` is INFO).", env="HERMES_OTEL_HERMES_LOG_LEVEL",
          choices=HERMES_LOG_LEVELS, attr="hermes_log_level"),
    Field("metrics.enabled", bool, True, "Export metrics.", attr="metrics_enabled"),
)

FIELDS_BY_KEY = {f.key: f for f in FIELDS}
SECTIONS = frozenset(k.split(".", 1)[0] for k in FIELDS_BY_KEY if "." in k)
