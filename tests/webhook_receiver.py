"""A real HTTP webhook receiver on loopback for the webhook tests, and the verify snippet of docs/webhooks.md."""
from __future__ import annotations

import re
import socket
import ssl
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WEBHOOKS_DOC = Path(__file__).resolve().parent.parent / "docs" / "webhooks.md"


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate and its key, as PEM files."""

    cert_path: Path
    key_path: Path


def self_signed_certificate(directory: Path, names: str = "IP:127.0.0.1,DNS:localhost") -> Certificate:
    """Make a self-signed certificate for `names` (a subjectAltName list) with the openssl command line."""
    stem = re.sub(r"[^a-z0-9]+", "-", names.lower()).strip("-")
    cert, key = directory / f"{stem}.pem", directory / f"{stem}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "30", "-subj", "/CN=webhook test receiver", "-addext", f"subjectAltName={names}"],
                   check=True, capture_output=True)
    return Certificate(cert, key)


EXPIRED_CA_CONFIG = """[ca]
default_ca = the_ca
[the_ca]
database = index.txt
new_certs_dir = .
serial = serial.txt
default_md = sha256
policy = policy
[policy]
commonName = supplied
"""


def expired_certificate(directory: Path) -> Certificate:
    """A self-signed certificate for 127.0.0.1 valid only on 1 January 2020 (`openssl ca`, which alone
    takes explicit dates), so that it is expired whatever today's date."""
    work = directory / "expired"
    work.mkdir()
    (work / "ca.cnf").write_text(EXPIRED_CA_CONFIG)
    (work / "index.txt").write_text("")
    (work / "serial.txt").write_text("01\n")
    (work / "extensions.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run = lambda *argv: subprocess.run(["openssl", *argv], cwd=work, check=True, capture_output=True)  # noqa: E731
    run("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "request.csr",
        "-subj", "/CN=expired webhook test receiver")
    run("ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", "key.pem", "-in", "request.csr",
        "-out", "cert.pem", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
        "-extfile", "extensions.cnf", "-notext")
    return Certificate(work / "cert.pem", work / "key.pem")


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event_id(self) -> str:
        return self.headers["X-Service-Webhook-Id"]


class _ExclusiveServer(ThreadingHTTPServer):
    """An HTTP server whose port is its own while it is bound, listening or not.

    HTTPServer sets SO_REUSEADDR, and on Linux two such sockets may be bound to one port as long as
    neither listens: the kernel may hand a not-yet-listening Receiver's port to another test's
    server, which then answers the deliveries meant to find a receiver down.
    """

    allow_reuse_address = False


class Receiver:
    """Records every POST; answers the scripted statuses in turn, then 200.

    Bound at once (so the URL is known) but listening only from listen(): until then a delivery
    finds the port refusing connections, like a receiver that is down. With `hold`, each request
    waits for hold.set() before it is answered. With `trickle` ("all" or "body"), the answer (or only
    its body) is written one byte every `trickle_seconds`, a slow receiver that never lets a read idle.
    """

    def __init__(self, statuses=(), listening: bool = True, hold: threading.Event | None = None,
                 answer: bytes | None = None, trickle: str | None = None, trickle_seconds: float = 0.1,
                 tls: "Certificate | None" = None):
        self.statuses = list(statuses)
        self.hold = hold
        self.answer = answer
        self.trickle = trickle
        self.trickle_seconds = trickle_seconds
        self.received: list[Received] = []
        self.arrived = threading.Condition()
        self.server = _ExclusiveServer(("127.0.0.1", 0), self._handler(), bind_and_activate=False)
        self.server.daemon_threads = True
        self.server.server_bind()
        scheme = "http"
        if tls is not None:  # HTTPS with that certificate: each accepted connection does the handshake
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert_path, tls.key_path)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hooks"
        self.thread: threading.Thread | None = None
        if listening:
            self.listen()

    def listen(self) -> None:
        self.server.server_activate()
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        if self.thread is not None:
            self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 15.0) -> bool:
        """Wait until `count` requests have arrived (a generous bound, not a timing assertion)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.received) >= count, timeout)

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.arrived:
                    receiver.received.append(Received(self.path, dict(self.headers.items()), body, time.time()))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.arrived.notify_all()
                if receiver.hold is not None:
                    receiver.hold.wait(30)
                answer = receiver.answer if receiver.answer is not None else f"answer {status}".encode()
                if receiver.trickle:
                    self._trickle(status, answer)
                    return
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def _trickle(self, status: int, answer: bytes) -> None:
                head = f"HTTP/1.1 {status} OK\r\nContent-Length: {len(answer)}\r\n\r\n".encode()
                slow = head + answer if receiver.trickle == "all" else answer
                self.close_connection = True
                try:
                    if receiver.trickle == "body":
                        self.wfile.write(head)
                        self.wfile.flush()
                    for byte in slow:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(receiver.trickle_seconds)
                except OSError:
                    pass  # the sender gave up and closed the connection

            def log_message(self, *args):
                pass

        return Handler


def documented_verify():
    """The `verify` function of the Python block in docs/webhooks.md's "Verifying" section, as a receiver would copy it."""
    section = WEBHOOKS_DOC.read_text().split("\n## Verifying a delivery\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)
    return namespace["verify"]


class RawPeer:
    """A TCP listener on loopback that answers every connection in one way that is not an HTTP answer.

    "reset": reads the request, then resets the connection; "garbage": answers a line that is not
    HTTP and closes.
    """

    def __init__(self, behaviour: str):
        self.behaviour = behaviour
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}/hooks"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return  # closed
            with connection:
                connection.settimeout(5)
                try:
                    self._read_request(connection)
                    if self.behaviour == "reset":
                        # A zero linger makes close() send RST instead of FIN.
                        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    else:
                        connection.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                except OSError:
                    pass

    @staticmethod
    def _read_request(connection: socket.socket) -> None:
        """Read one whole request (head and Content-Length body), so that what follows answers it."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        remaining = (int(length.group(1)) if length else 0) - len(body)
        while remaining > 0:
            chunk = connection.recv(remaining)
            if not chunk:
                return
            remaining -= len(chunk)

    def close(self) -> None:
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept() that close() alone would leave blocked
        except OSError:
            pass
        self.server.close()
        self.thread.join(5)
