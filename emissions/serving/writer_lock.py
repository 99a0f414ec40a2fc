"""The writer lock: every serving process's SQLite write transactions queue on one file lock."""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
import time

import peewee as pw

from ..db import SharedWriterDatabase


class WriterLock:
    """An exclusive flock() of `<database>-writers.lock`, which each write transaction of a process
    sharing it takes first (db.SharedWriterDatabase.begin).

    A process running the WalCheckpointer (every serving process, each worker of `serve --workers N`
    too) queues its write transactions on the file beside the database, and the checkpointer holds
    them off with the same lock for its short catch-up. Between processes, SQLite's busy handler
    makes a writer sleep and retry, a little longer each time, so a worker that met another's
    transaction idles on after it ended; the lock is taken again the moment it is free. A flock
    belongs to an open file, so each holder locks through a descriptor of its own, taken from the
    ones this lock opened and given back after. The kernel drops the lock of a process that dies.
    """

    SPIN_SECONDS = 0.001  # so that a writer spins through another's short transaction instead of sleeping past its end
    POLL_SECONDS = 0.001
    WAIT_SECONDS = 10.0  # as long as SQLite's busy handler waits (busy_timeout)

    def __init__(self, path: str, descriptor: int):
        self.path = path
        self._holding = threading.local()  # the descriptor this thread holds the lock through
        self._free: list[int] = [descriptor]  # descriptors open on the lock file that nobody holds it through

    @contextlib.contextmanager
    def held(self):
        """No write transaction of a process sharing the lock begins while the block runs (a
        statement outside a transaction still may)."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    def hold(self) -> None:
        """Take the lock. While another holds it, try again: for SPIN_SECONDS giving up only the
        CPU and the GIL between tries (a writer asleep runs again only once its CPU is woken and
        scheduled, which on a virtual machine can take about as long as the other's whole
        transaction), then every POLL_SECONDS, until WAIT_SECONDS have passed: then, as SQLite's
        busy handler would, OperationalError "database is locked" (outages.py: a 503)."""
        if getattr(self._holding, "descriptor", None) is not None:
            raise RuntimeError("this thread already holds the writer lock")
        try:
            descriptor = self._free.pop()
        except IndexError:
            descriptor = open_lock(self.path)
        try:
            self._take(descriptor)
        except BaseException:
            self._free.append(descriptor)
            raise
        self._holding.descriptor = descriptor

    def _take(self, descriptor: int) -> None:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited > self.WAIT_SECONDS:
                    locked = sqlite3.OperationalError(
                        f"database is locked (another writer held the writer lock for {self.WAIT_SECONDS:g} s)")
                    raise pw.OperationalError(locked) from locked  # as Peewee wraps SQLite's own
                if waited < self.SPIN_SECONDS:
                    os.sched_yield()
                else:
                    time.sleep(self.POLL_SECONDS)

    def release(self) -> None:
        """Let the lock go, if this thread holds it."""
        descriptor = getattr(self._holding, "descriptor", None)
        if descriptor is not None:
            self._holding.descriptor = None
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            self._free.append(descriptor)


def open_lock(lock_path: str) -> int:
    """A descriptor of the writer lock file (created private), not inherited by a child process."""
    return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def share_writer_lock(database) -> WriterLock | None:
    """Make this process's SQLite write transactions queue on `<database>-writers.lock`
    (WalCheckpointer.start does; nothing to do on PostgreSQL or in memory). A lock file that cannot
    be opened is logged, and the writers go on without it, as SQLite alone would have them."""
    path = database.database if isinstance(database, SharedWriterDatabase) else ""
    if not path or path == ":memory:" or path.startswith("file:") or database.writer_lock is not None:
        return getattr(database, "writer_lock", None)
    lock_path = f"{path}-writers.lock"
    try:
        descriptor = open_lock(lock_path)
    except OSError as error:
        logging.getLogger("emissions.error").warning(
            "the writer lock %s cannot be opened (%s): writers wait in SQLite's busy handler instead, "
            "and the WAL checkpoint cannot hold them for its catch-up", lock_path, error.strerror or error)
        return None
    database.writer_lock = WriterLock(lock_path, descriptor)
    return database.writer_lock


@contextlib.contextmanager
def writers_held(database):
    """The database's writer lock held for the block; nothing without one."""
    lock = getattr(database, "writer_lock", None)
    if lock is None:
        yield
        return
    with lock.held():
        yield
