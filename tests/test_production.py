"""Production on the wire: many idle and slow connections, several workers, a reverse proxy, the workspace's own threads."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests

from emissions.serving import workers
from emissions import workspace
from emissions.app import create_app
from emissions.config import Config
from emissions.serving.adaptations import EnvelopeChannel
from emissions.serving.server import create_server
from conftest import (EMISSIONS, LiveServer, cli_json, logistics_body, make_org, post_calculation, raw_exchange,
                      serving, stop_the_sign_in_clock)
from helpers import wait_until

PASSWORD = "correct horse battery"


def calculate(url: str, key: str, idempotency_key: str, timeout: float = 10, **overrides) -> requests.Response:
    return requests.post(url + "/v1/emissions/logistics", json=logistics_body(**overrides), timeout=timeout,
                         headers={"Authorization": f"Bearer {key}", "Idempotency-Key": idempotency_key})


# --- 1. connections --------------------------------------------------------------------------------

def open_sockets(url: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    return [socket.create_connection((host, int(port)), timeout=10) for _ in range(count)]


def test_idle_and_slow_header_connections_do_not_keep_new_clients_out(tmp_path, monkeypatch):
    assert 1000 < os.sysconf("SC_OPEN_MAX"), "the test holds 400 sockets in this process"
    with serving(tmp_path, monkeypatch) as (process, url, key):
        idle = open_sockets(url, 300)
        slow = open_sockets(url, 100)
        try:
            for sock in slow:
                sock.sendall(b"POST /v1/emissions/logistics HTTP/1.1\r\nHost: example\r\n")
            for round_number in range(3):  # the slow ones send a header line each round, as an attacker would
                for sock in slow:
                    sock.sendall(b"X-Slow: %d\r\n" % round_number)
                # Held out, a new client would wait until the time-out; how long an answer takes on a
                # loaded machine is no part of the claim.
                assert requests.get(url + "/healthz", timeout=10).status_code == 200
                assert calculate(url, key, f"while-held-{round_number}").status_code == 201
                time.sleep(0.5)  # the slow clients' pace, a header line a round: no wait for anything
        finally:
            for sock in idle + slow:
                sock.close()


def test_connection_limit_reaches_waitress(tmp_path, monkeypatch):
    with serving(tmp_path, monkeypatch, CONNECTION_LIMIT="20") as (process, url, key):
        held = open_sockets(url, 20)
        with pytest.raises(requests.Timeout):  # the 21st waits in the backlog for a free place
            requests.get(url + "/healthz", timeout=1)
        for sock in held:  # (Waitress counts its own listening socket and wake-up pipe in the limit too)
            sock.close()
        assert requests.get(url + "/healthz", timeout=5).status_code == 200


def test_a_silent_connection_is_closed_after_channel_timeout(tmp_path, monkeypatch):
    with serving(tmp_path, monkeypatch, CHANNEL_TIMEOUT="1") as (process, url, key):
        [sock] = open_sockets(url, 1)
        sock.settimeout(10)
        started = time.monotonic()
        assert sock.recv(1) == b""  # closed by the server, well before the 10 s the test would wait
        assert time.monotonic() - started < 8
        sock.close()


def channel_writing_from_a_task(server):
    """A channel of the real server, on a socket pair, with a request running and unsent output."""
    ours, theirs = socket.socketpair()
    channel = EnvelopeChannel(server, ours, ("127.0.0.1", 1), server.adj, map={})
    channel.requests = [object()]
    channel.outbufs[-1].append(b"HTTP/1.1 200 OK\r\n")
    channel.total_outbufs_len = len(b"HTTP/1.1 200 OK\r\n")
    return channel, theirs


def test_the_main_loop_does_not_watch_a_channel_while_its_task_thread_writes_to_it(app):
    """Otherwise poll() returns at once, the flush finds the output locked, and the loop spins."""
    server = create_server(app, "127.0.0.1", 0, 1)
    channel, theirs = channel_writing_from_a_task(server)
    try:
        assert channel.writable()  # output left by the task thread: the loop sends it
        holding, release = threading.Event(), threading.Event()

        def task_thread_writing():
            with channel.outbuf_lock:
                holding.set()
                release.wait(10)

        writer = threading.Thread(target=task_thread_writing)
        writer.start()
        holding.wait(10)
        try:
            assert not channel.writable()
            channel.will_close = True  # a channel to close is always watched
            assert channel.writable()
            channel.will_close = False
            # Past the high watermark the task thread wakes the loop, lock in hand, and waits for a flush.
            channel.total_outbufs_len = server.adj.outbuf_high_watermark + 1
            assert channel.writable()
            channel.total_outbufs_len = len(b"HTTP/1.1 200 OK\r\n")
        finally:
            release.set()
            writer.join()
        assert channel.writable()
    finally:
        channel.close()
        theirs.close()
        server.close()


@contextlib.contextmanager
def small_window_get(server, timeout: float, close: bool = True):
    """A connection to the server that offers a 4 KB receive window, having sent GET / (with
    Connection: close when `close`). The buffer is set before connect(), so that the window offered is
    this small: shrunk after it, the buffer cannot hold the segments the larger window let through,
    the kernel drops them, the server retransmits on its timer, and the answer crawls."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.socket() as connection:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        connection.settimeout(timeout)
        connection.connect((host, int(port)))
        connection.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + (b"Connection: close\r\n" if close else b"") + b"\r\n")
        yield connection


def test_a_large_answer_read_slowly_arrives_whole(tmp_path):
    """What the task thread cannot send at once the main loop sends, once the output lock is free."""
    chunk = b"x" * 65536

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(len(chunk) * 32))])
        return (chunk for _ in range(32))

    with LiveServer(app, threads=1) as server:
        with small_window_get(server, timeout=10) as connection:
            answer = b""
            while part := connection.recv(4096):
                answer += part
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert len(body) == len(chunk) * 32 and body == chunk * 32, len(body)


def dechunked(body: bytes) -> bytes:
    """A chunked body's data; AssertionError when it ends before its last (empty) chunk."""
    data = b""
    while True:
        size_line, separator, body = body.partition(b"\r\n")
        assert separator, "the answer ends before its last chunk"
        size = int(size_line, 16)
        if size == 0:
            return data
        data, body = data + body[:size], body[size + 2:]


def test_a_large_answer_read_steadily_but_slowly_is_not_closed_as_idle(tmp_path):
    """Waitress sends only when the kernel's buffer has room; a client slow to empty it still reads."""
    chunk = b"x" * 65536

    def app(environ, start_response):  # streamed, as the CSV downloads are: chunked
        start_response("200 OK", [("Content-Type", "text/csv")])
        return (chunk for _ in range(32))

    app.settings = Config(channel_timeout=2)
    with LiveServer(app, threads=1) as server:
        # The accepted socket inherits a fixed send buffer: emptying a third of it at the client's
        # pace below takes seconds, with nothing for Waitress to send meanwhile.
        server.server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
        with small_window_get(server, timeout=30) as connection:
            answer, slow_until = b"", time.monotonic() + 5
            while part := connection.recv(4096):
                answer += part
                if time.monotonic() < slow_until:
                    time.sleep(0.2)  # at first a steady consumer too slow for Waitress to send, then quick
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head, head
    data = dechunked(body)
    assert len(data) == len(chunk) * 32 and data == chunk * 32, len(data)


@pytest.mark.parametrize("chunks", [64, 320])  # all in Waitress's buffers; past them, the request still running
def test_a_client_that_stops_reading_is_closed_after_channel_timeout_and_can_tell(tmp_path, chunks):
    """Waitress marks it to close but closes it only once its socket has room: that is, never; and
    it leaves alone a channel whose request runs, though the request thread waits for that client."""
    chunk = b"x" * 65536

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/csv")])
        return (chunk for _ in range(chunks))

    app.settings = Config(channel_timeout=1)
    with LiveServer(app, threads=1) as server:
        with small_window_get(server, timeout=10, close=False) as connection:
            answer = connection.recv(4096)
            wait_until(lambda: not server.server.active_channels, timeout=30,  # the client reads nothing meanwhile
                       what="the channel of a client that stopped reading closing")
            try:
                while part := connection.recv(65536):
                    answer += part
            except ConnectionResetError:
                pass
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    with pytest.raises(AssertionError, match="ends before its last chunk"):
        dechunked(body)  # cut short, and the client can tell

# --- 2. several workers ----------------------------------------------------------------------------

def children_of(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def bytes_read(pid: int) -> int:
    return int(dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())["rchar"])


def test_two_workers_share_the_port_and_sigterm_stops_them_all(tmp_path, monkeypatch):
    with serving(tmp_path, monkeypatch, "--workers", "2") as (process, url, key):
        pids = children_of(process.pid)
        assert len(pids) == 2
        before = {pid: bytes_read(pid) for pid in pids}
        for number in range(60):  # a new connection each: the kernel spreads them over the workers
            assert calculate(url, key, f"spread-{number}").status_code == 201
        grown = {pid: bytes_read(pid) - before[pid] for pid in pids}
        assert all(growth > 2000 for growth in grown.values()), grown  # each read some of the requests
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        assert (process.returncode, out.strip()) == (0, "Stopped."), err
        assert "Traceback" not in err and "emissions:" not in err
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists()


def test_with_two_workers_every_event_is_delivered_once(tmp_path, monkeypatch):
    from webhook_receiver import Receiver

    receiver = Receiver()
    monkeypatch.setenv("WEBHOOK_ALLOW_PRIVATE_TEST", "true")  # the receiver is on loopback
    try:
        with serving(tmp_path, monkeypatch, "--workers", "2", WEBHOOK_POLL_SECONDS="0.05") as (process, url, key):
            cli_json("webhook", "set", "--org", "acme", "--env", "test", "--url", receiver.url)
            for number in range(6):
                assert calculate(url, key, f"hooked-{number}").status_code == 201
            assert receiver.wait_for(6)
            # A window, not a wait: ten more polls, in which a second deliverer would send again (no
            # condition can say that something did not happen).
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)
    finally:
        receiver.close()
    ids = [received.event_id for received in receiver.received]
    assert len(ids) == len(set(ids)) == 6


def test_a_second_server_with_workers_cannot_share_the_port_by_accident(tmp_path, monkeypatch):
    with serving(tmp_path, monkeypatch, "--workers", "2") as (process, url, key):
        port = url.rsplit(":", 1)[1]
        second = subprocess.run([str(EMISSIONS), "serve", "--workers", "2", "--port", port], capture_output=True,
                                text=True, timeout=30, env={**os.environ, "WEBHOOK_POLL_SECONDS": "60"})
        assert (second.returncode, second.stdout) == (1, "")
        assert second.stderr == f"emissions: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_workers_stop_when_their_parent_is_killed_outright(tmp_path, monkeypatch):
    with serving(tmp_path, monkeypatch, "--workers", "2") as (process, url, key):
        pids = children_of(process.pid)
        process.kill()
        process.communicate(timeout=30)  # returns once every worker has closed the output pipes: gone
        for pid in pids:
            wait_until(lambda: gone(pid), timeout=10, what=f"worker {pid} ending with its parent")


def gone(pid: int) -> bool:
    """The process has ended (a zombie counts: it runs nothing)."""
    try:
        return "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return True


def replacement_of(parent: int, dead: int, others: list[int]) -> int:
    """The worker the parent forked in place of `dead` (waits for it)."""
    new = wait_until(lambda: [pid for pid in children_of(parent) if pid != dead and pid not in others],
                     timeout=15, what=f"a worker replacing {dead}")
    return new[0]


def test_a_worker_killed_under_load_is_started_again_and_no_acknowledged_calculation_is_lost(tmp_path, monkeypatch):
    import threading

    with serving(tmp_path, monkeypatch, "--workers", "2", RATE_LIMIT_PER_SECOND="0") as (process, url, key):
        first, second = children_of(process.pid)
        acknowledged: list[tuple[float, str]] = []
        stopping = threading.Event()

        def load(name: str) -> None:
            number = 0
            while not stopping.is_set():
                number += 1
                try:
                    answer = calculate(url, key, f"{name}-{number}")
                except requests.RequestException:  # a connection the dead worker had accepted, or answered in part
                    continue
                if answer.status_code == 201:
                    acknowledged.append((time.monotonic(), answer.json()["id"]))

        clients = [threading.Thread(target=load, args=(f"load{n}",)) for n in range(3)]
        for client in clients:
            client.start()
        try:
            wait_until(lambda: len(acknowledged) >= 20, timeout=120, what="20 acknowledged calculations")
            os.kill(first, signal.SIGKILL)
            killed_at = time.monotonic()
            replacement = replacement_of(process.pid, first, [second])
            forked_at = time.monotonic()
            served_meanwhile = sum(1 for moment, _ in acknowledged if killed_at < moment < forked_at)
            count = len(acknowledged)
            wait_until(lambda: len(acknowledged) >= count + 20, timeout=120,
                       what="20 more acknowledged calculations after the restart")
        finally:
            stopping.set()
            for client in clients:
                client.join(timeout=30)
        assert served_meanwhile > 0  # the other worker answered while the dead one was gone
        assert process.poll() is None and sorted(children_of(process.pid)) == sorted([second, replacement])
        for _, calculation_id in acknowledged:
            read = requests.get(f"{url}/v1/calculations/{calculation_id}", timeout=10,
                                headers={"Authorization": f"Bearer {key}"})
            assert read.status_code == 200, calculation_id
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert (process.returncode, out.strip().splitlines()[-1]) == (0, "Stopped.")
    assert "emissions: worker 0 was killed by signal 9; starting it again in 0.5 s" in err.splitlines()


# The console command with the restart backoff a tenth of the shipped one: the test below checks that it
# doubles until the parent gives up; the test above checks the first delay as shipped.
QUICK_BACKOFF = (sys.executable, "-c", "import sys; from emissions import cli; from emissions.serving import workers; "
                                       "workers.FIRST_BACKOFF /= 10; sys.exit(cli.main())")


def test_a_worker_that_keeps_dying_stops_the_others_and_the_parent_fails(tmp_path, monkeypatch):
    with serving(tmp_path, monkeypatch, "--workers", "2", command=QUICK_BACKOFF) as (process, url, key):
        first, second = children_of(process.pid)
        victim = first
        for _ in range(workers.MAX_DEATHS - 1):
            os.kill(victim, signal.SIGKILL)
            victim = replacement_of(process.pid, victim, [second])
        os.kill(victim, signal.SIGKILL)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 1
        lines = err.strip().splitlines()
        assert [line.rsplit(" in ", 1)[-1] for line in lines[:4]] == ["0.05 s", "0.1 s", "0.2 s", "0.4 s"]
        assert lines[-2] == "emissions: worker 0 was killed by signal 9; 5 deaths within 60 s, so every worker is stopped"
        assert lines[-1] == "emissions: workers kept stopping unexpectedly, so every worker was stopped"
        assert not Path(f"/proc/{second}").exists()


# --- 3. behind a proxy -----------------------------------------------------------------------------

def echo(environ, start_response):
    """What the app is told about the client."""
    body = json.dumps({name: environ.get(name) for name in (
        "REMOTE_ADDR", "wsgi.url_scheme", "HTTP_HOST", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO")}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def forwarded_request(path: str, body: bytes = b"", method: str = "GET", **headers) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: internal:8000", "Connection: close",
             "X-Forwarded-For: 203.0.113.7", "X-Forwarded-Proto: https", "X-Forwarded-Host: api.example.com",
             f"Content-Length: {len(body)}", *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def served_echo(trusted: tuple[str, ...]):
    echo.settings = Config(trusted_proxy=trusted)
    return LiveServer(echo)


def test_forwarded_headers_from_a_trusted_proxy_tell_the_app_about_the_client():
    with served_echo(("10.1.2.3", "127.0.0.1")) as server:
        status, _, body = raw_exchange(server, forwarded_request("/"))
    assert status == 200
    assert json.loads(body) == {"REMOTE_ADDR": "203.0.113.7", "wsgi.url_scheme": "https",
                                "HTTP_HOST": "api.example.com", "HTTP_X_FORWARDED_FOR": "203.0.113.7",
                                "HTTP_X_FORWARDED_PROTO": "https"}


@pytest.mark.parametrize("trusted", [(), ("127.0.0.1",)])
def test_forwarded_headers_from_any_other_peer_are_removed(trusted):
    with served_echo(trusted) as server:
        status, _, body = raw_exchange(server, forwarded_request("/"), source="127.0.0.2")
    assert status == 200
    assert json.loads(body) == {"REMOTE_ADDR": "127.0.0.2", "wsgi.url_scheme": "http", "HTTP_HOST": "internal:8000",
                                "HTTP_X_FORWARDED_FOR": None, "HTTP_X_FORWARDED_PROTO": None}


def test_a_trusted_network_is_trusted_for_each_of_its_addresses():
    with served_echo(("127.0.0.0/30",)) as server:
        _, _, body = raw_exchange(server, forwarded_request("/"), source="127.0.0.2")
    assert json.loads(body)["REMOTE_ADDR"] == "203.0.113.7"


@pytest.fixture
def proxied_workspace(config):
    app = create_app(config.with_(trusted_proxy=("127.0.0.1",)))
    workspace.create_user(make_org("acme"), "ops@acme.example", PASSWORD, actor="cli")
    with LiveServer(app) as server:
        yield server


def sign_in_through_proxy(server, client: str, email: str, password: str, source: str = "127.0.0.1"):
    """Sign in as a browser behind the proxy does: the form (its CSRF token and cookie), the POST, and
    where the password is checked off the serving thread, /workspace/login/wait until it answers."""
    def send(path: str, body: bytes = b"", method: str = "GET", cookie: str = ""):
        headers = {"Cookie": cookie} if cookie else {}
        if body:
            headers["Content_Type"] = "application/x-www-form-urlencoded"
        request = forwarded_request(path, body, method, **headers).replace(b"203.0.113.7", client.encode())
        return raw_exchange(server, request, source=source)

    _, headers, page = send("/workspace/login")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page).group(1).decode()
    body = urlencode({"csrf": csrf, "email": email, "password": password}).encode()
    status, headers, answer = send("/workspace/login", body, "POST", headers["set-cookie"].split(";")[0])
    pending = ""
    for _ in range(1000):
        waiting = status == 303 and headers.get("location", "").endswith("/workspace/login/wait")
        if not (waiting or b"Signing you in" in answer):
            break
        if waiting:
            pending = headers["set-cookie"].split(";")[0]
        else:
            time.sleep(0.005)
        status, headers, answer = send("/workspace/login/wait", cookie=pending)
    return status, headers, answer


def test_the_session_cookie_is_secure_when_the_client_spoke_https_to_the_proxy(proxied_workspace):
    status, headers, _ = sign_in_through_proxy(proxied_workspace, "203.0.113.7", "ops@acme.example", PASSWORD)
    assert status == 303 and "; Secure" in headers["set-cookie"]
    # The same claim from a peer that is not the proxy is not believed.
    status, headers, _ = sign_in_through_proxy(proxied_workspace, "203.0.113.7", "ops@acme.example", PASSWORD,
                                               source="127.0.0.2")
    assert status == 303 and "; Secure" not in headers["set-cookie"]


def test_sign_in_throttling_keys_on_the_real_client_address(proxied_workspace, monkeypatch):
    stop_the_sign_in_clock(proxied_workspace.app, monkeypatch)
    for number in range(workspace.SIGN_IN_ADDRESS_BURST):  # other emails each time: only the address is throttled
        status, _, _ = sign_in_through_proxy(proxied_workspace, "203.0.113.7", f"x{number}@acme.example", "wrong!")
        assert status == 401
    assert sign_in_through_proxy(proxied_workspace, "203.0.113.7", "y@acme.example", "wrong!")[0] == 429
    # Another client behind the same proxy is not held back by the first one's failures.
    assert sign_in_through_proxy(proxied_workspace, "198.51.100.9", "ops@acme.example", PASSWORD)[0] == 303


# --- 4. the workspace's own threads ---------------------------------------------------------------

class Held:
    """The app, with a route under /workspace and one under /v1 that stay in progress until their
    gate opens (as a long download does), answering with the name of the thread that served them."""

    def __init__(self, app):
        self.app, self.settings = app, app.settings.with_(workspace_threads=1)
        self.gates = {"/workspace/held": threading.Event(), "/v1/held": threading.Event()}
        self.entered = threading.Semaphore(0)

    def __call__(self, environ, start_response):
        gate = self.gates.get(environ["PATH_INFO"])
        if gate is None:
            return self.app(environ, start_response)
        self.entered.release()
        gate.wait(60)
        body = threading.current_thread().name.encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    def open(self) -> None:
        for gate in self.gates.values():
            gate.set()


def test_the_api_answers_while_a_workspace_request_holds_its_thread(app, client, acme):
    """With one API thread (SQLite's default): the workspace's request is served on a thread of its own."""
    created = post_calculation(client, acme, status=201).json
    held = Held(app)
    download: dict = {}
    with LiveServer(held, threads=1) as server:
        sender = threading.Thread(target=lambda: download.update(
            answer=requests.get(server.url + "/workspace/held", timeout=90)))
        sender.start()
        try:
            assert held.entered.acquire(timeout=30)  # the workspace request is in progress
            health = requests.get(server.url + "/healthz", timeout=30)
            fetched = requests.get(f"{server.url}/v1/calculations/{created['id']}", headers=acme.headers(),
                                   timeout=30)
            assert not download and sender.is_alive()  # answered while the workspace request still is not
        finally:
            held.open()
            sender.join(30)
    assert health.status_code == 200, health.text
    assert fetched.status_code == 200 and fetched.json()["id"] == created["id"]
    assert download["answer"].status_code == 200 and download["answer"].text == "workspace-0"


def test_a_connection_is_handed_from_the_workspace_s_threads_to_the_api_s_between_two_requests(app):
    held = Held(app)
    held.open()
    with LiveServer(held, threads=1) as server:
        pipelined = (b"GET /workspace/held HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /v1/held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        with socket.create_connection(("127.0.0.1", server.server.effective_port), timeout=30) as sock:
            sock.sendall(pipelined)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
    assert received.count(b"HTTP/1.1 200 OK") == 2, received
    assert received.index(b"\r\n\r\nworkspace-0") < received.index(b"\r\n\r\nwaitress-0"), received


def test_shutdown_answers_the_requests_queued_on_both_lanes(app):
    """One request in progress and one queued on each lane at SIGTERM's shutdown: all four answered.
    The API's gate opens first and the workspace's a moment after the API's lane is idle, so that a
    drain that did not wait for the workspace's lane would stop its thread before its queued request."""
    held = Held(app)
    server = LiveServer(held, threads=1)
    dispatcher = server.server.task_dispatcher
    draining = threading.Event()
    close_listeners = dispatcher.before_drain
    dispatcher.before_drain = lambda: (close_listeners(), draining.set())
    answers: dict = {}

    def get(number: int, path: str):
        try:
            answers[number] = requests.get(server.url + path, timeout=90)
        except requests.RequestException as exc:
            answers[number] = exc

    def open_when_draining():
        if draining.wait(60):
            held.gates["/v1/held"].set()
            wait_until(lambda: not dispatcher.queue and dispatcher.active_count == 0)
            # A drain that did not wait for the workspace's lane would now tell its thread to stop
            # (stop_count); this one waits, and the pause is sequencing only.
            pause = time.monotonic() + 2
            while dispatcher.workspace.stop_count == 0 and time.monotonic() < pause:
                time.sleep(0.01)
        held.open()

    paths = ["/workspace/held", "/v1/held", "/workspace/held", "/v1/held"]
    senders = [threading.Thread(target=get, args=(number, path)) for number, path in enumerate(paths)]
    opener = threading.Thread(target=open_when_draining)
    with server:
        for sender in senders:
            sender.start()
        # Both counts, as a request is queued a moment before a thread takes it (queue 1, none active).
        wait_until(lambda: len(dispatcher.queue) == 1 and len(dispatcher.workspace.queue) == 1
              and dispatcher.active_count == 1 and dispatcher.workspace.active_count == 1)
        assert dispatcher.active_count == 1 and dispatcher.workspace.active_count == 1
        opener.start()
    # LiveServer's exit drains and checks that no thread of either lane is left.
    opener.join(30)
    for sender in senders:
        sender.join(30)
    assert all(isinstance(answer, requests.Response) for answer in answers.values()), answers
    assert {number: (answer.status_code, answer.text) for number, answer in answers.items()} == {
        0: (200, "workspace-0"), 1: (200, "waitress-0"), 2: (200, "workspace-0"), 3: (200, "waitress-0")}
