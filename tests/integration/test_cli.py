"""The `hermes chat` CLI with the plugin enabled the documented way, and the `hermes-otel` CLI."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hermes_otel.cli import view
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import BIN, clean_env, hermes_chat, write_home
from tests.harness.otlp_receiver import OTLPReceiver
from tests.harness.trees import tree

pytestmark = pytest.mark.hermes

TOOL_THEN_ANSWER = (Reply.tools(ToolCall("terminal", {"command": "echo cli"}, id="call_cli")), Reply.text("cli ok"))
EXPECTED_TREE = [["invoke_agent hermes", ["chat fake-model", "execute_tool terminal", "chat fake-model"]]]


@pytest.fixture
def home(tmp_path: Path):
    """A fresh HERMES_HOME with the plugin enabled by `hermes-otel enable` (the documented step)."""
    with FakeLLMServer(TOOL_THEN_ANSWER) as server:
        home = write_home(tmp_path / "home", server.base_url, enable=False)
        enabled = hermes_otel_cli("enable", env=clean_env(home))
        assert enabled.returncode == 0, enabled.stdout + enabled.stderr
        assert "hermes_otel" in (home / "config.yaml").read_text()
        yield home, server


def hermes_otel_cli(*args: str, env, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hermes-otel"), *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_cli_run_exports_over_otlp_http(home):
    home_dir, server = home
    with OTLPReceiver() as receiver:
        env = clean_env(home_dir, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        result = hermes_chat("run echo cli", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.answer == "cli ok"
        # Flushed at session finalize / exit: everything is there once the process ended.
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=5)
        assert tree(spans) == EXPECTED_TREE
        assert {s.resource["service.name"] for s in spans} == {"hermes-agent"}
        assert "/v1/traces" in receiver.paths
    # The local record stays on beside an endpoint (issue 26): the traces file holds the same spans, and `view` and
    # `cost` show this turn; the logs and metrics go to the endpoint only. (A batch still unacknowledged 100 ms into
    # the exit, such as the final metrics collection on a loaded machine, may be in otel/spool: the spool's job.)
    assert sorted(p.name for p in (home_dir / "otel").glob("*.jsonl*")) == ["traces.jsonl"]
    local = view.load_spans(home_dir / "otel")
    assert sorted((s["trace_id"], s["span_id"]) for s in local) == sorted((s.trace_id, s.span_id) for s in spans)
    shown = hermes_otel_cli("view", "--ascii", "--width", "120", env=env)
    assert shown.returncode == 0 and spans[0].trace_id in shown.stdout.splitlines()[0], shown.stderr


def test_cli_run_with_nothing_configured_writes_files_and_view_shows_it(home):
    home_dir, _ = home
    env = clean_env(home_dir)
    result = hermes_chat("run echo cli", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.answer == "cli ok"
    otel = home_dir / "otel"
    assert sorted(p.name for p in otel.iterdir()) == ["logs.jsonl", "metrics.jsonl", "traces.jsonl"] or (
        sorted(p.name for p in otel.iterdir()) == ["metrics.jsonl", "traces.jsonl"]
    )
    assert otel.stat().st_mode & 0o777 == 0o700
    assert (otel / "traces.jsonl").stat().st_mode & 0o777 == 0o600
    first = json.loads((otel / "traces.jsonl").read_text().splitlines()[0])
    assert "resourceSpans" in first
    metrics = [json.loads(line) for line in (otel / "metrics.jsonl").read_text().splitlines()]
    names = {m["name"] for line in metrics for rm in line["resourceMetrics"] for sm in rm["scopeMetrics"] for m in sm["metrics"]}
    assert {"gen_ai.client.inference.duration", "gen_ai.client.inference.usage.input_tokens",
            "gen_ai.execute_tool.duration"} <= names

    shown = hermes_otel_cli("view", "--ascii", "--width", "120", env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("trace ") and "invoke_agent hermes" in lines[0] and "4 spans" in lines[0]
    assert [line.split("  ")[0].strip() for line in lines[1:5]] == [
        "invoke_agent hermes",
        "|- chat fake-model",
        "|- execute_tool terminal",
        "`- chat fake-model",
    ]


def test_broken_plugins_toml_is_reported_once_and_hermes_answers(home):
    home_dir, _ = home
    (home_dir / "plugins.toml").write_text(
        'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\notlp = { timeout_millis = "soon" }\n'
    )
    env = clean_env(home_dir)
    result = hermes_chat("run echo cli", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.answer == "cli ok"
    log = (home_dir / "logs" / "agent.log").read_text() if (home_dir / "logs" / "agent.log").exists() else ""
    text = result.stderr + log
    expected = (
        f"{home_dir / 'plugins.toml'}: components[0].config.otlp.timeout_millis: "
        "expected an integer, found string 'soon'"
    )
    assert expected in text
    assert log.count("hermes-otel configuration:") == 1, log
    # Telemetry carried on with defaults: the run is in the embedded files.
    assert (home_dir / "otel" / "traces.jsonl").exists()


def test_config_validate_and_doctor(home, tmp_path):
    home_dir, _ = home
    good = tmp_path / "good.toml"
    good.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nservice_name = "x"\n')
    bad = tmp_path / "bad.toml"
    bad.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\nservice_name = 3\n')
    env = clean_env(home_dir)
    ok = hermes_otel_cli("config", "validate", str(good), env=env)
    assert (ok.returncode, ok.stdout.strip()) == (0, f"{good}: valid; hermes_otel component: 1 key(s) set (service_name)")
    broken = hermes_otel_cli("config", "validate", str(bad), env=env)
    assert broken.returncode == 1
    assert broken.stdout.splitlines() == [
        f"error: {bad}: components[0].config.service_name: expected a string, found integer 3",
        f"{bad}: invalid: hermes-otel ignores this file and runs on environment and defaults (see `hermes-otel config keys`)",
    ]

    doctor = hermes_otel_cli("doctor", env={**env, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20s3cr3t"})
    assert "s3cr3t" not in doctor.stdout
    assert "ok    hermes-agent 0.19.0: full telemetry (middleware layers included)" in doctor.stdout
    assert "ok    every Hermes private name hermes-otel uses was found" in doctor.stdout
    assert "ok    plugin discoverable (entry point)" in doctor.stdout
    assert f"ok    enabled in {home_dir / 'config.yaml'}" in doctor.stdout
    assert f"ok    dashboard Traces tab installed ({home_dir / 'plugins' / 'hermes_otel' / 'dashboard'})" in doctor.stdout
    # The endpoint defaults to nothing: headers alone do not export, so the doctor is happy.
    assert doctor.returncode == 0, doctor.stdout

    dead = hermes_otel_cli("doctor", env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert dead.returncode == 1
    assert ("FAIL  traces endpoint http://127.0.0.1:9/v1/traces (http/protobuf): not reachable (Connection refused): "
            f"traces wait in the spool {home_dir / 'otel' / 'spool'} (100.0 MiB, 7 days at most) and are re-sent once "
            "it takes them") in dead.stdout


def test_disable_then_enable_says_what_it_did(home):
    home_dir, _ = home
    env = clean_env(home_dir)
    tab = home_dir / "plugins" / "hermes_otel" / "dashboard"
    assert (tab / "manifest.json").is_file()  # `enable` installed the dashboard's Traces tab
    disabled = hermes_otel_cli("disable", env=env)
    assert (disabled.returncode, disabled.stdout.splitlines()) == (0, [
        "hermes-otel disable: ran `hermes plugins disable hermes_otel`: ⊘ Plugin hermes_otel disabled. Takes "
        "effect on next session.",
        f"hermes-otel disable: removed the dashboard's Traces tab from {tab}"])
    assert not tab.parent.exists()
    import yaml

    plugins = yaml.safe_load((home_dir / "config.yaml").read_text())["plugins"]
    assert "hermes_otel" not in plugins["enabled"] and "hermes_otel" in plugins["disabled"]
    enabled = hermes_otel_cli("enable", env=env)
    assert enabled.stdout.startswith(
        "hermes-otel enable: ran `hermes plugins enable hermes_otel --no-allow-tool-override`: ✓ Plugin hermes_otel "
        "enabled."), enabled.stdout
    assert enabled.stdout.splitlines()[-1] == (f"hermes-otel enable: installed the dashboard's Traces tab in {tab} "
                                               "(restart `hermes dashboard` to see it)")
    plugins = yaml.safe_load((home_dir / "config.yaml").read_text())["plugins"]
    assert "hermes_otel" in plugins["enabled"] and "hermes_otel" not in plugins["disabled"]


def _demo_home(stdout: str) -> Path:
    first = stdout.splitlines()[0]
    return Path(first.split("HERMES_HOME=", 1)[1].split(";", 1)[0])


def test_demo_shows_the_middleware_layer_and_does_not_point_at_what_it_removed():
    env = {k: v for k, v in clean_env(Path("/nonexistent")).items() if k != "HERMES_HOME"}
    demo = hermes_otel_cli("demo", "--ascii", env=env, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    home = _demo_home(demo.stdout)
    assert not home.exists()
    assert str(home) not in "\n".join(demo.stdout.splitlines()[1:])  # nothing after the first line names it
    waterfall = [re.match(r"[|`\- ]*\S+(?: \S+)*", line).group(0) for line in demo.stdout.splitlines()
                 if line.startswith(("invoke_agent", "|", "`")) and not re.match(r"[|` ]*\* ", line)]  # spans, not events
    # Each model request is an HTTP client span under its chat span (http.client_spans, on by default).
    assert waterfall == ["invoke_agent hermes", "|- chat fake-model", "| `- POST", "|- execute_tool terminal",
                         "| `- tool_execution demo_middleware", "|   `- tool_call terminal", "`- chat fake-model"]
    # and under the last chat span too (an indented line the filter above leaves out): one per model request
    assert sum(bool(re.match(r"[|` ]*`- POST ", line)) for line in demo.stdout.splitlines()) == 2
    # The scripted model publishes prices (3 and 15 USD per million tokens); Hermes's pricing prices both calls.
    lines = demo.stdout.splitlines()
    # The turn's total first (before its tokens, which a narrow terminal may cut), then each call's price.
    assert "model fake-model  total $0.000276  tokens " in next(line for line in lines
                                                          if line.startswith("invoke_agent"))
    assert [re.search(r"cost \$[0-9.]+", line).group(0) for line in lines if line.startswith(("|- chat", "`- chat"))
            ] == ["cost $0.000138", "cost $0.000138"]
    assert "Cost: $0.000276 for the turn, each model call priced by Hermes's own pricing" in demo.stdout
    assert demo.stdout.rstrip().endswith("run `hermes-otel demo --keep` to keep its files and view them again)")


def test_demo_keep_leaves_the_files_it_names_with_the_rewrite_events():
    env = {k: v for k, v in clean_env(Path("/nonexistent")).items() if k != "HERMES_HOME"}
    demo = hermes_otel_cli("demo", "--keep", "--ascii", env=env, timeout=300)
    home = _demo_home(demo.stdout)
    try:
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert f"View again with: hermes-otel view {home / 'otel'}" in demo.stdout.splitlines()
        lines = [json.loads(line) for line in (home / "otel" / "traces.jsonl").read_text().splitlines()]
        spans = [s for line in lines for r in line["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
        chats = sorted((s for s in spans if s["name"] == "chat fake-model"), key=lambda s: int(s["startTimeUnixNano"]))
        events = [[(e["name"], {a["key"]: a["value"].get("stringValue") for a in e["attributes"]}) for e in s["events"]]
                  for s in chats]
        rewrite = ("hermes.middleware.rewrite", {
            "hermes.middleware.kind": "llm_request", "hermes.middleware.plugin": "demo_middleware",
            "hermes.middleware.callback": "hermes_plugins.demo_middleware.pin_temperature",
            "hermes.middleware.index": None, "hermes.middleware.changed_keys": None,
            "hermes.middleware.source": "demo_middleware",
            "hermes.middleware.reason": "pinned temperature for reproducible runs"})
        assert events == [[rewrite], [rewrite]]
    finally:
        shutil.rmtree(home, ignore_errors=True)
