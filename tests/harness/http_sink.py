"""A loopback HTTP server that records POST bodies (for the ATOF stream sink)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HttpSink:
    def __init__(self, status: int = 200, delay_s: float = 0.0, location: str | None = None) -> None:
        self.status, self.delay_s, self.location = status, delay_s, location
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(sink.delay_s)
                with sink._lock:
                    sink.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(sink.status)
                if sink.location:
                    self.send_header("Location", sink.location)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/atof"

    def __enter__(self) -> HttpSink:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def events(self) -> list[dict]:
        out: list[dict] = []
        with self._lock:
            for headers, body in self.requests:
                if headers.get("content-type") == "application/x-ndjson":
                    out.extend(json.loads(line) for line in body.decode().splitlines() if line)
                else:
                    out.extend(json.loads(body))
        return out
