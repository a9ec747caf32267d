"""NeMo Relay's `observability` component (see docs/relay.md): its schema, as data, and what we honour.

We honour its ATOF sinks (`file`, `stream` over `http_post` / `ndjson`), its OpenTelemetry
endpoints (`full`, `gen_ai`, `openinference`) and its log and metric endpoint lists; the
component is also kept verbatim for the hand-off to Relay's own runtime (`relay_handoff`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .headers import resolve
from .problems import Problem, check, describe, unknown_key
from .schema import MAX_ITEMS, MAX_MILLIS, Field
from .targets import OTLPTarget, signal_url, url_problem

Report = Callable[[str, str, str, str], None]  # (key, expected, found, policy rule)

_HEADERS = (
    Field("headers", dict, {}, "Literal header values.", secret=True),
    Field("header_env", dict, {}, "Header name -> environment variable holding its value."),
    Field("header_file", dict, {}, "Header name -> file holding its value (a regular file of at most 64 KiB; "
                                   "one trailing newline is dropped)."),
)
SINK_FIELDS: dict[str, tuple[Field, ...]] = {
    "file": (
        Field("type", str, "file", "`file`: events appended (or overwritten) as JSON lines."),
        Field("output_directory", str, None, "Directory of the file (required)."),
        Field("filename", str, "hermes-otel-atof.jsonl", "File name."),
        Field("mode", str, "append", "Write mode.", choices=("append", "overwrite")),
        Field("name", str, "file", "Name of the sink in messages."),
    ),
    "stream": (
        Field("type", str, "stream", "`stream`: events POSTed in batches."),
        Field("url", str, None, "http(s) URL of the receiver (required)."),
        Field("transport", str, "http_post", "A JSON array per batch, or newline-delimited JSON.",
              choices=("http_post", "ndjson")),
        *_HEADERS,
        Field("timeout_millis", int, 3000, "Per-request timeout.", minimum=1, maximum=MAX_MILLIS),
        Field("field_name_policy", str, "preserve", "`replace_dots` renames `otel.status_code` to "
                                                   "`otel_status_code` in every key.",
              choices=("preserve", "replace_dots")),
        Field("name", str, "stream", "Name of the sink in messages."),
    ),
}
SINK_REQUIRED = {"file": "output_directory", "stream": "url"}
ENDPOINT_FIELDS: tuple[Field, ...] = (
    Field("type", str, "full", "Span shape.", choices=("full", "gen_ai", "openinference")),
    Field("endpoint", str, None, "OTLP endpoint (required); `/v1/traces` is appended for http_binary."),
    Field("transport", str, "http_binary", "OTLP transport.", choices=("http_binary", "grpc")),
    Field("service_name", str, None, "`service.name` for this endpoint."),
    Field("service_namespace", str, None, "`service.namespace` for this endpoint."),
    Field("service_version", str, None, "`service.version` for this endpoint."),
    Field("timeout_millis", int, 3000, "Per-export timeout.", minimum=1, maximum=MAX_MILLIS),
    *_HEADERS,
    Field("resource_attributes", dict, {}, "Extra resource attributes for this endpoint."),
    Field("max_queue_size", int, 2048, "Span queue bound.", minimum=1, maximum=MAX_ITEMS),
    Field("max_export_batch_size", int, 512, "Spans per export.", minimum=1, maximum=MAX_ITEMS),
    Field("scheduled_delay_millis", int, 1000, "Delay between exports.", minimum=1, maximum=MAX_MILLIS),
)
_SIGNAL_FIELDS = (
    Field("enabled", bool, True, "Export this signal."),
    Field("endpoints", list, [], "OTLP/HTTP endpoints (`/v1/<signal>` is appended)."),
    Field("minimum_severity", str, "info", "Accepted for compatibility; hermes-otel exports every record."),
)
LOGS_FIELDS = _SIGNAL_FIELDS
METRICS_FIELDS = (
    *_SIGNAL_FIELDS,
    Field("export_interval_millis", int, 60000, "Metric export interval.", minimum=100, maximum=MAX_MILLIS),
    Field("temporality", str, "cumulative", "hermes-otel exports cumulative sums and histograms.",
          choices=("cumulative",)),
)
# Sub-tables are validated on their own; these are the keys of each level.
CONFIG_KEYS = ("version", "enable_full_payloads", "atof", "opentelemetry")
OTEL_KEYS = ("enabled", "endpoints", "logs", "metrics")
ATOF_KEYS = ("enabled", "sinks")
COMPONENT_KEYS = ("kind", "enabled", "config")

# For `hermes-otel config keys`: every table we read, with its path.
TABLES: tuple[tuple[str, tuple[Field, ...]], ...] = (
    ("[[components.config.opentelemetry.endpoints]]", ENDPOINT_FIELDS),
    ("[components.config.opentelemetry.logs]", LOGS_FIELDS),
    ("[components.config.opentelemetry.metrics]", METRICS_FIELDS),
    ("[[components.config.atof.sinks]] type = \"file\"", SINK_FIELDS["file"]),
    ("[[components.config.atof.sinks]] type = \"stream\"", SINK_FIELDS["stream"]),
)


@dataclass(frozen=True)
class FileSinkConfig:
    output_directory: str
    filename: str = "hermes-otel-atof.jsonl"
    mode: str = "append"
    name: str = "file"


@dataclass(frozen=True)
class StreamSinkConfig:
    url: str
    transport: str = "http_post"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    header_env: Mapping[str, str] = field(default_factory=dict)
    header_file: Mapping[str, str] = field(default_factory=dict)
    timeout_millis: int = 3000
    field_name_policy: str = "preserve"
    name: str = "stream"
    # Set when read from a plugins.toml. Not compared: like the variables and files it comes from, a changed
    # value does not make a new pipeline (a reload re-reads them).
    resolved: Mapping[str, str] | None = field(default=None, repr=False, compare=False)

    def resolved_headers(self) -> dict[str, str]:
        """Literal headers, then values from environment variables and files (never logged).

        Resolved when the configuration was read (its problems were reported then); a config built
        in code resolves here and reports each problem once."""
        if self.resolved is not None:
            return dict(self.resolved)
        from .._internal import log as _log

        headers, problems = resolve(self.headers, self.header_env, self.header_file, os.environ,
                                    source=f"ATOF sink {self.name!r}", where="")
        for problem in problems:
            _log.once(f"atof-headers:{problem}", "hermes-otel: %s", problem, per_process=True)
        return headers


@dataclass(frozen=True)
class RelayEndpoint:
    """One `[[components.config.opentelemetry.endpoints]]` entry of NeMo Relay's observability component."""

    type: str  # full | gen_ai | openinference (see exporters/shapes.py)
    target: OTLPTarget
    resource: Mapping[str, str] = field(default_factory=dict)
    max_queue_size: int = 2048
    max_export_batch_size: int = 512
    scheduled_delay_millis: int = 1000


def check_table(table: dict, fields: tuple[Field, ...], path: str, src: str, problems: list[Problem],
                report: Report) -> dict[str, str]:
    """Every key known and every value of its type and range; returns the rejected keys (key -> "type"|"value")."""
    specs = {f.key: f for f in fields}
    rejected: dict[str, str] = {}
    for key, value in table.items():
        spec = specs.get(key)
        if spec is None:
            report(f"{path}.{key}", "one of " + ", ".join(specs), unknown_key(key, specs), "unknown_field")
            continue
        error = check(spec, value)
        if error is not None:
            expected, found, rule = error
            if rule == "type":
                problems.append(Problem(src, f"{path}.{key}", expected, found))
            else:
                report(f"{path}.{key}", expected, found, "unsupported_value")
            rejected[key] = rule
    return rejected


def _table(value: Any, path: str, src: str, problems: list[Problem]) -> dict | None:
    if isinstance(value, dict):
        return value
    problems.append(Problem(src, path, "a table", describe(value)))
    return None


def _enabled(table: dict, path: str, src: str, problems: list[Problem]) -> bool:
    """The table's `enabled` (default true); a non-boolean is a problem and reads as disabled."""
    value = table.get("enabled", True)
    if isinstance(value, bool):
        return value
    problems.append(Problem(src, f"{path}.enabled", "a boolean", describe(value)))
    return False


def validate(comp: dict, where: str, src: str, problems: list[Problem], report: Report,
             env: Mapping[str, str]) -> dict[str, Any]:
    """The observability component -> flat values (`relay.*`, `atof.*`)."""
    if not _enabled(comp, where, src, problems):
        return {}
    for key in comp:
        if key not in COMPONENT_KEYS:
            report(f"{where}.{key}", "kind, enabled or config", "an unknown key", "unknown_field")
    config = _table(comp.get("config", {}), f"{where}.config", src, problems)
    if config is None:
        return {}
    base = f"{where}.config"
    version = config.get("version", 4)
    if not isinstance(version, int) or isinstance(version, bool):
        problems.append(Problem(src, f"{base}.version", "an integer", describe(version)))
    elif version != 4:
        report(f"{base}.version", "4 (the config version NeMo Relay 0.10 reads)", repr(version), "unsupported_value")
    for key in config:
        if key not in CONFIG_KEYS:
            report(f"{base}.{key}", f"a key hermes-otel honours here ({', '.join(CONFIG_KEYS)})",
                   "a key it does not honour", "unknown_field")
    values: dict[str, Any] = {"relay.component": {"kind": "observability", "enabled": True, "config": config}}
    full = config.get("enable_full_payloads", False)
    if isinstance(full, bool):
        values["atof.full_payloads"] = full
    else:
        problems.append(Problem(src, f"{base}.enable_full_payloads", "a boolean", describe(full)))
    if "opentelemetry" in config:
        otel = _table(config["opentelemetry"], f"{base}.opentelemetry", src, problems)
        if otel is not None:
            values.update(_validate_otel(otel, f"{base}.opentelemetry", src, problems, report, env))
    atof = _table(config.get("atof", {}), f"{base}.atof", src, problems)
    values["atof.sinks"] = _validate_atof(atof, f"{base}.atof", src, problems, report, env) if atof is not None else ()
    return values


def _headers(entry: dict, path: str, src: str, problems: list[Problem], env: Mapping[str, str]) -> dict[str, str]:
    headers, found = resolve(entry.get("headers", {}), entry.get("header_env", {}), entry.get("header_file", {}),
                             env, source=src, where=path)
    problems.extend(found)
    return headers


def _url(value: str, path: str, report: Report) -> bool:
    from ..redaction.masking import mask_url

    problem = url_problem(value)
    if problem:
        report(path, problem, describe(mask_url(value)), "unsupported_value")
    return problem is None


def _validate_atof(atof: dict, base: str, src: str, problems: list[Problem], report: Report,
                   env: Mapping[str, str]) -> tuple:
    if not _enabled(atof, base, src, problems):
        return ()
    for key in atof:
        if key not in ATOF_KEYS:
            report(f"{base}.{key}", "enabled or sinks", "an unknown key", "unknown_field")
    sinks = atof.get("sinks", [])
    if not isinstance(sinks, list):
        problems.append(Problem(src, f"{base}.sinks", "an array of tables ([[...sinks]])", describe(sinks)))
        return ()
    parsed: list[FileSinkConfig | StreamSinkConfig] = []
    for i, sink in enumerate(sinks):
        path = f"{base}.sinks[{i}]"
        kind = sink.get("type") if isinstance(sink, dict) else None
        if not isinstance(kind, str) or kind not in SINK_FIELDS:
            found = describe(sink.get("type")) if isinstance(sink, dict) else describe(sink)
            problems.append(Problem(src, f"{path}.type", "file | stream", found))
            continue
        ok = not check_table(sink, SINK_FIELDS[kind], path, src, problems, report)
        required = SINK_REQUIRED[kind]
        if required not in sink:
            problems.append(Problem(src, f"{path}.{required}", "a string", "nothing"))
            ok = False
        if ok and kind == "stream":
            ok = _url(sink["url"], f"{path}.url", report)
        if not ok:
            continue
        known = {k: v for k, v in sink.items() if k != "type" and k in {f.key for f in SINK_FIELDS[kind]}}
        if kind == "file":
            parsed.append(FileSinkConfig(**known))
        else:
            parsed.append(StreamSinkConfig(**known, resolved=_headers(sink, path, src, problems, env)))
    return tuple(parsed)


_TRANSPORTS = {"http_binary": "http/protobuf", "grpc": "grpc"}


def _target(entry: dict, signal: str, headers: Mapping[str, str]) -> OTLPTarget:
    protocol = _TRANSPORTS[entry.get("transport", "http_binary")]
    endpoint = entry["endpoint"]
    if protocol == "http/protobuf":
        endpoint = signal_url(endpoint, signal, unless_present=True)
    return OTLPTarget(endpoint, protocol, headers, entry.get("timeout_millis", 3000) / 1000.0, "none")


def _validate_otel(otel: dict, base: str, src: str, problems: list[Problem], report: Report,
                   env: Mapping[str, str]) -> dict[str, Any]:
    if not _enabled(otel, base, src, problems):
        return {}
    for key in otel:
        if key not in OTEL_KEYS:
            report(f"{base}.{key}", ", ".join(OTEL_KEYS), "a key hermes-otel does not honour", "unknown_field")
    values: dict[str, Any] = {}
    entries = otel.get("endpoints", [])
    if not isinstance(entries, list):
        problems.append(Problem(src, f"{base}.endpoints", "an array of tables ([[...endpoints]])", describe(entries)))
        entries = []
    spans = []
    for i, entry in enumerate(entries):
        path = f"{base}.endpoints[{i}]"
        if _table(entry, path, src, problems) is None:
            continue
        ok = not check_table(entry, ENDPOINT_FIELDS, path, src, problems, report)
        if "endpoint" not in entry:
            problems.append(Problem(src, f"{path}.endpoint", "a string", "nothing"))
            ok = False
        if not ok or not _url(entry["endpoint"], f"{path}.endpoint", report):
            continue
        resource = dict(entry.get("resource_attributes", {}))
        for key, attr in (("service_name", "service.name"), ("service_namespace", "service.namespace"),
                          ("service_version", "service.version")):
            if key in entry:
                resource[attr] = entry[key]
        spans.append(RelayEndpoint(
            entry.get("type", "full"), _target(entry, "traces", _headers(entry, path, src, problems, env)), resource,
            entry.get("max_queue_size", 2048), entry.get("max_export_batch_size", 512),
            entry.get("scheduled_delay_millis", 1000),
        ))
    values["relay.spans"] = tuple(spans)
    for signal, fields in (("logs", LOGS_FIELDS), ("metrics", METRICS_FIELDS)):
        if signal not in otel:
            continue
        path = f"{base}.{signal}"
        table = _table(otel[signal], path, src, problems)
        if table is None:
            continue
        rejected = check_table(table, fields, path, src, problems, report)
        if "type" in rejected.values():
            continue
        table = {k: v for k, v in table.items() if k not in rejected}  # a bad value: that key is dropped
        if not table.get("enabled", True):
            continue
        urls = [u for n, u in enumerate(table.get("endpoints", [])) if _url(u, f"{path}.endpoints[{n}]", report)]
        values[f"relay.{signal}"] = tuple(_target({"endpoint": u}, signal, {}) for u in urls)
        if signal == "metrics":
            values["relay.metrics_interval"] = table.get("export_interval_millis", 60000)
    return values
