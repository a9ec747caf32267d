"""`hermes-otel demo`: a real Hermes session against a scripted local model, and its trace.

The session runs in a temporary HERMES_HOME with hermes_otel enabled by `hermes-otel enable` and a
small third-party middleware plugin (`testing/demo_plugin`: one request rewrite, one execution layer),
so the waterfall shows what the package is for: the layer spans and the rewrite events.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ..cost import pricing as cost
from . import enable, view
from .terminal import wants_color

PROMPT = "Run `echo hello from hermes-otel` in the terminal and tell me what it printed."
DEMO_PLUGIN = Path(__file__).parents[1] / "testing" / "demo_plugin"


def run(keep: bool = False, ascii: bool = False) -> int:
    from ..testing.fake_llm import DEMO_PRICES, FakeLLMServer, demo_script

    hermes = enable.hermes_executable()
    if hermes is None:
        print("hermes-otel demo: the `hermes` command was not found: install hermes-otel with its `hermes` extra "
              "(`hermes-otel[hermes]`)",
              file=sys.stderr)
        return 1
    home = Path(tempfile.mkdtemp(prefix="hermes-otel-demo-"))
    otel_dir = home / "otel"
    ok = False
    try:
        with FakeLLMServer(demo_script(), pricing=DEMO_PRICES) as server:
            env = _demo_env(home, server.base_url, otel_dir)
            print(f"$ hermes-otel enable   (HERMES_HOME={home}; a sample middleware plugin is installed next to it)")
            said = io.StringIO()
            if enable.enable(env=env, out=said, tab=keep) != 0:  # the tab only in a home that is kept
                # Hermes 0.20+ admit a plugin set through a package manager that downloads a runtime: offline it
                # refuses. The demo's home is its own, so it says so and enables the plugin without it.
                print(said.getvalue(), end="")
                print("$ hermes-otel enable --config-only   (the demo's own HERMES_HOME)")
                said = io.StringIO()
                if enable.enable(env=env, out=said, tab=keep, config_only=True) != 0:
                    print(said.getvalue(), file=sys.stderr, end="")
                    return 1
            print(said.getvalue(), end="")
            print(f"$ hermes chat -q {PROMPT!r}   (scripted model at {server.base_url})")
            started = time.monotonic()
            chat = enable.run([hermes, "chat", "-q", PROMPT, "--provider", "custom", "-m", "fake-model", "-t",
                               "terminal", "--max-turns", "4", "-Q", "--yolo", "--source", "tool"], env, timeout=300)
            elapsed = time.monotonic() - started
        answer = chat.stdout.strip()
        print(f"Hermes answered in {elapsed:.1f}s: {answer.splitlines()[-1] if answer else '(nothing)'}\n")
        if chat.returncode != 0:
            print(chat.stderr[-4000:], file=sys.stderr)
            return 1
        traces = view.group_traces(view.load_spans(otel_dir)) if otel_dir.exists() else []
        if not traces:
            print(f"hermes-otel demo: no trace was written to {otel_dir}", file=sys.stderr)
            print(chat.stderr[-4000:], file=sys.stderr)
            return 1
        width = shutil.get_terminal_size((120, 24)).columns
        sys.stdout.write(view.render(traces, width=width, color=wants_color(), ascii=ascii))
        print("\n" + _cost_note(traces))
        ok = True
        return 0
    finally:
        if keep:
            if ok:
                print(f"\nTelemetry files: {otel_dir} (traces.jsonl, logs.jsonl, metrics.jsonl — OTLP JSON lines)")
                print(f"View again with: hermes-otel view {otel_dir}")
                print(f"Or in Hermes's dashboard (the Traces tab): HERMES_HOME={home} hermes dashboard")
            print(f"(HERMES_HOME {home} kept)")
        else:
            shutil.rmtree(home, ignore_errors=True)
            print("\n(the demo's temporary HERMES_HOME is removed; run `hermes-otel demo --keep` to keep its files "
                  "and view them again)")


def _demo_env(home: Path, base_url: str, otel_dir: Path) -> dict[str, str]:
    shutil.copytree(DEMO_PLUGIN, home / "plugins" / "demo_middleware",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (home / "config.yaml").write_text(
        "model:\n"
        "  provider: custom\n"
        "  default: fake-model\n"
        f"  base_url: {base_url}\n"
        "  api_key: sk-demo-not-a-real-key\n"
        "security:\n"
        "  tirith_enabled: false\n"
        "auxiliary:\n"
        "  title_generation:\n"
        "    enabled: false\n"
        "plugins:\n"
        "  enabled:\n"
        "  - demo_middleware\n",
        encoding="utf-8",
    )
    plugins_toml = home / "plugins.toml"
    plugins_toml.write_text(
        "version = 1\n\n[[components]]\nkind = \"hermes_otel\"\n\n[components.config]\n"
        f"file = {{ enabled = true, directory = {json.dumps(str(otel_dir))} }}\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "OTEL_SDK_DISABLED"))}
    env.update(HERMES_HOME=str(home), HERMES_OTEL_PLUGINS_TOML=str(plugins_toml), NO_COLOR="1")
    return env


def _cost_note(traces: list[view.Trace]) -> str:
    """What the turn cost, or why that is unknown, in a sentence."""
    roots = [root["attributes"] for trace in traces for root in trace.roots if root["name"].startswith("invoke_agent")]
    spent = [a[cost.TURN_COST] for a in roots if isinstance(a.get(cost.TURN_COST), (int, float))]
    if spent:
        return (f"Cost: {cost.format_usd(sum(spent))} for the turn, each model call priced by Hermes's own pricing "
                "(the scripted model publishes its prices on /v1/models, as OpenAI-compatible servers may). "
                "`hermes-otel cost` breaks it down.")
    chats = [s["attributes"] for trace in traces for s in trace.spans if s["name"].startswith("chat")]
    reasons = sorted({str(a.get(cost.USAGE_COST_REASON)) for a in chats if a.get(cost.USAGE_COST_REASON)})
    why = "; ".join(cost.REASONS.get(r, r) for r in reasons) or "no call reported its usage"
    return f"Cost: unknown ({why}). See docs/cost.md: What did it cost?"
