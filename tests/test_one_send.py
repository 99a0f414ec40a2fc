"""Answers leave Waitress as one send: the header and a whole body together (server.OneSendWrite)."""
from __future__ import annotations

import socket

import pytest
from waitress.adjustments import Adjustments
from waitress.parser import HTTPRequestParser

from emissions import server


class RecordingChannel:
    """What a task needs of Waitress's channel, keeping each piece handed to write_soon."""

    def __init__(self):
        self.adj = Adjustments()
        self.server = self
        self.sent: list[bytes] = []

    def write_soon(self, data: bytes) -> int:
        self.sent.append(bytes(data))
        return len(data)


def started_task(status: str = "200 OK", headers=(), request: bytes = b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n"):
    parser = HTTPRequestParser(Adjustments())
    parser.received(request)
    task = server.OneSendTask(RecordingChannel(), parser)
    task.start()
    task.complete, task.status, task.response_headers = True, status, list(headers)
    for name, value in headers:
        if name.lower() == "content-length":
            task.content_length = int(value)
    return task


def test_an_answer_with_its_content_length_goes_out_in_one_send():
    task = started_task(headers=[("Content-Type", "application/json"), ("Content-Length", "11")])
    task.write(b'{"ok":true}')
    task.finish()
    [sent] = task.channel.sent
    head, _, body = sent.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: 11" in head
    assert body == b'{"ok":true}'
    assert task.content_bytes_written == 11


def test_an_answer_without_content_length_is_chunked_the_way_waitress_chunks_it():
    task = started_task(headers=[("Content-Type", "application/json")])
    task.write(b"abc")
    task.finish()
    head, *rest = task.channel.sent
    assert b"Transfer-Encoding: chunked" in head and head.endswith(b"\r\n\r\n")
    assert rest == [b"3\r\nabc\r\n", b"0\r\n\r\n"]


def test_bytes_past_the_content_length_are_cut_as_waitress_cuts_them():
    task = started_task(headers=[("Content-Length", "2")])
    task.write(b"abcdef")
    head, body = task.channel.sent
    assert head.endswith(b"\r\n\r\n") and body == b"ab"


def test_a_status_without_a_body_sends_only_its_header():
    task = started_task(status="304 Not Modified", headers=[("Content-Length", "3")])
    task.write(b"abc")
    [head] = task.channel.sent
    assert head.startswith(b"HTTP/1.1 304") and head.endswith(b"\r\n\r\n")


def test_a_write_before_start_response_is_still_refused():
    task = started_task()
    task.complete = False
    with pytest.raises(RuntimeError):
        task.write(b"x")


@pytest.mark.parametrize("path", [b"/healthz", b"/v1/calculations/unknown"])
def test_the_first_read_of_a_served_answer_holds_its_header_and_whole_body(live_server, path):
    host, port = live_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive: nothing closes
        first = connection.recv(65536)
    head, _, body = first.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    assert length > 0 and len(body) == length
