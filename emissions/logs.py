"""Log lines: one JSON object per line, each with "time" (RFC 3339, UTC, milliseconds) and "level".

A record's structured fields travel in `extra={"fields": {...}}` and become members of its line;
a record without them carries its text as "message". A serving process hands its records to a
QueueHandler, and a QueueListener thread formats and writes them, so a request never waits on stderr.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
import queue
import sys
import time

from .models import isoformat


def moment(created: float) -> str:
    """A record's time as RFC 3339 in UTC with milliseconds: 2026-11-25T10:52:15.538Z."""
    return isoformat(dt.datetime.fromtimestamp(created, dt.timezone.utc))


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: time, level, logger, then its fields or its message."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": moment(record.created), "level": record.levelname.lower(), "logger": record.name}
        fields = getattr(record, "fields", None)
        if fields is not None:
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line)


class OncePerInterval(logging.Filter):
    """Lets one record through per `interval` seconds and says how many it held back since the last.

    For Waitress's "Task queue depth is N" warning, which it logs for every request that waits for
    a free thread: a busy server would bury every other line under it.
    """

    def __init__(self, interval: float = 10.0, clock=time.monotonic):
        super().__init__()
        self.interval = interval
        self.clock = clock
        self._next = float("-inf")
        self._held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = self.clock()
        if now < self._next:
            self._held += 1
            return False
        if self._held:
            record.msg = f"{record.getMessage()} ({self._held} more since the last one shown)"
            record.args = ()
        self._held = 0
        self._next = now + self.interval
        return True


class GatheringWriter(logging.StreamHandler):
    """A StreamHandler that gathers its lines and writes them with one write() when flushed.

    The stock handler flushes after every line, a system call each: gathered, a burst of lines costs one.
    """

    MOST = 1000  # lines gathered at most before they are written

    def __init__(self, stream=None):
        super().__init__(stream)
        self.gathered: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.add(self.format(record))
        except Exception:
            self.handleError(record)

    def add(self, line: str) -> None:
        """A line formatted already (an access line)."""
        with self.lock:
            self.gathered.append(line + self.terminator)
            if len(self.gathered) >= self.MOST:
                self.flush()

    def flush(self) -> None:
        with self.lock:
            text, self.gathered = "".join(self.gathered), []
            try:
                if text:
                    self.stream.write(text)
                super().flush()
            except Exception:  # a stream that fails (a closed pipe) loses these lines, never the listener
                self.handleError(logging.makeLogRecord({"msg": "%d log lines were not written",
                                                        "args": (text.count(self.terminator),)}))


class PollingListener(logging.handlers.QueueListener):
    """A QueueListener that looks at its queue every `interval` seconds rather than waiting on it.

    A thread waiting on the queue is woken by every record put there, and on waking takes the
    interpreter lock from the request threads: with an access line per request, a hand-over per
    request. Looking every tenth of a second, it writes what gathered meanwhile, with one write()
    (dequeue() and handle() are the methods the logging documentation names for overriding). Besides
    records, the queue carries access lines as their fields (access()).
    """

    interval = 0.1

    def __init__(self, lines: queue.SimpleQueue, writer: GatheringWriter):
        super().__init__(lines, writer)
        self.writer = writer

    def dequeue(self, block: bool):
        while True:
            try:
                return self.queue.get_nowait()
            except queue.Empty:
                if not block:
                    raise
                self.writer.flush()
                time.sleep(self.interval)

    def handle(self, record) -> None:
        try:
            if type(record) is tuple:  # (time, fields) of an access line
                created, fields = record
                self.writer.add(json.dumps({"time": moment(created), "level": "info", "logger": ACCESS, **fields},
                                           default=str))
            else:
                super().handle(record)
        except Exception:  # the listener's thread must go on: a line it cannot write is the only loss
            self.writer.handleError(logging.makeLogRecord({"msg": "a log line could not be written"}))

    def stop(self) -> None:
        global _access_queue
        _access_queue = None
        super().stop()
        self.writer.flush()


ACCESS = "emissions.access"
_access_log = logging.getLogger(ACCESS)
_access_queue: queue.SimpleQueue | None = None  # a serving process's, while its listener runs


def access(fields: dict) -> None:
    """Log one access line (logger emissions.access, level info) with these fields.

    In a serving process the line goes on the listener's queue as its fields, without the
    LogRecord a logger call builds; elsewhere it is a record like
    any other. Either way the logger's level decides whether it is written.
    """
    if not _access_log.isEnabledFor(logging.INFO):
        return
    if _access_queue is not None:
        _access_queue.put((time.time(), fields))
    else:
        _access_log.info("request", extra={"fields": fields})


class RecordQueue(logging.handlers.QueueHandler):
    """A QueueHandler handing each record over as it is: the listener's thread formats it, once
    every tenth of a second for all that gathered, rather than the request's thread, with a copy
    (prepare() is the method the logging documentation names for this)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def configure(queued: bool = False, stream=None) -> PollingListener | None:
    """Every record of this process as a JSON line on stderr: the service's own from INFO, others'
    (Waitress, APScheduler) from WARNING. With `queued`, written by a QueueListener, returned started:
    stop() it to write what is still queued."""
    # No line carries the caller's file, thread or process: the logging HOWTO's "Optimization"
    # switches spare every record a frame walk and a getpid() call.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    global _access_queue
    writer = (GatheringWriter if queued else logging.StreamHandler)(stream or sys.stderr)
    listener = _access_queue = None
    writer.setFormatter(JsonFormatter())
    if queued:
        lines: queue.SimpleQueue = queue.SimpleQueue()
        listener = PollingListener(lines, writer)
        handler: logging.Handler = RecordQueue(lines)
        _access_queue = lines
    else:
        handler = writer
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("emissions").setLevel(logging.INFO)
    queue_depth = logging.getLogger("waitress.queue")
    if not any(isinstance(existing, OncePerInterval) for existing in queue_depth.filters):
        queue_depth.addFilter(OncePerInterval())
    if listener is not None:
        listener.start()
    return listener
