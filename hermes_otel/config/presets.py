"""Backend presets: `backend = "<name>"` (or `HERMES_OTEL_BACKEND`) fills in where a backend takes OTLP.

A preset sets, from the vendor's own documented environment variables:

* the endpoint (the vendor's base URL variable, else its default) and the signals the backend ingests (many LLM
  backends take traces only: their logs and metrics stay in the local files);
* the protocol (`http/protobuf`: every backend here takes it);
* the auth headers, built from the vendor's variables (a missing one is reported, never invented);
* resource attributes the backend routes by (a Phoenix project, a W&B entity and project);
* the attribute flavour it reads: `openinference` adds OpenInference attributes next to the GenAI ones on the
  spans sent to it (exporters/relay/shapes.py); `gen_ai` sends them as they are.

Explicit settings win, key by key: an `otlp.<signal>.endpoint` or `OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`, a general
`otlp.endpoint` / `OTEL_EXPORTER_OTLP_ENDPOINT` (then used as usual, for every signal), headers of the same name,
resource attributes of the same key. Header values are secrets: remembered for masking, never logged.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..redaction.masking import remember
from .headers import NOT_SHOWN, check_value
from .targets import SIGNALS, signal_url

if TYPE_CHECKING:
    from .problems import Problem

SOURCE = "backend preset"
FLAVOURS = ("gen_ai", "openinference")


@dataclass(frozen=True)
class Header:
    """One header from vendor variables: `raw` (the value), `bearer` (`Bearer <value>`), `basic` (`Basic ` and the
    base64 of the values joined by `:`; a literal first part is written `=text`)."""

    name: str
    env: tuple[str, ...]
    form: str = "raw"
    required: bool = True
    secret: bool = True  # a credential: masked wherever it could be shown (a project name is not)
    default: str = ""  # sent when the variable is unset (a header the backend requires)

    def value(self, env: Mapping[str, str]) -> str | None:
        parts = [var[1:] if var.startswith("=") else env.get(var, "").strip() for var in self.env]
        if not all(parts):
            return self.default or None
        if self.form == "bearer":
            return f"Bearer {parts[0]}"
        if self.form == "basic":
            return "Basic " + base64.b64encode(":".join(parts).encode()).decode()
        return parts[0]

    def describe(self) -> str:
        names = [v[1:] if v.startswith("=") else f"${v}" for v in self.env]
        shown = {"bearer": f"Bearer {names[0]}", "basic": f"Basic base64({':'.join(names)})"}.get(self.form, names[0])
        if self.default:
            return f"`{self.name}: {shown}` (else `{self.default}`)"
        return f"`{self.name}: {shown}`" + ("" if self.required else " (when set)")


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    endpoint: str  # the default base URL
    endpoint_env: tuple[str, ...] = ()  # the vendor's base URL variables, first set wins
    endpoint_template: str = "{}"  # how a variable's value makes the base URL (a host alone: "http://{}:4318")
    path: str = ""  # the OTLP path under the base URL (before /v1/<signal>)
    signals: tuple[str, ...] = SIGNALS
    headers: tuple[Header, ...] = ()
    resource: tuple[tuple[str, str, str], ...] = ()  # (attribute, vendor variable, default)
    flavour: str = "gen_ai"
    docs: str = ""
    verified: bool = True  # checked against the vendor's current documentation
    ours: tuple[str, ...] = ()  # variables named by us: the vendor documents the values, not a variable
    note: str = ""

    def base(self, env: Mapping[str, str]) -> str:
        for var in self.endpoint_env:
            if env.get(var, "").strip():
                return self.endpoint_template.format(env[var].strip()).rstrip("/")
        return self.endpoint

    def endpoints(self, env: Mapping[str, str]) -> dict[str, str]:
        base = self.base(env) + self.path
        return {signal: signal_url(base, signal) for signal in self.signals}


_TRACES = ("traces",)
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("phoenix", "Arize Phoenix", "http://localhost:6006", ("PHOENIX_COLLECTOR_ENDPOINT",), signals=_TRACES,
           headers=(Header("authorization", ("PHOENIX_API_KEY",), "bearer", required=False),),
           resource=(("openinference.project.name", "PHOENIX_PROJECT_NAME", ""),), flavour="openinference",
           docs="https://arize.com/docs/phoenix/tracing/how-to-tracing/setup-tracing/setup-using-phoenix-otel"),
    Preset("arize", "Arize AX", "https://otlp.arize.com", ("ARIZE_COLLECTOR_ENDPOINT",), signals=_TRACES,
           ours=("ARIZE_COLLECTOR_ENDPOINT", "ARIZE_PROJECT_NAME"),
           headers=(Header("space_id", ("ARIZE_SPACE_ID",), secret=False), Header("api_key", ("ARIZE_API_KEY",))),
           resource=(("openinference.project.name", "ARIZE_PROJECT_NAME", ""),), flavour="openinference",
           docs="https://arize.com/docs/ax/integrations/opentelemetry/opentelemetry-arize-otel", verified=False,
           note="Arize documents gRPC at `https://otlp.arize.com/v1` with these two headers; the HTTP path is "
           "assumed to follow the OTLP rules."),
    Preset("langfuse", "Langfuse", "https://cloud.langfuse.com", ("LANGFUSE_HOST", "LANGFUSE_BASE_URL"),
           path="/api/public/otel", signals=_TRACES,
           headers=(Header("authorization", ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"), "basic"),
                    Header("x-langfuse-ingestion-version", ("=4",), secret=False)),
           docs="https://langfuse.com/integrations/native/opentelemetry",
           note="US region: `LANGFUSE_HOST=https://us.cloud.langfuse.com`."),
    Preset("langsmith", "LangSmith", "https://api.smith.langchain.com", ("LANGSMITH_ENDPOINT",), path="/otel",
           signals=_TRACES,
           headers=(Header("x-api-key", ("LANGSMITH_API_KEY",)),
                    Header("Langsmith-Project", ("LANGSMITH_PROJECT",), required=False, secret=False)),
           docs="https://docs.langchain.com/langsmith/trace-with-opentelemetry"),
    Preset("mlflow", "MLflow", "http://localhost:5000", ("MLFLOW_TRACKING_URI",), signals=_TRACES,
           headers=(Header("x-mlflow-experiment-id", ("MLFLOW_EXPERIMENT_ID",), secret=False, default="0"),),
           docs="https://mlflow.org/docs/latest/genai/tracing/opentelemetry/ingest/",
           note="The server requires the experiment header: without `MLFLOW_EXPERIMENT_ID` it is `0` (the Default "
           "experiment)."),
    Preset("weave", "W&B Weave", "https://trace.wandb.ai", ("WANDB_BASE_URL",), path="/otel", signals=_TRACES,
           headers=(Header("wandb-api-key", ("WANDB_API_KEY",)),),
           resource=(("wandb.entity", "WANDB_ENTITY", ""), ("wandb.project", "WANDB_PROJECT", "")),
           docs="https://docs.wandb.ai/weave/guides/tracking/otel",
           note="Dedicated and self-managed W&B: `WANDB_BASE_URL=https://<subdomain>.wandb.io/traces`."),
    Preset("opik", "Opik (Comet)", "https://www.comet.com/opik/api", ("OPIK_URL_OVERRIDE",), path="/v1/private/otel",
           signals=_TRACES,
           headers=(Header("Authorization", ("OPIK_API_KEY",)),
                    Header("Comet-Workspace", ("OPIK_WORKSPACE",), secret=False),
                    Header("projectName", ("OPIK_PROJECT_NAME",), required=False, secret=False)),
           docs="https://www.comet.com/docs/opik/integrations/opentelemetry",
           note="Self-hosted Opik: `OPIK_URL_OVERRIDE=http://localhost:5173/api` (no key, no workspace)."),
    Preset("honeycomb", "Honeycomb", "https://api.honeycomb.io", ("HONEYCOMB_API_ENDPOINT",),
           headers=(Header("x-honeycomb-team", ("HONEYCOMB_API_KEY",)),
                    Header("x-honeycomb-dataset", ("HONEYCOMB_DATASET",), required=False, secret=False)),
           docs="https://docs.honeycomb.io/send-data/opentelemetry/",
           note="EU: `HONEYCOMB_API_ENDPOINT=https://api.eu1.honeycomb.io`. Metrics land in the dataset "
           "`HONEYCOMB_DATASET` names."),
    Preset("datadog", "Datadog (through the Datadog Agent's OTLP receiver)", "http://localhost:4318",
           ("DD_AGENT_HOST",), endpoint_template="http://{}:4318",
           docs="https://docs.datadoghq.com/opentelemetry/setup/otlp_ingest_in_the_agent/", verified=False,
           note="The Agent holds `DD_API_KEY` and `DD_SITE`; turn on its OTLP HTTP receiver "
           "(`DD_OTLP_CONFIG_RECEIVER_PROTOCOLS_HTTP_ENDPOINT`, port 4318, on an address this host can reach). "
           "`DD_AGENT_HOST` is the Agent's host, "
           "as Datadog's tracers read it."),
    Preset("grafana-cloud", "Grafana Cloud (OTLP gateway)", "", ("GRAFANA_CLOUD_OTLP_ENDPOINT",),
           ours=("GRAFANA_CLOUD_OTLP_ENDPOINT", "GRAFANA_CLOUD_INSTANCE_ID", "GRAFANA_CLOUD_API_KEY"),
           headers=(Header("Authorization", ("GRAFANA_CLOUD_INSTANCE_ID", "GRAFANA_CLOUD_API_KEY"), "basic"),),
           docs="https://grafana.com/docs/grafana-cloud/send-data/otlp/send-data-otlp/", verified=False,
           note="The stack's OTLP endpoint, its instance ID and a Cloud Access Policy token, from the stack's "
           "OpenTelemetry page."),
    Preset("signoz", "SigNoz", "http://localhost:4318", ("SIGNOZ_ENDPOINT",), ours=("SIGNOZ_ENDPOINT",),
           headers=(Header("signoz-ingestion-key", ("SIGNOZ_INGESTION_KEY",), required=False),),
           docs="https://signoz.io/docs/ingestion/signoz-cloud/overview/",
           note="SigNoz Cloud: `SIGNOZ_ENDPOINT=https://ingest.<region>.signoz.cloud:443` and the key; self-hosted "
           "needs neither."),
    Preset("uptrace", "Uptrace", "https://api.uptrace.dev", ("UPTRACE_ENDPOINT",), ours=("UPTRACE_ENDPOINT",),
           headers=(Header("uptrace-dsn", ("UPTRACE_DSN",)),),
           docs="https://uptrace.dev/get/opentelemetry-js/otlp",
           note="Self-hosted Uptrace: `UPTRACE_ENDPOINT=http://localhost:14318`."),
    Preset("jaeger", "Jaeger", "http://localhost:4318", ("JAEGER_OTLP_ENDPOINT",), signals=_TRACES,
           ours=("JAEGER_OTLP_ENDPOINT",),
           docs="https://www.jaegertracing.io/docs/latest/architecture/apis/#opentelemetry-protocol"),
    Preset("tempo", "Grafana Tempo", "http://localhost:4318", ("TEMPO_OTLP_ENDPOINT",), signals=_TRACES,
           ours=("TEMPO_OTLP_ENDPOINT",),
           docs="https://grafana.com/docs/tempo/latest/configuration/#distributor"),
    Preset("collector", "OpenTelemetry Collector", "http://localhost:4318", ("OTEL_COLLECTOR_ENDPOINT",),
           ours=("OTEL_COLLECTOR_ENDPOINT",),
           docs="https://opentelemetry.io/docs/collector/configuration/#receivers"),
)}
NAMES = tuple(PRESETS)


def apply(values: dict[str, Any], env: Mapping[str, str]) -> list[Problem]:
    """Fill `values` (flat keys, explicit settings already in) from the chosen preset; what is missing, said."""
    from .problems import Problem  # the schema (which names the presets) is imported by problems

    name = values.get("backend")
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        return []
    problems: list[Problem] = []
    if not values.get("otlp.endpoint"):
        if not preset.base(env):
            problems.append(Problem(f"{SOURCE} {name!r}", "", " or ".join(preset.endpoint_env) + " set",
                                    "none: the backend has no default endpoint (traces stay in the local files)",
                                    fatal=False))
        else:
            for signal, url in preset.endpoints(env).items():
                values.setdefault(f"otlp.{signal}.endpoint", url)
                values.setdefault(f"otlp.{signal}.protocol", "http/protobuf")
    headers: dict[str, str] = {}
    for header in preset.headers:
        bad = next((var for var in header.env if not var.startswith("=") and check_value(env.get(var, "").strip())),
                   None)
        if bad is not None:  # refused like every other header value: by its variable, never shown
            problems.append(Problem(f"{SOURCE} {name!r}", header.name, "a header value without control characters",
                                    f"{bad}: a value with control characters {NOT_SHOWN}: the header is not sent",
                                    fatal=False))
            continue
        value = header.value(env)
        if value is None:
            if header.required:
                problems.append(Problem(f"{SOURCE} {name!r}", header.name,
                                        " and ".join(v for v in header.env if not v.startswith("=")) + " set",
                                        "unset: the header is not sent", fatal=False))
            continue
        if header.secret:
            remember(value)
        headers[header.name] = value
    credentials = {h.name for h in preset.headers if h.secret and h.name in headers}
    own = preset.endpoints(env) if preset.base(env) else {}
    for signal in preset.signals:
        target = values.get(f"otlp.{signal}.endpoint") or (
            signal_url(values["otlp.endpoint"], signal) if values.get("otlp.endpoint") else None)
        withheld: set[str] = set()
        if credentials and target and target != own.get(signal):
            if own:  # the preset's credentials go to the preset's own endpoint only
                withheld = credentials
                said = f"{preset.title}'s credentials are not sent there (set the endpoint per signal, or unset " \
                       "the general one)"
            else:  # a preset with no endpoint of its own: the one configured is the user's choice for it
                said = f"{preset.title}'s credentials go there (set {' or '.join(preset.endpoint_env)} to say it " \
                       f"is {preset.title}'s)"
            problems.append(Problem(f"{SOURCE} {name!r}", f"otlp.{signal}.endpoint",
                                    f"{preset.title}'s own endpoint for its credentials", f"{_host(target)}: {said}",
                                    fatal=False))
        general, explicit = values.get("otlp.headers", {}), values.get(f"otlp.{signal}.headers", {})
        # Explicit headers of the same name win (compared case-insensitively, as HTTP does).
        taken = {k.lower() for k in (*general, *explicit)}
        added = {k: v for k, v in headers.items() if k.lower() not in taken and k not in withheld}
        if headers:
            values[f"otlp.{signal}.headers"] = {**added, **general, **explicit}
    resource = {attr: env.get(var, "").strip() or default for attr, var, default in preset.resource}
    resource = {k: v for k, v in resource.items() if v}
    if resource:
        values["resource_attributes"] = {**resource, **values.get("resource_attributes", {})}
    return problems


def _host(url: str) -> str:
    """scheme://host[:port] of a URL, without user info or path (for a message)."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


def flavour(name: str) -> str:
    preset = PRESETS.get(name)
    return preset.flavour if preset is not None else "gen_ai"
