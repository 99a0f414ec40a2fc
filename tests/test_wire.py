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
