"""The Traces tab's Jaeger source against hostile or slow servers on loopback (issue 40, items 3-6): one deadline
for the whole request (a byte dripped every 0.3 s is cut at it), no redirect followed, an answer over the cap
refused, credentials in the address sent as basic auth and never shown, and a bounded number of requests waiting on
Jaeger (another is told "busy" at once, so the dashboard's worker threads stay free)."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from hermes_otel.tab import jaeger

EMPTY = json.dumps({"result": {"resourceSpans": []}}).encode()
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


@contextmanager
def serving(answer: Callable[[socket.socket, bytes], None]) -> Iterator[tuple[str, list[bytes]]]:
    """A loopback server that hands each connection's request head to `answer`; (base URL, request heads)."""
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            heads.append(head)
            try:
                answer(conn, head)
            except OSError:
                pass

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", heads
    finally:
        stop.set()
        thread.join(2)
        listener.close()


def ok(body: bytes = EMPTY, status: str = "200 OK", extra: str = "") -> Callable[[socket.socket, bytes], None]:
    def answer(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}"
                     f"Connection: close\r\n\r\n".encode() + body)
    return answer


FRAMINGS = {  # how an answer's body ends: its length, its last chunk, or the connection's close
    "length": (f"Content-Length: {len(EMPTY)}\r\n".encode(), EMPTY),
    "chunked": (b"Transfer-Encoding: chunked\r\n", f"{len(EMPTY):x}\r\n".encode() + EMPTY + b"\r\n0\r\n\r\n"),
    "until close": (b"Connection: close\r\n", EMPTY),
}


def dripping(in_headers: bool, framing: str = "length") -> Callable[[socket.socket, bytes], None]:
    def answer(conn: socket.socket, _head: bytes) -> None:
        fields, body = FRAMINGS[framing]
        head = b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n"
        if not in_headers:
            conn.sendall(head)
        for byte in (head if in_headers else b"") + body:
            conn.sendall(bytes([byte]))
            time.sleep(0.3)
    return answer


@pytest.fixture
def short_deadline(monkeypatch):
    monkeypatch.setattr(jaeger, "TIMEOUT_S", 1.0)


@pytest.mark.parametrize(("in_headers", "framing"), [(True, "length"), (False, "length"), (False, "chunked"),
                                                     (False, "until close")],
                         ids=["headers dripped", "body dripped", "chunked body dripped", "body to the close dripped"])
def test_one_deadline_for_the_whole_request(short_deadline, in_headers, framing):
    """Whatever ends the answer (a length, the last chunk, the connection's close: http.client lets go of the
    socket for that one, which the cut used to miss), the deadline ends the request."""
    with serving(dripping(in_headers, framing)) as (base, _):
        started = time.monotonic()
        with pytest.raises(jaeger.JaegerError, match="did not answer within 1 s"):
            jaeger.one(base, TRACE_ID)
        assert time.monotonic() - started < 1.5


def test_a_redirect_is_not_followed():
    with serving(ok()) as (elsewhere, elsewhere_heads):
        with serving(ok(b"", "302 Found", f"Location: {elsewhere}/api/v3/traces/{TRACE_ID}\r\n")) as (base, _):
            with pytest.raises(jaeger.JaegerError, match="redirect .*not followed"):
                jaeger.one(base, TRACE_ID)
    assert elsewhere_heads == []


def test_an_answer_over_the_cap_is_refused(monkeypatch):
    monkeypatch.setattr(jaeger, "MAX_BYTES", 1 << 20)
    with serving(ok(b" " * ((1 << 20) + 1))) as (base, _):
        with pytest.raises(jaeger.JaegerError, match="over 1 MiB"):
            jaeger.one(base, TRACE_ID)


def test_credentials_in_the_address_are_basic_auth_and_never_shown():
    with serving(ok()) as (base, heads):
        address = base.replace("http://", "http://reader:s3cr%40t@")
        assert jaeger.one(address, TRACE_ID) is None  # answered (no such trace), not "not reachable"
    (head,) = heads
    assert f"Authorization: Basic {base64.b64encode(b'reader:s3cr@t').decode()}".encode() in head
    assert b"s3cr" not in head.split(b"\r\n")[0]  # not in the request line
    with serving(ok(b"", "500 Internal Server Error")) as (base, _):
        with pytest.raises(jaeger.JaegerError) as failed:
            jaeger.one(base.replace("http://", "http://reader:s3cr%40t@"), TRACE_ID)
    assert "s3cr" not in str(failed.value) and "reader" not in str(failed.value)


def test_only_a_few_requests_wait_on_jaeger_and_another_is_busy_at_once(short_deadline):
    """docs/dashboard.md: "at most two requests wait on Jaeger at once" (the number the docs state, not the constant
    that should hold it: a larger one would let a third wait)."""
    with serving(dripping(in_headers=True)) as (base, _):
        waiting = [threading.Thread(target=lambda: pytest.raises(jaeger.JaegerError, jaeger.one, base, TRACE_ID))
                   for _ in range(2)]
        for thread in waiting:
            thread.start()
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(jaeger.JaegerBusy):
            jaeger.one(base, TRACE_ID)
        assert time.monotonic() - started < 0.1
        for thread in waiting:
            thread.join(3)
    with serving(ok()) as (base, _):  # the waiting ones gave their places back
        assert jaeger.one(base, TRACE_ID) is None
