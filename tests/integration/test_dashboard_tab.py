"""Issue 26: the Traces tab in a real `hermes dashboard`, driven by a real headless Chromium (Debian's `chromium`,
through Playwright for Python launched with that executable; `make backends` installs it).

The home's traces come from real `hermes chat` runs with the demo's sample middleware plugin (one request rewrite
on each chat span, one execution layer around each tool call), enabled by `hermes-otel enable`, which also
installs the tab. Checked: the tab in the navigation, the rows equal to the files, a click shows the waterfall
with a layer bar, a rewrite marker and the turn's cost, a turn run while the page is open appears without a
reload, no console errors, 401 without the session token. With HERMES_OTEL_SCREENSHOTS=1 the screenshots of each
view (dark and light) are written to docs/images/ for docs/dashboard.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_otel.cli import view
from hermes_otel.cli.demo import DEMO_PLUGIN
from hermes_otel.testing.fake_llm import DEMO_PRICES, FakeLLMServer, Reply, ToolCall
from tests.harness.hermes import BIN, clean_env, hermes_chat, write_home

pytestmark = pytest.mark.hermes

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
TURN = (Reply.tools(ToolCall("terminal", {"command": "echo traced"}, id="call_t")), Reply.text("traced ok"))
LIGHT_THEME = "name: paper\nlabel: Paper\ndescription: a light theme\npalette:\n  background: '#f7f4ec'\n" \
              "  midground: '#1f2328'\n"


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    if CHROMIUM is None:
        pytest.skip("no chromium browser: `make backends` installs Debian's chromium")
    return sync_playwright


@contextlib.contextmanager
def running_dashboard(env: dict[str, str]) -> Iterator[str]:
    """`hermes dashboard` on a free loopback port; its base URL."""
    process = subprocess.Popen(
        [str(BIN / "hermes"), "dashboard", "--no-open", "--host", "127.0.0.1", "--port", "0", "--skip-build"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        deadline = time.monotonic() + 90
        assert process.stdout is not None
        while port is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            if match := re.search(r"HERMES_DASHBOARD_READY port=(\d+)", line):
                port = int(match.group(1))
        assert port is not None, "the dashboard never said HERMES_DASHBOARD_READY"
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def dashboard(tmp_path):
    """A home with one recorded turn, the tab installed by `hermes-otel enable`, `hermes dashboard` on a free port."""
    sync_playwright = _playwright()
    with FakeLLMServer(TURN * 3, pricing=DEMO_PRICES) as server:
        home = write_home(tmp_path / "home", server.base_url, enable=False, plugins=("demo_middleware",))
        shutil.copytree(DEMO_PLUGIN, home / "plugins" / "demo_middleware")
        (home / "dashboard-themes").mkdir()
        (home / "dashboard-themes" / "paper.yaml").write_text(LIGHT_THEME)
        env = clean_env(home)
        enabled = subprocess.run([str(BIN / "hermes-otel"), "enable"], env=env, capture_output=True, text=True,
                                 timeout=120)
        assert enabled.returncode == 0, enabled.stdout + enabled.stderr
        first = hermes_chat("run echo traced", env=env)
        assert first.returncode == 0 and first.answer == "traced ok", first.stderr[-3000:]
        with running_dashboard(env) as base:
            yield home, env, base, sync_playwright


def add_failing_plugin(home: Path) -> None:
    """The tests' mw_beta (a layer that raises before next_call, an anonymous rewrite), enabled for the next run."""
    import yaml

    shutil.copytree(Path(__file__).resolve().parents[1] / "plugins" / "mw_beta", home / "plugins" / "mw_beta")
    config = yaml.safe_load((home / "config.yaml").read_text())
    config["plugins"]["enabled"].append("mw_beta")
    (home / "config.yaml").write_text(yaml.safe_dump(config))


def _shoot(page, name: str, tmp: Path) -> None:
    target = IMAGES if os.environ.get("HERMES_OTEL_SCREENSHOTS") == "1" else tmp
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / name), full_page=False)


def test_the_traces_tab_in_a_real_dashboard_and_browser(dashboard, tmp_path):
    home, env, base, sync_playwright = dashboard

    # Every /api/ route needs the session token: ours too.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/api/plugins/hermes_otel/traces", timeout=10)
    assert refused.value.code == 401

    recorded = view.read_traces(home / "otel", last=50).traces
    assert len(recorded) == 1
    turn = recorded[0]
    turn_cost = turn.roots[0]["attributes"]["hermes.turn.cost"]

    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 820})
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        # The host itself asks /api/auth/me once and gets 401 on a loopback dashboard (no login configured);
        # that console line is the host's, with or without our tab. Any other console error fails the test.
        host_own = []
        page.on("response", lambda r: host_own.append(r.url) if r.status == 401 and r.url.endswith(
            "/api/auth/me") else None)
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)

        page.goto(base + "/")
        nav = page.locator('a[href="/traces"]')
        nav.first.wait_for(state="attached", timeout=20_000)
        assert nav.first.inner_text().strip().lower() == "traces"
        nav.first.click()
        page.wait_for_selector(".hot-row", timeout=20_000)
        assert page.locator(".hot-row").evaluate_all("rows => rows.map(r => r.dataset.trace)") == [turn.trace_id]
        assert page.locator(".hot-row .hot-cost").inner_text() == f"${turn_cost:.6f}".rstrip("0")
        _shoot(page, "dashboard-traces-dark.png", tmp_path)

        page.locator(".hot-row").first.click()
        page.wait_for_selector(".hot-span", timeout=10_000)
        assert page.url.endswith(f"/traces?trace={turn.trace_id}")  # a link reopens the trace
        names = page.locator(".hot-span .hot-name").all_inner_texts()
        assert names[0] == "invoke_agent hermes" and names.count("chat fake-model") == 2
        assert "tool_execution demo_middleware · ok" in names
        assert page.locator(".hot-span .hot-layer").count() == 1  # the layer's bar
        markers = page.locator(".hot-marker.hot-rewrite")
        assert markers.count() == 2  # the sample plugin's rewrite, on each chat span
        assert markers.first.get_attribute("title").startswith("hermes.middleware.rewrite: source demo_middleware")
        assert page.locator(".hot-turn-cost").inner_text() == f"turn cost ${turn_cost:.6f}".rstrip("0")
        page.locator(".hot-kind-layer").click()
        assert page.locator(".hot-details h4").inner_text() == "tool_execution demo_middleware"
        _shoot(page, "dashboard-trace-dark.png", tmp_path)

        page.locator(".hot-tabs button", has_text="Sessions").click()
        page.wait_for_selector(".hot-table .hot-row", timeout=10_000)
        session = turn.roots[0]["attributes"]["gen_ai.conversation.id"]
        assert page.locator(".hot-table .hot-row td").first.inner_text() == session
        _shoot(page, "dashboard-sessions-dark.png", tmp_path)

        # Live: back on the list, a turn run while the page is open appears without a reload.
        page.locator(".hot-tabs button", has_text="Traces").click()
        page.wait_for_selector(".hot-row", timeout=10_000)
        page.evaluate("window.__hotNoReload = 1")
        add_failing_plugin(home)  # the next turn also runs a layer that raises (fail-open)
        second = hermes_chat("run echo traced again", env=env)
        assert second.returncode == 0 and second.answer == "traced ok", second.stderr[-3000:]
        page.wait_for_function("document.querySelectorAll('.hot-row').length === 2", timeout=2_000)
        assert page.evaluate("window.__hotNoReload") == 1
        newest = view.read_traces(home / "otel", last=1).traces[0].trace_id
        assert page.locator(".hot-row").first.get_attribute("data-trace") == newest

        # A failed layer stands out: red, with its outcome, and its failure above the waterfall.
        page.locator(".hot-row").first.click()
        page.wait_for_selector(".hot-span", timeout=10_000)
        bad = page.locator(".hot-span-bad.hot-kind-layer .hot-name").all_inner_texts()
        assert bad == ["llm_execution mw_beta · fail_open"] * 2, bad
        assert page.locator(".hot-failures").inner_text().count("RuntimeError") == 2
        _shoot(page, "dashboard-failed-layer-dark.png", tmp_path)
        page.locator(".hot-button", has_text="all turns").click()
        page.wait_for_selector(".hot-row", timeout=10_000)

        # Typing asks for the text typed last only (issue 47, item 5: each keystroke used to start a scan).
        asked: list[str] = []
        page.on("request", lambda r: asked.append(r.url) if "/api/plugins/hermes_otel/traces?" in r.url else None)
        page.locator(".hot-search").press_sequentially("mw_beta", delay=60)
        page.wait_for_function("document.querySelectorAll('.hot-row').length === 1", timeout=5_000)
        assert page.locator(".hot-row").first.get_attribute("data-trace") == newest
        assert asked and {urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)["q"][0] for u in asked} == {"mw_beta"}
        page.locator(".hot-search").fill("")
        page.wait_for_function("document.querySelectorAll('.hot-row').length === 2", timeout=5_000)

        # Light: a user theme of the host with a light palette; the tab follows the host's colours.
        token = page.evaluate("window.__HERMES_SESSION_TOKEN__")
        request = urllib.request.Request(f"{base}/api/dashboard/theme", data=b'{"name": "paper"}', method="PUT",
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
        assert urllib.request.urlopen(request, timeout=10).status == 200
        page.reload()
        page.wait_for_selector(".hot-row", timeout=20_000)
        _shoot(page, "dashboard-traces-light.png", tmp_path)
        page.locator(".hot-row").first.click()
        page.wait_for_selector(".hot-span", timeout=10_000)
        page.locator(".hot-kind-layer").first.click()
        _shoot(page, "dashboard-trace-light.png", tmp_path)
        browser.close()

    assert len(host_own) <= 2  # the host's own auth probe, once per page load
    unexplained = [p for p in problems if not (p.startswith("console error: Failed to load resource: the server "
                                                            "responded with a status of 401") and host_own)]
    assert unexplained == []


def test_a_trace_of_5000_spans_renders_in_under_2_s(tmp_path):
    """Issue 26, item 7: written by the real file exporter (100 chat spans under the turn, 49 tool calls under
    each but the last); from the click on its row to its waterfall drawn, fetch included."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import set_span_in_context

    from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths
    from hermes_otel.tab import install

    sync_playwright = _playwright()
    home = write_home(tmp_path / "home", "http://127.0.0.1:9/v1")
    install.install(home)
    writer = RotatingJsonLinesWriter(file_paths(home / "otel")["traces"])
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(JsonFileSpanExporter(writer), max_queue_size=8192))
    tracer = provider.get_tracer("big")
    root = tracer.start_span("invoke_agent hermes")
    for n in range(100):
        chat = tracer.start_span(f"chat model-{n}", context=set_span_in_context(root))
        for k in range(49 if n < 99 else 48):  # 1 + 100 + 4,899 spans
            tracer.start_span(f"execute_tool tool-{n}-{k}", context=set_span_in_context(chat)).end()
        chat.end()
    root.end()
    provider.shutdown()
    writer.close()
    trace_id = f"{root.get_span_context().trace_id:032x}"
    assert sum(1 for _ in view.load_spans(home / "otel")) == 5000

    with running_dashboard(clean_env(home)) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 820})
        page.goto(base + "/traces")
        page.wait_for_selector(f'.hot-row[data-trace="{trace_id}"]', timeout=30_000)
        started = time.monotonic()
        page.locator(".hot-row").first.click()
        page.wait_for_selector(".hot-windowed .hot-span", timeout=10_000)
        drawn = time.monotonic() - started
        assert page.locator(".hot-head .hot-chip", has_text="spans").inner_text() == "5000 spans"
        # Only the rows in view are drawn; scrolling to the end draws the last one.
        page.evaluate("document.querySelector('.hot-windowed').scrollTop = 1e9")
        page.wait_for_selector("text=execute_tool tool-99-47", timeout=5_000)
        browser.close()
    assert drawn < 2.0, drawn
