"""Issue 26: the Traces tab's API through FastAPI's TestClient (the dashboard's `fastapi` is in every Hermes
install), its install by `hermes-otel enable` and what `doctor` says of it.

The local record is written by the real file exporter; the router is mounted the way Hermes mounts it."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths
from hermes_otel.tab import install
from hermes_otel.version import __version__

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def write_turn(tracer, n: int, *, session: str, cost: float | None, error: bool = False, rewrite: bool = False):
    start = T0 + n * 1000 * MS
    root = tracer.start_span("invoke_agent hermes", start_time=start, attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": session, "hermes.turn.id": f"{session}:{n}",
        "hermes.profile": "default",
        **({"hermes.turn.cost": cost, "hermes.turn.cost_status": "estimated"} if cost is not None
           else {"hermes.turn.cost_status": "unknown"})})
    inside = set_span_in_context(root)
    chat = tracer.start_span("chat fake-model", context=inside, start_time=start + MS, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model", "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 7, **({"hermes.usage.cost": cost, "hermes.usage.cost_status": "estimated"}
                                            if cost is not None else {"hermes.usage.cost_status": "unknown",
                                                                      "hermes.usage.cost_reason": "no_price"})})
    layer = tracer.start_span("middleware llm_execution demo", context=set_span_in_context(chat),
                              start_time=start + 2 * MS, attributes={
                                  "hermes.middleware.plugin": "demo", "hermes.middleware.outcome":
                                  "error" if error else "ok"})
    if error:
        layer.set_status(Status(StatusCode.ERROR, "boom"))
    layer.end(start + 3 * MS)
    if rewrite:
        chat.add_event("hermes.middleware.rewrite", {"hermes.middleware.source": "demo",
                                                      "hermes.middleware.reason": "trim \x1b[2J<script>",
                                                      "hermes.middleware.changed_keys": ["messages"]},
                       timestamp=start + MS + 10)
    chat.end(start + 4 * MS)
    tool = tracer.start_span("execute_tool terminal", context=inside, start_time=start + 5 * MS,
                             attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "terminal"})
    tool.end(start + 6 * MS)
    root.end(start + 7 * MS)
    return root.get_span_context().trace_id


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HERMES_HOME whose local record holds four turns of two sessions (one failed, one rewritten, one
    unpriced), written by the real file exporter."""
    otel = tmp_path / "otel"
    writer = RotatingJsonLinesWriter(file_paths(otel)["traces"])
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    tracer = provider.get_tracer("test")
    ids = [write_turn(tracer, 0, session="s1", cost=0.25),
           write_turn(tracer, 1, session="s1", cost=0.5, rewrite=True),
           write_turn(tracer, 2, session="s2", cost=None, error=True),
           write_turn(tracer, 3, session="s2", cost=1.0)]
    provider.shutdown()
    writer.close()
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    for name in ("HERMES_OTEL_PLUGINS_TOML", "HERMES_NEMO_RELAY_PLUGINS_TOML", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path, [f"{i:032x}" for i in ids]


@pytest.fixture
def client(home):
    from hermes_otel.tab.routes import router

    app = FastAPI()
    app.include_router(router, prefix="/api/plugins/hermes_otel")
    return TestClient(app)


def test_the_list_is_one_row_per_turn_newest_first(home, client):
    _, ids = home
    answer = client.get("/api/plugins/hermes_otel/traces")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["recorded"], body["skipped_lines"], body["complete"]) == (True, 0, True)
    assert [row["trace_id"] for row in body["traces"]] == ids[::-1]
    newest = body["traces"][0]
    assert newest == {
        "trace_id": ids[3], "name": "invoke_agent hermes", "start_ns": T0 + 3000 * MS, "duration_ns": 7 * MS,
        "spans": 4, "models": ["fake-model"], "input_tokens": 100, "output_tokens": 7,
        "cost": {"amount": 1.0, "status": "estimated", "reason": None}, "tool_calls": 1, "errors": 0,
        "rewrites": 0, "session": "s2", "profile": "default", "ended": True}
    unpriced = body["traces"][1]
    assert (unpriced["cost"], unpriced["errors"]) == ({"amount": None, "status": "unknown", "reason": None}, 1)
    assert body["traces"][2]["rewrites"] == 1


@pytest.mark.parametrize(("query", "expected"), [
    ("errors=true", [2]), ("rewrites=true", [1]), ("session=s1", [1, 0]), ("model=fake-model", [3, 2, 1, 0]),
    ("model=other", []), ("q=TRIM", []), ("q=terminal", [3, 2, 1, 0]), ("q=demo&errors=true", [2]),
    ("limit=2", [3, 2]),
])
def test_filters(home, client, query, expected):
    _, ids = home
    body = client.get(f"/api/plugins/hermes_otel/traces?{query}").json()
    assert [row["trace_id"] for row in body["traces"]] == [ids[n] for n in expected]


def test_a_trace_is_its_waterfall_with_layers_rewrites_and_cost(home, client):
    _, ids = home
    body = client.get(f"/api/plugins/hermes_otel/traces/{ids[1]}").json()
    assert [(s["depth"], s["name"], s["operation"]) for s in body["spans"]] == [
        (0, "invoke_agent hermes", "invoke_agent"), (1, "chat fake-model", "chat"),
        (2, "middleware llm_execution demo", "middleware"), (1, "execute_tool terminal", "execute_tool")]
    chat = body["spans"][1]
    assert chat["cost"] == {"amount": 0.5, "status": "estimated", "reason": None}
    assert chat["events"] == [{"name": "hermes.middleware.rewrite", "time_ns": T0 + 1000 * MS + MS + 10,
                               "attributes": {"hermes.middleware.source": "demo",
                                              "hermes.middleware.reason": "trim \x1b[2J<script>",
                                              "hermes.middleware.changed_keys": ["messages"]}}]
    assert body["spans"][2]["attributes"]["hermes.middleware.plugin"] == "demo"
    assert body["summary"]["cost"] == {"amount": 0.5, "status": "estimated", "reason": None}
    failed = client.get(f"/api/plugins/hermes_otel/traces/{ids[2]}").json()
    layer = failed["spans"][2]
    assert (layer["error"], layer["status_message"], layer["attributes"]["hermes.middleware.outcome"]) == (
        True, "boom", "error")
    assert failed["spans"][1]["cost"] == {"amount": None, "status": "unknown", "reason": "no_price"}


def test_sessions_sum_the_turns_roll_ups(client):
    body = client.get("/api/plugins/hermes_otel/sessions").json()
    assert [(s["session"], s["profile"], s["turns"], s["input_tokens"], s["cost"], s["cost_status"], s["errors"])
            for s in body["sessions"]] == [("s2", "default", 2, 200, 1.0, "partial", 1),
                                           ("s1", "default", 2, 200, 0.75, "estimated", 0)]


@pytest.mark.parametrize(("path", "status"), [
    ("/traces/xyz", 400), ("/traces/" + "0" * 32, 404), ("/traces/..%2F..%2Fetc%2Fpasswd", 404),
    ("/traces?limit=0", 422), ("/traces?limit=100000", 422), ("/traces?q=" + "x" * 201, 422),
])
def test_bad_requests_are_refused(client, path, status):
    assert client.get("/api/plugins/hermes_otel" + path).status_code == status


def test_only_a_whole_trace_id_names_a_trace_and_nothing_else_reaches_jaeger(home, client, monkeypatch):
    """A prefix of a recorded trace's id is not that trace (the reader takes prefixes for `view`); with
    `source=jaeger` a malformed id never becomes part of a request to Jaeger."""
    from hermes_otel.tab import jaeger

    _, ids = home
    for prefix in (ids[0][:6], ids[0][:31], ids[0] + "0"):
        assert client.get(f"/api/plugins/hermes_otel/traces/{prefix}").status_code == 400
    asked: list[str] = []
    monkeypatch.setenv(jaeger.ENV, "http://127.0.0.1:9")
    monkeypatch.setattr(jaeger, "_get", lambda url: asked.append(url) or {})
    for bad in ("abcdef", "..%2F..%2Fapi%2Fservices", "0" * 31 + "g"):
        assert client.get(f"/api/plugins/hermes_otel/traces/{bad}?source=jaeger").status_code in (400, 404)
    assert asked == []


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch"])
def test_routes_are_get_only(client, home, method):
    _, ids = home
    for path in ("/traces", f"/traces/{ids[0]}", "/sessions"):
        assert getattr(client, method)("/api/plugins/hermes_otel" + path).status_code == 405


def test_no_local_record_yet_is_an_empty_list(tmp_path, monkeypatch):
    from hermes_otel.tab.routes import router

    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "empty"))
    app = FastAPI()
    app.include_router(router)
    body = TestClient(app).get("/traces").json()
    assert body == {"recorded": False, "skipped_lines": 0, "complete": True, "traces": []}


# -- install, remove, doctor ---------------------------------------------------------------------------------------


def test_install_update_remove_and_what_doctor_says(tmp_path):
    home = tmp_path / "home"
    directory = home / "plugins" / "hermes_otel" / "dashboard"
    assert install.status(home) == ("note", "dashboard Traces tab not installed (`hermes-otel enable` installs it)")
    assert install.install(home) == (f"installed the dashboard's Traces tab in {directory} (restart "
                                     "`hermes dashboard` to see it)")
    assert sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()) == [
        "api.py", "dist/index.js", "dist/style.css", "manifest.json"]
    assert not (directory.parent / "plugin.yaml").exists()  # Hermes's agent loader ignores the folder
    manifest = json.loads((directory / "manifest.json").read_text())
    assert (manifest["name"], manifest["version"], manifest["api"], manifest["tab"]) == (
        "hermes_otel", __version__, "api.py", {"path": "/traces", "position": "end"})
    assert install.status(home) == ("ok", f"dashboard Traces tab installed ({directory})")
    assert install.install(home) == f"the dashboard's Traces tab is up to date in {directory}"

    manifest["version"] = "0.0.1"
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert install.status(home) == ("warn", f"dashboard Traces tab stale: {directory} holds version 0.0.1, this "
                                            f"package is {__version__} (run `hermes-otel enable` to update it)")
    install.install(home)
    assert install.status(home)[0] == "ok"

    other = home / "plugins" / "a_copy" / "dashboard"
    other.mkdir(parents=True)
    (other / "manifest.json").write_text('{"name": "hermes_otel"}')
    assert install.status(home) == ("warn", f"dashboard Traces tab shadowed: {other / 'manifest.json'} is also "
                                            "named 'hermes_otel' and Hermes loads that one; remove it or rename "
                                            "its manifest")

    assert install.remove(home) == f"removed the dashboard's Traces tab from {directory}"
    assert not directory.parent.exists() and other.exists()
    assert install.remove(home) is None


def test_doctor_reads_other_plugins_manifests_capped_and_regular_only(tmp_path):
    """Another plugin's manifest is not ours: a huge one is not read whole (sparse: 1.5 GiB on disk costs nothing
    here, read whole it would cost that much memory), a symbolic link to a big file is not followed, a FIFO does
    not block; none of them shadows the tab."""
    import os

    home = tmp_path / "home"
    install.install(home)
    huge = home / "plugins" / "a_huge" / "dashboard"
    huge.mkdir(parents=True)
    with open(huge / "manifest.json", "wb") as f:
        f.write(b'{"name": "hermes_otel", "pad": "')
        f.truncate(3 << 29)
    linked = home / "plugins" / "b_linked" / "dashboard"
    linked.mkdir(parents=True)
    target = tmp_path / "elsewhere.json"
    target.write_text('{"name": "hermes_otel"}')
    (linked / "manifest.json").symlink_to(target)
    piped = home / "plugins" / "c_fifo" / "dashboard"
    piped.mkdir(parents=True)
    os.mkfifo(piped / "manifest.json")
    assert install.status(home) == ("ok", f"dashboard Traces tab installed ({install.target(home)})")


def test_the_api_file_hermes_imports_serves_the_router(tmp_path):
    """Hermes imports the manifest's `api` file by path and mounts its `router`: do exactly that."""
    import importlib.util

    install.install(tmp_path)
    path = install.target(tmp_path) / "api.py"
    spec = importlib.util.spec_from_file_location("hermes_dashboard_plugin_hermes_otel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from hermes_otel.tab.routes import router

    assert module.router is router


def test_the_tab_never_renders_data_as_markup():
    """React renders strings as text; the tab's script never reaches past it (no HTML sinks, no eval)."""
    script = (install.ASSETS / "dist" / "index.js").read_text()
    for sink in ("innerHTML", "outerHTML", "dangerouslySetInnerHTML", "insertAdjacentHTML", "document.write",
                 "eval(", "new Function"):
        assert sink not in script, sink
    css = (install.ASSETS / "dist" / "style.css").read_text()
    selectors = [line.split("{")[0] for line in css.splitlines() if "{" in line and not line.startswith(("@", " "))]
    assert selectors and all(part.strip().startswith(".hot-") for sel in selectors for part in sel.split(","))


def test_the_providers_part_of_a_cost_is_shown_beside_the_estimate():
    """Issue 48: the tab says which part of a total the provider reported and which is Hermes's estimate."""
    from hermes_otel.cost import pricing as cost
    from hermes_otel.local import summary

    turn = {cost.TURN_COST: 0.5, cost.TURN_COST_STATUS: "estimated", cost.TURN_PROVIDER_COST: 0.25}
    assert summary._cost(turn, cost.TURN_COST, cost.TURN_COST_STATUS) == {
        "amount": 0.5, "status": "estimated", "reason": None, "provider": 0.25}
    attempt = {cost.USAGE_COST: 0.1, cost.USAGE_COST_STATUS: "actual", cost.USAGE_COST_SOURCE: "provider"}
    assert summary._cost(attempt, cost.USAGE_COST, cost.USAGE_COST_STATUS)["provider"] == 0.1
    estimated = {cost.USAGE_COST: 0.1, cost.USAGE_COST_STATUS: "estimated", cost.USAGE_COST_SOURCE: "snapshot"}
    assert "provider" not in summary._cost(estimated, cost.USAGE_COST, cost.USAGE_COST_STATUS)
