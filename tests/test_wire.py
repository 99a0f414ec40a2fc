"""What the wire carries beside the API's answers: static files' headers, the deadline for a request's head."""
from __future__ import annotations

import socket


def raw_head(server, request: bytes) -> list[str]:
    """The answer's status line and header lines, as sent (a repeated header stays repeated)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer.partition(b"\r\n\r\n")[0].decode("latin-1").lower().split("\r\n")


def test_a_static_file_carries_one_cache_control_header(live_server):
    head = raw_head(live_server, b"GET /workspace/static/workspace.css HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert head[0].startswith("http/1.1 200")
    assert [line for line in head if line.startswith("cache-control:")] == ["cache-control: public, max-age=300"]


def test_an_api_answer_carries_one_no_store(live_server):
    head = raw_head(live_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert [line for line in head if line.startswith("cache-control:")] == ["cache-control: no-store"]


def test_sockets_trickling_a_request_head_are_closed_at_the_deadline_and_a_new_post_is_answered(config, acme):
    import time

    import requests

    from emissions.app import create_app
    from conftest import LiveServer, logistics_body

    app = create_app(config.with_(request_head_timeout=1.0))
    with LiveServer(app, threads=1) as server:
        host, port = server.url.removeprefix("http://").split(":")
        trickling = []
        for _ in range(50):
            connection = socket.create_connection((host, int(port)), timeout=10)
            connection.sendall(b"POST /v1/emissions/logistics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            trickling.append(connection)
        closed: set[int] = set()
        started = time.monotonic()
        while len(closed) < len(trickling) and time.monotonic() - started < 30:  # a byte each, a few a second
            for number, connection in enumerate(trickling):
                if number in closed:
                    continue
                try:
                    connection.sendall(b"a")
                except OSError:  # reset or broken pipe: the server closed it
                    closed.add(number)
            time.sleep(0.25)
        for connection in trickling:
            connection.close()
        assert len(closed) == 50, f"{50 - len(closed)} trickling sockets still open after 30 s"
        answer = requests.post(server.url + "/v1/emissions/logistics", json=logistics_body(),
                               headers=acme.headers("after-trickle"), timeout=10)
        assert answer.status_code == 201


def test_a_request_whose_head_arrives_in_time_is_served_as_ever(config, acme):
    from emissions.app import create_app
    from conftest import LiveServer

    app = create_app(config.with_(request_head_timeout=1.0))
    with LiveServer(app, threads=1) as server:
        head = raw_head(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert head[0].startswith("http/1.1 200")
