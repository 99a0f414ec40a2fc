"""Each part of Waitress that emissions/serving overrides or reaches into, checked against the installed
Waitress: a Waitress release that renames, re-signs or stops calling one fails here, by name, before
the behaviour it carries breaks quietly (the wire tests show what each hook does)."""
from __future__ import annotations

import inspect
import socket

import pytest
import waitress
from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer, MultiSocketServer
from waitress.task import ErrorTask, Task, ThreadedTaskDispatcher, WSGITask

from emissions.serving.adaptations import (CountingParser, CountingTask, DrainingDispatcher, EnvelopeChannel,
                                           EnvelopeErrorTask, Lane, close_listeners, enforce_head_deadline)


def app(environ, start_response):
    start_response("204 No Content", [])
    return [b""]


def parameters(function) -> list[tuple[str, object]]:
    return [(parameter.name, parameter.default) for parameter in inspect.signature(function).parameters.values()]


# Each method a class of ours overrides: (ours, Waitress's), and the signature both must have.
OVERRIDES = [
    (EnvelopeChannel, HTTPChannel, "_flush_some", [("self", inspect.Parameter.empty), ("do_close", True)]),
    (EnvelopeChannel, HTTPChannel, "received", [("self", inspect.Parameter.empty), ("data", inspect.Parameter.empty)]),
    (EnvelopeChannel, HTTPChannel, "writable", [("self", inspect.Parameter.empty)]),
    (CountingParser, HTTPRequestParser, "parse_header",
     [("self", inspect.Parameter.empty), ("header_plus", inspect.Parameter.empty)]),
    (CountingTask, WSGITask, "get_environment", [("self", inspect.Parameter.empty)]),
    (EnvelopeErrorTask, ErrorTask, "execute", [("self", inspect.Parameter.empty)]),
    (Lane, ThreadedTaskDispatcher, "start_new_thread",
     [("self", inspect.Parameter.empty), ("target", inspect.Parameter.empty), ("thread_no", inspect.Parameter.empty)]),
    (DrainingDispatcher, ThreadedTaskDispatcher, "add_task",
     [("self", inspect.Parameter.empty), ("task", inspect.Parameter.empty)]),
    (DrainingDispatcher, ThreadedTaskDispatcher, "shutdown",
     [("self", inspect.Parameter.empty), ("cancel_pending", True), ("timeout", 5)]),
]


@pytest.mark.parametrize("ours, theirs, name, expected", OVERRIDES,
                         ids=[f"{theirs.__name__}.{name}" for _, theirs, name, _ in OVERRIDES])
def test_each_overridden_method_exists_in_waitress_with_the_signature_the_override_has(ours, theirs, name, expected):
    assert name in vars(theirs), f"Waitress's {theirs.__name__} no longer defines {name}"
    assert parameters(getattr(theirs, name)) == expected
    assert parameters(getattr(ours, name)) == expected
    assert issubclass(ours, theirs)


# Each overridden method or replaced attribute is one Waitress itself calls: where, and how.
CALLED = [
    (HTTPChannel.handle_write, "flush = self._flush_some\n"),  # EnvelopeChannel._flush_some: the main loop's flush
    (HTTPChannel._flush_some_if_lockable, "self._flush_some(do_close=do_close)"),
    (HTTPChannel.received, "self.parser_class("),  # CountingParser is the request's parser
    (HTTPChannel.service, "self.task_class("),  # CountingTask serves it
    (HTTPChannel.service, "self.error_task_class("),  # EnvelopeErrorTask answers a refused one
    (HTTPRequestParser.received, "self.parse_header("),
    (WSGITask.execute, "self.get_environment()"),
    (ThreadedTaskDispatcher.set_thread_count, "self.start_new_thread("),
    (BaseWSGIServer.readable, "self.maintenance(now)"),  # the deadlines run in the maintenance round
    (BaseWSGIServer.handle_accept, "self.channel_class("),  # EnvelopeChannel is each connection's
    (BaseWSGIServer.add_task, "self.task_dispatcher.add_task(task)"),  # DrainingDispatcher.add_task picks the lane
    (HTTPChannel.received, "self.server.add_task(self)"),
]


@pytest.mark.parametrize("function, call", CALLED, ids=[f"{function.__qualname__}: {call}" for function, call in CALLED])
def test_waitress_still_calls_each_hook_where_the_adaptations_expect(function, call):
    assert call in inspect.getsource(function)


def test_create_server_still_takes_a_dispatcher_of_our_own():
    """`_dispatcher`, a private parameter of waitress.create_server, is the only way to give it the two lanes."""
    assert "_dispatcher" in inspect.signature(waitress.create_server).parameters
    assert "dispatcher" in inspect.signature(BaseWSGIServer.__init__).parameters
    assert "dispatcher" in inspect.signature(MultiSocketServer.__init__).parameters


def test_the_attributes_the_adaptations_read_exist_on_waitress_objects():
    adjustments = Adjustments()
    dispatcher = ThreadedTaskDispatcher()
    assert (dispatcher.lock, dispatcher.queue, dispatcher.active_count) is not None  # DrainingDispatcher.idle
    ours, theirs = socket.socketpair()
    try:
        server = waitress.create_server(app, host="127.0.0.1", port=0)
        try:
            channel = EnvelopeChannel(server, ours, ("127.0.0.1", 1), adjustments, map={})
            for name in ("outbuf_lock", "total_outbufs_len", "will_close", "close_when_flushed", "requests",
                         "request", "last_activity", "adj"):
                assert hasattr(channel, name), name  # EnvelopeChannel and the deadlines read each
            assert adjustments.outbuf_high_watermark and adjustments.channel_timeout
            assert isinstance(server.active_channels, dict) and server.adj is not None
            assert isinstance(server._map, dict) and server in server._map.values()  # a server's private socket map
        finally:
            server.close()
    finally:
        ours.close()
        theirs.close()
    parser = HTTPRequestParser(adjustments)
    assert (parser.headers_finished, parser.error) == (False, None)  # EnvelopeChannel.received reads the first
    parser.received(b"GET /workspace/keys HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (parser.headers_finished, parser.completed, parser.path) == (True, True, "/workspace/keys")  # the lane's
    for name in ("set_close_on_finish", "write"):  # EnvelopeErrorTask.execute writes its answer with them
        assert callable(getattr(Task, name)), name
    for name in ("status", "content_length"):
        assert hasattr(Task, name), name
    assert "self.response_headers = []" in inspect.getsource(Task.__init__)


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "127.0.0.1:0 127.0.0.1:0"], ids=["one socket", "several"])
def test_the_deadlines_and_the_drain_reach_every_listener_of_a_server(listen):
    """A server's listeners are in its private `_map`, a MultiSocketServer's in its public `map`."""
    server = waitress.create_server(app, listen=listen)
    try:
        channels = server.map if isinstance(server, MultiSocketServer) else server._map
        listeners = [item for item in channels.values() if isinstance(item, BaseWSGIServer)]
        assert len(listeners) == len(listen.split())
        enforce_head_deadline(server, 10)
        assert all(listener.maintenance.__name__ == "maintenance" and "listener" in
                   inspect.signature(listener.maintenance).parameters for listener in listeners)
        close_listeners(server)
        assert all(listener.socket is None or listener.socket.fileno() == -1 for listener in listeners)
    finally:
        server.close()


def test_the_flush_answers_whether_it_sent_as_the_override_reads_it():
    """EnvelopeChannel._flush_some notes the kernel's queue only when Waitress's flush says it sent."""
    ours, theirs = socket.socketpair()
    server = waitress.create_server(app, host="127.0.0.1", port=0)
    try:
        channel = EnvelopeChannel(server, ours, ("127.0.0.1", 1), server.adj, map={})
        assert channel._flush_some() is False  # nothing to send
        channel.outbufs[-1].append(b"answer")
        channel.total_outbufs_len = len(b"answer")
        assert channel._flush_some() is True and channel.total_outbufs_len == 0
        assert theirs.recv(100) == b"answer"
    finally:
        server.close()
        ours.close()
        theirs.close()


def test_closing_a_listener_alone_goes_through_wasyncore_and_keeps_the_trigger():
    """close_listeners calls wasyncore's close: the server's own closes the trigger that wakes the loop."""
    assert "self.trigger.close()" in inspect.getsource(BaseWSGIServer.close)
    assert "close" in vars(wasyncore.dispatcher)
