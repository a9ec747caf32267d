"""Every name we emit in a namespace OpenTelemetry owns is a registered name; ours live under `hermes.`; and each is
the name of the conventions' release it is emitted for.

Derived, not listed: what we emit comes from `docsgen.catalog` (which the integration tests hold to
real runs), the registry from the installed `opentelemetry-semantic-conventions` (stable and incubating
modules, read with `ast` so each name's deprecation note is known), and the names the OpenTelemetry
GenAI helper `opentelemetry-util-genai` emits ahead of the registry from its own module constants and
the instruments it creates. A name counts as registered unless the registry marks it superseded
("Deprecated: Replaced by ...", "Removed", ...); "Moved to the GenAI conventions repository" is a move.
The few names the GenAI conventions repository defined after both packages were cut are listed in
`AHEAD_OF_PACKAGES`, each with where it is defined and its instrument, held to that exactly: no package on an index
carries that repository's model (the packages' GenAI names are v1.41.0's, "Moved"), so its latest names are typed
here from its model files, and the names the latest replaced from its migration guide (`REPLACED_BY_LATEST`).

By default we emit the latest GenAI conventions' names; `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup` adds the v1.41.0
names the latest replaced (`catalog.V1_41_*`), each of which must be a name of the packages' (v1.41.0's) model.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from docsgen import catalog
from hermes_otel.capture import bridge

NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
REGISTRY_PACKAGES = (
    "opentelemetry.semconv.attributes",
    "opentelemetry.semconv._incubating.attributes",
    "opentelemetry.semconv.metrics",
    "opentelemetry.semconv._incubating.metrics",
)
OURS = "hermes"


@dataclass(frozen=True)
class Instrument:
    kind: str  # "histogram", "counter", "updowncounter", "gauge", ... as create_<kind> names it
    unit: str
    buckets: tuple[float, ...] = ()


# Defined by open-telemetry/semantic-conventions-genai (pull request 336, merged June 2026: histograms, recorded at
# each invoke_agent's end, counting failed calls too, advisory buckets 1 to 128 doubling), after the 1.44.0 registry
# that opentelemetry-semantic-conventions 0.66b2 carries and not yet created by opentelemetry-util-genai 1.3b0.
# A name leaves this list once the installed packages know it (the test below says when).
_CALL_COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_TOKENS = tuple(4**i for i in range(14))
_COUNTER = Instrument("counter", "{token}")
AHEAD_OF_PACKAGES: dict[str, Instrument | None] = {  # None: an attribute
    "gen_ai.invoke_agent.inference_calls": Instrument("histogram", "{inference_call}", _CALL_COUNT_BUCKETS),
    "gen_ai.invoke_agent.tool_calls": Instrument("histogram", "{tool_call}", _CALL_COUNT_BUCKETS),
    # model/gen-ai/metrics.yaml (pull request 521): inference's own duration and streaming metrics.
    "gen_ai.client.inference.duration": Instrument("histogram", "s", _SECONDS),
    "gen_ai.client.inference.time_to_first_chunk": Instrument("histogram", "s", _SECONDS),
    "gen_ai.client.inference.time_per_output_chunk": Instrument("histogram", "s", _SECONDS),
    # model/gen-ai/token-metrics.yaml (pull request 374): usage counters with gen_ai.token.modality (required),
    # per-operation token histograms.
    "gen_ai.client.inference.usage.input_tokens": _COUNTER,
    "gen_ai.client.inference.usage.output_tokens": _COUNTER,
    "gen_ai.client.inference.usage.cache_read.input_tokens": _COUNTER,
    "gen_ai.client.inference.usage.cache_write.input_tokens": _COUNTER,
    "gen_ai.client.inference.usage.reasoning.output_tokens": _COUNTER,
    "gen_ai.client.inference.operation.input_tokens": Instrument("histogram", "{token}", _TOKENS),
    "gen_ai.client.inference.operation.output_tokens": Instrument("histogram", "{token}", _TOKENS),
    "gen_ai.token.modality": None,
}
# The migration guide (docs/gen-ai/non-normative/migration.md, v1.41.0 -> latest): what the latest replaced or
# removed among the names we would emit -> what replaces it.
REPLACED_BY_LATEST: dict[str, str] = {
    "gen_ai.client.operation.duration": "gen_ai.client.inference.duration",  # for inference (#521)
    "gen_ai.client.operation.time_to_first_chunk": "gen_ai.client.inference.time_to_first_chunk",  # #521
    "gen_ai.client.operation.time_per_output_chunk": "gen_ai.client.inference.time_per_output_chunk",  # #521
    "gen_ai.client.token.usage": "gen_ai.client.inference.usage.input_tokens",  # and the others of #374
    "gen_ai.token.type": "gen_ai.token.modality",  # #374
    "gen_ai.usage.cache_creation.input_tokens": "gen_ai.usage.cache_write.input_tokens",  # #440
}


class RecordingMeter:
    """A Meter that only notes what each create_* call asked for."""

    def __init__(self) -> None:
        self.created: dict[str, Instrument] = {}

    def __getattr__(self, attr: str):
        if not attr.startswith("create_"):
            raise AttributeError(attr)

        def create(name: str, *args: Any, unit: str = "", explicit_bucket_boundaries_advisory=None, **kw: Any):
            kind = attr.removeprefix("create_").removeprefix("observable_")
            self.created[name] = Instrument(kind, unit, tuple(explicit_bucket_boundaries_advisory or ()))
            return None

        return create


def _modules(package: str, skip_missing_extras: bool = False) -> Iterable[ModuleType]:
    root = importlib.import_module(package)
    yield root
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        try:
            yield importlib.import_module(info.name)
        except ModuleNotFoundError:  # util-genai's upload hook needs an optional extra (fsspec)
            if not skip_missing_extras:
                raise


def _documented_constants(module: ModuleType) -> dict[str, str | None]:
    """Module-level string constants that look like names -> the "Deprecated: ..." note after them, if any."""
    out: dict[str, str | None] = {}
    if not getattr(module, "__file__", None):  # a namespace package
        return out
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    body = tree.body
    for i, node in enumerate(body):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str) and NAME.match(value.value)):
            continue
        note = None
        following = body[i + 1] if i + 1 < len(body) else None
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            doc = str(following.value.value).strip()
            note = doc if doc.startswith("Deprecated:") else None
        out.setdefault(value.value, note)
    return out


@dataclass(frozen=True)
class Registry:
    names: dict[str, str | None]  # name -> deprecation note
    metrics: dict[str, Instrument]
    namespaces: frozenset[str]

    def superseded(self, name: str) -> bool:
        note = self.names.get(name)
        return note is not None and not note.startswith("Deprecated: Moved to")


def load_registry() -> Registry:
    names: dict[str, str | None] = {}
    meter = RecordingMeter()
    for package in REGISTRY_PACKAGES:
        for module in _modules(package):
            names.update(_documented_constants(module))
            for attr, fn in vars(module).items():
                if attr.startswith("create_") and inspect.isfunction(fn) and fn.__module__ == module.__name__:
                    # observable instruments take callbacks too
                    fn(meter, *([()] if "callbacks" in inspect.signature(fn).parameters else []))
    namespaces = frozenset(name.split(".", 1)[0] for name in (*names, *meter.created))
    return Registry(names, meter.created, namespaces)


@dataclass(frozen=True)
class UtilGenAI:
    names: frozenset[str]
    metrics: dict[str, Instrument]


def load_util_genai() -> UtilGenAI:
    from opentelemetry.util.genai._instruments import _Instruments

    names: set[str] = set()
    for module in _modules("opentelemetry.util.genai", skip_missing_extras=True):
        names.update(v for v in vars(module).values() if isinstance(v, str) and NAME.match(v))
    meter = RecordingMeter()
    _Instruments(meter)
    return UtilGenAI(frozenset(names) | set(meter.created), meter.created)


def sdk_event_names() -> set[str]:
    """Span events the SDK itself adds (`record_exception`), which our spans carry."""
    span = TracerProvider().get_tracer("probe").start_span("probe")
    span.record_exception(ValueError("probe"))
    span.end()
    return {event.name for event in span.events}


@dataclass(frozen=True)
class Emitted:
    attributes: frozenset[str]
    events: frozenset[str]
    metrics: dict[str, Instrument]


def emitted(cat: Any = catalog, v1_41: bool = True) -> Emitted:
    """Every attribute, event and metric name the catalog says we emit (spans, events, logs, metrics, resource); with
    `v1_41`, under `gen_ai/dup` too."""
    attributes = set(cat.ATTRIBUTES) | set(cat.RESOURCE) | (set(cat.V1_41_ATTRIBUTES) if v1_41 else set())
    for span in (*cat.SPANS, *cat.MIDDLEWARE_SPANS):
        attributes.update(span.attributes)
    for _, attrs in cat.EVENTS.values():
        attributes.update(attrs)
    all_metrics = (*cat.METRICS, *(cat.V1_41_METRICS if v1_41 else ()))
    for metric in all_metrics:
        attributes.update(metric.attributes)
    attributes.update({bridge.HOOK_ATTR, bridge.SCHEMA_ATTR, *(f"hermes.{key}" for key in bridge.STRING_KEYS)})
    events = set(cat.EVENTS) | {f"hermes.observer.{hook}" for hook in bridge.KNOWN_HOOKS}  # log records' event names
    metrics = {m.name: Instrument(m.instrument, m.unit, tuple(m.buckets)) for m in all_metrics}
    return Emitted(frozenset(attributes), frozenset(events), metrics)


def violations(ours: Emitted, registry: Registry, genai: UtilGenAI, sdk_events: set[str]) -> list[str]:
    problems: list[str] = []
    for kind, names in (("attribute", ours.attributes), ("event", ours.events - sdk_events), ("metric", ours.metrics)):
        for name in sorted(names):
            namespace = name.split(".", 1)[0]
            if namespace == OURS:
                continue
            if namespace not in registry.namespaces:
                problems.append(f"{kind} {name}: not in a namespace OpenTelemetry owns, and not under `hermes.`")
            elif registry.superseded(name) and name not in genai.names:
                problems.append(f"{kind} {name}: superseded in the registry ({registry.names[name]})")
            elif (name not in registry.names and name not in registry.metrics and name not in genai.names
                  and name not in AHEAD_OF_PACKAGES):
                problems.append(f"{kind} {name}: in OpenTelemetry's `{namespace}.` namespace but not registered "
                                "(nor emitted by opentelemetry-util-genai); use a `hermes.` name")
    for name, ours_instrument in sorted(ours.metrics.items()):
        registered = registry.metrics.get(name)
        if registered is not None and (registered.kind, registered.unit) != (ours_instrument.kind, ours_instrument.unit):
            problems.append(f"metric {name}: {ours_instrument.kind} in {ours_instrument.unit!r}, "
                            f"the registry has {registered.kind} in {registered.unit!r}")
        helper = genai.metrics.get(name)
        if helper is not None and helper != ours_instrument:
            problems.append(f"metric {name}: {ours_instrument}, opentelemetry-util-genai creates {helper}")
        ahead = AHEAD_OF_PACKAGES.get(name)
        if ahead is not None and ahead != ours_instrument:
            problems.append(f"metric {name}: {ours_instrument}, the GenAI conventions define {ahead}")
    return problems


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry()


@pytest.fixture(scope="module")
def genai() -> UtilGenAI:
    return load_util_genai()


def test_every_name_we_emit_in_an_opentelemetry_namespace_is_registered(registry, genai) -> None:
    assert violations(emitted(), registry, genai, sdk_event_names()) == []


def test_by_default_the_latest_names_and_under_dup_the_v1_41_names_they_replaced(registry, genai) -> None:
    latest, both = emitted(v1_41=False), emitted()
    default = latest.attributes | set(latest.metrics)
    added = (both.attributes | set(both.metrics)) - default
    assert default & set(REPLACED_BY_LATEST) == set()  # nothing the latest replaced, by default
    assert added == set(REPLACED_BY_LATEST)  # gen_ai/dup: exactly those
    assert {REPLACED_BY_LATEST[name] for name in added} <= default  # each beside what replaced it
    # Each v1.41.0 name is its release's: the packages' GenAI model is v1.41.0's (moved, not superseded).
    for name in added:
        assert (name in registry.names and not registry.superseded(name)) or name in registry.metrics, name
        if name in registry.metrics:
            registered, ours = registry.metrics[name], both.metrics[name]
            assert (registered.kind, registered.unit) == (ours.kind, ours.unit), name
    # And every latest name that the packages do not know is the GenAI repository's, as its model defines it.
    assert {n for n in default if n.startswith("gen_ai.") and n not in registry.names and n not in registry.metrics
            and n not in genai.names} == {n for n in AHEAD_OF_PACKAGES if n in default}


def test_names_ahead_of_the_packages_are_still_ahead(registry, genai) -> None:
    """Once the installed registry or util-genai knows one of them, it is checked there: take it off the list."""
    assert [n for n in AHEAD_OF_PACKAGES if n in registry.names or n in registry.metrics or n in genai.names] == []


def test_the_sources_are_read(registry, genai) -> None:
    """The derivation finds what we know is there, so an empty registry cannot pass everything."""
    assert registry.names["gen_ai.operation.name"] is not None  # moved to the GenAI repo: still registered
    assert not registry.superseded("gen_ai.operation.name")
    assert registry.superseded("gen_ai.system")  # replaced by gen_ai.provider.name
    assert registry.names["http.response.status_code"] is None  # stable
    assert registry.metrics["gen_ai.client.token.usage"] == Instrument("histogram", "{token}")
    assert {"gen_ai", "server", "error", "http", "url", "service", "exception"} <= registry.namespaces
    assert OURS not in registry.namespaces
    assert genai.metrics["gen_ai.execute_tool.duration"].unit == "s"
    assert genai.metrics["gen_ai.invoke_agent.duration"].buckets[:3] == (0.1, 0.2, 0.4)
    assert "gen_ai.execute_tool.duration" not in registry.metrics  # ahead of the registry
    assert sdk_event_names() == {"exception"}


@dataclass(frozen=True)
class _Catalog:
    ATTRIBUTES: dict
    RESOURCE: dict
    SPANS: tuple
    MIDDLEWARE_SPANS: tuple
    EVENTS: dict
    METRICS: tuple
    V1_41_METRICS: tuple
    V1_41_ATTRIBUTES: dict


def _catalog_with(**changes: Any) -> _Catalog:
    fields = {f: getattr(catalog, f) for f in _Catalog.__dataclass_fields__}
    return _Catalog(**{**fields, **changes})


def test_a_made_up_name_fails_the_guard(registry, genai) -> None:
    sdk = sdk_event_names()
    made_up = _catalog_with(ATTRIBUTES={**catalog.ATTRIBUTES, "gen_ai.request.made_up": "invented"},
                            EVENTS={**catalog.EVENTS, "gen_ai.made_up.event": ("invented", ())})
    assert violations(emitted(made_up), registry, genai, sdk) == [
        "attribute gen_ai.request.made_up: in OpenTelemetry's `gen_ai.` namespace but not registered "
        "(nor emitted by opentelemetry-util-genai); use a `hermes.` name",
        "event gen_ai.made_up.event: in OpenTelemetry's `gen_ai.` namespace but not registered "
        "(nor emitted by opentelemetry-util-genai); use a `hermes.` name",
    ]
    stray = _catalog_with(ATTRIBUTES={**catalog.ATTRIBUTES, "hermesotel.thing": "no namespace of ours"})
    assert violations(emitted(stray), registry, genai, sdk) == [
        "attribute hermesotel.thing: not in a namespace OpenTelemetry owns, and not under `hermes.`"
    ]
    superseded = _catalog_with(ATTRIBUTES={**catalog.ATTRIBUTES, "gen_ai.system": "old"})
    assert [p.split(" (")[0] for p in violations(emitted(superseded), registry, genai, sdk)] == [
        "attribute gen_ai.system: superseded in the registry"
    ]


def test_a_metric_unlike_the_registry_or_util_genai_fails_the_guard(registry, genai) -> None:
    sdk = sdk_event_names()
    metrics = tuple(
        catalog.MetricDoc(m.name, m.instrument, m.unit, m.description, m.attributes, m.buckets[:-1])
        if m.name in ("gen_ai.execute_tool.duration", "gen_ai.client.inference.duration")
        else m
        for m in catalog.METRICS
    )
    v1_41 = tuple(catalog.MetricDoc(m.name, m.instrument, "ms", m.description, m.attributes, m.buckets)
                  if m.name == "gen_ai.client.operation.duration" else m for m in catalog.V1_41_METRICS)
    problems = violations(emitted(_catalog_with(METRICS=metrics, V1_41_METRICS=v1_41)), registry, genai, sdk)
    assert [p.split(":")[0] for p in problems] == [
        "metric gen_ai.client.inference.duration",  # buckets vs the GenAI conventions' model
        "metric gen_ai.client.operation.duration",  # unit vs the registry
        "metric gen_ai.client.operation.duration",  # unit vs util-genai
        "metric gen_ai.execute_tool.duration",  # buckets vs util-genai
    ]
