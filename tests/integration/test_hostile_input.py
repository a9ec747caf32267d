"""Hostile input, property-based: every hook and every middleware kind, as real Hermes calls them.

The plugin is discovered by real Hermes (entry point); hooks are invoked through Hermes's own
`invoke_hook`, middleware through Hermes's own runners (which we instrument). Random payloads mix
wrong types, None, 10 MB strings, deep nesting, cycles, objects whose repr/str/bool/len explode,
bytes, NaN, duplicate and missing ids, hooks out of order and unknown schema versions.
Nothing may escape into Hermes, results must come back identical, and memory must stay bounded.
"""

from __future__ import annotations

import gc
import math
import random
import threading
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.hermes

BIG = "x" * 10_000_000  # one 10 MB string, shared by every example
SECRET = "sk-proj-HOSTILEabcdefghijklmnop0123"


class Explodes:
    """Every protocol Python might use on a value raises."""

    def __repr__(self):
        raise RuntimeError("repr exploded")

    __str__ = __repr__

    def __bool__(self):
        raise RuntimeError("bool exploded")

    def __len__(self):
        raise RuntimeError("len exploded")

    def __iter__(self):
        raise RuntimeError("iter exploded")

    def __hash__(self):
        raise RuntimeError("hash exploded")

    def __eq__(self, other):
        raise RuntimeError("eq exploded")

    def __getattr__(self, name):
        raise RuntimeError(f"getattr {name} exploded")


def _deep(n: int = 2000):
    node: list = []
    root = node
    for _ in range(n):
        node.append([])
        node = node[0]
    return root


def _cycle():
    d: dict = {"k": 1}
    d["self"] = d
    lst: list = [d]
    lst.append(lst)
    d["list"] = lst
    return d


SPECIALS = [BIG, _deep(), _cycle(), Explodes(), object(), b"\x00\xff" * 100, bytearray(b"ab"), math.nan, math.inf,
            -math.inf, 2**200, SECRET, {"api_key": SECRET, "authorization": f"Bearer {SECRET}"}, (1, (2, (3,))),
            {1: "int key", None: "none key", (1, 2): "tuple key"}, frozenset({1, 2}), ..., NotImplemented]


def _special(i: int):
    return SPECIALS[i]  # by index: hypothesis never has to repr a cycle or an exploding object


atoms = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40), st.binary(max_size=40),
    st.integers(min_value=0, max_value=len(SPECIALS) - 1).map(_special),
)
values = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.none()), inner, max_size=4),
    ),
    max_leaves=8,
)
# Ids collide on purpose (duplicates across hooks and sessions), or are hostile values.
ids = st.one_of(st.sampled_from(["s1", "s2", "s1:t:1", "s2:t:1", "s1:t:1:api:1", "c1", "c2", "", " "]), values)
ID_KEYS = ("session_id", "turn_id", "task_id", "api_request_id", "tool_call_id", "parent_session_id",
           "parent_turn_id", "child_session_id", "child_subagent_id", "tool_name", "model", "provider", "platform")
OTHER_KEYS = ("user_message", "assistant_response", "result", "args", "status", "error", "error_type", "duration_ms",
              "api_duration", "usage", "request", "response", "conversation_history", "middleware_trace", "choice",
              "completed", "interrupted", "retry_count", "status_code", "command", "child_goal")
payloads = st.fixed_dictionaries(
    {},
    optional={
        **{k: ids for k in ID_KEYS},
        **{k: values for k in OTHER_KEYS},
        "telemetry_schema_version": st.one_of(st.just("hermes.observer.v1"), st.just("hermes.observer.v9"), values),
    },
)
QUICK = settings(max_examples=40, phases=[Phase.explicit, Phase.generate], database=None, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _our_hooks():
    from hermes_cli.plugins import get_plugin_manager

    manager = get_plugin_manager()
    ours = {name: [cb for cb in cbs if getattr(cb, "__name__", "").startswith("hermes_otel_")]
            for name, cbs in manager._hooks.items()}
    return manager, {name: cbs for name, cbs in ours.items() if cbs}


@pytest.fixture(params=["NO_CONTENT", "SPAN_AND_EVENT"])
def hostile_env(request, traced, monkeypatch):
    from hermes_cli.plugins import discover_plugins
    from opentelemetry.exporter.otlp.common import http as otlp_http
    from opentelemetry.sdk.metrics._internal.exemplar import exemplar_reservoir

    # Hypothesis checks that the global `random` state does not move while it draws an example (a
    # strategy using `random` would make runs irreproducible). Other threads use it meanwhile (exemplar
    # sampling on our builder thread, export backoff jitter on the exporters' threads, gRPC ones included,
    # retrying against the receivers of earlier tests, Hermes's own threads), which Hypothesis reports as
    # our strategies using `random`; give every thread but this one a generator of its own.
    private = random.Random(0)
    monkeypatch.setattr(exemplar_reservoir, "randrange", private.randrange)
    monkeypatch.setattr(otlp_http, "random", private)
    this_thread = threading.get_ident()
    for name in ("random", "uniform", "randrange", "randint", "getrandbits", "choice", "choices", "shuffle", "sample"):
        shared, own = getattr(random, name), getattr(private, name)
        monkeypatch.setattr(random, name, lambda *a, _s=shared, _o=own, **k: (
            _s if threading.get_ident() == this_thread else _o)(*a, **k))

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", request.param)
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "256")  # what the receiver sees is not the point here
    discover_plugins(force=True)
    yield traced
    traced.current_tracker().end_all("test")


def test_every_hook_survives_hostile_payloads_in_any_order(hostile_env):
    manager, hooks = _our_hooks()
    names = sorted(hooks) + ["not_a_hermes_hook"]

    @QUICK
    @given(st.lists(st.tuples(st.sampled_from(names), payloads), min_size=1, max_size=12))
    def run(calls):
        for hook, payload in calls:
            for callback in hooks.get(hook, hooks["on_session_end"]):  # unknown hook: through a real callback
                assert callback(**payload) is None  # as invoke_hook calls it; observers never inject
            manager.invoke_hook(hook, **payload)  # and through Hermes itself

    run()
    assert hostile_env.current_tracker() is not None  # still tracing afterwards


def _canon(value, depth: int = 0, seen: frozenset = frozenset()):
    """A comparable form: containers by content, floats by text (NaN), objects without value semantics by type."""
    if depth > 50 or id(value) in seen:
        return "<deep or cycle>"
    inner = seen | {id(value)}
    if isinstance(value, dict):
        return ("dict", sorted((repr(type(k)), _canon(k, depth + 1, inner), _canon(v, depth + 1, inner))
                               for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_canon(v, depth + 1, inner) for v in value])
    if isinstance(value, (str, bytes, bytearray, int, bool, type(None))):
        return (type(value).__name__, value if not isinstance(value, str) or len(value) < 100 else hash(value))
    if isinstance(value, float):
        return ("float", repr(value))
    return ("object", type(value).__name__)


def _outcome(fn, *args, **kwargs):
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - what Hermes would see
        return "raise", exc


class Terminal:
    """The real call at the end of the chain: returns a unique object, or raises, and counts its calls."""

    def __init__(self, fails: bool) -> None:
        self.fails, self.calls, self.result, self.error = fails, 0, object(), ValueError("downstream failed")

    def __call__(self, payload):
        self.calls += 1
        if self.fails:
            raise self.error
        return self.result


def test_every_middleware_kind_returns_identical_results(hostile_env, with_middleware_plugins):
    from hermes_cli import middleware

    @QUICK
    @given(values, values, payloads, st.booleans(), st.sampled_from(["terminal", "read_file", "x"]))
    def run(request, args, context, fails, tool_name):
        context = {k: v for k, v in context.items() if k not in ("request", "args", "tool_name", "next_call")}
        for runner, lead in ((middleware.run_llm_execution_middleware, (request,)),
                             (middleware.run_tool_execution_middleware, (tool_name, args))):
            terminal = Terminal(fails)
            kind, value = _outcome(runner, *lead, terminal, **context)
            assert terminal.calls <= 1  # never twice
            if fails:  # the downstream error reaches the caller itself, never a successful None
                assert kind == "raise" and value is terminal.error
            elif terminal.calls:
                assert kind == "ok" and value is terminal.result
        for apply, lead in ((middleware.apply_llm_request_middleware, (request,)),
                            (middleware.apply_tool_request_middleware, (tool_name, args))):
            ours = _outcome(apply, *lead, **context)
            hermes = _outcome(apply.__wrapped__, *lead, **context)  # Hermes's function without our wrapper
            assert ours[0] == hermes[0]
            if ours[0] == "ok":
                # Equal as values: Hermes deep-copies payloads, so a bare object() comes back as a new one.
                assert _canon((ours[1].payload, ours[1].original_payload, ours[1].changed, ours[1].trace)) == _canon(
                    (hermes[1].payload, hermes[1].original_payload, hermes[1].changed, hermes[1].trace))
            else:
                assert type(ours[1]) is type(hermes[1])

    run()


@pytest.mark.parametrize("hostile_env", ["SPAN_AND_EVENT"], indirect=True)  # the heavier path
def test_memory_stays_bounded_under_a_stream_of_hostile_calls(hostile_env, monkeypatch, tmp_path):
    """Unique ids every call (nothing ever ends), 10 MB strings, cycles: retained memory levels off.

    Exported to files (the embedded default), so an in-process receiver's store does not count."""
    from hermes_cli.plugins import discover_plugins

    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_BSP_MAX_QUEUE_SIZE"):
        monkeypatch.delenv(var, raising=False)
    toml = tmp_path / "plugins.toml"
    toml.write_text(f'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config.file]\n'
                    f'directory = "{tmp_path / "otel"}"\nmax_bytes = 1000000\nbackups = 1\n')
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    discover_plugins(force=True)
    assert hostile_env.current_telemetry().settings.otlp == {}
    _, hooks = _our_hooks()
    # The hooks that open state of ours (sessions, turns, tool outcomes, subagents, approvals), never closed.
    order = ["on_session_start", "pre_llm_call", "post_tool_call", "subagent_start", "pre_approval_request"]

    def burst(start: int, count: int) -> None:
        for i in range(start, start + count):
            payload = {"telemetry_schema_version": "hermes.observer.v1", "session_id": f"s{i}",
                       "turn_id": f"s{i}:t:{i}", "api_request_id": f"s{i}:t:{i}:api:1", "tool_call_id": f"c{i}",
                       "child_session_id": f"child{i}", "user_message": BIG if i % 100 == 0 else "hi",
                       "result": SPECIALS[i % len(SPECIALS)], "args": _cycle()}
            for hook in order:
                for callback in hooks[hook]:
                    callback(**payload)

    def settled() -> int:
        hostile_env.flush(10)  # queued batches drained: what is left is state we keep
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    def retained_growth(start: int, count: int) -> float:
        before = settled()
        burst(start, count)
        return (settled() - before) / 2**20

    # Traced from the start: objects allocated before tracemalloc.start() are not counted when they are
    # freed, so a late start would show bounded maps refilling as growth.
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        burst(0, 1100)  # past every bound (open and recently ended turns, tools, approvals, ... are capped at 1024)
        per_turn_ms = (time.monotonic() - t0) / 1100 * 1000
        second = retained_growth(1100, 400)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"\n[hostile] retained growth over 400 hostile turns past the bounds: {second:+.2f} MiB; "
          f"peak traced {peak / 2**20:.1f} MiB; {per_turn_ms:.2f} ms of hooks per hostile turn")
    assert second < 2.0, second  # levelled off: new turns replace the oldest ones
    assert hostile_env.current_tracker().open_turns() <= 1024
    assert peak / 2**20 < 64, peak  # a 10 MB string is capped before it is copied around
