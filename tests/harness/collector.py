"""Reading Collector configs for the rules the Collector itself cannot check (our span-metric
dimensions, buckets and sampling policies). Whether a config is valid at all is decided by the
real Collector: `otelcol-hermes validate` (tests/harness/otelcol.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ID_LIKE = re.compile(r"(^|[._])(id|ids)$|_id$|\.id\.")
_ENV = re.compile(r"\$\{env:[A-Z0-9_]+:-([^}]*)\}")


def load(*paths: Path) -> dict[str, Any]:
    """Load and merge like `otelcol --config a --config b` (maps merge, everything else is replaced),
    with every `${env:NAME:-default}` at its default."""
    merged: dict[str, Any] = {}
    for path in paths:
        text = _ENV.sub(lambda m: m.group(1), path.read_text(encoding="utf-8"))
        merged = _merge(merged, yaml.safe_load(text))
    return merged


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = _merge(base.get(key), value)
        return out
    return over


def spanmetrics(config: dict[str, Any]) -> dict[str, Any] | None:
    return (config.get("connectors") or {}).get("span_metrics")


def duration_seconds(text: str) -> float:
    value, unit = re.fullmatch(r"([0-9.]+)(ms|s)", str(text)).groups()
    return float(value) / (1000 if unit == "ms" else 1)
