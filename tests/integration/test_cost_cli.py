"""`hermes-otel cost` on the files of real `hermes chat` runs in two Hermes profiles, reconciled with each
profile's state.db (Hermes's own per-session cost) and with the session's end record."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_otel.local import decode
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall, Usage
from tests.harness.hermes import clean_env, hermes_chat, write_home

pytestmark = pytest.mark.hermes

PRICES = {"prompt": "0.000002", "completion": "0.000008", "cache_read": "0.0000005"}
CLI = [sys.executable, "-m", "hermes_otel.cli.main"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two profiles (`alpha`: a tool call and an answer; `beta`: one answer), one shared telemetry directory."""
    root = tmp_path_factory.mktemp("hermes-root")
    otel = root / "otel"
    homes = {}
    with FakeLLMServer(pricing=PRICES) as server:
        for name, script in (
            ("alpha", [Reply.tools(ToolCall("terminal", {"command": "echo a"}, id="call_a")),
                       Reply(content="A", usage=Usage(300, 10))]),
            ("beta", [Reply(content="B", usage=Usage(120, 30, cached_tokens=20))]),
        ):
            home = write_home(root / "profiles" / name, server.base_url)
            toml = home / "plugins.toml"
            toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                            f"file = {{ enabled = true, directory = {json.dumps(str(otel))} }}\n")
            server.push(*script)
            result = hermes_chat(f"hello from {name}", env=clean_env(home, HERMES_OTEL_PLUGINS_TOML=str(toml)))
            assert result.returncode == 0 and result.answer == name.upper()[0], result.stderr[-2000:]
            homes[name] = home
    return otel, homes


def state(home: Path) -> tuple[str, float, str]:
    with sqlite3.connect(home / "state.db") as db:
        ((session, spent, status),) = db.execute("select id, estimated_cost_usd, cost_status from sessions")
    return session, spent, status


def cost(otel: Path, *args: str) -> dict:
    run = subprocess.run([*CLI, "cost", str(otel), "--json", *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def rows(data: dict) -> dict[str, tuple[float, int]]:
    return {r["key"]: (round(r["cost_usd"], 12), r["attempts"]) for r in data["rows"]}


ALPHA = 11 * 2e-6 + 7 * 8e-6 + 300 * 2e-6 + 10 * 8e-6  # the default 11/7 reply, then 300/10
BETA = 100 * 2e-6 + 20 * 5e-7 + 30 * 8e-6


def test_every_view_equals_hermes_state_db(recorded):
    otel, homes = recorded
    sessions = {name: state(home) for name, home in homes.items()}
    assert {name: (round(spent, 12), status) for name, (_, spent, status) in sessions.items()} == {
        "alpha": (round(ALPHA, 12), "estimated"), "beta": (round(BETA, 12), "estimated")}
    # Per session: exactly what Hermes wrote to each profile's state.db.
    assert rows(cost(otel, "--by", "session")) == {sessions["alpha"][0]: (round(ALPHA, 12), 2),
                                                   sessions["beta"][0]: (round(BETA, 12), 1)}
    assert rows(cost(otel, "--by", "profile")) == {"alpha": (round(ALPHA, 12), 2), "beta": (round(BETA, 12), 1)}
    assert rows(cost(otel, "--by", "model")) == {"fake-model": (round(ALPHA + BETA, 12), 3)}
    assert rows(cost(otel, "--by", "subagent")) == {"(main)": (round(ALPHA + BETA, 12), 3)}
    turns = cost(otel, "--by", "turn")
    assert sorted(r["key"].split(":")[0] for r in turns["rows"]) == sorted(s for s, _, _ in sessions.values())
    day = cost(otel, "--by", "day")
    (only,) = day["rows"]
    assert only["key"] == only["first_seen"][:10] and only["attempts"] == 3
    assert round(day["total"]["cost_usd"], 12) == round(ALPHA + BETA, 12)
    assert cost(otel, "--since", "1h")["total"]["attempts"] == 3
    assert cost(otel, "--since", "2999-01-01")["rows"] == []


def test_the_session_end_records_carry_the_state_db_total(recorded):
    otel, homes = recorded
    totals = {}
    for line in (otel / "logs.jsonl").read_text().splitlines():
        for resource in json.loads(line)["resourceLogs"]:
            for scope in resource["scopeLogs"]:
                for record in scope["logRecords"]:
                    attrs = decode.attributes(record.get("attributes"))
                    if record.get("eventName") in ("hermes.observer.on_session_end",
                                                   "hermes.observer.on_session_finalize"):
                        totals[(record["eventName"], attrs["hermes.session_id"])] = attrs.get("hermes.session.cost")
    for home in homes.values():
        session, spent, _ = state(home)
        assert totals[("hermes.observer.on_session_end", session)] == pytest.approx(spent, abs=1e-12)
        assert totals[("hermes.observer.on_session_finalize", session)] == pytest.approx(spent, abs=1e-12)


def test_the_table(recorded):
    otel, _ = recorded
    run = subprocess.run([*CLI, "cost", str(otel), "--by", "profile"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["profile", "cost", "status", "attempts", "unpriced", "input", "output", "first",
                                "seen", "(UTC)"]
    assert lines[2].split()[:7] == ["alpha", "$0.000758", "estimated", "2", "0", "311", "17"]
    assert lines[3].split()[:7] == ["beta", "$0.00045", "estimated", "1", "0", "120", "30"]
    assert lines[5].split() == ["total", "$0.001208", "estimated", "3", "0", "431", "47"]
