"""Our Collector distribution (otelcol-hermes) and Jaeger v2, both built from Go modules by
`make backends` into .cache/bin, run on free loopback ports.

The Collector runs the files of collector/ exactly as shipped: their listen addresses and
backends are environment variables with defaults, and the tests set those variables.
A missing binary fails the test (run `make backends`), unless Go itself is missing: then
the test is skipped, and the session's summary says which live tests did not run and why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.harness.backends import CACHE, ROOT, _Process, free_port, get_json, wait_until

COLLECTOR_DIR = ROOT / "collector"
OTELCOL = "bin/otelcol-hermes"
JAEGER = "bin/jaeger"
NO_GO = "Go is not installed, so `make backends` could not build the Collector and Jaeger"
skipped_for_go: list[str] = []  # node ids of tests skipped because Go is missing (reported at the end)


def go_binary(relative: str, request: pytest.FixtureRequest | None = None) -> Path:
    path = CACHE / relative
    if path.exists():
        return path
    if shutil.which(os.environ.get("GO", "go")) is None:
        if request is not None:
            skipped_for_go.append(request.node.nodeid)
        pytest.skip(NO_GO)
    pytest.fail(f"{path} is missing: run `make backends` (builds it from its pinned Go module)", pytrace=False)


def validate(*configs: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`otelcol-hermes validate` on collector/ files merged in order (as `--config a --config b`)."""
    argv = [str(CACHE / OTELCOL), "validate"]
    for config in configs:
        argv += ["--config", str(COLLECTOR_DIR / config) if not Path(config).is_absolute() else config]
    return subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60)


@dataclass
class Ports:
    """The listen addresses a shipped config reads from the environment."""

    otlp_grpc: int = field(default_factory=free_port)
    otlp_http: int = field(default_factory=free_port)
    health: int = field(default_factory=free_port)
    prometheus: int = field(default_factory=free_port)
    telemetry: int = field(default_factory=free_port)

    def env(self) -> dict[str, str]:
        return {
            "OTELCOL_OTLP_GRPC": f"127.0.0.1:{self.otlp_grpc}",
            "OTELCOL_OTLP_HTTP": f"127.0.0.1:{self.otlp_http}",
            "OTELCOL_HEALTH": f"127.0.0.1:{self.health}",
            "OTELCOL_PROMETHEUS": f"127.0.0.1:{self.prometheus}",
            "OTELCOL_TELEMETRY_HOST": "127.0.0.1",
            "OTELCOL_TELEMETRY_PORT": str(self.telemetry),
        }


class Collector(_Process):
    """otelcol-hermes with collector/ files, as shipped, on free loopback ports."""

    def __init__(self, *configs: str, env: dict[str, str] | None = None, name: str = "otelcol") -> None:
        super().__init__(name)
        self.configs = configs
        self.ports = Ports()
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, **self.ports.env(),
                    "OTELCOL_STORAGE_DIR": str(self.dir / "storage"), **(env or {})}

    @property
    def otlp_http(self) -> str:
        return f"http://127.0.0.1:{self.ports.otlp_http}"

    @property
    def otlp_grpc(self) -> str:
        return f"http://127.0.0.1:{self.ports.otlp_grpc}"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.health}/"

    def start(self) -> Collector:
        argv = [str(CACHE / OTELCOL)]
        for config in self.configs:
            argv += ["--config", str(COLLECTOR_DIR / config)]
        self._start(argv, self.env)
        wait_until(lambda: urllib.request.urlopen(self.health_url, timeout=2).status == 200, 60,
                   f"otelcol-hermes {' + '.join(self.configs)}", self.proc, self.log)
        return self

    def kill(self) -> None:
        """Gone at once (SIGKILL), as a crashed or evicted pod."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def metrics(self, where: Callable[[str], bool] = lambda labels: True) -> dict[str, float]:
        """The Collector's own metrics (otelcol_*) by name, summed over the series whose labels pass `where`."""
        return _prometheus_text(f"http://127.0.0.1:{self.ports.telemetry}/metrics", where)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _prometheus_text(url: str, where: Callable[[str], bool]) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name, _, labels = name_labels.partition("{")
        if where(labels):
            totals[name] = totals.get(name, 0.0) + float(value)
    return totals


_JAEGER_CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_storage:
    backends:
      memory_store:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memory_store
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memory_store
"""


class Jaeger(_Process):
    """Jaeger v2 all-in-one with in-memory storage; read back through its HTTP query API (api_v3)."""

    def __init__(self) -> None:
        super().__init__("jaeger")
        self.grpc, self.http, self.query = free_port(), free_port(), free_port()
        (self.dir / "config.yaml").write_text(_JAEGER_CONFIG.format(
            grpc=self.grpc, http=self.http, query=self.query, query_grpc=free_port()))

    @property
    def otlp_grpc(self) -> str:
        """host:port, as the Collector's otlp_grpc exporter takes it."""
        return f"127.0.0.1:{self.grpc}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.query}"

    def start(self) -> Jaeger:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        self._start([str(CACHE / JAEGER), "--config", str(self.dir / "config.yaml")], env)
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/api/services", timeout=2).status == 200, 60,
                   "Jaeger", self.proc, self.log)
        return self

    def services(self) -> list[str]:
        return get_json(f"{self.url}/api/services")["data"] or []

    def trace_ids(self, service: str, **query: str) -> list[str]:
        """Every trace id of `service` stored so far (the classic search API: limit is traces)."""
        params = urllib.parse.urlencode({"service": service, "limit": "10000", "lookback": "2h", **query})
        try:
            data = get_json(f"{self.url}/api/traces?{params}")["data"] or []
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        return [t["traceID"] for t in data]

    def trace(self, trace_id: str) -> list[JaegerSpan]:
        """One trace as OTLP (api_v3), flattened to spans."""
        reply = get_json(f"{self.url}/api/v3/traces/{trace_id}")
        return [
            JaegerSpan.from_otlp(span, resource)
            for resource in reply["result"]["resourceSpans"]
            for scope in resource.get("scopeSpans", [])
            for span in scope.get("spans", [])
        ]


@dataclass
class JaegerSpan:
    """A span as Jaeger's api_v3 returns it (OTLP JSON), with the fields the tests assert."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    status_code: str
    status_message: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]

    @classmethod
    def from_otlp(cls, span: dict, resource: dict) -> JaegerSpan:
        status = span.get("status") or {}
        return cls(
            trace_id=span["traceId"].lower(), span_id=span["spanId"].lower(),
            parent_span_id=(span.get("parentSpanId") or "").lower() or None,
            name=span["name"], kind=_enum(span.get("kind", 0), _KINDS, "SPAN_KIND_"),
            start_ns=int(span["startTimeUnixNano"]), end_ns=int(span["endTimeUnixNano"]),
            status_code=_enum(status.get("code", 0), _STATUS, "STATUS_CODE_"), status_message=status.get("message", ""),
            attributes=_attributes(span.get("attributes", [])),
            events=[(e["name"], _attributes(e.get("attributes", []))) for e in span.get("events", [])],
            resource=_attributes(resource.get("resource", {}).get("attributes", [])),
        )


_KINDS = ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER")
_STATUS = ("UNSET", "OK", "ERROR")


def _enum(value: int | str, names: tuple[str, ...], prefix: str) -> str:
    """OTLP JSON enums come as numbers (the spec) or names (protobuf's JSON mapping): the short name."""
    return names[value] if isinstance(value, int) else value.removeprefix(prefix)


def _attributes(kvs: list[dict]) -> dict[str, Any]:
    return {kv["key"]: _value(kv.get("value", {})) for kv in kvs}


def _value(value: dict) -> Any:
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    return None
