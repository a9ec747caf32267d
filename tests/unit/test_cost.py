"""Pricing with Hermes's own `estimate_usage_cost` (the real hermes-agent 0.19.0 module), from cached prices only,
and the roll-ups per turn, subagent and session, with the `hermes.usage.cost` counter and its exemplars."""

from __future__ import annotations

import json
import socket
import time
from decimal import Decimal
from types import SimpleNamespace

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hermes_otel.capture.bridge import ObserverBridge
from hermes_otel.cost.pricing import CostLedger, HermesPricing, Price
from hermes_otel.hermes_compat import internals
from hermes_otel.tracking import Tracker
from tests.unit.modes import MODES, DrainingLogs, DrainingReader, DrainingSpans, emitter_for

ENDPOINT = "http://192.0.2.10:8000/v1"  # TEST-NET-1: never routable, and never asked for anything here
PRICES = {"prompt": "0.000002", "completion": "0.000008", "cache_read": "0.0000005"}


class NetworkAttempt(OSError):
    pass


@pytest.fixture
def network(monkeypatch):
    """Every outbound connection attempt (name lookup or connect) is recorded and refused."""
    attempts: list[tuple] = []

    def refuse(kind):
        def blocked(*args, **kwargs):
            attempts.append((kind, args[1:] if kind == "connect" else args))
            raise NetworkAttempt(f"network blocked by the test: {kind}{args}")
        return blocked

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect"))
    return attempts


@pytest.fixture
def hermes(monkeypatch, tmp_path):
    """Hermes's pricing modules with empty metadata caches and a HERMES_HOME of the test's own."""
    from agent import model_metadata, usage_pricing

    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setattr(model_metadata, "_model_metadata_cache", {})
    monkeypatch.setattr(model_metadata, "_model_metadata_cache_time", 0)
    monkeypatch.setattr(model_metadata, "_endpoint_model_metadata_cache", {})
    monkeypatch.setattr(model_metadata, "_endpoint_model_metadata_cache_time", {})
    monkeypatch.setattr(model_metadata, "_endpoint_probe_path_cache", {})
    return SimpleNamespace(metadata=model_metadata, pricing=usage_pricing, home=tmp_path)


def openai_usage(prompt=1000, completion=200, cached=100, reasoning=0):
    """A chat-completions usage object, as the openai SDK hands it over (attributes)."""
    return SimpleNamespace(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
        prompt_tokens_details=SimpleNamespace(cached_tokens=cached),
        completion_tokens_details=SimpleNamespace(reasoning_tokens=reasoning),
    )


def cache_endpoint(hermes, base_url=ENDPOINT, model="fake-model", pricing=PRICES):
    key = hermes.metadata._normalize_base_url(base_url)
    hermes.metadata._endpoint_model_metadata_cache[key] = {model: {"name": model, "pricing": dict(pricing)}}
    hermes.metadata._endpoint_model_metadata_cache_time[key] = time.time()


# -- pricing ---------------------------------------------------------------------------------------------------


def test_official_table_route_equals_hermes_own_estimate(hermes, network):
    usage = SimpleNamespace(input_tokens=900, output_tokens=200, cache_read_input_tokens=100,
                            cache_creation_input_tokens=50)  # an Anthropic Messages usage
    price = HermesPricing().price("claude-sonnet-4-6", usage, provider="anthropic", base_url="",
                                  api_mode="anthropic_messages")
    canonical = hermes.pricing.normalize_usage(usage, provider="anthropic", api_mode="anthropic_messages")
    own = hermes.pricing.estimate_usage_cost("claude-sonnet-4-6", canonical, provider="anthropic", base_url="")
    # 900 x 3.00 + 200 x 15.00 + 100 x 0.30 + 50 x 3.75, per million tokens.
    assert own.amount_usd == price.amount == Decimal("0.0059175")
    assert price == Price(Decimal("0.0059175"), "estimated", "official_docs_snapshot", "anthropic-pricing-2026-05")
    assert price.attributes() == {
        "hermes.usage.cost": 0.0059175, "hermes.usage.cost_status": "estimated",
        "hermes.usage.cost_source": "official_docs_snapshot", "hermes.usage.pricing_version": "anthropic-pricing-2026-05",
    }
    assert network == []


def test_openai_route_prices_every_bucket_like_hermes(hermes, network):
    usage = openai_usage(prompt=1000, completion=200, cached=100, reasoning=50)
    price = HermesPricing().price("gpt-4o", usage, provider="openai", base_url="", api_mode="chat_completions")
    # 900 input x 2.50 + 100 cached x 1.25 + 200 output x 10.00, per million.
    assert price.amount == Decimal("900") * Decimal("2.50") / 10**6 + Decimal("100") * Decimal("1.25") / 10**6 \
        + Decimal("200") * Decimal("10.00") / 10**6 == Decimal("0.004375")
    assert (price.status, price.source, price.version) == ("estimated", "official_docs_snapshot",
                                                           "openai-pricing-2026-03-16")


def test_cached_endpoint_prices_equal_hermes_own_estimate(hermes, network):
    cache_endpoint(hermes)
    usage = openai_usage()
    price = HermesPricing().price("fake-model", usage, provider="custom", base_url=ENDPOINT,
                                  api_mode="chat_completions")
    canonical = hermes.pricing.normalize_usage(usage, provider="custom", api_mode="chat_completions")
    own = hermes.pricing.estimate_usage_cost("fake-model", canonical, provider="custom", base_url=ENDPOINT)
    assert own.amount_usd == price.amount == Decimal("0.0034500")  # 900 x 2e-6 + 100 x 5e-7 + 200 x 8e-6
    assert (price.status, price.source, price.version) == ("estimated", "provider_models_api",
                                                           "openai-compatible-models-api")
    assert network == []


def test_stale_cache_is_still_used_and_never_refreshed(hermes, network):
    cache_endpoint(hermes)
    key = hermes.metadata._normalize_base_url(ENDPOINT)
    hermes.metadata._endpoint_model_metadata_cache_time[key] = time.time() - 86400  # Hermes would refetch this
    price = HermesPricing().price("fake-model", openai_usage(), provider="custom", base_url=ENDPOINT)
    assert price.amount == Decimal("0.0034500")
    assert network == []


def test_no_pricing_causes_a_network_request_while_hermes_own_would(hermes, network):
    """Every route on which Hermes's pricing fetches, with nothing cached: unknown, and not one connection."""
    pricing = HermesPricing()
    routes = [
        ("fake-model", "custom", ENDPOINT),  # an endpoint's /models
        ("claude-sonnet-4-6", "anthropic", "https://api.anthropic.com"),  # also probes the endpoint first
        ("anthropic/claude-sonnet-4.6", "openrouter", "https://openrouter.ai/api/v1"),  # OpenRouter's list
        ("Hermes-4-70B", "nous", ""),  # Nous's portal
    ]
    for model, provider, base_url in routes:
        price = pricing.price(model, openai_usage(), provider=provider, base_url=base_url)
        assert (price.amount, price.status, price.reason) == (None, "unknown", "not_cached"), (model, price)
    assert network == []
    # The guard is real: Hermes's own estimate on the same routes tries to connect.
    canonical = hermes.pricing.CanonicalUsage(input_tokens=900, output_tokens=200)
    for model, provider, base_url in routes:
        hermes.pricing.estimate_usage_cost(model, canonical, provider=provider, base_url=base_url)
    assert {kind for kind, _ in network} & {"getaddrinfo", "connect", "create_connection"}
    hosts = {str(args) for _, args in network}
    assert any("openrouter.ai" in h for h in hosts) and any("192.0.2.10" in h for h in hosts)


def test_openrouter_from_hermes_disk_cache(hermes, network):
    path = hermes.home / "cache" / "openrouter_model_metadata.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"anthropic/claude-sonnet-4.6": {"pricing": {"prompt": "0.000003",
                                                                            "completion": "0.000015"}}}))
    pricing = HermesPricing()
    usage = openai_usage(cached=0)
    price = pricing.price("anthropic/claude-sonnet-4.6", usage, provider="openrouter", base_url="")
    assert price.amount == Decimal("0.006")  # 1000 x 3e-6 + 200 x 15e-6
    assert (price.status, price.source, price.version) == ("estimated", "provider_models_api", "openrouter-models-api")
    # Hermes's in-memory list wins once it holds one.
    hermes.metadata._model_metadata_cache = {"anthropic/claude-sonnet-4.6": {"pricing": {"prompt": "0.000001",
                                                                                        "completion": "0.000001"}}}
    assert pricing.price("anthropic/claude-sonnet-4.6", usage, provider="openrouter").amount == Decimal("0.0012")
    assert network == []


def test_included_unknown_and_no_usage(hermes, network):
    pricing = HermesPricing()
    included = pricing.price("gpt-5.5", openai_usage(), provider="openai-codex")
    assert included == Price(Decimal(0), "included", "none", "included-route")
    assert included.attributes()["hermes.usage.cost"] == 0.0
    unknown = pricing.price("no-such-model", openai_usage(), provider="openai", base_url="")
    assert unknown == Price(None, "unknown", "none", None, "no_price")
    assert unknown.attributes() == {"hermes.usage.cost_status": "unknown", "hermes.usage.cost_source": "none",
                                    "hermes.usage.cost_reason": "no_price"}
    assert pricing.price("gpt-4o", None, provider="openai") == Price(None, "unknown", reason="no_usage")
    assert network == []


def test_hermes_normalised_summary_prices_like_the_raw_usage(hermes):
    pricing = HermesPricing()
    raw = pricing.price("gpt-4o", openai_usage(), provider="openai")
    summary = {"input_tokens": 900, "output_tokens": 200, "cache_read_tokens": 100, "cache_write_tokens": 0,
               "reasoning_tokens": 0, "prompt_tokens": 1000, "total_tokens": 1200, "request_count": 1}
    assert pricing.price("gpt-4o", summary, provider="openai") == raw
    as_dict = {"prompt_tokens": 1000, "completion_tokens": 200, "prompt_tokens_details": {"cached_tokens": 100}}
    assert pricing.price("gpt-4o", as_dict, provider="openai") == raw


def test_hostile_inputs_are_unknown_not_errors(hermes):
    pricing = HermesPricing()
    assert pricing.price(["not", "a", "model"], openai_usage(), provider={"x": 1}, base_url=7).status == "unknown"
    assert pricing.price("gpt-4o", {"prompt_tokens": "many"}, provider="openai").amount == Decimal(0)


def test_without_hermes_costs_are_unknown(hermes, network, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "agent.usage_pricing", None)  # import fails: no Hermes
    assert HermesPricing().price("gpt-4o", openai_usage(), provider="openai") == Price(
        None, "unknown", reason="pricing_unavailable")
    assert network == []


def test_only_three_names_are_rebound_and_hermes_own_calls_still_reach_hermes_functions(hermes):
    before = dict(vars(hermes.pricing))
    HermesPricing().price("gpt-4o", openai_usage(), provider="openai")
    changed = {name for name, value in vars(hermes.pricing).items() if before.get(name) is not value}
    assert changed <= {"fetch_model_metadata", "fetch_endpoint_model_metadata", "resolve_billing_route"}
    for name in ("fetch_model_metadata", "fetch_endpoint_model_metadata"):
        assert getattr(hermes.pricing, name)._hermes_otel_original is getattr(hermes.metadata, name)
    resolve = hermes.pricing.resolve_billing_route
    assert resolve._hermes_otel_original.__module__ == "agent.usage_pricing"
    assert resolve("gpt-4o", provider="openai") == resolve._hermes_otel_original("gpt-4o", provider="openai")


# -- roll-ups ----------------------------------------------------------------------------------------------------


class FixedPricing:
    """Known prices per model, so the roll-up arithmetic is checked on its own."""

    PRICES = {"a": Price(Decimal("0.25"), "estimated", "official_docs_snapshot", "v1"),
              "b": Price(Decimal("0.125"), "estimated", "provider_models_api", "v2"),
              "free": Price(Decimal(0), "included", "none", "included-route"),
              "x": Price(None, "unknown", "none", None, "no_price")}

    def price(self, model, usage, **route):
        return self.PRICES[model] if usage is not None else Price(None, "unknown", reason="no_usage")


@pytest.fixture
def ledger_env():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    ledger = CostLedger(meters.get_meter("test"), pricing=FixedPricing(), profile="work")
    yield SimpleNamespace(ledger=ledger, tracer=provider.get_tracer("test"), spans=exporter, reader=reader)
    provider.shutdown()
    meters.shutdown()


def attempt(env, model, session, turn, usage=True, platform="cli"):
    span = env.tracer.start_span(f"chat {model}")
    context = {"model": model, "provider": "custom", "base_url": "http://127.0.0.1:1/v1", "session_id": session,
               "turn_id": turn, "platform": platform}
    price = env.ledger.record(span, {"model": model}, context, {"usage": {"prompt_tokens": 1}} if usage else {})
    span.end()
    return span, price


def points(reader):
    out = []
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "hermes.usage.cost":
                    assert metric.unit == "{USD}" and metric.data.is_monotonic
                    out += metric.data.data_points
    return out


def test_turn_subagent_and_session_totals(ledger_env):
    env, ledger = ledger_env, ledger_env.ledger
    attempt(env, "a", "parent", "parent:t:1")
    attempt(env, "x", "parent", "parent:t:1")  # consumed tokens, no price: the turn is partial
    ledger.subagent_started({"parent_session_id": "parent", "parent_turn_id": "parent:t:1",
                             "child_session_id": "child", "child_role": "leaf"})
    attempt(env, "b", "child", "child:t:1")
    ledger.subagent_started({"parent_session_id": "child", "parent_turn_id": "child:t:1",
                             "child_session_id": "grandchild", "child_role": "researcher"})
    attempt(env, "b", "grandchild", "grandchild:t:1")
    attempt(env, "a", "parent", "parent:t:2")
    attempt(env, "free", "parent", "parent:t:3")

    assert ledger.turn_attributes("parent:t:1") == {"hermes.turn.cost": 0.5, "hermes.turn.cost_status": "partial",
                                                    "hermes.profile": "work"}
    assert ledger.turn_attributes("child:t:1") == {"hermes.turn.cost": 0.25, "hermes.turn.cost_status": "estimated",
                                                   "hermes.profile": "work"}
    assert ledger.turn_attributes("parent:t:3") == {"hermes.turn.cost": 0.0, "hermes.turn.cost_status": "included",
                                                    "hermes.profile": "work"}
    assert ledger.turn_attributes("never") == {"hermes.profile": "work"}
    assert ledger.subagent_attributes("child") == {"hermes.subagent.cost": 0.25,
                                                   "hermes.subagent.cost_status": "estimated"}
    assert ledger.subagent_attributes("grandchild") == {"hermes.subagent.cost": 0.125,
                                                        "hermes.subagent.cost_status": "estimated"}
    assert ledger.session_attributes("parent") == {"hermes.session.cost": 0.75,
                                                   "hermes.session.cost_status": "partial"}
    assert ledger.session_attributes("child") == {"hermes.session.cost": 0.25,
                                                  "hermes.session.cost_status": "estimated"}
    assert ledger.session_attributes("unknown-session") == {}


def test_only_unknown_attempts_have_a_status_and_no_amount(ledger_env):
    env, ledger = ledger_env, ledger_env.ledger
    attempt(env, "x", "s", "s:t:1")
    attempt(env, "a", "s", "s:t:1", usage=False)
    assert ledger.turn_attributes("s:t:1") == {"hermes.turn.cost_status": "unknown", "hermes.profile": "work"}
    assert ledger.session_attributes("s") == {"hermes.session.cost_status": "unknown"}


def test_counter_dimensions_and_exemplars(ledger_env):
    env, ledger = ledger_env, ledger_env.ledger
    first, _ = attempt(env, "a", "parent", "parent:t:1")
    attempt(env, "x", "parent", "parent:t:1")  # unknown: nothing counted
    ledger.subagent_started({"parent_session_id": "parent", "parent_turn_id": "parent:t:1",
                             "child_session_id": "child", "child_role": "leaf"})
    child, _ = attempt(env, "b", "child", "child:t:1", platform="telegram")
    got = {tuple(sorted(p.attributes.items())): p for p in points(env.reader)}
    main = (("gen_ai.provider.name", "custom"), ("gen_ai.request.model", "a"), ("hermes.platform", "cli"),
            ("hermes.profile", "work"), ("hermes.usage.cost_source", "official_docs_snapshot"))
    leaf = (("gen_ai.provider.name", "custom"), ("gen_ai.request.model", "b"), ("hermes.platform", "telegram"),
            ("hermes.profile", "work"), ("hermes.subagent.role", "leaf"), ("hermes.usage.cost_source", "provider_models_api"))
    assert set(got) == {main, leaf}
    assert got[main].value == 0.25 and got[leaf].value == 0.125
    assert [e.span_id for e in got[main].exemplars] == [first.get_span_context().span_id]
    assert [e.span_id for e in got[leaf].exemplars] == [child.get_span_context().span_id]


def test_chat_span_gets_the_attempt_cost(ledger_env):
    env = ledger_env
    span, price = attempt(env, "b", "s", "s:t:1")
    (finished,) = env.spans.get_finished_spans()
    assert dict(finished.attributes) == {"hermes.usage.cost": 0.125, "hermes.usage.cost_status": "estimated",
                                         "hermes.usage.cost_source": "provider_models_api",
                                         "hermes.usage.pricing_version": "v2"}
    assert price == FixedPricing.PRICES["b"]


def test_maps_are_bounded_and_adopt_moves_totals(ledger_env):
    env = ledger_env
    small = CostLedger(pricing=FixedPricing(), max_entries=2, profile="p")
    for n in range(3):
        span = env.tracer.start_span("chat")
        small.record(span, None, {"model": "a", "session_id": f"s{n}", "turn_id": f"s{n}:t"}, {"usage": {}})
    assert small.session_attributes("s0") == {} and small.session_attributes("s2")["hermes.session.cost"] == 0.25
    bigger = CostLedger(pricing=FixedPricing(), profile="p")
    bigger.adopt(small)
    assert bigger.turn_attributes("s2:t")["hermes.turn.cost"] == 0.25
    assert small.turn_attributes("s2:t") == {"hermes.profile": "p"}


def test_a_failing_pricer_fails_open(ledger_env):
    class Broken:
        def price(self, *args, **kwargs):
            raise RuntimeError("boom")

    ledger = CostLedger(pricing=Broken(), profile="p")
    span = ledger_env.tracer.start_span("chat")
    assert ledger.record(span, None, {"session_id": "s", "turn_id": "t"}, {"usage": {}}) is None
    assert ledger.turn_attributes("t") == {"hermes.profile": "p"}


def test_profile_comes_from_hermes(hermes, monkeypatch, tmp_path):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "profiles" / "ops"))  # a Hermes profile's home
    assert CostLedger(pricing=FixedPricing()).profile == "ops"
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    assert CostLedger(pricing=FixedPricing()).profile == "default"


# -- through the tracker and the bridge, inline and on the records thread --------------------------------


@pytest.fixture(params=MODES)
def traced(request):
    emitter = emitter_for(request.param)
    spans, logs = DrainingSpans(emitter), DrainingLogs(emitter)
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = DrainingReader(emitter)
    meters = MeterProvider(metric_readers=[reader])
    meter = meters.get_meter("test")
    tracker = Tracker(tracer_provider.get_tracer("test"), meter, emitter=emitter,
                      costs=CostLedger(meter, pricing=FixedPricing(), profile="work"))
    bridge = ObserverBridge(tracker, logger_provider.get_logger("t"), meter, emitter=emitter)
    yield SimpleNamespace(tracker=tracker, bridge=bridge, spans=spans, logs=logs, reader=reader)
    emitter.shutdown()
    tracer_provider.shutdown()
    logger_provider.shutdown()
    meters.shutdown()


V1 = {"telemetry_schema_version": "hermes.observer.v1"}


def chat(tracker, model, session, turn, n, response=None, error=None):
    context = {"session_id": session, "turn_id": turn, "api_request_id": f"{turn}:api:{n}", "model": model,
               "provider": "custom", "base_url": "http://127.0.0.1:1/v1", "platform": "cli"}
    call = tracker.start_chat({"model": model}, context)
    tracker.finish_chat(call, response, error=error)


def test_turn_subagent_and_session_end_record_carry_their_totals(traced):
    t, bridge = traced.tracker, traced.bridge
    used = {"usage": {"prompt_tokens": 10, "completion_tokens": 2}}
    bridge.on_hook("pre_llm_call", {**V1, "session_id": "p", "turn_id": "p:t:1", "platform": "cli"})
    chat(t, "a", "p", "p:t:1", 1, error=RuntimeError("HTTP 500"))  # no response: nothing to price
    chat(t, "a", "p", "p:t:1", 1, used)  # its retry
    chat(t, "b", "p", "p:t:1", 2, used)  # e.g. an attempt Hermes rejected (truncated): it used tokens, it counts
    bridge.on_hook("subagent_start", {**V1, "parent_session_id": "p", "parent_turn_id": "p:t:1",
                                      "child_session_id": "c", "child_role": "leaf"})
    bridge.on_hook("pre_llm_call", {**V1, "session_id": "c", "turn_id": "c:t:1", "platform": "cli"})
    chat(t, "b", "c", "c:t:1", 1, used)
    bridge.on_hook("on_session_end", {**V1, "session_id": "c", "turn_id": "c:t:1", "completed": True})
    bridge.on_hook("subagent_stop", {**V1, "parent_session_id": "p", "child_session_id": "c",
                                     "child_status": "completed"})
    chat(t, "x", "p", "p:t:1", 3, used)  # a model without a price
    bridge.on_hook("on_session_end", {**V1, "session_id": "p", "turn_id": "p:t:1", "completed": True})

    spans = traced.spans.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat")]
    assert [s.attributes.get("hermes.usage.cost") for s in chats] == [None, 0.25, 0.125, 0.125, None]
    assert "hermes.usage.cost_status" not in chats[0].attributes  # failed before any response
    assert chats[-1].attributes["hermes.usage.cost_reason"] == "no_price"
    parent, child = sorted((s for s in spans if s.name == "invoke_agent hermes" and "hermes.turn.id" in s.attributes),
                           key=lambda s: s.attributes["hermes.turn.id"] != "p:t:1")
    assert parent.attributes["hermes.turn.cost"] == 0.5 and parent.attributes["hermes.turn.cost_status"] == "partial"
    assert parent.attributes["hermes.profile"] == "work"
    assert child.attributes["hermes.turn.cost"] == 0.125
    (sub,) = [s for s in spans if s.name == "invoke_agent hermes" and s.attributes.get("hermes.subagent.role") == "leaf"]
    assert (sub.attributes["hermes.subagent.cost"], sub.attributes["hermes.subagent.cost_status"]) == (0.125,
                                                                                                     "estimated")
    ends = [r.log_record for r in traced.logs.get_finished_logs()
            if r.log_record.event_name == "hermes.observer.on_session_end"]
    assert [(r.attributes["hermes.session_id"], r.attributes["hermes.session.cost"],
             r.attributes["hermes.session.cost_status"]) for r in ends] == [("c", 0.125, "estimated"),
                                                                            ("p", 0.5, "partial")]
    counted = {(p.attributes["gen_ai.request.model"], p.attributes.get("hermes.subagent.role")): p.value
               for p in points(traced.reader)}
    assert counted == {("a", None): 0.25, ("b", None): 0.125, ("b", "leaf"): 0.125}


def test_a_hermes_without_a_pricing_we_know_is_not_priced_said_once(hermes, monkeypatch, network, caplog):
    """A Hermes whose pricing has neither shape we know (probed by its names, not its version): its pricing is not
    run at all, costs are unknown, said once."""
    from hermes_otel import hermes_compat
    from hermes_otel._internal import log as _log

    monkeypatch.setattr(hermes_compat, "installed_version", lambda: "0.20.0")
    monkeypatch.setattr(hermes_compat, "pricing_fetches", lambda: False)
    monkeypatch.setattr(hermes_compat, "usage_pricing", lambda: None)
    _log.reset()
    pricing = HermesPricing()
    with caplog.at_level("WARNING", logger="hermes_otel"):
        prices = [pricing.price("gpt-4o", openai_usage(), provider="openai") for _ in range(2)]
    assert prices == [Price(None, "unknown", reason="pricing_unavailable")] * 2
    assert [r.getMessage() for r in caplog.records] == [
        "hermes-otel: costs are unknown: hermes-otel does not know how to keep this Hermes's pricing (0.20.0) from "
        "the network; `hermes-otel doctor` says more"]
    assert network == []


def test_the_cache_only_switch_is_this_threads_alone(hermes, network):
    """While hermes-otel prices on one thread, Hermes's own calls on another still fetch as Hermes does."""
    import threading


    HermesPricing().price("gpt-4o", openai_usage(), provider="openai")  # the switch is in place
    other: list = []
    with internals.pricing_from_cache():
        with pytest.raises(internals.NotCached):
            hermes.pricing.fetch_endpoint_model_metadata(ENDPOINT)
        assert network == []
        worker = threading.Thread(target=lambda: other.append(hermes.pricing.fetch_endpoint_model_metadata(ENDPOINT)))
        worker.start()
        worker.join(30)
    assert other == [{}]  # Hermes's own fetcher ran there, tried the network, was refused
    assert any("192.0.2.10" in str(args) for _, args in network)
