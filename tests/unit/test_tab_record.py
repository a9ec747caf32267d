"""Issue 47, item 5: the Traces tab's local source is bounded whatever the record's size and however fast a user
types. Reproduced before the fix: 19 keystrokes over a record at the default rotation bound started 19 full scans at
once (7.1 s, 697 MiB peak in this probe; 1.2 GiB in a real dashboard).

Through the router as Hermes mounts it, over a record written by the real file exporter: one scan at once (another
request that needs the files is answered "busy" at once), a later request reuses what an earlier one read (the
appended lines only when the newest file grew), and the peak memory of a burst of requests is that of one scan."""

from __future__ import annotations

import threading
import tracemalloc

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import set_span_in_context

from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths
from hermes_otel.local import traces as local_traces
from hermes_otel.tab import record
from tests.unit.test_tab_routes import MS, T0

CONTENT = "mysql " * 300  # a captured prompt's worth of text per chat span


class Record:
    """A profile's local record, written a turn at a time by the real file exporter (rotating like a user's)."""

    def __init__(self, home, max_bytes: int = 20 * 1024 * 1024) -> None:
        self.writer = RotatingJsonLinesWriter(file_paths(home / "otel")["traces"], max_bytes=max_bytes)
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(self.writer)))
        self.tracer = self.provider.get_tracer("test")
        self.turns = 0

    def add(self, count: int = 1) -> list[str]:
        """`count` turns (a root and two chat spans, each written as its own line); their trace ids."""
        ids = []
        for _ in range(count):
            start = T0 + self.turns * 1000 * MS
            root = self.tracer.start_span("invoke_agent hermes", start_time=start, attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": f"s{self.turns % 7}"})
            for n in range(2):
                self.tracer.start_span("chat fake-model", context=set_span_in_context(root),
                                       start_time=start + n * MS, attributes={
                                           "gen_ai.operation.name": "chat", "gen_ai.request.model": "fake-model",
                                           "gen_ai.input.messages": CONTENT}).end(start + (n + 1) * MS)
            root.end(start + 3 * MS)
            ids.append(f"{root.get_span_context().trace_id:032x}")
            self.turns += 1
        return ids

    def close(self) -> None:
        self.provider.shutdown()
        self.writer.close()


@pytest.fixture(autouse=True)
def fresh():
    record._kept.clear()
    yield
    record._kept.clear()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    for name in ("HERMES_OTEL_PLUGINS_TOML", "HERMES_NEMO_RELAY_PLUGINS_TOML", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    written = Record(tmp_path)
    yield tmp_path, written
    written.close()


@pytest.fixture
def client(home):
    from hermes_otel.tab.routes import router

    app = FastAPI()
    app.include_router(router, prefix="/api/plugins/hermes_otel")
    return TestClient(app)


@pytest.fixture
def scans(monkeypatch):
    """The full scans of the files the tab starts (the real reader, counted)."""
    started: list[int] = []
    real = record.read_traces

    def counted(*args, **kwargs):
        started.append(kwargs.get("last", 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(record, "read_traces", counted)
    return started


def listed(client, **params) -> list[str]:
    answer = client.get("/api/plugins/hermes_otel/traces", params=params)
    assert answer.status_code == 200, answer.text
    return [row["trace_id"] for row in answer.json()["traces"]]


def test_typing_reuses_the_first_scan(home, client, scans):
    _, written = home
    ids = written.add(30)
    assert listed(client) == ids[::-1]
    for typed in ("m", "my", "mys", "fake"):  # each keystroke one request, as a page without debounce sends them
        listed(client, q=typed)
    assert client.get("/api/plugins/hermes_otel/sessions").status_code == 200
    assert client.get(f"/api/plugins/hermes_otel/traces/{ids[3]}").json()["trace_id"] == ids[3]
    assert len(scans) == 1  # one read of the files answered all seven


def test_appended_turns_are_read_alone_and_answer_as_a_full_read(home, client, scans):
    _, written = home
    ids = written.add(12)
    assert listed(client) == ids[::-1]
    ids += written.add(3)
    assert listed(client) == ids[::-1]
    assert listed(client, session="s1") == [i for n, i in enumerate(ids) if n % 7 == 1][::-1]
    assert len(scans) == 1  # the three new turns were read from where the first read ended
    extended = client.get("/api/plugins/hermes_otel/sessions").json()
    record._kept.clear()
    assert client.get("/api/plugins/hermes_otel/sessions").json() == extended  # what a fresh full read gives
    assert len(scans) == 2


def test_a_line_being_written_is_read_once_it_is_whole(home, client):
    root, written = home
    ids = written.add(2)
    assert listed(client) == ids[::-1]
    current = root / "otel" / "traces.jsonl"
    before = current.read_bytes()
    ids += written.add(1)  # three lines: two chat spans, then the root
    appended = current.read_bytes()[len(before):]
    cut = appended.index(b"\n") + 1 + 100
    current.write_bytes(before + appended[:cut])  # the writer 100 bytes into the second line
    body = client.get("/api/plugins/hermes_otel/traces").json()
    assert body["skipped_lines"] == 0
    assert [(row["trace_id"], row["spans"]) for row in body["traces"]] == [(ids[2], 1), (ids[1], 3), (ids[0], 3)]
    with current.open("ab") as handle:
        handle.write(appended[cut:])
    body = client.get("/api/plugins/hermes_otel/traces").json()
    assert body["skipped_lines"] == 0
    assert [(row["trace_id"], row["spans"]) for row in body["traces"]] == [(i, 3) for i in ids[::-1]]


def test_a_rotation_reads_the_files_again(tmp_path, monkeypatch, scans):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    from hermes_otel.tab.routes import router

    app = FastAPI()
    app.include_router(router, prefix="/api/plugins/hermes_otel")
    client = TestClient(app)
    written = Record(tmp_path, max_bytes=64 * 1024)
    try:
        ids = written.add(5)
        assert listed(client) == ids[::-1]
        ids += written.add(40)  # rotates several times
        assert len(list((tmp_path / "otel").glob("traces.jsonl.*"))) == 3
        kept = {t.trace_id for t in local_traces.read_traces(tmp_path / "otel", last=1000).traces}
        assert listed(client, limit=500) == [i for i in ids[::-1] if i in kept]
        assert len(scans) == 2
    finally:
        written.close()


def test_another_scan_at_once_is_told_busy_at_once_and_a_current_answer_needs_none(home, client):
    _, written = home
    ids = written.add(3)
    assert listed(client) == ids[::-1]
    with record.scan_slot():  # a scan of the files under way for another request
        assert listed(client, q="fake") == ids[::-1]  # the files did not change: the answer needs no scan
        written.add(1)
        busy = client.get("/api/plugins/hermes_otel/traces", params={"q": "demo"})
        assert busy.status_code == 503 and "being read for another request" in busy.json()["detail"]
        assert client.get("/api/plugins/hermes_otel/sessions").status_code == 503
        assert client.get(f"/api/plugins/hermes_otel/traces/{'f' * 32}").status_code == 503
    assert len(listed(client, q="fake")) == 4


def test_a_burst_of_keystrokes_costs_one_scan_of_memory(home, client):
    _, written = home
    written.add(600)  # about 2.5 MiB: 600 turns with a captured prompt on each model call
    tracemalloc.start()
    try:
        listed(client, q="m")
        one_scan = tracemalloc.get_traced_memory()[1]
        record._kept.clear()
        tracemalloc.reset_peak()
        codes: list[int] = []
        word = "mysqlmysqlmysqlmysq"

        def keystroke(typed: str) -> None:
            codes.append(client.get("/api/plugins/hermes_otel/traces", params={"q": typed}).status_code)

        threads = [threading.Thread(target=keystroke, args=(word[: n + 1],)) for n in range(19)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        burst = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(codes) == 19 and set(codes) <= {200, 503} and 200 in codes
    assert burst < 1.5 * one_scan, (burst, one_scan)  # 19 scans at once held about 19 times one


def test_a_scan_reads_a_bounded_part_of_a_large_record(home, client, monkeypatch):
    _, written = home
    written.add(60)
    monkeypatch.setattr(record, "SCAN_BYTES", 64 * 1024)  # the bound scaled down with the record
    body = client.get("/api/plugins/hermes_otel/traces", params={"limit": 500}).json()
    assert body["complete"] is False and 0 < len(body["traces"]) < 60
