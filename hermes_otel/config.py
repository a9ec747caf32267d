"""`plugins.toml` + `OTEL_*` environment -> one validated :class:`Settings`.

Precedence, lowest to highest (documented in docs/configuration.md):

1. built-in defaults (:mod:`hermes_otel.config_schema`);
2. the `hermes_otel` component of `plugins.toml`;
3. the standard `OTEL_*` environment variables (per-signal forms beat the
   general ones) — the environment is the per-deployment override;
4. `OTEL_SDK_DISABLED=true` always wins: telemetry is off.

A broken document never stops the agent: :func:`load_settings` returns the
problems it found (file, key path, expected, found) and settings built from
the environment and defaults alone; the plugin reports them in one message.
"""

from __future__ import annotations

import os
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config_schema import (
    COMPONENT_KIND,
    FIELDS,
    FIELDS_BY_KEY,
    POLICY_VALUES,
    RELAY_COMPONENT_KINDS,
    SECTIONS,
)

SIGNALS = ("traces", "logs", "metrics")
_HTTP_PATHS = {"traces": "/v1/traces", "logs": "/v1/logs", "metrics": "/v1/metrics"}
_TOP_LEVEL_KEYS = frozenset({"version", "policy", "components", "dynamic_plugins"})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the configuration, phrased for a human."""

    source: str  # file path or environment variable name
    key: str  # dotted key path inside the source ("" for the whole file)
    expected: str
    found: str
    fatal: bool = True  # fatal problems make us ignore the whole file

    def __str__(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        return f"{where}: expected {self.expected}, found {self.found}"


@dataclass(frozen=True)
class OTLPTarget:
    """Where one signal is exported over OTLP."""

    endpoint: str  # full URL for http/protobuf, host:port URL for grpc
    protocol: str
    headers: Mapping[str, str]
    timeout_s: float
    compression: str


@dataclass(frozen=True)
class RelayEndpoint:
    """One `[[components.config.opentelemetry.endpoints]]` entry of NeMo Relay's observability component."""

    type: str  # full | gen_ai | openinference (see exporters/shapes.py)
    target: OTLPTarget
    resource: Mapping[str, str] = field(default_factory=dict)
    max_queue_size: int = 2048
    max_export_batch_size: int = 512
    scheduled_delay_millis: int = 1000


@dataclass(frozen=True)
class Settings:
    enabled: bool = True
    service_name: str = "hermes-agent"
    resource_attributes: Mapping[str, str] = field(default_factory=dict)
    capture_content: str = "NO_CONTENT"
    console: bool = False
    middleware_log_dedupe: bool = True
    background_build: bool = True
    observer_exclude_hooks: frozenset[str] = frozenset({"pre_api_request"})
    flush_timeout_s: float = 1.5
    otlp: Mapping[str, OTLPTarget] = field(default_factory=dict)  # signal -> target
    file_signals: frozenset[str] = frozenset(SIGNALS)
    file_directory: Path = Path.home() / ".hermes" / "otel"
    file_max_bytes: int = 20 * 1024 * 1024
    file_backups: int = 3
    bsp_max_queue_size: int = 2048
    bsp_max_export_batch_size: int = 512
    bsp_schedule_delay_ms: int = 1000
    bsp_export_timeout_ms: int = 10000
    sampler_name: str = "parentbased_always_on"
    sampler_arg: float = 1.0
    metric_export_interval_ms: int = 60000
    logs_enabled: bool = True
    metrics_enabled: bool = True
    metrics_exporter: str = "otlp"  # otlp (push: OTLP or file) | prometheus (pull)
    prometheus_host: str = "localhost"
    prometheus_port: int = 9464
    atof_sinks: tuple = ()  # FileSinkConfig | StreamSinkConfig (exporters.atof)
    atof_full_payloads: bool = False
    relay_span_endpoints: tuple[RelayEndpoint, ...] = ()
    relay_log_targets: tuple[OTLPTarget, ...] = ()
    relay_metric_targets: tuple[OTLPTarget, ...] = ()
    relay_metric_interval_ms: int = 60000
    relay_handoff: bool = False
    relay_component: Mapping[str, Any] | None = None  # the observability component, verbatim, for the hand-off
    source: str | None = None  # the plugins.toml that was applied, if any

    def exporting(self, signal: str) -> bool:
        return signal in self.otlp or signal in self.file_signals or (signal == "traces" and self.console)


@dataclass(frozen=True)
class LoadResult:
    settings: Settings
    problems: tuple[Problem, ...] = ()
    path: Path | None = None

    @property
    def file_rejected(self) -> bool:
        return any(p.fatal for p in self.problems if p.source == str(self.path))

    def message(self) -> str | None:
        """One human message covering every problem, or None."""
        if not self.problems:
            return None
        lines = [str(p) for p in self.problems]
        if self.file_rejected:
            tail = "ignoring this file; telemetry continues with environment and default settings"
        else:
            tail = "the offending keys were ignored"
        return "hermes-otel configuration: " + "; ".join(lines) + f" ({tail})"


def hermes_home(env: Mapping[str, str]) -> Path:
    home = env.get("HERMES_HOME", "").strip()
    return _expand(home) if home else Path.home() / ".hermes"


def _expand(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # "~user" that does not exist: use the path as written
        return Path(path)


def find_config_file(env: Mapping[str, str]) -> Path | None:
    """HERMES_OTEL_PLUGINS_TOML, else HERMES_NEMO_RELAY_PLUGINS_TOML, else $HERMES_HOME/plugins.toml."""
    for var in ("HERMES_OTEL_PLUGINS_TOML", "HERMES_NEMO_RELAY_PLUGINS_TOML"):
        value = env.get(var, "").strip()
        if value:
            return _expand(value)
    candidate = hermes_home(env) / "plugins.toml"
    return candidate if candidate.exists() else None


def load_settings(env: Mapping[str, str] | None = None, path: Path | None = None) -> LoadResult:
    """Build settings from a plugins.toml (found or given) and the environment."""
    env = os.environ if env is None else env
    path = path if path is not None else find_config_file(env)
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    if path is not None:
        file_values, file_problems = read_component(path)
        problems.extend(file_problems)
        if not any(p.fatal for p in file_problems):
            values = file_values
    env_values, env_problems = _from_env(env)
    problems.extend(env_problems)
    values.update(env_values)
    settings = _build(values, env, source=str(path) if path and values else None)
    return LoadResult(settings, tuple(problems), path)


def read_component(path: Path) -> tuple[dict[str, Any], list[Problem]]:
    """Read and validate our component of one plugins.toml; values are flat dotted keys."""
    src = str(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, [Problem(src, "", "a readable TOML file", "no such file")]
    except OSError as exc:
        return {}, [Problem(src, "", "a readable TOML file", f"{type(exc).__name__}: {exc.strerror or exc}")]
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [Problem(src, "", "valid TOML", f"a syntax error ({exc})")]
    values, problems = validate_document(doc, src)
    return values, _permission_problem(path, doc) + problems


def validate_document(doc: Mapping[str, Any], src: str) -> tuple[dict[str, Any], list[Problem]]:
    problems: list[Problem] = []
    policy = _policy(doc.get("policy"), src, problems)

    def report(key: str, expected: str, found: str, rule: str) -> None:
        level = policy[rule]
        if level != "ignore":
            problems.append(Problem(src, key, expected, found, fatal=level == "error"))

    for key in doc:
        if key not in _TOP_LEVEL_KEYS:
            report(key, "one of " + ", ".join(sorted(_TOP_LEVEL_KEYS)), "an unknown top-level key", "unknown_field")
    components = doc.get("components", [])
    if not isinstance(components, list):
        problems.append(Problem(src, "components", "an array of tables ([[components]])", _describe(components)))
        return {}, problems
    values: dict[str, Any] = {}
    ours = 0
    for i, comp in enumerate(components):
        where = f"components[{i}]"
        if not isinstance(comp, dict):
            problems.append(Problem(src, where, "a table", _describe(comp)))
            continue
        kind = comp.get("kind")
        if kind == COMPONENT_KIND:
            ours += 1
            if ours > 1:
                problems.append(Problem(src, where, f"one component of kind {COMPONENT_KIND!r}", "a second one"))
                continue
            values.update(_validate_ours(comp, where, src, problems, report))
        elif kind == "observability":
            values.update(_validate_observability(comp, where, src, problems, report))
        elif kind in RELAY_COMPONENT_KINDS:
            if comp.get("enabled", True) is not False:
                report(f"{where}.kind", "a component kind hermes-otel honours (hermes_otel, observability)",
                       f"{kind!r} (NeMo Relay's; ignored here)", "unknown_component")
        else:
            report(f"{where}.kind", "a known component kind", repr(kind), "unknown_component")
    return values, problems


_SINK_FIELDS = {
    "file": {"type": str, "output_directory": str, "filename": str, "mode": str, "name": str},
    "stream": {"type": str, "url": str, "transport": str, "headers": dict, "header_env": dict, "header_file": dict,
               "timeout_millis": int, "field_name_policy": str, "name": str},
}
_SINK_CHOICES = {
    "mode": ("append", "overwrite"),
    "transport": ("http_post", "ndjson"),
    "field_name_policy": ("preserve", "replace_dots"),
}


def _validate_observability(comp: dict, where: str, src: str, problems: list[Problem], report) -> dict[str, Any]:
    """NeMo Relay's `observability` component: the ATOF part is honoured; the rest is reported."""
    if comp.get("enabled", True) is False:
        return {}
    config = comp.get("config", {})
    if not isinstance(config, dict):
        problems.append(Problem(src, f"{where}.config", "a table", _describe(config)))
        return {}
    base = f"{where}.config"
    component = {"kind": "observability", "enabled": True, "config": config}
    if config.get("version", 4) != 4:
        report(f"{base}.version", "4 (the config version NeMo Relay 0.10 reads)", repr(config.get("version")),
               "unsupported_value")
    for key in config:
        if key not in ("version", "enable_full_payloads", "atof", "opentelemetry"):
            report(f"{base}.{key}", "a key hermes-otel honours here (version, enable_full_payloads, atof, opentelemetry)",
                   "a key it does not honour", "unknown_field")
    otel = config.get("opentelemetry")
    values: dict[str, Any] = {}
    if otel is not None:
        values.update(_validate_relay_otel(otel, f"{base}.opentelemetry", src, problems, report))
    values["relay.component"] = component
    full = config.get("enable_full_payloads", False)
    if not isinstance(full, bool):
        problems.append(Problem(src, f"{base}.enable_full_payloads", "a boolean", _describe(full)))
    else:
        values["atof.full_payloads"] = full
    atof = config.get("atof", {})
    if not isinstance(atof, dict):
        problems.append(Problem(src, f"{base}.atof", "a table", _describe(atof)))
        return values
    if atof.get("enabled", True) is False:
        return values
    sinks = atof.get("sinks", [])
    if not isinstance(sinks, list):
        problems.append(Problem(src, f"{base}.atof.sinks", "an array of tables ([[...sinks]])", _describe(sinks)))
        return values
    parsed = []
    for i, sink in enumerate(sinks):
        path = f"{base}.atof.sinks[{i}]"
        if not isinstance(sink, dict) or sink.get("type") not in _SINK_FIELDS:
            found = _describe(sink.get("type")) if isinstance(sink, dict) else _describe(sink)
            problems.append(Problem(src, f"{path}.type", "file | stream", found))
            continue
        spec = _SINK_FIELDS[sink["type"]]
        ok = True
        for key, value in sink.items():
            if key not in spec:
                report(f"{path}.{key}", "one of " + ", ".join(spec), "an unknown key", "unknown_field")
            elif not isinstance(value, spec[key]) or isinstance(value, bool):
                problems.append(Problem(src, f"{path}.{key}", _type_name(spec[key]), _describe(value)))
                ok = False
            elif key in _SINK_CHOICES and value not in _SINK_CHOICES[key]:
                report(f"{path}.{key}", " | ".join(_SINK_CHOICES[key]), repr(value), "unsupported_value")
                ok = False
        required = "output_directory" if sink["type"] == "file" else "url"
        if required not in sink:
            problems.append(Problem(src, f"{path}.{required}", "a string", "nothing"))
            ok = False
        if ok:
            parsed.append({k: v for k, v in sink.items() if k in spec})  # unknown keys were reported
    values["atof.sinks"] = tuple(parsed)
    return values


_ENDPOINT_FIELDS = {
    "type": str, "endpoint": str, "transport": str, "service_name": str, "service_namespace": str,
    "service_version": str, "timeout_millis": int, "headers": dict, "header_env": dict, "header_file": dict,
    "resource_attributes": dict, "max_queue_size": int, "max_export_batch_size": int, "scheduled_delay_millis": int,
}
_TRANSPORTS = {"http_binary": "http/protobuf", "grpc": "grpc"}


def _relay_target(entry: dict, signal: str) -> OTLPTarget:
    from .exporters.atof import (
        StreamSinkConfig,  # same header resolution: literal, env, file
    )

    protocol = _TRANSPORTS[entry.get("transport", "http_binary")]
    endpoint = entry["endpoint"]
    if protocol == "http/protobuf" and not endpoint.rstrip("/").endswith(_HTTP_PATHS[signal]):
        endpoint = endpoint.rstrip("/") + _HTTP_PATHS[signal]
    headers = StreamSinkConfig(
        url=endpoint, headers=entry.get("headers", {}), header_env=entry.get("header_env", {}),
        header_file=entry.get("header_file", {}),
    ).resolved_headers()
    return OTLPTarget(endpoint, protocol, headers, entry.get("timeout_millis", 3000) / 1000.0, "none")


def _validate_relay_otel(otel: Any, base: str, src: str, problems: list[Problem], report) -> dict[str, Any]:
    if not isinstance(otel, dict):
        problems.append(Problem(src, base, "a table", _describe(otel)))
        return {}
    if otel.get("enabled", True) is False:
        return {}
    values: dict[str, Any] = {}
    for key in otel:
        if key not in ("enabled", "endpoints", "logs", "metrics"):
            report(f"{base}.{key}", "enabled, endpoints, logs or metrics", "a key hermes-otel does not honour",
                   "unknown_field")
    spans = []
    for i, entry in enumerate(otel.get("endpoints", []) if isinstance(otel.get("endpoints"), list) else []):
        path = f"{base}.endpoints[{i}]"
        if not isinstance(entry, dict):
            problems.append(Problem(src, path, "a table", _describe(entry)))
            continue
        ok = _check_table(entry, _ENDPOINT_FIELDS, path, src, problems, report)
        if "endpoint" not in entry:
            problems.append(Problem(src, f"{path}.endpoint", "a string", "nothing"))
            ok = False
        if entry.get("type", "full") not in ("full", "gen_ai", "openinference"):
            report(f"{path}.type", "full | gen_ai | openinference", repr(entry.get("type")), "unsupported_value")
            ok = False
        if entry.get("transport", "http_binary") not in _TRANSPORTS:
            report(f"{path}.transport", "http_binary | grpc", repr(entry.get("transport")), "unsupported_value")
            ok = False
        if not ok:
            continue
        resource = dict(entry.get("resource_attributes", {}))
        for key, attr in (("service_name", "service.name"), ("service_namespace", "service.namespace"),
                          ("service_version", "service.version")):
            if key in entry:
                resource[attr] = entry[key]
        spans.append(RelayEndpoint(
            entry.get("type", "full"), _relay_target(entry, "traces"), resource,
            entry.get("max_queue_size", 2048), entry.get("max_export_batch_size", 512),
            entry.get("scheduled_delay_millis", 1000),
        ))
    values["relay.spans"] = tuple(spans)
    for signal in ("logs", "metrics"):
        table = otel.get(signal)
        if table is None:
            continue
        path = f"{base}.{signal}"
        fields = {"enabled": bool, "endpoints": list, "minimum_severity": str}
        if signal == "metrics":
            fields.update(export_interval_millis=int, temporality=str)
        if not isinstance(table, dict) or not _check_table(table, fields, path, src, problems, report):
            continue
        if table.get("enabled", True) is False:
            continue
        urls = [u for u in table.get("endpoints", []) if isinstance(u, str)]
        values[f"relay.{signal}"] = tuple(_relay_target({"endpoint": u}, signal) for u in urls)
        if signal == "metrics":
            values["relay.metrics_interval"] = table.get("export_interval_millis", 60000)
            temporality = table.get("temporality", "cumulative")
            if temporality != "cumulative":  # our metric exporters export cumulative sums and histograms
                report(f"{path}.temporality", "cumulative (the temporality hermes-otel exports)", repr(temporality),
                       "unsupported_value")
    return values


def _check_table(table: dict, fields: dict, path: str, src: str, problems: list[Problem], report) -> bool:
    ok = True
    for key, value in table.items():
        if key not in fields:
            report(f"{path}.{key}", "one of " + ", ".join(fields), "an unknown key", "unknown_field")
        elif not isinstance(value, fields[key]) or (isinstance(value, bool) and fields[key] is not bool):
            problems.append(Problem(src, f"{path}.{key}", _type_name(fields[key]), _describe(value)))
            ok = False
    return ok


def _policy(raw: Any, src: str, problems: list[Problem]) -> dict[str, str]:
    policy = {"unknown_component": "warn", "unknown_field": "warn", "unsupported_value": "error"}
    if raw is None:
        return policy
    if not isinstance(raw, dict):
        problems.append(Problem(src, "policy", "a table", _describe(raw)))
        return policy
    for key, value in raw.items():
        if key not in policy:
            problems.append(Problem(src, f"policy.{key}", "one of " + ", ".join(policy), "an unknown key", False))
        elif value not in POLICY_VALUES:
            problems.append(Problem(src, f"policy.{key}", " | ".join(POLICY_VALUES), repr(value)))
        else:
            policy[key] = value
    return policy


def _validate_ours(comp: dict, where: str, src: str, problems: list[Problem], report) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in comp:
        if key not in ("kind", "enabled", "config"):
            report(f"{where}.{key}", "kind, enabled or config", "an unknown key", "unknown_field")
    enabled = comp.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(Problem(src, f"{where}.enabled", "a boolean", _describe(enabled)))
    elif not enabled:
        values["enabled"] = False
    config = comp.get("config", {})
    if not isinstance(config, dict):
        problems.append(Problem(src, f"{where}.config", "a table", _describe(config)))
        return values
    for key, value in _flatten(config):
        path = f"{where}.config.{key}"
        spec = FIELDS_BY_KEY.get(key)
        if spec is None:
            report(path, "a documented key (see docs/configuration.md)", "an unknown key", "unknown_field")
            continue
        error = _check(spec, value)
        if error is not None:
            expected, found, rule = error
            if rule == "type":
                problems.append(Problem(src, path, expected, found))
            else:
                report(path, expected, found, "unsupported_value")
            continue
        values[key] = float(value) if spec.type is float else value
    return values


def _flatten(config: dict, prefix: str = "") -> list[tuple[str, Any]]:
    items = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if not prefix and key in SECTIONS and isinstance(value, dict):
            items.extend(_flatten(value, dotted + "."))
        else:
            items.append((dotted, value))
    return items


def _check(spec, value: Any) -> tuple[str, str, str] | None:
    """Return (expected, found, rule) when the value does not fit the field."""
    types = spec.type if isinstance(spec.type, tuple) else (spec.type,)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        return _type_name(spec.type), _describe(value), "type"
    if spec.type is dict and not all(isinstance(v, str) for v in value.values()):
        return "a table of strings", _describe(value), "type"
    if spec.type is list and not all(isinstance(v, str) for v in value):
        return "an array of strings", _describe(value), "type"
    if spec.choices and value not in spec.choices:
        return " | ".join(spec.choices), repr(value), "value"
    if isinstance(value, float) and value != value:
        return "a number", "NaN", "value"
    if spec.minimum is not None and value < spec.minimum:
        return f"a number >= {spec.minimum:g}", repr(value), "value"
    if spec.maximum is not None and value > spec.maximum:
        return f"a number <= {spec.maximum:g}", repr(value), "value"
    return None


def _type_name(t: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "a table", list: "an array"}
    return names.get(t, str(t))


def _describe(value: Any) -> str:
    """A short description for a problem report. It is logged and shown by `doctor`, so a table shows its
    keys only (header tables hold credentials) and any text is redacted first."""
    from .content import redact_text

    kinds = {str: "string", bool: "boolean", int: "integer", float: "float", dict: "table", list: "array"}
    kind = kinds.get(type(value), type(value).__name__)
    if isinstance(value, dict):
        text = "{keys: " + ", ".join(sorted(str(k) for k in value)) + "}"
    else:
        text = redact_text(repr(value))
    return f"{kind} {text[:60] + '…' if len(text) > 60 else text}"


def _holds_secrets(node: Any, key: str = "") -> bool:
    """Literal header values, credential-named keys or user:password URLs anywhere in the document."""
    from .content import is_secret_key, redact_text

    if isinstance(node, dict):
        if key == "headers" and node:
            return True
        return any(_holds_secrets(v, str(k)) for k, v in node.items())
    if isinstance(node, list):
        return any(_holds_secrets(v, key) for v in node)
    if isinstance(node, str):
        return (is_secret_key(key) and key not in ("header_env", "header_file")) or redact_text(node) != node
    return False


def _permission_problem(path: Path, doc: Mapping[str, Any]) -> list[Problem]:
    """A plugins.toml that holds credentials must not be readable by the group or others."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return []
    if not mode & 0o077 or not _holds_secrets(doc):
        return []
    return [Problem(str(path), "", "a file only its owner can read (chmod 600): it holds header values or "
                    "credentials", f"mode {mode:o}", fatal=False)]


# -- environment -------------------------------------------------------------


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def parse_headers(raw: str, lower: bool = True) -> dict[str, str]:
    """`k1=v1,k2=v2` (W3C baggage-like, values URL-encoded) as OTEL_*_HEADERS and
    OTEL_RESOURCE_ATTRIBUTES define it; header names are case-insensitive, attribute keys are not."""
    headers = {}
    for item in raw.split(","):
        if "=" not in item:
            continue
        key, value = item.split("=", 1)
        if key.strip():
            name = urllib.parse.unquote(key.strip())
            headers[name.lower() if lower else name] = urllib.parse.unquote(value.strip())
    return headers


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    if _truthy(env.get("OTEL_SDK_DISABLED", "")):
        values["enabled"] = False
    for spec in FIELDS:
        if spec.env is None or spec.env not in env or not env[spec.env].strip():
            continue
        raw = env[spec.env].strip()
        try:
            value = _parse_env(spec, raw)
        except ValueError:
            problems.append(Problem(spec.env, "", _type_name(spec.type), repr(raw), fatal=False))
            continue
        error = _check(spec, value)
        if error is not None:
            problems.append(Problem(spec.env, "", error[0], error[1], fatal=False))
            continue
        values[spec.key] = value
    return values, problems


def _parse_env(spec, raw: str) -> Any:
    if spec.key == "capture_content":
        legacy = {"true": "SPAN_AND_EVENT", "false": "NO_CONTENT"}
        return legacy.get(raw.lower(), raw.upper())
    if spec.key == "resource_attributes":
        return parse_headers(raw, lower=False) if raw else {}
    if spec.type is dict:
        return parse_headers(raw)
    if spec.type is int:
        return int(raw)
    if spec.type is float:
        return float(raw)
    if spec.type is bool:
        return _truthy(raw)
    return raw.lower() if spec.choices and raw.lower() in spec.choices else raw


def _signal_target(signal: str, values: Mapping[str, Any], env: Mapping[str, str]) -> OTLPTarget | None:
    """Per-signal OTEL_EXPORTER_OTLP_<SIGNAL>_* beat the general settings."""
    upper = signal.upper()

    def signal_env(suffix: str) -> str:
        return env.get(f"OTEL_EXPORTER_OTLP_{upper}_{suffix}", "").strip()

    protocol = signal_env("PROTOCOL") or values.get("otlp.protocol", "http/protobuf")
    if protocol not in ("http/protobuf", "grpc"):
        protocol = "http/protobuf"
    endpoint = signal_env("ENDPOINT")  # used as-is, per the specification
    if not endpoint:
        base = values.get("otlp.endpoint", "")
        if not base:
            return None
        endpoint = base.rstrip("/") + _HTTP_PATHS[signal] if protocol == "http/protobuf" else base
    headers = dict(values.get("otlp.headers", {}))
    headers.update(parse_headers(signal_env("HEADERS")))
    timeout_ms = values.get("otlp.timeout_millis", 10000)
    if signal_env("TIMEOUT").isdigit():
        timeout_ms = int(signal_env("TIMEOUT"))
    compression = signal_env("COMPRESSION") or values.get("otlp.compression", "none")
    return OTLPTarget(endpoint, protocol, headers, timeout_ms / 1000.0, compression)


def _build(values: Mapping[str, Any], env: Mapping[str, str], source: str | None) -> Settings:
    def get(key: str) -> Any:
        return values.get(key, FIELDS_BY_KEY[key].default if key in FIELDS_BY_KEY else None)

    otlp = {s: t for s in SIGNALS if (t := _signal_target(s, values, env)) is not None}
    file_enabled = get("file.enabled")
    if file_enabled is None:
        file_signals = frozenset(s for s in SIGNALS if s not in otlp)
    else:
        file_signals = frozenset(SIGNALS) if file_enabled else frozenset()
    directory = get("file.directory")
    file_dir = _expand(directory) if directory else hermes_home(env) / "otel"
    return Settings(
        enabled=values.get("enabled", True),
        service_name=get("service_name"),
        resource_attributes=dict(get("resource_attributes")),
        capture_content=get("capture_content"),
        console=get("console"),
        middleware_log_dedupe=get("middleware_log_dedupe"),
        background_build=get("background_build"),
        observer_exclude_hooks=frozenset(get("observer_exclude_hooks")),
        flush_timeout_s=get("flush_timeout_millis") / 1000.0,
        otlp=otlp,
        file_signals=file_signals,
        file_directory=file_dir,
        file_max_bytes=get("file.max_bytes"),
        file_backups=get("file.backups"),
        bsp_max_queue_size=get("batch.max_queue_size"),
        bsp_max_export_batch_size=min(get("batch.max_export_batch_size"), get("batch.max_queue_size")),
        bsp_schedule_delay_ms=get("batch.scheduled_delay_millis"),
        bsp_export_timeout_ms=get("batch.export_timeout_millis"),
        sampler_name=get("sampler.name"),
        sampler_arg=get("sampler.arg"),
        metric_export_interval_ms=get("metrics.export_interval_millis"),
        logs_enabled=get("logs.enabled"),
        metrics_enabled=get("metrics.enabled") and get("metrics.exporter") != "none",
        metrics_exporter=get("metrics.exporter"),
        prometheus_host=get("prometheus.host"),
        prometheus_port=get("prometheus.port"),
        atof_sinks=_atof_sinks(values.get("atof.sinks", ())),
        atof_full_payloads=bool(values.get("atof.full_payloads", False)),
        relay_span_endpoints=values.get("relay.spans", ()),
        relay_log_targets=values.get("relay.logs", ()),
        relay_metric_targets=values.get("relay.metrics", ()),
        relay_metric_interval_ms=values.get("relay.metrics_interval", 60000),
        relay_handoff=get("relay_handoff"),
        relay_component=values.get("relay.component"),
        source=source,
    )


def _atof_sinks(raw: tuple) -> tuple:
    from .exporters.atof import FileSinkConfig, StreamSinkConfig

    sinks = []
    for sink in raw:
        fields = {k: v for k, v in sink.items() if k != "type"}
        sinks.append(FileSinkConfig(**fields) if sink["type"] == "file" else StreamSinkConfig(**fields))
    return tuple(sinks)


def masked(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data, header values masked (for `doctor`)."""
    data: dict[str, Any] = {
        "enabled": settings.enabled,
        "source": settings.source or "(environment and defaults)",
        "service_name": settings.service_name,
        "resource_attributes": dict(settings.resource_attributes),
        "capture_content": settings.capture_content,
        "sampler": f"{settings.sampler_name} ({settings.sampler_arg:g})",
        "file": {
            "directory": str(settings.file_directory),
            "signals": sorted(settings.file_signals),
        },
        "otlp": {},
        "metrics_exporter": settings.metrics_exporter if settings.metrics_enabled else "none",
    }
    if settings.metrics_enabled and settings.metrics_exporter == "prometheus":
        data["prometheus"] = f"http://{settings.prometheus_host}:{settings.prometheus_port}/metrics"
    data["atof_sinks"] = [
        {"type": "file", "path": str(Path(s.output_directory) / s.filename), "mode": s.mode}
        if hasattr(s, "output_directory")
        else {"type": "stream", "url": _mask_url(s.url), "transport": s.transport,
              "headers": {k: "****" for k in (*s.headers, *s.header_env, *s.header_file)}}
        for s in settings.atof_sinks
    ]
    for signal, target in settings.otlp.items():
        data["otlp"][signal] = {
            "endpoint": _mask_url(target.endpoint),
            "protocol": target.protocol,
            "headers": {k: "****" for k in target.headers},
            "timeout_s": target.timeout_s,
            "compression": target.compression,
        }
    return data


def _mask_url(url: str) -> str:
    from .content import redact_text

    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc
        if parts.password:
            netloc = f"{parts.username}:****@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=redact_text(parts.query)))
    except ValueError:  # a malformed port: mask what the patterns recognise
        return redact_text(url)
