"""`plugins.toml` + `OTEL_*` environment -> one validated :class:`Settings`.

Precedence, lowest to highest (`hermes-otel config keys` lists every key):

1. built-in defaults (:mod:`.schema`, the one place they are written);
2. the `hermes_otel` component of `plugins.toml` (and NeMo Relay's `observability`, :mod:`.relay`);
3. the standard `OTEL_*` environment variables (:mod:`.env`; per-signal forms beat the general
   ones) — the environment is the per-deployment override;
4. `OTEL_SDK_DISABLED=true` always wins: telemetry is off; so does `enabled = false` in the file.

A broken document never stops the agent: :func:`load_settings` returns the problems it found
(file, key path, expected, found — never a credential) and settings built from the environment
and defaults alone; the plugin reports them in one message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..redaction.masking import mask_url, remember_url
from .env import from_env
from .files import MAX_CONFIG_BYTES, TRUSTED, Unreadable, Untrusted, read_regular, size_text
from .headers import parse_pairs, resolve
from .problems import Problem, check, describe, shown, unknown_key
from .schema import (
    COMPONENT_KIND,
    FIELDS,
    FIELDS_BY_KEY,
    KEYS_HINT,
    POLICY_VALUES,
    RELAY_COMPONENT_KINDS,
    SECTIONS,
)
from .targets import SIGNALS, OTLPTarget, signal_url, url_problem

if TYPE_CHECKING:
    from .relay import FileSinkConfig, RelayEndpoint, StreamSinkConfig

__all__ = [
    "FileSinkConfig",
    "LoadResult",
    "OTLPTarget",
    "Problem",
    "RelayEndpoint",
    "SIGNALS",
    "Settings",
    "StreamSinkConfig",
    "find_config_file",
    "hermes_home",
    "load_settings",
    "read_component",
    "summary",
    "validate_document",
]

_TOP_LEVEL_KEYS = frozenset({"version", "policy", "components", "dynamic_plugins"})
_COMPONENT_KEYS = ("kind", "enabled", "config")


def _schema_defaults(cls: type) -> type:
    """Give every attribute a schema field fills that field's default: defaults are written once, in the schema."""
    for spec in FIELDS:
        if spec.attr:
            value = spec.setting(spec.default)
            setattr(cls, spec.attr, field(default_factory=partial(type(value), value)) if isinstance(value, dict)
                    else value)
    return cls


@dataclass(frozen=True)
@_schema_defaults
class Settings:
    """The effective configuration. Attributes filled by a schema field (`Field.attr`) take their values, converted,
    and their defaults from the schema; the others are derived from several keys."""

    # -- from the schema (config/schema.py) --
    service_name: str
    resource_attributes: Mapping[str, str]
    capture_content: str
    capture_max_chars: int
    semconv_v1_41: bool
    console: bool
    relay_handoff: bool
    observer_exclude_hooks: frozenset[str]
    middleware_log_dedupe: bool
    background_build: bool
    flush_timeout_s: float
    spool_enabled: bool
    spool_max_bytes: int
    spool_max_age_s: float
    file_max_bytes: int
    file_backups: int
    bsp_max_queue_size: int
    bsp_max_export_batch_size: int  # never more than bsp_max_queue_size
    bsp_schedule_delay_ms: int
    bsp_export_timeout_ms: int
    blrp_max_queue_size: int  # the log processor's; each defaults to its bsp_* value (derived in _build)
    blrp_max_export_batch_size: int
    blrp_schedule_delay_ms: int
    blrp_export_timeout_ms: int
    sampler_name: str
    sampler_arg: float
    metric_export_interval_ms: int
    traces_exporters: tuple[str, ...]  # otlp (endpoint and/or file), console; () for none
    logs_exporters: tuple[str, ...]  # the same; () also when logs.enabled is false
    metrics_exporters: tuple[str, ...]  # otlp (push: endpoint or file), prometheus (pull), console; () for none
    prometheus_host: str
    prometheus_port: int
    collector_health_check: str  # the Collector's health_check URL (doctor only)
    logs_enabled: bool
    metrics_enabled: bool  # false also when metrics.exporter is "none"
    backend: str = ""  # a backend preset (config/presets.py), or ""
    http_client_spans: bool = True  # HTTP client spans + traceparent for requests under our spans
    hermes_log_level: str = "warning"  # Hermes's own log lines bridged at this level and above (or "off")
    # -- derived --
    enabled: bool = True
    otlp: Mapping[str, OTLPTarget] = field(default_factory=dict)  # signal -> target
    file_signals: frozenset[str] = frozenset(SIGNALS)
    file_directory: Path = Path.home() / ".hermes" / "otel"
    spool_directory: Path = Path.home() / ".hermes" / "otel" / "spool"  # always under $HERMES_HOME
    atof_sinks: tuple = ()  # FileSinkConfig | StreamSinkConfig
    atof_full_payloads: bool = False
    relay_span_endpoints: tuple[RelayEndpoint, ...] = ()
    relay_log_targets: tuple[OTLPTarget, ...] = ()
    relay_metric_targets: tuple[OTLPTarget, ...] = ()
    relay_metric_interval_ms: int = 60000
    relay_component: Mapping[str, Any] | None = None  # the observability component, verbatim, for the hand-off
    source: str | None = None  # the plugins.toml that was applied, if any


@dataclass(frozen=True)
class LoadResult:
    settings: Settings
    problems: tuple[Problem, ...] = ()
    path: Path | None = None

    @property
    def file_rejected(self) -> bool:
        return any(p.fatal for p in self.problems if p.source == str(self.path))

    def message(self) -> str | None:
        """One human message covering every problem (except those the document's [policy] ignores), or None."""
        shown_problems = [str(p) for p in self.problems if not p.ignored]
        if not shown_problems:
            return None
        if self.file_rejected and not self.settings.enabled and self.settings.source is None:
            tail = "ignoring this file except its `enabled = false`: telemetry is off"
        elif self.file_rejected:
            tail = "ignoring this file; telemetry continues with environment and default settings"
        else:
            tail = "the offending keys were ignored"
        return "hermes-otel configuration: " + "; ".join(shown_problems) + f" ({tail}; {KEYS_HINT})"


def __getattr__(name: str) -> Any:
    """The Relay sink and endpoint types, from config/relay.py (loaded on first use: most runs configure no Relay)."""
    if name in ("FileSinkConfig", "StreamSinkConfig", "RelayEndpoint"):
        from . import relay

        return getattr(relay, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    applied = False
    if path is not None:
        file_values, file_problems = read_component(path, env)
        problems.extend(file_problems)
        if not any(p.fatal for p in file_problems):
            values, applied = file_values, bool(file_values)
        elif file_values.get("enabled") is False:
            values = {"enabled": False}  # a file that says "off" is obeyed even when it is otherwise rejected
    for name in _BATCH_KEYS:  # the file's batch.* are its logs' too, unless it says otherwise (never OTEL_BSP_*)
        if f"batch.{name}" in values:
            values.setdefault(f"logs.batch.{name}", values[f"batch.{name}"])
    env_values, env_problems = from_env(env)
    problems.extend(env_problems)
    if "resource_attributes" in env_values:  # merged per key, as the SDK merges its resource: never replaced whole
        env_values["resource_attributes"] = {**values.get("resource_attributes", {}),
                                             **env_values["resource_attributes"]}
    values.update(env_values)
    if values.get("backend"):  # a backend preset fills in what is not set explicitly
        from . import presets

        problems.extend(presets.apply(values, env))
    settings = _build(values, env, source=str(path) if path and applied else None)
    problems.extend(_cleartext_credentials(settings))
    return LoadResult(settings, tuple(problems), path)


def _cleartext_credentials(settings: Settings) -> list[Problem]:
    """Headers (collector credentials, as a rule) that would go over plain http to a host off this machine."""
    import ipaddress
    import urllib.parse

    problems = []
    for signal, target in settings.otlp.items():
        parts = urllib.parse.urlsplit(target.endpoint)
        if not target.headers or parts.scheme != "http" or not parts.hostname:
            continue
        try:
            loopback = ipaddress.ip_address(parts.hostname).is_loopback
        except ValueError:
            loopback = parts.hostname == "localhost"
        if not loopback:
            problems.append(Problem(f"otlp.{signal}", "headers", "https for an endpoint that gets headers",
                                    f"http://{parts.hostname}: the {len(target.headers)} header(s) (credentials, as "
                                    "a rule) would cross the network in clear text", fatal=False))
    return problems


def read_component(path: Path, env: Mapping[str, str] | None = None) -> tuple[dict[str, Any], list[Problem]]:
    """Read and validate our components of one plugins.toml; values are flat dotted keys."""
    src = str(path)
    if src == os.devnull:  # "no file", explicitly
        return {}, []
    import tomllib  # only with a file to read

    try:
        text = read_regular(path, MAX_CONFIG_BYTES, trusted=True).decode("utf-8")
        doc = tomllib.loads(text)
    except Untrusted as exc:
        return {}, [Problem(src, "", TRUSTED, f"it {exc}")]
    except Unreadable as exc:
        return {}, [Problem(src, "", f"a readable TOML file (a regular file of at most {size_text(MAX_CONFIG_BYTES)})",
                            str(exc))]
    except UnicodeDecodeError:
        return {}, [Problem(src, "", "valid TOML", "bytes that are not UTF-8")]
    except tomllib.TOMLDecodeError as exc:
        return {}, [Problem(src, "", "valid TOML", f"a syntax error ({exc})")]
    except RecursionError:
        return {}, [Problem(src, "", "valid TOML", "tables or arrays nested too deep to read")]
    values, problems = validate_document(doc, src, env)
    problems.extend(_permission_problem(path, doc))
    return values, problems


def validate_document(
    doc: Mapping[str, Any], src: str, env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[Problem]]:
    env = os.environ if env is None else env
    problems: list[Problem] = []
    policy = _policy(doc.get("policy"), src, problems)

    def report(key: str, expected: str, found: str, rule: str) -> None:
        level = policy[rule]
        problems.append(Problem(src, key, expected, found, fatal=level == "error", ignored=level == "ignore"))

    for key in doc:
        if key not in _TOP_LEVEL_KEYS:
            report(key, "one of " + ", ".join(sorted(_TOP_LEVEL_KEYS)), "an unknown top-level key", "unknown_field")
    components = doc.get("components", [])
    if not isinstance(components, list):
        problems.append(Problem(src, "components", "an array of tables ([[components]])", describe(components)))
        return {}, problems
    values: dict[str, Any] = {}
    ours = 0
    for i, comp in enumerate(components):
        where = f"components[{i}]"
        if not isinstance(comp, dict):
            problems.append(Problem(src, where, "a table", describe(comp)))
            continue
        kind = comp.get("kind")
        if not isinstance(kind, str):
            problems.append(Problem(src, f"{where}.kind", "a string", describe(kind)))
        elif kind == COMPONENT_KIND:
            ours += 1
            if ours > 1:
                problems.append(Problem(src, where, f"one component of kind {COMPONENT_KIND!r}", "a second one"))
                continue
            values.update(_validate_ours(comp, where, src, problems, report, env))
        elif kind == "observability":
            from .relay import validate as validate_observability  # NeMo Relay's schema, when its component is there

            values.update(validate_observability(comp, where, src, problems, report, env))
        elif kind in RELAY_COMPONENT_KINDS:
            if comp.get("enabled", True) is not False:
                report(f"{where}.kind", "a component kind hermes-otel honours (hermes_otel, observability)",
                       f"{kind!r} (NeMo Relay's; ignored here)", "unknown_component")
        else:
            report(f"{where}.kind", "a known component kind", shown(kind), "unknown_component")
    return values, problems


def summary(values: Mapping[str, Any]) -> str:
    """What a validated document configures, in one line (for `config validate`)."""
    ours = sorted(k for k in values if k in FIELDS_BY_KEY)
    if values.get("enabled") is False:
        parts = ["hermes_otel component: enabled = false (telemetry off)"]
    elif ours:
        parts = [f"hermes_otel component: {len(ours)} key(s) set ({', '.join(ours)})"]
    else:
        parts = ["no hermes_otel settings (the defaults apply)"]
    if "relay.component" in values:
        counts = [(len(values.get("relay.spans", ())), "OpenTelemetry endpoint"),
                  (len(values.get("relay.logs", ())), "log endpoint"),
                  (len(values.get("relay.metrics", ())), "metric endpoint"),
                  (len(values.get("atof.sinks", ())), "ATOF sink")]
        parts.append("observability component: "
                     + ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for n, what in counts))
    return "; ".join(parts)


def _policy(raw: Any, src: str, problems: list[Problem]) -> dict[str, str]:
    policy = {"unknown_component": "warn", "unknown_field": "warn", "unsupported_value": "error"}
    if raw is None:
        return policy
    if not isinstance(raw, dict):
        problems.append(Problem(src, "policy", "a table", describe(raw)))
        return policy
    for key, value in raw.items():
        if key not in policy:
            problems.append(Problem(src, f"policy.{key}", "one of " + ", ".join(policy), "an unknown key", False))
        elif not isinstance(value, str) or value not in POLICY_VALUES:
            problems.append(Problem(src, f"policy.{key}", " | ".join(POLICY_VALUES), shown(value)))
        else:
            policy[key] = value
    return policy


def _validate_ours(comp: dict, where: str, src: str, problems: list[Problem], report, env) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in comp:
        if key not in _COMPONENT_KEYS:
            report(f"{where}.{key}", "kind, enabled or config", "an unknown key", "unknown_field")
    enabled = comp.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(Problem(src, f"{where}.enabled", "a boolean", describe(enabled)))
    elif not enabled:
        values["enabled"] = False
    config = comp.get("config", {})
    if not isinstance(config, dict):
        problems.append(Problem(src, f"{where}.config", "a table", describe(config)))
        return values
    for key, value in _flatten(config):
        path = f"{where}.config.{key}"
        spec = FIELDS_BY_KEY.get(key)
        if spec is None and key in SECTIONS:
            problems.append(Problem(src, path, "a table", describe(value)))
            continue
        if spec is None:
            report(path, f"a documented key ({KEYS_HINT})", unknown_key(key, FIELDS_BY_KEY), "unknown_field")
            continue
        error = check(spec, value)
        if error is not None:
            expected, found, rule = error
            if rule == "type":
                problems.append(Problem(src, path, expected, found))
            else:
                report(path, expected, found, "unsupported_value")
            continue
        if key == "otlp.endpoint" and value:
            problem = url_problem(value)
            if problem:
                report(path, problem, shown(mask_url(value)), "unsupported_value")
                continue
            remember_url(value)
        if key == "otlp.headers":
            value, found_problems = resolve(value, {}, {}, env, source=src, where=f"{where}.config.otlp")
            problems.extend(found_problems)
        values[key] = value
    return values


def _flatten(config: dict) -> list[tuple[str, Any]]:
    """Top-level keys, and the keys of our sections (`otlp = { endpoint = ... }` -> `otlp.endpoint`)."""
    items: list[tuple[str, Any]] = []
    for key, value in config.items():
        if key in SECTIONS and isinstance(value, dict):
            items.extend((f"{key}.{sub}", item) for sub, item in value.items())
        else:
            items.append((key, value))
    return items


def _holds_secrets(doc: Any) -> bool:
    """Literal header values, credential-named keys or credentials in URLs anywhere in the document.

    `header_env` and `header_file` tables name variables and files, not secrets."""
    from ..redaction.content import is_secret_key, redact_text

    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, key = stack.pop()
        if isinstance(node, dict):
            if key == "headers" and node:
                return True
            stack.extend((v, str(k)) for k, v in node.items() if k not in ("header_env", "header_file"))
        elif isinstance(node, list):
            stack.extend((v, key) for v in node)
        elif isinstance(node, str) and ((is_secret_key(key) and node) or redact_text(node) != node):
            return True
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


def parse_headers(raw: str, lower: bool = True) -> dict[str, str]:
    """`k1=v1,k2=v2` as OTEL_*_HEADERS define it (bad items are dropped; :mod:`.env` reports them)."""
    return parse_pairs(raw, "", lower=lower, secret=lower)[0]


# -- settings ------------------------------------------------------------------------------------------------------


def _signal_target(signal: str, values: Mapping[str, Any]) -> OTLPTarget | None:
    """Per-signal OTEL_EXPORTER_OTLP_<SIGNAL>_* beat the general settings."""

    def pick(key: str) -> Any:
        return values.get(f"otlp.{signal}.{key}", values.get(f"otlp.{key}", FIELDS_BY_KEY[f"otlp.{key}"].default))

    protocol = pick("protocol")
    endpoint = values.get(f"otlp.{signal}.endpoint")  # used as-is, per the specification
    if not endpoint:
        base = values.get("otlp.endpoint", "")
        if not base:
            return None
        endpoint = signal_url(base, signal) if protocol == "http/protobuf" else base
    headers = {**values.get("otlp.headers", {}), **values.get(f"otlp.{signal}.headers", {})}
    return OTLPTarget(endpoint, protocol, headers, pick("timeout_millis") / 1000.0, pick("compression"))


_BATCH_KEYS = ("max_queue_size", "max_export_batch_size", "scheduled_delay_millis", "export_timeout_millis")
# The batch log record processor's defaults (the specification's OTEL_BLRP_* defaults).
BLRP_DEFAULTS = {"max_queue_size": 2048, "max_export_batch_size": 512, "schedule_delay_ms": 1000,
                 "export_timeout_ms": 30000}


def _build(values: Mapping[str, Any], env: Mapping[str, str], source: str | None) -> Settings:
    def raw(key: str) -> Any:
        return values.get(key, FIELDS_BY_KEY[key].default)

    schema = {spec.attr: spec.setting(raw(spec.key)) for spec in FIELDS if spec.attr}
    for name, default in BLRP_DEFAULTS.items():  # the specification's own for OTEL_BLRP_*, not the span processor's
        if schema[f"blrp_{name}"] is None:
            schema[f"blrp_{name}"] = default
    for kind in ("bsp", "blrp"):
        schema[f"{kind}_max_export_batch_size"] = min(schema[f"{kind}_max_export_batch_size"],
                                                      schema[f"{kind}_max_queue_size"])
    chosen = {"traces": schema["traces_exporters"], "logs": schema["logs_exporters"],
              "metrics": schema["metrics_exporters"]}
    if schema["console"] and "console" not in chosen["traces"]:
        chosen["traces"] = schema["traces_exporters"] = (*chosen["traces"], "console")
    for signal in ("logs", "metrics"):
        if not schema[f"{signal}_enabled"] or chosen[signal] == ("none",):
            schema[f"{signal}_enabled"] = False
            chosen[signal] = schema[f"{signal}_exporters"] = ()
    if chosen["traces"] == ("none",):
        chosen["traces"] = schema["traces_exporters"] = ()
    # `otlp` is the endpoint and the files; a signal without it has neither. (Prometheus falls back to a push when
    # its package is missing, so metrics keep their endpoint and file for that case.)
    pushed = {s for s in SIGNALS if "otlp" in chosen[s] or (s == "metrics" and "prometheus" in chosen[s])}
    otlp = {s: t for s in SIGNALS if s in pushed and (t := _signal_target(s, values)) is not None}
    file_enabled = raw("file.enabled")
    if file_enabled is None:
        # The traces file is the local record `view`, `cost` and the dashboard read: kept beside an endpoint too.
        file_signals = frozenset(s for s in SIGNALS if s not in otlp) | {"traces"}
    else:
        file_signals = frozenset(SIGNALS) if file_enabled else frozenset()
    file_signals &= pushed
    directory = raw("file.directory")
    return Settings(
        **schema,
        enabled=values.get("enabled", True),
        otlp=otlp,
        file_signals=file_signals,
        file_directory=_expand(directory) if directory else hermes_home(env) / "otel",
        spool_directory=hermes_home(env) / "otel" / "spool",
        atof_sinks=values.get("atof.sinks", ()),
        atof_full_payloads=bool(values.get("atof.full_payloads", False)),
        relay_span_endpoints=values.get("relay.spans", ()),
        relay_log_targets=values.get("relay.logs", ()),
        relay_metric_targets=values.get("relay.metrics", ()),
        relay_metric_interval_ms=values.get("relay.metrics_interval", 60000),
        relay_component=values.get("relay.component"),
        source=source,
    )
