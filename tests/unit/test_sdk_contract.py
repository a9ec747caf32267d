"""No SDK private attribute is read or written by hermes-otel: only the SDK's public surface (constructors, properties,
exporter arguments such as the OTLP/HTTP `session`), so an SDK release that renames its internals cannot break us.

A metric exporter's preferred temporality and aggregation have no public getter; our spooling wrapper is what the
metric reader asks, so we pick them from the environment ourselves, as the SDK's OTLP exporter would (pinned below
against the SDK's own choice: the test may read the SDK's private attribute, the product does not).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import opentelemetry.attributes
import opentelemetry.exporter.otlp.proto.http
import opentelemetry.sdk
import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import Counter, Histogram, ObservableCounter, ObservableGauge, UpDownCounter

from hermes_otel.exporters.spool.delivery import metric_preferences

try:
    import opentelemetry.exporter.otlp.proto.grpc as otlp_grpc
except ImportError:  # the optional [grpc] extra
    otlp_grpc = None

ROOT = Path(__file__).resolve().parents[2]
_PRIVATE = re.compile(r"\b(?:self|cls)\.(_[a-z][A-Za-z0-9_]*)\s*(?::[^=]+)?=")


def _private_names(*packages: object) -> set[str]:
    """`_name`s the given packages assign on their objects (`self._name = ...`)."""
    names: set[str] = set()
    for package in packages:
        for folder in {Path(p) for p in package.__path__}:  # type: ignore[attr-defined]
            for path in folder.rglob("*.py"):
                names.update(_PRIVATE.findall(path.read_text(encoding="utf-8")))
    return names


def _reads_of_others_privates(tree: ast.AST) -> list[tuple[int, str]]:
    """`obj._name` with obj not self/cls, and getattr/setattr/hasattr(obj, "_name")."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and node.args[1].value.startswith("_") and not node.args[1].value.endswith("__")):
            found.append((node.lineno, node.args[1].value))
    return found


def test_hermes_otel_reads_no_sdk_private_attribute():
    packages = [opentelemetry.sdk, opentelemetry.attributes, opentelemetry.exporter.otlp.proto.http]
    sdk = _private_names(*packages, *([otlp_grpc] if otlp_grpc else []))
    sources = sorted((ROOT / "hermes_otel").rglob("*.py"))
    ours = {name for path in sources for name in _PRIVATE.findall(path.read_text(encoding="utf-8"))}
    assert {"_attributes", "_events", "_links", "_dict", "_preferred_temporality", "_headers"} <= sdk
    assert otlp_grpc is None or "_client" in sdk
    offending = [f"{path.relative_to(ROOT)}:{line}: ._{name.lstrip('_')}"
                 for path in sources for line, name in _reads_of_others_privates(ast.parse(path.read_text()))
                 if name in sdk and name not in ours]  # a name our own classes also use is theirs to read
    assert offending == []


@pytest.mark.parametrize("temporality, histogram", [
    (None, None), ("DELTA", None), ("lowmemory", None), ("cumulative", "base2_exponential_bucket_histogram"),
])
def test_metric_preferences_are_the_ones_the_sdk_exporter_picks(monkeypatch, temporality, histogram):
    env = {}
    for name, value in (("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", temporality),
                        ("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", histogram)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
            env[name] = value
    sdk = OTLPMetricExporter(endpoint="http://127.0.0.1:9/v1/metrics")
    try:
        ours_temporality, ours_aggregation = metric_preferences(env)
        for instrument in (Counter, UpDownCounter, Histogram, ObservableCounter, ObservableGauge):
            assert ours_temporality[instrument] is sdk._preferred_temporality[instrument], instrument
        assert type(ours_aggregation[Histogram]) is type(sdk._preferred_aggregation[Histogram])
    finally:
        sdk.shutdown()
