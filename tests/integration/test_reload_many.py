"""A hundred `discover_plugins(force=True)` in a row, with the configuration changing along the way.

No processors, threads or hook registrations pile up, each new configuration applies, and no span is
lost: a turn is driven through Hermes's own hooks and runners between reloads (one turn even spans a
reload), and every one of them reaches the receiver.
"""

from __future__ import annotations

import threading

import pytest

from hermes_otel.testing.fake_llm import Reply
from tests.harness.hermes import run_agent

pytestmark = pytest.mark.hermes

V1 = {"telemetry_schema_version": "hermes.observer.v1"}


def _our_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(("Otel", "hermes-otel")))


def _begin(manager, middleware, n: int) -> dict:
    ids = {"session_id": "reload-session", "task_id": "t", "turn_id": f"reload-session:t:{n:08x}"}
    manager.invoke_hook("pre_llm_call", user_message="hi", model="fake-model", platform="cli", **ids, **V1)
    response = object()
    api = {**ids, "api_request_id": f"{ids['turn_id']}:api:1", "model": "fake-model", "provider": "custom"}
    assert middleware.run_llm_execution_middleware({"model": "fake-model"}, lambda r: response, **api) is response
    return ids


def _end(manager, ids: dict) -> None:
    manager.invoke_hook("on_session_end", completed=True, interrupted=False, **ids, **V1)


def test_a_hundred_reloads(traced, llm, receiver, monkeypatch):
    from hermes_cli import middleware
    from hermes_cli.plugins import discover_plugins, get_plugin_manager

    runtime = traced
    manager = get_plugin_manager()
    threads_at_start = len(_our_threads())
    counts = []
    spanning = _begin(manager, middleware, 999)  # open across the first configuration change
    for i in range(100):
        if i % 10 == 0:
            monkeypatch.setenv("OTEL_SERVICE_NAME", f"agent-v{i // 10}")
        discover_plugins(force=True)
        manager = get_plugin_manager()
        if i == 15:
            _end(manager, spanning)
        _end(manager, _begin(manager, middleware, i))
        live = runtime.current_telemetry()
        assert live.settings.service_name == f"agent-v{i // 10}"  # the new configuration applies
        assert len(live.tracer_provider._active_span_processor._span_processors) == 2  # OTLP + traces file
        ours = {name: [cb for cb in cbs if getattr(cb, "__name__", "").startswith("hermes_otel_")]
                for name, cbs in manager._hooks.items()}
        assert all(len(cbs) == 1 for cbs in ours.values()) and "on_session_end" in ours
        counts.append(len(_our_threads()))
    # Threads: the live pipeline plus the two retired ones kept for their open spans; and, just after a
    # change, the builder of the pipeline that was shut down (it exits at its next wake-up) and the
    # thread running that bounded shutdown. Never more.
    assert max(counts) <= 3 * threads_at_start + 2, counts
    assert counts[-1] <= counts[49], counts  # level, not growing (earlier tests' threads may still be ending)

    llm.push(Reply.text("after a hundred reloads"))
    assert run_agent(llm.base_url, "hi")["final_response"] == "after a hundred reloads"
    runtime.flush(10)
    spans = receiver.wait_for_spans(
        lambda s: sum(x.name == "invoke_agent hermes" for x in s) >= 102, timeout=30)
    roots = [s for s in spans if s.name == "invoke_agent hermes"]
    turn_ids = sorted(r.attributes["hermes.turn.id"] for r in roots if r.attributes["hermes.turn.id"].startswith("reload"))
    assert turn_ids == sorted(f"reload-session:t:{n:08x}" for n in [*range(100), 999])  # none lost, none twice
    by_turn = {r.attributes["hermes.turn.id"]: r for r in roots}
    for n in range(100):  # each turn exported under the configuration it ran with
        assert by_turn[f"reload-session:t:{n:08x}"].resource["service.name"] == f"agent-v{n // 10}"
    last = [r for r in roots if not r.attributes["hermes.turn.id"].startswith("reload")]
    assert [r.resource["service.name"] for r in last] == ["agent-v9"]
