"""Misbehaving HTTP endpoints on loopback, for exporter fault tests.

Each is a real socket server (no mocks) that counts the requests it saw:

* ``refused_endpoint()``: a port nobody listens on;
* ``FaultServer("blackhole")``: accepts, reads, never answers;
* ``FaultServer("slow", delay_s=5)``: answers 200 after a delay;
  (every mode keeps the bodies it read whole in ``bodies``: what the collector really received)
* ``FaultServer("status", status=503, retry_after="0", failures=2)``: answers the
  status (with ``Retry-After`` when given) for the first ``failures`` requests
  (all of them when None), then 200;
* ``FaultServer("reset")``: reads the headers and part of the body, then resets
  the connection (SO_LINGER 0 -> RST);
* ``FaultServer("tls")``: TLS with a self-signed certificate for another host;
* ``FaultServer("silent")``: accepts the connection and never reads or sends a byte (a TLS handshake or a
  proxy's CONNECT that hangs); ``connections()`` counts what it accepted;
* ``FaultServer("unanswered")``: never accepts, and its accept queue is full, so the kernel drops every new
  connection's SYN: a connect hangs as behind a firewall that drops packets.
"""

from __future__ import annotations

import datetime
import select
import socket
import ssl
import struct
import tempfile
import threading
import time
from pathlib import Path


def refused_endpoint() -> str:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def self_signed_cert(directory: Path, host: str = "collector.other.invalid") -> tuple[Path, Path]:
    """A certificate for `host` (not 127.0.0.1) and its key, generated now."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class FaultServer:
    def __init__(self, mode: str, *, status: int = 503, retry_after: str | None = None,
                 failures: int | None = None, delay_s: float = 5.0, limit: int = 32 * 1024) -> None:
        assert mode in ("blackhole", "slow", "status", "reset", "tls", "silent", "unanswered", "drip", "limit"), mode
        self.mode, self.status, self.retry_after = mode, status, retry_after
        self.failures, self.delay_s, self.limit = failures, delay_s, limit
        self._dripping: dict[int, float] = {}  # answers being dripped now (drip): connection -> when it began
        self.taken: list[tuple[str, bytes]] = []  # (path, body) of every request answered 200
        self.requests: list[tuple[float, str]] = []  # (monotonic arrival, path)
        self.bodies: list[tuple[str, bytes]] = []  # (path, body) of every request read whole
        self.handshakes_failed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=0 if mode == "unanswered" else None)
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._ssl: ssl.SSLContext | None = None
        if mode == "tls":
            self._tmp = tempfile.TemporaryDirectory()
            cert, key = self_signed_cert(Path(self._tmp.name))
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._ssl.load_cert_chain(cert, key)

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.mode == 'tls' else 'http'}://127.0.0.1:{self.port}"

    def count(self, path_prefix: str = "") -> int:
        with self._lock:
            return sum(1 for _, p in self.requests if p.startswith(path_prefix))

    def connections(self) -> int:
        with self._lock:
            return len(self._conns)

    def __enter__(self) -> FaultServer:
        if self.mode == "unanswered":  # fill the accept queue (Linux holds backlog + 1), then drop further SYNs
            for _ in range(2):
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", self.port))
                self._conns.append(filler)
            return self
        threading.Thread(target=self._accept, name=f"fault-{self.mode}", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.close()
                except OSError:
                    pass

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.mode == "silent":
            self._stop.wait()
            return
        try:
            if self._ssl is not None:
                try:
                    conn = self._ssl.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError):
                    with self._lock:
                        self.handshakes_failed += 1
                    return
            while not self._stop.is_set():
                if not self._one(conn):
                    return
        except OSError:
            return

    def _one(self, conn: socket.socket) -> bool:
        """Serve one request on a keep-alive connection; False when the connection is done."""
        conn.settimeout(30)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            head += chunk
        header, _, body = head.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else ""
        length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                       if line.lower().startswith("content-length:")), 0)
        if self.mode == "reset":
            with self._lock:
                self.requests.append((time.monotonic(), path))
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # mid-body: the client is still sending; RST
            return False
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            body += chunk
        with self._lock:
            self.requests.append((time.monotonic(), path))
            self.bodies.append((path, body[:length]))
            seen = len(self.requests)
        if self.mode == "blackhole":
            self._stop.wait()
            return False
        if self.mode == "slow":
            self._stop.wait(self.delay_s)
        if self.mode == "drip":  # a status and headers, then one byte of a long body every delay_s
            return self._drip(conn)
        status, extra = 200, ""
        if self.mode == "limit" and length > self.limit:  # as a proxy with a body limit answers
            status = 413
        if self.mode == "status" and (self.failures is None or seen <= self.failures):
            status = self.status
            if self.retry_after is not None:
                extra = f"Retry-After: {self.retry_after}\r\n"
        if status == 200:
            with self._lock:
                self.taken.append((path, body[:length]))
        conn.sendall(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n{extra}\r\n".encode()
        )
        return True

    def longest_drip_s(self) -> float:
        """How long the oldest answer being dripped now has been (0: none)."""
        with self._lock:
            return time.monotonic() - min(self._dripping.values()) if self._dripping else 0.0

    def _drip(self, conn: socket.socket) -> bool:
        with self._lock:
            self._dripping[id(conn)] = time.monotonic()
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100000\r\n\r\n")
            while not self._stop.is_set():
                if select.select([conn], [], [], self.delay_s)[0] and not conn.recv(1):
                    return False  # the client shut its end: it gave up on this answer
                conn.sendall(b"\0")
        except OSError:  # the client gave up on it: the answer ends here
            pass
        finally:
            with self._lock:
                del self._dripping[id(conn)]
        return False
