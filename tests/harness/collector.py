"""Structural checks of OpenTelemetry Collector configs (no Collector binary is obtainable here).

`problems(config)` returns human-readable findings; an empty list means the config is
wired the way the Collector would accept it and follows our rules.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

SIGNALS = ("traces", "metrics", "logs")
ALL = frozenset(SIGNALS)
# Component types of the contrib distribution we use, with the signals each supports.
RECEIVERS = {"otlp": ALL, "otlpjsonfile": ALL}
PROCESSORS = {"memory_limiter": ALL, "batch": ALL, "tail_sampling": {"traces"}}
EXPORTERS = {
    "otlp": ALL, "otlphttp": ALL, "debug": ALL, "prometheus": {"metrics"}, "loadbalancing": {"traces", "logs"},
}
# connector type -> allowed (exporting pipeline signal, receiving pipeline signal) pairs
CONNECTORS = {"spanmetrics": {("traces", "metrics")}, "forward": {(s, s) for s in SIGNALS}}
EXTENSIONS = {"health_check"}
ID_LIKE = re.compile(r"(^|[._])(id|ids)$|_id$|\.id\.")


def load(*paths: Path) -> dict[str, Any]:
    """Load and merge like `otelcol --config a --config b`: maps merge, everything else is replaced."""
    merged: dict[str, Any] = {}
    for path in paths:
        merged = _merge(merged, yaml.safe_load(path.read_text(encoding="utf-8")))
    return merged


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = _merge(base.get(key), value)
        return out
    return over


def _type(name: str) -> str:
    return name.split("/", 1)[0]


def problems(config: dict[str, Any]) -> list[str]:
    found: list[str] = []
    sections = {s: config.get(s) or {} for s in ("receivers", "processors", "exporters", "connectors", "extensions")}
    known = {"receivers": RECEIVERS, "processors": PROCESSORS, "exporters": EXPORTERS, "connectors": CONNECTORS}
    for section, types in known.items():
        for name in sections[section]:
            if _type(name) not in types:
                found.append(f"{section}.{name}: unknown component type {_type(name)!r}")
    service = config.get("service") or {}
    for ext in service.get("extensions", []):
        if ext not in sections["extensions"] or _type(ext) not in EXTENSIONS:
            found.append(f"service.extensions: {ext!r} is not declared")
    pipelines = service.get("pipelines") or {}
    if not pipelines:
        found.append("service.pipelines: none")
    used: set[tuple[str, str]] = set()
    connector_in: dict[str, set[str]] = {}  # connector -> signals of pipelines it exports from
    connector_out: dict[str, set[str]] = {}  # connector -> signals of pipelines it receives into
    for pname, pipeline in pipelines.items():
        signal = _type(pname)
        where = f"service.pipelines.{pname}"
        if signal not in SIGNALS:
            found.append(f"{where}: unknown signal {signal!r}")
            continue
        for role, section, table in (("receivers", "receivers", RECEIVERS), ("processors", "processors", PROCESSORS),
                                     ("exporters", "exporters", EXPORTERS)):
            members = pipeline.get(role) or []
            if role != "processors" and not members:
                found.append(f"{where}.{role}: empty")
            for name in members:
                if role != "processors" and name in sections["connectors"]:
                    (connector_in if role == "exporters" else connector_out).setdefault(name, set()).add(signal)
                    used.add(("connectors", name))
                    continue
                if name not in sections[section]:
                    found.append(f"{where}.{role}: {name!r} is not declared under {section}")
                    continue
                used.add((section, name))
                if signal not in table.get(_type(name), ALL):
                    found.append(f"{where}.{role}: {name!r} does not support {signal}")
        processors = pipeline.get("processors") or []
        if not processors or _type(processors[0]) != "memory_limiter":
            found.append(f"{where}.processors: memory_limiter must come first, found {processors}")
    for section in ("receivers", "processors", "exporters", "connectors"):
        for name in sections[section]:
            if (section, name) not in used:
                found.append(f"{section}.{name}: declared but used by no pipeline")
    for name in sections["connectors"]:
        sources, targets = connector_in.get(name, set()), connector_out.get(name, set())
        if not sources or not targets:
            found.append(f"connectors.{name}: must be an exporter of one pipeline and a receiver of another")
        for pair in {(a, b) for a in sources for b in targets} - CONNECTORS.get(_type(name), set()):
            found.append(f"connectors.{name}: cannot connect a {pair[0]} pipeline to a {pair[1]} pipeline")
    return found


def spanmetrics(config: dict[str, Any]) -> dict[str, Any] | None:
    return (config.get("connectors") or {}).get("spanmetrics")


def duration_seconds(text: str) -> float:
    value, unit = re.fullmatch(r"([0-9.]+)(ms|s)", str(text)).groups()
    return float(value) / (1000 if unit == "ms" else 1)
