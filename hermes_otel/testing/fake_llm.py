"""A scripted, OpenAI-compatible chat-completions server (stdlib only).

``hermes-otel demo`` and the test-suite point the *real* Hermes agent at this
server, so every trace it produces comes from genuine agent code paths while
the model side stays deterministic and offline.

The server answers:

* ``GET /v1/models`` (and ``/models``) with a one-model list;
* ``POST /v1/chat/completions`` (and ``/chat/completions``) with the next
  :class:`Reply` from the script (or ``default`` once the script runs dry),
  either as an SSE stream of ``chat.completion.chunk`` objects or as a single
  ``chat.completion`` object, exactly in OpenAI's wire shape;
* anything else with an OpenAI-style 404.

Example::

    with FakeLLMServer([Reply.tools(ToolCall("terminal", {"command": "ls"})),
                        Reply.text("done")]) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="sk-fake")
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeLLMServer",
    "RecordedRequest",
    "Reply",
    "ToolCall",
    "Usage",
    "DEMO_PRICES",
    "demo_script",
]

# A fixed timestamp keeps every response byte-for-byte reproducible.
_CREATED = 1_700_000_000
_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_MODELS_PATHS = frozenset({"/v1/models", "/models"})


@dataclass(frozen=True)
class ToolCall:
    """One function call the fake model asks the agent to make."""

    name: str
    arguments: dict[str, Any]
    # None -> the server assigns "call_<n>" (n counts tool calls server-wide),
    # so scripts stay short while ids stay unique within a conversation.
    id: str | None = None


@dataclass(frozen=True)
class Usage:
    """Token usage reported for a reply (OpenAI ``usage`` object)."""

    prompt_tokens: int = 11
    completion_tokens: int = 7
    cached_tokens: int = 0
    cache_write_tokens: int | None = None  # written to the provider's cache, as OpenRouter reports it
    reasoning_tokens: int = 0
    cost: float | None = None  # what the call cost, as OpenRouter reports it with usage accounting on (USD)

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, **(
                {"cache_write_tokens": self.cache_write_tokens} if self.cache_write_tokens is not None else {})},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            **({"cost": self.cost} if self.cost is not None else {}),
        }


@dataclass(frozen=True)
class Reply:
    """One scripted model turn.

    For error replies (``status != 200``) ``content`` is the error message.
    """

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    usage: Usage | None = None
    delay_s: float = 0.0
    finish: str | None = None  # the finish reason, when not the natural one (e.g. "length": cut off)
    chunk_gap_s: float = 0.0  # streamed: the wait between one chunk and the next

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(content=content)

    @classmethod
    def tools(cls, *calls: ToolCall) -> Reply:
        return cls(tool_calls=tuple(calls))

    @classmethod
    def error(cls, status: int = 500, message: str = "fake upstream error") -> Reply:
        return cls(content=message, status=status)

    @property
    def finish_reason(self) -> str:
        if self.finish:
            return self.finish
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True)
class RecordedRequest:
    """An HTTP request as the server saw it. Header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None when absent / not JSON


# What the demo's scripted model charges (USD per token), published on its /v1/models for Hermes to price with.
DEMO_PRICES = {"prompt": "0.000003", "completion": "0.000015", "cache_read": "0.0000003"}


def demo_script() -> list[Reply]:
    """The two-turn conversation used by ``hermes-otel demo``."""
    return [
        Reply.tools(ToolCall("terminal", {"command": "echo hello from hermes-otel"})),
        Reply.text("The command printed: hello from hermes-otel"),
    ]


def _split(text: str, parts: int) -> list[str]:
    """Split ``text`` into at most ``parts`` non-empty, roughly equal pieces.

    Streaming in several pieces exercises the client's delta assembly, which
    is what real providers force on it.
    """
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    step = -(-len(text) // parts)  # ceiling division
    return [text[i : i + step] for i in range(0, len(text), step)]


def _error_body(status: int, message: str) -> dict[str, Any]:
    # The openai client maps the status code to an exception class and reads
    # error.message / error.type / error.code from this body.
    return {
        "error": {
            "message": message,
            "type": "server_error" if status >= 500 else "invalid_request_error",
            "param": None,
            "code": str(status),
        }
    }


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that can hard-close live connections on stop().

    The openai client keeps HTTP/1.1 connections alive in a pool; without
    closing them a handler thread could sit in ``readline`` long after stop().
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], fake: FakeLLMServer) -> None:
        self.fake = fake
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client dropping the connection while we still read its request is
        # routine; only genuine bugs deserve the default stderr traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def close_all_connections(self) -> None:
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so ordinary responses can be kept alive like a real API;
    # SSE responses opt out with "Connection: close" (body ends at EOF).
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; with Nagle on, a
        # kept-alive connection then stalls ~40 ms per response on the
        # client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Silence per-request logging; tests and the demo own stderr."""

    # -- plumbing -----------------------------------------------------------

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _record(self, raw: bytes) -> Any:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = self.path.split("?", 1)[0]
        self.server.fake._record(RecordedRequest(self.command, path, headers, body))
        return body

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _guard(self, action: Callable[[], None]) -> None:
        # A client that gives up mid-response (timeouts, cancelled streams,
        # stop() closing sockets) is normal here; keep it off stderr.
        try:
            action()
        except OSError:  # BrokenPipeError, ConnectionResetError, ...
            self.close_connection = True

    # -- routes -------------------------------------------------------------

    def do_GET(self) -> None:
        self._record(b"")
        path = self.path.split("?", 1)[0]
        if path in _MODELS_PATHS:
            self._guard(lambda: self._send_json(200, self.server.fake._models_payload()))
        else:
            self._guard(lambda: self._send_json(404, _error_body(404, f"Unknown path {path}")))

    def do_POST(self) -> None:
        raw = self._read_body()
        body = self._record(raw)
        path = self.path.split("?", 1)[0]
        if path not in _CHAT_PATHS:
            self._guard(lambda: self._send_json(404, _error_body(404, f"Unknown path {path}")))
            return
        if not isinstance(body, dict):
            self._guard(lambda: self._send_json(400, _error_body(400, "Body must be a JSON object")))
            return
        self._guard(lambda: self._chat(body))

    def _chat(self, body: dict[str, Any]) -> None:
        fake = self.server.fake
        n, reply = fake._next_reply(body)
        if reply.delay_s > 0 and fake._stopping.wait(reply.delay_s):
            self.close_connection = True  # server is stopping; drop the request
            return
        if reply.status != 200:
            self._send_json(reply.status, _error_body(reply.status, reply.content or "fake error"))
            return

        model = str(body.get("model") or fake.model)
        calls = [(c.id or fake._next_call_id(), c) for c in reply.tool_calls]
        usage = (reply.usage or Usage()).to_json()
        base = {"id": f"chatcmpl-fake-{n}", "created": _CREATED, "model": model}

        if not body.get("stream"):
            self._send_json(200, _completion(base, reply, calls, usage))
            return

        options = body.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for index, chunk in enumerate(_chunks(base, reply, calls, usage, include_usage)):
            if index and reply.chunk_gap_s:
                self.wfile.flush()
                if self.server.fake._stopping.wait(reply.chunk_gap_s):
                    return
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _completion(
    base: dict[str, Any], reply: Reply, calls: list[tuple[str, ToolCall]], usage: dict[str, Any]
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call_id, call in calls
        ]
    return {
        **base,
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": usage,
    }


def _chunks(
    base: dict[str, Any],
    reply: Reply,
    calls: list[tuple[str, ToolCall]],
    usage: dict[str, Any],
    include_usage: bool,
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` sequence OpenAI streams for ``reply``."""
    # With include_usage OpenAI sends "usage": null on every chunk but the last.
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**base, "object": "chat.completion.chunk", "choices": [choice], **extra}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _split(reply.content or "", 3):
        yield chunk({"content": piece})
    for index, (call_id, call) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in _split(json.dumps(call.arguments), 2):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}


_OK = Reply.text("ok")  # a frozen Reply: safe to share as a default


class FakeLLMServer:
    """Scripted OpenAI-compatible server on loopback; use as a context manager.

    Each chat request consumes the next scripted :class:`Reply`; once the
    script is empty, ``default`` answers. Note that the openai client retries
    5xx/429 replies by itself (``max_retries``), and each retry consumes a
    reply too.

    ``context_length`` is advertised on the model entry because Hermes reads
    it from ``/v1/models``; without it Hermes probes several other local-server
    endpoints (Ollama, LM Studio, ...) before falling back to a default.
    Pass ``None`` to omit it.

    ``pricing`` (USD per token as strings, e.g. ``{"prompt": "0.000002",
    "completion": "0.000008", "cache_read": "0.0000005"}``) is published on the
    model entry as OpenAI-compatible servers do; Hermes prices a custom
    endpoint's calls with it.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        model: str = "fake-model",
        default: Reply = _OK,
        host: str = "127.0.0.1",
        port: int = 0,
        context_length: int | None = 128_000,
        responder: Callable[[dict[str, Any]], Reply | None] | None = None,
        pricing: dict[str, str] | None = None,
    ) -> None:
        self.model = model
        self.pricing = dict(pricing) if pricing else None
        # Consulted before the script: a reply computed from the request body (concurrent
        # conversations cannot share one ordered script); None falls through to the script.
        self.responder = responder
        self.default = default
        self.host = host
        self.port = port
        self.context_length = context_length
        self._queue: deque[Reply] = deque(script)
        # One lock guards the script, the request log and both counters.
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._chat_count = 0
        self._call_ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> FakeLLMServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # bounds how long stop() waits
            name=f"fake-llm:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()  # wakes replies sleeping in delay_s
        server.shutdown()
        server.close_all_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- public API ---------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def push(self, *replies: Reply) -> None:
        """Append replies to the script (safe while requests are in flight)."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and r.path in _CHAT_PATHS]

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been served yet."""
        with self._lock:
            return len(self._queue)

    # -- used by the handler --------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next_reply(self, body: dict[str, Any] | None = None) -> tuple[int, Reply]:
        """Number this chat request (1-based) and pop its reply atomically."""
        answer = self.responder(body) if self.responder is not None and body is not None else None
        with self._lock:
            self._chat_count += 1
            if answer is not None:
                return self._chat_count, answer
            reply = self._queue.popleft() if self._queue else self.default
            return self._chat_count, reply

    def _next_call_id(self) -> str:
        with self._lock:
            return f"call_{next(self._call_ids)}"

    def _models_payload(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}
        if self.context_length is not None:
            entry["context_length"] = self.context_length
        if self.pricing:
            entry["pricing"] = dict(self.pricing)
        return {"object": "list", "data": [entry]}
