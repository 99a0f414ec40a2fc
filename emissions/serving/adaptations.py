"""Waitress adapted: the API's error envelope for the requests Waitress refuses, two lanes of request
threads drained on SIGTERM, and deadlines for connections Waitress would keep open for ever.

Each private hook of Waitress used here has its reason beside it, and tests/test_waitress_hooks.py
fails when a Waitress upgrade changes one.
"""
from __future__ import annotations

import fcntl
import socket
import struct
import termios
import threading
import time
import uuid

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, MultiSocketServer
from waitress.parser import HTTPRequestParser
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask

from .. import jsoncodec
from ..app import SECURITY_HEADERS


class EnvelopeErrorTask(ErrorTask):
    """Waitress's own refusals (malformed HTTP, a body over its limit) in the API's error envelope."""

    def execute(self):  # Waitress hook: its refusal's answer, written here in the envelope
        error = self.request.error
        request_id = str(uuid.uuid4())
        status = f"{error.code} {error.reason}"
        if error.code == 413:
            message = "The request body is larger than 64 KiB."
        elif error.code == 501:
            # Waitress's 501 is only ever a Transfer-Encoding other than chunked: the client's to
            # change, so a 400 (a 5xx tells clients to retry the same request, here in vain).
            status, message = "400 Bad Request", ("The Transfer-Encoding is not supported; send the body with "
                                                  "Content-Length or Transfer-Encoding: chunked.")
        else:
            message = f"The HTTP request could not be read: {error.reason.lower()}."
        code = "INVALID_REQUEST" if int(status[:3]) < 500 else "INTERNAL_ERROR"
        body = jsoncodec.dumps({"error": {"code": code, "message": message, "request_id": request_id}}).encode()
        self.status = status
        self.response_headers.extend([("Content-Type", "application/json"), ("X-Request-Id", request_id),
                                      *SECURITY_HEADERS])
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class CountingParser(HTTPRequestParser):
    """Waitress's request parser, counting the Idempotency-Key lines it joins into one value.

    Waitress joins repeated header lines with ", " (as a proxy may), so "a" and "b" would arrive
    as the one key "a, b"; the count lets the app refuse two keys instead (app.py).
    """

    idempotency_keys = 0

    def parse_header(self, header_plus):  # Waitress private method: the only place that sees the header lines apart
        # A header line is its name, then ":" at once (Waitress refuses a space before it).
        self.idempotency_keys = header_plus.lower().count(b"\nidempotency-key:")
        return super().parse_header(header_plus)


class CountingTask(WSGITask):
    """Waitress's WSGI task, handing the parser's Idempotency-Key count to the app."""

    def get_environment(self):  # Waitress hook: the one place a task builds the app's environ
        environ = super().get_environment()
        environ["emissions.idempotency_keys"] = getattr(self.request, "idempotency_keys", 0)
        return environ


def is_workspace(path: str) -> bool:
    """Whether a request path is the workspace's: its pages, its static files, its exports."""
    return path == "/workspace" or path.startswith("/workspace/")


class Lane(ThreadedTaskDispatcher):
    """Waitress's request threads, named after the lane they serve (`workspace-0`, ...)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def start_new_thread(self, target, thread_no):  # Waitress private method: its threads are unnamed otherwise
        threading.Thread(target=target, name=f"{self.name}-{thread_no}", args=(thread_no,), daemon=True).start()


class DrainingDispatcher(ThreadedTaskDispatcher):
    """Waitress's request threads in two lanes, answering the requests already received before they stop.

    The API's requests are served by this dispatcher's own threads (THREADS), the workspace's by
    those of `workspace` (WORKSPACE_THREADS): a download streams every row on its thread, and on
    SQLite's one API thread an API request would wait for its last row. Waitress hands over a
    connection with its next request first in line; a connection whose next request is for the
    other lane is handed to that lane when its current one is answered.

    On SIGTERM Waitress lets each thread finish the request in its hands and cancels those waiting
    in the queue: their clients lose the connection without an answer (behind a proxy, a 502 for a
    POST it will not retry). Here shutdown() first waits, at most DRAIN_SECONDS, until both lanes'
    queues are empty and every thread idle. A queued request is complete already (its body read);
    its thread sends the answer itself, so the stopped socket loop is not needed for it.
    """

    DRAIN_SECONDS = 10.0  # a request waits at most about this long on SQLite's write lock (busy_timeout)

    def __init__(self):
        super().__init__()
        self.workspace = Lane("workspace")
        self.before_drain = lambda: None  # create_server: close the listening sockets

    def add_task(self, task):  # Waitress hook: every request reaches a thread through it, so the lane is chosen here
        """Queue a connection (Waitress's task) on the lane of the request it is to serve next."""
        requests = getattr(task, "requests", None)
        if requests and is_workspace(getattr(requests[0], "path", "")):
            self.workspace.add_task(task)
        else:
            super().add_task(task)

    def idle(self) -> bool:
        """No request queued or in hand on either lane.

        Both locks are held at once: a thread hands a connection to the other lane before it counts
        itself idle, so the connection is seen in one lane or the other, never between them.
        """
        with self.workspace.lock, self.lock:
            return not (self.queue or self.active_count or self.workspace.queue or self.workspace.active_count)

    def shutdown(self, cancel_pending=True, timeout=5):  # Waitress hook: called on SIGTERM, so the drain waits here
        self.before_drain()  # new clients are refused (and may go elsewhere), not taken in and dropped
        deadline = time.monotonic() + self.DRAIN_SECONDS
        while time.monotonic() < deadline and not self.idle():
            time.sleep(0.02)
        self.set_thread_count(0)  # both lanes' threads stop at once, each when its request is answered
        self.workspace.set_thread_count(0)
        started = time.monotonic()
        self.workspace.shutdown(cancel_pending, timeout)
        return super().shutdown(cancel_pending, max(0.0, timeout - (time.monotonic() - started)))


class EnvelopeChannel(HTTPChannel):
    """Waitress's channel with the envelope's parser and tasks, noting when a request's head began.

    Waitress closes a connection only when it has been silent for CHANNEL_TIMEOUT: one that sends a
    byte a second holds its socket for ever. head_started is when the request whose head is still
    incomplete began (None when there is none); close_slow_heads closes it past REQUEST_HEAD_TIMEOUT.
    """

    parser_class = CountingParser  # Waitress hook: each request's parser is made from it
    task_class = CountingTask  # Waitress hook: each request's task is made from it
    error_task_class = EnvelopeErrorTask  # Waitress hook: each refused request's answer is made from it
    head_started: float | None = None
    _timed_request = None
    queued_seen: int | None = None  # what the kernel held for the client when last looked

    def writable(self):  # Waitress hook (wasyncore): asked before every poll() whether to watch for writing
        """Waitress's answer, but not while a task thread holds the output lock to write.

        The task thread sends what it writes itself, under that lock, the interpreter lock released
        during send(); meanwhile Waitress would call the channel writable (its output is not yet
        counted as sent), poll() would return at once, the flush would find the lock taken, and the
        main loop would spin on like that until the task thread sent, taking the interpreter lock from
        it at each turn. What the task thread could not send it leaves with the lock released, and
        it wakes the main loop (the trigger), which then finds the channel writable again. Past the
        high watermark the task thread wakes the main loop while it holds the lock and then waits for
        it to flush: such a channel stays writable, or poll() would sleep its whole timeout first.
        """
        if not super().writable():
            return False
        if self.requests and not (self.will_close or self.close_when_flushed):
            if not self.outbuf_lock.acquire(False):
                return self.total_outbufs_len > self.adj.outbuf_high_watermark
            self.outbuf_lock.release()
        return True

    def _flush_some(self, do_close=True):  # Waitress private method: every flush of the output goes through it
        """Waitress's flush, noting what the kernel still holds when output is left (note_clients_reading)."""
        sent = super()._flush_some(do_close=do_close)
        if sent and self.total_outbufs_len:
            self.queued_seen = unsent_bytes(self.socket)
        return sent

    def received(self, data):  # Waitress hook: every byte read arrives here, so a head's start is seen here
        result = super().received(data)
        request = self.request  # the request being read, None between requests
        if request is None or request.headers_finished:
            self.head_started = None
        elif request is not self._timed_request:
            self._timed_request, self.head_started = request, time.time()  # Waitress's own clock
        return result


def close_slow_heads(server: BaseWSGIServer, now: float, deadline: float) -> None:
    """Close the channels whose request head began more than `deadline` seconds ago."""
    cutoff = now - deadline
    for channel in list(server.active_channels.values()):
        started = getattr(channel, "head_started", None)
        if started is not None and started < cutoff:
            channel.will_close = True  # Waitress closes it on its next turn of the loop


def unsent_bytes(sock) -> int | None:
    """What the kernel still holds to deliver on this socket (sent or not, unacknowledged), or None."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    except (OSError, ValueError):  # closed already, or a system without the request
        return None


def note_clients_reading(server: BaseWSGIServer, now: float) -> None:
    """Count a channel whose client is reading its answer as active, though Waitress sent nothing.

    Waitress counts a channel active when it last received or sent, and it sends only when the
    socket's kernel buffer has room: that buffer grows to megabytes, and a client reading a large
    answer steadily but slowly can take longer than CHANNEL_TIMEOUT to empty a third of it. Waitress
    would then close the channel as idle and throw away the rest of the answer, the client seeing
    the connection end before the answer does. Here the kernel's queue for the socket shrinking
    since Waitress last sent or this last looked (the client acknowledged bytes) is activity; a
    client that reads nothing for CHANNEL_TIMEOUT is still closed.
    """
    for channel in list(server.active_channels.values()):
        if not channel.total_outbufs_len:
            continue  # nothing left to lose: Waitress's own rule
        queued, before = unsent_bytes(channel.socket), getattr(channel, "queued_seen", None)
        if queued is not None and before is not None and queued < before:
            channel.last_activity = now
        channel.queued_seen = queued


def close_stalled(server: BaseWSGIServer) -> None:
    """Shut down the sockets of the channels Waitress marked to close in an earlier round but could not.

    Waitress closes a channel on its next write turn, and a channel with output left gets one only
    when its socket has room: one whose client has stopped reading would stay open for ever, its
    answer held in memory. Shut down, the socket reports a hang-up, and Waitress closes the channel.
    """
    for channel in list(server.active_channels.values()):
        if channel.will_close and channel.total_outbufs_len:
            try:
                channel.socket.shutdown(socket.SHUT_RDWR)
            except OSError:  # gone already
                pass


def mark_blocked_answers(server: BaseWSGIServer, now: float) -> None:
    """Mark to close the channels whose request thread has waited on a silent client for CHANNEL_TIMEOUT.

    Waitress closes no channel whose request is running; past outbuf_high_watermark of unsent
    output the request thread waits for the client to make room, so a client that stops reading
    a large streamed answer would hold that thread for ever. Closed (close_stalled), the channel
    wakes the thread, whose next write raises ClientDisconnected and ends the request.
    """
    cutoff = now - server.adj.channel_timeout
    for channel in list(server.active_channels.values()):
        if (channel.requests and channel.total_outbufs_len > server.adj.outbuf_high_watermark
                and channel.last_activity < cutoff):
            channel.will_close = True


def enforce_head_deadline(server, deadline: float) -> None:
    """Have each of the server's listeners run close_stalled, note_clients_reading, Waitress's own round
    (which marks idle channels to close), mark_blocked_answers and close_slow_heads in turn."""
    # Waitress private attribute: a one-socket server keeps its listener in `_map`, with no public name for it.
    channels = server.map if isinstance(server, MultiSocketServer) else server._map
    for listener in [item for item in list(channels.values()) if isinstance(item, BaseWSGIServer)]:
        def maintenance(now, listener=listener, idle=listener.maintenance):
            close_stalled(listener)  # before this round marks more
            note_clients_reading(listener, now)
            idle(now)
            mark_blocked_answers(listener, now)
            close_slow_heads(listener, now, deadline)
        listener.maintenance = maintenance  # Waitress hook: its readable() calls it every cleanup_interval


def close_listeners(server) -> None:
    """Stop accepting connections: close the listening sockets of a Waitress server (one, or several
    in a MultiSocketServer), and keep the open channels and the trigger that answers them."""
    channels = server.map if isinstance(server, MultiSocketServer) else server._map  # as in enforce_head_deadline
    for listener in [item for item in list(channels.values()) if isinstance(item, BaseWSGIServer)]:
        wasyncore.dispatcher.close(listener)  # not BaseWSGIServer.close(): that closes the trigger too
