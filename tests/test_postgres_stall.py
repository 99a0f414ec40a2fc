"""A stalled network to PostgreSQL: requests answer 503 by the statement timeout, /healthz 503 at
once, and both recover; through a real TCP proxy that stops forwarding, against a real server."""
from __future__ import annotations

import select
import socket
import threading
import time

import pytest
import requests

from emissions.app import create_app
from conftest import POSTGRES_URL, LiveServer, logistics_body

pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="needs TEST_DATABASE_URL (a PostgreSQL to stall)")


class StallingProxy:
    """A TCP proxy to host:port that holds every byte while paused (as a stalled network does)."""

    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.flowing = threading.Event()
        self.flowing.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while not self.closed:
                if not select.select([source], [], [], 0.1)[0]:
                    continue
                data = source.recv(65536)
                if not data:
                    break
                self.flowing.wait()  # held here while paused
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        self.flowing.set()
        self.listener.close()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_stalled_postgres_is_a_503_by_the_statement_timeout_and_healthz_says_so_at_once(config, acme):
    host_port = config.database_url.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    proxy = StallingProxy(host, int(port))
    proxied = config.database_url.replace(f"@{host_port}/", f"@127.0.0.1:{proxy.port}/")
    app = create_app(config.with_(database_url=proxied, database_statement_timeout=2.0, database_connect_timeout=2))
    url = None
    try:
        with LiveServer(app, threads=4) as server:
            url = server.url
            post = lambda key: requests.post(url + "/v1/emissions/logistics", json=logistics_body(),
                                             headers=acme.headers(key), timeout=15)
            assert post("before").status_code == 201
            proxy.flowing.clear()
            started = time.monotonic()
            stalled = post("during")
            waited = time.monotonic() - started
            assert stalled.status_code == 503 and stalled.headers["Retry-After"] == "5", stalled.text
            assert waited < 10, f"answered after {waited:.1f} s, with a 2 s statement timeout"
            health = requests.get(url + "/healthz", timeout=5)
            assert (health.status_code, health.json()["status"]) == (503, "unavailable")
            proxy.flowing.set()
            answers = [post("during").status_code for _ in range(3)]  # the retry of the refused request
            assert answers[-1] in (200, 201), answers
            for _ in range(50):  # the probe stuck behind the stall finishes, and the next one passes
                if requests.get(url + "/healthz", timeout=5).status_code == 200:
                    break
                time.sleep(0.1)
            assert requests.get(url + "/healthz", timeout=5).json() == {"status": "ok", "database": "ok"}
    finally:
        proxy.close()
